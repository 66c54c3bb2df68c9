#!/bin/busybox sh
# initramfs-init.sh: /init of the test VM's initramfs (see run-vm.sh).
#
# Stage 1 (PID 1 in the initramfs, static busybox only): load the .ko files
# listed in /modules/order (what 9p and overlay need, and configfs), mount
# the host's root (9p tag "hostroot", read-only) under a tmpfs-backed
# overlay, mount the per-run control share (9p tag "spctl"), and set up
# inside the new root: /proc /sys /dev /dev/pts /dev/shm /run /tmp, debugfs,
# tracefs, cgroup2, hugetlbfs, configfs, the kernel's modules on
# /lib/modules/<kver>, and the output share (9p tag "spout", read-write) at
# the output dir's host path; then switch_root into it, running this same
# script again with the host's /bin/sh. Doing the mounts with busybox here is
# much faster than exec'ing host tools over 9p.
#
# The checkout is bound again at /run/strixpeer/repo (SP_GUEST_REPO), a path
# every user can reach.
#
# Stage 2 (PID 1 in the host's root): run the command from the control share
# as root in the checkout's neutral path with SP_KVER/SP_OUT set; then write dmesg.txt and
# exit-code into the output dir, and power off.
#
# Must stay POSIX sh: stage 1 runs under busybox ash, stage 2 under dash.

say() { echo "strixpeer-vm: $*"; }

# A failure before the command could run: say why, power off (the host sees
# no exit-code and reports 125).
fail() {
	say "FATAL: $*"
	/bin/busybox poweroff -f 2>/dev/null || /run/strixpeer/busybox poweroff -f
	sleep 10
}

