#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The feature probes (kmod/conftest.sh, and through its probe()
# tests/kmod/conftest.sh) must not take the build's warning policy: under
# -Werror (CONFIG_WERROR, KCFLAGS, W=e) with extra warnings (W=2; clang's
# W=1) a warning in a kernel header would fail every probe, and the
# features that only a probe turns on (the events group's multicast flag,
# the PMD mappings, the aligned get_unmapped_area, ...) would vanish
# without a word. For every VM kernel whose headers are unpacked, runs the
# probes as Kbuild does (kmod/conftest.h, made before the first object)
# once plainly and once with W=2 KCFLAGS=-Werror, and compares the two.
# Run by tests/run-all.sh once the VM kernels are fetched. Prints TAP.
#
# The outcome is a function of the probes, the kernels' headers, the
# compiler and this script alone: a passing one is kept under a key of all
# of them (the headers by content: another checkout at another path, whose
# fetch found them unpacked or unpacked them again, has the same key) and
# restored when none changed (tests/lib/host-cache.sh; SP_NO_CHECK_CACHE=1
# runs it in full).
set -u
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
. tests/lib/tap.sh
. tests/lib/host-cache.sh

kernel_list=$(tests/vm/kernels.sh list 2> /dev/null)
# shellcheck disable=SC2317 # called by hc_begin
inputs() {	# what the outcome depends on (hc_begin hashes it)
	local name kver root sorted
	hc_files tests/host/conftest-check.sh tests/lib/tap.sh tests/lib/host-cache.sh \
		tests/vm/kernels.sh Kbuild VERSION kmod include
	# in any order: a fetch of some names (check-one's) puts them first
	sorted=$(LC_ALL=C sort <<< "$kernel_list")
	echo "$sorted"
	while read -r name kver root; do
		if [ -n "$root" ] && [ -f "$root/usr/src/linux-headers-$kver/Makefile" ]; then
			hc_kernel "$root"
		fi
	done <<< "$sorted"
	hc_toolchain sh	# Kbuild runs kmod/conftest.sh with sh
	hc_env
}
hc_begin conftest-check inputs

t=$repo/build/conftest-check
rm -rf "$t"
mkdir -p "$t"

# probes <dir> <kdir> [make args...]: kmod/conftest.h of a fresh copy (the
# object after it may fail to build under the strict flags: not our concern)
probes() {
	local d=$1 kdir=$2
	shift 2
	mkdir -p "$d"
	cp -r Kbuild VERSION kmod include "$d/"
	make -C "$kdir" M="$d" "$@" kmod/params.o > "$d/build.log" 2>&1
	[ -f "$d/kmod/conftest.h" ]
}

kernels=0
while read -r name kver root; do
	kdir=$root/usr/src/linux-headers-$kver
	[ -f "$kdir/Makefile" ] || continue
	kernels=$((kernels + 1))
	if ! probes "$t/$name/plain" "$kdir"; then
		result 1 "probes_run_$name" "$(tail -n 5 "$t/$name/plain/build.log")"
		continue
	fi
	if ! probes "$t/$name/strict" "$kdir" W=2 KCFLAGS=-Werror; then
		result 1 "probes_run_under_werror_$name" "$(tail -n 5 "$t/$name/strict/build.log")"
		continue
	fi
	found=$(grep -c '^#define STRIXPEER_HAVE_' "$t/$name/plain/kmod/conftest.h")
	d=$(diff "$t/$name/plain/kmod/conftest.h" "$t/$name/strict/kmod/conftest.h")
	result "$([ -z "$d" ] && echo 0 || echo 1)" \
		"probes_ignore_werror_and_extra_warnings_$name" \
		"$kver: W=2 KCFLAGS=-Werror changed the probes' result: $d"
	# the plain run found something at all (a broken probe() finds nothing)
	result "$([ "$found" -gt 0 ] && echo 0 || echo 1)" "probes_find_features_$name" \
		"$kver: no STRIXPEER_HAVE_* defined"
done <<< "$kernel_list"
[ "$kernels" -gt 0 ] || skip "probes_ignore_werror" "no VM kernel headers (tests/vm/kernels.sh fetch)"
hc_finish
