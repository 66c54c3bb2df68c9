#!/bin/bash
# Where ibv_reg_mr's time goes, per memory kind (docs/performance.md):
# runs inside the VM as root, cwd = repo root (after rxe-setup.sh and the
# module are loaded, or it does both):
#
#   bench-regtrace.sh <strixpeer.ko> [SIZE [KINDS]]     e.g. 256M strixpeer,malloc,thp
#
# For each kind, 'strixpeerctl bench --ops host' allocates SIZE once and
# registers it on rxe0 while ftrace's function_graph tracer records
# rxe_mr_init_user() and what it calls, five levels deep (SP_REGTRACE_DEPTH); the summary
# (calls and total time per function and depth) goes to
# $SP_OUT/regtrace-<kind>.txt, the raw trace beside it.
set -u
ko=$1
size=${2:-256M}
kinds=${3:-strixpeer,malloc,thp}
out=${SP_OUT:?}
T=/sys/kernel/tracing
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

[ -e /dev/strixpeer ] || {
	tests/vm/rxe-setup.sh > "$out/rxe-setup.log" 2>&1 || exit 1
	modprobe drm 2> /dev/null
	insmod "$ko" || exit 1
	udevadm settle 2> /dev/null || sleep 1
}
[ -e $T/trace ] || mount -t tracefs nodev $T
for k in ${kinds//,/ }; do
	echo 0 > $T/tracing_on
	echo nop > $T/current_tracer
	echo > $T/trace
	echo 20000 > $T/buffer_size_kb
	echo rxe_mr_init_user > $T/set_graph_function
	echo "${SP_REGTRACE_DEPTH:-5}" > $T/max_graph_depth
	echo 1 > $T/options/funcgraph-tail 2> /dev/null
	echo function_graph > $T/current_tracer
	echo 1 > $T/tracing_on
	taskset -c 0 build/strixpeerctl bench --ops host --kinds "$k" --repeat 1 --size "$size" \
		--quiet > "$out/regtrace-$k-bench.txt" 2>&1
	echo 0 > $T/tracing_on
	cat $T/trace > "$out/regtrace-$k.raw"
	python3 - "$out/regtrace-$k.raw" "$k" > "$out/regtrace-$k.txt" << 'PY'
import re, sys, collections
calls = collections.Counter()
usec = collections.Counter()
stack = []
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s*\d+\)\s+(?:[+!#*@$]\s*)?([\d.]+ us)?\s*\|(\s*)(.*)$", line)
    if not m:
        continue
    dur, indent, what = m.groups()
    depth = len(indent) // 2
    what = what.strip()
    if what.endswith("{"):
        stack.append(what[:-1].strip().rstrip("()"))
        continue
    if what.startswith("}"):
        name = stack.pop() if stack else "?"
        tail = re.search(r"/\* (\S+) \*/", what)
        name = tail.group(1) if tail else name
    else:
        name = what.rstrip(";").rstrip("()")
    if dur:
        t = float(dur.split()[0])
        calls[(depth, name)] += 1
        usec[(depth, name)] += t
print("kind %s: function_graph under rxe_mr_init_user (depth, calls, total ms)" % sys.argv[2])
for (depth, name), n in sorted(calls.items(), key=lambda kv: (kv[0][0], -usec[kv[0]])):
    print("%s%-40s %8d %10.2f" % ("  " * depth, name, n, usec[(depth, name)] / 1000))
PY
	cat "$out/regtrace-$k.txt"
done
echo nop > $T/current_tracer
