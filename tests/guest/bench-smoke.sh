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
#   bench-smoke.sh gpu-peerdirect  the gpu-peerdirect kind end to end: run
#                              under the real peer-memory core (tests/vm/realcore.sh)
set -u
cd "$(dirname "$0")/../.." || exit 1
ctl=build/strixpeerctl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/lib/tap-run.sh
. tests/lib/tap-run.sh
echo "TAP version 13"

# A tiny run of a GPU kind beside malloc: every figure, the BO registered
# (gpu_run <kind> <reg_path>: gpu-dmabuf through its dma-buf on the dma-buf
# rxe, gpu-peerdirect by plain ibv_reg_mr() under the real core - where
# strixpeer's peer_claims counter then grows), ratios against malloc.
claims() {	# strixpeer's peer_claims counter, or -1 when it cannot be read
	build/strixpeerctl -j stats 2> /dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["peer_claims"])' 2> /dev/null || echo -1
}
gpu_run() {
	local c0
	c0=$(claims)
	taskset -c 0 "$ctl" -j bench --size 8M --repeat 2 --kinds "malloc,$1" \
		--min-msg 4K --max-msg 8K --iters 8 --max-bytes 64K --lat-iters 5 --quiet \
		> "$tmp/g.json" || return 1
	python3 - "$tmp/g.json" "$1" "$2" "$c0" "$(claims)" << 'EOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
kind, path, c0, c1 = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
kinds = {k["kind"]: k for k in d["kinds"]}
g = kinds[kind]
assert g["available"], g
assert g["reg_path"] == path, g
# every repetition registers the BO once on each side (both in this VM)
assert kind != "gpu-peerdirect" or c1 - c0 >= 2, ("peer_claims", c0, c1)
n = 0
for s in d["host"] + d["rdma"]:
    v = s["kinds"][kind]
    assert len(v["samples"]) == 2 and all(x > 0 and math.isfinite(x) for x in v["samples"]), (s["figure"], v)
    assert v["vs_malloc"] > 0 and math.isfinite(v["vs_malloc"]), (s["figure"], v)
    n += 1
assert {s["figure"] for s in d["rdma"]} == {"write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat"}, d["rdma"]
print("%s: registered by %s, %d figures with ratios to malloc; peer_claims %d -> %d" % (kind, g["reg_path"], n, c0, c1))
EOF
}
case ${1:-} in
gpu-dmabuf)
	echo "1..1"
	ok "bench_gpu_dmabuf_kind_every_figure" gpu_run gpu-dmabuf dmabuf
	exit $fail ;;
gpu-peerdirect)
	echo "1..1"
	ok "bench_gpu_peerdirect_kind_every_figure" gpu_run gpu-peerdirect plain
	exit $fail ;;
esac
echo "1..8"

# shellcheck disable=SC2054 # commas inside option values
tiny=(--size 8M --repeat 2 --kinds strixpeer,malloc,thp --min-msg 4K --max-msg 8K
	--iters 8 --max-bytes 64K --lat-iters 5 --events --quiet)

check_json() {
	# the report is read even when bench failed: its rdma_unavailable says why
	local st=0
	taskset -c 0 "$ctl" -j bench "${tiny[@]}" --out "$tmp/o" > "$tmp/b.json" || st=$?
	python3 - "$tmp/b.json" << 'EOF' && [ "$st" = 0 ]
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["strixpeer_bench"] == 1 and d["config"]["mode"] == "local", d["config"]
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
kinds = {k["kind"]: k for k in d["kinds"]}
for k in ("strixpeer", "malloc", "thp"):
    assert kinds[k]["available"], (k, kinds[k]["reason"])
    assert kinds[k]["reg_path"] == "plain", kinds[k]
    assert kinds[k]["mtt_page_size"] >= 4096 and kinds[k]["dma_segments"] >= 1, kinds[k]
for k in ("hugetlb", "dmabuf", "gpu-dmabuf", "gpu-peerdirect"):
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

# No peer-memory core (Debian's RDMA stack): plain ibv_reg_mr() of the GPU
# BO fails, and the report says so.
gpu_without_peer_core() {
	"$ctl" -j bench --size 4M --repeat 1 --kinds gpu-peerdirect,malloc --ops host --quiet \
		> "$tmp/p.json" || return 1
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g = {k["kind"]: k for k in d["kinds"]}["gpu-peerdirect"]
assert g["available"] and g["reg_path"] == "failed", g
assert g["reason"] == "registration: ibv_reg_mr: Bad address (no peer-memory core asked strixpeer'"'"'s client)", g
print(g["reason"])' "$tmp/p.json"
}
ok "bench_gpu_peerdirect_without_peer_core_says_why" gpu_without_peer_core
exit $fail
