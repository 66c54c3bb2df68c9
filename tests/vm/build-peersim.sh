#!/bin/bash
# Builds the test modules of tests/kmod/ - sp_peersim.ko (the simulated
# PeerDirect core + HCA), sp_gpusim.ko (an amdgpu/TTM-like DRM exporter
# whose buffers move) and sp_kfdsim.ko (what amdgpu's KFD does with a user
# pointer) - for one of the VM kernels, in
# build/kmod/<kver>/peersim/ (a copy of the sources, so several kernels
# never share objects). Its Module.symvers is what strixpeer links against
# (KBUILD_EXTRA_SYMBOLS) to use the peer-memory API.
#
#   build-peersim.sh <kver> [make args...]     e.g. W=1
#
# The build log is build/kmod/<kver>/peersim/build.log; exits non-zero on
# failure.
set -eu
cd "$(dirname "$0")/../.."
kver=$1
shift
kdir=$(tests/vm/kernels.sh kdir "$kver")
bdir=$PWD/build/kmod/$kver/peersim
rm -rf "$bdir"
mkdir -p "$bdir"
cp tests/kmod/Kbuild tests/kmod/conftest.sh tests/kmod/*.c tests/kmod/*.h "$bdir/"
cp kmod/conftest.sh "$bdir/kmod-conftest.sh"	# its probe()
if ! make -C "$kdir" M="$bdir" "$@" modules > "$bdir/build.log" 2>&1; then
	echo "build-peersim.sh: build for $kver failed, see $bdir/build.log" >&2
	tail -n 20 "$bdir/build.log" >&2
	exit 1
fi
