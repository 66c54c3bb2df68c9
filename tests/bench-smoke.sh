#!/bin/bash
# shellcheck disable=SC2317 # the check functions are called through ok()
# SPDX-License-Identifier: MIT
# A smoke test of 'strixpeerctl bench' in the VM (make check): a tiny run
# on the two Soft-RoCE nodes works and prints well-formed, complete JSON
# and the ratio table; bad options and an unreachable server are reported
# clearly. Asserts nothing about speed: that is what 'make bench' measures.
#
#   bench-smoke.sh             the smoke test (Debian's rxe: no dma-buf MRs)
#   bench-smoke.sh gpu-dmabuf  the gpu-dmabuf kind end to end: run with the
#                              dma-buf-capable rxe loaded (tests/vm/rxe-dmabuf.sh)
#                              and a module that claims vgem's mappings
set -u
cd "$(dirname "$0")/.." || exit 1
ctl=build/strixpeerctl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0
ok() {	# ok <name> <command...>
	local name=$1
	shift
	n=$((n + 1))
	if "$@" > "$tmp/out.$n" 2>&1; then
		echo "ok $n $name"
	else
		echo "not ok $n $name"
		sed 's/^/# /' "$tmp/out.$n" | tail -n 15
		fail=1
	fi
}
echo "TAP version 13"

# A tiny run of the gpu-dmabuf kind beside malloc (the dma-buf rxe): every
# figure, the BO registered through its dma-buf, ratios against malloc.
gpu_dmabuf_run() {
	taskset -c 0 "$ctl" -j bench --size 8M --repeat 2 --kinds malloc,gpu-dmabuf \
		--min-msg 4K --max-msg 8K --iters 8 --max-bytes 64K --lat-iters 5 --quiet \
		> "$tmp/g.json" || return 1
	python3 - "$tmp/g.json" << 'EOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
kinds = {k["kind"]: k for k in d["kinds"]}
g = kinds["gpu-dmabuf"]
assert g["available"], g
assert g["reg_path"] == "dmabuf", g
n = 0
for s in d["host"] + d["rdma"]:
    v = s["kinds"]["gpu-dmabuf"]
    assert len(v["samples"]) == 2 and all(x > 0 and math.isfinite(x) for x in v["samples"]), (s["figure"], v)
    assert v["vs_malloc"] > 0 and math.isfinite(v["vs_malloc"]), (s["figure"], v)
    n += 1
assert {s["figure"] for s in d["rdma"]} == {"write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat"}, d["rdma"]
print("gpu-dmabuf: registered by %s, %d figures with ratios to malloc" % (g["reg_path"], n))
EOF
}
if [ "${1:-}" = gpu-dmabuf ]; then
	echo "1..1"
	ok "bench_gpu_dmabuf_kind_every_figure" gpu_dmabuf_run
	exit $fail
fi
echo "1..7"

# shellcheck disable=SC2054 # commas inside option values
tiny=(--size 8M --repeat 2 --kinds strixpeer,malloc,thp --min-msg 4K --max-msg 8K
	--iters 8 --max-bytes 64K --lat-iters 5 --events --quiet)

check_json() {
	taskset -c 0 "$ctl" -j bench "${tiny[@]}" --out "$tmp/o" > "$tmp/b.json" || return 1
	python3 - "$tmp/b.json" << 'EOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["strixpeer_bench"] == 1 and d["config"]["mode"] == "local", d["config"]
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
kinds = {k["kind"]: k for k in d["kinds"]}
for k in ("strixpeer", "malloc", "thp"):
    assert kinds[k]["available"], (k, kinds[k]["reason"])
    assert kinds[k]["reg_path"] == "plain", kinds[k]
    assert kinds[k]["mtt_page_size"] >= 4096 and kinds[k]["dma_segments"] >= 1, kinds[k]
for k in ("hugetlb", "dmabuf", "gpu-dmabuf"):
    assert not kinds[k]["available"] and kinds[k]["reason"] == "not selected", kinds[k]
def full(s, ratios):
    for k in ("strixpeer", "malloc", "thp"):
        v = s["kinds"][k]
        assert len(v["samples"]) == 2 and v["min"] <= v["median"] <= v["max"], (s["figure"], v)
        assert all(x > 0 and math.isfinite(x) for x in v["samples"]), (s["figure"], v)
    if ratios:
        assert abs(s["kinds"]["malloc"]["vs_malloc"] - 1) < 1e-9, s
        assert abs(s["kinds"]["thp"]["vs_thp"] - 1) < 1e-9, s
host = {s["figure"]: s for s in d["host"]}
assert set(host) == {"alloc", "reg", "dereg", "memcpy_to", "memcpy_from", "free"}, set(host)
for s in host.values():
    full(s, True)
rdma = {(s["figure"], s["msg_size"]) for s in d["rdma"]}
want = {(f, z) for f in ("write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat")
        for z in (4096, 8192)}
assert rdma == want, rdma ^ want
for s in d["rdma"]:
    full(s, True)
    assert s["iters"] >= 5, s
print("json complete: %d host and %d RDMA figures" % (len(host), len(rdma)))
EOF
}
ok "bench_json_well_formed_and_complete" check_json
ok "bench_out_dir_has_json_table_svg" test -s "$tmp/o/bench.json" -a -s "$tmp/o/bench.txt" -a -s "$tmp/o/bench.svg"
ok "bench_table_has_ratios" grep -q "x malloc" "$tmp/o/bench.txt"

bad_option() {
	"$ctl" bench --kinds strixpeer,nosuch > "$tmp/e" 2>&1
	[ $? -eq 2 ] && grep -q 'unknown "nosuch"' "$tmp/e" && cat "$tmp/e"
}
ok "bench_bad_kind_refused" bad_option

bad_size() {
	"$ctl" bench --size 1000 --ops host > "$tmp/e" 2>&1
	[ $? -eq 1 ] && grep -q "multiple of 4 KiB" "$tmp/e" && cat "$tmp/e"
}
ok "bench_bad_size_refused" bad_size

# Nobody serves there: the host figures still come, RDMA says why, and the
# exit status is 1 (the RDMA part asked for could not run).
unreachable() {
	"$ctl" -j bench 127.0.0.1 --port 9 --size 4M --repeat 1 --kinds malloc --quiet \
		> "$tmp/u.json"
	[ $? -eq 1 ] || return 1
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = d["rdma_unavailable"]
assert r and "cannot reach the bench server" in r, r
assert d["host"] and not d["rdma"], d
print(r)' "$tmp/u.json"
}
ok "bench_unreachable_server_reported" unreachable

# Debian's rxe takes no dma-buf MRs: the GPU BO maps and copies, its
# registration fails with sp_reg_mr()'s account of the node's options.
gpu_without_dmabuf_mrs() {
	"$ctl" -j bench --size 4M --repeat 1 --kinds gpu-dmabuf,malloc --ops host --quiet \
		> "$tmp/n.json" || return 1
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g = {k["kind"]: k for k in d["kinds"]}["gpu-dmabuf"]
assert g["available"] and g["reg_path"] == "failed", g
assert g["reason"].startswith("registration: ") and "dma-buf" in g["reason"], g
memcpy = {s["figure"]: s for s in d["host"]}["memcpy_to"]["kinds"]["gpu-dmabuf"]
assert memcpy["samples"] and memcpy["median"] > 0, memcpy
print(g["reason"])' "$tmp/n.json"
}
ok "bench_gpu_dmabuf_without_dmabuf_mrs_says_why" gpu_without_dmabuf_mrs
exit $fail
