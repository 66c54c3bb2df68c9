#!/bin/bash
# 'make check-one KERNEL=<name> [TEST="<name ...>"] [CASES="<case ...>"]':
# a part of the VM suite on one kernel, straight to the VM - no host checks,
# no other kernel. Fetches that kernel (once; cached like make check's),
# builds the modules for it with W=1 and the user-space programs, boots it
# and runs tests/vm/guest-suite.sh with the named rows of tests/vm/suite.tab
# (a row's name, or the part of it before a '-': abi, peer, rdma_dmabuf,
# engines, asan-abi, ...; a named row runs on any kernel unless its kernels
# column ends in '!'); without TEST, every row make check runs on that
# kernel. KERNEL is a name as 'tests/vm/kernels.sh list' prints it (6.1,
# 6.12, sid, debug-<kver>; default 6.12); CASES runs only those cases of
# each program (SP_CASES). Prints the plan, each program's TAP file and
# one line "N passed, N failed, N skipped"; exits non-zero on a failure.
# Results in build/check-one/<kernel>/.
set -u
cd "$(dirname "$0")/.." || exit 1
name=${KERNEL:-6.12}
read -r -a progs <<< "${TEST:-}"
# a name no row has is an error before anything is fetched or booted
tests/vm/guest-suite.sh --plan "$name" /nonexistent/strixpeer.ko ${progs[@]+"${progs[@]}"} > /dev/null || exit 2
case $name in
debug-*) fetch=debug ;;
*) fetch=$name ;;
esac
out=$PWD/build/check-one/$name
rm -rf "$out"
mkdir -p "$out"
t0=$(date +%s)

if ! tests/vm/kernels.sh fetch "$fetch" > "$out/kernels.log" 2>&1; then
	echo "check-one: fetching kernel $name failed (see $out/kernels.log):" >&2
	tail -n 5 "$out/kernels.log" >&2
	exit 1
fi
kver=$(tests/vm/kernels.sh list | awk -v n="$name" '$1 == n { print $2 }')
if [ -z "$kver" ]; then
	echo "check-one: no kernel named '$name'; there are: $(tests/vm/kernels.sh list | awk '{ printf "%s ", $1 }')" >&2
	exit 2
fi
if ! make -s user examples > "$out/build-user.log" 2>&1; then
	echo "check-one: the user-space build failed (see $out/build-user.log):" >&2
	tail -n 20 "$out/build-user.log" >&2
	exit 1
fi
if ! tests/vm/build-module.sh "$kver" W=1 > "$out/build-module.log" 2>&1; then
	echo "check-one: the module build for $kver failed (see $out/build-module.log and build/kmod/$kver/*/build.log):" >&2
	tail -n 20 "$out/build-module.log" >&2
	exit 1
fi
# promtool checks strixpeerctl's Prometheus output in the VM, as in make check
SP_PROMTOOL=$(tests/host/fetch-promtool.sh) || SP_PROMTOOL=
export SP_PROMTOOL
t1=$(date +%s)
tests/vm/guest-suite.sh --plan "$kver" "$PWD/build/kmod/$kver/strixpeer.ko" \
	${progs[@]+"${progs[@]}"} > "$out/plan.txt"
echo "== plan on $name ($kver): $(awk '$1 == "run" { printf "%s ", $2 }' "$out/plan.txt")"
[ -z "${CASES:-}" ] || export SP_CASES=$CASES
tests/vm/run-vm.sh --quiet --timeout "${SP_VM_TIMEOUT:-2400}" "$kver" "$out" -- \
	tests/vm/guest-suite.sh "$PWD/build/kmod/$kver/strixpeer.ko" ${progs[@]+"${progs[@]}"} > "$out/run-vm.txt" 2>&1
vrc=$?
t2=$(date +%s)

pass=0 fail=0 skip=0
for tap in "$out"/*.tap; do
	[ -e "$tap" ] || continue
	echo "== $(basename "$tap" .tap)"
	cat "$tap"
	ok=$(grep -Ec '^ok [0-9]+ ' "$tap")
	sk=$(grep -Ec '^ok [0-9]+ .*# SKIP' "$tap")
	nok=$(grep -Ec '^not ok [0-9]+ ' "$tap")
	pass=$((pass + ok - sk))
	skip=$((skip + sk))
	fail=$((fail + nok))
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$tap" | head -n 1)
	if [ -z "$planned" ] || [ $((ok + nok)) -lt "$planned" ]; then
		echo "check-one: $(basename "$tap" .tap) stopped after $((ok + nok)) of ${planned:-?} cases"
		fail=$((fail + 1))
	fi
done
case $vrc in
0 | 1) ;;
124) echo "check-one: the VM timed out (see $out/console.log)"; fail=$((fail + 1)) ;;
*) echo "check-one: the VM gave no result, exit $vrc (see $out/console.log)"; fail=$((fail + 1)) ;;
esac
if tests/vm/kernel-complaints.sh "$out/console.log" "$out/dmesg.txt" > "$out/kernel-complaints.txt"; then
	echo "check-one: the kernel complained: $(head -n 1 "$out/kernel-complaints.txt")"
	fail=$((fail + 1))
fi
echo "== $name ($kver): builds $((t1 - t0)) s, VM $((t2 - t1)) s; logs in $out"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
