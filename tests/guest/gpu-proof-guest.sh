#!/bin/bash
# SPDX-License-Identifier: MIT
# strixpeerctl gpu in the VM with the suite's stand-in runtime
# (build/tests/libspgpurt.so on sp_gpusim and sp_kfdsim, both loaded by
# tests/vm/guest-suite.sh) over the two Soft-RoCE devices: gpu runtime
# finds it; a normal gpu proof finds a fence for every cell it can run,
# the routes reg_mr and staged (host staging) and the kinds sp-hostreg and
# sp-import (a strixpeer buffer's dma-buf, hipImportExternalMemory) among
# them (the stand-in applies GPU writes at once: "none" everywhere); with
# SP_GPURT_HOLD=device the stand-in holds GPU writes back until
# hipDeviceSynchronize, and the matrix must say "device" for every
# gpu-write cell of GPU-written memory, the staged route's included (its
# hipMemcpy does not wait for the proof's non-blocking stream), and
# "none" for peer-write; with SP_GPURT_HOLD=stream, "stream". sp_reg_mr
# registers the strixpeer kinds; without a strixpeer device their cells
# say why. With --numbers and --out, every cell with a verdict has its
# figures (RDMA WRITE for peer-write, READ for gpu-write, at each message
# size, positive, beside staged's), a cell "unavailable" or "never"
# (SP_GPURT_HOLD=lost: GPU writes never land) has none and says why,
# registration and CPU figures exist, the report says "stand-in", and
# proof.json, proof.txt and proof.svg parse. A stand-in verdict or figure
# says nothing about a real GPU. Two nodes (the two Soft-RoCE devices on
# their veth pair): gpu proof --serve on 198.18.0.2, gpu proof 198.18.0.2
# from 198.18.0.1 gives the loopback run's verdicts, a held-back write
# caught; the server stops on SIGTERM; no server, or bench's, is said.
# Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
ctl=$PWD/build/strixpeerctl
export STRIXPEER_HIP_LIB=$PWD/build/tests/libspgpurt.so STRIXPEER_HSA_LIB=$PWD/build/tests/libspgpurt.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/lib/tap-run.sh
. tests/lib/tap-run.sh
echo "TAP version 13"
if [ ! -e /sys/module/sp_gpusim ] || [ ! -e /dev/sp_kfdsim ]; then
	echo "1..0 # SKIP needs sp_gpusim and sp_kfdsim loaded (tests/vm/guest-suite.sh loads them)"
	exit 0
fi

runtime() {
	"$ctl" -j gpu runtime > "$tmp/rt.json" || return 1
	python3 - "$tmp/rt.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["hip_library"].endswith("libspgpurt.so"), d
assert d["hip_version"] == "6.4.0", d
assert len(d["gpus"]) == 1 and d["gpus"][0]["name"].startswith("sp_gpusim"), d
PY
}
ok runtime_finds_the_stand_in runtime

kinds=malloc,hip-malloc,host-coherent,managed,fine-grained,uncached,sp-hostreg,sp-import
# proof <name> <hold> [kinds routes] : the matrix as JSON in $tmp/<name>.json, checked by check.py
proof() {
	local k=${3:-$kinds} r=${4:-reg_mr,staged}
	SP_GPURT_HOLD=$2 taskset -c 0 "$ctl" -j gpu proof --kinds "$k" --routes "$r" \
		--size 64K --repeat 3 --local rxe0 --peer rxe1 --quiet > "$tmp/$1.json"
	local rc=$?
	cat "$tmp/$1.json"
	python3 - "$tmp/$1.json" "$2" "$rc" "$k" "$r" << 'PY'
import json, sys
d, hold, rc = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
kinds, routes = sys.argv[4].split(","), sys.argv[5].split(",")
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
assert d["node"]["rdma_device"] == "rxe0" and d["node"]["peer_device"] == "rxe1", d["node"]
cells = {(c["kind"], c["route"], c["direction"]): c for c in d["cells"]}
want_keys = {(k, r, dr) for k in kinds for r in routes for dr in ("gpu-write", "peer-write")}
assert set(cells) == want_keys, sorted(set(cells) ^ want_keys)
held = {"none": "none", "stream": "stream", "device": "device"}[hold]
for (kind, route, direction), c in cells.items():
    if route == "reg_mr" and kind in ("hip-malloc", "fine-grained", "uncached"):
        # a PFN mapping: rxe's plain ibv_reg_mr cannot pin it
        assert c["verdict"] == "unavailable" and "ibv_reg_mr" in c["reason"], c
        continue
    assert c["available"] and c["reason"] is None, c
    assert c["registration"] == {"reg_mr": "ibv_reg_mr", "staged": "staged",
                                 "sp_reg_mr": "plain"}[route], c
    assert all(f["trials"] == 3 for f in c["fences"]), c
    # staged: the GPU's non-blocking stream is not waited for by hipMemcpy
    want = "none" if kind == "malloc" or direction == "peer-write" else held
    assert c["verdict"] == want, (kind, route, direction, c["verdict"], want, c)
    assert not c["inconsistent"], c
    if want != "none":
        # the missing fence is seen, byte 0 first
        assert c["fences"][0]["right"] == 0 and c["fences"][0]["first_bad_byte"] == 0, c
assert rc == 0, rc
PY
}
ok proof_every_cell_has_a_fence proof normal none
ok proof_held_until_device_needs_device proof held-device device
ok proof_held_until_stream_needs_stream proof held-stream stream
ok proof_sp_reg_mr_of_strixpeer_buffers proof sp-reg-mr device sp-hostreg,sp-import sp_reg_mr

