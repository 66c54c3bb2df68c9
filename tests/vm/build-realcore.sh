#!/bin/bash
# Prepares the real PeerDirect stack for one VM kernel: OFED's peer-memory
# core in Debian 6.12's RDMA modules (the fixture in ../shared/peermem/,
# third-party GPL code: built and loaded, never copied into the tree), an
# rxe patched to ask the peer core as mlx5 does (tests/kmod/rxe-peer/), and
# strixpeer built against the fixture's Module.symvers, as on an OFED node,
# and the stand-in for ROCm's amdkfd client (tests/kmod/amdkfd_stub/) too.
#
#   build-realcore.sh <kver> [make args...]     e.g. W=1
#   build-realcore.sh --fixture <kver>          only the fixture: prints its
#                                               directory (the provisioning
#                                               test's OFED node installs it)
#
# Cached under $STRIXPEER_CACHE/realcore/ (keyed by every input's hash, so
# a changed input rebuilds):
#   fixture-<kver>-<hash>/       the fixture's 9 modules, Module.symvers, include/
#                                (the prebuilt tarball, or build.sh's output
#                                when there is none for <kver>)
#   rxe-<kver>-<hash>/rdma_rxe.ko the patched rxe
#   src/                         linux-source-6.12 (apt-get download) and its rxe
# Not cached (it is this checkout's code): build/kmod/<kver>/realcore/pd/strixpeer.ko
# and build/kmod/<kver>/realcore/amdkfd-stub/sp_amdkfd_stub.ko.
# Writes build/kmod/<kver>/realcore/env (REALCORE_FIXTURE=, REALCORE_RXE=) for
# tests/vm/realcore.sh. Exits 0 with "unsupported: <reason>" on stdout (and
# the reason in build/kmod/<kver>/realcore/unsupported) for kernels
# that are not 6.12 (the fixture's port is of Debian's 6.12 RDMA stack), and
# for a 6.12.y whose linux-source-6.12 the archive does not serve or to
# which the port or the rxe patch do not apply. The prebuilt modules are for
# 6.12.117; for any other 6.12.y (Debian's stable updates: 6.12.118, ...)
# build.sh builds the core from the archive's linux-source-6.12 of that very
# version, as OFED's DKMS package rebuilds after a kernel update.
set -eu
cd "$(dirname "$0")/../.."
repo=$PWD
fixture_only=
[ "${1:-}" != --fixture ] || { fixture_only=1; shift; }
kver=$1
shift
if [ -n "$fixture_only" ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
else
	out=$repo/build/kmod/$kver/realcore
	rm -rf "$out"
	mkdir -p "$out"
fi
unsupported() {	# the reason on stdout and in $out/unsupported (the guest's skip says it)
	echo "unsupported: $*"
	echo "$*" > "$out/unsupported"
	exit 0
}
case $kver in
6.12.*) ;;
*) unsupported "the real core is a port of Debian's 6.12 RDMA stack, not for $kver" ;;
esac
cache=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}/realcore
peermem=${SP_PEERMEM_DIR:-$repo/../shared/peermem}
kdir=$(tests/vm/kernels.sh kdir "$kver")
mkdir -p "$cache/src"
# Debian's linux-source-6.12 of this kernel's upstream version (6.12.118 for
# 6.12.118+deb12-amd64 and for a debug kernel 6.12.118-<name>).
up=${kver%%[-+]*}
srcver=$(tests/vm/kernels.sh srcver "$kver" "$cache/src") || srcver=
[ -n "$srcver" ] || unsupported "the archive serves no linux-source-6.12 of $up (for $kver)"

hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. The fixture: the prebuilt tarball, else build.sh (slow: minutes; its
# log beside the fixture, <fixture>.log). One builder at a time: the VM
# lanes and the provisioning test may ask for the same kernel's at once.
exec 9> "$cache/fixture-$kver.lock"
flock 9
tarball=$peermem/peermem-$kver.tar.zst
deb=$cache/src/linux-source-6.12_${srcver}_all.deb
get_source() {
	[ -f "$deb" ] && return 0
	(cd "$cache/src" && apt-get download "linux-source-6.12=$srcver") >&2
}
if [ -f "$tarball" ]; then
	fkey=$(hash_of "$tarball")
	fix=$cache/fixture-$kver-$fkey
	if [ ! -f "$fix/.done" ]; then
		rm -rf "$fix" "$fix.tmp"
		mkdir -p "$fix.tmp"
		tar --zstd -xf "$tarball" -C "$fix.tmp"
		(cd "$fix.tmp/peermem-$kver" && sha256sum --quiet -c SHA256SUMS)
		mv "$fix.tmp/peermem-$kver" "$fix"
		rmdir "$fix.tmp"
		touch "$fix/.done"
	fi
else
	get_source
	fkey=$(hash_of "$peermem/build.sh" "$peermem/peer-mem-6.12.patch" "$kdir/Module.symvers")
	fix=$cache/fixture-$kver-$fkey
	if [ ! -f "$fix/.done" ]; then
		rm -rf "$fix" "$fix.build"
		if ! nice -n 10 "$peermem/build.sh" "$kdir" "$deb" "$fix.build" > "$fix.log" 2>&1; then
			rm -rf "$fix.build"
			if grep -q 'FAILED\|malformed patch\|can.t find file' "$fix.log"; then
				unsupported "the peer-memory port does not apply to linux-source-6.12 $srcver (see $fix.log)"
			fi
			echo "build-realcore.sh: build.sh failed for $kver, see $fix.log" >&2
			tail -n 20 "$fix.log" >&2
			exit 1
		fi
		mkdir -p "$fix/include"
		cp "$fix.build"/modules/*.ko "$fix.build"/Module.symvers "$fix.build"/load-order.txt "$fix/"
		cp -r "$fix.build"/src/include/rdma "$fix/include/"
		rm -rf "$fix.build"
		touch "$fix/.done"
	fi
fi
# The modules must be for this very kernel.
vm=$(modinfo -F vermagic "$fix/ib_uverbs.ko")
[ "${vm%% *}" = "$kver" ] || { echo "build-realcore.sh: $fix is for ${vm%% *}, not $kver" >&2; exit 1; }
exec 9>&-
if [ -n "$fixture_only" ]; then
	echo "$fix"
	exit 0
fi

# 2. Debian's rxe sources, patched, built against the fixture. The extracted
# sources are shared with build-rxe-dmabuf.sh, and two checkouts may share
# this cache: one extractor and builder at a time, to the end of this script.
exec 9> "$cache/src/rxe.lock"
flock 9
rsrc=$cache/src/rxe-$srcver
if [ ! -f "$rsrc/.done" ]; then
	get_source
	rm -rf "$rsrc" "$rsrc.tmp"
	mkdir -p "$rsrc.tmp"
	dpkg-deb --fsys-tarfile "$deb" |
		tar -xO --wildcards '*/linux-source-6.12.tar.xz' |
		xz -dc | tar -x -C "$rsrc.tmp" --strip-components=1 \
			'linux-source-6.12/drivers/infiniband/sw/rxe'
	mv "$rsrc.tmp" "$rsrc"
	touch "$rsrc/.done"
fi
patch=tests/kmod/rxe-peer/rxe-peer.patch
rkey=$(hash_of "$patch" "$fix/Module.symvers" "$fix/include/rdma/ib_umem.h" "$kdir/Module.symvers" "$0")
rdir=$cache/rxe-$kver-$rkey
if [ ! -f "$rdir/.done" ]; then
	rm -rf "$rdir"
	mkdir -p "$rdir/tree"
	cp -r "$rsrc/drivers" "$rdir/tree/"
	if ! patch -s -d "$rdir/tree" -p1 < "$patch" > "$rdir/patch.log" 2>&1; then
		unsupported "$patch does not apply to linux-source-6.12 $srcver's rxe (see $rdir/patch.log)"
	fi
	b=$rdir/tree/drivers/infiniband/sw/rxe
	if ! make -C "$kdir" M="$b" CONFIG_RDMA_RXE=m \
		NOSTDINC_FLAGS="-I$fix/include" \
		KBUILD_EXTRA_SYMBOLS="$fix/Module.symvers" "$@" modules > "$rdir/build.log" 2>&1; then
		echo "build-realcore.sh: rxe build failed, see $rdir/build.log" >&2
		tail -n 20 "$rdir/build.log" >&2
		exit 1
	fi
	if grep -q 'warning:' "$rdir/build.log"; then
		echo "build-realcore.sh: rxe build warns, see $rdir/build.log" >&2
		grep 'warning:' "$rdir/build.log" >&2
		exit 1
	fi
	cp "$b/rdma_rxe.ko" "$rdir/"
	touch "$rdir/.done"
fi

# out_of_tree <what> <dir> [make args...]: one external module build
# against this kernel, with no warning allowed
out_of_tree() {
	local what=$1 dir=$2
	shift 2
	if ! make -C "$kdir" M="$dir" "$@" modules > "$dir/build.log" 2>&1; then
		echo "build-realcore.sh: $what build failed, see $dir/build.log" >&2
		tail -n 20 "$dir/build.log" >&2
		exit 1
	fi
	if grep -q 'warning:' "$dir/build.log"; then
		echo "build-realcore.sh: $what build warns, see $dir/build.log" >&2
		exit 1
	fi
}

# 3. strixpeer as an OFED node builds it: against the real core's symbols.
mkdir -p "$out/pd"
cp -r Kbuild VERSION kmod include "$out/pd/"
out_of_tree strixpeer "$out/pd" SP_PEER_SYMVERS="$fix/Module.symvers" "$@"
# 4. The stand-in for ROCm's own "amdkfd" client (tests/kmod/amdkfd_stub/),
# linked against the real core's symbols as ROCm's DKMS driver would be.
mkdir -p "$out/amdkfd-stub"
cp tests/kmod/amdkfd_stub/sp_amdkfd_stub.c tests/kmod/peer_mem_abi.h "$out/amdkfd-stub/"
echo 'obj-m := sp_amdkfd_stub.o' > "$out/amdkfd-stub/Kbuild"
out_of_tree sp_amdkfd_stub "$out/amdkfd-stub" KBUILD_EXTRA_SYMBOLS="$fix/Module.symvers" "$@"
{
	echo "REALCORE_FIXTURE=$fix"
	echo "REALCORE_RXE=$rdir/rdma_rxe.ko"
} > "$out/env"
echo "realcore for $kver: fixture $fix, rxe $rdir/rdma_rxe.ko, strixpeer $out/pd/strixpeer.ko"
