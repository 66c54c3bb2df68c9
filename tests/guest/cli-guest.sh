#!/bin/bash
# strixpeerctl against a loaded module (run by tests/vm/guest-suite.sh):
# every command's table and -j JSON agree, JSON parses and has one name per
# counter with numbers as numbers, tables stay in their columns, the
# Prometheus output passes promtool, config set takes exact or unique keys,
# decimal sizes and the documented booleans, warns below what is pinned and
# needs privilege, monitor sees events in order (with -t timestamps),
# unprivileged users get labelled figures, buf show names holders (a
# re-parented child, a dma-buf in flight), status and doctor say what keeps
# the module in use, valgrind finds nothing.
# (Argument handling without a module: tests/cli-host.sh.) Prints TAP.
set -u
ctl=build/strixpeerctl
hold=build/tests/hold_buffer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
echo "TAP version 13"
echo "1..32"
result() {	# result <0|1> <name> [skip reason]
	n=$((n + 1))
	if [ -n "${3:-}" ]; then echo "ok $n $2 # SKIP $3"
	elif [ "$1" -eq 0 ]; then echo "ok $n $2"
	else echo "not ok $n $2"; failed=$((failed + 1)); fi
	echo "# ${SECONDS} s"
}
py() {	# py <python code over d (parsed stdin JSON)>
	python3 -c "import json,sys; d=json.load(sys.stdin); $1"
}
field() {	# field <label> < table: the value after a "label   " column
	sed -n "s/^ *$1  *//p" | head -n 1
}
nobody() {	# nobody <command...>: as an unprivileged user
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}
hold() {	# hold <name> [mode] <MiB>: a process holding a buffer until unhold; $<name>=pid
	"$hold" "${@:2}" > "$tmp/$1.out" 2>&1 < /dev/null &
	local hpid=$!
	for _ in $(seq 1200); do	# until it is ready or gone, at most 120 s
		grep -q ready "$tmp/$1.out" && break
		kill -0 "$hpid" 2> /dev/null || break
		sleep 0.1
	done
	grep -q ready "$tmp/$1.out" || echo "# holder $hpid not ready: $(cat "$tmp/$1.out")"
	eval "$1=$(awk '/^ready/ {print $2}' "$tmp/$1.out")"
}
unhold() {	# unhold <name>: the holder exits, and its buffer goes with it
	local pid
	eval "pid=\$$1"
	kill "$pid"
	wait "$pid" 2>/dev/null
}
cfg() {	# cfg <key>: its value in config show's JSON (sed: python is slow under TCG)
	$ctl -j config show | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"
}
max_buf_size() { cfg max_buf_size; }
# A table's lines, in sections (blank lines or "heading:" lines between
# them): within a section every value starts in the same column.
cat > "$tmp/aligned.py" << 'EOF'
import re, sys
ok, sect = True, []
def check(lines):
    global ok
    cols = {re.search(r"\S  +(?=\S)", l).end() for l in lines if re.search(r"\S  +(?=\S)", l)}
    if len(cols) > 1:
        ok = False
        print("# misaligned:", lines)
for l in sys.stdin.read().splitlines() + [""]:
    if not l.strip() or l.rstrip().endswith(":") or re.match(r"^[A-Z_0-9]+( +[A-Z_0-9]+)+$", l):
        check(sect)
        sect = []
    elif l.startswith(" "):
        sect.append(l)
sys.exit(0 if ok else 1)
EOF
# A column table: every row's cells start where the header's columns do.
cat > "$tmp/columns.py" << 'EOF'
import re, sys
lines = [l for l in sys.stdin.read().splitlines() if l and not l.startswith("(")]
head = lines[0]
starts = [m.start() for m in re.finditer(r"\S+", head)]
for l in lines[1:]:
    cells = [m.start() for m in re.finditer(r"\S+(?: \S+)*", l)]
    if cells != starts:
        print("# header", starts, "row", cells, repr(l))
        sys.exit(1)
EOF

