#!/bin/bash
# Real engines in the test VM (tests/vm/guest-suite.sh, entry "engines"):
# Debian's UCX and Open MPI move data between the two Soft-RoCE "nodes"
# (tests/vm/rxe-setup.sh: rxe0 on veth0, rxe1 on veth1) into strixpeer
# buffers, examples/gpu_import.c runs its PeerDirect flow with vgem as the
# GPU, then tests/guest/peer-names-guest.sh checks the amdkfd client name (its
# own TAP files). Every transfer is verified byte for byte by the examples.
#
#   engines-guest.sh <sp_peersim.ko> <pd/strixpeer.ko>
#
# Runs as root in the repo root with SP_OUT set, with sp_peersim and
# pd/strixpeer.ko loaded (as guest-suite.sh has them); leaves them so.
# Prints TAP; logs in $SP_OUT/engines/. Runs on the kernels named in
# SP_ENGINES_KERNELS (names as 'tests/vm/kernels.sh list' prints them,
# default "6.12 sid"); elsewhere one skipped case says why.
#
# UCX 1.13 on rxe needs UCX_UD_VERBS_ETH_DGID_CHECK=n and UCX_TLS=rc,self
# (../shared/notes/ucx-mpi.md); each MPI rank gets its own device through
# UCX_NET_DEVICES=rxe<rank>:1, so that traffic crosses the veth pair.
set -u
sim=$1
pdko=$2
out=$SP_OUT/engines
mkdir -p "$out"
ex=build/examples
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_TLS=rc,self
MiB=$((1 << 20))

echo "TAP version 13"
name=$(tests/vm/kernels.sh list 2> /dev/null | awk -v k="${SP_KVER:-}" '$2 == k { print $1 }')
want=${SP_ENGINES_KERNELS:-6.12 sid}
if [[ " $want " != *" ${name:-?} "* ]]; then
	echo "1..1"
	echo "ok 1 engines # SKIP the engine tests run on kernels \"$want\" (SP_ENGINES_KERNELS), this is ${name:-${SP_KVER:-?}}"
	exit 0
fi

n=0
failed=0
result() {	# result <0|1> <name>
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n $2"; else echo "not ok $n $2"; failed=$((failed + 1)); fi
}
diag() { sed 's/^/# /' "$@"; }
num() { cat "$1" 2> /dev/null || echo -1; }
spstat() { num "/sys/class/misc/strixpeer/stats/$1"; }
tx() { num "/sys/class/net/$1/statistics/tx_bytes"; }
wait_for() {	# wait_for <file> <ERE> <tenths of a second>
	for _ in $(seq "$3"); do
		grep -Eq "$2" "$1" 2> /dev/null && return 0
		sleep 0.1
	done
	return 1
}
listening() {	# listening <tcp port> <pid>: until it listens or the pid is gone (120 s)
	for _ in $(seq 1200); do
		ss -Hltn "sport = :$1" | grep -q . && return 0
		kill -0 "$2" 2> /dev/null || { echo "# process $2 ended before listening on $1"; return 1; }
		sleep 0.1
	done
	echo "# nothing listens on $1 after 120 s"
	return 1
}
baseline() { base_bufs=$(spstat buffers); base_pinned=$(spstat pinned_bytes); }
nothing_left() {	# buffers and pinned bytes back at the baseline (60 s)
	for _ in $(seq 600); do
		[ "$(spstat buffers)" = "$base_bufs" ] && [ "$(spstat pinned_bytes)" = "$base_pinned" ] && return 0
		sleep 0.1
	done
	echo "# left behind: $(spstat buffers) buffers, $(spstat pinned_bytes) bytes pinned"
	return 1
}
part_t0=$(date +%s)
part_done() {	# part_done <name>: how long the part took
	local t=$(($(date +%s) - part_t0))
	echo "# $1: $t s"
	echo "$1: $t s" >> "$out/timing.txt"
	part_t0=$(date +%s)
}
# mpirun with one rank per rxe device: mpi <timeout> <program> [args]
mpi() {
	local t=$1
	shift
	# shellcheck disable=SC2016 # expanded by each rank's shell
	timeout "$t" mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx \
		--mca btl self,vader -x UCX_UD_VERBS_ETH_DGID_CHECK=n -x UCX_TLS=rc,self \
		sh -c 'UCX_NET_DEVICES=rxe${OMPI_COMM_WORLD_RANK}:1 exec "$0" "$@"' "$@"
}

