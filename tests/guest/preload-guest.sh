#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Unmodified perftest and UCX on GPU memory through libstrixpeer-preload.so, in
# the test VM with the dma-buf rxe loaded (tests/vm/guest-suite.sh's
# rdma_dmabuf group). tests/preload/gpualloc.c stands in for hipMalloc:
# perftest's memalign()ed buffers become vgem BOs mapped as libhsakmt
# maps GPU memory, which ibv_reg_mr() cannot pin (EFAULT).
#
#   preload-guest.sh <libstrixpeer-preload.so> <libspgpualloc.so>
#   preload-guest.sh none <libspgpualloc.so>
#
# The second form runs the same programs with no preload, under the real
# peer-memory core (tests/vm/guest-suite.sh's realcore part, its rxe asking
# the core as mlx5 does): the programs' own plain ibv_reg_mr() calls on the
# GPU memory succeed because the core asks strixpeer's PeerDirect client,
# which claims the range (its peer_claims counter grows by at least one per
# side); nothing goes through a dma-buf. Logs then in $SP_OUT/realcore-engines/.
#
# For ib_write_bw and ib_read_bw, rxe0 (client) to rxe1 (server), both
# sides on "GPU memory":
#   - both sides register through the dma-buf and the run completes with
#     a bandwidth line. The preload says "registered through its dma-buf"
#     only after libibverbs' own ibv_reg_mr failed with EFAULT on that
#     memory, so each such line is also the control. (A run without the
#     preload is not made: perftest 4.5-0.17's client then dies in
#     librdmacm on its -R error path, a general protection fault the
#     kernel logs and the suite's kernel_log_clean rightly counts.)
# perftest does not check the bytes it moves (tests/guest/rdma_dmabuf.c's
# preload cases do, every byte). Then UCX: examples/ucx_put on that memory
# on both sides, every byte checked by the program; and Open MPI + UCX:
# examples/mpi_allreduce with its malloc-side buffers on that memory, every
# step checked by the program. Prints TAP; logs in
# $SP_OUT/preload/.
set -u
preload=$1
gpualloc=$2
if [ "$preload" = none ]; then
	pl=$gpualloc
	how=through_the_real_core
	out=$SP_OUT/realcore-engines
else
	pl="$preload $gpualloc"
	how=with_the_preload
	out=$SP_OUT/preload
fi
mkdir -p "$out"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
. tests/lib/tap.sh

# 1 MiB messages on the 2 MiB GPU buffer, 20 of them: perftest's TX depth
# shrinks to the count, so each run still fills a whole send queue with
# RDMA writes (reads) on the registered memory; 200 proved nothing more,
# and rxe under TCG moves some 10 MB/s (200: about 60 s of the two
# tools' time on a loaded host, 20: about 18 s)
size=$((1 << 20))
iters=20
port=18700

# one perftest run: run <name> <tool> <LD_PRELOAD>; 0 when both sides exit 0
run() {
	local name=$1 tool=$2 pl=$3 spid rc src
	port=$((port + 1))
	env LD_PRELOAD="$pl" STRIXPEER_PRELOAD_DEBUG=1 SP_GPUALLOC_LOG=1 \
		timeout 300 "$tool" -d rxe1 -R -s $size -n $iters -p $port \
		> "$out/$name-server.log" 2>&1 &
	spid=$!
	# the client retries its connect until the server listens (bounded)
	rc=1
	for _ in $(seq 30); do
		# (in its own shell: a crash is reported into its log, not the TAP)
		bash -c '"$@"; exit $?' client env LD_PRELOAD="$pl" STRIXPEER_PRELOAD_DEBUG=1 \
			SP_GPUALLOC_LOG=1 timeout 300 "$tool" -d rxe0 -R -s $size -n $iters \
			-p $port 198.18.0.2 > "$out/$name-client.log" 2>&1
		rc=$?
		# anything but "could not connect yet" is the answer
		grep -q -i -E 'unable to perform rdma_client function|Unable to init the socket|Couldn.t connect' \
			"$out/$name-client.log" || break
		kill -0 $spid 2> /dev/null || break
		sleep 1
	done
	src=0
	# a client that failed leaves its server waiting for a peer: end it
	[ $rc -eq 0 ] || kill $spid 2> /dev/null
	if ! timeout 120 tail --pid=$spid -f /dev/null; then
		echo "# $name: server still running after the client ended; killing it" >> "$out/$name-server.log"
		kill $spid 2> /dev/null
	fi
	wait $spid || src=$?
	echo "client exit $rc, server exit $src" > "$out/$name-exit"
	[ $rc -eq 0 ] && [ $src -eq 0 ]
}

