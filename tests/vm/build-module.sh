#!/bin/bash
# Builds the modules the VM suite loads for one of the VM kernels, each in
# its own copy of the sources so that builds never share objects:
#
#   build/kmod/<kver>/strixpeer.ko          as a Debian node builds it: no
#                                           peer-memory API in the kernel
#   build/kmod/<kver>/peersim/sp_peersim.ko the simulated PeerDirect core,
#                  .../peersim/sp_gpusim.ko and the moving GEM exporter
#                                           (tests/vm/build-peersim.sh)
#   build/kmod/<kver>/pd/strixpeer.ko       linked against sp_peersim's
#                                           Module.symvers, as against OFED's
#
#   build/kmod/<kver>/realcore/             the real PeerDirect stack
#                                           (tests/vm/build-realcore.sh)
#   build/kmod/<kver>/rxe-dmabuf/           the rxe with dma-buf MRs and its
#                                           provider (build-rxe-dmabuf.sh)
#
#   build-module.sh <kver> [make args...]     e.g. W=1
#   build-module.sh --strixpeer-only <kver> [make args...]
#                       build/kmod/<kver>/strixpeer.ko alone (make demo)
#
# Build logs: build.log in each directory; exits non-zero on any failure.
#
# A build whose inputs are all as they were for an earlier one is restored
# from $STRIXPEER_CACHE/kmod-builds/ instead of being made again (objects,
# modules and build logs: the W=1 checks read the logs of the build that made
# the modules). The key is the content of every file of the tree the builds
# read (Kbuild, VERSION, kmod/, include/, tests/kmod/, these scripts),
# ../shared/peermem's, the kernel's headers (.config, Module.symvers,
# Makefile, .kernelvariables), the host's gcc, the sid toolchains, the make
# arguments and the cache's path; any difference rebuilds. A build whose
# dma-buf rxe failed is not kept (its cause may be a download). SP_NO_BUILD_CACHE=1
# always builds. The line "build-module.sh: restored ..." says a build was
# restored.
set -eu
cd "$(dirname "$0")/../.."
only=
if [ "${1:-}" = --strixpeer-only ]; then
	only=1
	shift
fi
kver=$1
shift
kdir=$(tests/vm/kernels.sh kdir "$kver")
bdir=$PWD/build/kmod/$kver
rm -rf "$bdir"
mkdir -p "$bdir"

cache=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
peermem=${SP_PEERMEM_DIR:-$PWD/../shared/peermem}
build_key() {	# the inputs of this build, hashed
	{
		echo "kver=$kver only=$only args=$* cache=$cache"
		echo "SP_RDMA_CORE_VERSION=${SP_RDMA_CORE_VERSION:-}"
		find Kbuild VERSION kmod include tests/kmod tests/vm/build-module.sh \
			tests/vm/build-peersim.sh tests/vm/build-realcore.sh \
			tests/vm/build-rxe-dmabuf.sh -type f ! -name conftest.h -print0 |
			sort -z | xargs -0 sha256sum
		find "$peermem" -type f -print0 2> /dev/null | sort -z | xargs -0r sha256sum |
			sed "s|$peermem|peermem|"
		for f in .config Module.symvers Makefile .kernelvariables; do
			[ ! -f "$kdir/$f" ] || echo "$f $(sha256sum < "$kdir/$f")"
		done
		gcc --version | head -n 1
		ls "$cache/toolchains" 2> /dev/null
	} | sha256sum | cut -c1-20
}
# Every path a restored build's env files name must still exist (the
# realcore fixture, the rxe and rdma-core builds live in the cache).
env_paths_exist() {
	local f v
	for f in "$bdir"/*/env; do
		[ -f "$f" ] || continue
		while IFS='=' read -r _ v; do
			case $v in /*) [ -e "$v" ] || return 1 ;; esac
		done < "$f"
	done
}
key=
store=$cache/kmod-builds
if [ "${SP_NO_BUILD_CACHE:-0}" != 1 ]; then
	key=$(build_key "$@")
	tarball=$store/$kver-$key.tar.zst
	if [ -f "$tarball" ] && tar --zstd -xf "$tarball" -C "$bdir" 2> /dev/null &&
		env_paths_exist; then
		echo "build-module.sh: restored the build of $kver from $tarball (same inputs)"
		exit 0
	fi
	rm -rf "$bdir"
	mkdir -p "$bdir"
fi
keep() {	# keep the finished build in the cache, the newest 3 per kernel
	[ -n "$key" ] || return 0
	[ ! -f "$bdir/rxe-dmabuf/failed" ] || return 0
	mkdir -p "$store"
	if ! tar --zstd -cf "$tarball.tmp.$$" -C "$bdir" . ||
		! mv "$tarball.tmp.$$" "$tarball"; then
		rm -f "$tarball.tmp.$$"
		return 0
	fi
	# shellcheck disable=SC2012 # names made here, no odd characters
	ls -t "$store/$kver"-*.tar.zst 2> /dev/null | tail -n +4 | xargs -r rm -f
}

build_strixpeer() {	# build_strixpeer <dir> [make args...]
	local dir=$1
	shift
	mkdir -p "$dir"
	cp -r Kbuild VERSION kmod include "$dir/"
	make -C "$kdir" M="$dir" "$@" modules > "$dir/build.log" 2>&1
}

build_strixpeer "$bdir" "$@"
if [ -n "$only" ]; then
	keep
	exit 0
fi
tests/vm/build-peersim.sh "$kver" "$@"
build_strixpeer "$bdir/pd" "$@" SP_PEER_SYMVERS="$bdir/peersim/Module.symvers"
tests/vm/build-realcore.sh "$kver" "$@"	# the real core (Debian 6.12 kernels; else says why not)
# dma-buf MRs on rxe (Debian 6.12; else says why not). A build that fails
# leaves its reason in build/kmod/<kver>/rxe-dmabuf/failed, and the guest's
# rdma_dmabuf group fails with it: the other groups still run.
tests/vm/build-rxe-dmabuf.sh "$kver" "$@" ||
	echo "build-module.sh: the dma-buf rxe was not built for $kver: $(cat "$bdir/rxe-dmabuf/failed" 2> /dev/null)" >&2
keep
