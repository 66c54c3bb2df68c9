#!/bin/bash
# strixpeer's PeerDirect client under the name "amdkfd" on the simulated
# peer-memory core: the "RCCL / GASNet / LCI mode" (those stacks decide
# GPU-direct by /sys/kernel/mm/memory_peers/amdkfd/version only). Run by
# tests/guest/engines-guest.sh in the test VM:
#
#   peer-names-guest.sh <sp_peersim.ko> <pd/strixpeer.ko>
#
# - strixpeer loaded with peer_client_name=amdkfd registers under that
#   name; build/tests/peer_names checks the directory, netlink and a
#   claimed GPU registration ($SP_OUT/peer-names-amdkfd.tap);
# - with another "amdkfd" client registered first (sp_amdkfd_stub from
#   tests/kmod/amdkfd_stub/, the stand-in for ROCm's amdgpu DKMS client,
#   built by tests/host/build-amdkfd-stub.sh or here), strixpeer still loads,
#   says why in dmesg, netlink and strixpeerctl status, and moves data
#   without PeerDirect ($SP_OUT/peer-names-clash.tap, gpu_import over rxe);
# - unloaded, the default name comes back.
# Those three on a core that publishes memory_peers (sp_peersim
# memory_peers_sysfs=1: OFED built for a kernel that exports mm_kobj, such
# as Debian's 6.1). On a kernel that does not (6.12, 7.x), OFED's core has
# no sysfs and compares no names (../shared/peermem/README.md), which is
# sp_peersim's default there; then:
# - with the stand-in registered first, strixpeer registers as amdkfd too,
#   PeerDirect is active, nothing is published, the core lists both in
#   registration order, and a GPU buffer the stand-in declines is
#   strixpeer's ($SP_OUT/peer-names-both.tap).
# Expects sp_peersim (this kernel's default sysfs) and pd/strixpeer.ko
# (default name) loaded and leaves them so. Prints TAP; logs in
# $SP_OUT/engines/.
set -u
sim=$1
pdko=$2
out=$SP_OUT/engines
mkdir -p "$out"
peers=/sys/kernel/mm/memory_peers
param=/sys/module/strixpeer/parameters/peer_client_name
n=0
failed=0
echo "TAP version 13"
t0=$(date +%s)
result() {	# result <0|1> <name> [skip reason]; says how long the step took
	echo "# $(($(date +%s) - t0)) s"
	t0=$(date +%s)
	n=$((n + 1))
	if [ -n "${3:-}" ]; then echo "ok $n $2 # SKIP $3"
	elif [ "$1" -eq 0 ]; then echo "ok $n $2"
	else echo "not ok $n $2"; failed=$((failed + 1)); fi
}
mark() { dmesg | wc -l; }
since() { dmesg | tail -n +$(($1 + 1)); }	# kernel messages after a mark
loaded() { [ -d "/sys/module/$1" ]; }
# strixpeer is reloaded with the load-time parameters it had, but the name
keep=()
[ -r /sys/module/strixpeer/parameters/claim_gem_drivers ] &&
	keep=("claim_gem_drivers=$(cat /sys/module/strixpeer/parameters/claim_gem_drivers)")
simp=/sys/module/sp_peersim/parameters
sim_args=("semantics=$(cat $simp/semantics)" "max_seg_size=$(cat $simp/max_seg_size)")
sim_default=$(cat $simp/memory_peers_sysfs)	# what OFED does on this kernel
reload_sim() {	# reload_sim <memory_peers_sysfs>: strixpeer and the stub unloaded
	rmmod sp_peersim && insmod "$sim" "${sim_args[@]}" memory_peers_sysfs="$1" &&
		[ "$(cat $simp/memory_peers_sysfs)" = "$1" ]
}
names() {	# names <program tap> <holder>: build/tests/peer_names
	SP_PEER_NAME=amdkfd SP_PEER_HOLDER=$2 timeout 300 build/tests/peer_names \
		> "$SP_OUT/$1.tap" 2>&1
}

# The stand-in for ROCm's client: built on the host by
# tests/host/build-amdkfd-stub.sh (make check does), else here (about a minute
# under emulation: kbuild's fixed cost).
stub=build/amdkfd-stub/$SP_KVER
if [ -f "$stub/sp_amdkfd_stub.ko" ] && ! find tests/kmod -newer "$stub/sp_amdkfd_stub.ko" | grep -q .; then
	echo "# the stand-in as tests/host/build-amdkfd-stub.sh built it on the host"
	! grep -q 'warning:' "$stub/build.log"