# --- UCX: ucx_put, 4 KiB to 64 MiB, rxe0 -> rxe1 ---------------------------
baseline
allocs0=$(spstat allocs)
v0=$(tx veth0)
v1=$(tx veth1)
# line-buffered, so that a run the timeout ends shows how far it got
UCX_NET_DEVICES=rxe1:1 timeout 300 stdbuf -oL -eL $ex/ucx_put -l 13377 > "$out/ucx-target.log" 2>&1 &
tpid=$!
listening 13377 $tpid
UCX_NET_DEVICES=rxe0:1 timeout 300 stdbuf -oL -eL $ex/ucx_put 198.18.0.2 13377 $((64 * MiB)) \
	> "$out/ucx-initiator.log" 2>&1
irc=$?
wait $tpid
trc=$?
diag "$out/ucx-initiator.log" "$out/ucx-target.log"
if [ $irc -eq 124 ] || [ $trc -eq 124 ]; then
	# a stall: the QPs' state and rxe's counters say which side waits
	echo "# ucx_put timed out (initiator exit $irc, target $trc); rdma res show qp:"
	rdma res show qp 2>&1 | sed 's/^/#   /' | head -n 40
	for d in rxe0 rxe1; do
		echo "# $d counters: $(rdma statistic show link "$d/1" 2>&1 | tr -s ' ' | head -c 900)"
	done
fi
[ $irc -eq 0 ] && [ $trc -eq 0 ] &&
	[ "$(grep -c 'put and got back, every byte verified' "$out/ucx-initiator.log")" -eq 8 ] &&
	grep -q '^initiator: 67108864 bytes put and got back' "$out/ucx-initiator.log"
result $? "ucx_put_4KiB_to_64MiB_every_byte_verified"
# UCX's own account of the endpoint: every lane rc_verbs on rxe0
grep -Eq 'lane\[[0-9]+\]: +[0-9]+:rc_verbs/rxe0:1' "$out/ucx-initiator.log" &&
	! grep 'lane\[' "$out/ucx-initiator.log" | grep -vq 'rc_verbs/rxe0:1'
result $? "ucx_endpoint_lanes_are_rc_verbs_on_rxe0"
# puts cross veth0 -> veth1, gets' data veth1 -> veth0
echo "# veth0 sent $(($(tx veth0) - v0)) bytes, veth1 $(($(tx veth1) - v1))"
[ $(($(tx veth0) - v0)) -ge $((64 * MiB)) ] && [ $(($(tx veth1) - v1)) -ge $((64 * MiB)) ]
result $? "ucx_traffic_crossed_the_veth_pair_both_ways"
grep -q '^target: strixpeer buffer .* pinned by a NIC registration' "$out/ucx-target.log" &&
	grep -q '^initiator: strixpeer buffer .* pinned by a NIC registration' "$out/ucx-initiator.log" &&
	[ $(($(spstat allocs) - allocs0)) -eq 2 ]
result $? "ucx_strixpeer_buffers_counted_and_pinned_by_the_nic"
nothing_left
result $? "ucx_leaves_no_buffer_or_pinned_byte"
part_done ucx

# --- Open MPI: ping-pong and allreduce, strixpeer vs malloc ------------------
baseline
v0=$(tx veth0)
v1=$(tx veth1)
mpi 600 $ex/mpi_allreduce $((16 * MiB)) $((16 * MiB)) 1 1 > "$out/mpi.log" 2>&1
mrc=$?
diag "$out/mpi.log"
[ $mrc -eq 0 ] && grep -q '^mpi_allreduce: every byte and element verified' "$out/mpi.log" &&
	[ "$(grep -Ec '^ +(8|64|512|4096|32768|262144|2097152|16777216) +[0-9]+ ' "$out/mpi.log")" -eq 8 ] &&
	grep -q '^allreduce 16777216 bytes' "$out/mpi.log"
