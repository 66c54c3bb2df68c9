#!/bin/bash
# Runs inside the VM (tests/vm/run-vm.sh) for 'make bench', as root, cwd =
# repo root:
#
#   bench-guest.sh <build/kmod/KVER/strixpeer.ko> [strixpeerctl bench options...]
#
# Two Soft-RoCE "nodes" (tests/vm/rxe-setup.sh), the module, 2 MiB hugetlb
# pages for the hugetlb kind, then 'strixpeerctl bench' (client on cpu 0 /
# rxe0, its server on cpu 1 / rxe1) writing $SP_OUT/bench.{json,txt,svg},
# then the calibration: perftest's ib_write_bw and ib_write_lat over the
# same link, pinned the same way, with the iterations our
# run used, interleaved with our own polled runs $SP_BENCH_PERFTEST_REPEAT
# times, compared by bench-calibrate.py. Then, where the kernel has the
# real peer-memory core (6.12), a second run under it for the
# gpu-peerdirect kind ($SP_OUT/realcore/; SP_BENCH_REALCORE=0 leaves it out).
# SP_BENCH_ALLOCATORS="pages shmem" runs 'strixpeerctl bench' once per
# value of the module's allocator parameter instead of once, in this boot,
# into $SP_OUT/alloc-<value>/ (issue 48's side-by-side measurement); the
# parameter is back at pages afterwards.
set -u
ko=$1
shift
out=${SP_OUT:?}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
rc=0

tests/vm/rxe-setup.sh > "$out/rxe-setup.log" 2>&1 || { echo "bench: Soft-RoCE setup failed"; exit 1; }
# strixpeer links against drm (zero-change PeerDirect); vgem's BOs are the
# gpu-dmabuf kind's GPU memory, which the module claims as amdgpu's
modprobe -a drm vgem 2> /dev/null
insmod "$ko" claim_gem_drivers=amdgpu,vgem || { echo "bench: insmod $ko failed"; exit 1; }
udevadm settle 2> /dev/null || sleep 1
# The dma-buf-capable rxe (tests/vm/build-rxe-dmabuf.sh) where this kernel
# has one: gpu-dmabuf registers through ibv_reg_dmabuf_mr(); elsewhere the
# kind says why it cannot register
rxedb=$(dirname "$ko")/rxe-dmabuf
if [ -f "$rxedb/env" ]; then
	tests/vm/rxe-dmabuf.sh load "$rxedb" || { echo "bench: the dma-buf rxe does not load"; exit 1; }
elif [ -f "$rxedb/failed" ]; then
	echo "bench: the dma-buf rxe was not built: $(cat "$rxedb/failed")"
	exit 1
else
	echo "bench: Debian's rxe (no dma-buf MRs): $(cat "$rxedb/unsupported" 2> /dev/null || echo "no $rxedb")"
fi

# The client allocates on node 0 (cpu 0), the server on node 1 (cpu 1):
# SP_BENCH_HUGETLB_PAGES 2 MiB pages on node 0 (default 530: a 1 GiB
# buffer and the RDMA buffers), 16 on node 1.
for n in 0 1; do
	f=/sys/devices/system/node/node$n/hugepages/hugepages-2048kB/nr_hugepages
	want=16
	[ $n = 0 ] && want=${SP_BENCH_HUGETLB_PAGES:-530}
	[ -w "$f" ] && echo "$want" > "$f"
	echo "bench: node $n: $(cat "$f" 2> /dev/null) hugetlb pages of 2 MiB"
done

allocparam=/sys/module/strixpeer/parameters/allocator
if [ -n "${SP_BENCH_ALLOCATORS:-}" ]; then
	for a in $SP_BENCH_ALLOCATORS; do
		if ! echo "$a" > "$allocparam"; then
			echo "bench: allocator=$a refused by the module"
			rc=1
			continue
		fi
		mkdir -p "$out/alloc-$a"
		echo "bench: allocator=$(cat "$allocparam"): strixpeerctl bench $*"
		start=$(date +%s)
		taskset -c 0 build/strixpeerctl bench --out "$out/alloc-$a" "$@" \
			> "$out/alloc-$a/bench-stdout.txt" 2> "$out/alloc-$a/bench-progress.txt"
		brc=$?
		echo "bench: allocator=$a: exit $brc, $(( $(date +%s) - start )) s"
		[ $brc -eq 0 ] || rc=1
		cat "$out/alloc-$a/bench-stdout.txt"
	done
	echo pages > "$allocparam" || rc=1
else
	echo "bench: strixpeerctl bench $*"
	start=$(date +%s)
	taskset -c 0 build/strixpeerctl bench --out "$out" "$@" > "$out/bench-stdout.txt" 2> "$out/bench-progress.txt"
	brc=$?
	echo "bench: strixpeerctl bench exit $brc, $(( $(date +%s) - start )) s"
	[ $brc -eq 0 ] || rc=1
	cat "$out/bench-stdout.txt"
fi