# Without a strixpeer device (/dev/null bound over /dev/strixpeer in a
# private mount namespace: the version handshake fails) the strixpeer
# kinds and sp_reg_mr say why; the staged route of malloc still runs.
no_module() {
	unshare -m --propagation private sh -c 'mount --bind /dev/null /dev/strixpeer &&
		exec "$0" -j gpu proof --kinds sp-hostreg,sp-import,malloc --routes sp_reg_mr,staged \
		--directions gpu-write --size 4K --repeat 1 --local rxe0 --peer rxe1 --quiet' \
		"$ctl" > "$tmp/nomod.json"
	local rc=$?
	cat "$tmp/nomod.json"
	python3 - "$tmp/nomod.json" "$rc" << 'PY'
import json, sys
d, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
cells = {(c["kind"], c["route"]): c for c in d["cells"]}
assert len(cells) == 6, sorted(cells)
for (kind, route), c in cells.items():
    if kind == "malloc" and route == "staged":
        assert c["available"] and c["verdict"] == "none" and c["registration"] == "staged", c
        continue
    assert c["verdict"] == "unavailable" and not c["available"], c
    assert "/dev/strixpeer" in c["reason"], c
    assert c["reason"].startswith("sp_reg_mr: " if kind == "malloc" else "no strixpeer buffer: "), c
assert rc == 0, rc
PY
}
if [ -e /dev/strixpeer ] && command -v unshare > /dev/null; then
	ok proof_without_strixpeer_says_why no_module
else
	n=$((n + 1))
	echo "ok $n proof_without_strixpeer_says_why # SKIP needs /dev/strixpeer (the module) and unshare"
