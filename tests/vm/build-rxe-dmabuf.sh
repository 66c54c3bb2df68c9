#!/bin/bash
# Prepares the dma-buf-capable Soft-RoCE for one VM kernel: Debian's rxe
# from linux-source-6.12 with tests/kmod/rxe-dmabuf/rxe-dmabuf.patch (dma-buf
# MRs through the stock ib_core's pinned dma-buf umem), built out of tree
# against the kernel's own Module.symvers (Debian's stock RDMA stack, no
# peer-memory core), and rdma-core's rxe provider from Debian's rdma-core
# source with tests/kmod/rxe-dmabuf/rdma-core.patch (reg_dmabuf_mr), built
# for the installed libibverbs' private ABI. tests/vm/rxe-dmabuf.sh loads
# both in the VM.
#
#   build-rxe-dmabuf.sh <kver> [make args...]     e.g. W=1
#
# Cached under $STRIXPEER_CACHE/rxe-dmabuf/ (keyed by every input's hash):
#   rxe-<kver>-<hash>/rdma_rxe.ko        the patched rxe
#   provider-<srcver>-<hash>/librxe-rdmav34.so   the patched provider
#   src/                                 rdma-core's source package (.dsc,
#                                        orig, debian tarball) and its tree
#   apt/                                 the private apt configuration that
#                                        downloads it (deb-src bookworm)
# linux-source-6.12 is shared with build-realcore.sh ($STRIXPEER_CACHE/
# realcore/src/). Writes build/kmod/<kver>/rxe-dmabuf/env (RXE_DMABUF_KO=,
# RXE_DMABUF_PROVIDER=). Exits 0 with "unsupported: <reason>" on stdout (the
# reason also in build/kmod/<kver>/rxe-dmabuf/unsupported, for the guest) for
# kernels that are not 6.12 (the patch is for Debian's 6.12 rxe: the
# linux-source-6.12 of the kernel's own version, e.g. 6.12.118 for
# 6.12.118+deb12-amd64), when the archive serves no such source or the patch
# does not apply to it, and when the rdma-core source matching the installed
# libibverbs cannot be had.
#
# rdma-core's source comes from the Debian archive through apt (verified
# by apt against the archive's signed Sources). Where the archive does not
# serve the orig tarball, SP_RDMA_CORE_GIT=<git dir of upstream
# rdma-core> gives it from upstream's tag (git archive v<upstream version>);
# the .dsc and Debian's own tarball still come from the archive, and the
# build log says which was used.
set -eu
cd "$(dirname "$0")/../.."
repo=$PWD
kver=$1
shift
out=$repo/build/kmod/$kver/rxe-dmabuf
rm -rf "$out"
mkdir -p "$out"
unsupported() {	# the reason on stdout and in $out/unsupported (the guest's skip says it)
	echo "unsupported: $*"
	echo "$*" > "$out/unsupported"
	exit 0
}
case $kver in
6.12.*) ;;
*) unsupported "the dma-buf rxe patch is for Debian's 6.12 rxe, not $kver" ;;
esac
top=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
cache=$top/rxe-dmabuf
kdir=$(tests/vm/kernels.sh kdir "$kver")
ksrc=$top/realcore/src
mkdir -p "$cache/src" "$ksrc"
# The extracted rxe sources are shared with build-realcore.sh (which takes
# the same lock), and two checkouts may share this cache: one extractor and
# builder at a time, to the end of this script.
exec 9> "$ksrc/rxe.lock"
flock 9
# Debian's linux-source-6.12 of this kernel's upstream version
up=${kver%%[-+]*}
srcver=$(tests/vm/kernels.sh srcver "$kver" "$ksrc") || srcver=
[ -n "$srcver" ] || unsupported "the archive serves no linux-source-6.12 of $up (for $kver)"
log=$out/build.log
: > "$log"

hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. Debian's rxe sources (as build-realcore.sh extracts them), patched.
deb=$ksrc/linux-source-6.12_${srcver}_all.deb
rsrc=$ksrc/rxe-$srcver
if [ ! -f "$rsrc/.done" ]; then
	[ -f "$deb" ] || (cd "$ksrc" && apt-get download "linux-source-6.12=$srcver") >&2
	rm -rf "$rsrc" "$rsrc.tmp"
	mkdir -p "$rsrc.tmp"
	dpkg-deb --fsys-tarfile "$deb" |
		tar -xO --wildcards '*/linux-source-6.12.tar.xz' |
		xz -dc | tar -x -C "$rsrc.tmp" --strip-components=1 \
			'linux-source-6.12/drivers/infiniband/sw/rxe'
	mv "$rsrc.tmp" "$rsrc"
	touch "$rsrc/.done"
