#!/bin/bash
# Runs inside the test VM (tests/vm/run-vm.sh), as root, cwd = repo root.
#
#   guest-suite.sh <build/kmod/KVER/strixpeer.ko> [test ...]
#
# Sets up two Soft-RoCE "nodes" on a veth pair and loads vgem. When the
# PeerDirect tests are asked for ("peer", in the default list), first runs
# them against the module built without the peer-memory API (peer-noapi),
# then loads the simulated PeerDirect core (peersim/sp_peersim.ko, modern
# semantics) and the module linked against it (pd/strixpeer.ko) for every
# program, and at the end repeats the PeerDirect tests with the core's
# legacy semantics (peer-legacy). Each TAP program from build/tests/
# (asan-<t>: the sanitizer build of <t>; cli: the CLI checks) writes
# $SP_OUT/<t>.tap; the guest's own checks (loads, unloads, kmemleak) go to
# $SP_OUT/guest.tap. Exit status: 0 when every program passed.
set -u

ko=$1
shift
tests=("$@")
explicit=${tests[*]}
[ ${#tests[@]} -gt 0 ] || tests=(abi abi_compat lifetime limits hostile backing huge_map netlink rdma_rxe rdma_regmr peer import_scale peersim_selftest export gem_dmabuf fuzz cli bench asan-abi asan-lifetime asan-limits asan-netlink asan-rdma_regmr doctor engines rdma_churn rdma_dmabuf numa_balance kfd_userptr kfd_rdma gpu_proof)
# tensor_slab and rdma_link by default on Debian's 6.12 and sid only (not yet
# run on 6.1 or the debug kernel)
[ -n "$explicit" ] || case $(uname -r) in *spdebug*) ;; 6.12.* | 7.*) tests+=(tensor_slab rdma_link) ;; esac
out=${SP_OUT:?SP_OUT not set}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

gtap=()
gcase() {	# gcase <ok|not ok> <name> [# SKIP reason]
	gtap+=("$1 $((${#gtap[@]} + 1)) $2${3:+ $3}")
}

if tests/vm/rxe-setup.sh > "$out/rxe-setup.log" 2>&1; then
	gcase ok "soft_roce_two_nodes"
else
	gcase "not ok" "soft_roce_two_nodes"
fi

kdir=$(dirname "$ko")
sim=$kdir/peersim/sp_peersim.ko
pdko=$kdir/pd/strixpeer.ko
with_peer=
[[ " ${tests[*]} " == *" peer "* ]] && with_peer=1

# strixpeer needs drm (zero-change mode); vgem is the GEM exporter, and
# sp_gpusim (tests/kmod/gpusim.c) an amdgpu/TTM-like one whose buffers move.
if modprobe -a drm vgem 2> "$out/modprobe.log"; then
	gcase ok "drm_and_vgem_load"
else
	gcase "not ok" "drm_and_vgem_load"
fi
gpusim=$kdir/peersim/sp_gpusim.ko
if [ -n "$with_peer" ]; then
	if insmod "$gpusim" 2> "$out/insmod-gpusim.log"; then
		gcase ok "gpusim_loads"
	else
		gcase "not ok" "gpusim_loads"
	fi
fi

run_tap() {	# run_tap <name> <command...>: one TAP program, timed
	local name=$1 start r
	shift
	start=$(date +%s)
	timeout "${tap_timeout:-1500}" "$@" > "$out/$name.tap" 2>&1
	r=$?
	echo "$name: exit $r, $(( $(date +%s) - start )) s" | tee -a "$out/timing.txt"
	case $r in 0|4) return 0 ;; *) return 1 ;; esac
}

