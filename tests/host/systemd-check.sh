#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The systemd units in systemd/ (shipped by strixpeer-utils) and the example
# alert rules, on the host: systemd-analyze verify on the units (with the
# built strixpeerctl in place of /usr/bin's and the man pages from
# docs/man, as verify runs both), the textfile service's own command
# replacing an old strixpeer.prom with strixpeer_up 0 when the module is
# absent, promtool check metrics on that file and promtool check rules on
# systemd/strixpeer.rules.yml. Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
ctl=$PWD/build/strixpeerctl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$ctl" ]; then
	echo "TAP version 13"
	echo "1..0 # SKIP needs build/strixpeerctl (make user)"
	exit 0
fi

# systemd-analyze verify: syntax, and that commands and man pages exist
if command -v systemd-analyze > /dev/null; then
	mkdir -p "$tmp/units" "$tmp/man/man8"
	cp docs/man/*.8 "$tmp/man/man8/"
	for u in systemd/*.service systemd/*.timer; do
		sed "s#/usr/bin/strixpeerctl#$ctl#" "$u" > "$tmp/units/${u##*/}"
	done
	out=$(MANPATH=$tmp/man systemd-analyze verify "$tmp"/units/* 2>&1)
	[ $? -eq 0 ] && [ -z "$out" ]
	result $? "systemd_analyze_verify_units" "$out"
else
	skip "systemd_analyze_verify_units" "no systemd-analyze (apt install systemd)"
fi
# the timer starts the service of its name
grep -qx 'WantedBy=timers.target' systemd/strixpeer-textfile.timer &&
	[ -f systemd/strixpeer-textfile.service ]
result $? "timer_has_its_service"
grep -qx 'ExecStart=/usr/bin/strixpeerctl -j -t monitor' systemd/strixpeer-monitor.service
result $? "monitor_service_logs_json_with_times"

# The textfile service's command (its ExecStart, "$$" being systemd's "$"),
# run into a directory that holds the previous file.
script=$(sed -n "s/^ExecStart=\/bin\/sh -c '\(.*\)'$/\1/p" systemd/strixpeer-textfile.service |
	sed -e 's/\$\$/$/g' -e "s#/usr/bin/strixpeerctl#$ctl#")
mkdir -p "$tmp/textfile"
printf 'strixpeer_up 1\nstrixpeer_buffers 7\n' > "$tmp/textfile/strixpeer.prom"
want=0
[ -e /sys/module/strixpeer ] && want=1
TEXTFILE_DIR=$tmp/textfile /bin/sh -c "$script" 2> "$tmp/err"
rc=$?
prom=$tmp/textfile/strixpeer.prom
[ -n "$script" ] && [ $rc -eq 0 ] && grep -qx "strixpeer_up $want" "$prom" &&
	grep -q '^strixpeer_info{version=".*",library="[0-9.]*",peerdirect="\(yes\|no\)",client=".*"} 1$' "$prom" &&
	[ ! -e "$prom.tmp" ] && { [ $want -eq 1 ] || ! grep -q '^strixpeer_buffers' "$prom"; }
result $? "textfile_replaced_with_up_$want" "exit $rc, script '$script', file: $(cat "$prom"), stderr: $(cat "$tmp/err")"

promtool=${SP_PROMTOOL:-}
[ -n "$promtool" ] || promtool=$(tests/host/fetch-promtool.sh 2> /dev/null) || promtool=
if [ -n "$promtool" ]; then
	out=$("$promtool" check metrics < "$prom" 2>&1)
	result $? "promtool_check_metrics_textfile" "$out"
	out=$("$promtool" check rules systemd/strixpeer.rules.yml 2>&1)
	result $? "promtool_check_rules_example" "$out"
else
	skip "promtool_check_metrics_textfile" "no promtool (tests/host/fetch-promtool.sh: apt-get download prometheus failed)"
	skip "promtool_check_rules_example" "no promtool (tests/host/fetch-promtool.sh: apt-get download prometheus failed)"
fi
finish
