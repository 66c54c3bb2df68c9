#!/bin/bash
# Runs inside the test VM: swaps Debian's rdma_rxe for the dma-buf-capable
# one prepared by tests/vm/build-rxe-dmabuf.sh, or back. Debian's stock
# RDMA stack (ib_core, ib_uverbs: no peer-memory core) stays loaded.
#
#   rxe-dmabuf.sh load <build/kmod/KVER/rxe-dmabuf>
#   rxe-dmabuf.sh unload
#
# load: takes rxe0/rxe1 down, unloads Debian's rdma_rxe, insmods the
# patched one (no depmod: over 9p under TCG it takes minutes), brings
# rxe0/rxe1 back on the veth pair, and bind-mounts the patched rxe
# provider over Debian's librxe-rdmav34.so (the guest's root is a tmpfs
# overlay: nothing of the host changes) so libibverbs registers dma-bufs.
# unload: the reverse; later programs see Debian's rxe and provider.
# Every step that fails says which.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
prov=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so

die() { echo "rxe-dmabuf.sh: $*" >&2; exit 1; }
# shellcheck source=tests/vm/rxe-links.sh
. "$(dirname "$0")/rxe-links.sh"

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
	[ -f "$RXE_DMABUF_PROVIDER" ] || die "no patched provider at $RXE_DMABUF_PROVIDER"
	[ -f "$prov" ] || die "no $prov (ibverbs-providers not installed?)"
	rxe_links_down || die "rxe links do not go away"
	rxe_out || die "Debian's rdma_rxe does not unload"
	modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel || die "rdma_rxe's dependencies do not load"
	insmod "$RXE_DMABUF_KO" || die "$RXE_DMABUF_KO does not load"
	rxe_links_up || die "rxe0/rxe1 do not come back"
	mountpoint -q "$prov" || mount --bind "$RXE_DMABUF_PROVIDER" "$prov" ||
		die "cannot bind $RXE_DMABUF_PROVIDER over $prov"
	echo "rxe-dmabuf.sh: loaded $RXE_DMABUF_KO, provider $RXE_DMABUF_PROVIDER"
	;;
unload)
	if mountpoint -q "$prov"; then umount "$prov" || die "cannot unmount $prov"; fi
	rxe_links_down || die "rxe links do not go away"
	rxe_out || die "the patched rdma_rxe does not unload"
	modprobe rdma_rxe || die "Debian's rdma_rxe does not load again"
	rxe_links_up || die "rxe0/rxe1 do not come back on Debian's rxe"
	echo "rxe-dmabuf.sh: Debian's rdma_rxe and provider are back"
	;;
*)
	die "usage: rxe-dmabuf.sh load <dir> | unload"
	;;
esac