rc=0
# Without the peer-memory API: loads, says why, imports work.
if [ -n "$with_peer" ]; then
	if insmod "$ko" 2> "$out/insmod-noapi.log"; then
		gcase ok "module_without_peer_api_loads"
		udevadm settle 2>/dev/null || sleep 1
		if dmesg | grep -q 'strixpeer: PeerDirect unavailable: built without'; then
			gcase ok "module_without_peer_api_says_why_in_dmesg"
		else
			gcase "not ok" "module_without_peer_api_says_why_in_dmesg"
			rc=1
		fi
		run_tap peer-noapi build/tests/peer noapi || rc=1
		# RCCL's GPU-direct decision (tests/guest/rccl_decision.c) with no core:
		# no memory_peers, Debian's rxe refuses GPU memory: host staging
		run_tap rccl_decision-stock env SP_RCCL_EXPECT=host build/tests/rccl_decision || rc=1
		rmmod strixpeer || rc=1
	else
		gcase "not ok" "module_without_peer_api_loads"
		rc=1
	fi
fi

# The simulated PeerDirect core, then strixpeer linked against it. A
# 64 KiB max segment size makes the client's segment splitting visible.
# Not under DMA-API debug: vgem's exporter maps its own runs for the
# device without splitting them, and DMA-API debug rightly warns about
# that; there the simulated HCA keeps mlx5's 2 GiB (the client's merging is
# still checked).
seg=65536
[ -d /sys/kernel/debug/dma-api ] && seg=$((2 << 30))
# Zero-change mode recognises sp_gpusim's mappings too (as amdgpu's).
pd_args="claim_gem_drivers=amdgpu,vgem,sp_gpusim"
load_pd() {	# load_pd <modern|legacy>
	insmod "$sim" semantics="$1" max_seg_size=$seg 2> "$out/insmod-sim-$1.log" &&
		insmod "$pdko" $pd_args 2> "$out/insmod-$1.log"
}
# The PeerDirect programs, run with each core semantics.
# (SP_PEER_PROGS narrows them for a targeted run; "" runs only the loads
# and the real core's program)
peer_progs=${SP_PEER_PROGS-peer peer_rocm peer_move peer_window events_edge}
run_peer() {	# run_peer <modern|legacy>
	local p r=0
	for p in $peer_progs; do
		run_tap "$p-$1" "build/tests/$p" || r=1
	done
	return $r
}
if load_pd modern; then
	gcase ok "module_loads"
else
	gcase "not ok" "module_loads"
fi
# The client can be turned off, and says so.
if [ -n "$with_peer" ]; then
	rmmod strixpeer
	if insmod "$pdko" peerdirect=0 &&
		build/strixpeerctl status | grep -q 'reason .*disabled by the module parameter peerdirect=0' &&
		[ ! -e /sys/kernel/mm/memory_peers/strixpeer ] &&
		rmmod strixpeer && insmod "$pdko" $pd_args; then
		gcase ok "peerdirect_0_leaves_the_client_unregistered"
	else
		gcase "not ok" "peerdirect_0_leaves_the_client_unregistered"
		rc=1
	fi
fi
udevadm settle 2>/dev/null || sleep 1

# Debug kernels (kmemleak, KASAN, lockdep) run everything several times
# slower: keep RDMA transfers there to 2 MiB + 4097, past a 2 MiB page into
# the next (6.1 and 6.12 run the full 64 MiB; the few other cases whose
# cost is their size ask tap_debug_kernel()), and leave the checks of
# user-space code alone (the CLI under valgrind, the ASan builds, the bench
# command's output), which 6.12 runs; the kernel-facing programs all run.
debug_kernel=
if [ -e /sys/kernel/debug/kmemleak ]; then
	debug_kernel=1
	[ -n "${SP_RDMA_MAX:-}" ] || export SP_RDMA_MAX=$((2 * 1024 * 1024 + 4097))
fi

