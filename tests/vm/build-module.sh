#!/bin/bash
# Builds strixpeer.ko for one of the VM kernels, in build/kmod/<kver>/ (a
# copy of the module sources, so several kernels never share objects).
#
#   build-module.sh <kver> [make args...]     e.g. W=1
#
# The build log is build/kmod/<kver>/build.log; exits non-zero on failure.
set -eu
cd "$(dirname "$0")/../.."
kver=$1
shift
kdir=$(tests/vm/kernels.sh kdir "$kver")
bdir=$PWD/build/kmod/$kver
rm -rf "$bdir"
mkdir -p "$bdir"
cp -r Kbuild VERSION kmod include "$bdir/"
make -C "$kdir" M="$bdir" "$@" modules > "$bdir/build.log" 2>&1
