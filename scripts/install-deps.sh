#!/bin/sh
# Install the Debian/Ubuntu packages that building strixpeer, booting the
# test VM and running the test suite need (dkms ... man-db: 'make deb' and
# the provisioning tests, which install the packages inside the VM, whose
# root is this host's; patchelf and debian-archive-keyring: Debian sid's
# kernel and toolchain, tests/vm/sid-toolchain.sh; perftest and gnuplot-nox:
# make bench's calibration and plot). Idempotent: packages already
# present are not touched, and apt is not contacted when nothing is missing.
# lintian and cmake: tests/lintian-check.sh and tests/install-check.sh.
set -eu

PKGS="
build-essential
pkg-config
kmod
cpio
xz-utils
zstd
bc
dwarves
libelf-dev
busybox-static
qemu-system-x86
qemu-utils
iproute2
rdma-core
ibverbs-utils
ibverbs-providers
libibverbs-dev
librdmacm-dev
rdmacm-utils
libucx-dev
ucx-utils
openmpi-bin
libopenmpi-dev
libnl-3-dev
libnl-genl-3-dev
libkmod-dev
python3
python3-yaml
valgrind
dkms
dh-dkms
debhelper
dpkg-dev
patchelf
debian-archive-keyring
udev
systemd
adduser
passwd
util-linux
man-db
lintian
cmake
perftest
gnuplot-nox
"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
else
	SUDO=
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
