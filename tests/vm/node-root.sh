#!/bin/bash
# node-root.sh: the package and DKMS half of the provisioning tests, run
# natively (not under qemu) in a throwaway "node": a private mount namespace
# whose root is an overlay of the host's root with its upper layer in tmpfs,
# so dpkg, dkms, useradd and depmod change nothing on the host.
#
#   node-root.sh <outdir> <deb dir> <kver1> <root1> <kver2> <root2> [sid dkms .deb]
#   SP_NODE_OFED=<core dir> node-root.sh ...   (an OFED node, see below)
#
# The node "runs" kver1 (a 'uname' in front of PATH says so: DKMS builds for
# the running kernel) and has kver1's modules tree and headers; kver2's
# arrive with the kernel update (waiting in /run/strixpeer-node/ until
# then). Each modules tree is an overlay of the unpacked kernel root,
# written only in tmpfs too.
#
# Runs tests/vm/guest-provision.sh node-install, saves the node's disk (what
# changed) as <outdir>/state-root.tar and <outdir>/state-modules-<kver>.tar
# for the VM boots ('guest-provision.sh boot'), then runs
# 'guest-provision.sh node-remove'. TAP files land in <outdir>.
# Why natively: under qemu's software emulation one module build takes
# about 5 minutes and one depmod about 3; here both take seconds, and the
# compiler, dkms and kmod are the same binaries the guest would run (its
# root is this host's).
set -u
if [ "${SP_NODE_INSIDE:-}" != 1 ]; then
	# a private mount namespace (as root; else a user namespace mapping root)
	if [ "$(id -u)" -eq 0 ]; then
		exec env SP_NODE_INSIDE=1 unshare -m --propagation private "$0" "$@"
	fi
	exec env SP_NODE_INSIDE=1 unshare -rm --propagation private "$0" "$@"
fi
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
out=$1 debdir=$2 k1=$3 r1=$4 k2=$5 r2=$6 dkms_deb=${7:-}
mkdir -p "$out"
out=$(cd "$out" && pwd -P)

T=$out/.node
mkdir -p "$T"
mount -t tmpfs -o mode=0755 tmpfs "$T" || exit 1
mkdir -p "$T/u" "$T/w" "$T/root" "$T/fakebin"
mount -t overlay -o "lowerdir=/,upperdir=$T/u,workdir=$T/w" overlay "$T/root" || exit 1
R=$T/root
for d in proc sys dev; do
	mount --rbind "/$d" "$R/$d"
done
mount -t tmpfs tmpfs "$R/tmp"
mount -t tmpfs tmpfs "$R/run"
# A checkout under /tmp or /run (CI's clean clones) is hidden by those:
# bind it back, read-only (the node writes only to $out, bound below).
if [ ! -e "$R$repo/tests/vm/node-root.sh" ]; then
	mkdir -p "$R$repo"
	mount --bind "$repo" "$R$repo" && mount -o remount,bind,ro "$R$repo" || exit 1
fi
# kver1's modules at /lib/modules; kver2's wait in /run/strixpeer-node/ until
# the "kernel update" binds them there (guest-provision.sh node-install).
mkdir -p "$R/run/strixpeer-node"
for kr in "$k1:$r1" "$k2:$r2"; do
	k=${kr%%:*} r=${kr#*:}
	dst=$R/lib/modules/$k
	[ "$k" = "$k1" ] || dst=$R/run/strixpeer-node/modules-$k
	mkdir -p "$T/m-$k/u" "$T/m-$k/w" "$dst"
	mount -t overlay -o "lowerdir=$r/lib/modules/$k,upperdir=$T/m-$k/u,workdir=$T/m-$k/w" \
		overlay "$dst" || exit 1
done
mount --bind "$out" "$R$out"
# The running kernel, as dpkg's and DKMS's scripts ask it ('uname -r').
cat > "$T/fakebin/uname" << 'EOF'
#!/bin/sh
# provisioning node (tests/vm/node-root.sh): the kernel this node runs
if [ "$*" = -r ]; then echo "$SP_NODE_KVER"; exit 0; fi
exec /usr/bin/uname "$@"
EOF
chmod 755 "$T/fakebin/uname"
mkdir -p "$R/usr/local/sbin"
mount --bind "$T/fakebin" "$R/usr/local/sbin"

node() {	# node <mode> <args...>: guest-provision.sh inside the node
	chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 SP_NODE_KVER="$k1" SP_OUT="$out" \
		/bin/bash -c 'cd "$1" && shift && exec tests/vm/guest-provision.sh "$@"' \
		node "$repo" "$@"
}

# SP_NODE_OFED=<core dir>: an OFED node instead (guest-provision.sh
# ofed-install); its disk is saved, nothing is removed.
if [ -n "${SP_NODE_OFED:-}" ]; then
	node ofed-install "$debdir" "$SP_NODE_OFED"
else
	node node-install "$debdir" "$k2" "$dkms_deb"
fi
rc=$?

# The node's disk as a reboot finds it: what changed in the root and in each
# modules tree (overlay whiteouts, char devices 0/0, left out: the state is
# applied on top of a fresh copy of the same host root).
(cd "$T/u" && find . -mindepth 1 ! -type c ! -path './usr/local/sbin*' -print0 |
	tar --null --no-recursion -T - -cf "$out/state-root.tar")
for k in "$k1" "$k2"; do
	(cd "$T/m-$k/u" && find . -mindepth 1 ! -type c -print0 |
		tar --null --no-recursion -T - -cf "$out/state-modules-$k.tar")
done

[ -n "${SP_NODE_OFED:-}" ] && exit $rc
node node-remove "$k2"
[ $? -eq 0 ] && [ $rc -eq 0 ]
