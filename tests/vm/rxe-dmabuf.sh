#!/bin/bash
# Runs inside the test VM: swaps Debian's rdma_rxe for the dma-buf-capable
# one prepared by tests/vm/build-rxe-dmabuf.sh, and Debian's verbs user
# space for the one built with it, or back. Debian's stock RDMA stack
# (ib_core, ib_uverbs: no peer-memory core) stays loaded.
#
#   rxe-dmabuf.sh load <build/kmod/KVER/rxe-dmabuf>
#   rxe-dmabuf.sh unload
#
# load: takes rxe0/rxe1 down, unloads Debian's rdma_rxe, insmods the
# patched one (no depmod: over 9p under TCG it takes minutes), brings
# rxe0/rxe1 back on the veth pair, and binds rdma-core 56.1's libibverbs
# over Debian's libibverbs.so.1 (its real file), a directory holding only
# 56.1's patched rxe provider over Debian's provider directory, and one
# holding only its rxe.driver over /etc/libibverbs.d, so that every
# program - the test programs, the preload, perftest - registers dma-bufs
# through one consistent libibverbs and provider (the guest's root is a
# tmpfs overlay: nothing of the host changes). unload: the reverse; later
# programs see Debian's rxe, libibverbs and providers. Every step that
# fails says which.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
lib=/usr/lib/x86_64-linux-gnu/libibverbs.so.1
provdir=/usr/lib/x86_64-linux-gnu/libibverbs
confdir=/etc/libibverbs.d

die() { echo "rxe-dmabuf.sh: $*" >&2; exit 1; }
# shellcheck source=tests/vm/rxe-links.sh
. "$(dirname "$0")/rxe-links.sh"

bind() {	# bind <what> <over>: once
	mountpoint -q "$2" || mount --bind "$1" "$2" || die "cannot bind $1 over $2"
}

rxe_out() {
	[ -d /sys/module/rdma_rxe ] || return 0
	rmmod rdma_rxe || { echo "rxe-dmabuf.sh: rdma_rxe does not unload:" >&2; lsmod >&2; return 1; }
}

case ${1:-} in
load)
	dir=$2
	[ -f "$dir/env" ] || die "$dir/env missing (tests/vm/build-rxe-dmabuf.sh not run?)"
	# shellcheck disable=SC1091 # written by build-rxe-dmabuf.sh
	. "$dir/env"
	[ -f "$RXE_DMABUF_KO" ] || die "no patched rxe at $RXE_DMABUF_KO"
	[ -f "$RXE_DMABUF_LIBIBVERBS" ] || die "no libibverbs at $RXE_DMABUF_LIBIBVERBS"
	[ -f "$RXE_DMABUF_PROVIDERS/librxe-rdmav34.so" ] || die "no patched provider in $RXE_DMABUF_PROVIDERS"
	[ -f "$RXE_DMABUF_DRIVERS/rxe.driver" ] || die "no rxe.driver in $RXE_DMABUF_DRIVERS"
	real=$(readlink -f "$lib") && [ -f "$real" ] || die "no $lib (libibverbs1 not installed?)"
	[ -d "$provdir" ] || die "no $provdir (ibverbs-providers not installed?)"
	rxe_links_down || die "rxe links do not go away"
	rxe_out || die "Debian's rdma_rxe does not unload"
	modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel || die "rdma_rxe's dependencies do not load"
	insmod "$RXE_DMABUF_KO" || die "$RXE_DMABUF_KO does not load"
	rxe_links_up || die "rxe0/rxe1 do not come back"
	bind "$RXE_DMABUF_LIBIBVERBS" "$real"
	bind "$RXE_DMABUF_PROVIDERS" "$provdir"
	bind "$RXE_DMABUF_DRIVERS" "$confdir"
	# the swapped user space finds both ports (bookworm's ibv_devices on it)
	devs=$(ibv_devices 2>&1) || die "ibv_devices fails on the swapped libibverbs: $devs"
	for d in rxe0 rxe1; do
		grep -qw "$d" <<< "$devs" || die "ibv_devices on the swapped libibverbs lists no $d: $devs"
	done
	echo "rxe-dmabuf.sh: loaded $RXE_DMABUF_KO; rdma-core ${RXE_DMABUF_RDMA_CORE:-?}'s libibverbs and rxe provider over Debian's"
	;;
unload)
	real=$(readlink -f "$lib")
	for m in "$real" "$provdir" "$confdir"; do
		if mountpoint -q "$m"; then umount "$m" || die "cannot unmount $m"; fi
	done
	rxe_links_down || die "rxe links do not go away"
	rxe_out || die "the patched rdma_rxe does not unload"
	modprobe rdma_rxe || die "Debian's rdma_rxe does not load again"
	rxe_links_up || die "rxe0/rxe1 do not come back on Debian's rxe"
	echo "rxe-dmabuf.sh: Debian's rdma_rxe, libibverbs and providers are back"
	;;
*)
	die "usage: rxe-dmabuf.sh load <dir> | unload"
	;;
esac
