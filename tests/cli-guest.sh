#!/bin/bash
# strixpeerctl against a loaded module (run by tests/vm/guest-suite.sh): the
# table and -j JSON forms agree, JSON parses, words match by prefix, bad
# words fail clearly, and the CLI is clean under valgrind. Prints TAP.
set -u
ctl=build/strixpeerctl
n=0
failed=0
plan=7
echo "TAP version 13"
echo "1..$plan"
result() {	# result <0|1> <name>
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n $2"; else echo "not ok $n $2"; failed=$((failed + 1)); fi
}
json() {	# json <python expression over d> < JSON
	python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"
}

$ctl status > /tmp/st.txt 2>&1
result $? "status_exits_zero"
grep -Eq '^ +loaded +yes$' /tmp/st.txt
result $? "status_shows_module_loaded"

$ctl -j status | json 'd["module"]["loaded"] is True and d["memory"]["buffers"] == 0 and d["module"]["version"] == open("VERSION").read().strip()'
result $? "status_json_parses_and_matches"

$ctl -j -p version | json 'd["module"] == d["library"] and d["abi"].startswith("1.")'
result $? "version_json"

diff <($ctl st) <($ctl status) > /dev/null
result $? "prefix_match"

out=$($ctl frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'unknown object "frobnicate"'
result $? "unknown_object_refused"

valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	$ctl -j status > /dev/null 2> /tmp/vg.txt
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' /tmp/vg.txt
result $rc "status_clean_under_valgrind"

[ $failed -eq 0 ]
