# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Streamed TAP for the guest scripts that check strixpeerctl end to end
# (tests/guest/bench-smoke.sh, tests/guest/gpu-proof-guest.sh): each case is
# printed as soon as it ran, so a run cut short still shows how far it got.
# (tests/lib/tap.sh collects the host checks' cases and prints them at the
# end instead.)
#
#   . tests/lib/tap-run.sh     needs $tmp, a directory for the outputs
#   ok <name> <command...>     a case from the command's exit status; on
#                              failure its last 25 lines of output as
#                              diagnostics. $fail is 1 after any failure.

# shellcheck disable=SC2034 # fail: read by the caller
n=0
fail=0
ok() {
	local name=$1
	shift
	n=$((n + 1))
	if "$@" > "${tmp:?tap-run.sh: the caller sets tmp}/out.$n" 2>&1; then
		echo "ok $n $name"
	else
		echo "not ok $n $name"
		sed 's/^/# /' "$tmp/out.$n" | tail -n 25
		fail=1
	fi
}
