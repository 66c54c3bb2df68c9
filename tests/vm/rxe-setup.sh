#!/bin/bash
# Runs inside the test VM as root: creates the two Soft-RoCE "nodes".
# Two "nodes": rxe0 on veth0 (198.18.0.1) and rxe1 on veth1 (198.18.0.2), in
# one namespace (rxe only listens in the initial one), with policy routing
# so that packets between the two addresses really cross the veth pair
# instead of short-cutting through lo. The guest has no NIC: nothing leaves it.
modprobe rdma_rxe && modprobe veth || exit 1
ip link set lo up
ip link add veth0 type veth peer name veth1 || exit 1
ip addr add 198.18.0.1/24 dev veth0
ip addr add 198.18.0.2/24 dev veth1
for i in all veth0 veth1; do
	sysctl -qw net.ipv4.conf.$i.accept_local=1 net.ipv4.conf.$i.rp_filter=0
done
ip link set veth0 up && ip link set veth1 up || exit 1
ip rule add pref 100 lookup local && ip rule del pref 0 lookup local
ip route add 198.18.0.2/32 dev veth0 src 198.18.0.1 table 10
ip route add 198.18.0.1/32 dev veth1 src 198.18.0.2 table 10
ip rule add pref 10 iif lo lookup 10
rdma link add rxe0 type rxe netdev veth0 || exit 1
rdma link add rxe1 type rxe netdev veth1 || exit 1
# wait for the IPv4-mapped RoCE v2 GIDs (index 1) of both devices
for _ in $(seq 300); do	# at most 60 s
	g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 \
		/sys/class/infiniband/rxe1/ports/1/gids/1 2>/dev/null | tr '\n' ' ')
	case $g in *ffff:c612:0001*ffff:c612:0002*) exit 0 ;; esac
	sleep 0.2
done
echo "GIDs did not appear: $g"
exit 1