result $? "mpi_pingpong_8B_to_16MiB_and_allreduce_16MiB_strixpeer_and_malloc_verified"
grep -q '^rank 0 pid [0-9]*: .*rxe0:1' "$out/mpi.log" && grep -q '^rank 1 pid [0-9]*: .*rxe1:1' "$out/mpi.log"
result $? "mpi_one_rxe_device_per_rank"
echo "# veth0 sent $(($(tx veth0) - v0)) bytes, veth1 $(($(tx veth1) - v1))"
[ $(($(tx veth0) - v0)) -ge $((32 * MiB)) ] && [ $(($(tx veth1) - v1)) -ge $((32 * MiB)) ]
result $? "mpi_traffic_crossed_the_veth_pair_both_ways"
nothing_left
result $? "mpi_leaves_no_buffer_or_pinned_byte"
part_done mpi

# A rank killed mid-transfer: the job ends, nothing stays pinned. The job
# repeats its 16 MiB allreduce until killed; the kill comes once its
# ping-pong is done, 2 MiB of allreduce traffic crossed veth0 and veth0's
# counter is still moving. Each of those is waited for as long as the job
# lives and moves bytes (its own timeout bounds it), not on a clock: a
# loaded TCG guest can take minutes to get there; only a job that moves no
# byte on veth0 for 300 s is called stuck.
#
# Open MPI 4.1 over UCX 1.13 on rxe has, under heavy host load, stuck in its
# first 8-byte round trip (seen once on sid, once on 6.12: no byte moved,
# no rxe error, both ranks alive until the 900 s timeout). That is the
# engine's start, not what this case tests (the mpi_* cases above check the
# engine): a job stuck before its first row is shown (its QPs, the ranks'
# kernel stacks) and started once more; a second stuck start fails.
baseline
alive() { kill -0 "$mpid" 2> /dev/null; }
stuck_state() {	# stuck_state <what>: print what the stuck job waits on
	echo "# $1; its QPs and the ranks' kernel stacks:"
	rdma resource show qp 2>&1 | sed 's/^/#   /' | head -n 40
	for p in $(pgrep -f "$ex/mpi_allreduce" 2> /dev/null); do
		echo "#   pid $p ($(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | cut -c1-60)): $(tr '\n' ' ' < "/proc/$p/stack" 2> /dev/null | cut -c1-300)"
	done
}
started=
for attempt in 1 2; do
	mpi 900 $ex/mpi_allreduce 8 $((16 * MiB)) 1 100000 > "$out/mpi-kill.log" 2>&1 &
	mpid=$!
	last=$(tx veth0)
	since=$SECONDS
	stuck=
	until grep -Eq '^ +8 +1 ' "$out/mpi-kill.log" || ! alive; do
		cur=$(tx veth0)
		if [ "$cur" -ne "$last" ]; then
			last=$cur
			since=$SECONDS
		elif [ $((SECONDS - since)) -ge 300 ]; then
			stuck_state "attempt $attempt: the job is stuck before its first row: no byte on veth0 for 300 s"
			stuck=1
			break
		fi
		sleep 0.1
	done
	if grep -Eq '^ +8 +1 ' "$out/mpi-kill.log"; then
		started=1
		break
	fi
	pkill -9 -f "$ex/mpi_allreduce" 2> /dev/null
	wait "$mpid"
	echo "# attempt $attempt: the job ended (exit $?) before its ping-pong was done"
	[ -n "$stuck" ] || break	# it ended by itself: that is the failure
	diag "$out/mpi-kill.log"
	nothing_left || break
