#!/bin/bash
# Runs inside the test VM (tests/vm/run-vm.sh), as root, cwd = repo root.
#
#   guest-suite.sh <build/kmod/KVER/strixpeer.ko> [name ...]
#   guest-suite.sh --plan <uname -r> <build/kmod/KVER/strixpeer.ko> [name ...]
#
# The suite is data: tests/vm/suite.tab has one row per program run (name,
# stage, kernels, timeout, environment, command). This script sets up two
# Soft-RoCE "nodes" on a veth pair and loads vgem, then runs the stages
# (module setups) in a fixed order - each with one load and one unload
# function below, which also hold the guest's own checks (loads, unloads,
# dmesg phrases) - and inside each stage the rows of that stage whose
# kernels column names this kernel, in the table's order. Names on the
# command line pick rows: a row's name, or the part of it before a '-'
# (peer: peer-noapi, peer-modern, ...); such a row runs on any kernel
# unless its kernels column ends in '!'.
#
# Each row writes $SP_OUT/<name>.tap and a line in $SP_OUT/timing.txt
# ("<name>: exit N, N s"; a stage's load and unload add "stage <stage>
# load: N s"); the guest's own checks go to $SP_OUT/guest.tap. Exit status: 0 when every
# program passed. --plan prints what would run on a kernel of that
# 'uname -r' (and where the stage's build says it cannot run) without
# running anything: "run <name> <stage>" or "skip <name> <stage> <reason>".
# shellcheck disable=SC2317,SC2016 # stage functions called by name; eval the checks
set -u

plan=
if [ "${1:-}" = --plan ]; then
	plan=1
	[ $# -ge 3 ] || { echo "usage: guest-suite.sh --plan <uname -r> <strixpeer.ko> [name ...]" >&2; exit 2; }
	urel=$2
	shift 2
else
	urel=$(uname -r)
fi
[ $# -ge 1 ] || { echo "usage: guest-suite.sh <strixpeer.ko> [name ...]" >&2; exit 2; }
ko=$1
shift
want=("$@")
kdir=$(dirname "$ko")
table=$(dirname "$0")/suite.tab

# This kernel's name in the kernels column.
case $urel in
*spdebug* | debug-*) kname=debug ;;
6.1 | 6.1.*) kname=6.1 ;;
6.12 | 6.12.*) kname=6.12 ;;
*) kname=sid ;;	# the newest: Debian sid's
esac
stages=(gpusim noapi peersim-modern rxe-dmabuf kfdsim peersim-legacy realcore realcore-amdkfd)
declare -A parent=([noapi]=gpusim [peersim-modern]=gpusim [rxe-dmabuf]=peersim-modern
	[kfdsim]=peersim-modern [peersim-legacy]=gpusim [realcore-amdkfd]=realcore)

kernel_matches() {	# kernel_matches <kernels column>
	local k
	for k in ${1//,/ }; do
		case $k in
		all) return 0 ;;
		non-debug) [ "$kname" != debug ] && return 0 ;;
		"$kname") return 0 ;;
		esac
	done
	return 1
}

# The table: rows[i] = "name|stage|kernels|timeout|env|command", trimmed.
trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; printf '%s' "${s%"${s##*[![:space:]]}"}"; }
rows=()
lineno=0
while IFS= read -r line; do
	lineno=$((lineno + 1))
	line=$(trim "$line")
	case $line in "" | "#"*) continue ;; esac
	IFS='|' read -r f1 f2 f3 f4 f5 f6 <<< "$line"
	f1=$(trim "$f1") f2=$(trim "$f2") f3=$(trim "${f3-}") f4=$(trim "${f4-}")
	f5=$(trim "${f5-}") f6=$(trim "${f6-}")
	bad=
	[[ " ${stages[*]} " == *" $f2 "* ]] && [ -n "$f1" ] && [ -n "$f3" ] && [ -n "$f4" ] &&
		[ -n "$f5" ] && [ -n "$f6" ] || bad="want 'name | stage | kernels | timeout | environment | command', a stage of: ${stages[*]}"
	for k in ${f3//,/ }; do
		case ${k%!} in all | non-debug | debug | 6.1 | 6.12 | sid) ;; *) bad="kernels: all, non-debug, debug, 6.1, 6.12, sid, joined by ','" ;; esac
	done
	if [ -n "$bad" ]; then
		echo "guest-suite.sh: $table:$lineno: $bad: $line" >&2
		exit 2
	fi
	rows+=("$f1|$f2|$f3|$f4|$f5|$f6")
