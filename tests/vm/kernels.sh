#!/bin/sh
# kernels.sh: the kernels the VM tests boot.
#
#   kernels.sh fetch [NAME...]
#                           download (apt-get download, never installed on the
#                           host) and unpack Debian bookworm's 6.1 and 6.12
#                           kernels with their headers + kbuild, the newest
#                           kernel of Debian sid (7.x; through apt-sid.sh, with
#                           the build tools from sid-toolchain.sh), and every
#                           debug kernel whose image+headers .debs sit in
#                           ../shared/kernels/; one root per kernel in the cache.
#                           Idempotent: an already-unpacked root is reused.
#                           STRIXPEER_SID=0 leaves sid out. With NAMEs (6.1,
#                           6.12, sid, debug), only those: make demo fetches
#                           6.12 alone; the other kernels the cache already
#                           has stay listed.
#   kernels.sh list         one line per kernel this checkout uses: <name>
#                           <kver> <root> (name: 6.1, 6.12, sid unless
#                           STRIXPEER_SID=0, debug-<kver> when its .deb is in
#                           this checkout's ../shared/kernels/)
#   kernels.sh kdir <kver>  the headers dir to use as KDIR for that kernel
#   kernels.sh root <kver>  the unpacked root of that kernel
#   kernels.sh srcver <kver> <dir>
#                           the Debian version of the linux-source-6.12 of that
#                           kernel's upstream version (6.12.118 for
#                           6.12.118+deb12-amd64 and for a debug 6.12.118-<name>):
#                           a .deb already in <dir>, else the archive's
#                           (apt-cache madison); exit 1 when neither has one
#
# Cache: ${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}/kernels/<kver>/ (a root
# with boot/, lib/modules/<kver>/, usr/src/linux-headers-*; complete once it
# has .strixpeer-complete), and kernels.list there: every kernel any fetch
# made, one "<name> <kver> <root>" line per name (merged by fetch, filtered
# by list). Several checkouts may share one cache, each with its own
# ../shared/kernels/ or none: a fetch removes only roots it finds
# half-unpacked (no .strixpeer-complete; fetches hold fetch.lock) and the
# root of a name it has just given another kernel (Debian's new ABI), never
# a kernel another checkout listed.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SHARED=$(cd "$REPO/.." && pwd)/shared
CACHE=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
KROOTS=$CACHE/kernels
DEBS=$CACHE/debs
INDEX=$CACHE/kernels.list

die() { echo "kernels.sh: error: $*" >&2; exit 1; }
log() { echo "kernels.sh: $*" >&2; }

# First "Depends:" of package $1 whose name matches the grep -E pattern $2.
apt_dep() {
	apt-cache depends "$1" 2>/dev/null |
		sed -n 's/^ *|\{0,1\}Depends: *//p' | grep -E "$2" | head -n 1
}

# Make the unpacked headers usable in place: the arch headers' Makefile
# includes the -common Makefile by absolute /usr/src path; point it at the
# copy next to it (relative to the Makefile, so the root stays relocatable).
fix_headers() {
	root=$1
	for mk in "$root"/usr/src/linux-headers-*/Makefile; do
		[ -f "$mk" ] || continue
		if grep -q '^include /usr/src/linux-headers-' "$mk"; then
			# shellcheck disable=SC2016 # make's $(...), not the shell's
			sed -i 's|^include /usr/src/\(linux-headers-[^/]*\)/|include $(dir $(lastword $(MAKEFILE_LIST)))../\1/|' "$mk"
		fi
		# sid's (7.x) also names its own directory: make that relative too
		# shellcheck disable=SC2016
		sed -i 's|^KBUILD_OUTPUT=/usr/src/linux-headers-.*|KBUILD_OUTPUT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))|' "$mk"
	done
}

# lib/modules/<kver>/build -> the unpacked headers (absolute: the host's root
# is shared into the guest at the same paths, so it also works there).
fix_build_link() {
	root=$1 kver=$2
	[ -d "$root/usr/src/linux-headers-$kver" ] || return 0
	ln -sfn "$root/usr/src/linux-headers-$kver" "$root/lib/modules/$kver/build"
	rm -f "$root/lib/modules/$kver/source"
}

# Build a trivial out-of-tree module against the unpacked headers.
selftest_build() {
	kver=$1 kdir=$2
	t=$(mktemp -d "${TMPDIR:-/tmp}/sp-hello.XXXXXX")
	cat >"$t/hello.c" <<'EOF'
#include <linux/module.h>
#include <linux/init.h>
static int __init hello_init(void) { pr_info("hello\n"); return 0; }
static void __exit hello_exit(void) { }
module_init(hello_init);
module_exit(hello_exit);
MODULE_LICENSE("GPL");
EOF
	echo 'obj-m := hello.o' >"$t/Makefile"
	if make -s -C "$kdir" M="$t" modules >"$t/build.log" 2>&1 && [ -f "$t/hello.ko" ]; then
		rm -rf "$t"
		return 0
	fi
	cat "$t/build.log" >&2
	rm -rf "$t"
	die "a hello-world module does not build against $kdir (is pahole/dwarves installed?)"
}

