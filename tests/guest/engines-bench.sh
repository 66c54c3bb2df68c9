#!/bin/bash
# A benchmark, not a test: Open MPI ping-pong bandwidth and MPI_Allreduce
# time with strixpeer buffers against malloc buffers, side by side in one
# run (examples/mpi_allreduce.c), between the two Soft-RoCE "nodes" of a
# test VM, one rxe device per rank.
#
#   tests/guest/engines-bench.sh [KERNEL [MAXSIZE [ALLREDUCE [ITERS [AR_ITERS]]]]]
#
# KERNEL as 'tests/vm/kernels.sh list' names it (default 6.12); the rest
# are mpi_allreduce's arguments (default 16 MiB, 64 MiB, 20, 3). Builds
# what it needs, boots one VM and prints mpi_allreduce's table (also in
# build/bench/<KERNEL>/bench.txt). Under qemu's software emulation the
# absolute numbers are the emulator's: compare the ratios, within one run.
set -eu
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --guest ]; then	# inside the VM
	shift
	tests/vm/rxe-setup.sh > "$SP_OUT/rxe-setup.log" 2>&1
	modprobe drm	# strixpeer needs it (zero-change PeerDirect)
	insmod "build/kmod/$SP_KVER/strixpeer.ko"
	udevadm settle 2> /dev/null || sleep 1
	# shellcheck disable=SC2016 # expanded by each rank's shell
	mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl self,vader \
		-x UCX_UD_VERBS_ETH_DGID_CHECK=n -x UCX_TLS=rc,self \
		sh -c 'UCX_NET_DEVICES=rxe${OMPI_COMM_WORLD_RANK}:1 exec "$0" "$@"' \
		build/examples/mpi_allreduce "$@" > "$SP_OUT/bench.txt" 2>&1
	exit
fi
name=${1:-6.12}
args=("${2:-16777216}" "${3:-67108864}" "${4:-20}" "${5:-3}")
kver=$(tests/vm/kernels.sh list | awk -v n="$name" '$1 == n { print $2 }')
[ -n "$kver" ] || { echo "engines-bench.sh: no kernel '$name' (tests/vm/kernels.sh list)" >&2; exit 2; }
make -s user examples > /dev/null
[ -f "build/kmod/$kver/strixpeer.ko" ] || tests/vm/build-module.sh "$kver"
out=$PWD/build/bench/$name
mkdir -p "$out"
echo "engines-bench.sh: $name ($kver): mpi_allreduce ${args[*]}"
tests/vm/run-vm.sh --quiet --timeout 3600 "$kver" "$out" -- tests/guest/engines-bench.sh --guest "${args[@]}"
cat "$out/bench.txt"