# Calibration: perftest's ib_write_bw / ib_write_lat cannot wait for
# completions by events ("Events feature not available on WRITE verb"), so
# they are compared with a polled run of our own: malloc, RDMA WRITE, 64 KiB
# to 8 MiB, interleaved with perftest (ours, then perftest's per size) and
# repeated; perftest gets the iterations our run used for each size.
# perftest connects by its TCP exchange here, not -R: with -R its server
# busy-polls a CQ for the closing handshake during the whole test (100% of
# cpu 1 in top), which halves Soft-RoCE's throughput, whose work runs on
# those same CPUs (docs/performance.md); our server sleeps in a socket read.
reps=${SP_BENCH_PERFTEST_REPEAT:-3}
if [ "$reps" -gt 0 ]; then
	cal=$out/calibration
	mkdir -p "$cal"
	gid=
	for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		n=${g##*/}
		case $(cat "$g" 2> /dev/null) in
		*ffff:c612:0001) [ "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/"$n" 2> /dev/null)" = "RoCE v2" ] && gid=$n ;;
		esac
	done
	[ -n "$gid" ] || { echo "bench: no RoCE v2 IPv4 GID on rxe0"; gid=1; }
	port=18600
	for r in $(seq "$reps"); do
		# shellcheck disable=SC2086 # options word-split on purpose
		taskset -c 0 build/strixpeerctl -j bench --kinds malloc --ops write --repeat 1 \
			--min-msg 64K --max-msg 8M ${SP_BENCH_CAL_ARGS:---iters 200 --max-bytes 8M --lat-iters 50} \
			--quiet > "$cal/bench-$r.json" 2> "$cal/bench-$r.err" || rc=1
		python3 - "$cal/bench-$r.json" > "$cal/sizes-$r" << 'EOF' || rc=1
import json, sys
d = json.load(open(sys.argv[1]))
seen = {}
for s in d["rdma"]:
    if s["figure"] in ("write_bw", "write_lat"):
        seen.setdefault(s["msg_size"], {})[s["figure"]] = s["iters"]
for size in sorted(seen):
    if size in (65536, 1 << 20) or size == max(seen):
        print(size, seen[size].get("write_bw", 0), seen[size].get("write_lat", 0))
EOF
		while read -r sz bw_n lat_n; do
			for t in bw lat; do
				n=$bw_n
				[ $t = lat ] && n=$lat_n
				[ "$n" -gt 0 ] || continue
				port=$((port + 1))
				taskset -c 1 "ib_write_$t" -d rxe1 -x "$gid" -s "$sz" -n "$n" -p $port \
					> "$cal/server-$t-$sz-$r.txt" 2>&1 &
				spid=$!
				sleep 1
				timeout 600 taskset -c 0 "ib_write_$t" -d rxe0 -x "$gid" -s "$sz" -n "$n" -p $port \
					198.18.0.2 > "$cal/ib_write_$t-$sz-$r.txt" 2>&1 || rc=1
				wait $spid
			done
		done < "$cal/sizes-$r"
	done
	python3 tests/vm/bench-calibrate.py "$cal" > "$out/calibration.txt"
	case $? in
	0) ;;
	3) echo "bench: calibration: strixpeerctl and perftest differ by more than 10% (below)" ;;
	*) rc=1 ;;
	esac
	cat "$out/calibration.txt"
else
	echo "bench: no calibration (SP_BENCH_PERFTEST_REPEAT=0)"
fi

# The gpu-peerdirect kind under the real peer-memory core
# (tests/vm/build-realcore.sh: 6.12 only), in a second run of its own in
# this boot, beside malloc and THP, whose ratios it is read against: the
# real core's rxe replaces the one above (it cannot take dma-buf MRs, so
# gpu-dmabuf and gpu-peerdirect never share a run). Results in
# $out/realcore/.
realcore=$(dirname "$ko")/realcore
if [ -f "$realcore/env" ] && [ "${SP_BENCH_REALCORE:-1}" != 0 ]; then
	rmmod strixpeer || rc=1
	[ ! -f "$rxedb/env" ] || tests/vm/rxe-dmabuf.sh unload || rc=1
	if tests/vm/realcore.sh load "$realcore" claim_gem_drivers=amdgpu,vgem > "$out/realcore-load.log" 2>&1; then
		mkdir -p "$out/realcore"
		echo "bench: under the real core: strixpeerctl bench $* --kinds malloc,thp,gpu-peerdirect"
		start=$(date +%s)
		taskset -c 0 build/strixpeerctl bench --out "$out/realcore" "$@" --kinds malloc,thp,gpu-peerdirect \
			> "$out/realcore/bench-stdout.txt" 2> "$out/realcore/bench-progress.txt"
		brc=$?
		echo "bench: under the real core: exit $brc, $(( $(date +%s) - start )) s"
		[ $brc -eq 0 ] || rc=1
		cat "$out/realcore/bench-stdout.txt"
	else
		echo "bench: the real core does not load: $(tail -n 3 "$out/realcore-load.log")"
		rc=1
	fi
else
	echo "bench: no gpu-peerdirect run: $(cat "$realcore/unsupported" 2> /dev/null || echo "no real core for this kernel (tests/vm/build-realcore.sh)")"
fi
exit $rc