$ctl status > "$tmp/st.txt" 2>&1
result $? "status_exits_zero"
grep -Eq '^ +loaded +yes$' "$tmp/st.txt" &&
	{ grep -Eq '^ +reason +.+' "$tmp/st.txt" || grep -Eq '^ +registrations +[0-9]+$' "$tmp/st.txt"; } &&
	grep -Eq '^NODE +FREE ' "$tmp/st.txt"
result $? "status_shows_module_peerdirect_nodes"

$ctl -j status > "$tmp/st.json"
py 'v=open("VERSION").read().strip(); m=d["module"]; assert m["loaded"] and m["version"] == v, m
p=d["peerdirect"]
assert (p["available"] is True and "reason" not in p and p["client"] and p["imports"] >= 0) or (p["available"] is False and p["reason"]), p
assert d["memory"]["buffers"] == 0 and len(d["nodes"]) >= 1 and d["limits"]["max_buf_size"] > 0
assert d["sharing"]["buffers_scope"] == "all", d["sharing"]' < "$tmp/st.json"
result $? "status_json_parses"
[ "$(field version < "$tmp/st.txt")" = "$(py 'print(d["module"]["version"])' < "$tmp/st.json")" ] &&
	[ "$(field 'default node' < "$tmp/st.txt")" = "$(py 'print(d["limits"]["default_node"])' < "$tmp/st.json")" ]
result $? "status_table_matches_json"

$ctl -j -p version | py 'assert d["module"] == d["library"] and d["abi"].startswith("1."), d'
result $? "version_json"

# (status holds live numbers such as free memory: compare stable output)
out=$($ctl -j st 2>&1); rc=$?
diff <($ctl ver) <($ctl version) > /dev/null && diff <($ctl -j conf sh) <($ctl -j config show) > /dev/null &&
	$ctl -j statu | py 'assert d["module"]["loaded"]' && [ $rc -eq 2 ] &&
	echo "$out" | grep -q 'ambiguous object "st": could be status or stats'
result $? "prefix_match_unique_only"

# two processes holding buffers: buf show lists both, table and JSON alike
hold p1 3
hold p2 5
$ctl -j buf show > "$tmp/bufs.json"
$ctl buf show > "$tmp/bufs.txt"
py "b=sorted((x['pid'], x['size']) for x in d); assert b == sorted([($p1, 3<<20), ($p2, 5<<20)]), b" < "$tmp/bufs.json" &&
	[ "$(grep -c "^[0-9]" "$tmp/bufs.txt")" -eq 2 ] && grep -Eq "^ID +PID +SIZE" "$tmp/bufs.txt" &&
	grep -Eq "^[0-9]+ +$p2 +5 MiB" "$tmp/bufs.txt" && ! grep -q '^(yours only' "$tmp/bufs.txt"
result $? "buf_show_table_and_json"
$ctl -j buf show pid "$p1" | py "assert len(d) == 1 and d[0]['pid'] == $p1, d"
result $? "buf_show_pid_filter"

python3 "$tmp/columns.py" < "$tmp/bufs.txt" && $ctl status | python3 "$tmp/aligned.py" &&
	$ctl stats | python3 "$tmp/aligned.py" && $ctl config show | python3 "$tmp/aligned.py"
result $? "tables_stay_in_their_columns"

$ctl -j stats > "$tmp/stats.json"
py 'assert d["buffers"] == 2 and d["pinned_bytes"] == 8 << 20 and d["peer_registrations"] == 0 and d["imports"] == 0 and d["peer_claims"] >= d["peer_invalidations"] >= 0, d' < "$tmp/stats.json" &&
	[ "$($ctl stats | field buffers)" = 2 ]
result $? "stats_table_and_json"

# Every counter of the netlink spec's stats set, from one stats-get: the
# generated header names them; strace (when the guest has it) counts the
# requests (the family lookup, then one)
python3 - "$tmp/stats.json" include/uapi/strixpeer_nl.h << 'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
names = [n.lower() for n in re.findall(r"\bSTRIXPEER_A_STATS_(\w+)\s*(?:=\s*\d+\s*)?,", open(sys.argv[2]).read())
         if n != "PAD"]
