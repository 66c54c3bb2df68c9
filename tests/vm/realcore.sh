#!/bin/bash
# Runs inside the test VM: swaps Debian's RDMA stack for the real
# PeerDirect one prepared by tests/vm/build-realcore.sh, or back.
#
#   realcore.sh load <build/kmod/KVER/realcore> [strixpeer args...]
#   realcore.sh unload
#
# load: takes rxe0/rxe1 down, unloads Debian's RDMA modules, insmods the
# fixture's modules (OFED's peer-memory core in ib_uverbs) in its load
# order, the patched rdma_rxe in place of the fixture's (no depmod: over
# 9p under TCG it takes minutes), brings rxe0/rxe1 back on the veth pair,
# loads strixpeer built against the fixture's Module.symvers. Every step
# that fails says which.
# unload: the reverse; Debian's modules are what modprobe finds again.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
order="ib_core ib_cm iw_cm rdma_cm ib_uverbs rdma_ucm rdma_rxe"
stack="rdma_ucm ib_umad rdma_rxe siw ib_uverbs rdma_cm iw_cm ib_cm ib_core"

die() { echo "realcore.sh: $*" >&2; exit 1; }
# shellcheck source=tests/vm/rxe-links.sh
. "$(dirname "$0")/rxe-links.sh"

stack_out() {
	local m
	for m in $stack; do
		[ -d "/sys/module/$m" ] || continue
		modprobe -r "$m" || { echo "realcore.sh: $m does not unload:" >&2; lsmod >&2; return 1; }
	done
}

case ${1:-} in
load)
	dir=$2
	shift 2
	[ -f "$dir/env" ] || die "$dir/env missing (tests/vm/build-realcore.sh not run?)"
	# shellcheck disable=SC1091 # written by build-realcore.sh
	. "$dir/env"
	[ -f "$REALCORE_FIXTURE/ib_uverbs.ko" ] || die "no fixture at $REALCORE_FIXTURE"
	[ -f "$REALCORE_RXE" ] || die "no patched rxe at $REALCORE_RXE"
	rxe_links_down || die "rxe links do not go away"
	stack_out || die "Debian's RDMA stack does not unload"
	# what rdma_cm and rdma_rxe need; configfs (rdma_cm's configfs
	# interface) only where the kernel has it: the debug kernel does not
	deps="udp_tunnel ip6_udp_tunnel"
	grep -qw configfs /proc/filesystems || ! modinfo configfs > /dev/null 2>&1 ||
		deps="configfs $deps"
	# shellcheck disable=SC2086 # a list
	modprobe -a $deps || die "Debian's dependencies ($deps) do not load"
	for m in $order; do
		ko=$REALCORE_FIXTURE/$m.ko
		[ "$m" = rdma_rxe ] && ko=$REALCORE_RXE
		insmod "$ko" || die "$ko does not load"
	done
	grep -q ' ib_register_peer_memory_client	\[ib_uverbs\]' /proc/kallsyms ||
		die "ib_uverbs does not export the peer API"
	rxe_links_up || die "rxe0/rxe1 do not come back"
	insmod "$dir/pd/strixpeer.ko" "$@" || die "strixpeer (built against the fixture) does not load"
	echo "realcore.sh: real core loaded: $REALCORE_FIXTURE, rxe $REALCORE_RXE"
	;;
unload)
	if [ -d /sys/module/strixpeer ]; then rmmod strixpeer || die "strixpeer does not unload"; fi
	rxe_links_down || die "rxe links do not go away"
	stack_out || die "the real stack does not unload"
	;;
*)
	die "usage: realcore.sh load <dir> [args] | unload"
	;;
esac
