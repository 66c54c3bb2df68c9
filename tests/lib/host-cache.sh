# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# A host check's passing outcome kept under a key of everything it reads,
# for the checks whose outcome is a pure function of their inputs (sources,
# kernel headers, toolchain, the check itself), like the module builds
# tests/vm/build-module.sh keeps. Sourced after tests/lib/tap.sh:
#
#   . tests/lib/host-cache.sh
#   hc_begin NAME KEYFUNC [ARGS...]  KEYFUNC prints every input of the
#       check; hashed, that is the key. A kept outcome with this key is
#       printed (its TAP, with "# restored from FILE (same inputs: key K)")
#       and the script exits: nothing is run. Otherwise the check runs.
#   hc_finish                        instead of finish: prints the TAP, says
#       that it ran in full and under which key, and keeps it when every
#       case passed (a failure or a skip is never kept: it runs again).
#
# Helpers for KEYFUNC: hc_files PATH... (the content of every file),
# hc_kernel ROOT (a VM kernel's headers and kbuild), hc_toolchain TOOL...
# (the host's compiler, binutils, make, and the named tools, by content),
# hc_env (the environment a kernel build reads).
#
# Kept in $STRIXPEER_CACHE/host-checks/NAME-KEY.tap, written to a temporary
# name and renamed, so that checkouts sharing the cache never read half a
# file; the newest 20 per check are kept. SP_NO_CHECK_CACHE=1 (or
# SP_NO_BUILD_CACHE=1) always runs the check in full and keeps nothing.

hc_store=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}/host-checks
hc_name=
hc_key=

hc_off() {
	[ "${SP_NO_CHECK_CACHE:-0}" = 1 ] || [ "${SP_NO_BUILD_CACHE:-0}" = 1 ]
}

# hc_files PATH...: every file below the paths, by content (a conftest.h
# left by an in-tree build is generated, not an input)
hc_files() {
	find "$@" -type f ! -name conftest.h -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
}

# hc_kernel ROOT: a kernel unpacked by tests/vm/kernels.sh, by content
# alone, never by its path or its files' times (another checkout's fetch
# may unpack the same packages again: new times, same files): its stamp
# (the packages it came from), every entry of its headers and kbuild tools
# (usr/) by name, type, size and link target, and every file there by
# content but the modules (usr/lib/modules/, sid's image). Hashing some
# 100 MB costs seconds, so the digest is kept beside the outcomes under a
# key of the entries' names, sizes and times: the same tree is read once,
# and a tree whose times changed is read again (same content, same digest)
hc_kernel() {
	local root=$1 list memo sum
	echo "kernel ${root##*/}: $(cat "$root/.strixpeer-complete" 2> /dev/null)"
	(cd "$root" && find usr -printf '%P %y %s %l\n' | LC_ALL=C sort | sha256sum)
	list=$(cd "$root" && find usr -printf '%P %y %s %T@ %l\n' | LC_ALL=C sort | sha256sum | cut -c1-40)
	memo=$hc_store/kernel-content-$list.sum
	if ! sum=$(cat "$memo" 2> /dev/null) || [ -z "$sum" ]; then
		sum=$(cd "$root" && find usr -path usr/lib/modules -prune -o -type f -print0 |
			LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -c1-64)
		if mkdir -p "$hc_store" 2> /dev/null && echo "$sum" > "$memo.tmp.$$" 2> /dev/null; then
			mv "$memo.tmp.$$" "$memo"
			# shellcheck disable=SC2012 # names made here, no odd characters
			ls -t "$hc_store"/kernel-content-*.sum 2> /dev/null | tail -n +41 | xargs -r rm -f
		fi
	fi
	echo "content $sum"
}

