#!/bin/bash
# Builds sp_amdkfd_stub.ko (tests/kmod/amdkfd_stub/: the stand-in for
# ROCm's "amdkfd" peer-memory client that tests/guest/peer-names-guest.sh loads)
# for one of the VM kernels, with W=1, in build/amdkfd-stub/<kver>/.
#
#   build-amdkfd-stub.sh <kver>
#
# The stub links against sp_peersim's two exports. It is built in one
# kbuild run together with a copy of sp_peersim (tests/kmod/), so that it
# needs nothing from build/kmod/<kver>/, which tests/vm/build-module.sh
# rebuilds from scratch: the symbol CRCs come from the same sources and
# kernel, so the stub loads against that build of sp_peersim too. Natively
# this takes seconds; tests/guest/peer-names-guest.sh builds the stub in the VM
# itself (a minute or more under emulation) when this has not run.
# Exits non-zero on a failed build or any compiler warning.
set -eu
cd "$(dirname "$0")/../.."
kver=$1
kdir=$(tests/vm/kernels.sh kdir "$kver")
bdir=$PWD/build/amdkfd-stub/$kver
rm -rf "$bdir"
mkdir -p "$bdir"
cp tests/kmod/Kbuild tests/kmod/conftest.sh tests/kmod/*.c tests/kmod/*.h \
	tests/kmod/amdkfd_stub/*.c "$bdir/"
cp kmod/conftest.sh "$bdir/kmod-conftest.sh"	# the probe() tests/kmod/conftest.sh uses
echo 'obj-m += sp_amdkfd_stub.o' >> "$bdir/Kbuild"
if ! make -C "$kdir" M="$bdir" W=1 modules \
	> "$bdir/build.log" 2>&1 || ! [ -f "$bdir/sp_amdkfd_stub.ko" ]; then
	echo "build-amdkfd-stub.sh: build for $kver failed, see $bdir/build.log" >&2
	tail -n 20 "$bdir/build.log" >&2
	exit 1
fi
if grep -E 'warning:' "$bdir/build.log" >&2; then
	echo "build-amdkfd-stub.sh: warnings building for $kver ($bdir/build.log)" >&2
	exit 1
fi
