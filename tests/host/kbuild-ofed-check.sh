#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Where the PeerDirect build finds the peer-memory API on an OFED node
# (Kbuild, dkms.conf), run by tests/run-all.sh on the host once the VM
# kernels are fetched. Builds the module against Debian's 6.12 headers with
# fake MLNX_OFED/DOCA-OFED trees (SP_OFED_DIR, SP_OFED_DKMS: OFED's layout,
# /usr/src/ofa_kernel/<arch>/<release>/ with Module.symvers and
# configure.mk.kernel) and checks that
#
# - OFED's build for the kernel being built is used, the kernel named by
#   <arch>/<release>/ or by default/'s configure.mk.kernel;
# - OFED's build for another kernel never is: the module builds without
#   PeerDirect, warns once in the build log, writes kmod/peerdirect.txt,
#   DKMS's POST_BUILD prints a banner, and the module's reason (what
#   strixpeerctl status shows) says OFED was not built for this kernel;
# - SP_PEER_SYMVERS overrides; without OFED nothing is lost and nothing warns;
# - dkms.conf orders the build after OFED's DKMS module only when it exists,
#   and its POST_BUILD script is shipped with the DKMS sources.
#
# Prints TAP.
#
# The outcome is a function of the sources, 6.12's headers, the toolchain
# and this script alone: a passing one is kept under a key of all of them
# and restored when none changed (tests/lib/host-cache.sh;
# SP_NO_CHECK_CACHE=1 runs it in full).
set -u
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
. tests/lib/tap.sh
. tests/lib/host-cache.sh

read -r kver root <<< "$(tests/vm/kernels.sh list 2> /dev/null | awk '$1 == "6.12" {print $2, $3}')"
kdir=${root:+$root/usr/src/linux-headers-$kver}
if [ -z "${kver:-}" ] || [ ! -f "$kdir/Makefile" ]; then
	echo "TAP version 13"
	echo "1..0 # SKIP no 6.12 headers (tests/vm/kernels.sh fetch)"
	exit 0
fi
# shellcheck disable=SC2317 # called by hc_begin
inputs() {	# what the outcome depends on (hc_begin hashes it)
	hc_files tests/host/kbuild-ofed-check.sh tests/lib/tap.sh tests/lib/host-cache.sh \
		tests/vm/kernels.sh Kbuild VERSION kmod include scripts dkms.conf Makefile debian/rules
	echo "6.12: $kver $root"
	hc_kernel "$root"
	hc_toolchain sh modinfo strings
	hc_env
}
hc_begin kbuild-ofed-check inputs
other=6.1.0-57-amd64
t=$repo/build/kbuild-ofed
rm -rf "$t"
mkdir -p "$t"

symvers() {	# symvers <file>: a Module.symvers with the peer-memory API
	mkdir -p "$(dirname "$1")"
	printf '0x%08x\t%s\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\t\n' \
		0x1234 ib_register_peer_memory_client 0x5678 ib_unregister_peer_memory_client > "$1"
}
ofed_tree() {	# ofed_tree <dir> <kernel release>: one kernel's OFED build
	symvers "$1/Module.symvers"
	printf 'CWD=%s\nKVERSION=%s\nARCH=x86_64\n' "$1" "$2" > "$1/configure.mk.kernel"
}
# build <case> <target> [make args...]: the module (modules) or only what
# decides PeerDirect (kmod/peer.o), in its own copy of the sources
build() {
	local c=$1 target=$2 d=$t/$1/src
	shift 2
	mkdir -p "$d"
	cp -r Kbuild VERSION kmod include scripts "$d/"
	make -C "$kdir" M="$d" SP_OFED_DKMS="$t/$c/no-dkms" "$@" "$target" > "$t/$c/build.log" 2>&1
}
status_of() { cat "$t/$1/src/kmod/peerdirect.txt" 2> /dev/null; }
depends_on_ib_core() { modinfo -F depends "$t/$1/src/strixpeer.ko" | tr , '\n' | grep -qx ib_core; }

# 1. no OFED at all: built without PeerDirect, quietly
build none modules SP_OFED_DIR="$t/none/ofa_kernel" &&
	[ "$(status_of none)" = "no: no peer-memory API for $kver (not in the kernel, no MLNX_OFED/DOCA-OFED): built without PeerDirect" ] &&
	! grep -q 'LOST' "$t/none/build.log" && ! depends_on_ib_core none &&
	strings "$t/none/src/strixpeer.ko" | grep -q '^built without the peer-memory API: ib_register_peer_memory_client was not found'
result $? "no_ofed_builds_without_peerdirect_quietly" "$(status_of none)"

# 2. OFED built for another kernel only (the kernel update case): lost, loudly
o=$t/lost/ofa_kernel
ofed_tree "$o/x86_64/$other" "$other"
ln -sfn "$o/x86_64/$other" "$o/default"
build lost modules SP_OFED_DIR="$o"
st=$(status_of lost)
case $st in "LOST: MLNX_OFED/DOCA-OFED is installed ($o) but has no Module.symvers for $kver: built WITHOUT PeerDirect."*) r=0 ;; *) r=1 ;; esac
[ $r -eq 0 ] && ! depends_on_ib_core lost &&
	[ "$(grep -c "Kbuild:[0-9]*: strixpeer: PeerDirect LOST" "$t/lost/build.log")" -eq 1 ]