missing = [n for n in names if n not in d]
assert len(names) >= 21 and not missing, ("not in stats -j", missing)
EOF
result $? "stats_has_every_counter"
if command -v strace > /dev/null; then
	strace -f -e trace=sendto,sendmsg -o "$tmp/stats.strace" $ctl stats > /dev/null
	sends=$(grep -c 'send' "$tmp/stats.strace")
	[ "$sends" -eq 2 ] || { echo "# $sends sends:"; sed 's/^/# /' "$tmp/stats.strace"; }
	result $(( sends != 2 )) "stats_is_one_request"
else
	result 0 "stats_is_one_request" "no strace in the guest"
fi

# One name per counter: every counter status shows is stats' under the same
# name (the buffer tallies of the caller's view are status's own).
$ctl -j status > "$tmp/st2.json"
python3 - "$tmp/st2.json" "$tmp/stats.json" << 'EOF'
import json, sys
st, stats = (json.load(open(f)) for f in sys.argv[1:])
own = {"available", "reason", "client", "exported_buffers", "registered_buffers", "buffers_scope"}
for sect in ("memory", "peerdirect", "sharing"):
    for k, v in st[sect].items():
        if k in own:
            continue
        assert k in stats, (sect, k, "not in stats")
        assert stats[k] == v, (sect, k, v, stats[k])
EOF
result $? "status_and_stats_share_counter_names"

# Numbers are numbers: strings only where the value is text.
python3 - "$tmp/st2.json" "$tmp/stats.json" "$tmp/bufs.json" << 'EOF'
import json, sys
text = {"library", "version", "abi", "reason", "client", "error", "buffers_scope", "features",
        "comm", "kind"}
def walk(v, key):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(x, k)
    elif isinstance(v, list):
        for x in v:
            walk(x, key)
    elif isinstance(v, str):
        assert key in text, (key, v)
for f in sys.argv[1:]:
    walk(json.load(open(f)), None)
st = json.load(open(sys.argv[1]))
m = st["limits"]["memlock"]
assert m is None or isinstance(m, int), m
assert isinstance(st["limits"]["max_pinned_bytes"], int)
EOF
result $? "json_numbers_are_numbers"