fi
# numbers <name> <hold> <kinds> <routes> <want rc>: --numbers --out, checked by python3
numbers() {
	local d=$tmp/$1
	SP_GPURT_HOLD=$2 taskset -c 0 "$ctl" -j gpu proof --kinds "$3" --routes "$4" \
		--size 4K --repeat 1 --numbers --min-msg 4K --max-msg 8K --iters 4 \
		--local rxe0 --peer rxe1 --quiet --out "$d" > "$d.json"
	local rc=$?
	cat "$d.json"
	python3 - "$d" "$rc" "$5" "$3" "$4" << 'PY'
import json, sys, xml.etree.ElementTree as ET
d, rc, want_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kinds, routes = sys.argv[4].split(","), sys.argv[5].split(",")
out = json.load(open(d + ".json"))
assert json.load(open(d + "/proof.json")) == out, "proof.json differs from stdout"
assert out["report_version"] == 2, out["report_version"]
fg = out["figures"]
assert fg["stand_in"] is True and fg["source"].startswith("stand-in:"), fg
assert fg["msg_sizes"] == [4096, 8192], fg
cells = {(c["kind"], c["route"], c["direction"]): c for c in out["cells"]}
rdma = {(e["kind"], e["route"], e["op"]): e for e in out["rdma"]}
assert set(rdma) == {(k, r, o) for k in kinds for r in ("reg_mr", "sp_reg_mr", "staged")
                     for o in ("write", "read")}, sorted(rdma)
seen_none = 0
for (kind, route, op), e in rdma.items():
    c = cells.get((kind, route, "peer-write" if op == "write" else "gpu-write"))
    if c is None:
        assert not e["measured"] and "not run" in e["reason"] and not e["points"], e
        continue
    if c["verdict"] in ("never", "unavailable"):
        seen_none += 1
        assert not e["measured"] and e["points"] == [], (c, e)
        assert c["verdict"] in e["reason"], (c["verdict"], e)
        continue
    assert e["measured"] and e["reason"] is None, e
    assert [p["size"] for p in e["points"]] == fg["msg_sizes"], e
    for p in e["points"]:
        assert p["bw_mib_s"] > 0 and p["lat_us"] > 0 and p["iters"] >= 4, (kind, route, op, p)
        st = rdma[(kind, "staged", op)]
        if st["measured"]:
            assert p["bw_vs_staged"] > 0 and p["lat_vs_staged"] > 0, p
reg = {(e["kind"], e["route"]): e for e in out["registration"]}
for (kind, route), e in reg.items():
    ok = [cells[(kind, route, dr)] for dr in ("gpu-write", "peer-write") if (kind, route, dr) in cells]
    if any(c["verdict"] not in ("never", "unavailable") for c in ok):
        assert e["reg_ms_per_gib"] > 0 and e["dereg_ms_per_gib"] > 0, e
    else:
        assert e["reg_ms_per_gib"] is None and e["reason"], e
cpu = {e["kind"]: e for e in out["cpu"]}
assert set(cpu) == set(kinds), cpu
for kind, e in cpu.items():
    assert e["read_mib_s"] > 0 and e["write_mib_s"] > 0, e
if "malloc" in cpu:
    assert cpu["malloc"]["read_vs_malloc"] == 1.0, cpu["malloc"]
txt = open(d + "/proof.txt").read()
assert "stand-in: the suite's stand-in HIP runtime on sp_gpusim, not a GPU" in txt, txt[:2000]
assert "CPU read MiB/s" in txt and "x staged" in txt, txt[:2000]
svg = ET.parse(d + "/proof.svg").getroot()
assert svg.tag.endswith("svg"), svg.tag
assert "STAND-IN, NOT A GPU" in open(d + "/proof.svg").read()
if want_rc == 1:
    assert seen_none and any(c["verdict"] == "never" for c in cells.values()), "no cell never"
    assert any(e["measured"] for e in rdma.values()), "nothing measured"
print("# %d rdma entries, %d without figures (never/unavailable)" % (len(rdma), seen_none))
assert rc == want_rc, (rc, want_rc)
PY
}
t0=$SECONDS
ok numbers_for_every_cell_with_a_verdict numbers nums none malloc,hip-malloc,sp-import reg_mr,sp_reg_mr,staged 0
echo "# numbers_for_every_cell_with_a_verdict took $((SECONDS - t0)) s"
# GPU writes lost: every gpu-write cell of GPU-written memory is "never"
# (exit 1), its READ figures are not measured; peer-write's WRITE are
t0=$SECONDS
ok numbers_none_where_never numbers lost lost host-coherent sp_reg_mr,staged 1
echo "# numbers_none_where_never took $((SECONDS - t0)) s"

# Two nodes: 'gpu proof --serve' on 198.18.0.2 (rxe1) is the peer of
# 'gpu proof 198.18.0.2' from 198.18.0.1 (rxe0), over the link; the same
# kinds and routes give the loopback run's verdicts, the held-back writes
# are caught the same way, and the server stops on SIGTERM.
# listening <log> <pid>: the server's "listening" line, bounded (60 s; the
# log printed on timeout or when the server ended first)
listening() {
	for _ in $(seq 600); do
		grep -q 'listening on' "$1" && return 0
		kill -0 "$2" 2> /dev/null || break
		sleep 0.1
	done
	echo "# the server did not say it listens:"; sed 's/^/# /' "$1"
	return 1
}
srv_pid=
srv_start() {
	"$ctl" gpu proof --serve --bind 198.18.0.2 > "$tmp/srv.log" 2>&1 &
	srv_pid=$!
	listening "$tmp/srv.log" "$srv_pid"
}
two_kinds=malloc,hip-malloc,host-coherent,sp-import
# two_node <name> <hold> <loopback run to match>: the client's JSON checked against it
two_node() {
	SP_GPURT_HOLD=$2 timeout 300 "$ctl" -j gpu proof 198.18.0.2 --bind 198.18.0.1 \
		--kinds "$two_kinds" --routes reg_mr,staged --size 16K --repeat 2 --quiet \
		> "$tmp/$1.json" 2> "$tmp/$1.err"
	local rc=$?
	cat "$tmp/$1.json" "$tmp/$1.err"
	python3 - "$tmp/$1.json" "$rc" "$tmp/$3.json" "$2" << 'PY'
import json, sys
d, rc, lo, hold = json.load(open(sys.argv[1])), int(sys.argv[2]), json.load(open(sys.argv[3])), sys.argv[4]
n = d["node"]
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
assert n["mode"] == "two-node" and n["server"] == "198.18.0.2 port 18517", n
assert n["rdma_device"] == "rxe0" and n["peer_device"] == "rxe1", n
assert n["server_kernel"] == n["kernel"], n
assert lo["node"]["mode"] == "loopback" and lo["node"]["server"] is None, lo["node"]
two = {(c["kind"], c["route"], c["direction"]): c for c in d["cells"]}
ref = {(c["kind"], c["route"], c["direction"]): c for c in lo["cells"]}
assert len(two) == 4 * 2 * 2, sorted(two)
for key, c in two.items():
    r = ref[key]
    for f in ("verdict", "available", "registration"):
        assert c[f] == r[f], (key, f, c[f], r[f])
    assert all(f["trials"] == 2 for f in c["fences"]) or not c["available"], c
    if hold != "none" and key[0] != "malloc" and key[2] == "gpu-write" and c["available"]:
        # the held-back write is caught over two nodes too, byte 0 first
        assert c["verdict"] == hold and c["fences"][0]["first_bad_byte"] == 0, c
assert rc == 0, rc
PY
}
srv_stop() {
	kill -TERM "$srv_pid" 2> /dev/null
	for _ in $(seq 300); do
		kill -0 "$srv_pid" 2> /dev/null || break
		sleep 0.1
	done
	if kill -0 "$srv_pid" 2> /dev/null; then
		echo "# the server did not stop within 30 s:"; sed 's/^/# /' "$tmp/srv.log"
		kill -KILL "$srv_pid"
		return 1
	fi
	wait "$srv_pid"
	local rc=$?
	sed 's/^/# /' "$tmp/srv.log"
	[ "$rc" = 0 ] && grep -q 'server stopped' "$tmp/srv.log" &&
		[ "$(grep -c 'done, [0-9]* requests' "$tmp/srv.log")" = 2 ]
}
t0=$SECONDS
if srv_start; then
	ok two_node_same_verdicts_as_loopback two_node two-none none normal
	ok two_node_held_stream_caught two_node two-stream stream held-stream
	ok two_node_server_stops_cleanly srv_stop