fi
kpatch=tests/kmod/rxe-dmabuf/rxe-dmabuf.patch
rkey=$(hash_of "$kpatch" "$kdir/Module.symvers" "$0")
rdir=$cache/rxe-$kver-$rkey
if [ ! -f "$rdir/.done" ]; then
	rm -rf "$rdir"
	mkdir -p "$rdir/tree"
	cp -r "$rsrc/drivers" "$rdir/tree/"
	patch -s -d "$rdir/tree" -p1 < "$kpatch" > "$rdir/patch.log" 2>&1 ||
		unsupported "$kpatch does not apply to linux-source-6.12 $srcver's rxe (see $rdir/patch.log)"
	b=$rdir/tree/drivers/infiniband/sw/rxe
	if ! make -C "$kdir" M="$b" CONFIG_RDMA_RXE=m "$@" modules > "$rdir/build.log" 2>&1; then
		echo "build-rxe-dmabuf.sh: rxe build failed, see $rdir/build.log" >&2
		tail -n 20 "$rdir/build.log" >&2
		exit 1
	fi
	if grep -q 'warning:' "$rdir/build.log"; then
		echo "build-rxe-dmabuf.sh: rxe build warns, see $rdir/build.log" >&2
		grep 'warning:' "$rdir/build.log" >&2
		exit 1
	fi
	cp "$b/rdma_rxe.ko" "$rdir/"
	touch "$rdir/.done"
fi
vm=$(modinfo -F vermagic "$rdir/rdma_rxe.ko")
[ "${vm%% *}" = "$kver" ] || { echo "build-rxe-dmabuf.sh: $rdir/rdma_rxe.ko is for ${vm%% *}, not $kver" >&2; exit 1; }
echo "rxe: $rdir/rdma_rxe.ko" >> "$log"

# 2. rdma-core's source, the version of the installed libibverbs (the
# provider must match its private ABI).
ver=$(dpkg-query -W -f '${Version}' libibverbs1 2>/dev/null) ||
	{ unsupported "libibverbs1 is not installed on the host"; }