claims() {	# strixpeer's peer_claims counter, or -1 when it cannot be read
	build/strixpeerctl -j stats 2> /dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["peer_claims"])' 2> /dev/null || echo -1
}
# registered_both <what> <peer_claims before> <log> <log>: each side had GPU
# memory, and the preload registered it through the dma-buf (the case
# <what>_both_sides_registered_gpu_memory_through_the_dmabuf) - or, with
# no preload, strixpeer's PeerDirect client claimed it for each side's
# plain ibv_reg_mr() (..._through_the_peer_client)
registered_both() {
	local what=$1 c0=$2 ok=0 c
	shift 2
	c=$(claims)
	for log in "$@"; do
		grep -q 'GPU memory at' "$log" || ok=1
		if [ "$preload" = none ]; then
			! grep -q 'strixpeer-preload' "$log" || ok=1
		else
			grep -q 'registered through its dma-buf' "$log" || ok=1
		fi
	done
	if [ "$preload" = none ]; then
		[ $((c - c0)) -ge $# ] || ok=1
		result $ok "${what}_registered_gpu_memory_through_the_peer_client" \
			"peer_claims $c0 -> $c; $(grep -h 'gpualloc' "$@" | head -8)"
	else
		result $ok "${what}_registered_gpu_memory_through_the_dmabuf" \
			"$(grep -h 'strixpeer-preload\|gpualloc' "$@" | head -8)"
	fi
}

# The debug kernel under TCG moves these megabytes too slowly (perftest and
# ucx_put hit their 300 s timeouts there); its rows do not run there
# (tests/vm/suite.tab), so this skip is only reached when asked for by name.
# rdma_dmabuf's sp_reg_mr and vgem cases take the kernel paths on it.
if [ -e /sys/kernel/debug/kmemleak ]; then
	skip "perftest_and_ucx_$how" "engines run on the non-debug kernels; on the debug kernel rdma_dmabuf takes the same kernel paths"
	finish
fi
if ! command -v ib_write_bw > /dev/null; then
	skip perftest_present "perftest is not installed in the VM"
	finish
fi
for tool in ib_write_bw ib_read_bw; do
	c0=$(claims)
	run "$tool" "$tool" "$pl"
	prc=$?
	result $prc "${tool}_on_gpu_memory_completes_$how" \
		"$(cat "$out/$tool-exit") $(tail -8 "$out/$tool-client.log") $(tail -8 "$out/$tool-server.log")"
	registered_both "${tool}_both_sides" "$c0" \
		"$out/$tool-client.log" "$out/$tool-server.log"
	# the result line: size, iterations, bandwidths
	grep -q -E "^ *$size +$iters " "$out/$tool-client.log"
	result $? "${tool}_reports_a_bandwidth" "$(tail -5 "$out/$tool-client.log")"
	while read -r line; do
		cases+=("# $tool: $line")
	done < <(grep -h -E "^ *$size +$iters " "$out/$tool-client.log")
done

# UCX: examples/ucx_put with both sides' buffers from memalign()
# (UCX_PUT_MEM), made GPU memory by the stand-in, registered by UCX's own
# ibv_reg_mr calls through the preload; the program checks every byte.
ucxport=13390
listening() {	# listening <port> <pid>: until it listens, or the pid is gone (120 s)
	for _ in $(seq 1200); do
		ss -Hltn "sport = :$1" | grep -q . && return 0
		kill -0 "$2" 2> /dev/null || return 1
		sleep 0.1
	done
	return 1
}
export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_TLS=rc,self
ex=build/examples
ucx_put_case() {	# the target on rxe1, the initiator on rxe0
	c0=$(claims)
	env UCX_PUT_MEM=memalign LD_PRELOAD="$pl" STRIXPEER_PRELOAD_DEBUG=1 \
		SP_GPUALLOC_LOG=1 UCX_NET_DEVICES=rxe1:1 timeout 300 stdbuf -oL -eL $ex/ucx_put -l $ucxport \
		> "$out/ucx-target.log" 2>&1 &
	tpid=$!
	irc=1
	if listening $ucxport $tpid; then
		env UCX_PUT_MEM=memalign LD_PRELOAD="$pl" STRIXPEER_PRELOAD_DEBUG=1 \
			SP_GPUALLOC_LOG=1 UCX_NET_DEVICES=rxe0:1 timeout 300 stdbuf -oL -eL \
			$ex/ucx_put 198.18.0.2 $ucxport $((16 << 20)) > "$out/ucx-initiator.log" 2>&1
		irc=$?
	else
		echo "# the target never listened on $ucxport" >> "$out/ucx-target.log"
		kill $tpid 2> /dev/null
	fi
	trc=0
	wait $tpid || trc=$?
	[ $irc -eq 0 ] && [ $trc -eq 0 ] &&
		[ "$(grep -c 'put and got back, every byte verified' "$out/ucx-initiator.log")" -eq 7 ]
	result $? "ucx_put_4KiB_to_16MiB_on_gpu_memory_${how}_every_byte_verified" \
		"initiator exit $irc, target $trc: $(tail -6 "$out/ucx-initiator.log") $(tail -6 "$out/ucx-target.log")"
	registered_both ucx_both_sides "$c0" "$out/ucx-initiator.log" "$out/ucx-target.log"
}
if [ -x $ex/ucx_put ]; then
	ucx_put_case
else
	skip "ucx_put_on_gpu_memory_$how" "no $ex/ucx_put (make examples; libucx-dev)"
fi

# Open MPI + UCX: examples/mpi_allreduce, one rank per rxe device. Its
# "malloc" buffers come from aligned_alloc(), which the stand-in makes GPU
# memory; UCX's rendezvous registers them with its own ibv_reg_mr calls,
# which the preload turns into dma-buf MRs. The program checks one round
# trip per ping-pong size and every allreduce, and exits 0 only when all
# were right. Each rank's stderr (the preload's and the stand-in's lines)
# goes to its own log.
if [ ! -x $ex/mpi_allreduce ] || ! command -v mpirun > /dev/null; then
	skip "mpi_allreduce_on_gpu_memory_$how" "no $ex/mpi_allreduce or mpirun (make examples; libopenmpi-dev)"
	finish
fi
rm -f "$out"/mpi-rank*.log
c0=$(claims)
# shellcheck disable=SC2016 # expanded by each rank's shell
SP_PL=$pl SP_PL_OUT=$out timeout 300 mpirun --allow-run-as-root --oversubscribe \
	-np 2 --mca pml ucx --mca btl self,vader -x UCX_UD_VERBS_ETH_DGID_CHECK=n -x UCX_TLS=rc,self \
	-x SP_PL -x SP_PL_OUT -x STRIXPEER_PRELOAD_DEBUG=1 -x SP_GPUALLOC_LOG=1 \
	sh -c 'r=$OMPI_COMM_WORLD_RANK; UCX_NET_DEVICES=rxe$r:1 LD_PRELOAD=$SP_PL exec "$0" "$@" 2> "$SP_PL_OUT/mpi-rank$r.log"' \
	$ex/mpi_allreduce $((4 << 20)) $((8 << 20)) 10 1 > "$out/mpi.log" 2>&1
mrc=$?
result $mrc "mpi_allreduce_on_gpu_memory_${how}_every_step_verified" \
	"mpirun exit $mrc: $(tail -8 "$out/mpi.log") $(tail -4 "$out"/mpi-rank*.log 2> /dev/null)"
registered_both mpi_both_ranks "$c0" "$out/mpi-rank0.log" "$out/mpi-rank1.log"
while read -r line; do
	cases+=("# mpi_allreduce: $line")
done < <(grep -h '^allreduce ' "$out/mpi.log")
finish
