#!/bin/sh
# sid-toolchain.sh: make an unpacked Debian sid kernel root buildable on this
# (older) host, for out-of-tree modules.
#
#   sid-toolchain.sh <kernel root> <kver>
#
# Why: sid's kernel is built by a newer gcc than the host's (e.g. gcc-16,
# whose flags such as -fmin-function-alignment gcc-12 rejects, and whose
# config-time tests set CONFIG_CC_HAS_* options gcc-12 does not honour), and
# sid's kbuild binaries (modpost, objtool, resolve_btfids, genksyms) need a
# newer glibc than the host's (GLIBC_2.38 on Debian 12's 2.36). So:
#
# 1. download (tests/vm/apt-sid.sh, never installed) the compiler named in the
#    headers' .kernelvariables, sid's binutils and pahole, and every library
#    they need down to sid's own glibc; unpack them into
#    $CACHE/toolchains/sid-gcc-<N>-<version>/ and point each of their
#    executables' ELF interpreter and rpath at that glibc (patchelf);
# 2. do the same to the kbuild binaries in <kernel root>;
# 3. make the headers' Makefile put the toolchain first in PATH, so that a
#    plain 'make -C <headers> M=...' (build-module.sh, DKMS) uses it.
#
# Nothing is done when the host can already run the kbuild binaries and has
# the compiler. Idempotent.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
root=$1
kver=$2
hdr=$root/usr/src/linux-headers-$kver

die() { echo "sid-toolchain.sh: error: $*" >&2; exit 1; }
log() { echo "sid-toolchain.sh: $*" >&2; }

[ -f "$hdr/.config" ] || die "no $hdr/.config"
command -v patchelf >/dev/null || die "patchelf not found (make deps)"

# The compiler the kernel was built with: .kernelvariables' CC (Debian).
gcc_name=$(sed -n 's/^CC *=.*(CROSS_COMPILE)\(gcc-[0-9]*\).*/\1/p' "$hdr/.kernelvariables" 2>/dev/null | head -n 1)
[ -n "$gcc_name" ] || die "cannot tell the compiler from $hdr/.kernelvariables"
cc=x86_64-linux-gnu-$gcc_name

kbuild_runs() {
	for b in "$hdr"/scripts/mod/modpost.real-lsb-64 "$hdr"/scripts/mod/modpost; do
		[ -f "$b" ] || continue
		"$b" -h 2>&1 | grep -q 'GLIBC_[0-9.]* not found' && return 1
		return 0
	done
	return 0
}
if command -v "$cc" >/dev/null && kbuild_runs; then
	log "$kver: the host has $cc and runs sid's kbuild binaries; nothing to do"
	exit 0
fi

"$HERE/apt-sid.sh" update || die "cannot reach sid's package lists"
gcc_pkg=$gcc_name-x86-64-linux-gnu	# the driver and cc1
gver=$("$HERE/apt-sid.sh" cache show --no-all-versions "$gcc_pkg" 2>/dev/null |
	sed -n 's/^Version: //p' | head -n 1)
[ -n "$gver" ] || die "sid has no $gcc_pkg"
kbuild_pkg=$(ls -d "$root"/usr/lib/linux-kbuild-* 2>/dev/null | head -n 1)
kbuild_pkg=${kbuild_pkg##*/}
tc=$CACHE/toolchains/sid-$gcc_name-$gver
lib=$tc/usr/lib/x86_64-linux-gnu
interp=$lib/ld-linux-x86-64.so.2

# patch_elf <file>: executables (they have an interpreter) run on sid's glibc.
patch_elf() {
	patchelf --print-interpreter "$1" >/dev/null 2>&1 || return 0
	patchelf --set-interpreter "$interp" --force-rpath --set-rpath "$lib" "$1"
}
patch_tree() {
	find "$@" -type f -perm -u+x | while read -r f; do
		[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && patch_elf "$f"
	done
}

if [ ! -f "$tc/.strixpeer-complete" ]; then
	# Everything the compiler, binutils, pahole and kbuild need, down to libc6.
	pkgs=$("$HERE/apt-sid.sh" cache depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances \
		"$gcc_pkg" binutils-x86-64-linux-gnu pahole "$kbuild_pkg" |
		grep -v '^[ <]' | sort -u | grep -vx "$kbuild_pkg")
	[ -n "$pkgs" ] || die "cannot resolve the toolchain's packages in sid"
	d=$CACHE/debs/sid-toolchain
	rm -rf "$d" "$tc.tmp"
	mkdir -p "$d" "$tc.tmp"
	log "downloading from sid: $(echo $pkgs)"
	# shellcheck disable=SC2086
	(cd "$d" && "$HERE/apt-sid.sh" download $pkgs >"$d/download.log" 2>&1) || {
		cat "$d/download.log" >&2
		die "apt-get download from sid failed"
	}
	for deb in "$d"/*.deb; do
		dpkg-deb -x "$deb" "$tc.tmp"
	done
	rm -rf "$d" "$tc"
	mv "$tc.tmp" "$tc"
	[ -x "$interp" ] || die "no $interp in sid's libc6"
	patch_tree "$tc/usr/bin" "$tc/usr/libexec"
	# What kbuild calls: $(CROSS_COMPILE)<tool> and pahole, from PATH.
	mkdir -p "$tc/bin"
	for t in "$tc"/usr/bin/x86_64-linux-gnu-* "$tc/usr/bin/pahole"; do
		ln -sf "../usr/bin/${t##*/}" "$tc/bin/${t##*/}"
	done
	"$tc/bin/$cc" --version >/dev/null || die "$cc from sid does not run here"
	# gcc must take sid's assembler (found through PATH), not the host's.
	as=$(PATH=$tc/bin:$PATH "$tc/bin/$cc" -print-prog-name=as)
	[ "$as" = "$tc/bin/x86_64-linux-gnu-as" ] || [ "$as" = "x86_64-linux-gnu-as" ] ||
		die "$cc would run the assembler $as"
	echo "$gcc_pkg $gver" >"$tc/.strixpeer-complete"
	log "toolchain ready in $tc: $("$tc/bin/$cc" --version | head -n 1)"
fi

# The kernel root's kbuild binaries run on the same glibc.
patch_tree "$root"/usr/lib/linux-kbuild-*

# The headers' Makefile: the toolchain first in PATH for everything make runs.
mk=$hdr/Makefile
if ! grep -q '^# strixpeer: sid toolchain' "$mk"; then
	{
		echo "# strixpeer: sid toolchain (tests/vm/sid-toolchain.sh): $gcc_pkg $gver"
		echo "export PATH := $tc/bin:\$(PATH)"
		cat "$mk"
	} >"$mk.tmp"
	mv "$mk.tmp" "$mk"
fi
log "$kver: builds with $tc"
