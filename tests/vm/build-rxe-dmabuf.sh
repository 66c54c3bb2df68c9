#!/bin/bash
# Prepares the dma-buf-capable Soft-RoCE for one VM kernel: Debian's rxe
# from linux-source-6.12 with tests/kmod/rxe-dmabuf/rxe-dmabuf.patch (dma-buf
# MRs through the stock ib_core's pinned dma-buf umem), built out of tree
# against the kernel's own Module.symvers (Debian's stock RDMA stack, no
# peer-memory core), and a verbs user space that registers dma-bufs on rxe:
# libibverbs and the rxe provider of rdma-core 56.1 with
# tests/kmod/rxe-dmabuf/rdma-core.patch (the provider's reg_dmabuf_mr).
# tests/vm/rxe-dmabuf.sh loads both in the VM.
#
#   build-rxe-dmabuf.sh <kver> [make args...]     e.g. W=1
#
# Why rdma-core 56.1 and not bookworm's 44.0: the archive serves 44.0-2's
# .dsc and Debian tarball but not rdma_core_44.0.orig.tar.gz (404), so
# 44.0's provider cannot be built from the archive; it serves trixie's
# rdma-core_56.1.orig.tar.gz, checked here against the sha256 in trixie's
# signed Sources. A provider and the libibverbs that loads it share a
# private ABI (Debian's ibverbs-providers depends on the exact libibverbs1),
# so 56.1's provider is not dropped into 44.0's libibverbs: the VM's dma-buf
# stage runs 56.1's libibverbs.so.1 and 56.1's rxe provider alone, in place
# of Debian's (bind mounts in the guest). Programs built against
# bookworm's 44.0 headers run on it unchanged: every versioned symbol that
# 44.0's libibverbs exports, 56.1's exports too (checked below). librdmacm,
# UCX and perftest stay bookworm's.
#
# Cached under $STRIXPEER_CACHE/rxe-dmabuf/ (keyed by every input's hash):
#   rxe-<kver>-<hash>/rdma_rxe.ko             the patched rxe
#   rdma-core-<ver>-<hash>/libibverbs.so.1    56.1's libibverbs
#                     .../providers/librxe-rdmav34.so    its patched rxe provider,
#                                             the only one in that directory
#                     .../libibverbs.d/rxe.driver     its one driver entry
#   src/                                      rdma-core's orig tarball
#   apt/                                      the private apt configuration
#                                             that downloads it (deb-src trixie)
# linux-source-6.12 is shared with build-realcore.sh ($STRIXPEER_CACHE/
# realcore/src/). Writes build/kmod/<kver>/rxe-dmabuf/env (RXE_DMABUF_KO=,
# RXE_DMABUF_LIBIBVERBS=, RXE_DMABUF_PROVIDERS=, RXE_DMABUF_DRIVERS=).
#
# Exits 0 with "unsupported: <reason>" on stdout (the reason also in
# build/kmod/<kver>/rxe-dmabuf/unsupported; the guest skips with it) only
# for what the kernel under test decides: kernels that are not 6.12 (the
# patch is for Debian's 6.12 rxe) and a linux-source-6.12 of the kernel's
# version to which the patch does not apply. Anything else that keeps the
# dma-buf rxe from being built - a download, a checksum, a build - exits 1
# with the reason on stderr and in build/kmod/<kver>/rxe-dmabuf/failed,
# which the guest reports as a failure (make check fails).
set -eu
cd "$(dirname "$0")/../.."
repo=$PWD
kver=$1
shift
out=$repo/build/kmod/$kver/rxe-dmabuf
rm -rf "$out"
mkdir -p "$out"
log=$out/build.log
: > "$log"
unsupported() {	# the reason on stdout and in $out/unsupported (the guest's skip says it)
	echo "unsupported: $*"
	echo "$*" > "$out/unsupported"
	exit 0
}
failed() {	# the reason on stderr and in $out/failed (the guest's failure says it)
	echo "build-rxe-dmabuf.sh: $*" >&2
	echo "$*" > "$out/failed"
	exit 1
}
# Anything set -e stops on is a failure too, with the line it stopped at.
trap '[ -f "$out/failed" ] || [ -f "$out/unsupported" ] || [ -f "$out/env" ] ||
	echo "stopped at build-rxe-dmabuf.sh line $LINENO (see $log)" > "$out/failed"' EXIT
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
srcver=$(tests/vm/kernels.sh srcver "$kver" "$ksrc") ||
	failed "the archive lists no linux-source-6.12 of $up (for $kver): apt-cache madison linux-source-6.12 (apt-get update?)"

hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. Debian's rxe sources (as build-realcore.sh extracts them), patched.
deb=$ksrc/linux-source-6.12_${srcver}_all.deb
rsrc=$ksrc/rxe-$srcver
if [ ! -f "$rsrc/.done" ]; then
	[ -f "$deb" ] || (cd "$ksrc" && apt-get download "linux-source-6.12=$srcver") >> "$log" 2>&1 ||
		failed "apt-get download linux-source-6.12=$srcver failed (see $log)"
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
		tail -n 20 "$rdir/build.log" >&2
		failed "the patched rxe does not build, see $rdir/build.log"
	fi
	if grep -q 'warning:' "$rdir/build.log"; then
		grep 'warning:' "$rdir/build.log" >&2
		failed "the patched rxe build warns, see $rdir/build.log"
	fi
	cp "$b/rdma_rxe.ko" "$rdir/"
	touch "$rdir/.done"
fi
vm=$(modinfo -F vermagic "$rdir/rdma_rxe.ko")
[ "${vm%% *}" = "$kver" ] || failed "$rdir/rdma_rxe.ko is for ${vm%% *}, not $kver"
echo "rxe: $rdir/rdma_rxe.ko" >> "$log"

# 2. rdma-core's libibverbs and rxe provider, from the orig tarball the
# archive serves (trixie's source; see the header for why not bookworm's).
upver=${SP_RDMA_CORE_VERSION:-56.1}
orig=$cache/src/rdma-core_$upver.orig.tar.gz
A=$cache/apt
apt_private() {	# apt_private <apt-get|apt-cache> <args...>: deb-src trixie only
	local prog=$1
	shift
	local opts=(-o "Dir::Etc::sourcelist=$A/sources.list" -o "Dir::Etc::sourceparts=$A/parts.d"
		-o "Dir::Etc::preferences=$A/preferences" -o "Dir::Etc::preferencesparts=$A/prefs.d"
		-o "Dir::State::lists=$A/lists" -o "Dir::State::status=$A/status"
		-o "Dir::Cache=$A/cache" -o Debug::NoLocking=1)
	[ "$(id -u)" -ne 0 ] || opts+=(-o APT::Sandbox::User=root)
	"$prog" "${opts[@]}" "$@"
}
if [ ! -f "$orig" ]; then
	mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/parts.d" "$A/prefs.d"
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${STRIXPEER_DEBIAN_MIRROR:-http://deb.debian.org/debian} trixie main" > "$A/sources.list"
	: > "$A/status"
	: > "$A/preferences"
	apt_private apt-get -q update >> "$log" 2>&1 ||
		failed "apt-get update (deb-src trixie) failed, see $log"
	# the newest Debian revision of this upstream version; its signed
	# Sources entry gives the orig tarball's sha256
	srcpkg=$(apt_private apt-cache showsrc rdma-core 2>> "$log" |
		awk -v up="$upver" '/^Version: / { v = $2 } /^Checksums-Sha256:/ { c = 1; next }
			/^[^ ]/ { c = 0 } c && $3 == "rdma-core_" up ".orig.tar.gz" { print v, $1 }' |
		sort -V | tail -n 1)
	[ -n "$srcpkg" ] || failed "the archive (deb-src trixie) lists no rdma-core $upver source, see $log"
	read -r debver want <<< "$srcpkg"
	rm -rf "$cache/src/dl"
	mkdir -p "$cache/src/dl"
	# apt-get source also asks for the .dsc, which the archive may not serve
	# (it answers 404 for 56.1-1's): only the orig tarball is used
	(cd "$cache/src/dl" && apt_private apt-get -q source --download-only "rdma-core=$debver") >> "$log" 2>&1 || true
	got=$cache/src/dl/${orig##*/}
	[ -f "$got" ] || failed "the archive does not serve ${orig##*/} (rdma-core $debver, deb-src trixie), see $log"
	[ "$(sha256sum < "$got" | cut -d' ' -f1)" = "$want" ] ||
		failed "${orig##*/} does not match the sha256 of trixie's Sources ($want)"
	mv "$got" "$orig"
	rm -rf "$cache/src/dl"
	echo "rdma-core: ${orig##*/} of Debian's rdma-core $debver, sha256 $want (trixie's Sources)" >> "$log"
fi
ppatch=tests/kmod/rxe-dmabuf/rdma-core.patch
pkey=$(hash_of "$ppatch" "$orig" "$0")
pdir=$cache/rdma-core-$upver-$pkey
if [ ! -f "$pdir/.done" ]; then
	rm -rf "$pdir"
	mkdir -p "$pdir/src"
	tar -xzf "$orig" -C "$pdir/src" --strip-components=1
	patch -s -d "$pdir/src" -p1 < "$ppatch" > "$pdir/patch.log" 2>&1 ||
		failed "$ppatch does not apply to rdma-core $upver (see $pdir/patch.log)"
	# Debian's paths compiled in (/etc/libibverbs.d, the multiarch provider
	# directory): in the VM its files are bound over Debian's own
	if ! (cd "$pdir" && cmake -S src -B b -G Ninja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 \
			-DCMAKE_SKIP_RPATH=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu \
			-DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_RUNDIR=/run &&
		ninja -C b lib/libibverbs.so.1 lib/librxe-rdmav34.so) > "$pdir/build.log" 2>&1; then
		tail -n 20 "$pdir/build.log" >&2
		failed "rdma-core $upver's libibverbs or rxe provider does not build, see $pdir/build.log"
	fi
	if grep -q 'providers/rxe.*warning:' "$pdir/build.log"; then
		failed "the patched rxe provider build warns, see $pdir/build.log"
	fi
	mkdir -p "$pdir/providers" "$pdir/libibverbs.d"
	cp -L "$pdir/b/lib/libibverbs.so.1" "$pdir/libibverbs.so.1"
	cp "$pdir/b/lib/librxe-rdmav34.so" "$pdir/providers/"
	echo "driver rxe" > "$pdir/libibverbs.d/rxe.driver"
	rm -rf "$pdir/src" "$pdir/b"
	touch "$pdir/.done"
fi
# Programs built against the host's (bookworm's) libibverbs run on it: every
# versioned symbol the host's exports, this one exports too.
hostlib=$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1 2> /dev/null) ||
	failed "no libibverbs.so.1 on the host (make deps)"
syms() { objdump -T "$1" | awk 'NF > 2 && !/\*UND\*/ && $(NF-1) ~ /^\(?IBVERBS_1/ { print $(NF-1), $NF }' | tr -d '()' | sort -u; }
missing=$(comm -23 <(syms "$hostlib") <(syms "$pdir/libibverbs.so.1"))
[ -z "$missing" ] || failed "rdma-core $upver's libibverbs lacks what $hostlib exports: $(echo "$missing" | head -n 3 | tr '\n' ' ')"
echo "libibverbs: $pdir/libibverbs.so.1, provider: $pdir/providers/librxe-rdmav34.so" >> "$log"
{
	echo "RXE_DMABUF_KO=$rdir/rdma_rxe.ko"
	echo "RXE_DMABUF_LIBIBVERBS=$pdir/libibverbs.so.1"
	echo "RXE_DMABUF_PROVIDERS=$pdir/providers"
	echo "RXE_DMABUF_DRIVERS=$pdir/libibverbs.d"
	echo "RXE_DMABUF_RDMA_CORE=$upver"
} > "$out/env"
echo "rxe-dmabuf for $kver: rxe $rdir/rdma_rxe.ko, rdma-core $upver's libibverbs and rxe provider in $pdir"
