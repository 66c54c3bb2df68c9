#!/bin/sh
# Install the packages that building strixpeer needs, for the distribution
# /etc/os-release names (SP_OS_RELEASE: another file, for the tests).
# SP_DEPS_DRY_RUN=1 prints the install command instead of running it.
#
# Fedora (and RHEL-like, ID_LIKE=fedora): what building the module, the
# library and the CLI, 'make install', 'make dkms-install' and 'make rpm'
# need. 'make check', 'make demo' and 'make bench' boot Debian's kernels
# in a VM with Debian's packages and need a Debian or Ubuntu host.
#
# Debian and Ubuntu: the packages that building strixpeer, booting the
# test VM and running the test suite need (dkms ... man-db: 'make deb' and
# the provisioning tests, which install the packages inside the VM, whose
# root is this host's; patchelf and debian-archive-keyring: Debian sid's
# kernel and toolchain, tests/vm/sid-toolchain.sh; perftest and gnuplot-nox:
# make bench's calibration and plot; libvulkan-dev: examples/vulkan_import.c,
# compile-checked by make examples). Idempotent: packages already
# present are not touched, and apt is not contacted when nothing is missing.
# lintian and cmake: tests/host/lintian-check.sh and tests/host/install-check.sh;
# rpm and rpmlint: tests/host/rpm-check.sh ('make rpm' on a Debian host).
# cmake, ninja-build and libnl-route-3-dev also build rdma-core's libibverbs
# and rxe provider for the dma-buf rxe (tests/vm/build-rxe-dmabuf.sh).
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
libvulkan-dev
libnl-3-dev
libnl-genl-3-dev
libkmod-dev
zlib1g-dev
python3
python3-yaml
python3-jsonschema
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
rpm
rpmlint
cmake
ninja-build
libnl-route-3-dev
perftest
gnuplot-nox
"

os_release=${SP_OS_RELEASE:-/etc/os-release}
id=$(. "$os_release" 2>/dev/null && echo "${ID:-} ${ID_LIKE:-}")

if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
else
	SUDO=
fi

run() {	# run <command...>: or print it (SP_DEPS_DRY_RUN=1)
	if [ "${SP_DEPS_DRY_RUN:-}" = 1 ]; then
		echo "$*"
	else
		# shellcheck disable=SC2068 # word splitting wanted
		$@
	fi
}

case " $id " in
*" fedora "* | *" rhel "* | *" centos "*)
	# kernel-devel for the running kernel: DKMS builds against it.
	FPKGS="gcc make pkgconf-pkg-config kmod kmod-devel zlib-devel libnl3-devel
rdma-core-devel rdma-core libibverbs-utils elfutils-libelf-devel
kernel-devel-$(uname -r) dkms rpm-build rpmlint python3 python3-pyyaml python3-jsonschema
shadow-utils man-db"
	missing=""
	for p in $FPKGS; do
		rpm -q "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	[ -n "$missing" ] || exit 0
	echo "install-deps: installing:$missing"
	# shellcheck disable=SC2086
	run $SUDO dnf install -y $missing
	exit
	;;
*" debian "* | *" ubuntu "*) ;;
*)
	echo "install-deps: $(. "$os_release" 2>/dev/null && echo "${PRETTY_NAME:-$os_release}" || echo "$os_release: no os-release") is neither Debian/Ubuntu (apt) nor Fedora (dnf): install the packages listed in $0 by their names on your distribution" >&2
	exit 1
	;;
esac

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	exit 0
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
run $SUDO apt-get update -qq
# shellcheck disable=SC2086
run $SUDO apt-get install -y -qq --no-install-recommends $missing