case $ver in
44.0-*) ;;
*) unsupported "rdma-core.patch is for rdma-core 44.0 (bookworm), the host has libibverbs1 $ver" ;;
esac
upver=${ver%-*}
libv=$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1)
pkey=$(hash_of tests/kmod/rxe-dmabuf/rdma-core.patch "$libv" "$0")
pdir=$cache/provider-$ver-$pkey
if [ ! -f "$pdir/.done" ]; then
	s=$cache/src
	tree=$s/rdma-core-$ver
	if [ ! -f "$tree/.done" ]; then
		# a private apt configuration: deb-src bookworm, nothing of the host's
		A=$cache/apt
		mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/parts.d" "$A/prefs.d"
		echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${STRIXPEER_DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm main" > "$A/sources.list"
		: > "$A/status"
		: > "$A/preferences"
		opts=(-o "Dir::Etc::sourcelist=$A/sources.list" -o "Dir::Etc::sourceparts=$A/parts.d"
			-o "Dir::Etc::preferences=$A/preferences" -o "Dir::Etc::preferencesparts=$A/prefs.d"
			-o "Dir::State::lists=$A/lists" -o "Dir::State::status=$A/status"
			-o "Dir::Cache=$A/cache" -o Debug::NoLocking=1)
		[ "$(id -u)" -ne 0 ] || opts+=(-o APT::Sandbox::User=root)
		dsc=$s/rdma-core_$ver.dsc
		orig=$s/rdma-core_$upver.orig.tar.gz
		dtar=$s/rdma-core_$ver.debian.tar.xz
		if [ ! -f "$dsc" ] || [ ! -f "$dtar" ] || [ ! -f "$orig" ]; then
			apt-get "${opts[@]}" -q update >> "$log" 2>&1 ||
				{ unsupported "apt-get update (deb-src bookworm) failed, see $log"; }
			(cd "$s" && apt-get "${opts[@]}" -q source --download-only "rdma-core=$ver") >> "$log" 2>&1 || true
		fi
		[ -f "$dsc" ] && [ -f "$dtar" ] ||
			{ unsupported "rdma-core $ver's source package is not in the archive, see $log"; }
		rm -rf "$tree" "$tree.tmp"
		mkdir -p "$tree.tmp"
		if [ -f "$orig" ]; then
			want=$(sed -n '/^Checksums-Sha256:/,/^[^ ]/p' "$dsc" | awk -v f="${orig##*/}" '$3 == f { print $1 }')
			[ "$(sha256sum < "$orig" | cut -d' ' -f1)" = "$want" ] ||
				{ echo "build-rxe-dmabuf.sh: $orig does not match $dsc" >&2; exit 1; }
			tar -xzf "$orig" -C "$tree.tmp" --strip-components=1
			echo "rdma-core: Debian's $orig" >> "$log"
		elif [ -n "${SP_RDMA_CORE_GIT:-}" ]; then
			git --git-dir="$SP_RDMA_CORE_GIT" archive --format=tar "v$upver" |
				tar -x -C "$tree.tmp"
			echo "rdma-core: upstream tag v$upver from $SP_RDMA_CORE_GIT (the archive has no orig tarball)" >> "$log"
			echo "upstream tag v$upver of $SP_RDMA_CORE_GIT" > "$tree.tmp/.strixpeer-origin"
		else
			rm -rf "$tree.tmp"
			unsupported "the archive does not serve rdma-core_$upver.orig.tar.gz (put it in $s, or set SP_RDMA_CORE_GIT to a git dir of upstream rdma-core)"
		fi
		tar -xJf "$dtar" -C "$tree.tmp"
		# Debian's patches, in order (44.0-2 has none)
		if [ -f "$tree.tmp/debian/patches/series" ]; then
			grep -v '^#' "$tree.tmp/debian/patches/series" | while read -r p _; do
				[ -n "$p" ] && patch -s -d "$tree.tmp" -p1 < "$tree.tmp/debian/patches/$p"
			done
		fi
		mv "$tree.tmp" "$tree"
		touch "$tree/.done"
	fi
	rm -rf "$pdir"
	mkdir -p "$pdir/src"
	cp -r "$tree/." "$pdir/src/"
	patch -s -d "$pdir/src" -p1 < tests/kmod/rxe-dmabuf/rdma-core.patch
	# Only the provider (and the in-tree libibverbs it links against for
	# the private symbols; the installed one serves them at run time).
	if ! (cd "$pdir" && cmake -S src -B b -G Ninja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 \
			-DCMAKE_SKIP_RPATH=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
		ninja -C b lib/librxe-rdmav34.so) > "$pdir/build.log" 2>&1; then
		echo "build-rxe-dmabuf.sh: provider build failed, see $pdir/build.log" >&2
		tail -n 20 "$pdir/build.log" >&2
		exit 1
	fi
	if grep -q 'providers/rxe.*warning:' "$pdir/build.log"; then
		echo "build-rxe-dmabuf.sh: provider build warns, see $pdir/build.log" >&2
		exit 1
	fi
	so=$pdir/librxe-rdmav34.so
	cp "$pdir/b/lib/librxe-rdmav34.so" "$so"
	# every private symbol it needs is in the installed libibverbs
	need=$(objdump -T "$so" | awk '/\*UND\*/ && /IBVERBS_PRIVATE/ { print $NF }' | sort -u)
	have=$(objdump -T "$libv" | awk '/IBVERBS_PRIVATE/ && !/\*UND\*/ { print $NF }' | sort -u)
	missing=$(comm -23 <(echo "$need") <(echo "$have"))
	[ -z "$missing" ] || { echo "build-rxe-dmabuf.sh: $libv lacks $missing" >&2; exit 1; }
	rm -rf "$pdir/src" "$pdir/b"
	touch "$pdir/.done"
fi
echo "provider: $pdir/librxe-rdmav34.so" >> "$log"
{
	echo "RXE_DMABUF_KO=$rdir/rdma_rxe.ko"
	echo "RXE_DMABUF_PROVIDER=$pdir/librxe-rdmav34.so"
} > "$out/env"
echo "rxe-dmabuf for $kver: rxe $rdir/rdma_rxe.ko, provider $pdir/librxe-rdmav34.so"