# dma-buf MRs (tests/guest/rdma_dmabuf.c) on the rxe of tests/kmod/rxe-dmabuf/ and
# its provider (tests/vm/rxe-dmabuf.sh, built on the host by
# tests/vm/build-rxe-dmabuf.sh), loaded on Debian's stock RDMA stack for this
# program only: Debian's rxe and provider are back for whatever follows.
rxedb=$kdir/rxe-dmabuf
run_rxe_dmabuf() {
	local r=0 own_gpusim=
	# a kernel the dma-buf rxe is not for is a skip; a build that failed
	# (a download, a checksum, a compiler) is a failure
	if [ -f "$rxedb/unsupported" ]; then
		gcase ok "rxe_dmabuf_loads" "# SKIP no dma-buf rxe for $(uname -r): $(cat "$rxedb/unsupported")"
		return 0
	fi
	if [ ! -f "$rxedb/env" ]; then
		gcase "not ok" "rxe_dmabuf_loads" "# not built: $(cat "$rxedb/failed" 2>/dev/null || echo "tests/vm/build-rxe-dmabuf.sh was not run for $(uname -r)")"
		return 1
	fi
	# sp_gpusim (the moving exporter) is loaded only with the peer tests
	if [ ! -d /sys/module/sp_gpusim ]; then
		insmod "$gpusim" 2> "$out/insmod-gpusim-dmabuf.log" && own_gpusim=1
	fi
	if tests/vm/rxe-dmabuf.sh load "$rxedb" > "$out/rxe-dmabuf-load.log" 2>&1; then
		gcase ok "rxe_dmabuf_loads"
		run_tap rdma_dmabuf build/tests/rdma_dmabuf || r=1
		# unmodified verbs calls through libstrixpeer-preload.so
		run_tap rdma_dmabuf-preload env LD_PRELOAD="$PWD/build/libstrixpeer-preload.so" \
			SP_CASES="test_preload_plain_verbs_on_gpu_memory test_preload_leaves_the_rest_alone" \
			build/tests/rdma_dmabuf || r=1
		# unmodified perftest on stand-in GPU memory through it
		run_tap preload tests/guest/preload-guest.sh "$PWD/build/libstrixpeer-preload.so" \
			"$PWD/build/tests/libspgpualloc.so" || r=1
		# strixpeerctl bench's gpu-dmabuf kind (vgem BOs through their
		# dma-bufs), on the debug kernel too: its registrations and
		# transfers go through the patched rxe under KASAN and DMA-API debug
		run_tap bench-gpu-dmabuf tests/guest/bench-smoke.sh gpu-dmabuf || r=1
	else
		gcase "not ok" "rxe_dmabuf_loads" "# see rxe-dmabuf-load.log"
		r=1
	fi
	if tests/vm/rxe-dmabuf.sh unload > "$out/rxe-dmabuf-unload.log" 2>&1; then
		gcase ok "rxe_dmabuf_unloads_and_debian_rxe_is_back"
	else
		gcase "not ok" "rxe_dmabuf_unloads_and_debian_rxe_is_back" "# see rxe-dmabuf-unload.log"
		r=1
	fi
	if [ -n "$own_gpusim" ] && ! rmmod sp_gpusim 2>> "$out/insmod-gpusim-dmabuf.log"; then
		gcase "not ok" "gpusim_unloads_after_rdma_dmabuf"
		r=1
	fi
	return $r
}

# sp_kfdsim (tests/kmod/kfdsim.c, what KFD does with a user pointer and
# amdgpu with a foreign dma-buf),
# loaded for the programs that use it and unloaded after: an unload that
# fails means something of it is still held.
kfdsim=$kdir/peersim/sp_kfdsim.ko
run_kfdsim() {	# run_kfdsim <program>
	local r=0
	if ! insmod "$kfdsim" 2> "$out/insmod-kfdsim-$1.log"; then
		gcase "not ok" "kfdsim_loads_for_$1" "# see insmod-kfdsim-$1.log"
		return 1
	fi
	run_tap "$1" "build/tests/$1" || r=1
	if ! rmmod sp_kfdsim 2>> "$out/insmod-kfdsim-$1.log"; then
		gcase "not ok" "kfdsim_unloads_after_$1" "# see insmod-kfdsim-$1.log"
		r=1
	fi
	return $r
}

