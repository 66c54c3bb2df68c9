#!/bin/bash
# 'make demo': boot Debian's 6.12 kernel under qemu, load strixpeer, create
# two Soft-RoCE nodes, RDMA-WRITE into a strixpeer buffer, show the result.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=build/demo
mkdir -p "$out"
echo "demo: building the library, CLI and test programs"
make -s user || exit 1
echo "demo: fetching Debian's 6.12 kernel (cached in ${STRIXPEER_CACHE:-$HOME/.cache/strixpeer})"
tests/vm/kernels.sh fetch 6.12 > "$out/kernels.log" 2>&1 || { tail -n 20 "$out/kernels.log"; exit 1; }
kver=$(tests/vm/kernels.sh list | awk '$1 == "6.12" {print $2}')
[ -n "$kver" ] || { echo "demo: no 6.12 kernel available"; exit 1; }
echo "demo: building strixpeer.ko for $kver"
tests/vm/build-module.sh --strixpeer-only "$kver" || { tail -n 20 "build/kmod/$kver/build.log"; exit 1; }
echo "demo: booting $kver under qemu (software emulation, about a minute)"
tests/vm/run-vm.sh --quiet --timeout 900 "$kver" "$PWD/$out" -- \
	tests/vm/guest-demo.sh "$PWD/build/kmod/$kver/strixpeer.ko"
rc=$?
echo "----------------------------------------------------------------------"
cat "$out/demo.txt" 2>/dev/null || echo "(no output; console log: $out/console.log)"
echo "----------------------------------------------------------------------"
[ $rc -eq 0 ] && echo "demo: OK" || echo "demo: FAILED (exit $rc; console log: $out/console.log)"
exit $rc
