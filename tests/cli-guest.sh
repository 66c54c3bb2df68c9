#!/bin/bash
# strixpeerctl against a loaded module (run by tests/vm/guest-suite.sh):
# every command's table and -j JSON agree, JSON parses, the Prometheus
# output passes promtool, config changes apply and need privilege, monitor
# sees events in order, bad words fail clearly, valgrind finds nothing.
# Prints TAP.
set -u
ctl=build/strixpeerctl
hold=build/tests/hold_buffer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
echo "TAP version 13"
echo "1..17"
result() {	# result <0|1> <name> [skip reason]
	n=$((n + 1))
	if [ -n "${3:-}" ]; then echo "ok $n $2 # SKIP $3"
	elif [ "$1" -eq 0 ]; then echo "ok $n $2"
	else echo "not ok $n $2"; failed=$((failed + 1)); fi
}
py() {	# py <python code over d (parsed stdin JSON)>
	python3 -c "import json,sys; d=json.load(sys.stdin); $1"
}
field() {	# field <label> < table: the value after a "label   " column
	sed -n "s/^ *$1  *//p" | head -n 1
}
hold() {	# hold <name> <MiB>: a process holding a buffer until unhold; $<name>=pid
	"$hold" "$2" > "$tmp/$1.out" 2>&1 < /dev/null &
	for _ in $(seq 100); do
		grep -q ready "$tmp/$1.out" && break
		sleep 0.1
	done
	eval "$1=$(awk '/^ready/ {print $2}' "$tmp/$1.out")"
}
unhold() {	# unhold <name>: the holder exits, and its buffer goes with it
	local pid
	eval "pid=\$$1"
	kill "$pid"
	wait "$pid" 2>/dev/null
}

$ctl status > "$tmp/st.txt" 2>&1
result $? "status_exits_zero"
grep -Eq '^ +loaded +yes$' "$tmp/st.txt" &&
	{ grep -Eq '^ +reason +.+' "$tmp/st.txt" || grep -Eq '^ +registrations +[0-9]+$' "$tmp/st.txt"; } &&
	grep -Eq '^NODE +FREE ' "$tmp/st.txt"
result $? "status_shows_module_peerdirect_nodes"

$ctl -j status > "$tmp/st.json"
py 'v=open("VERSION").read().strip(); m=d["module"]; assert m["loaded"] and m["version"] == v, m
p=d["peerdirect"]
assert (p["available"] is True and "reason" not in p and p["imports"] >= 0) or (p["available"] is False and p["reason"]), p
assert d["memory"]["buffers"] == 0 and len(d["nodes"]) >= 1 and d["limits"]["max_buf_size"] > 0' < "$tmp/st.json"
result $? "status_json_parses"
[ "$(field version < "$tmp/st.txt")" = "$(py 'print(d["module"]["version"])' < "$tmp/st.json")" ] &&
	[ "$(field 'default node' < "$tmp/st.txt")" = "$(py 'print(d["limits"]["default_node"])' < "$tmp/st.json")" ]
result $? "status_table_matches_json"

$ctl -j -p version | py 'assert d["module"] == d["library"] and d["abi"].startswith("1."), d'
result $? "version_json"

# (status holds live numbers such as free memory: compare stable output)
diff <($ctl ver) <($ctl version) > /dev/null && diff <($ctl -j conf sh) <($ctl -j config show) > /dev/null &&
	$ctl -j st | py 'assert d["module"]["loaded"]'
result $? "prefix_match"

# two processes holding buffers: buf show lists both, table and JSON alike
hold p1 3
hold p2 5
$ctl -j buf show > "$tmp/bufs.json"
$ctl buf show > "$tmp/bufs.txt"
py "b=sorted((x['pid'], x['size']) for x in d); assert b == sorted([($p1, 3<<20), ($p2, 5<<20)]), b" < "$tmp/bufs.json" &&
	[ "$(grep -c "^[0-9]" "$tmp/bufs.txt")" -eq 2 ] && grep -Eq "^ID +PID +SIZE" "$tmp/bufs.txt" &&
	grep -Eq "^[0-9]+ +$p2 +5.0 MiB" "$tmp/bufs.txt"
