#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# examples/hip_import.c and examples/hip_export.c compile against ROCm's
# own headers (tests/run-all.sh). Debian 12's ROCm 5.2 has no
# hsa_amd_portable_export_dmabuf(), so the headers are sid's
# (libamdhip64-dev, libhsa-runtime-dev: downloaded with tests/vm/apt-sid.sh
# and unpacked, never installed; cached per version in
# $STRIXPEER_CACHE/rocm-headers/). Compiled with the library's warning
# flags and -Werror, not linked and not run: no GPU here. Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
cache=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}/rocm-headers
pkgs="libamdhip64-dev libhsa-runtime-dev"
echo "TAP version 13"
echo "1..3"
mkdir -p "$cache"
out=$repo/build/hip-examples-check
rm -rf "$out"
mkdir -p "$out"

# The versions sid has now; the newest cached unpack when sid cannot be asked.
vers=""
if tests/vm/apt-sid.sh update > "$out/apt.log" 2>&1; then
	for p in $pkgs; do
		v=$(tests/vm/apt-sid.sh cache policy "$p" 2>> "$out/apt.log" | sed -n 's/^ *Candidate: //p')
		[ -n "$v" ] && [ "$v" != "(none)" ] || { vers=""; break; }
		vers="$vers${vers:+_}$v"
	done
fi
dir=""
if [ -n "$vers" ]; then
	dir=$cache/$(echo "$vers" | tr -c 'A-Za-z0-9._+\n-' '_')
	if [ ! -f "$dir/.done" ]; then
		rm -rf "$dir" "$dir.tmp"
		mkdir -p "$dir.tmp/debs"
		if (cd "$dir.tmp/debs" && "$repo/tests/vm/apt-sid.sh" download $pkgs) >> "$out/apt.log" 2>&1; then
			for d in "$dir.tmp"/debs/*.deb; do dpkg-deb -x "$d" "$dir.tmp/root" || break; done
			rm -rf "$dir.tmp/debs"
			touch "$dir.tmp/.done" && mv "$dir.tmp" "$dir"
		fi
		rm -rf "$dir.tmp"
	fi
fi
[ -f "$dir/.done" ] || dir=$(ls -d "$cache"/*/ 2> /dev/null | sort -V | tail -n 1)
dir=${dir%/}
inc=$dir/root/usr/include
if [ -z "$dir" ] || [ ! -f "$inc/hip/hip_runtime_api.h" ] || [ ! -f "$inc/hsa/hsa_ext_amd.h" ]; then
	echo "not ok 1 rocm_headers_from_sid # no sid ROCm headers: $(tail -n 3 "$out/apt.log" | tr '\n' ' ')"
	echo "not ok 2 hip_import_compiles # no headers"
	echo "not ok 3 hip_export_compiles # no headers"
	exit 1
fi
echo "ok 1 rocm_headers_from_sid # $(basename "$dir")"
rc=0
i=2
for ex in hip_import hip_export; do
	if ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 -O2 \
		-D__HIP_PLATFORM_AMD__ -isystem "$inc" -Iinclude \
		-c "examples/$ex.c" -o "$out/$ex.o" > "$out/$ex.log" 2>&1 &&
		nm "$out/$ex.o" | grep -q ' U hipImportExternalMemory\| U hsa_amd_portable_export_dmabuf'; then
		echo "ok $i ${ex}_compiles"
	else
		echo "not ok $i ${ex}_compiles # $(head -n 3 "$out/$ex.log" | tr '\n' ' ')"
		rc=1
	fi
	i=$((i + 1))
done
exit $rc