# hc_toolchain [TOOL...]: gcc (and its cc1), as, ld, make, bash and the
# named tools by content; the sid toolchains (tests/vm/sid-toolchain.sh)
# by name, size and time of every file
hc_toolchain() {
	local t p cache=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
	for t in gcc as ld make bash "$@"; do
		if p=$(command -v "$t"); then
			echo "$t $(sha256sum < "$(readlink -f "$p")")"
		else
			echo "$t: none"
		fi
	done
	echo "cc1 $(sha256sum < "$(gcc -print-prog-name=cc1)")"
	gcc --version | head -n 1
	echo "bash $BASH_VERSION"
	[ ! -d "$cache/toolchains" ] ||
		(cd "$cache/toolchains" && find . -printf '%P %y %s %T@ %l\n' | LC_ALL=C sort | sha256sum)
}

# hc_env: what a kernel build or the check reads from the environment, and
# whether the checkout's path is one make and the shell take as one word
# (any such path behaves alike; another one is keyed by itself)
hc_env() {
	env | LC_ALL=C grep -E '^(PATH|CC|LD|AS|HOSTCC|LLVM|ARCH|CROSS_COMPILE|KCFLAGS|KCPPFLAGS|KAFLAGS|KBUILD_[A-Z_]*|MAKEFLAGS|MFLAGS|GNUMAKEFLAGS|CFLAGS|CPATH|C_INCLUDE_PATH|GCC_[A-Z_]*|COMPILER_PATH|LIBRARY_PATH|TMPDIR|LANG|LC_[A-Z]*|SP_OFED_[A-Z]*|SP_PEER_SYMVERS)=' | LC_ALL=C sort
	if [[ $PWD =~ ^[A-Za-z0-9_./+-]+$ ]]; then
		echo "checkout: a plain path"
	else
		echo "checkout: $PWD"
	fi
}

hc_begin() {	# hc_begin NAME KEYFUNC [ARGS...]
	local file tap planned oks
	hc_name=$1
	shift
	if hc_off; then
		hc_key=
		return 0
	fi
	hc_key=$({ echo "host-cache 1 $hc_name"; "$@"; } | sha256sum | cut -c1-20)
	file=$hc_store/$hc_name-$hc_key.tap
	# read whole before use: a file removed meanwhile is a miss, not half a TAP
	tap=$(cat "$file" 2> /dev/null) || return 0
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' <<< "$tap")
	oks=$(grep -c '^ok ' <<< "$tap")
	if [ -z "$planned" ] || [ "$planned" = 0 ] || [ "$oks" != "$planned" ] ||
		grep -q '^not ok' <<< "$tap"; then
		return 0
	fi
	touch "$file" 2> /dev/null
	sed -n '1,2p' <<< "$tap"
	echo "# restored from $file (same inputs: key $hc_key); SP_NO_CHECK_CACHE=1 runs it in full"
	sed '1,2d' <<< "$tap"
	exit 0
}

# shellcheck disable=SC2154 # n, cases, failed: tests/lib/tap.sh's
hc_finish() {
	local tap file
	tap=$(echo "TAP version 13"; echo "1..$n"; printf '%s\n' "${cases[@]}")
	echo "$tap"
	if [ -z "$hc_key" ]; then
		echo "# ran in full: SP_NO_CHECK_CACHE=1 or SP_NO_BUILD_CACHE=1, nothing kept"
	elif [ "$failed" -ne 0 ] || [ "$n" -eq 0 ] || grep -q '# SKIP' <<< "$tap"; then
		echo "# ran in full (key $hc_key): not kept, not every case passed"
	else
		file=$hc_store/$hc_name-$hc_key.tap
		if mkdir -p "$hc_store" && echo "$tap" > "$file.tmp.$$" && mv "$file.tmp.$$" "$file"; then
			echo "# ran in full (key $hc_key), kept in $file"
			# shellcheck disable=SC2012 # names made here, no odd characters
			ls -t "$hc_store/$hc_name"-*.tap 2> /dev/null | tail -n +21 | xargs -r rm -f
		else
			rm -f "$file.tmp.$$"
			echo "# ran in full (key $hc_key), could not keep it in $hc_store"
		fi
	fi
	[ "$failed" -eq 0 ]
	exit
}