result $? "buf_show_table_and_json"
$ctl -j buf show pid "$p1" | py "assert len(d) == 1 and d[0]['pid'] == $p1, d"
result $? "buf_show_pid_filter"

$ctl -j stats > "$tmp/stats.json"
py 'assert d["buffers"] == 2 and d["pinned_bytes"] == 8 << 20 and d["peer_registrations"] == 0 and d["imports"] == 0 and d["peer_claims"] >= d["peer_invalidations"] >= 0, d' < "$tmp/stats.json" &&
	[ "$($ctl stats | field buffers)" = 2 ]
result $? "stats_table_and_json"

$ctl stats -f prometheus > "$tmp/metrics.txt"
grep -q '^strixpeer_pinned_bytes 8388608$' "$tmp/metrics.txt"
result $? "stats_prometheus_values"
if [ -n "${SP_PROMTOOL:-}" ] && [ -x "$SP_PROMTOOL" ]; then
	"$SP_PROMTOOL" check metrics < "$tmp/metrics.txt" > "$tmp/promtool.txt" 2>&1
	rc=$?
	[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/promtool.txt"
	result $rc "stats_prometheus_passes_promtool"
else
	result 0 "stats_prometheus_passes_promtool" "promtool not available (tests/fetch-promtool.sh)"
fi
unhold p1
unhold p2

# monitor in the background; then config changes and a buffer's life
$ctl -j monitor > "$tmp/events.json" 2>&1 &
mon=$!
for _ in $(seq 50); do	# wait until it listens: config events show up
	$ctl config set require_huge no
	[ -s "$tmp/events.json" ] && break
	sleep 0.2
done
old=$($ctl -j config show | py 'print(d["max_buf_size"])')
$ctl config set max_buf_size 1G && [ "$($ctl -j config show | py 'print(d["max_buf_size"])')" = $((1 << 30)) ] &&
	[ "$($ctl config show | field 'max buffer size')" = "1.0 GiB" ]
result $? "config_set_applies"
hold p3 2
unhold p3
$ctl config set max_buf_size "$old"
sleep 1
kill "$mon"; wait "$mon" 2>/dev/null
python3 - "$tmp/events.json" "$p3" <<'EOF'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
mine = [e for e in ev if e.get("buf", {}).get("pid") == int(sys.argv[2])]
assert [e["event"] for e in mine] == ["buf-created", "buf-freed"], ev
assert mine[0]["buf"]["id"] == mine[1]["buf"]["id"] and mine[0]["buf"]["size"] == 2 << 20
order = [e["event"] for e in ev if e["event"] != "config" or e["config"]["max_buf_size"] == 1 << 30]
assert order == ["config", "buf-created", "buf-freed"], order
EOF
result $? "monitor_sees_events_in_order"

out=$(setpriv --reuid=65534 --regid=65534 --clear-groups $ctl config set max_buf_size 1M 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'not permitted' &&
	[ "$($ctl -j config show | py 'print(d["max_buf_size"])')" = "$old" ]
result $? "config_set_unprivileged_refused"

$ctl config set no_such_key 1 > /dev/null 2>&1; r1=$?
$ctl config set max_buf_size lots > /dev/null 2>&1; r2=$?
out=$($ctl config set default_node 7 2>&1); r3=$?
[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && [ $r3 -eq 1 ] &&
	echo "$out" | grep -q 'NUMA node is not online or has no memory (attribute default-node)'
result $? "config_set_bad_input"

out=$($ctl frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'unknown object "frobnicate"'
result $? "unknown_object_refused"

valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	$ctl -j status > /dev/null 2> "$tmp/vg.txt" &&
valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	$ctl buf show > /dev/null 2>> "$tmp/vg.txt"
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/vg.txt"
result $rc "cli_clean_under_valgrind"

[ $failed -eq 0 ]