# Finish a freshly unpacked root $1 (a .tmp dir) for $2=kver and move it in place.
finish_root() {
	tmp=$1 kver=$2 stamp=$3
	[ -f "$tmp/boot/vmlinuz-$kver" ] || die "no boot/vmlinuz-$kver in the image package"
	[ -d "$tmp/lib/modules/$kver" ] || die "no lib/modules/$kver in the image package"
	fix_headers "$tmp"
	fix_build_link "$tmp" "$kver"
	depmod -b "$tmp" "$kver" || die "depmod failed for $kver"
	rm -rf "${KROOTS:?}/$kver"
	mv "$tmp" "$KROOTS/$kver"
	fix_build_link "$KROOTS/$kver" "$kver"
	if [ -d "$KROOTS/$kver/usr/src/linux-headers-$kver" ]; then
		log "$kver: test-building a hello-world module"
		selftest_build "$kver" "$KROOTS/$kver/usr/src/linux-headers-$kver"
	fi
	echo "$stamp" >"$KROOTS/$kver/.strixpeer-complete"
}

# cached_entry <name>: the kernel the index has for <name>, when its root is
# complete, goes into this fetch's list as it is (sid when unreachable).
cached_entry() {
	line=$(awk -v n="$1" '$1 == n { print $2, $3; exit }' "$INDEX" 2>/dev/null) || true
	ck=${line%% *} cr=${line#* }
	[ -n "$line" ] && [ -f "$cr/.strixpeer-complete" ] || return 1
	log "$1: $ck (cached)"
	echo "$1 $ck $cr" >>"$INDEX.tmp"
}

# fetch_debian <name> <meta package>: a Debian kernel series from apt.
fetch_debian() {
	name=$1 meta=$2
	img=$(apt_dep "$meta" '^linux-image-[0-9]') || true
	[ -n "$img" ] || die "apt cannot resolve $meta (run apt-get update? is bookworm(-security) in sources?)"
	img=${img%-unsigned}
	kver=${img#linux-image-}
	root=$KROOTS/$kver
	if [ -f "$root/.strixpeer-complete" ]; then
		log "$name: $kver (cached)"
		echo "$name $kver $root" >>"$INDEX.tmp"
		return 0
	fi
	hdr=linux-headers-$kver
	common=$(apt_dep "$hdr" '^linux-headers-.*-common$') || true
	kbuild=$(apt_dep "$hdr" '^linux-kbuild-') || true
	[ -n "$common" ] || die "apt cannot resolve the -common headers of $hdr"
	[ -n "$kbuild" ] || die "apt cannot resolve the kbuild package of $hdr"
	log "$name: $kver: downloading $img $hdr $common $kbuild"
	d=$DEBS/$kver
	mkdir -p "$d"
	for p in "$img" "$hdr" "$common" "$kbuild"; do
		if ! ls "$d/${p}_"*.deb >/dev/null 2>&1; then
			(cd "$d" && apt-get download -q "$p" >"$d/download.log" 2>&1) || {
				cat "$d/download.log" >&2
				die "apt-get download $p failed"
			}
		fi
	done
	tmp=$root.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	for p in "$img" "$hdr" "$common" "$kbuild"; do
		for deb in "$d/${p}_"*.deb; do
			dpkg-deb -x "$deb" "$tmp"
		done
	done
	finish_root "$tmp" "$kver" "$img $hdr $common $kbuild"
	# Keep the cache small: the unpacked root is what is used.
	rm -rf "$d"
	log "$name: $kver ready in $root"
	echo "$name $kver $root" >>"$INDEX.tmp"
}

# fetch_sid <name>: the newest kernel Debian has (sid's linux-image-amd64),
# from a private apt configuration (apt-sid.sh; sid is never added to the
# host's sources). Its image package may be split (linux-binary-* holds
# usr/lib/modules/<kver>/vmlinuz, linux-modules-* the modules); the root
# gets boot/vmlinuz-<kver> and lib -> usr/lib so it looks like the others.
# sid-toolchain.sh then makes its headers buildable on this host.
fetch_sid() {
	name=$1
	if ! "$HERE/apt-sid.sh" update; then
		cached_entry "$name" || die "cannot reach Debian sid's package lists"
		log "$name: could not reach sid; used the cached kernel"
		return 0
	fi
	img=$("$HERE/apt-sid.sh" cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *|\{0,1\}Depends: *//p' | grep -E '^linux-image-[0-9]' | head -n 1) || true
	[ -n "$img" ] || die "sid: cannot resolve linux-image-amd64"
	img=${img%-unsigned}
	kver=${img#linux-image-}
	root=$KROOTS/$kver
	if [ -f "$root/.strixpeer-complete" ]; then
		log "$name: $kver (cached)"
		echo "$name $kver $root" >>"$INDEX.tmp"
		return 0
	fi
	hdr=linux-headers-$kver
	deps=$("$HERE/apt-sid.sh" cache depends "$img" "$hdr" 2>/dev/null |
		sed -n 's/^ *|\{0,1\}Depends: *//p' | sort -u)
	pkgs="$img $hdr"
	for p in "linux-binary-$kver" "linux-modules-$kver" "linux-base-$kver" \
		$(echo "$deps" | grep -E '^linux-headers-.*-common$|^linux-kbuild-'); do
		echo "$deps" | grep -qxF "$p" && pkgs="$pkgs $p"
	done
	log "$name: $kver: downloading from sid: $pkgs"
	d=$DEBS/$kver
	rm -rf "$d"
	mkdir -p "$d"
	# shellcheck disable=SC2086
	(cd "$d" && "$HERE/apt-sid.sh" download $pkgs >"$d/download.log" 2>&1) || {
		cat "$d/download.log" >&2
		die "apt-get download from sid failed"
	}
	tmp=$root.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	for deb in "$d"/*.deb; do
		dpkg-deb -x "$deb" "$tmp"
	done
	[ -e "$tmp/lib" ] || ln -s usr/lib "$tmp/lib"
	if [ ! -f "$tmp/boot/vmlinuz-$kver" ] && [ -f "$tmp/usr/lib/modules/$kver/vmlinuz" ]; then
		mkdir -p "$tmp/boot"
		ln -s "../usr/lib/modules/$kver/vmlinuz" "$tmp/boot/vmlinuz-$kver"
	fi
	"$HERE/sid-toolchain.sh" "$tmp" "$kver" || die "sid: cannot prepare the build tools for $kver"
	finish_root "$tmp" "$kver" "$pkgs"
	rm -rf "$d"
	log "$name: $kver ready in $root"
	echo "$name $kver $root" >>"$INDEX.tmp"
}

# fetch_shared: every linux-image-<kver>_*.deb (+ linux-headers-<kver>_*.deb)
# in ../shared/kernels/.
fetch_shared() {
	[ -d "$SHARED/kernels" ] || return 0
	for deb in "$SHARED/kernels"/linux-image-*.deb; do
		[ -f "$deb" ] || continue
		pkg=$(dpkg-deb -f "$deb" Package)
		case $pkg in
		*-dbg) continue ;;
		esac
		kver=${pkg#linux-image-}
		hdeb=
		for h in "$SHARED/kernels/linux-headers-${kver}_"*.deb; do
			[ -f "$h" ] && hdeb=$h
		done
		[ -n "$hdeb" ] || log "warning: no linux-headers-$kver .deb beside $deb"
		# by content: another checkout's ../shared (another path, another
		# copy's times) with the same packages finds this root unpacked
		stamp=$(for f in "$deb" ${hdeb:+"$hdeb"}; do
			echo "${f##*/} $(sha256sum <"$f" | cut -d ' ' -f 1)"
		done | tr '\n' ' ')
		root=$KROOTS/$kver
		if [ -f "$root/.strixpeer-complete" ] && [ "$(cat "$root/.strixpeer-complete")" = "$stamp" ]; then
			log "debug-$kver: cached"
		else
			log "debug-$kver: unpacking $(basename "$deb") ${hdeb:+$(basename "$hdeb")}"
			tmp=$root.tmp
			rm -rf "$tmp"
			mkdir -p "$tmp"
			dpkg-deb -x "$deb" "$tmp"
			[ -z "$hdeb" ] || dpkg-deb -x "$hdeb" "$tmp"
			finish_root "$tmp" "$kver" "$stamp"
			log "debug-$kver: ready in $root"
		fi
		echo "debug-$kver $kver $root" >>"$INDEX.tmp"
	done
}

# The index after a fetch: this fetch's lines ($INDEX.tmp), then every
# other name's line of the old index whose root is still complete (other
# checkouts' debug kernels, sid after a STRIXPEER_SID=0 fetch). Prints the
# roots this fetch replaced: an old line's root for a name this fetch gave
# another root, unless a line of the new index still names it.
merge_index() {
	: >"$INDEX.new"
	cat "$INDEX.tmp" >>"$INDEX.new"
	replaced=
	if [ -f "$INDEX" ]; then
		while read -r name kver root; do
			[ -n "$name" ] || continue
			new=$(awk -v n="$name" '$1 == n { print $3; exit }' "$INDEX.tmp")
			if [ -n "$new" ]; then
				[ "$new" = "$root" ] || replaced="$replaced $root"
			elif [ -f "$root/.strixpeer-complete" ]; then
				echo "$name $kver $root" >>"$INDEX.new"
			fi
		done <"$INDEX"
	fi
	mv "$INDEX.new" "$INDEX"
	for r in $replaced; do
		awk -v r="$r" '$3 == r { f = 1 } END { exit !f }' "$INDEX" || echo "$r"
	done
}

cmd_fetch() {
	command -v apt-get >/dev/null || die "apt-get not found (a Debian host is needed)"
	command -v depmod >/dev/null || PATH=$PATH:/usr/sbin:/sbin
	command -v depmod >/dev/null || die "depmod not found (install kmod)"
	mkdir -p "$KROOTS" "$DEBS"
	# one fetch at a time per cache (CI and a developer may share it)
	if command -v flock >/dev/null; then
		exec 9>"$CACHE/fetch.lock"
		flock 9
	fi
	rm -f "$INDEX.tmp"
	: >"$INDEX.tmp"
	want=" ${*:-6.1 6.12 sid debug} "
	for n in $want; do
		case $n in 6.1 | 6.12 | sid | debug) ;; *) die "fetch: unknown kernel name $n (6.1, 6.12, sid, debug)" ;; esac
	done
	case $want in *" 6.1 "*) fetch_debian 6.1 linux-image-amd64 ;; esac
	case $want in *" 6.12 "*) fetch_debian 6.12 linux-image-6.12-amd64 ;; esac
	case $want in *" sid "*) [ "${STRIXPEER_SID:-1}" = 0 ] || fetch_sid sid ;; esac
	case $want in *" debug "*) fetch_shared ;; esac
	# Roots this fetch replaced (e.g. an older 6.1 ABI), and roots left
	# half-unpacked by an interrupted fetch (no other fetch runs: the lock).
	# A complete root nobody's index names any more stays: another
	# checkout, or an older kernels.sh, may still use it.
	merge_index >"$INDEX.replaced"
	while read -r r; do
		case $r in "$KROOTS"/*) ;; *) continue ;; esac
		log "removing $r (replaced)"
		rm -rf "$r"
	done <"$INDEX.replaced"
	rm -f "$INDEX.tmp" "$INDEX.replaced"
	for r in "$KROOTS"/*; do
		[ -d "$r" ] || continue
		if [ ! -f "$r/.strixpeer-complete" ]; then
			log "removing half-unpacked $r"
			rm -rf "$r"
		fi
	done
	cmd_list
}

# Whether this checkout uses kernel <name>: the Debian series always, sid
# unless STRIXPEER_SID=0, debug-<kver> when ../shared/kernels/ has its image.
uses() {
	case $1 in
	6.1 | 6.12) return 0 ;;
	sid) [ "${STRIXPEER_SID:-1}" != 0 ] ;;
	debug-*)
		for deb in "$SHARED/kernels/linux-image-${1#debug-}_"*.deb; do
			[ -f "$deb" ] && return 0
		done
		return 1
		;;
	*) return 1 ;;
	esac
}

cmd_list() {
	[ -f "$INDEX" ] || die "no kernels yet: run '$0 fetch' first"
	while read -r name kver root; do
		[ -f "$root/.strixpeer-complete" ] && uses "$name" && echo "$name $kver $root"
	done <"$INDEX"
	return 0
}

root_of() {
	r=$KROOTS/$1
	[ -f "$r/.strixpeer-complete" ] || die "kernel $1 not fetched (see '$0 list')"
	echo "$r"
}

case ${1:-} in
fetch)
	shift
	cmd_fetch "$@"
	;;
list) cmd_list ;;
kdir)
	[ $# -eq 2 ] || die "usage: $0 kdir <kver>"
	r=$(root_of "$2")
	[ -d "$r/usr/src/linux-headers-$2" ] || die "no headers for $2"
	echo "$r/usr/src/linux-headers-$2"
	;;
root)
	[ $# -eq 2 ] || die "usage: $0 root <kver>"
	root_of "$2"
	;;
srcver)
	[ $# -eq 3 ] || die "usage: $0 srcver <kver> <dir>"
	up=${2%%[-+]*}
	v=$(cd "$3" 2>/dev/null && ls linux-source-6.12_"$up"-*_all.deb 2>/dev/null |
		sed -n '1s/^linux-source-6.12_\(.*\)_all.deb$/\1/p')
	[ -n "$v" ] || v=$(apt-cache madison linux-source-6.12 2>/dev/null |
		awk -v up="$up" '$3 ~ "^" up "-" { print $3; exit }')
	[ -n "$v" ] || exit 1
	echo "$v"
	;;
*)
	echo "usage: $0 fetch [6.1|6.12|sid|debug ...] | list | kdir <kver> | root <kver> | srcver <kver> <dir>" >&2
	exit 2
	;;
esac
