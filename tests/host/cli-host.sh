#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# strixpeerctl's command line, on the host (no module: tests/run-all.sh runs
# it after 'make user'): help at every level and -h, unknown, ambiguous and
# extra words refused with exit status 2 and a message naming them, config
# set values checked before the module is asked, -j honoured or refused,
# and what every command does when the module is not loaded. The same
# commands against a loaded module: tests/cli-guest.sh. Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
ctl=build/strixpeerctl
. tests/lib/tap.sh
# expect <name> <status> <stdout|stderr> <grep -E pattern> -- <args...>
expect() {
	local name=$1 want=$2 stream=$3 pattern=$4 out err rc
	shift 5
	out=$("$ctl" "$@" 2> /tmp/cli-host.$$); rc=$?
	err=$(cat /tmp/cli-host.$$)
	rm -f /tmp/cli-host.$$
	local text=$out
	[ "$stream" = stderr ] && text=$err
	[ "$rc" -eq "$want" ] && echo "$text" | grep -Eq -- "$pattern"
	result $? "$name" "strixpeerctl $*: exit $rc, stdout '${out:0:200}', stderr '${err:0:200}'"
}

if [ -e /sys/module/strixpeer ] || [ ! -x "$ctl" ]; then
	echo "TAP version 13"
	echo "1..0 # SKIP needs build/strixpeerctl and no strixpeer module loaded"
	exit 0
fi

# help at every level, on stdout, status 0
expect help_top 0 stdout '^usage: strixpeerctl .*OBJECT' -- help
expect help_dash_h 0 stdout '^  -h, --help ' -- -h
expect help_names_json_option 0 stdout '^  -j, --json ' -- help
expect help_lists_objects 0 stdout '^  config +show \| set KEY VALUE' -- --help
expect help_object_word 0 stdout '^usage: strixpeerctl \[-j\] buf show \[pid PID\]$' -- help buf
expect help_buf 0 stdout '^usage: strixpeerctl \[-j\] buf show \[pid PID\]$' -- buf help
expect help_buf_show 0 stdout '^usage: strixpeerctl \[-j\] buf show' -- buf show help
expect help_config 0 stdout '^       strixpeerctl config set KEY VALUE' -- config help
expect help_config_set 0 stdout '^BOOL: y, yes, true, on, 1 / n, no, false, off, 0$' -- config set -h
expect help_stats 0 stdout '^       strixpeerctl stats -f prometheus$' -- stats help
expect help_monitor 0 stdout 'monitor \[-t\]$' -- monitor --help
expect help_status 0 stdout '^usage: strixpeerctl \[-j\] status$' -- status help
expect help_bench 0 stdout '^usage: strixpeerctl \[-j\] bench \[HOST\]' -- bench help
expect help_bench_word 0 stdout '^usage: strixpeerctl \[-j\] bench \[HOST\]' -- help bench
expect help_doctor 0 stdout '^usage: strixpeerctl doctor ' -- doctor help
expect help_doctor_word 0 stdout '^usage: strixpeerctl doctor ' -- help doctor
expect help_json_refused 2 stderr 'help has no JSON form' -- -j help

