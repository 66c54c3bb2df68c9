#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# libstrixpeer's symbol versions, on the host after 'make user' (no module):
# tests/abi/1.0/ is the 1.0 header and version script (as at 2c88fde, the
# last commit before the control-plane structs got a size first; checked
# when .git is there); the library exports every 1.0 symbol at
# STRIXPEER_1.0, each call that changed also at STRIXPEER_1.6 (default); a
# program built against 1.0 binds the 1.0 ones and resolves them all
# (LD_BIND_NOW) against build/libstrixpeer.so.1, and strixpeerctl, built
# now, binds STRIXPEER_1.6; docs/library.md's counters example builds. The same program against the loaded module:
# build/tests/abi_compat in the guest suite. Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
lib=build/libstrixpeer.so.1
prog=build/tests/abi_compat
if [ ! -e "$lib" ] || [ ! -x "$prog" ]; then
	echo "TAP version 13"
	echo "1..0 # SKIP needs make user ($lib, $prog)"
	exit 0
fi
# 1. the snapshot is the 1.0 header and map
if git rev-parse -q --verify '2c88fde^{commit}' > /dev/null 2>&1; then
	bad=
	for f in include/strixpeer.h include/strixpeer/ctl.h include/strixpeer/reg.h; do
		git show "2c88fde:$f" | cmp -s - "tests/abi/1.0/$f" || bad="$bad $f"
	done
	git show 2c88fde:user/lib/libstrixpeer.map | cmp -s - tests/abi/1.0/libstrixpeer.map ||
		bad="$bad libstrixpeer.map"
	[ -z "$bad" ]
	result $? snapshot_is_1_0 "tests/abi/1.0 differs from 2c88fde:$bad"
else
	skip snapshot_is_1_0 "no git history here (a source tarball)"
fi

dyn=$(objdump -T "$lib" | awk '$NF ~ /^sp_/ { v = $(NF-1); gsub(/[()]/, "", v); print $NF "@" v }' | sort)
old=$(sed -n 's/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/\1/p' tests/abi/1.0/libstrixpeer.map | sort)
new=$(sed -n '/^STRIXPEER_1.6 {/,/^}/s/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/\1/p' user/lib/libstrixpeer.map | sort)

# 2. every 1.0 symbol is still there at STRIXPEER_1.0
missing=
for s in $old; do
	grep -qx "$s@STRIXPEER_1.0" <<< "$dyn" || missing="$missing $s"
done
[ -n "$old" ] && [ -z "$missing" ]
result $? every_1_0_symbol_exported "not at STRIXPEER_1.0:$missing"

# 3. the calls that changed have a STRIXPEER_1.6 default too
missing=
for s in $new; do
	grep -qx "$s@STRIXPEER_1.6" <<< "$dyn" || missing="$missing $s"
done
[ -n "$new" ] && [ -z "$missing" ]
result $? changed_calls_at_1_6 "not at STRIXPEER_1.6:$missing"

# 4. the 1.0 program asks for STRIXPEER_1.0 only
readelf -V "$prog" | grep -A3 'File: libstrixpeer.so.1' | grep -q 'Name: STRIXPEER_1.0' &&
	! readelf -V "$prog" | grep -q 'STRIXPEER_1.6'
result $? program_1_0_binds_1_0 "$(readelf -V "$prog" | grep -A3 'File: libstrixpeer')"

# 5. ... and runs against this library, every symbol resolved
out=$(LD_BIND_NOW=1 "$prog" --host 2>&1)
rc=$?
[ $rc -eq 0 ] && grep -q '^ok 1 host_no_module' <<< "$out"
result $? program_1_0_runs "exit $rc: $out"

# 6. a program built now binds the current calls
readelf -V build/strixpeerctl | grep -A4 'File: libstrixpeer.so.1' | grep -q 'Name: STRIXPEER_1.6'
result $? current_program_binds_1_6 "$(readelf -V build/strixpeerctl | grep -A4 'File: libstrixpeer')"

# 7. docs/library.md's counters example builds against this header and
# library and, without the module, says so
ex=$(mktemp -d)
awk -v f="$ex/counters.c" '/^<!-- test: counters.c -->$/ { w = 1; next }
	w && /^```c$/ { b = 1; next } b && /^```$/ { exit } b { print > f }' docs/library.md
out=$(cc -Wall -Wextra -Werror -Iinclude -o "$ex/counters" "$ex/counters.c" -Lbuild -lstrixpeer \
	-Wl,-rpath,"$PWD/build" 2>&1 && "$ex/counters" 2>&1)
rc=$?
rm -rf "$ex"
[ $rc -eq 1 ] && grep -q 'no "strixpeer" netlink family' <<< "$out"
result $? library_md_counters_example "exit $rc: $out"
finish
