#!/bin/bash
# strixpeerctl doctor, live, inside the test VM (run by tests/vm/guest-suite.sh
# after tests/vm/rxe-setup.sh made the two Soft-RoCE "nodes" rxe0/veth0 and
# rxe1/veth1, with strixpeer loaded):
#
#   guest.sh <strixpeer.ko the suite loaded>
#
# The rxe nodes at MTU 1500 give a WARN with the fix, at 9000 a PASS;
# --rdma-test writes into strixpeer buffers on both devices and between
# them; --peer against --serve over librdmacm; doctor serve and bench --serve
# at once on their default ports, each serving its own client, and a doctor
# client refused by a bench server in words; with the module unloaded the
# strixpeer check FAILs with advice (then the module is loaded again);
# every -j report is valid JSON (python3's json module); --compare of the
# 1500 and 9000 reports flags the MTU mismatch; the verbs and librdmacm
# paths once more under valgrind. Prints TAP.
set -u
ko=${1:?usage: guest.sh <strixpeer.ko>}
ctl=build/strixpeerctl
tmp=$(mktemp -d)
n=0
echo "TAP version 13"
echo "1..12"
result() {	# result <0|1> <name> [skip reason]
	n=$((n + 1))
	if [ -n "${3:-}" ]; then echo "ok $n $2 # SKIP $3"
	elif [ "$1" -eq 0 ]; then echo "ok $n $2"
	else echo "not ok $n $2"; fi
}
cleanup() {
	ip link set veth0 mtu 1500 2> /dev/null
	ip link set veth1 mtu 1500 2> /dev/null
	[ -e /sys/module/strixpeer ] || insmod "$ko"
	[ -n "${server:-}" ] && kill "$server" 2> /dev/null
	[ -n "${bserver:-}" ] && kill "$bserver" 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# py <file> <python over d (the parsed report) and get(id, subject)>
py() {
	python3 -c "import json,sys
d=json.load(open(sys.argv[1]))
def get(i, s):
    r=[c for c in d['checks'] if c['id'] == i and c['subject'] == s]
    assert len(r) == 1, (i, s, [(c['id'], c['subject']) for c in d['checks']])
    return r[0]
$2" "$1" || { echo "# $1:"; sed 's/^/#   /' "$1" | head -n 60; return 1; }
}
if [ -e /sys/kernel/debug/kmemleak ]; then
	for t in mtu_1500_warns mtu_9000_passes json_valid rdma_test_loopback_and_between \
		peer_against_serve both_servers_default_ports doctor_peer_at_bench_server compare_flags_mtu module_unloaded_fails module_reloaded text_report \
		valgrind_rdma_test_and_peer; do
		result 0 "$t" "user-space check: runs on the non-debug kernels"
	done
	exit 0
fi
modprobe rdma_ucm 2> /dev/null

ip link set veth0 mtu 1500 && ip link set veth1 mtu 1500
$ctl doctor -j --only rdma,mtu,strixpeer > "$tmp/1500.json"
rc=$?
py "$tmp/1500.json" "
for dev, net in (('rxe0/1', 'veth0'), ('rxe1/1', 'veth1')):
    m=get('mtu.roce', dev)
    assert m['status'] == 'WARN' and m['observed']['rdma_mtu'] == 1024, m
    assert m['observed']['netdev_mtu'] == 1500 and m['observed']['overhead'] == 80, m
    assert 'ip link set %s mtu 9000' % net in m['advice'], m
    assert get('rdma.port', dev)['status'] == 'PASS'
assert d['summary']['exit'] == $rc" && [ "$rc" -ge 1 ]
result $? "mtu_1500_warns"

ip link set veth0 mtu 9000 && ip link set veth1 mtu 9000
$ctl doctor -j --only rdma,mtu,strixpeer > "$tmp/9000.json"
py "$tmp/9000.json" "
for dev in ('rxe0/1', 'rxe1/1'):
    m=get('mtu.roce', dev)
    assert m['status'] == 'PASS' and m['observed']['rdma_mtu'] == 4096 and not m['advice'], m
assert get('strixpeer.module', '')['status'] == 'PASS'
assert get('strixpeer.abi', '')['status'] == 'PASS'"
result $? "mtu_9000_passes"

# the whole report, live: valid JSON, every check present, exit as documented
$ctl doctor -j > "$tmp/all.json"
rc=$?
py "$tmp/all.json" "
assert set(d) == {'node', 'checks', 'summary'}
for c in d['checks']:
    assert set(c) == {'id','check','subject','status','summary','observed','advice'}, c
    assert c['status'] in ('PASS','INFO','WARN','FAIL','SKIP'), c
    assert c['status'] not in ('WARN','FAIL') or c['advice'], c
checks={c['check'] for c in d['checks']}
want={'rdma','pcie','mtu','memory','numa','iommu','gpu','gpudirect','thunderbolt','counters','strixpeer'}
assert checks == want, checks ^ want
s=d['summary']
assert s['exit'] == (2 if s['FAIL'] else 1 if s['WARN'] else 0) == $rc, (s, $rc)
# rxe cannot register dma-bufs: the probe says so, as NCCL/UCX would see it
for dev in ('rxe0', 'rxe1'):
    p=get('gpudirect.dmabuf_mr', dev)
    assert p['status'] == 'INFO' and p['observed']['supported'] is False, p
assert get('numa.nodes', '')['observed']['nodes'] == 2"
result $? "json_valid"

$ctl doctor -j --only rdma --rdma-test --size 1M > "$tmp/rt.json"
py "$tmp/rt.json" "
for s in ('rxe0/1 loopback', 'rxe1/1 loopback'):
    r=get('rdmatest.loopback', s)
    assert r['status'] == 'PASS' and r['observed']['bytes'] == 1 << 20, r
    assert r['observed']['path_mtu'] == 4096, r
r=get('rdmatest.ports', 'rxe0/1->rxe1/1')
assert r['status'] == 'PASS' and 'every byte verified' in r['summary'], r"
result $? "rdma_test_loopback_and_between"

# listening <output file> <pid>: the server said it listens (at most 120 s)
listening() {
	for _ in $(seq 600); do
		grep -q listening "$1" && return 0
		kill -0 "$2" 2> /dev/null || break
		sleep 0.2
	done
	echo "# not listening:"; sed 's/^/#   /' "$1"
	return 1
}
# reap <pid>: its exit status, once it exits (at most 120 s; then killed: 124)
reap() {
	for _ in $(seq 600); do
		kill -0 "$1" 2> /dev/null || { wait "$1"; return; }
		sleep 0.2
	done
	echo "# pid $1 still running after 120 s: killed"
	kill -9 "$1" 2> /dev/null
	wait "$1"
	return 124
}
# bench_tiny <host> <json file>: a small remote bench run from rxe0's address
bench_tiny() {
	"$ctl" -j bench "$1" --local 198.18.0.1 --size 4M --repeat 1 --kinds malloc --ops write \
		--min-msg 4K --max-msg 4K --iters 8 --max-bytes 64K --lat-iters 5 --quiet > "$2" 2> "$2.err"
}

# another "node": doctor --serve on rxe1's address (its default port), --peer from here
$ctl doctor --serve --bind 198.18.0.2 --once > "$tmp/serve.out" 2>&1 &
server=$!
listening "$tmp/serve.out" "$server"
$ctl doctor -j --only strixpeer --peer 198.18.0.2 --size 1M > "$tmp/peer.json"
wait "$server"
src=$?
server=
py "$tmp/peer.json" "
r=get('rdmatest.peer', '198.18.0.2')
assert r['status'] == 'PASS' and r['observed']['bytes'] == 1 << 20, r" &&
	[ "$src" -eq 0 ] && grep -q "every byte verified" "$tmp/serve.out"
r=$?
[ $r -eq 0 ] || sed 's/^/# serve: /' "$tmp/serve.out"
result $r "peer_against_serve"

# both servers on one host at once, each on its default port (doctor 18516,
# bench 18515; on iWARP rdma_cm ports are TCP ports), each serving its client
$ctl doctor serve --bind 198.18.0.2 --once > "$tmp/both-d.out" 2>&1 &
server=$!
$ctl bench --serve --bind 198.18.0.2 > "$tmp/both-b.out" 2>&1 &
bserver=$!
r=1
if listening "$tmp/both-d.out" "$server" && listening "$tmp/both-b.out" "$bserver"; then
	$ctl doctor -j --only strixpeer peer 198.18.0.2 --size 64K > "$tmp/both-peer.json"
	bench_tiny 198.18.0.2 "$tmp/both-bench.json"
	brc=$?
	reap "$server"
	drc=$?
	reap "$bserver"
	bsrc=$?
	server='' bserver=''
	echo "# exits: bench client $brc, doctor serve $drc, bench --serve $bsrc"
	grep -h "listening" "$tmp/both-d.out" "$tmp/both-b.out" | sed 's/^/# /'
	py "$tmp/both-peer.json" "
r=get('rdmatest.peer', '198.18.0.2')
assert r['status'] == 'PASS', r" &&
		python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rdma_unavailable"] is None, d["rdma_unavailable"]
assert {s["figure"] for s in d["rdma"]} == {"write_bw", "write_lat"}, d["rdma"]' "$tmp/both-bench.json" &&
		[ "$brc" -eq 0 ] && [ "$drc" -eq 0 ] && [ "$bsrc" -eq 0 ] &&
		grep -q "port 18516" "$tmp/both-d.out" && grep -q "port 18515" "$tmp/both-b.out"
	r=$?
fi
[ $r -eq 0 ] || sed 's/^/# /' "$tmp/both-d.out" "$tmp/both-b.out" "$tmp/both-bench.json.err" 2> /dev/null | head -n 40
result $r "both_servers_default_ports"

# doctor peer at a bench server: refused at once, in words, on both sides;
# the bench server then serves its own client
$ctl bench --serve --bind 198.18.0.2 > "$tmp/wk-b.out" 2>&1 &
bserver=$!
r=1
if listening "$tmp/wk-b.out" "$bserver"; then
	t0=$(date +%s%N)
	$ctl doctor -j --only strixpeer peer 198.18.0.2 --port 18515 --size 64K > "$tmp/wk.json"
	echo "# doctor peer at bench --serve: exit $?, after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	bench_tiny 198.18.0.2 "$tmp/wk-bench.json"
	brc=$?
	reap "$bserver"
	bsrc=$?
	bserver=
	py "$tmp/wk.json" "
r=get('rdmatest.peer', '198.18.0.2')
print('# ' + r['summary'])
assert r['status'] == 'FAIL', r
assert \"it is 'strixpeerctl bench --serve', not 'strixpeerctl doctor serve'\" in r['summary'], r" &&
		grep -q "a strixpeerctl doctor client, this is 'strixpeerctl bench --serve': refused" "$tmp/wk-b.out" &&
		[ "$brc" -eq 0 ] && [ "$bsrc" -eq 0 ]
	r=$?
fi
[ $r -eq 0 ] || sed 's/^/# /' "$tmp/wk-b.out" "$tmp/wk-bench.json.err" 2> /dev/null | head -n 40
result $r "doctor_peer_at_bench_server"

$ctl doctor -j --compare "$tmp/1500.json" "$tmp/9000.json" > "$tmp/cmp.json"
rc=$?
py "$tmp/cmp.json" "
m=get('compare.mtu', '')
assert m['status'] == 'FAIL' and '1024' in m['summary'] and '4096' in m['summary'], m
assert 'mtu 9000' in m['advice'], m" && [ "$rc" -eq 2 ]
result $? "compare_flags_mtu"

# module unloaded: FAIL with the fix; then back as the suite had it (with
# the parameters it was loaded with: later groups rely on claim_gem_drivers)
keep=()
[ -r /sys/module/strixpeer/parameters/claim_gem_drivers ] &&
	keep=("claim_gem_drivers=$(cat /sys/module/strixpeer/parameters/claim_gem_drivers)")
if rmmod strixpeer 2> "$tmp/rmmod.err"; then
	$ctl doctor -j --only strixpeer > "$tmp/nomod.json"
	rc=$?
	py "$tmp/nomod.json" "
m=get('strixpeer.module', '')
assert m['status'] == 'FAIL' and 'modprobe strixpeer' in m['advice'], m
assert get('strixpeer.device', '/dev/strixpeer')['status'] == 'SKIP'" && [ "$rc" -eq 2 ]
	result $? "module_unloaded_fails"
	insmod "$ko" "${keep[@]}" && udevadm settle 2> /dev/null
	$ctl doctor -j --only strixpeer > "$tmp/back.json"
	py "$tmp/back.json" "assert get('strixpeer.module', '')['status'] == 'PASS'"
	result $? "module_reloaded"
else
	sed 's/^/# /' "$tmp/rmmod.err"
	result 1 "module_unloaded_fails"
	result 1 "module_reloaded"
fi

# what an admin reads: the verdict line and the fix under it
ip link set veth0 mtu 1500
$ctl doctor --only mtu > "$tmp/text.txt"
rc=$?
sed 's/^/# /' "$tmp/text.txt"
grep -q '^WARN  mtu.roce  *rxe0/1: veth0 MTU 1500 -> RDMA MTU 1024' "$tmp/text.txt" &&
	grep -q 'fix: ip link set veth0 mtu 9000' "$tmp/text.txt" && [ "$rc" -eq 1 ]
result $? "text_report"

# the data paths (loopback, --peer) under valgrind, on one kernel:
# the code is the same on every kernel, and valgrind is slow under emulation
if ! command -v valgrind > /dev/null; then
	result 0 "valgrind_rdma_test_and_peer" "valgrind not installed"
elif [[ $(uname -r) != 6.12.* ]]; then
	result 0 "valgrind_rdma_test_and_peer" "user-space check under valgrind: runs on 6.12"
else
	vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
	    --show-possibly-lost=no --suppressions=tests/doctor/valgrind.supp)
	# (the server natively: two valgrinds would share the guest's two CPUs)
	$ctl doctor --serve --bind 198.18.0.2 --port 18516 --once \
		> "$tmp/vserve.out" 2> "$tmp/vserve.err" &
	server=$!
	for _ in $(seq 600); do	# at most 120 s
		grep -q listening "$tmp/vserve.out" && break
		kill -0 "$server" 2> /dev/null || break
		sleep 0.2
	done
	"${vg[@]}" $ctl doctor -j --only mtu --rdma-test --device rxe0 --peer 198.18.0.2 \
		--port 18516 --size 64K > "$tmp/vg.json" 2> "$tmp/vg.err"
	rc=$?
	wait "$server"
	src=$?
	server=
	py "$tmp/vg.json" "
assert get('rdmatest.loopback', 'rxe0/1 loopback')['status'] == 'PASS'
assert get('rdmatest.peer', '198.18.0.2')['status'] == 'PASS'" && [ "$rc" -ne 99 ] && [ "$src" -eq 0 ]
	r=$?
	[ $r -eq 0 ] || sed 's/^/# valgrind: /' "$tmp/vg.err" "$tmp/vserve.err" | head -n 60
	result $r "valgrind_rdma_test_and_peer"
fi
