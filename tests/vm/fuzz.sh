#!/bin/bash
# 'make fuzz': the fuzzer (tests/fuzz/) in a VM for FUZZ_SECONDS (default
# 600) with seed FUZZ_SEED (default: a random one, printed) and FUZZ_PHASES
# (default: root,user,fault-root,fault-user). Boots the debug kernel of
# ../shared/kernels/ (KASAN, lockdep, kmemleak, DMA-API debug, fault
# injection); without one, Debian's 6.12 (the kernel-side checks are then
# weaker: no KASAN, no lockdep, no kmemleak, no fault injection). The VM is
# set up as tests/vm/guest-suite.sh sets it up for the suite (Soft-RoCE,
# vgem, sp_peersim and strixpeer linked against it) and runs only its
# "fuzz" case. Prints the fuzzer's summary; output in build/fuzz/.
# Exits non-zero on any report, a guest failure or a kernel complaint.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=$PWD/build/fuzz
secs=${FUZZ_SECONDS:-600}
isecs=${secs%%.*}	# whole seconds for the timeouts (a phase's replay may be 22.5)
isecs=${isecs:-0}
rm -rf "$out"
mkdir -p "$out"
echo "fuzz: building the fuzzer and test programs"
make -s user > "$out/build-user.log" 2>&1 || { tail -n 20 "$out/build-user.log"; exit 1; }
echo "fuzz: fetching kernels (cached in ${STRIXPEER_CACHE:-$HOME/.cache/strixpeer})"
tests/vm/kernels.sh fetch > "$out/kernels.log" 2>&1 || { tail -n 20 "$out/kernels.log"; exit 1; }
kver=$(tests/vm/kernels.sh list | awk '$1 ~ /^debug-/ {print $2; exit}')
if [ -z "$kver" ]; then
	kver=$(tests/vm/kernels.sh list | awk '$1 == "6.12" {print $2}')
	echo "fuzz: no debug kernel in ../shared/kernels/: falling back to $kver" \
		"(no KASAN, lockdep, kmemleak or fault injection there: fewer kernel bugs show)"
fi
[ -n "$kver" ] || { echo "fuzz: no kernel to boot (tests/vm/kernels.sh list is empty)"; exit 1; }
echo "fuzz: building the modules for $kver"
tests/vm/build-module.sh "$kver" > "$out/build-module.log" 2>&1 ||
	{ tail -n 20 "$out/build-module.log"; exit 1; }
seed=${FUZZ_SEED:-}
[ -n "$seed" ] || seed=$(printf '%#x' "$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')")
echo "fuzz: seed $seed, $secs s on $kver${FUZZ_PHASES:+, phases $FUZZ_PHASES} (the VM adds 3-6 minutes)"
SP_FUZZ_SEEDS=$seed SP_FUZZ_SECONDS=$secs SP_FUZZ_PHASES=${FUZZ_PHASES:-} \
	tests/vm/run-vm.sh --quiet --timeout $((2 * isecs + 1200)) "$kver" "$out" -- \
	tests/vm/guest-suite.sh "$PWD/build/kmod/$kver/strixpeer.ko" fuzz > "$out/run-vm.txt" 2>&1
vrc=$?
echo "----------------------------------------------------------------------"
sed -n 's/^# //p' "$out/fuzz.tap" 2>/dev/null || echo "(no fuzzer output; see $out/console.log)"
echo "----------------------------------------------------------------------"
rc=0
grep -q '^not ok' "$out/fuzz.tap" "$out/guest.tap" 2>/dev/null && rc=1
grep -h '^not ok' "$out/guest.tap" 2>/dev/null | sed 's/^/fuzz: guest check failed: /'
case $vrc in
0) ;;
124) echo "fuzz: the VM timed out (see $out/console.log)"; rc=1 ;;
125) echo "fuzz: the guest crashed or gave no result (see $out/console.log)"; rc=1 ;;
*) rc=1 ;;
esac
# The same kernel-log check as make check's. "cacheline tracking ENOMEM,
# dma-debug disabled" is DMA-API debug giving up after an injected
# allocation failure in its own bookkeeping (the fuzzer's fault phases).
if grep -hE 'BUG:|WARNING:|Oops|KASAN|UBSAN|possible circular locking|possible recursive locking|unreferenced object|general protection|Call Trace|DMA-API' \
	"$out/console.log" "$out/dmesg.txt" 2>/dev/null |
	grep -vE 'DMA-API: (preallocated|debugging enabled|cacheline tracking ENOMEM)' > "$out/kernel-complaints.txt"; then
	echo "fuzz: kernel log not clean: $(head -n 1 "$out/kernel-complaints.txt") (all: $out/kernel-complaints.txt)"
	rc=1
fi
[ $rc -eq 0 ] && echo "fuzz: OK (seed $seed, $secs s)" ||
	echo "fuzz: FAILED (seed $seed; replay: make fuzz FUZZ_SEED=$seed FUZZ_SECONDS=$secs${FUZZ_PHASES:+ FUZZ_PHASES=$FUZZ_PHASES}; output in $out)"
exit $rc
