#!/bin/bash
# Runs inside the test VM (tests/vm/run-vm.sh), as root, cwd = repo root.
#
#   guest-suite.sh <strixpeer.ko> [test ...]
#
# Sets up two Soft-RoCE "nodes" on a veth pair, loads the module, runs each
# TAP test program from build/tests/ (all by default; asan-<t> runs the
# sanitizer build of <t>, cli the CLI checks) into $SP_OUT/<t>.tap,
# then checks the guest itself (module unload, kmemleak) into
# $SP_OUT/guest.tap. Exit status: 0 when every program passed.
set -u

ko=$1
shift
tests=("$@")
explicit=${tests[*]}
[ ${#tests[@]} -gt 0 ] || tests=(abi lifetime limits backing netlink rdma_rxe cli asan-abi asan-lifetime asan-limits asan-netlink)
out=${SP_OUT:?SP_OUT not set}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

gtap=()
gcase() {	# gcase <ok|not ok> <name> [# SKIP reason]
	gtap+=("$1 $((${#gtap[@]} + 1)) $2${3:+ $3}")
}

if tests/vm/rxe-setup.sh > "$out/rxe-setup.log" 2>&1; then
	gcase ok "soft_roce_two_nodes"
else
	gcase "not ok" "soft_roce_two_nodes"
fi

if insmod "$ko" 2> "$out/insmod.log"; then
	gcase ok "module_loads"
else
	gcase "not ok" "module_loads"
fi
udevadm settle 2>/dev/null || sleep 1

# Debug kernels (kmemleak, KASAN, lockdep) run everything several times
# slower: keep RDMA transfers there to 4 MiB + 1 (6.1 and 6.12 run the full
# 64 MiB), and leave the checks of user-space code alone (the CLI under
# valgrind, the ASan builds), which 6.1 and 6.12 run; the kernel-facing
# programs all run.
debug_kernel=
if [ -e /sys/kernel/debug/kmemleak ]; then
	debug_kernel=1
	[ -n "${SP_RDMA_MAX:-}" ] || export SP_RDMA_MAX=$((4 * 1024 * 1024 + 1))
fi

rc=0
for t in "${tests[@]}"; do
	if [ -n "$debug_kernel" ] && [ -z "$explicit" ] && { [ "$t" = cli ] || [ "${t#asan-}" != "$t" ]; }; then
		gcase ok "$t" "# SKIP user-space check: runs on the non-debug kernels"
		continue
	fi
	start=$(date +%s)
	case $t in
	cli) tests/cli-guest.sh > "$out/$t.tap" 2>&1 ;;
	asan-*)	# the same program built with ASan+UBSan (make user)
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
			timeout 1500 "build/asan/${t#asan-}" > "$out/$t.tap" 2>&1 ;;
	*) timeout 1500 "build/tests/$t" > "$out/$t.tap" 2>&1 ;;
	esac
	r=$?
	echo "$t: exit $r, $(( $(date +%s) - start )) s" | tee -a "$out/timing.txt"
	case $r in 0|4) ;; *) rc=1 ;; esac
done

# Everything was released: the module unloads, and kmemleak finds nothing.
if rmmod strixpeer 2> "$out/rmmod.log"; then
	gcase ok "module_unloads_after_suite"
else
	gcase "not ok" "module_unloads_after_suite"
	rc=1
fi
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan > /sys/kernel/debug/kmemleak
	sleep 5
	echo scan > /sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak > "$out/kmemleak.txt"
	if grep -q 'unreferenced object' "$out/kmemleak.txt"; then
		gcase "not ok" "kmemleak_clean"
		rc=1
	else
		gcase ok "kmemleak_clean"
	fi
else
	gcase ok "kmemleak_clean" "# SKIP kernel without CONFIG_DEBUG_KMEMLEAK"
fi

{
	echo "TAP version 13"
	echo "1..${#gtap[@]}"
	printf '%s\n' "${gtap[@]}"
} > "$out/guest.tap"
exit $rc