# unknown, ambiguous and extra words: status 2, the word named
expect unknown_object 2 stderr 'unknown object "frobnicate"; see "strixpeerctl help"' -- frobnicate
expect ambiguous_object 2 stderr 'ambiguous object "st": could be status or stats' -- st
expect unknown_command 2 stderr 'unknown command "list"; see "strixpeerctl buf help"' -- buf list
expect extra_after_buf_show 2 stderr 'unexpected argument "extra"' -- buf show pid 1 extra
expect extra_after_status 2 stderr 'unexpected argument "now"' -- status now
expect extra_after_version 2 stderr 'unexpected argument "x"' -- version x
expect extra_after_config_show 2 stderr 'unexpected argument "all"' -- config show all
expect extra_after_config_set 2 stderr 'unexpected argument "3"' -- config set max_buf_size 1G 3
expect extra_after_monitor 2 stderr 'unexpected argument "x"' -- monitor -t x
expect bad_pid 2 stderr 'bad pid "12x"' -- buf show pid 12x
expect pid_needs_number 2 stderr '"pid" needs a process id' -- buf show pid
expect bad_option 2 stderr 'strixpeerctl help' -- --frob
expect extra_after_bench_help 2 stderr 'unexpected argument "x"' -- bench help x
expect extra_after_bench_host 2 stderr 'unexpected argument "two"' -- bench one two
expect bench_serve_takes_no_host 2 stderr 'unexpected argument "h" \(--serve takes no HOST\)' -- bench --serve h
# doctor keeps its own exit status 3 for "could not run" (2 is its FAIL)
expect extra_after_doctor_serve 3 stderr 'unexpected argument "bogusarg"' -- doctor --serve bogusarg
expect extra_after_doctor 3 stderr 'unexpected argument "now"' -- doctor now
expect timestamp_is_for_monitor 2 stderr '-t is for monitor only' -- -t status
# doctor peer|serve|compare; the older flags still parse (aliases for one release)
expect help_doctor_commands 0 stdout '^       strixpeerctl doctor serve \[--bind ADDR\]' -- doctor help
expect extra_after_doctor_serve_cmd 3 stderr 'unexpected argument "bogusarg"' -- doctor serve bogusarg
expect doctor_peer_needs_host 3 stderr 'doctor peer: which HOST\?' -- doctor peer
expect doctor_compare_needs_reports 3 stderr 'doctor compare: no reports' -- doctor compare
expect doctor_compare_missing_file 3 stderr 'nonexistent' -- doctor compare /nonexistent/a.json /nonexistent/b.json
expect doctor_compare_flag_alias 3 stderr 'nonexistent' -- doctor --compare /nonexistent/a.json /nonexistent/b.json
expect doctor_cmd_and_old_flag 3 stderr 'older spellings of doctor peer, serve and compare' -- doctor serve --compare x
expect doctor_serve_and_rdma_test 3 stderr 'exclude each other' -- doctor serve --rdma-test
expect doctor_options_after_cmd 3 stderr 'bad --size' -- doctor peer h --size 0
# one port per tool, checked before anything connects; distinct defaults
expect doctor_bad_port 3 stderr '--port: bad port "0": 1..65535' -- doctor serve --port 0
expect doctor_port_not_number 3 stderr '--port: bad port "18x": 1..65535' -- doctor peer h --port 18x
expect bench_bad_port 2 stderr '--port: bad port "65536": 1..65535' -- bench --serve --port 65536
expect bench_help_port 0 stdout "--port N +the server's librdmacm port, the only one \(18515\)" -- bench help
# a usage error on a doctor command line is 3 everywhere, also before "doctor"
expect doctor_global_bad_option 3 stderr 'strixpeerctl help' -- --frob doctor
expect doctor_global_timestamp 3 stderr '-t is for monitor only' -- -t doc

# config set: keys exact or a unique prefix, values checked first
expect config_key_ambiguous 2 stderr 'ambiguous config key "max": could be max_buf_size or max_pinned_bytes' -- config set max 2G
expect config_key_unknown 2 stderr 'unknown config key "size"' -- config set size 2G
refused() {	# refused <name> <key> <values...>: each refused with status 2
	local name=$1 key=$2 v bad=""
	shift 2
	for v in "$@"; do
		"$ctl" config set "$key" "$v" > /dev/null 2>&1
		[ $? -eq 2 ] || bad="$bad '$v'"
	done
	[ -z "$bad" ]
	result $? "$name" "accepted:$bad"
}
refused config_sizes_refused_before_asking_the_module max_buf_size \
	0x100000 -1G 1.5G 1X 99999999999999999999 16777216T 1GG " 1G"
refused config_booleans_refused_before_asking_the_module require_huge maybe 2 yess "" Yes! nope
refused config_nodes_refused_before_asking_the_module default_node -2 1024 x 01 ""
# well-formed values get as far as the module (status 1: not loaded)
bad=""
for kv in "max_buf_size 010G" "max_buf_size 4096" "max_b 1536MiB" "max_p unlimited" \
	"max_pinned_bytes 0" "default_node -1" "def 3" "require_huge Y" "req false" "req OFF"; do
	# shellcheck disable=SC2086
	"$ctl" config set $kv > /dev/null 2>&1
	[ $? -eq 1 ] || bad="$bad '$kv'"
