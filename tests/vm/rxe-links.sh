# shellcheck shell=bash
# Sourced by tests/vm/realcore.sh and tests/vm/rxe-dmabuf.sh, which swap the
# RDMA modules under the two Soft-RoCE nodes of tests/vm/rxe-setup.sh:
#   rxe_links_down  deletes rxe0/rxe1 (those present)
#   rxe_links_up    adds them back on veth0/veth1 and waits (at most 60 s)
#                   for both nodes' RoCE v2 GIDs, saying which are missing
rxe_links_down() {
	local l
	for l in rxe0 rxe1; do
		[ -e /sys/class/infiniband/$l ] && { rdma link delete $l || return 1; }
	done
	return 0
}

rxe_links_up() {
	local g
	rdma link add rxe0 type rxe netdev veth0 && rdma link add rxe1 type rxe netdev veth1 || return 1
	for _ in $(seq 600); do
		g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 \
			/sys/class/infiniband/rxe1/ports/1/gids/1 2>/dev/null | tr '\n' ' ')
		case $g in *ffff:c612:0001*ffff:c612:0002*) return 0 ;; esac
		sleep 0.1
	done
	echo "${0##*/}: GIDs did not appear in 60 s: $g" >&2
	return 1
}
