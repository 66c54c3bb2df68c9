#!/bin/bash
# A fragmented node and what today's allocators get on it (issue 48):
# tests/guest/fragment.c in a plain suite VM, one boot per kernel.
#
#   tests/vm/bench-frag.sh [KERNEL ...]     (default: 6.12 sid)
#
# Builds the modules for each kernel (tests/vm/build-module.sh, cached),
# boots it (tests/vm/run-vm.sh; 2 GiB in two nodes of 1 GiB unless
# STRIXPEER_VM_MEM says otherwise), loads strixpeer and runs
# build/tests/fragment $SP_FRAG_ARGS (default "-n 1": node 1, which holds
# no kernel image; SP_FRAG_ARGS="-n 1 -k sp,sp-huge,thp,shm,shm-huge" adds
# the module's allocator=shmem). Results in build/bench-frag/<kernel>/: fragment.txt
# (the table), fragment.json (one object per allocation), console.log.
# Numbers are qemu TCG figures of one run: only the shares and the ratios
# within one run mean anything (docs/performance.md).
#
# Inside the VM (run-vm.sh calls it so): bench-frag.sh --guest <strixpeer.ko>
set -u
cd "$(dirname "$0")/../.." || exit 1
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

if [ "${1:-}" = --guest ]; then
	out=${SP_OUT:?}
	modprobe drm 2> /dev/null
	insmod "$2" || { echo "bench-frag: insmod $2 failed"; exit 1; }
	# shellcheck disable=SC2086 # options word-split on purpose
	timeout 1500 build/tests/fragment ${SP_FRAG_ARGS:--n 1} -j "$out/fragment.json" \
		> "$out/fragment.txt" 2> "$out/fragment.err"
	rc=$?
	[ $rc -eq 124 ] && echo "bench-frag: fragment did not finish in 1500 s" >> "$out/fragment.txt"
	rmmod strixpeer || { echo "bench-frag: rmmod strixpeer failed"; rc=1; }
	exit $rc
fi

want=${*:-6.12 sid}
rc=0
make -s build/tests/fragment || { echo "bench-frag: build of build/tests/fragment failed"; exit 1; }
for name in $want; do
	kver=$(tests/vm/kernels.sh list | awk -v n="$name" '$1 == n { print $2 }')
	if [ -z "$kver" ]; then
		echo "bench-frag: no kernel named '$name' (tests/vm/kernels.sh fetch $name first)"
		rc=1
		continue
	fi
	out=$PWD/build/bench-frag/$name
	rm -rf "$out"
	mkdir -p "$out"
	# W=1 as make check-one builds: the same cached build serves both
	if ! tests/vm/build-module.sh "$kver" W=1 > "$out/build.log" 2>&1; then
		echo "bench-frag: $name: module build failed (see $out/build.log)"
		rc=1
		continue
	fi
	t0=$(date +%s)
	tests/vm/run-vm.sh --quiet --timeout 1800 "$kver" "$out" -- \
		tests/vm/bench-frag.sh --guest "build/kmod/$kver/strixpeer.ko"
	vrc=$?
	echo "== bench-frag on $name ($kver): $(( $(date +%s) - t0 )) s, exit $vrc; results in $out"
	cat "$out/fragment.txt" 2> /dev/null
	[ $vrc -eq 0 ] || { rc=1; tail -n 5 "$out/fragment.err" 2> /dev/null; }
done
exit $rc
