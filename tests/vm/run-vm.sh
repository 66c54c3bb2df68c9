#!/bin/bash
# run-vm.sh: run one command as root inside a qemu VM (software emulation)
# booting one of the kernels from kernels.sh.
#
#   run-vm.sh [--timeout SEC] [--quiet] <kver> <outdir> -- <command> [args...]
#
# <kver> is a kernel release from 'kernels.sh list' (its name there, e.g.
# 6.1, 6.12 or debug-<kver>, is accepted too). The guest sees the host's root
# filesystem read-only over virtio-9p with a tmpfs overlay on top (so every
# host tool and the repo's built files are at the same paths; writes are
# discarded at poweroff), /lib/modules/<kver> from the unpacked kernel root,
# fresh /proc /sys /dev /dev/shm /run /tmp, debugfs, tracefs, cgroup2,
# hugetlbfs, configfs where the kernel has it. <outdir> (a host directory,
# created if missing) is shared read-write at the same path. The repo is
# also bound at /run/strixpeer/repo, a path every user can reach whatever
# the modes of the directories above the checkout (a clone in root's 0700
# home): the command runs there (relative paths such as build/strixpeerctl
# work for nobody too), with stdin /dev/null and a clean environment: PATH, HOME,
# SP_KVER=<kver>, SP_OUT=<outdir>, plus the caller's SP_*/STRIXPEER_* vars.
# VM: q35, 2 vCPUs (2 sockets), 2 GiB in two NUMA nodes of 1 GiB (cpu 0 on
# node 0, cpu 1 on node 1), single-threaded TCG (STRIXPEER_VM_MTTCG=1 for
# multi-threaded TCG: faster with idle host cores, but see below).
# STRIXPEER_VM_MEM=<MiB> gives the VM more memory (default 2048), split
# evenly between the two nodes (make bench uses it for 1 GiB buffers).
#
# Leaves in <outdir>: console.log (serial console; also copied to stdout
# unless --quiet), dmesg.txt, exit-code.
# Exits with the command's exit code; 124 on timeout (default 1200 s, qemu
# killed); 125 if the guest panicked or never wrote an exit code.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd -P)
CACHE=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
PATH=$PATH:/usr/sbin:/sbin
# Modules the initramfs needs to reach the 9p root; which of them (and of
# their dependencies) are built in differs per kernel: resolved with modprobe.
INITRD_MODULES="virtio_pci 9pnet_virtio 9p overlay"
# Loaded in the initramfs too when the kernel has them (configfs: so that it
# is mounted without running the guest's modprobe, which is slow over 9p).
INITRD_OPTIONAL_MODULES="configfs"
INITRD_FORMAT=3 # bump when the initramfs layout changes

usage() {
	echo "usage: $0 [--timeout SEC] [--quiet] <kver> <outdir> -- <command> [args...]" >&2
	exit 2
}
die() { echo "run-vm.sh: error: $*" >&2; exit 125; }
log() { echo "run-vm.sh: $*" >&2; }