else
	echo "# building the stand-in here (tests/host/build-amdkfd-stub.sh did not run)"
	stub=/tmp/sp-amdkfd-stub
	rm -rf "$stub"
	mkdir -p "$stub"
	cp tests/kmod/amdkfd_stub/* tests/kmod/peer_mem_abi.h "$stub/"
	kdir=$(tests/vm/kernels.sh kdir "$SP_KVER" 2> "$out/stub-build.log")
	make -C "$kdir" M="$stub" W=1 KBUILD_EXTRA_SYMBOLS="$(cd "$(dirname "$sim")" && pwd)/Module.symvers" \
		modules >> "$out/stub-build.log" 2>&1 && [ -f "$stub/sp_amdkfd_stub.ko" ] &&
		! grep -q 'warning:' "$out/stub-build.log"
fi
result $? "amdkfd_stand_in_builds_W1_clean"

# A core with sysfs, for the tools that look there.
rmmod strixpeer && { [ "$sim_default" = 1 ] || reload_sim 1; }
result $? "core_with_memory_peers_in_sysfs_loads"

# strixpeer takes the name.
m=$(mark)
insmod "$pdko" "${keep[@]}" peer_client_name=amdkfd &&
	[ "$(cat $param)" = amdkfd ] &&
	since "$m" | grep -q "strixpeer: PeerDirect client 'amdkfd' registered"
result $? "loads_with_peer_client_name_amdkfd"
# released RCCL's test, verbatim: the file exists
[ -f $peers/amdkfd/version ] && [ ! -e $peers/strixpeer ]
result $? "rccl_finds_memory_peers_amdkfd_version"
names peer-names-amdkfd strixpeer
prc=$?
build/strixpeerctl status > "$out/status-amdkfd.txt" 2>&1
grep -qE 'client +amdkfd' "$out/status-amdkfd.txt"
result $? "strixpeerctl_status_shows_the_client_name"

# Another client holds "amdkfd" first: strixpeer loads without PeerDirect.
rmmod strixpeer
insmod "$stub/sp_amdkfd_stub.ko" 2> "$out/stub-insmod.log"
result $? "amdkfd_stand_in_registers"
m=$(mark)
insmod "$pdko" "${keep[@]}" peer_client_name=amdkfd 2> "$out/insmod-clash.log"
result $? "strixpeer_loads_while_another_client_holds_amdkfd"
since "$m" > "$out/dmesg-clash.txt"
sed 's/^/# /' "$out/dmesg-clash.txt"
grep -q "peer memory client amdkfd is already registered" "$out/dmesg-clash.txt" &&
	grep -q "strixpeer: PeerDirect unavailable: the peer-memory core refused client 'amdkfd'" \
		"$out/dmesg-clash.txt"
result $? "dmesg_says_amdkfd_is_taken"
build/strixpeerctl status > "$out/status-clash.txt" 2>&1
grep -q "refused client 'amdkfd'" "$out/status-clash.txt"
result $? "strixpeerctl_status_gives_the_reason"
names peer-names-clash other || prc=1
# the module still moves data: gpu_import over rxe, registration plain
timeout 120 build/examples/gpu_import -l 198.18.0.2 13380 $((4 << 20)) > "$out/gpu-clash.log" 2>&1 &
tpid=$!
for _ in $(seq 1200); do grep -Eq 'listening|gpu_import:' "$out/gpu-clash.log" && break; sleep 0.1; done
timeout 120 build/examples/gpu_import 198.18.0.2 13380 $((4 << 20)) >> "$out/gpu-clash.log" 2>&1 &&
	wait $tpid && grep -q 'every byte verified through the GPU-side mapping' "$out/gpu-clash.log"
result $? "strixpeer_without_peerdirect_still_moves_data"

# Back to the default name.
rmmod strixpeer && rmmod sp_amdkfd_stub && insmod "$pdko" "${keep[@]}" &&
	[ -f $peers/strixpeer/version ] && [ ! -e $peers/amdkfd ]
result $? "unloads_and_default_name_returns"

# The core OFED builds for this kernel when it exports no mm_kobj.
if [ "$sim_default" = 1 ]; then
	for c in core_without_sysfs_loads stand_in_and_strixpeer_both_register_as_amdkfd \
		no_memory_peers_directory_without_sysfs back_to_the_default_name_without_sysfs; do
		result 0 "$c" "this kernel exports mm_kobj: OFED's core publishes memory_peers here (the cases above)"
	done
else
	rmmod strixpeer && reload_sim 0 && [ ! -e $peers ]
	result $? "core_without_sysfs_loads"
	m=$(mark)
	insmod "$stub/sp_amdkfd_stub.ko" 2>> "$out/stub-insmod.log" &&
		insmod "$pdko" "${keep[@]}" peer_client_name=amdkfd 2> "$out/insmod-both.log" &&
		since "$m" > "$out/dmesg-both.txt" &&
		grep -q "strixpeer: PeerDirect client 'amdkfd' registered" "$out/dmesg-both.txt" &&
		! grep -q "already registered" "$out/dmesg-both.txt"
	result $? "stand_in_and_strixpeer_both_register_as_amdkfd"
	sed 's/^/# /' "$out/dmesg-both.txt"
	[ ! -e $peers ]
	result $? "no_memory_peers_directory_without_sysfs"
	names peer-names-both both || prc=1	# its own TAP file
	rmmod strixpeer && rmmod sp_amdkfd_stub && insmod "$pdko" "${keep[@]}"
	result $? "back_to_the_default_name_without_sysfs"
fi

# Whatever failed above: leave the modules as found.
loaded sp_amdkfd_stub && { rmmod strixpeer 2> /dev/null; rmmod sp_amdkfd_stub; }
if [ "$(cat $simp/memory_peers_sysfs)" != "$sim_default" ]; then
	rmmod strixpeer 2> /dev/null
	reload_sim "$sim_default" || echo "# sp_peersim could not be loaded again as it was"
fi
loaded strixpeer && [ "$(cat $param)" != strixpeer ] && rmmod strixpeer
loaded strixpeer || insmod "$pdko" "${keep[@]}"
echo "1..$n"
[ $failed -eq 0 ] && [ $prc -eq 0 ]