# strixpeerctl gpu with the stand-in runtime on sp_gpusim and sp_kfdsim
run_gpu_proof() {
	local r=0 own_gpusim=
	if [ ! -d /sys/module/sp_gpusim ]; then
		insmod "$gpusim" 2> "$out/insmod-gpusim-gpu.log" && own_gpusim=1
	fi
	if ! insmod "$kfdsim" 2> "$out/insmod-kfdsim-gpu.log"; then
		gcase "not ok" "kfdsim_loads_for_gpu_proof" "# see insmod-kfdsim-gpu.log"
		r=1
	else
		run_tap gpu_proof tests/guest/gpu-proof-guest.sh || r=1
		rmmod sp_kfdsim 2>> "$out/insmod-kfdsim-gpu.log" ||
			{ gcase "not ok" "kfdsim_unloads_after_gpu_proof"; r=1; }
	fi
	[ -n "$own_gpusim" ] && { rmmod sp_gpusim 2>> "$out/insmod-gpusim-gpu.log" ||
		{ gcase "not ok" "gpusim_unloads_after_gpu_proof"; r=1; }; }
	return $r
}

for t in "${tests[@]}"; do
	if [ -n "$debug_kernel" ] && [ -z "$explicit" ] && { [ "$t" = cli ] || [ "$t" = bench ] || [ "${t#asan-}" != "$t" ]; }; then
		gcase ok "$t" "# SKIP user-space check: runs on the non-debug kernels"
		continue
	fi
	# the CLI under valgrind (user-space memory errors; ~1 min) once, on
	# 6.12: the module's netlink side is netlink's on every kernel
	if [ "$t" = cli ] && [ -z "$explicit" ] && [ "${kver_major_minor:=$(uname -r | cut -d. -f1,2)}" != 6.12 ]; then
		gcase ok "$t" "# SKIP the CLI checks run on 6.12 (netlink covers this kernel's module)"
		continue
	fi
	# the sanitizer builds check the library's own memory use, which is the
	# same on every kernel: once, on 6.12 (the programs themselves, built
	# without ASan, run everywhere)
	if [ "${t#asan-}" != "$t" ] && [ -z "$explicit" ] && [ "${kver_major_minor:=$(uname -r | cut -d. -f1,2)}" != 6.12 ]; then
		gcase ok "$t" "# SKIP the ASan builds run on 6.12 (${t#asan-} itself runs on this kernel)"
		continue
	fi
	case $t in
	cli) run_tap cli tests/guest/cli-guest.sh || rc=1 ;;
	doctor) run_tap doctor tests/doctor/guest.sh "$pdko" || rc=1 ;;	# strixpeerctl doctor, live
	bench) run_tap bench tests/guest/bench-smoke.sh || rc=1 ;;
	asan-*)	# the same program built with ASan+UBSan (make user)
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
			run_tap "$t" "build/asan/${t#asan-}" || rc=1 ;;
	peer)
		run_peer modern || rc=1
		# RCCL's decision on the simulated core: its memory_peers where it
		# publishes them (OFED on kernels exporting mm_kobj), else nothing,
		# as Debian's rxe asks no peer: host staging
		rexp=host
		[ "$(cat /sys/module/sp_peersim/parameters/memory_peers_sysfs)" = 1 ] && rexp=peermem
		run_tap rccl_decision-peersim env SP_RCCL_EXPECT=$rexp build/tests/rccl_decision || rc=1
		;;
	rdma_dmabuf) run_rxe_dmabuf || rc=1 ;;
	numa_balance|kfd_userptr|kfd_rdma|tensor_slab) run_kfdsim "$t" || rc=1 ;;
	gpu_proof)	# strixpeerctl gpu with the stand-in runtime: 6.12 and sid
		case $(uname -r) in
		6.12.*-amd64|7.*) run_gpu_proof || rc=1 ;;
		*) gcase ok "$t" "# SKIP runs on 6.12 and sid" ;;
		esac ;;
	engines) run_tap engines tests/guest/engines-guest.sh "$sim" "$pdko" || rc=1 ;;	# UCX, Open MPI, gpu_import, amdkfd name
	fuzz)	# tests/fuzz/: short seeded runs (SP_FUZZ_SEEDS, SP_FUZZ_SECONDS); make fuzz runs it long
		if [ -z "$debug_kernel" ] && [ -z "$explicit" ]; then
			gcase ok "fuzz" "# SKIP the fuzzer runs on the debug kernel (KASAN, lockdep, kmemleak, fault injection)"
		else
			read -r -a fseeds <<< "${SP_FUZZ_SEEDS:-0x5eed 0x1}"
			fsecs=${SP_FUZZ_SECONDS:-45}
			tap_timeout=$(( ${fsecs%%.*}0 / 10 * ${#fseeds[@]} * 2 + 600 )) \
				run_tap fuzz tests/fuzz/guest.sh || rc=1
		fi ;;
	*) run_tap "$t" "build/tests/$t" || rc=1 ;;
	esac
done

# Everything was released: the modules unload (strixpeer holds a module
# reference per PeerDirect registration), and kmemleak finds nothing.
unload_pd() {	# unload_pd <case name>
	if rmmod strixpeer 2> "$out/rmmod.log" && rmmod sp_peersim 2>> "$out/rmmod.log"; then
		gcase ok "$1"
	else
		gcase "not ok" "$1"
		rc=1
	fi
}
unload_pd "module_unloads_after_suite"
if [ -n "$with_peer" ]; then
	if load_pd legacy; then
		gcase ok "module_loads_with_legacy_core"
		run_peer legacy || rc=1
		unload_pd "module_unloads_after_legacy_core"
	else
		gcase "not ok" "module_loads_with_legacy_core"
		rc=1
	fi
fi
if [ -n "$with_peer" ]; then
	if rmmod sp_gpusim 2> "$out/rmmod-gpusim.log"; then
		gcase ok "gpusim_unloads"
	else
		gcase "not ok" "gpusim_unloads"
		rc=1
	fi
fi
# The real PeerDirect stack (tests/vm/realcore.sh, built on the host by
# tests/vm/build-realcore.sh): OFED's peer-memory core in ib_uverbs, an rxe
# that asks it as mlx5 does, strixpeer linked as on an OFED node; then the
# PeerDirect programs that use real verbs (<prog>-realcore).
realcore=$kdir/realcore
if [ -n "$with_peer" ]; then
	if [ ! -f "$realcore/env" ]; then
		gcase ok "realcore_loads" "# SKIP no real core for $(uname -r): $(cat "$realcore/unsupported" 2>/dev/null || echo "tests/vm/build-realcore.sh not run")"
	elif tests/vm/realcore.sh load "$realcore" $pd_args > "$out/realcore-load.log" 2>&1; then
		gcase ok "realcore_loads"
		# sp_gpusim again, for peer_realcore's ROCm-mapped BOs
		if insmod "$gpusim" 2> "$out/insmod-gpusim-realcore.log"; then
			gcase ok "gpusim_loads_beside_the_real_core"
		else
			gcase "not ok" "gpusim_loads_beside_the_real_core" "# see insmod-gpusim-realcore.log"
			rc=1
		fi
		if build/strixpeerctl status > "$out/realcore-status.txt" 2>&1 &&
			grep -Eq '^ *available +yes$' "$out/realcore-status.txt"; then
			gcase ok "realcore_status_says_peerdirect_available"
		else
			gcase "not ok" "realcore_status_says_peerdirect_available"
			rc=1
		fi
		if modinfo -F depends "$realcore/pd/strixpeer.ko" | tr ',' '\n' | grep -qx ib_uverbs; then
			gcase ok "realcore_module_depends_on_ib_uverbs"
		else
			gcase "not ok" "realcore_module_depends_on_ib_uverbs"
			rc=1
		fi
		run_tap peer-realcore build/tests/peer_realcore || rc=1
		# hipFree, dereg, exit and rmmod against real traffic and evictions
		run_tap peer_move-realcore build/tests/peer_move_realcore || rc=1
		# RCCL's decision on the real 6.12 core: no memory_peers at all, so
		# its probe decides, and the patched rxe asks the core, which
		# strixpeer answers (zero-change vgem mapping): GDR on every NIC
		run_tap rccl_decision-realcore env SP_RCCL_EXPECT=probe build/tests/rccl_decision || rc=1
		# unmodified perftest, UCX and Open MPI on stand-in GPU memory
		# (vgem BOs), registered by their own plain ibv_reg_mr() through
		# the core and strixpeer's client; no preload
		run_tap engines-realcore tests/guest/preload-guest.sh none \
			"$PWD/build/tests/libspgpualloc.so" || rc=1
		# strixpeerctl bench's gpu-peerdirect kind through this core
		if [ -z "$debug_kernel" ]; then
			run_tap bench-gpu-peerdirect tests/guest/bench-smoke.sh gpu-peerdirect || rc=1
		fi
		# Beside ROCm's own client (the stand-in, registered first),
		# strixpeer under the same name: this core compares no names, so
		# both register, and it asks them in registration order: the
		# stand-in declines the GPU ranges, strixpeer claims them.
		stub=$realcore/amdkfd-stub/sp_amdkfd_stub.ko
		if rmmod strixpeer > "$out/realcore-amdkfd.log" 2>&1 &&
			insmod "$stub" >> "$out/realcore-amdkfd.log" 2>&1 &&
			insmod "$realcore/pd/strixpeer.ko" $pd_args peer_client_name=amdkfd \
				>> "$out/realcore-amdkfd.log" 2>&1 &&
			grep -qx amdkfd /sys/module/strixpeer/parameters/peer_client_name; then
			gcase ok "realcore_strixpeer_registers_as_amdkfd_beside_rocm_client"
			run_tap peer-realcore-beside-amdkfd build/tests/peer_realcore || rc=1
			asked=$(cat /sys/module/sp_amdkfd_stub/parameters/asked 2>/dev/null)
			if [ "${asked:-0}" -gt 0 ]; then
				gcase ok "realcore_rocm_client_asked_first_and_declined" "# asked $asked times"
			else
				gcase "not ok" "realcore_rocm_client_asked_first_and_declined" "# asked ${asked:-?} times"
				rc=1
			fi
		else
			gcase "not ok" "realcore_strixpeer_registers_as_amdkfd_beside_rocm_client" "# see realcore-amdkfd.log"
			rc=1
		fi
		{ rmmod strixpeer; rmmod sp_amdkfd_stub; } >> "$out/realcore-amdkfd.log" 2>&1
		if [ -d /sys/module/sp_gpusim ] && ! rmmod sp_gpusim 2>> "$out/insmod-gpusim-realcore.log"; then
			gcase "not ok" "gpusim_unloads_after_the_real_core" "# see insmod-gpusim-realcore.log"
			rc=1
		fi
		if tests/vm/realcore.sh unload > "$out/realcore-unload.log" 2>&1; then
			gcase ok "realcore_unloads"
		else
			gcase "not ok" "realcore_unloads"
			rc=1
		fi
	else
		gcase "not ok" "realcore_loads" "# see realcore-load.log"
		rc=1
	fi
fi

# DMA-API debug prints only its first error: its count says whether there
# was any (kernels with CONFIG_DMA_API_DEBUG).
if [ -r /sys/kernel/debug/dma-api/error_count ]; then
	n=$(cat /sys/kernel/debug/dma-api/error_count)
	if [ "$n" = 0 ]; then
		gcase ok "dma_api_debug_clean"
	else
		gcase "not ok" "dma_api_debug_clean" "# $n DMA-API errors (dmesg has the first)"
		rc=1
	fi
else
	gcase ok "dma_api_debug_clean" "# SKIP kernel without CONFIG_DMA_API_DEBUG"
fi
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan > /sys/kernel/debug/kmemleak
	sleep 5
	echo scan > /sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak > "$out/kmemleak.txt"
	if grep -q 'unreferenced object' "$out/kmemleak.txt"; then
		gcase "not ok" "kmemleak_clean"
		rc=1
	else
		gcase ok "kmemleak_clean"
	fi
else
	gcase ok "kmemleak_clean" "# SKIP kernel without CONFIG_DEBUG_KMEMLEAK"
fi

{
	echo "TAP version 13"
	echo "1..${#gtap[@]}"
	printf '%s\n' "${gtap[@]}"
} > "$out/guest.tap"
exit $rc