done
[ -z "$bad" ]
result $? "config_good_values_reach_the_module" "refused:$bad"
expect config_value_message 2 stderr 'bad value "0x10" for max_buf_size: a size in bytes: decimal' -- config set max_buf_size 0x10

# -j: honoured, or refused where there is no JSON
expect json_version_option 0 stdout '^\{"library":"[0-9.]+"\}$' -- -j -V
expect pretty_implies_json 0 stdout '^  "library": ' -- -p -V
expect prometheus_is_not_json 2 stderr 'stats -f prometheus is not JSON' -- -j stats -f prometheus
out=$("$ctl" doctor -p --only memory 2> /dev/null); rc=$?
[ $rc -le 2 ] && echo "$out" | grep -q '^  "' && echo "$out" | python3 -c 'import json,sys; json.load(sys.stdin)'
result $? "doctor_pretty_is_json_after_doctor_too" "exit $rc: ${out:0:200}"
out=$("$ctl" -p doctor --only memory 2> /dev/null); rc=$?
[ $rc -le 2 ] && echo "$out" | grep -q '^  "' && echo "$out" | python3 -c 'import json,sys; json.load(sys.stdin)'
result $? "doctor_pretty_is_json_before_doctor" "exit $rc: ${out:0:200}"
expect unknown_format 2 stderr 'unknown format "csv"' -- stats -f csv

# without the module: status says so (table and JSON), the rest exit 1
expect no_module_status 1 stdout '^ +loaded +no$' -- status
out=$("$ctl" -j status 2> /dev/null); rc=$?
[ $rc -eq 1 ] && echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin)["module"]; assert d["loaded"] is False and "modprobe strixpeer" in d["error"]'
result $? "no_module_status_json"
expect no_module_version_json 1 stdout '"module":null' -- -j version
bad=""
for c in "buf show" stats "config show" monitor "config set max_buf_size 1G"; do
	# shellcheck disable=SC2086
	err=$("$ctl" $c 2>&1 > /dev/null); rc=$?
	{ [ $rc -eq 1 ] && echo "$err" | grep -q '^strixpeerctl: no "strixpeer" netlink family: is the strixpeer module loaded? (modprobe strixpeer)$'; } ||
		bad="$bad '$c' ($rc: $err)"
done
[ -z "$bad" ]
result $? "no_module_commands_exit_1_saying_why" "$bad"

# stats -f prometheus without the module: strixpeer_up 0, exit 0
out=$("$ctl" stats -f prometheus 2> /tmp/cli-host.$$); rc=$?
err=$(cat /tmp/cli-host.$$); rm -f /tmp/cli-host.$$
[ $rc -eq 0 ] && echo "$out" | grep -qx 'strixpeer_up 0' &&
	echo "$out" | grep -qx 'strixpeer_info{version="",library="[0-9.]*",peerdirect="no",client=""} 1' &&
	echo "$err" | grep -q 'is the strixpeer module loaded.*(strixpeer_up 0)$'
result $? "no_module_prometheus_up_0" "exit $rc, stdout '${out:0:300}', stderr '${err:0:200}'"

# a bench whose RDMA part could not run: exit 1, the JSON says why
out=$("$ctl" -j bench nosuchhost.invalid --ops write --kinds malloc --size 4K --repeat 1 \
	--quiet 2> /tmp/cli-host.$$); rc=$?
err=$(cat /tmp/cli-host.$$); rm -f /tmp/cli-host.$$
[ $rc -eq 1 ] && echo "$err" | grep -q 'RDMA figures could not be measured' &&
	echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["rdma_unavailable"]'
result $? "bench_without_rdma_exits_1" "exit $rc, stdout '${out:0:200}', stderr '${err:0:200}'"
expect bench_host_only_exits_0 0 stdout '"rdma_unavailable":null' -- -j bench --ops host \
	--kinds malloc --size 4K --repeat 1 --quiet

finish
