#!/bin/bash
# Builds the modules the VM suite loads for one of the VM kernels, each in
# its own copy of the sources so that builds never share objects:
#
#   build/kmod/<kver>/strixpeer.ko          as a Debian node builds it: no
#                                           peer-memory API in the kernel
#   build/kmod/<kver>/peersim/sp_peersim.ko the simulated PeerDirect core,
#                  .../peersim/sp_gpusim.ko and the moving GEM exporter
#                                           (tests/vm/build-peersim.sh)
#   build/kmod/<kver>/pd/strixpeer.ko       linked against sp_peersim's
#                                           Module.symvers, as against OFED's
#
#   build/kmod/<kver>/realcore/             the real PeerDirect stack
#                                           (tests/vm/build-realcore.sh)
#   build/kmod/<kver>/rxe-dmabuf/           the rxe with dma-buf MRs and its
#                                           provider (build-rxe-dmabuf.sh)
#
#   build-module.sh <kver> [make args...]     e.g. W=1
#   build-module.sh --strixpeer-only <kver> [make args...]
#                       build/kmod/<kver>/strixpeer.ko alone (make demo)
#
# Build logs: build.log in each directory; exits non-zero on any failure.
set -eu
cd "$(dirname "$0")/../.."
only=
if [ "${1:-}" = --strixpeer-only ]; then
	only=1
	shift
fi
kver=$1
shift
kdir=$(tests/vm/kernels.sh kdir "$kver")
bdir=$PWD/build/kmod/$kver
rm -rf "$bdir"
mkdir -p "$bdir"

build_strixpeer() {	# build_strixpeer <dir> [make args...]
	local dir=$1
	shift
	mkdir -p "$dir"
	cp -r Kbuild VERSION kmod include "$dir/"
	make -C "$kdir" M="$dir" "$@" modules > "$dir/build.log" 2>&1
}

build_strixpeer "$bdir" "$@"
[ -z "$only" ] || exit 0
tests/vm/build-peersim.sh "$kver" "$@"
build_strixpeer "$bdir/pd" "$@" SP_PEER_SYMVERS="$bdir/peersim/Module.symvers"
tests/vm/build-realcore.sh "$kver" "$@"	# the real core (Debian 6.12 kernels; else says why not)
# dma-buf MRs on rxe (Debian 6.12; else says why not). A build that fails
# leaves its reason in build/kmod/<kver>/rxe-dmabuf/failed, and the guest's
# rdma_dmabuf group fails with it: the other groups still run.
tests/vm/build-rxe-dmabuf.sh "$kver" "$@" ||
	echo "build-module.sh: the dma-buf rxe was not built for $kver: $(cat "$bdir/rxe-dmabuf/failed" 2> /dev/null)" >&2