# Single-quote $1 for sh.
shq() {
	local s=${1//\'/\'\\\'\'}
	printf "'%s'" "$s"
}

# --- initramfs (cached per kernel) -------------------------------------------

# A newc cpio archive holding only dev/ and the dev/console node, so that the
# kernel can open the initial console even when this runs as non-root (no
# mknod). The kernel unpacks concatenated archives in order.
cpio_console() {
	local ino=700000 name mode maj min pad e
	for e in "dev 040755 0 0" "dev/console 020600 5 1" "TRAILER!!! 0 0 0"; do
		read -r name mode maj min <<<"$e"
		mode=$((8#$mode))
		printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
			$ino "$mode" 0 0 1 0 0 0 0 "$maj" "$min" $((${#name} + 1)) 0
		printf '%s\0' "$name"
		# header (110 bytes) + name + NUL, padded to a multiple of 4
		pad=$(((4 - (110 + ${#name} + 1) % 4) % 4))
		head -c "$pad" /dev/zero
		ino=$((ino + 1))
	done
}

# Print the .ko files (in load order, each once) that INITRD_MODULES need.
initrd_modules() {
	local m dep line seen=" "
	for m in $INITRD_MODULES $INITRD_OPTIONAL_MODULES; do
		# one "insmod <path>" line per module to load; "builtin <m>" if built in
		if ! dep=$(modprobe -d "$root" -S "$kver" --show-depends "$m" 2>&1); then
			case " $INITRD_OPTIONAL_MODULES " in *" $m "*) continue ;; esac
			die "$kver has '$m' neither as a module nor built in: $dep"
		fi
		while read -r line; do
			case $line in
			insmod\ *) line=${line#insmod }; line=${line%% *} ;;
			*) continue ;;
			esac
			case $seen in *" $line "*) continue ;; esac
			seen="$seen$line "
			echo "$line"
		done <<<"$dep"
	done
}

# Print the path of the initramfs for $kver, building it if needed.
build_initramfs() {
	local bb mods key out stage ko base
	bb=$(command -v busybox 2>/dev/null || true)
	for bb in /bin/busybox /usr/bin/busybox "$bb" ""; do
		# must be static (busybox-static): ldd refuses it
		[ -x "$bb" ] && ! ldd "$bb" >/dev/null 2>&1 && break
	done
	[ -n "$bb" ] || die "no static busybox (install busybox-static)"
	mods=$(initrd_modules) || exit 125
	key=$( {
		echo "$INITRD_FORMAT"
		cat "$HERE/initramfs-init.sh"
		cat "$root/.strixpeer-complete"
		echo "$mods"
		stat -L -c '%s %Y' "$bb"
	} | sha256sum | cut -c1-16)
	out=$CACHE/initramfs/$kver-$key.cpio
	if [ -f "$out" ]; then
		touch "$out" # for the pruning below
		echo "$out"
		return
	fi
	mkdir -p "$CACHE/initramfs"
	stage=$(mktemp -d "${TMPDIR:-/tmp}/sp-initrd.XXXXXX")
	mkdir -p "$stage/bin" "$stage/modules"
	cp "$bb" "$stage/bin/busybox"
	cp "$HERE/initramfs-init.sh" "$stage/init"
	chmod 755 "$stage/init" "$stage/bin/busybox"
	: >"$stage/modules/order"
	# busybox insmod takes plain .ko only: decompress here
	for ko in $mods; do
		base=$(basename "$ko")
		case $ko in
		*.ko.xz) base=${base%.xz}; xz -dc "$ko" >"$stage/modules/$base" ;;
		*.ko.zst) base=${base%.zst}; zstd -qdc "$ko" >"$stage/modules/$base" ;;
		*.ko.gz) base=${base%.gz}; gzip -dc "$ko" >"$stage/modules/$base" ;;
		*) cp "$ko" "$stage/modules/$base" ;;
		esac
		echo "$base" >>"$stage/modules/order"
	done
	(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out.tmp.$$"
	cpio_console >>"$out.tmp.$$"
	log "built initramfs for $kver: busybox + modules: $(tr '\n' ' ' <"$stage/modules/order")"
	rm -rf "$stage"
	mv "$out.tmp.$$" "$out"
	# Other checkouts sharing the cache may use other keys right now: drop
	# only initramfs files unused for a day.
	find "$CACHE/initramfs" -name '*.cpio' -mmin +1440 -delete 2>/dev/null || true
	echo "$out"
}

# --- main ----------------------------------------------------------------------

# Everything runs from this function so that bash has parsed the whole file
# before it starts (editing the script while a VM runs is then harmless).
main() {
	local timeout_s=1200 quiet='' kver outdir root vmlinuz initrd v a name k r
	while [ $# -gt 0 ]; do
		case $1 in
		--timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
		--timeout=*) timeout_s=${1#*=}; shift ;;
		--quiet) quiet=1; shift ;;
		-*) usage ;;
		*) break ;;
		esac
	done
	if [ $# -lt 4 ] || [ "$3" != "--" ]; then usage; fi
	kver=$1
	outdir=$2
	shift 3
	case $timeout_s in '' | *[!0-9]*) usage ;; esac

	root=$CACHE/kernels/$kver
	if [ ! -f "$root/.strixpeer-complete" ] && [ -f "$CACHE/kernels.list" ]; then
		# a kernel's name from 'kernels.sh list' (6.1, 6.12, debug-...)
		while read -r name k r; do
			[ "$name" = "$kver" ] && kver=$k && root=$r
		done <"$CACHE/kernels.list"
	fi
	[ -f "$root/.strixpeer-complete" ] ||
		die "kernel $kver is not fetched (run tests/vm/kernels.sh fetch; see kernels.sh list)"
	root=$(cd "$root" && pwd -P)
	vmlinuz=$root/boot/vmlinuz-$kver
	[ -f "$vmlinuz" ] || die "no $vmlinuz"
	command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (package qemu-system-x86)"

	mkdir -p "$outdir"
	outdir=$(cd "$outdir" && pwd -P)
	rm -f "$outdir/exit-code" "$outdir/exit-code.tmp" "$outdir/dmesg.txt" "$outdir/console.log"

	initrd=$(build_initramfs)

	# Per-run control share: env for init, cmd for the command.
	ctl=$(mktemp -d "${TMPDIR:-/tmp}/sp-vm.XXXXXX")
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	{
		echo "SP_KVER=$(shq "$kver")"
		echo "SP_OUT=$(shq "$outdir")"
		echo "SP_REPO=$(shq "$REPO")"
		echo "SP_KROOT=$(shq "$root")"
	} >"$ctl/env"
	{
		echo "# generated by run-vm.sh"
		echo "export SP_KVER=$(shq "$kver") SP_OUT=$(shq "$outdir")"
		for v in $(compgen -e); do
			case $v in
			SP_KVER | SP_OUT) ;;
			SP_* | STRIXPEER_*) echo "export $v=$(shq "${!v}")" ;;
			esac
		done
		printf 'exec'
		for a in "$@"; do printf ' %s' "$(shq "$a")"; done
		echo
	} >"$ctl/cmd"

	# no_timer_check: on a loaded host the emulated 8254 can miss the few
	# ticks the kernel's IO-APIC timer check waits for, and the boot then
	# panics ("IO-APIC + timer doesn't work!", seen with load average 6);
	# what virtual machines on loaded hosts boot with.
	#
	# rcupdate.rcu_cpu_stall_timeout=60, watchdog_thresh=30: both count
	# wall-clock time (tsc=reliable), and both vCPUs share one host thread
	# (thread=single) that a loaded 2-core host runs a fraction of the
	# time. The default 21 s RCU stall report fired on 6.1 in one 2 MiB
	# allocation's direct compaction, in a guest whose host ran four VMs:
	# seconds of guest work, not a kernel that stopped. A real stall or
	# soft lockup never ends and is still reported, after 60 s.
	local append="console=ttyS0 panic=-1 oops=panic loglevel=4 rdinit=/init"
	append="$append 8250.nr_uarts=1 i8042.noaux i8042.nokbd tsc=reliable no_timer_check"
	append="$append rcupdate.rcu_cpu_stall_timeout=60 watchdog_thresh=30"
	local fs9p="security_model=none,multidevs=remap"
	local serial
	if [ -n "$quiet" ]; then
		serial=(-chardev "file,id=con0,path=$outdir/console.log")
	else
		serial=(-chardev "stdio,id=con0,signal=off,logfile=$outdir/console.log")
	fi
	# q35, not pc: pc's ACPI _PRT is a loop the debug kernel's AML
	# interpreter cannot finish under TCG (AE_AML_LOOP_TIMEOUT, 30 s per
	# PCI device). la57=off: with 5-level paging the debug kernel reports a
	# KASAN wild-memory-access at boot. thread=single: with qemu 7.2's
	# multi-threaded TCG, 3 of 40 boots of 6.12 died of "Oops: int3" in
	# sched_clock_cpu (a static key patched with text_poke_bp while the
	# other vCPU runs it); single-threaded TCG had none in 30+ boots.
	# sockets=2 so that the two NUMA nodes do not split a socket (the
	# kernel WARNs about that).
	local mem=${STRIXPEER_VM_MEM:-2048}
	case $mem in '' | *[!0-9]*) die "STRIXPEER_VM_MEM must be MiB, e.g. 6144" ;; esac
	local tcg=tcg,thread=single
	[ "${STRIXPEER_VM_MTTCG:-0}" = 0 ] || tcg=tcg,thread=multi
	# shellcheck disable=SC2054 # commas are qemu's
	local qemu=(qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot
		-machine q35 -accel "$tcg" -cpu max,la57=off
		-smp 2,sockets=2,cores=1,threads=1 -m "$((mem / 2 * 2))M"
		-object "memory-backend-ram,id=mem0,size=$((mem / 2))M"
		-object "memory-backend-ram,id=mem1,size=$((mem / 2))M"
		-numa node,nodeid=0,cpus=0,memdev=mem0
		-numa node,nodeid=1,cpus=1,memdev=mem1
		-kernel "$vmlinuz" -initrd "$initrd" -append "$append"
		-fsdev "local,id=hostroot,path=/,readonly=on,$fs9p"
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
		-fsdev "local,id=spctl,path=$ctl,readonly=on,$fs9p"
		-device virtio-9p-pci,fsdev=spctl,mount_tag=spctl
		-fsdev "local,id=spout,path=$outdir,$fs9p"
		-device virtio-9p-pci,fsdev=spout,mount_tag=spout
		"${serial[@]}" -serial chardev:con0)

	local t0 t1 qrc rc why boot
	t0=$(date +%s)
	set +e
	timeout -k 10 "$timeout_s" "${qemu[@]}" </dev/null &
	qpid=$!
	wait "$qpid"
	qrc=$?
	qpid=
	set -e
	t1=$(date +%s)

	# timeout(1): 124 when it stopped qemu with SIGTERM, 137 when it had to
	# SIGKILL it (137 can also be the OOM killer: check the time too)
	if [ "$qrc" -eq 124 ] || { [ "$qrc" -eq 137 ] && [ $((t1 - t0)) -ge "$timeout_s" ]; }; then
		rc=124
		why="timed out after ${timeout_s}s"
	elif grep -Eq '^(\[ *[0-9.]+\] )?Kernel panic - not syncing' "$outdir/console.log" 2>/dev/null; then
		rc=125
		why="guest kernel panicked"
	elif [ -f "$outdir/exit-code" ] && rc=$(cat "$outdir/exit-code") && [ -n "$rc" ] &&
		[ -z "${rc//[0-9]/}" ]; then
		why="command exited with $rc"
	else
		rc=125
		why="guest wrote no exit code (qemu exit status $qrc)"
	fi
	boot=$(sed -n 's/^strixpeer-vm: command starts at uptime \([0-9.]*\)s.*/\1/p' "$outdir/console.log" 2>/dev/null | head -n 1)
	log "$kver: $why; $((t1 - t0))s wall${boot:+ (command started at guest uptime ${boot}s)}; output in $outdir"
	return "$rc"
}

ctl=
qpid=
# shellcheck disable=SC2317 # the EXIT trap calls it
cleanup() {
	[ -z "$qpid" ] || kill "$qpid" 2>/dev/null || true
	[ -z "$ctl" ] || rm -rf "$ctl"
}

main "$@"
exit
