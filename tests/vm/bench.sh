#!/bin/bash
# 'make bench': strixpeerctl bench in the VM, one boot per kernel, with
# perftest's calibration run over the same Soft-RoCE link in the same boot
# (tests/vm/bench-guest.sh). Results per kernel in build/bench/<name>/:
# bench.json, bench.txt (the ratio table), bench.svg (bandwidth vs message
# size per memory kind), perftest/, calibration.{txt,json}, console.log,
# and on 6.12 realcore/ (the gpu-peerdirect kind under the real
# peer-memory core, beside malloc and THP, in a second run of that boot).
#
# Environment:
#   SP_BENCH_KERNELS  kernel names as 'kernels.sh list' prints them
#                     (default: "sid 6.12 6.1")
#   SP_BENCH_ARGS     strixpeerctl bench options for sid (the kernel that
#                     PMD-maps buffers): default a full run with 1 GiB buffers
#   SP_BENCH_ARGS_4K  the same for the other kernels (default: the host
#                     figures only, 1 GiB, and WRITE at 64 KiB - 8 MiB)
#   SP_BENCH_PERFTEST_REPEAT  perftest calibration runs (default 3; 0: none)
#   SP_BENCH_REALCORE  0 leaves out the second run under the real core
#   SP_BENCH_ALLOCATORS  one run per value of the module's allocator
#                     parameter ("pages shmem"), in the same boot, into
#                     build/bench/<name>/alloc-<value>/ (bench-guest.sh)
#   STRIXPEER_VM_MEM  VM memory in MiB (default 6144: two nodes of 3 GiB)
# Only ratios within one run mean anything under emulation.
set -u
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
export STRIXPEER_VM_MEM=${STRIXPEER_VM_MEM:-6144}
full="--events --size 1G --repeat 3 --min-msg 2 --max-msg 8M --iters 200 --max-bytes 8M --lat-iters 100"
small="--events --size 1G --repeat 3 --ops host,write --min-msg 64K --max-msg 8M --iters 200 --max-bytes 8M --lat-iters 50"
args_huge=${SP_BENCH_ARGS:-$full}
args_4k=${SP_BENCH_ARGS_4K:-$small}
want=${SP_BENCH_KERNELS:-sid 6.12 6.1}
rc=0

tests/vm/kernels.sh fetch > /dev/null || { echo "bench: kernels.sh fetch failed"; exit 1; }
while read -r name kver _; do
	[[ " $want " == *" $name "* ]] || continue
	out=$repo/build/bench/$name
	rm -rf "$out"
	mkdir -p "$out"
	# W=1 as make check-one builds: the same cached build serves both
	if ! tests/vm/build-module.sh "$kver" W=1 > "$out/build.log" 2>&1; then
		echo "bench: $name: module build failed (see $out/build.log)"
		rc=1
		continue
	fi
	args=$args_4k
	grep -q 'define STRIXPEER_HAVE_VMF_INSERT_FOLIO_PMD' \
		"build/kmod/$kver/kmod/conftest.h" && args=$args_huge
	echo "== bench on $name ($kver): strixpeerctl bench $args"
	t0=$(date +%s)
	# shellcheck disable=SC2086 # options word-split on purpose
	tests/vm/run-vm.sh --quiet --timeout 5400 "$kver" "$out" -- \
		tests/vm/bench-guest.sh "build/kmod/$kver/strixpeer.ko" $args
	vrc=$?
	echo "bench: $name: $(( $(date +%s) - t0 )) s, exit $vrc; results in $out"
	[ -f "$out/bench.txt" ] && cat "$out/bench.txt" && cat "$out/calibration.txt" 2> /dev/null
	for a in ${SP_BENCH_ALLOCATORS:-}; do
		[ ! -f "$out/alloc-$a/bench.txt" ] || { echo "== $name, allocator=$a"; cat "$out/alloc-$a/bench.txt"; }
	done
	[ ! -f "$out/realcore/bench.txt" ] || { echo "== $name, under the real peer-memory core"; cat "$out/realcore/bench.txt"; }
	[ $vrc -eq 0 ] || rc=1
done < <(tests/vm/kernels.sh list)
exit $rc