else
	for t in two_node_same_verdicts_as_loopback two_node_held_stream_caught two_node_server_stops_cleanly; do
		n=$((n + 1)); fail=1; echo "not ok $n $t # the server did not start"
	done
fi
echo "# two-node cases took $((SECONDS - t0)) s"
# Nobody serves: a clear error naming host and port, in bounded time
no_server() {
	local t=$SECONDS
	timeout 120 "$ctl" gpu proof 198.18.0.2 --port 18599 --bind 198.18.0.1 --kinds malloc \
		--routes reg_mr --size 4K --repeat 1 --quiet > "$tmp/nosrv.out" 2> "$tmp/nosrv.err"
	local rc=$?
	cat "$tmp/nosrv.err"
	echo "# exit $rc after $((SECONDS - t)) s"
	[ "$rc" = 1 ] && grep -q 'cannot reach the gpu proof server at 198.18.0.2 port 18599' "$tmp/nosrv.err"
}
ok two_node_without_server_says_so no_server
# Another tool's server on the port (bench --serve): its hello refuses us, and says so
other_tool() {
	"$ctl" bench --serve --bind 198.18.0.2 > "$tmp/bsrv.log" 2>&1 &
	local b=$! rc
	if ! listening "$tmp/bsrv.log" "$b"; then
		kill -TERM "$b" 2> /dev/null
		return 1
	fi
	timeout 120 "$ctl" gpu proof 198.18.0.2 --port 18515 --bind 198.18.0.1 --kinds malloc \
		--routes reg_mr --size 4K --repeat 1 --quiet > /dev/null 2> "$tmp/other.err"
	rc=$?
	# bench --serve dies by SIGTERM; bounded all the same (10 s, then KILL)
	kill -TERM "$b" 2> /dev/null
	for _ in $(seq 100); do kill -0 "$b" 2> /dev/null || break; sleep 0.1; done
	kill -KILL "$b" 2> /dev/null
	wait "$b"
	cat "$tmp/other.err"
	sed 's/^/# bench: /' "$tmp/bsrv.log"
	[ "$rc" = 1 ] &&
		grep -q "refused the connection: it is 'strixpeerctl bench --serve', not 'strixpeerctl gpu proof --serve'" "$tmp/other.err"
}
ok two_node_other_tool_refused other_tool

ok table_form sh -c "SP_GPURT_HOLD=device '$ctl' gpu proof --kinds host-coherent --routes reg_mr --directions gpu-write --size 4K --repeat 1 --quiet | grep -E '^ *host-coherent +reg_mr +gpu-write +device +0/1 +0/1 +1/1 +1/1 '"
ok table_form_staged sh -c "SP_GPURT_HOLD=stream '$ctl' gpu proof --kinds hip-malloc --routes staged --directions gpu-write --size 4K --repeat 1 --quiet | grep -E '^ *hip-malloc +staged +gpu-write +stream +0/1 +1/1 +1/1 +1/1 +staged '"
echo "1..$n"
exit $fail