stage1() {
	export PATH=/bin
	/bin/busybox mkdir -p /bin /proc /sys /dev /lower /rw /newroot
	/bin/busybox --install -s /bin
	mount -t devtmpfs devtmpfs /dev 2>/dev/null
	exec </dev/console >/dev/console 2>&1
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys

	if [ -f /modules/order ]; then
		while read -r ko; do
			insmod "/modules/$ko" || say "insmod $ko failed"
		done </modules/order
	fi

	# 9p: msize is capped by the virtio transport (~512 KB); cache=loose
	# keeps pages and dentries of the (unchanging) host root in the guest,
	# which is what makes exec of host binaries reasonably fast.
	o9p=trans=virtio,version=9p2000.L,msize=512000
	mount -t 9p -o "$o9p,ro,cache=loose" hostroot /lower ||
		fail "cannot mount the host root over 9p"
	mount -t tmpfs -o mode=0755 tmpfs /rw
	mkdir -p /rw/upper /rw/work
	mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
		fail "cannot mount the overlay root"

	N=/newroot
	mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs $N/run
	S=$N/run/strixpeer
	mkdir -p $S/ctl $S/host
	mount -t 9p -o "$o9p,ro,cache=none" spctl $S/ctl ||
		fail "cannot mount the control share"
	# SP_KVER SP_OUT SP_REPO SP_KROOT
	# shellcheck disable=SC1091
	. $S/ctl/env
	SP_GUEST_REPO=/run/strixpeer/repo
	# The pristine host root stays reachable (read-only) in the guest.
	mount --move /lower $S/host
	cp /init $S/init
	cp /bin/busybox $S/busybox

	# The fixed mount points are plain directories of the host root; paths
	# that come from the host (kernel root, repo, output dir) may contain
	# absolute symlinks (a symlinked $HOME), so they are resolved inside the
	# new root with chroot (busybox is static: that works).
	nr() { chroot $N /run/strixpeer/busybox "$@"; }
	mount -t proc -o nosuid,nodev,noexec proc $N/proc
	mount -t sysfs -o nosuid,nodev,noexec sysfs $N/sys
	mount -t devtmpfs -o nosuid devtmpfs $N/dev
	mkdir -p $N/dev/pts $N/dev/shm $N/dev/hugepages $N/dev/mqueue
	mount -t devpts -o nosuid,noexec,gid=5,mode=620,ptmxmode=666 devpts $N/dev/pts
	mount -t tmpfs -o nosuid,nodev tmpfs $N/dev/shm
	mount -t hugetlbfs hugetlbfs $N/dev/hugepages 2>/dev/null
	mount -t mqueue mqueue $N/dev/mqueue 2>/dev/null
	ln -sf /proc/self/fd $N/dev/fd
	ln -sf /proc/self/fd/0 $N/dev/stdin
	ln -sf /proc/self/fd/1 $N/dev/stdout
	ln -sf /proc/self/fd/2 $N/dev/stderr
	mount -t debugfs -o nosuid,nodev,noexec debugfs $N/sys/kernel/debug 2>/dev/null
	mount -t tracefs -o nosuid,nodev,noexec tracefs $N/sys/kernel/tracing 2>/dev/null
	mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 $N/sys/fs/cgroup 2>/dev/null
	# configfs: built in, or loaded above when the kernel has it as a module
	if grep -qw configfs /proc/filesystems; then
		mount -t configfs configfs $N/sys/kernel/config
	fi

	# The kernel's modules at the usual place, so the guest's modprobe works
	# (their 'build' link points into the unpacked root, also visible here).
	kver=$(uname -r)
	[ "$kver" = "$SP_KVER" ] || say "warning: booted $kver, expected $SP_KVER"
	nr mkdir -p "/lib/modules/$kver"
	nr mount --bind "$SP_KROOT/lib/modules/$kver" "/lib/modules/$kver" ||
		fail "cannot bind $SP_KROOT/lib/modules/$kver"

	# Paths under /tmp that must survive the guest's fresh /tmp: keep a bind
	# of the overlay's view of them aside, mount /tmp, put them back.
	n=0
	for p in "$SP_REPO" "$SP_KROOT"; do
		case $p in
		/tmp/*)
			n=$((n + 1))
			nr mkdir -p /run/strixpeer/keep$n
			nr mount --bind "$p" /run/strixpeer/keep$n
			;;
		esac
	done
	nr mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
	n=0
	for p in "$SP_REPO" "$SP_KROOT"; do
		case $p in
		/tmp/*)
			n=$((n + 1))
			nr mkdir -p "$p"
			nr mount --move /run/strixpeer/keep$n "$p"
			;;
		esac
	done

	# The output dir last, at its host path (it may lie under /tmp or the repo).
	nr mkdir -p "$SP_OUT"
	nr mount -t 9p -o "$o9p,cache=mmap" spout "$SP_OUT" ||
		fail "cannot mount the output share on $SP_OUT"
	# The checkout again at a neutral path that every user can reach,
	# whatever the modes of the directories above it on the host (a clone
	# in root's 0700 home): the command runs there, so that programs the
	# tests run as another user (nobody) are found. rbind: the output
	# share shows there too when it lies inside the checkout.
	nr mkdir -p "$SP_GUEST_REPO"
	nr mount -o rbind "$SP_REPO" "$SP_GUEST_REPO" ||
		fail "cannot bind the checkout $SP_REPO at $SP_GUEST_REPO"

	hostname strixpeer-vm
	ip link set lo up
	umount /proc /sys /dev 2>/dev/null
	# shellcheck disable=SC2093
	exec switch_root $N /bin/sh /run/strixpeer/init stage2
	fail "switch_root failed"
}

stage2() {
	BB=/run/strixpeer/busybox
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	exec </dev/console >/dev/console 2>&1
	# shellcheck disable=SC1091
	. /run/strixpeer/ctl/env
	SP_GUEST_REPO=/run/strixpeer/repo

	# shellcheck disable=SC3045 # dash and busybox have both
	ulimit -l unlimited 2>/dev/null
	# shellcheck disable=SC3045
	ulimit -c 0 2>/dev/null

	read -r up _ </proc/uptime
	say "command starts at uptime ${up}s"
	# A clean environment; cmd (written by run-vm.sh) exports SP_KVER,
	# SP_OUT and the forwarded SP_*/STRIXPEER_* variables, then execs.
	(cd "$SP_GUEST_REPO" && exec env -i PATH="$PATH" HOME=/root USER=root LOGNAME=root \
		LANG=C.UTF-8 TERM=dumb /bin/sh /run/strixpeer/ctl/cmd) </dev/null
	rc=$?
	read -r up _ </proc/uptime
	say "command exited with $rc at uptime ${up}s"

	$BB dmesg >"$SP_OUT/dmesg.txt" 2>&1
	echo "$rc" >"$SP_OUT/exit-code.tmp" && $BB mv "$SP_OUT/exit-code.tmp" "$SP_OUT/exit-code"
	$BB sync
	$BB poweroff -f
	echo o >/proc/sysrq-trigger
	sleep 10
}

case ${1:-} in
stage2) stage2 ;;
*) stage1 ;;
esac