done
ok=1
if [ -n "$started" ]; then
	pid0=$(sed -n 's/^rank 0 pid \([0-9]*\):.*/\1/p' "$out/mpi-kill.log")
	pid1=$(sed -n 's/^rank 1 pid \([0-9]*\):.*/\1/p' "$out/mpi-kill.log")
	v0=$(tx veth0)
	# Slow is waited for; stuck is not: no byte at all on veth0 for 300 s
	# means the job's QPs stopped (seen once on 6.12: the ping-pong never
	# got past its first row), and their state is what to look at.
	last=$v0
	since=$SECONDS
	while alive && [ $(($(tx veth0) - v0)) -lt $((2 * MiB)) ]; do
		cur=$(tx veth0)
		if [ "$cur" -ne "$last" ]; then
			last=$cur
			since=$SECONDS
		elif [ $((SECONDS - since)) -ge 300 ]; then
			echo "# the job is stuck: no byte on veth0 for 300 s after $((cur - v0)) bytes; its QPs:"
			rdma resource show qp 2>&1 | sed 's/^/#   /'
			kill -9 "$pid0" "$pid1" 2> /dev/null
			break
		fi
		sleep 0.1
	done
	moved=$(($(tx veth0) - v0))
	a=$(tx veth0)
	while alive && [ "$(tx veth0)" -eq "$a" ]; do sleep 0.1; done
	flowing=$(($(tx veth0) - a))
	during=$(spstat buffers)
	kill -9 "$pid1"
	wait $mpid
	krc=$?
	echo "# killed rank 1 (pid $pid1) after $moved bytes of allreduce traffic (still moving: $flowing more), $((during - base_bufs)) strixpeer buffers alive; mpirun exited $krc"
	[ $moved -ge $((2 * MiB)) ] && [ $flowing -gt 0 ] && [ $((during - base_bufs)) -eq 4 ] &&
		[ $krc -ne 0 ] && [ $krc -ne 124 ] && ! kill -0 "$pid0" 2> /dev/null && ! kill -0 "$pid1" 2> /dev/null &&
		! grep -q '^allreduce' "$out/mpi-kill.log" && nothing_left
	ok=$?
fi
diag "$out/mpi-kill.log"
result $ok "mpi_rank_killed_mid_transfer_leaves_no_buffer_or_pinned_byte"
part_done mpi-kill

# --- gpu_import: RDMA WRITE into GPU memory (vgem), checked on the GPU side --
for c in /sys/class/drm/card[0-9]*; do	# the GPU: vgem's card
	[ "$(basename "$(readlink -f "$c/device")")" = vgem ] && export GPU=/dev/dri/${c##*/}
done
echo "# GPU=${GPU:-none}"
baseline
timeout 120 $ex/gpu_import -l 198.18.0.2 13378 $((16 * MiB)) > "$out/gpu-target.log" 2>&1 &
tpid=$!
wait_for "$out/gpu-target.log" 'listening|gpu_import:' 1200
timeout 120 $ex/gpu_import 198.18.0.2 13378 $((16 * MiB)) > "$out/gpu-initiator.log" 2>&1
irc=$?
wait $tpid
trc=$?
diag "$out/gpu-target.log" "$out/gpu-initiator.log"
[ $irc -eq 0 ] && [ $trc -eq 0 ] &&
	grep -q '^target: 16777216 bytes written by the other node, every byte verified through the GPU-side mapping' \
		"$out/gpu-target.log"
result $? "gpu_import_rdma_write_into_a_gpu_imported_buffer_verified_on_the_gpu_side"
# GPU-allocated memory: Soft-RoCE has no dma-buf MRs and the kernel no
# peer-memory core, so registration must fail, saying why for each path.
timeout 60 $ex/gpu_import -g -l 198.18.0.2 13379 > "$out/gpu-g.log" 2>&1
grc=$?
diag "$out/gpu-g.log"
[ $grc -eq 2 ] && grep -q 'sp_reg_mr: cannot register.* plain: .*; dma-buf: .*; PeerDirect: ' "$out/gpu-g.log" &&
	nothing_left
result $? "gpu_import_gpu_allocated_buffer_refused_on_rxe_with_every_reason"
part_done gpu_import

# --- the amdkfd client name (own TAP files) ----------------------------------
tests/guest/peer-names-guest.sh "$sim" "$pdko" > "$SP_OUT/peer-names.tap" 2>&1
prc=$?
part_done peer-names

echo "1..$n"
[ $failed -eq 0 ] && [ $prc -eq 0 ]
