# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# TAP for the host check scripts (tests/host/*-check.sh, tests/host/cli-host.sh):
# cases are collected and printed, with the plan, by finish.
#
#   . tests/lib/tap.sh
#   result <0|1> <name> [detail]   a case; the detail is printed on failure
#   skip <name> <reason>           a skipped case
#   finish                         prints the TAP, exits 0 when all passed

n=0
failed=0
cases=()
result() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		cases+=("ok $n $2")
	else
		cases+=("not ok $n $2")
		[ -n "${3:-}" ] && cases+=("# $(echo "$3" | head -c 600 | tr '\n' ' ')")
		failed=$((failed + 1))
	fi
}
skip() {
	n=$((n + 1))
	cases+=("ok $n $1 # SKIP $2")
}
finish() {
	echo "TAP version 13"
	echo "1..$n"
	printf '%s\n' "${cases[@]}"
	[ "$failed" -eq 0 ]
	exit
}
