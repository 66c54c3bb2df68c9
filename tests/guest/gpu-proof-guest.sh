#!/bin/bash
# SPDX-License-Identifier: MIT
# strixpeerctl gpu in the VM with the suite's stand-in runtime
# (build/tests/libspgpurt.so on sp_gpusim and sp_kfdsim, both loaded by
# tests/vm/guest-suite.sh) over the two Soft-RoCE devices: gpu runtime
# finds it; a normal gpu proof finds a fence for every cell it can run
# (the stand-in applies GPU writes at once: "none" everywhere); with
# SP_GPURT_HOLD=device the stand-in holds GPU writes back until
# hipDeviceSynchronize, and the matrix must say "device" for every
# gpu-write cell of GPU-written memory and "none" for peer-write; with
# SP_GPURT_HOLD=stream, "stream". A stand-in verdict says nothing about a
# real GPU. Prints TAP.
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

kinds=malloc,hip-malloc,host-coherent,managed,fine-grained,uncached,sp-hostreg
# proof <name> <hold> : the matrix as JSON in $tmp/<name>.json, checked by check.py
proof() {
	SP_GPURT_HOLD=$2 taskset -c 0 "$ctl" -j gpu proof --kinds "$kinds" --routes reg_mr \
		--size 64K --repeat 3 --local rxe0 --peer rxe1 --quiet > "$tmp/$1.json"
	local rc=$?
	cat "$tmp/$1.json"
	python3 - "$tmp/$1.json" "$2" "$rc" << 'PY'
import json, sys
d, hold, rc = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
assert d["node"]["rdma_device"] == "rxe0" and d["node"]["peer_device"] == "rxe1", d["node"]
cells = {(c["kind"], c["direction"]): c for c in d["cells"]}
assert len(cells) == 14, sorted(cells)
held = {"none": "none", "stream": "stream", "device": "device"}[hold]
for (kind, direction), c in cells.items():
    if kind == "hip-malloc" or kind == "fine-grained" or kind == "uncached":
        # a PFN mapping: rxe's plain ibv_reg_mr cannot pin it
        assert c["verdict"] == "unavailable" and "ibv_reg_mr" in c["reason"], c
        continue
    assert c["available"], c
    assert all(f["trials"] == 3 for f in c["fences"]), c
    want = "none" if kind == "malloc" or direction == "peer-write" else held
    assert c["verdict"] == want, (kind, direction, c["verdict"], want, c)
    if want != "none":
        # the missing fence is seen, byte 0 first
        assert c["fences"][0]["right"] == 0 and c["fences"][0]["first_bad_byte"] == 0, c
assert rc == 0, rc
PY
}
ok proof_every_cell_has_a_fence proof normal none
ok proof_held_until_device_needs_device proof held-device device
ok proof_held_until_stream_needs_stream proof held-stream stream
ok table_form sh -c "SP_GPURT_HOLD=device '$ctl' gpu proof --kinds host-coherent --routes reg_mr --directions gpu-write --size 4K --repeat 1 --quiet | grep -E '^ *host-coherent +reg_mr +gpu-write +device +0/1 +0/1 +1/1 +1/1 '"
echo "1..$n"
exit $fail