result $? "ofed_for_another_kernel_is_not_used_and_warns_once" "$st"
strings "$t/lost/src/strixpeer.ko" |
	grep -qx "built without the peer-memory API: OFED is installed but was not built for $kver when strixpeer was; rebuild strixpeer after it"
result $? "lost_build_says_why_in_status"
reason=$(strings "$t/lost/src/strixpeer.ko" | grep '^built without the peer-memory API: OFED')
[ "${#reason}" -lt 160 ]
result $? "lost_reason_fits_the_netlink_reason" "${#reason} bytes"
(cd "$t/lost/src" && "$repo/scripts/dkms-post-build.sh" "$kver") > "$t/lost/post-build.txt"
grep -q '^\*\*\*\*' "$t/lost/post-build.txt" &&
	grep -q "^strixpeer for $kver: PeerDirect LOST: .*dkms remove strixpeer/$(cat VERSION) -k $kver && dkms install" "$t/lost/post-build.txt"
result $? "dkms_post_build_prints_a_banner_when_lost" "$(head -c 300 "$t/lost/post-build.txt")"

# 3. OFED built for this kernel: <arch>/<release>/, used even with a stale default
o=$t/this/ofa_kernel
ofed_tree "$o/x86_64/$other" "$other"
ofed_tree "$o/x86_64/$kver" "$kver"
ln -sfn "$o/x86_64/$other" "$o/default"
build this modules SP_OFED_DIR="$o" &&
	[ "$(status_of this)" = "yes: ib_register_peer_memory_client from $o/x86_64/$kver/Module.symvers" ] &&
	depends_on_ib_core this && ! grep -q 'LOST' "$t/this/build.log"
result $? "ofed_for_this_kernel_is_used" "$(status_of this)"
(cd "$t/this/src" && "$repo/scripts/dkms-post-build.sh" "$kver") > "$t/this/post-build.txt"
[ "$(cat "$t/this/post-build.txt")" = "strixpeer for $kver: PeerDirect $(status_of this)" ]
result $? "dkms_post_build_says_what_it_linked"

# 4. default/ counts when its configure.mk.kernel names this kernel...
o=$t/default/ofa_kernel
ofed_tree "$o/default" "$kver"
build default kmod/peer.o SP_OFED_DIR="$o" &&
	[ "$(status_of default)" = "yes: ib_register_peer_memory_client from $o/default/Module.symvers" ]
result $? "ofed_default_for_this_kernel_is_used" "$(status_of default)"

# 5. ...and not when it names another
o=$t/default-other/ofa_kernel
ofed_tree "$o/default" "$other"
build default-other kmod/peer.o SP_OFED_DIR="$o" && case $(status_of default-other) in LOST:*) true ;; *) false ;; esac
result $? "ofed_default_for_another_kernel_is_not_used" "$(status_of default-other)"

# 6. SP_PEER_SYMVERS, the builder's own choice, comes first
symvers "$t/explicit/mine/Module.symvers"
o=$t/explicit/ofa_kernel
ofed_tree "$o/x86_64/$kver" "$kver"
build explicit kmod/peer.o SP_OFED_DIR="$o" SP_PEER_SYMVERS="$t/explicit/mine/Module.symvers" &&
	[ "$(status_of explicit)" = "yes: ib_register_peer_memory_client from $t/explicit/mine/Module.symvers" ]
result $? "sp_peer_symvers_comes_first" "$(status_of explicit)"

# 7. dkms.conf: after OFED's DKMS module when there is one; POST_BUILD shipped
conf() {	# conf <dkms_tree>: BUILD_DEPENDS and POST_BUILD as dkms reads them
	(
		# shellcheck disable=SC2034 # variables dkms.conf may refer to
		kernelver=$kver kernel_source_dir=x arch=x86_64 dkms_tree=$1
		# shellcheck disable=SC1091
		. ./dkms.conf
		echo "${BUILD_DEPENDS[*]:-}|$POST_BUILD"
	)
}
mkdir -p "$t/dkms-with/mlnx-ofed-kernel/25.10" "$t/dkms-without"
with=$(conf "$t/dkms-with") without=$(conf "$t/dkms-without")
[ "$with" = "mlnx-ofed-kernel|scripts/dkms-post-build.sh $kver" ] &&
	[ "$without" = "|scripts/dkms-post-build.sh $kver" ]
result $? "dkms_builds_after_ofed_only_when_ofed_is_there" "with: $with; without: $without"
[ -x scripts/dkms-post-build.sh ] &&
	grep -q 'scripts/dkms-post-build.sh' Makefile &&
	grep -q 'dh_install -pstrixpeer-dkms scripts/dkms-post-build.sh' debian/rules
result $? "dkms_post_build_script_is_shipped"

hc_finish
