#!/bin/bash
# Generates the fake node trees strixpeerctl doctor is tested against
# (tests/doctor/doctor-test.c), one per situation, in the formats the kernel
# uses (see ../shared/notes/doctor-facts.md):
#
#   mkfixtures.sh OUTDIR
#
# Each tree is what --sysroot points at: /sys (class links resolved through
# relative symlinks into /sys/devices, as sysfs does), /proc, /dev, /etc,
# /lib/modules with a depmod index (a stand-in strixpeer.ko: an object file
# with a .modinfo section, which is all depmod and libkmod read). Not
# reproduced: attributes whose read fails with EINVAL (a directory in the
# file's place gives a read error instead), device nodes (plain files with
# the same mode), and anything only a live system answers (the verbs
# device, netlink, the ABI handshake).
set -eu

out=${1:?usage: mkfixtures.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
version=$(cat "$here/../../VERSION")
PATH=$PATH:/sbin:/usr/sbin
rm -rf "$out"
mkdir -p "$out"
gid=$(id -g)

# The trees hold some 8,000 files: the generator forks as little as it can
# (a fork costs milliseconds on a loaded machine). w forks only to create a
# directory; what many trees share is made once and copied (memo); the
# stand-in strixpeer.ko is compiled once per version and kernel.
w() {	# w FILE CONTENT...: write a file, creating its directory
	local f=$1
	shift
	[ -d "${f%/*}" ] || mkdir -p "${f%/*}"
	printf '%s\n' "$@" > "$f"
}

# memo ROOT NAME FUNC [ARGS...]: FUNC TEMPLATE ARGS... run once, into a
# template root of its own, then copied into ROOT: for functions that only
# add files below the root they are given, whatever it already holds. The
# templates are removed at the end.
memo() {
	local r=$1 t=$out/.memo/$2 fn=$3
	shift 3
	if [ ! -d "$t" ]; then
		mkdir -p "$t.tmp"
		"$fn" "$t.tmp" "$@"
		mv "$t.tmp" "$t"
	fi
	mkdir -p "$r"
	cp -a "$t/." "$r/"
}

# A healthy Strix Halo node without NICs: proc, memory, GPU, strixpeer.
base() {	# base ROOT [KERNEL]
	local k=${2:-6.18.4-amd64}
	memo "$1" "base-$k" base_tree "$k"
	w "$1/proc/sys/kernel/hostname" "${1##*/}"
}
base_tree() {	# base_tree ROOT KERNEL: all of base but the hostname
	local r=$1 k=$2
	w "$r/proc/sys/kernel/osrelease" "$k"
	w "$r/proc/cmdline" "BOOT_IMAGE=/vmlinuz-$k root=/dev/nvme0n1p2 ro iommu=pt quiet"
	w "$r/proc/self/limits" \
		"Limit                     Soft Limit           Hard Limit           Units     " \
		"Max cpu time              unlimited            unlimited            seconds   " \
		"Max locked memory         unlimited            unlimited            bytes     " \
		"Max open files            1024                 524288               files     "
	w "$r/proc/self/status" "Name:	strixpeerctl" "Uid:	1000	1000	1000	1000" \
		"Gid:	1000	1000	1000	1000" "Groups:	24 $gid 1000 " \
		"CapEff:	0000000000000000"
	w "$r/proc/meminfo" "MemTotal:       131072000 kB" "MemFree:        120000000 kB" \
		"HugePages_Total:       0" "HugePages_Free:        0" "HugePages_Rsvd:        0" \
		"Hugepagesize:       2048 kB"
	w "$r/proc/buddyinfo" \
		"Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 " \
		"Node 0, zone   Normal   4794   4452   2591   1939   1186   1251    672    355    196    113  27335 "
	w "$r/proc/kallsyms" "ffffffff81000000 T _stext" "ffffffff81000100 t ib_register_peer_memory_client"
	# what RCCL's dma-buf test reads first after /proc/config.gz
	w "$r/boot/config-$k" "CONFIG_DMA_SHARED_BUFFER=y" "CONFIG_DMABUF_MOVE_NOTIFY=y" \
		"CONFIG_PCI_P2PDMA=y"
	w "$r/sys/kernel/mm/transparent_hugepage/enabled" "always [madvise] never"
	w "$r/sys/devices/system/node/online" "0"
	w "$r/sys/devices/system/node/node0/cpulist" "0-31"
	w "$r/etc/group" "root:x:0:" "rdma:x:$gid:user"
	w "$r/etc/systemd/system.conf" "[Manager]" "DefaultLimitMEMLOCK=infinity"
	mkdir -p "$r/sys/class/net" "$r/sys/class/infiniband" "$r/sys/bus/pci/devices"
	verbs "$r" /usr/lib/x86_64-linux-gnu 56.1	# Debian 13's rdma-core
	strixpeer "$r" "$k" strixpeer
	gpu "$r" 1586 $((512 << 20)) $((100 << 30)) 26214400
}

# rdma-core's libibverbs as its packages install it: the file named by the
# release (libibverbs.so.1.14.<R>.<P>) and libibverbs.so.1 pointing to it;
# any other copy of the tree's is removed first.
verbs() {	# verbs ROOT LIBDIR RELEASE
	rm -f "$1"/usr/lib/x86_64-linux-gnu/libibverbs.so* "$1"/usr/lib64/libibverbs.so*
	w "$1$2/libibverbs.so.1.14.$3" ""
	ln -sfn "libibverbs.so.1.14.$3" "$1$2/libibverbs.so.1"
}

# strixpeer loaded (client NAME registered), installed for kernel K.
strixpeer() {	# strixpeer ROOT KERNEL CLIENT_NAME
	local r=$1 k=$2
	w "$r/sys/module/strixpeer/version" "$version"
	w "$r/sys/module/strixpeer/srcversion" "0123456789ABCDEF0123456"
	w "$r/sys/module/strixpeer/initstate" "live"
	w "$r/sys/module/strixpeer/parameters/peer_client_name" "$3"
	w "$r/sys/module/strixpeer/parameters/peerdirect" "Y"
	w "$r/sys/kernel/mm/memory_peers/$3/version" "$version"
	w "$r/dev/strixpeer" ""
	chmod 0660 "$r/dev/strixpeer"
	mkdir -p "$r/var/lib/dkms/strixpeer/$version"
	install_module "$r" "$k"
}

install_module() {	# install_module ROOT KERNEL [VERSION]
	local r=$1 k=$2 v=${3:-$version} d ko
	d=$r/lib/modules/$k
	ko=$out/.memo/strixpeer-$v-$k.ko
	mkdir -p "$d/kernel" "$d/updates/dkms" "$d/build"
	if [ ! -f "$ko" ]; then
		mkdir -p "$out/.memo"
		printf '__attribute__((section(".modinfo"), used)) static const char m[] = "version=%s\\0license=GPL\\0srcversion=0123456789ABCDEF0123456\\0name=strixpeer\\0vermagic=%s SMP mod_unload\\0";\n' \
			"$v" "$k" > "$out/.modinfo.c"
		cc -c -o "$ko.tmp" "$out/.modinfo.c"
		mv "$ko.tmp" "$ko"
	fi
	cp "$ko" "$d/updates/dkms/strixpeer.ko"
	depmod -b "$r" "$k" 2> /dev/null
}

kernel_without_module() {	# kernel_without_module ROOT KERNEL [headers]
	local d=$1/lib/modules/$2
	mkdir -p "$d/kernel"
	[ -z "${3:-}" ] || mkdir -p "$d/build"
	depmod -b "$1" "$2" 2> /dev/null
}

# A PCI function at PATH (below /sys/devices), linked from /sys/bus/pci/devices.
pci() {	# pci ROOT PATH VENDOR DEVICE CLASS CUR_GT CUR_W MAX_GT MAX_W [NUMA]
	local r=$1 p=$2 d bdf
	d=$r/sys/devices/$p
	bdf=${p##*/}
	w "$d/vendor" "0x$3"
	w "$d/device" "0x$4"
	w "$d/class" "0x$5"
	w "$d/current_link_speed" "$6 GT/s PCIe"
	w "$d/current_link_width" "$7"
	w "$d/max_link_speed" "$8 GT/s PCIe"
	w "$d/max_link_width" "$9"
	w "$d/numa_node" "${10:--1}"
	[ -d "$r/sys/bus/pci/devices" ] || mkdir -p "$r/sys/bus/pci/devices"
	ln -sfn "../../../devices/$p" "$r/sys/bus/pci/devices/$bdf"
}

gpu() {	# gpu ROOT DEVICE VRAM GTT PAGES_LIMIT
	local r=$1 p=pci0000:00/0000:00:08.1/0000:c5:00.0
	pci "$r" pci0000:00/0000:00:08.1 1022 14eb 060400 16.0 16 16.0 16
	pci "$r" "$p" 1002 "$2" 038000 16.0 16 16.0 16
	w "$r/sys/devices/$p/mem_info_vram_total" "$3"
	w "$r/sys/devices/$p/mem_info_gtt_total" "$4"
	w "$r/sys/module/ttm/parameters/pages_limit" "$5"
	mkdir -p "$r/sys/bus/pci/drivers/amdgpu"
	ln -sfn ../../../bus/pci/drivers/amdgpu "$r/sys/devices/$p/driver"
	w "$r/dev/kfd" ""
}

# An RDMA device on a PCI function.
ibdev() {	# ibdev ROOT NAME PCIPATH FW HCA
	local r=$1 d=$1/sys/devices/$3/infiniband/$2
	mkdir -p "$d/ports"
	ln -sfn "../../devices/$3/infiniband/$2" "$r/sys/class/infiniband/$2"
	ln -sfn ../.. "$d/device"
	w "$d/fw_ver" "$4"
	w "$d/hca_type" "$5"
	w "$d/node_type" "1: CA"
}

port() {	# port ROOT DEV N STATE PHYS RATE LINK_LAYER [LID SM_LID]
	local p=$1/sys/class/infiniband/$2/ports/$3
	w "$p/state" "$4"
	w "$p/phys_state" "$5"
	w "$p/rate" "$6"
	w "$p/link_layer" "$7"
	w "$p/lid" "${8:-0x0}"
	w "$p/sm_lid" "${9:-0x0}"
	w "$p/gids/0" "fe80:0000:0000:0000:0202:c9ff:fe00:0001"
	w "$p/gid_attrs/types/0" "IB/RoCE v1"
	w "$p/counters/symbol_error" "0"
	w "$p/counters/link_downed" "0"
	w "$p/counters/link_error_recovery" "0"
	w "$p/counters/port_rcv_errors" "0"
	w "$p/counters/port_xmit_discards" "0"
}

roce() {	# roce ROOT DEV N NETDEV IPv4-HEX(c612:0001)
	local p=$1/sys/class/infiniband/$2/ports/$3
	w "$p/gid_attrs/ndevs/0" "$4"
	w "$p/gid_attrs/ndevs/1" "$4"
	w "$p/gids/1" "0000:0000:0000:0000:0000:ffff:$5"
	w "$p/gid_attrs/types/1" "RoCE v2"
	mkdir -p "$p/hw_counters"
	w "$p/hw_counters/out_of_sequence" "0"
	w "$p/hw_counters/packet_seq_err" "0"
}

netdev() {	# netdev ROOT NAME MTU [OPERSTATE CARRIER]
	local d=$1/sys/class/net/$2
	w "$d/mtu" "$3"
	w "$d/operstate" "${4:-up}"
	w "$d/carrier" "${5:-1}"
}

# Soft-RoCE device NAME on NETDEV.
rxe() {	# rxe ROOT NAME NETDEV STATE PHYS
	local d=$1/sys/devices/virtual/infiniband/$2
	mkdir -p "$d/ports"
	ln -sfn "../../devices/virtual/infiniband/$2" "$1/sys/class/infiniband/$2"
	w "$d/parent" "$3"
	w "$d/fw_ver" "0.0.0"
	w "$d/node_type" "1: CA"
	local p=$d/ports/1
	w "$p/state" "$4"
	w "$p/phys_state" "$5"
	w "$p/rate" "2.5 Gb/sec (1X SDR)"
	w "$p/link_layer" "Ethernet"
	w "$p/gids/0" "fe80:0000:0000:0000:0000:00ff:fe00:0001"
	w "$p/gid_attrs/types/0" "RoCE v2"
	w "$p/gids/1" "0000:0000:0000:0000:0000:ffff:c612:0001"
	w "$p/gid_attrs/types/1" "RoCE v2"
	w "$p/gid_attrs/ndevs/0" "$3"
	mkdir -p "$p/hw_counters"
	w "$p/hw_counters/link_downed" "0"
	w "$p/hw_counters/rcvd_seq_err" "0"
	w "$p/hw_counters/sent_pkts" "1000"
}

# A dual-port 25 GbE ConnectX-4 Lx in a x8 Gen3 slot, MTU $2 (default 9000).
cx4() {	# cx4 ROOT [MTU]
	memo "$1" "cx4-${2:-9000}" cx4_tree "${2:-9000}"
}
cx4_tree() {	# cx4_tree ROOT MTU
	local r=$1 mtu=$2 f
	mkdir -p "$r/sys/class/infiniband"
	pci "$r" pci0000:00/0000:00:01.1 1022 14ed 060400 8.0 8 8.0 8
	for f in 0 1; do
		pci "$r" "pci0000:00/0000:00:01.1/0000:01:00.$f" 15b3 1015 020000 8.0 8 8.0 8 0
		ibdev "$r" "mlx5_$f" "pci0000:00/0000:00:01.1/0000:01:00.$f" 14.32.1010 MT4117
		port "$r" "mlx5_$f" 1 "4: ACTIVE" "5: LinkUp" "25 Gb/sec (1X EDR)" Ethernet
		roce "$r" "mlx5_$f" 1 "enp1s0f${f}np$f" "c612:000$((f + 1))"
		netdev "$r" "enp1s0f${f}np$f" "$mtu"
		mkdir -p "$r/sys/kernel/iommu_groups/1$f"
		ln -sfn "../../../kernel/iommu_groups/1$f" \
			"$r/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.$f/iommu_group"
		w "$r/sys/kernel/iommu_groups/1$f/type" "identity"
	done
	mkdir -p "$r/sys/class/iommu/ivhd0"
}

# An Intel E810 (ice + irdma, 100 GbE RoCE v2) in a Gen4 x16 slot.
e810() {	# e810 ROOT
	local r=$1 dev=pci0000:00/0000:00:01.1/0000:01:00.0
	pci "$r" pci0000:00/0000:00:01.1 1022 14ed 060400 16.0 16 16.0 16
	pci "$r" "$dev" 8086 1592 020000 16.0 16 16.0 16 0
	ibdev "$r" irdma0 "$dev" 1.70 "E810"
	port "$r" irdma0 1 "4: ACTIVE" "5: LinkUp" "100 Gb/sec (4X EDR)" Ethernet
	roce "$r" irdma0 1 ens1f0 c612:0001
	netdev "$r" ens1f0 9000
}

# A ConnectX-3 (Gen3 x8 card, 56 Gb/s FDR InfiniBand) behind ROOT_PORT.
cx3() {	# cx3 ROOT ROOT_PORT_MAX_W CUR_W STATE PHYS SM_LID
	local r=$1 rp=pci0000:00/0000:00:01.2 dev
	dev=$rp/0000:03:00.0
	pci "$r" "$rp" 1022 14ee 060400 8.0 "$3" 8.0 "$2"
	pci "$r" "$dev" 15b3 1003 028000 8.0 "$3" 8.0 8 0
	ibdev "$r" mlx4_0 "$dev" 2.42.5000 MT4099
	port "$r" mlx4_0 1 "$4" "$5" "56 Gb/sec (4X FDR)" InfiniBand 0x2 "$6"
	w "$r/sys/devices/$dev/net/ib0/dev_port" "0"
	netdev "$r" ib0 2044
	w "$r/sys/class/net/ib0/mode" "datagram"
}

f=$out/healthy;		base "$f"; cx4 "$f"
install_module "$f" 6.18.3-amd64	# an older kernel, also covered
strixpeer "$f" 6.18.4-amd64 amdkfd; rm -rf "$f/sys/kernel/mm/memory_peers/strixpeer"

f=$out/oculink-cx3;	base "$f"; cx3 "$f" 4 4 "4: ACTIVE" "5: LinkUp" 0x1
# a x8 NIC below a PCIe switch whose uplink trained x4 (8.0 GT/s): 31.5 < 40 Gb/s
f=$out/pcie-switch;	base "$f"
sw=pci0000:00/0000:00:01.3/0000:10:00.0/0000:11:01.0
pci "$f" pci0000:00/0000:00:01.3 1022 14ee 060400 8.0 4 8.0 16
pci "$f" pci0000:00/0000:00:01.3/0000:10:00.0 10b5 8747 060400 8.0 4 8.0 16
pci "$f" "$sw" 10b5 8747 060400 8.0 8 8.0 16
pci "$f" "$sw/0000:12:00.0" 15b3 1015 020000 8.0 8 8.0 8 0
ibdev "$f" mlx5_0 "$sw/0000:12:00.0" 14.32.1010 MT4117
port "$f" mlx5_0 1 "4: ACTIVE" "5: LinkUp" "40 Gb/sec (4X QDR)" Ethernet
roce "$f" mlx5_0 1 eth0 c612:0001; netdev "$f" eth0 9000
# a 25 GbE card trained x4 of x8: downgraded, still faster than its port
f=$out/pcie-enough;	base "$f"
pci "$f" pci0000:00/0000:00:01.1 1022 14ed 060400 8.0 4 8.0 8
pci "$f" pci0000:00/0000:00:01.1/0000:01:00.0 15b3 1015 020000 8.0 4 8.0 8 0
ibdev "$f" mlx5_0 pci0000:00/0000:00:01.1/0000:01:00.0 14.32.1010 MT4117
port "$f" mlx5_0 1 "4: ACTIVE" "5: LinkUp" "25 Gb/sec (1X EDR)" Ethernet
roce "$f" mlx5_0 1 eth0 c612:0001; netdev "$f" eth0 9000

# a ConnectX-7 (Gen5 x16, 400 Gb/s NDR) behind a Gen4 x4 Oculink adapter:
# 63 Gb/s usable, far below the port, but RDMA works: WARN, not FAIL
f=$out/oculink-cx7;	base "$f"
pci "$f" pci0000:00/0000:00:01.2 1022 14ee 060400 16.0 4 16.0 4
pci "$f" pci0000:00/0000:00:01.2/0000:03:00.0 15b3 1021 020700 16.0 4 32.0 16 0
ibdev "$f" mlx5_0 pci0000:00/0000:00:01.2/0000:03:00.0 28.39.1002 MT4129
port "$f" mlx5_0 1 "4: ACTIVE" "5: LinkUp" "400 Gb/sec (4X NDR)" InfiniBand 0x2 0x1
# the same node, its x4 link accepted in /etc/strixpeer/doctor.conf
f=$out/oculink-cx7-accepted; base "$f"; cp -a "$out/oculink-cx7/." "$f/"
mkdir -p "$f/etc/strixpeer"
printf '# the Oculink dock is x4: known\naccept pcie.link=0000:03:00.0\n' > "$f/etc/strixpeer/doctor.conf"

f=$out/ib-no-sm;	base "$f"; cx3 "$f" 8 8 "2: INIT" "5: LinkUp" 0x0
f=$out/ib-polling;	base "$f"; cx3 "$f" 8 8 "1: DOWN" "2: Polling" 0x0
f=$out/mtu-1500;	base "$f"; cx4 "$f" 1500
f=$out/mtu-9000;	base "$f"; cx4 "$f" 9000
# 4176 is exactly enough for Soft-RoCE's 4096, not for hardware RoCE's
f=$out/mtu-edge;	base "$f"; cx4 "$f" 4176; netdev "$f" veth0 4176
rxe "$f" rxe0 veth0 "4: ACTIVE" "5: LinkUp"

# two NUMA nodes (not Strix Halo): the ConnectX-4's first function on node
# 0, the second one's firmware not saying (numa_node -1)
f=$out/numa-two-nodes;	base "$f"; cx4 "$f"
w "$f/sys/devices/system/node/online" "0-1"
w "$f/sys/devices/system/node/node1/cpulist" "32-63"
w "$f/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.1/numa_node" "-1"
f=$out/memlock-64k;	base "$f"
sed -i 's/^Max locked memory .*/Max locked memory         65536                65536                bytes     /' \
	"$f/proc/self/limits"
f=$out/memlock-unlimited; base "$f"
# services: systemd's 8 MiB default (DefaultLimitMEMLOCK commented out, as
# shipped); a vendor drop-in's 8M overridden by a later /etc one; docker
# without default-ulimits (its containers get containerd's, i.e. the
# default) and with them; containerd's own LimitMEMLOCK drop-in
f=$out/services-default; base "$f"
w "$f/etc/systemd/system.conf" "[Manager]" "#DefaultLimitMEMLOCK=8M"
f=$out/services-dropin;	base "$f"
w "$f/etc/systemd/system.conf" "[Manager]" "#DefaultLimitMEMLOCK=8M"
w "$f/usr/lib/systemd/system.conf.d/50-vendor.conf" "[Manager]" "DefaultLimitMEMLOCK=8M"
w "$f/etc/systemd/system.conf.d/memlock.conf" "[Manager]" "DefaultLimitMEMLOCK=infinity"
f=$out/docker-default;	base "$f"
w "$f/etc/systemd/system.conf" "[Manager]" "#DefaultLimitMEMLOCK=8M"
w "$f/etc/docker/daemon.json" '{ "log-driver": "journald" }'
w "$f/usr/lib/systemd/system/containerd.service" "[Service]" "ExecStart=/usr/bin/containerd" \
	"LimitNOFILE=infinity"
w "$f/usr/bin/containerd" ""
f=$out/docker-ulimits;	base "$f"
w "$f/etc/systemd/system.conf" "[Manager]" "#DefaultLimitMEMLOCK=8M"
w "$f/etc/docker/daemon.json" '{' '  "default-ulimits": {' \
	'    "memlock": { "Name": "memlock", "Soft": -1, "Hard": -1 }' '  }' '}'
w "$f/usr/bin/containerd" ""
w "$f/etc/systemd/system/containerd.service.d/memlock.conf" "[Service]" "LimitMEMLOCK=2G:4G"

f=$out/strix-6.12;	base "$f" 6.12.38+deb13-amd64
f=$out/strix-96g;	base "$f"
w "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/mem_info_vram_total" $((96 << 30))
f=$out/phoenix-8g;	base "$f"	# another APU: the carve-out rule, no gfx1151 rule
w "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/device" "0x15bf"
w "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/mem_info_vram_total" $((8 << 30))
f=$out/gttsize;		base "$f"
w "$f/proc/cmdline" "BOOT_IMAGE=/vmlinuz root=/dev/sda1 amdgpu.gttsize=65536 ttm.pages_limit=26214400"
w "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/mem_info_gtt_total" $((64 << 30))
# TTM's default GTT (half of the 125 GiB MemTotal; ttm.pages_limit agrees)
f=$out/gtt-default;	base "$f"
w "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/mem_info_gtt_total" $((64000000 * 1024))
w "$f/sys/module/ttm/parameters/pages_limit" 16000000
# an AMD GPU amdgpu did not bind (no mem_info_*), and a node without one
f=$out/gpu-no-amdgpu;	base "$f"
rm -f "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/driver" \
	"$f"/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/mem_info_* "$f/dev/kfd"
f=$out/no-gpu;		base "$f"
rm -rf "$f/sys/bus/pci/devices/0000:c5:00.0" "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0" \
	"$f/dev/kfd"
f=$out/amd-iommu-off;	base "$f"; cx4 "$f"
w "$f/proc/cmdline" "BOOT_IMAGE=/vmlinuz root=/dev/sda1 amd_iommu=off"
rm -rf "$f/sys/class/iommu/ivhd0"

f=$out/peer-strixpeer;	base "$f"		# registered as "strixpeer": RCCL misses it
f=$out/peer-amdkfd;	base "$f"; strixpeer "$f" 6.18.4-amd64 amdkfd
rm -rf "$f/sys/kernel/mm/memory_peers/strixpeer"
f=$out/peer-clash;	base "$f"; strixpeer "$f" 6.18.4-amd64 amdkfd
rm -rf "$f/sys/kernel/mm/memory_peers/strixpeer"
w "$f/sys/kernel/mm/memory_peers/amdkfd/version" "1.0"	# ROCm's own

# RCCL's view: an OFED-style core (kallsyms) without memory_peers sysfs
# (kernels >= 6.4), a kernel without any core, and a 7.1 kernel (its core
# without sysfs, so RCCL sees no peer memory) whose config
# has no CONFIG_DMABUF_MOVE_NOTIFY line (its dma_buf_invalidate_mappings is
# what RCCL's kallsyms test would have to look for)
f=$out/rccl-core-no-sysfs; base "$f"; cx4 "$f"; rm -rf "$f/sys/kernel/mm/memory_peers"
f=$out/rccl-no-core;	base "$f"; cx4 "$f"; rm -rf "$f/sys/kernel/mm/memory_peers"
w "$f/proc/kallsyms" "ffffffff81000000 T _stext"
f=$out/rccl-kernel-7.1;	base "$f" 7.1.0-amd64; cx4 "$f"; rm -rf "$f/sys/kernel/mm/memory_peers"
w "$f/boot/config-7.1.0-amd64" "CONFIG_DMA_SHARED_BUFFER=y" "CONFIG_PCI_P2PDMA=y"
w "$f/proc/kallsyms" "ffffffff81000000 T _stext" "ffffffff81000100 t ib_register_peer_memory_client" \
	"ffffffff81000200 T dma_buf_invalidate_mappings" "ffffffff81000300 T pci_p2pdma_add_resource"
# no readable config: RCCL falls back to kallsyms, which has both symbols
f=$out/rccl-kallsyms-only; base "$f"; cx4 "$f"; rm -f "$f/boot/config-6.18.4-amd64"
w "$f/proc/kallsyms" "ffffffff81000000 T _stext" "ffffffff81000100 t ib_register_peer_memory_client" \
	"ffffffff81000200 T dma_buf_move_notify" "ffffffff81000300 T pci_p2pdma_add_resource"

# only /proc/config.gz holds the config (gzipped, as the kernel serves it;
# kallsyms has neither symbol); and a truncated one, which zcat refuses, so
# /boot/config-R is read (it lacks CONFIG_PCI_P2PDMA)
f=$out/rccl-config-gz;	base "$f"; cx4 "$f"; rm -f "$f/boot/config-6.18.4-amd64"
printf '%s\n' "# Automatically generated file; DO NOT EDIT." "CONFIG_DMA_SHARED_BUFFER=y" \
	"CONFIG_DMABUF_MOVE_NOTIFY=y" "CONFIG_PCI_P2PDMA=y" | gzip -9n > "$f/proc/config.gz"
f=$out/rccl-config-gz-truncated; base "$f"; cx4 "$f"; rm -rf "$f/sys/kernel/mm/memory_peers"
w "$f/boot/config-6.18.4-amd64" "CONFIG_DMABUF_MOVE_NOTIFY=y" "# CONFIG_PCI_P2PDMA is not set"
head -c 40 "$out/rccl-config-gz/proc/config.gz" > "$f/proc/config.gz"

# Where a peer-memory core would come from (gpudirect.core, .route): a
# kernel release of each flavour, OFED's files, the symbol in kallsyms, no
# memory_peers sysfs (no core, or a core on 6.4 and later). The os-release,
# kernel config and dpkg lines are written for these trees, not copied
# from the distributions.
no_core() {	# no_core ROOT: no core, strixpeer's client not registered
	rm -rf "$1/sys/kernel/mm/memory_peers"
	w "$1/proc/kallsyms" "ffffffff81000000 T _stext" "ffffffff81000300 T pci_p2pdma_add_resource" \
		"ffffffff81000200 T dma_buf_invalidate_mappings"
}
osrel() {	# osrel ROOT ID VERSION_ID [ID_LIKE]
	w "$1/etc/os-release" "ID=$2" "VERSION_ID=\"$3\"" ${4:+"ID_LIKE=$4"}
}
# a ConnectX-7 (Gen5 x16, 200 GbE RoCE) in a Gen4 x4 slot
cx7() {	# cx7 ROOT
	local r=$1 dev=pci0000:00/0000:00:01.2/0000:03:00.0
	pci "$r" pci0000:00/0000:00:01.2 1022 14ee 060400 16.0 4 16.0 4
	pci "$r" "$dev" 15b3 1021 020000 16.0 4 32.0 16 0
	ibdev "$r" mlx5_0 "$dev" 28.43.1014 MT4129
	port "$r" mlx5_0 1 "4: ACTIVE" "5: LinkUp" "200 Gb/sec (4X HDR)" Ethernet
	roce "$r" mlx5_0 1 enp3s0np0 c612:0001; netdev "$r" enp3s0np0 9000
}
# seed-001: Ubuntu 24.04, linux-hwe-7.0 generic, ConnectX-7: no core
ub=7.0.0-15-generic
f=$out/ubuntu-hwe-cx7;	base "$f" "$ub"; cx7 "$f"; no_core "$f"; osrel "$f" ubuntu 24.04 debian
w "$f/boot/config-$ub" "CONFIG_DMA_SHARED_BUFFER=y" "CONFIG_PCI_P2PDMA=y"
mkdir -p "$f/usr/share/doc/libucx0"
printf 'ucx (1.16.0+ds-5ubuntu1) noble; urgency=medium\n' | gzip -n > "$f/usr/share/doc/libucx0/changelog.Debian.gz"
# the same node with DOCA-OFED: the core in OFED's ib_uverbs, no sysfs
f=$out/ubuntu-hwe-cx7-doca; base "$f" "$ub"; cp -a "$out/ubuntu-hwe-cx7/." "$f/"; no_core "$f"
w "$f/proc/sys/kernel/hostname" "ubuntu-hwe-cx7-doca"
mkdir -p "$f/usr/src/ofa_kernel/default"
w "$f/lib/modules/$ub/updates/dkms/ib_uverbs.ko" ""
w "$f/proc/kallsyms" "ffffffff81000000 T _stext" \
	"ffffffffc0a01000 T ib_register_peer_memory_client	[ib_uverbs]" \
	"ffffffff81000200 T dma_buf_invalidate_mappings" "ffffffff81000300 T pci_p2pdma_add_resource"
# Ubuntu's linux-nvidia kernel: its own core in ib_uverbs, no sysfs
un=6.17.0-1004-nvidia
f=$out/ubuntu-nvidia;	base "$f" "$un"; cx7 "$f"; no_core "$f"; osrel "$f" ubuntu 24.04 debian
w "$f/proc/kallsyms" "ffffffff81000000 T _stext" \
	"ffffffffc0a01000 T ib_register_peer_memory_client	[ib_uverbs]" \
	"ffffffff81000200 T dma_buf_move_notify" "ffffffff81000300 T pci_p2pdma_add_resource"
# Fedora 43 with a ConnectX-4 Lx (mlx5): no core, no OFED
fk=6.17.7-300.fc43.x86_64
f=$out/fedora43-cx4lx;	base "$f" "$fk"; cx4 "$f"; no_core "$f"; osrel "$f" fedora 43
verbs "$f" /usr/lib64 57.0
w "$f/boot/config-$fk" "CONFIG_DMA_SHARED_BUFFER=y" "CONFIG_DMABUF_MOVE_NOTIFY=y" "CONFIG_PCI_P2PDMA=y"

# rdma-core's release: an irdma NIC on Debian 12's 44 (WARN), on 56
# (INFO), a ConnectX on 44 (INFO), irdma on Fedora's /usr/lib64 with 48,
# and no libibverbs at all (SKIP)
f=$out/rdma-irdma-44;	base "$f"; e810 "$f"; verbs "$f" /usr/lib/x86_64-linux-gnu 44.0
f=$out/rdma-irdma-56;	base "$f"; e810 "$f"
f=$out/rdma-mlx5-44;	base "$f"; cx4 "$f"; verbs "$f" /usr/lib/x86_64-linux-gnu 44.0
f=$out/rdma-irdma-fedora; base "$f"; e810 "$f"; verbs "$f" /usr/lib64 48.0
w "$f/usr/lib64/libibverbs.so.1.14.46.0" ""	# a stale older copy, not linked
f=$out/rdma-no-verbs;	base "$f"; cx4 "$f"; rm -f "$f"/usr/lib/x86_64-linux-gnu/libibverbs.so*

# rxe on a one-lane USB4 link to another host (XDomain 0-1, service 0-1.0)
f=$out/tb-one-lane;	base "$f"
xd=$f/sys/devices/pci0000:00/0000:00:0d.3/domain0/0-0/0-1
w "$xd/rx_lanes" "1"; w "$xd/tx_lanes" "1"
w "$xd/rx_speed" "20.0 Gb/s"; w "$xd/tx_speed" "20.0 Gb/s"
mkdir -p "$xd/0-1.0/net/thunderbolt0" "$f/sys/bus/thunderbolt"
w "$xd/0-1.0/key" "network"
ln -sfn ../../../../../../../bus/thunderbolt "$xd/0-1.0/subsystem"
netdev "$f" thunderbolt0 65522
ln -sfn "../../../devices/pci0000:00/0000:00:0d.3/domain0/0-0/0-1/0-1.0" \
	"$f/sys/class/net/thunderbolt0/device"
rxe "$f" rxe_tb0 thunderbolt0 "4: ACTIVE" "5: LinkUp"
# a second USB4 link, its netdev renamed by udev, without Soft-RoCE
mkdir -p "$xd/../0-3/0-3.0"
ln -sfn ../../../../../../../bus/thunderbolt "$xd/../0-3/0-3.0/subsystem"
netdev "$f" usb4net1 65522
ln -sfn "../../../devices/pci0000:00/0000:00:0d.3/domain0/0-0/0-3/0-3.0" \
	"$f/sys/class/net/usb4net1/device"

# strixpeer missing, or missing for a kernel installed since
f=$out/no-module;	base "$f"
rm -rf "$f/sys/module/strixpeer" "$f/dev/strixpeer" "$f/lib/modules" "$f/var/lib/dkms"
kernel_without_module "$f" 6.18.4-amd64
f=$out/kernel-update;	base "$f"; kernel_without_module "$f" 6.18.5-amd64
f=$out/kernel-update-noheaders;	base "$f"; kernel_without_module "$f" 6.18.5-amd64
rm -rf "$f/var/lib/dkms"
f=$out/dev-0600;	base "$f"; chmod 0600 "$f/dev/strixpeer"
f=$out/rxe-down;	base "$f"; netdev "$f" veth0 1500 down 0
rxe "$f" rxe0 veth0 "1: DOWN" "3: Disabled"

# Unreadable, garbage and huge attributes: SKIP/INFO, never a crash
f=$out/broken;		base "$f"; cx4 "$f"
w "$f/sys/class/infiniband/mlx5_0/ports/1/state" "garbage"
rm -f "$f/sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0"
mkdir -p "$f/sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0"	# read fails
head -c 1048576 /dev/zero | tr '\0' 'x' > "$f/sys/class/infiniband/mlx5_1/ports/1/rate"
mkdir -p "$f/sys/class/infiniband/mlx5_1/ports/notaport"
w "$f/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.1/current_link_width" "x8?"
w "$f/sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error" "N/A (no PMA)"
rm -f "$f/proc/self/limits" "$f/proc/buddyinfo"
yes "garbage line without a colon" | head -c 2000000 > "$f/proc/meminfo"
head -c 100000 /dev/zero | tr '\0' 'a' > "$f/proc/cmdline"
w "$f/sys/devices/system/node/online" "zero"
w "$f/sys/devices/pci0000:00/0000:00:08.1/0000:c5:00.0/mem_info_vram_total" "lots"
w "$f/sys/module/ttm/parameters/pages_limit" "-5"
printf '14.1\033[2J\033]0;owned\007\n' > "$f/sys/class/infiniband/mlx5_1/fw_ver"	# escapes
printf 'a\0b\n' > "$f/sys/class/net/enp1s0f0np0/mtu"
mkfifo "$f/proc/sys/kernel/hostname.fifo" 2> /dev/null || true
rm -f "$f/proc/sys/kernel/hostname"
ln -s hostname.fifo "$f/proc/sys/kernel/hostname"	# a FIFO never blocks doctor
rm -rf "$out/.modinfo.c" "$out/.memo"
ls "$out"