$ctl stats -f prometheus > "$tmp/metrics.txt"
grep -q '^strixpeer_pinned_bytes 8388608$' "$tmp/metrics.txt"
result $? "stats_prometheus_values"
if [ -n "${SP_PROMTOOL:-}" ] && [ -x "$SP_PROMTOOL" ]; then
	"$SP_PROMTOOL" check metrics < "$tmp/metrics.txt" > "$tmp/promtool.txt" 2>&1
	rc=$?
	[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/promtool.txt"
	result $rc "stats_prometheus_passes_promtool"
else
	result 0 "stats_prometheus_passes_promtool" "promtool not available (tests/host/fetch-promtool.sh)"
fi

# An unprivileged user: node-wide figures and its own labelled as such.
nobody $ctl status > "$tmp/st-nobody.txt" 2>&1 &&
	grep -q '^memory (node-wide):' "$tmp/st-nobody.txt" &&
	grep -Eq '^ +dma-bufs alive \(node-wide\) +[0-9]+$' "$tmp/st-nobody.txt" &&
	grep -Eq '^ +buffers exported \(yours\) +0$' "$tmp/st-nobody.txt" &&
	grep -Eq '^ +RLIMIT_MEMLOCK \(yours\) ' "$tmp/st-nobody.txt" &&
	nobody $ctl -j status | py 'assert d["sharing"]["buffers_scope"] == "own", d["sharing"]' &&
	nobody $ctl buf show | grep -q '^(yours only' &&
	grep -Eq '^ +buffers exported \(all users\) +[0-9]+$' <($ctl status)
result $? "unprivileged_figures_labelled"

# A limit below what is pinned (8 MiB now): applied, with a warning.
out=$($ctl config set max_pinned_bytes 1M 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q 'warning: max_pinned_bytes 1 MiB is below the 8 MiB' &&
	[ "$(cfg max_pinned_bytes)" = $((1 << 20)) ]
r1=$?
$ctl config set max_pinned_bytes unlimited 2> "$tmp/unl.txt" && [ ! -s "$tmp/unl.txt" ] &&
	[ "$(cfg max_pinned_bytes)" = 0 ] &&
	[ "$($ctl config show | field 'max pinned (node-wide)')" = unlimited ]
result $((r1 | $?)) "config_set_below_pinned_warns"
unhold p1
unhold p2

# monitor in the background (-j, and -t in the table); then config changes
# and a buffer's life
$ctl -j -t monitor > "$tmp/events.json" 2>&1 &
mon=$!
$ctl monitor -t > "$tmp/events.txt" 2>&1 &
mon2=$!
for _ in $(seq 50); do	# wait until both listen: config events show up
	$ctl config set require_huge no
	[ -s "$tmp/events.json" ] && [ -s "$tmp/events.txt" ] && break
	sleep 0.2
done
old=$(max_buf_size)
$ctl config set max_buf_size 1G && [ "$(max_buf_size)" = $((1 << 30)) ] &&
	[ "$($ctl config show | field 'max buffer size')" = "1 GiB" ]
result $? "config_set_applies"
hold p3 2
unhold p3
$ctl config set max_buf_size "$old"
# both monitors have printed the last event (the restore's config event,
# after the buffer's buf-freed) before they are stopped; at most 60 s
seen_restore() { awk '/buf-freed/ { f = 1 } f && /config/ { ok = 1 } END { exit !ok }' "$1"; }
for _ in $(seq 600); do
	seen_restore "$tmp/events.json" && seen_restore "$tmp/events.txt" && break
	sleep 0.1
done
seen_restore "$tmp/events.json" && seen_restore "$tmp/events.txt" ||
	echo "# the monitors did not print the restore's config event within 60 s"
kill "$mon" "$mon2"
wait "$mon" "$mon2" 2>/dev/null
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
python3 - "$tmp/events.json" "$tmp/events.txt" "$p3" <<'EOF'
import json, re, sys, time
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert ev and all(isinstance(e["timestamp"], float) and abs(e["timestamp"] - time.time()) < 120 for e in ev), ev
assert [e["timestamp"] for e in ev] == sorted(e["timestamp"] for e in ev)
lines = [l for l in open(sys.argv[2]) if l.strip()]
stamp = r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d\] "
assert lines and all(re.match(stamp, l) for l in lines), lines
assert any(re.match(stamp + r"buf-created id \d+ pid " + sys.argv[3] + " ", l) for l in lines), lines
EOF
result $? "monitor_timestamps"

out=$(nobody $ctl config set max_buf_size 1M 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'not permitted' && [ "$(max_buf_size)" = "$old" ] &&
	[ "$(echo "$out" | grep -o 'config set' | wc -l)" -eq 1 ]
result $? "config_set_unprivileged_refused_one_prefix"

$ctl config set no_such_key 1 > /dev/null 2>&1; r1=$?
$ctl config set max_buf_size lots > /dev/null 2>&1; r2=$?
out=$($ctl config set default_node 7 2>&1); r3=$?
[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && [ $r3 -eq 1 ] &&
	echo "$out" | grep -q 'NUMA node is not online or has no memory (attribute default-node)' &&
	[ "$(max_buf_size)" = "$old" ]
result $? "config_set_bad_input"

# Keys: exact or a unique prefix; "max" is two keys and changes nothing.
out=$($ctl config set max 2G 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'ambiguous config key "max": could be max_buf_size or max_pinned_bytes' &&
	[ "$(max_buf_size)" = "$old" ] &&
	$ctl config set max_b 2G && [ "$(max_buf_size)" = $((2 << 30)) ]
result $? "config_set_unique_prefix_only"

# Sizes: decimal with a unit; 010G is 10 GiB, not octal; no hex, no sign.
$ctl config set max_buf_size 010G && [ "$(max_buf_size)" = $((10 << 30)) ] &&
	$ctl config set max_buf_size 1536MiB && [ "$(max_buf_size)" = $((1536 << 20)) ] &&
	$ctl config set max_buf_size 4194304 && [ "$(max_buf_size)" = 4194304 ]
r1=$?
bad=0
for v in 0x100000 -1G 1.5G 1X "" 99999999999999999999 16777216T; do
	$ctl config set max_buf_size "$v" > /dev/null 2>&1
	[ $? -eq 2 ] || { echo "# accepted: $v"; bad=1; }
done
[ "$(max_buf_size)" = 4194304 ]
result $((r1 | bad | $?)) "config_set_decimal_sizes"
$ctl config set max_buf_size "$old"

# Booleans: Y/N/yes/no/true/false/1/0 (and on/off), any case.
bad=0
for v in Y yes TRUE 1 on; do
	{ $ctl config set require_huge "$v" &&
		[ "$(cfg require_huge)" = true ]; } || { echo "# $v"; bad=1; }
	$ctl config set require_huge no
done
for v in N no False 0 off; do
	$ctl config set require_huge yes
	{ $ctl config set require_huge "$v" &&
		[ "$(cfg require_huge)" = false ]; } || { echo "# $v"; bad=1; }
done
for v in maybe 2 yess ""; do
	$ctl config set require_huge "$v" > /dev/null 2>&1
	[ $? -eq 2 ] || { echo "# accepted: $v"; bad=1; }
done
result $bad "config_set_booleans"

# -j everywhere: every object's JSON parses; where there is none, -j is an error.
bad=0
i=0
for c in status version "buf show" stats "config show"; do
	# shellcheck disable=SC2086
	$ctl -j $c > "$tmp/j$((i += 1)).json"
done
python3 -c 'import json, sys; [json.load(open(f)) for f in sys.argv[1:]]' "$tmp"/j*.json || bad=1
$ctl -j stats -f prometheus > /dev/null 2>&1
[ $? -eq 2 ] || bad=1
$ctl -j help > /dev/null 2>&1
[ $? -eq 2 ] || bad=1
result $bad "json_everywhere_or_refused"

out=$($ctl frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'unknown object "frobnicate"'
result $? "unknown_object_refused"

out=$($ctl buf show pid 1 extra 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'unexpected argument "extra"'
result $? "extra_arguments_refused"

# Holders (issue 22): a child that outlived its parent keeps the fd and the
# mapping; buf show names it (the buffer's pid is the dead allocator's),
# status says it keeps the module in use.
"$hold" orphan 3 > "$tmp/orph.out" 2>&1 < /dev/null	# the parent exits at once
orph=$(awk '/^ready/ {print $2}' "$tmp/orph.out")
if [ -n "$orph" ] && [ -d "/proc/$orph" ]; then
	$ctl -j buf show > "$tmp/orph.json"
	$ctl buf show > "$tmp/orph.txt"
	$ctl -j status > "$tmp/orph-st.json"
	$ctl status > "$tmp/orph-st.txt"
	$ctl doctor -j --only strixpeer > "$tmp/orph-dr.json"
	python3 - "$tmp/orph.json" "$orph" << 'EOF'
import json, os, sys
d, orph = json.load(open(sys.argv[1])), int(sys.argv[2])
mine = [b for b in d if any(h["pid"] == orph for h in b["holders"])]
assert len(mine) == 1, ("holder %d not named" % orph, d)
b = mine[0]
kinds = sorted(h["kind"] for h in b["holders"] if h["pid"] == orph)
assert kinds == ["fd", "mapping"], b
assert b["pid"] != orph and not os.path.exists("/proc/%d" % b["pid"]), ("allocator still there", b)
ppid = [l.split()[1] for l in open("/proc/%d/status" % orph) if l.startswith("PPid:")][0]
assert int(ppid) != b["pid"], ("not re-parented", ppid, b)
assert b["handle"] >= 1 and b["comm"] == "hold_buffer" and b["unreadable_processes"] == 0, b
EOF
	r1=$?
	grep -Eq " $orph\(hold_buffer\) fd [0-9]+, $orph\(hold_buffer\) mapping" "$tmp/orph.txt" ||
		{ r1=1; sed 's/^/# /' "$tmp/orph.txt"; }
	python3 - "$tmp/orph-st.json" "$orph" << 'EOF'
import json, sys
d, orph = json.load(open(sys.argv[1])), int(sys.argv[2])
u = d["in_use"]
assert u["rmmod_would_fail"] and u["refcnt"] >= 1 and u["open_fds"] >= 1, u
assert {"fd", "mapping"} <= {f["kind"] for f in u["files"] if f["pid"] == orph}, u
EOF
	r2=$?
	python3 - "$tmp/orph-dr.json" "$orph" << 'EOF' || r2=1
import json, re, sys
d, orph = json.load(open(sys.argv[1])), sys.argv[2]
r = [c for c in d["checks"] if c["id"] == "strixpeer.in_use"]
assert len(r) == 1 and r[0]["status"] == "INFO", r
assert re.search(r"rmmod strixpeer would fail: /dev/strixpeer held by (.*, )?pid %s \(hold_buffer\) fd \d+" % orph,
                 r[0]["summary"]), r
assert r[0]["observed"]["refcnt"] >= 1, r
EOF
	grep -Eq "^ +held by +(.*, )?pid $orph \(hold_buffer\) fd [0-9]+(, |$)" "$tmp/orph-st.txt" ||
		{ r2=1; sed 's/^/# /' "$tmp/orph-st.txt"; }
	# unprivileged: root's processes cannot be read, and status says so
	nobody $ctl -j status > "$tmp/orph-nb.json"
	python3 - "$tmp/orph-nb.json" "$orph" << 'EOF'
import json, sys
d, orph = json.load(open(sys.argv[1])), int(sys.argv[2])
u = d["in_use"]
assert u["unreadable_processes"] >= 1 and u["rmmod_would_fail"], u
assert all(f["pid"] != orph for f in u["files"]), ("root's fd read by nobody?", u)
EOF
	r3=$?
	kill "$orph"
	for _ in $(seq 600); do [ -d "/proc/$orph" ] || break; sleep 0.1; done	# not our child: at most 60 s
	[ -d "/proc/$orph" ] && echo "# orphan $orph still there 60 s after SIGTERM"
	result $r1 "buf_show_names_reparented_holder"
	result $r2 "status_names_what_keeps_module_in_use"
	result $r3 "status_counts_unreadable_processes"
else
	echo "# orphan holder did not start: $(cat "$tmp/orph.out")"
	result 1 "buf_show_names_reparented_holder"
	result 1 "status_names_what_keeps_module_in_use"
	result 1 "status_counts_unreadable_processes"
fi

# A dma-buf whose only fd is in flight in a unix socket nobody reads: no
# process's fd table or mappings hold it; buf show says so, and the buffer
# goes when the socket is closed.
hold infl inflight 2
ino=$(awk '/^ready/ {print $3}' "$tmp/infl.out")
$ctl -j buf show > "$tmp/infl.json"
$ctl buf show > "$tmp/infl.txt"
python3 - "$tmp/infl.json" "${ino:-0}" << 'EOF'
import json, sys
d, ino = json.load(open(sys.argv[1])), int(sys.argv[2])
mine = [b for b in d if ino in b["dmabufs_unheld"]]
assert len(mine) == 1, ("dma-buf %d not reported unheld" % ino, d)
b = mine[0]
assert b["holders"] == [] and b["handle"] == 0 and b["dmabufs"] == 1 and b["map_count"] == 0, b
EOF
r1=$?
grep -q "dma-buf ino $ino: no process holds an fd or mapping of it (in flight in a unix socket" "$tmp/infl.txt" ||
	{ r1=1; sed 's/^/# /' "$tmp/infl.txt"; }
unhold infl
gone() { $ctl -j buf show | python3 -c "import json,sys; sys.exit(any($1 in b['dmabufs_unheld'] for b in json.load(sys.stdin)))"; }
for _ in $(seq 600); do	# the socket's close releases the fd: at most 60 s
	gone "${ino:-0}" && break
	sleep 0.1
done
gone "${ino:-0}" || { r1=1; echo "# dma-buf $ino still alive 60 s after its socket closed"; }
result $r1 "buf_show_dmabuf_in_flight_unheld"

valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	$ctl -j status > /dev/null 2> "$tmp/vg.txt" &&
valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	$ctl buf show > /dev/null 2>> "$tmp/vg.txt"
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/vg.txt"
result $rc "cli_clean_under_valgrind"

[ $failed -eq 0 ]