done < "$table"

# Which rows: all (the default plan) or those the command line names.
selected=()
for r in "${rows[@]}"; do
	n=${r%%|*}
	if [ ${#want[@]} -eq 0 ]; then
		selected+=("$r")
		continue
	fi
	for w in "${want[@]}"; do
		if [ "$n" = "$w" ] || [ "${n%%-*}" = "$w" ] || [[ $n == "$w"-* ]]; then
			selected+=("$r")
			break
		fi
	done
done
for w in "${want[@]}"; do
	found=
	for r in "${rows[@]}"; do
		n=${r%%|*}
		if [ "$n" = "$w" ] || [ "${n%%-*}" = "$w" ] || [[ $n == "$w"-* ]]; then
			found=1
			break
		fi
	done
	if [ -z "$found" ]; then
		echo "guest-suite.sh: no row named '$w' in $table; there are:" >&2
		for r in "${rows[@]}"; do printf ' %s' "${r%%|*}"; done | fold -s -w 76 >&2
		echo >&2
		exit 2
	fi
done

# runs <row>: 0 when the row runs on this kernel, else prints why not
runs() {
	local k
	IFS='|' read -r _ _ k _ <<< "$1"
	if [ ${#want[@]} -gt 0 ] && [ "${k%!}" = "$k" ]; then
		return 0
	fi
	kernel_matches "${k%!}" && return 0
	echo "runs on ${k%!}, this is $kname (tests/vm/suite.tab says why)"
	return 1
}
# has_rows <stage>: a selected row of it or of a stage inside it runs here
has_rows() {
	local r s k
	for r in "${selected[@]}"; do
		IFS='|' read -r _ s _ <<< "$r"
		[ "$s" = "$1" ] || [ "${parent[$s]:-}" = "$1" ] || continue
		runs "$r" > /dev/null && return 0
	done
	return 1
}
# the PeerDirect checks around the stages (sp_gpusim from the start, the
# peerdirect=0 check) when a row of noapi, legacy or a real core runs
with_peer=
for s in noapi peersim-legacy realcore; do
	has_rows "$s" && with_peer=1
done

# where the stage's build says this kernel has none (the real core and the
# dma-buf rxe are built for some kernels only)
rxedb=$kdir/rxe-dmabuf
realcore=$kdir/realcore
unavailable() {	# unavailable <stage>: prints why the stage cannot load here
	case $1 in
	rxe-dmabuf)
		[ -f "$rxedb/unsupported" ] && echo "no dma-buf rxe for $urel: $(cat "$rxedb/unsupported")" ;;
	realcore | realcore-amdkfd)
		[ -f "$realcore/env" ] || echo "no real core for $urel: $(cat "$realcore/unsupported" 2>/dev/null || echo "tests/vm/build-realcore.sh not run")" ;;
	esac
}

if [ -n "$plan" ]; then
	for s in "${stages[@]}"; do
		why=$(unavailable "$s")
		for r in "${selected[@]}"; do
			IFS='|' read -r n rs _ <<< "$r"
			[ "$rs" = "$s" ] || continue
			if ! nw=$(runs "$r"); then
				echo "skip $n $s $nw"
			elif [ -n "$why" ]; then
				echo "skip $n $s $why"
			else
				echo "run $n $s"
			fi
		done
	done
	exit 0
fi

out=${SP_OUT:?SP_OUT not set}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

gtap=()
gcase() {	# gcase <ok|not ok> <name> [# SKIP reason]
	gtap+=("$1 $((${#gtap[@]} + 1)) $2${3:+ $3}")
}
check() {	# check <name> <command...>: one guest case, rc=1 when it fails
	if "${@:2}"; then
		gcase ok "$1"
	else
		gcase "not ok" "$1"
		rc=1
	fi
}
rc=0

if tests/vm/rxe-setup.sh > "$out/rxe-setup.log" 2>&1; then
	gcase ok "soft_roce_two_nodes"
else
	gcase "not ok" "soft_roce_two_nodes"
fi
# strixpeer needs drm (zero-change mode); vgem is the GEM exporter, and
# sp_gpusim (tests/kmod/gpusim.c) an amdgpu/TTM-like one whose buffers move.
if modprobe -a drm vgem 2> "$out/modprobe.log"; then
	gcase ok "drm_and_vgem_load"
else
	gcase "not ok" "drm_and_vgem_load"
fi

sim=$kdir/peersim/sp_peersim.ko
pdko=$kdir/pd/strixpeer.ko
gpusim=$kdir/peersim/sp_gpusim.ko
kfdsim=$kdir/peersim/sp_kfdsim.ko
# The simulated core's 64 KiB max segment size makes the client's segment
# splitting visible. Not under DMA-API debug: vgem's exporter maps its own
# runs for the device without splitting them, and DMA-API debug rightly
# warns about that; there the simulated HCA keeps mlx5's 2 GiB (the
# client's merging is still checked).
seg=65536
[ -d /sys/kernel/debug/dma-api ] && seg=$((2 << 30))
# Zero-change mode recognises sp_gpusim's mappings too (as amdgpu's).
pd_args="claim_gem_drivers=amdgpu,vgem,sp_gpusim"
# Debug kernels (kmemleak, KASAN, lockdep) run everything several times
# slower: RDMA transfers there stop at 2 MiB + 4097, past a 2 MiB page into
# the next (the others run the full 64 MiB; the few other cases whose cost
# is their size ask tap_debug_kernel()).
if [ -e /sys/kernel/debug/kmemleak ] && [ -z "${SP_RDMA_MAX:-}" ]; then
	export SP_RDMA_MAX=$((2 * 1024 * 1024 + 4097))
fi
# the fuzz row's bound: its seeds' seconds twice, and 10 minutes more
read -r -a fseeds <<< "${SP_FUZZ_SEEDS:-0x5eed 0x1}"
fsecs=${SP_FUZZ_SECONDS:-45}
# shellcheck disable=SC2034 # the table names it
fuzz_timeout=$(( ${fsecs%%.*}0 * ${#fseeds[@]} * 2 / 10 + 600 ))

run_tap() {	# run_tap <timeout> <name> <command...>: one TAP program, timed
	local tmo=$1 name=$2 start r
	shift 2
	start=$(date +%s)
	timeout "$tmo" "$@" > "$out/$name.tap" 2>&1
	r=$?
	echo "$name: exit $r, $(( $(date +%s) - start )) s" | tee -a "$out/timing.txt"
	case $r in 0|4) return 0 ;; *) return 1 ;; esac
}
run_row() {	# run_row <row>: its command, in its environment, its stage's wrapper around
	local n s k t e c envs=() cmd=() tmo=1500 w
	IFS='|' read -r n s k t e c <<< "$1"
	[ "$t" = - ] || tmo=$(( t ))
	[ "$e" = - ] || eval "envs=($e)"
	if [ "$c" = - ]; then
		cmd=("build/tests/$n")
	else
		eval "cmd=($c)"
	fi
	[ ${#envs[@]} -eq 0 ] || cmd=(env "${envs[@]}" "${cmd[@]}")
	w=before_row_${s//-/_}
	if declare -F "$w" > /dev/null && ! "$w" "$n"; then
		rc=1
		return
	fi
	run_tap "$tmo" "$n" "${cmd[@]}" || rc=1
	w=after_row_${s//-/_}
	if declare -F "$w" > /dev/null; then
		"$w" "$n" || rc=1
	fi
}

# --- The stages: load_<stage> returns 0 (loaded: its rows run, and
# unload_<stage> follows), 1 (it failed: said in guest.tap) or 2 (skipped:
# said why); before_row_<stage>/after_row_<stage>, where defined, wrap
# each row.

# sp_gpusim, the moving exporter, for the PeerDirect stages
load_gpusim() {
	[ -n "$with_peer" ] || return 0
	check gpusim_loads insmod "$gpusim" 2> "$out/insmod-gpusim.log"
	return 0
}
unload_gpusim() {
	[ -n "$with_peer" ] || return 0
	check gpusim_unloads rmmod sp_gpusim 2> "$out/rmmod-gpusim.log"
}

# Without the peer-memory API: loads, says why, imports work.
load_noapi() {
	if ! insmod "$ko" 2> "$out/insmod-noapi.log"; then
		gcase "not ok" "module_without_peer_api_loads"
		return 1
	fi
	gcase ok "module_without_peer_api_loads"
	udevadm settle 2>/dev/null || sleep 1
	check module_without_peer_api_says_why_in_dmesg \
		eval "dmesg | grep -q 'strixpeer: PeerDirect unavailable: built without'"
	return 0
}
unload_noapi() { rmmod strixpeer; }

# The simulated PeerDirect core, then strixpeer linked against it.
load_pd() {	# load_pd <modern|legacy>
	# shellcheck disable=SC2086 # pd_args: words
	insmod "$sim" semantics="$1" max_seg_size=$seg 2> "$out/insmod-sim-$1.log" &&
		insmod "$pdko" $pd_args 2> "$out/insmod-$1.log"
}
# Everything was released: the modules unload (strixpeer holds a module
# reference per PeerDirect registration).
unload_pd() {	# unload_pd <case name>
	check "$1" eval 'rmmod strixpeer 2> "$out/rmmod.log" && rmmod sp_peersim 2>> "$out/rmmod.log"'
}
load_peersim_modern() {
	# its failure is a failed case; the rows still run and say more
	check module_loads load_pd modern
	# The client can be turned off, and says so.
	if [ -n "$with_peer" ]; then
		rmmod strixpeer
		# shellcheck disable=SC2086 # pd_args: words
		check peerdirect_0_leaves_the_client_unregistered eval 'insmod "$pdko" peerdirect=0 &&
			build/strixpeerctl status | grep -q "reason .*disabled by the module parameter peerdirect=0" &&
			[ ! -e /sys/kernel/mm/memory_peers/strixpeer ] &&
			rmmod strixpeer && insmod "$pdko" $pd_args'
	fi
	udevadm settle 2>/dev/null || sleep 1
	# rccl_decision-peersim: the core's memory_peers where it publishes
	# them (OFED on kernels exporting mm_kobj), else nothing, as Debian's
	# rxe asks no peer: host staging
	peersim_rccl=host
	if [ "$(cat /sys/module/sp_peersim/parameters/memory_peers_sysfs 2>/dev/null)" = 1 ]; then
		# shellcheck disable=SC2034 # the table names it
		peersim_rccl=peermem
	fi
	return 0
}
unload_peersim_modern() { unload_pd module_unloads_after_suite; }
load_peersim_legacy() {
	if load_pd legacy; then
		gcase ok "module_loads_with_legacy_core"
		return 0
	fi
	gcase "not ok" "module_loads_with_legacy_core"
	return 1
}
unload_peersim_legacy() { unload_pd module_unloads_after_legacy_core; }

# dma-buf MRs on the rxe of tests/kmod/rxe-dmabuf/ and its provider
# (tests/vm/rxe-dmabuf.sh, built on the host by tests/vm/build-rxe-dmabuf.sh),
# loaded on Debian's stock RDMA stack for these rows only: Debian's rxe and
# provider are back for whatever follows. A kernel the dma-buf rxe is not
# for is a skip; a build that failed (a download, a checksum, a compiler)
# is a failure.
rxedb_gpusim=
load_rxe_dmabuf() {
	local why
	why=$(unavailable rxe-dmabuf)
	if [ -n "$why" ]; then
		gcase ok "rxe_dmabuf_loads" "# SKIP $why"
		return 2
	fi
	if [ ! -f "$rxedb/env" ]; then
		gcase "not ok" "rxe_dmabuf_loads" "# not built: $(cat "$rxedb/failed" 2>/dev/null || echo "tests/vm/build-rxe-dmabuf.sh was not run for $urel")"
		return 1
	fi
	# sp_gpusim (the moving exporter) is loaded only with the peer rows
	rxedb_gpusim=
	if [ ! -d /sys/module/sp_gpusim ]; then
		insmod "$gpusim" 2> "$out/insmod-gpusim-dmabuf.log" && rxedb_gpusim=1
	fi
	if tests/vm/rxe-dmabuf.sh load "$rxedb" > "$out/rxe-dmabuf-load.log" 2>&1; then
		gcase ok "rxe_dmabuf_loads"
		return 0
	fi
	gcase "not ok" "rxe_dmabuf_loads" "# see rxe-dmabuf-load.log"
	unload_rxe_dmabuf
	return 1
}
unload_rxe_dmabuf() {
	local r=0
	if tests/vm/rxe-dmabuf.sh unload > "$out/rxe-dmabuf-unload.log" 2>&1; then
		gcase ok "rxe_dmabuf_unloads_and_debian_rxe_is_back"
	else
		gcase "not ok" "rxe_dmabuf_unloads_and_debian_rxe_is_back" "# see rxe-dmabuf-unload.log"
		r=1
	fi
	if [ -n "$rxedb_gpusim" ] && ! rmmod sp_gpusim 2>> "$out/insmod-gpusim-dmabuf.log"; then
		gcase "not ok" "gpusim_unloads_after_rdma_dmabuf"
		r=1
	fi
	return "$r"
}

# sp_kfdsim (tests/kmod/kfdsim.c: what KFD does with a user pointer and
# amdgpu with a foreign dma-buf), loaded for each row and unloaded after:
# an unload that fails means something of it is still held. sp_gpusim
# beside it (strixpeerctl gpu's stand-in runtime uses both).
kfd_gpusim=
load_kfdsim() {
	kfd_gpusim=
	if [ ! -d /sys/module/sp_gpusim ]; then
		insmod "$gpusim" 2> "$out/insmod-gpusim-kfdsim.log" && kfd_gpusim=1
	fi
	return 0
}
unload_kfdsim() {
	[ -z "$kfd_gpusim" ] && return 0
	rmmod sp_gpusim 2>> "$out/insmod-gpusim-kfdsim.log" && return 0
	gcase "not ok" "gpusim_unloads_after_kfdsim"
	return 1
}
before_row_kfdsim() {
	insmod "$kfdsim" 2> "$out/insmod-kfdsim-$1.log" && return 0
	gcase "not ok" "kfdsim_loads_for_$1" "# see insmod-kfdsim-$1.log"
	return 1
}
after_row_kfdsim() {
	rmmod sp_kfdsim 2>> "$out/insmod-kfdsim-$1.log" && return 0
	gcase "not ok" "kfdsim_unloads_after_$1" "# see insmod-kfdsim-$1.log"
	return 1
}

# The real PeerDirect stack (tests/vm/realcore.sh, built on the host by
# tests/vm/build-realcore.sh): OFED's peer-memory core in ib_uverbs, an rxe
# that asks it as mlx5 does, strixpeer linked as on an OFED node.
load_realcore() {
	local why
	why=$(unavailable realcore)
	if [ -n "$why" ]; then
		gcase ok "realcore_loads" "# SKIP $why"
		return 2
	fi
	# shellcheck disable=SC2086 # pd_args: words
	if ! tests/vm/realcore.sh load "$realcore" $pd_args > "$out/realcore-load.log" 2>&1; then
		gcase "not ok" "realcore_loads" "# see realcore-load.log"
		return 1
	fi
	gcase ok "realcore_loads"
	# sp_gpusim again, for peer_realcore's ROCm-mapped BOs
	if insmod "$gpusim" 2> "$out/insmod-gpusim-realcore.log"; then
		gcase ok "gpusim_loads_beside_the_real_core"
	else
		gcase "not ok" "gpusim_loads_beside_the_real_core" "# see insmod-gpusim-realcore.log"
		rc=1
	fi
	check realcore_status_says_peerdirect_available eval 'build/strixpeerctl status > "$out/realcore-status.txt" 2>&1 &&
		grep -Eq "^ *available +yes$" "$out/realcore-status.txt"'
	check realcore_module_depends_on_ib_uverbs eval \
		'modinfo -F depends "$realcore/pd/strixpeer.ko" | tr "," "\n" | grep -qx ib_uverbs'
	return 0
}
unload_realcore() {
	local r=0
	if [ -d /sys/module/sp_gpusim ] && ! rmmod sp_gpusim 2>> "$out/insmod-gpusim-realcore.log"; then
		gcase "not ok" "gpusim_unloads_after_the_real_core" "# see insmod-gpusim-realcore.log"
		r=1
	fi
	if tests/vm/realcore.sh unload > "$out/realcore-unload.log" 2>&1; then
		gcase ok "realcore_unloads"
	else
		gcase "not ok" "realcore_unloads"
		r=1
	fi
	return "$r"
}
# Beside ROCm's own client (the stand-in, registered first), strixpeer
# under the same name: this core compares no names, so both register, and
# it asks them in registration order: the stand-in declines the GPU
# ranges, strixpeer claims them.
stub=$realcore/amdkfd-stub/sp_amdkfd_stub.ko
load_realcore_amdkfd() {
	# shellcheck disable=SC2086 # pd_args: words
	if rmmod strixpeer > "$out/realcore-amdkfd.log" 2>&1 &&
		insmod "$stub" >> "$out/realcore-amdkfd.log" 2>&1 &&
		insmod "$realcore/pd/strixpeer.ko" $pd_args peer_client_name=amdkfd \
			>> "$out/realcore-amdkfd.log" 2>&1 &&
		grep -qx amdkfd /sys/module/strixpeer/parameters/peer_client_name; then
		gcase ok "realcore_strixpeer_registers_as_amdkfd_beside_rocm_client"
		return 0
	fi
	gcase "not ok" "realcore_strixpeer_registers_as_amdkfd_beside_rocm_client" "# see realcore-amdkfd.log"
	{ rmmod strixpeer; rmmod sp_amdkfd_stub; } >> "$out/realcore-amdkfd.log" 2>&1
	return 1
}
unload_realcore_amdkfd() {
	local asked r=0
	asked=$(cat /sys/module/sp_amdkfd_stub/parameters/asked 2>/dev/null)
	if [ "${asked:-0}" -gt 0 ]; then
		gcase ok "realcore_rocm_client_asked_first_and_declined" "# asked $asked times"
	else
		gcase "not ok" "realcore_rocm_client_asked_first_and_declined" "# asked ${asked:-?} times"
		r=1
	fi
	{ rmmod strixpeer; rmmod sp_amdkfd_stub; } >> "$out/realcore-amdkfd.log" 2>&1
	return "$r"
}

# The stages in order, each inside its parent: unload what the next stage
# is not inside, load it, run its rows.
stack=()
unwind_to() {	# unwind_to <stage or "">: unload stages until it is on top
	local top t0
	while [ ${#stack[@]} -gt 0 ]; do
		top=${stack[-1]}
		[ "$top" = "$1" ] && return 0
		t0=$(date +%s)
		"unload_${top//-/_}" || rc=1
		echo "stage $top unload: $(( $(date +%s) - t0 )) s" >> "$out/timing.txt"
		unset 'stack[-1]'
	done
}
skip_rows() {	# skip_rows <stage>: its rows not run on this kernel, a SKIP each
	local r n rs nw
	for r in "${selected[@]}"; do
		IFS='|' read -r n rs _ <<< "$r"
		[ "$rs" = "$1" ] || continue
		nw=$(runs "$r") || gcase ok "$n" "# SKIP $nw"
	done
}
for s in "${stages[@]}"; do
	case $s in
	gpusim | peersim-modern) ;;
	*) has_rows "$s" || { skip_rows "$s"; continue; } ;;
	esac
	p=${parent[$s]:-}
	unwind_to "$p"
	# a parent that did not load: its stages' rows cannot run (the
	# parent's own case said why)
	if [ -n "$p" ] && [ "${stack[-1]:-}" != "$p" ]; then
		skip_rows "$s"
		continue
	fi
	t0=$(date +%s)
	"load_${s//-/_}"
	lr=$?
	echo "stage $s load: $(( $(date +%s) - t0 )) s" >> "$out/timing.txt"
	case $lr in
	0) stack+=("$s") ;;
	1) rc=1; skip_rows "$s"; continue ;;
	*) skip_rows "$s"; continue ;;
	esac
	# its rows in the table's order: run, or one SKIP case saying where
	for r in "${selected[@]}"; do
		IFS='|' read -r n rs _ <<< "$r"
		[ "$rs" = "$s" ] || continue
		if nw=$(runs "$r"); then
			run_row "$r"
		else
			gcase ok "$n" "# SKIP $nw"
		fi
	done
done
unwind_to ""

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
