#!/bin/bash
# Node provisioning tests. Five modes:
#
#   guest-provision.sh node-install <deb dir> <kver2> [sid dkms .deb]
#       Natively, in the throwaway node of tests/vm/node-root.sh, which
#       "runs" $SP_NODE_KVER: install the four packages (DKMS builds for the
#       running kernel), group rdma, the -dev package builds a program, the
#       CLI, man pages and completion are in place; a kernel update (kver2's
#       modules and headers appear and the hook its headers package runs
#       builds for it); unsupported kernels are skipped with a message and
#       the kernel hook succeeds (with sid's dkms when the node's is older
#       than 3.0.11, see below).
#   guest-provision.sh node-remove <kver2>
#       Natively, after node-root.sh saved the node's disk: dpkg -r and -P
#       leave nothing but (after -r) the conffile; the checkout's make
#       dkms-install / dkms-remove, the same.
#   guest-provision.sh boot <state dir>
#       In the VM (tests/vm/run-vm.sh), booted into either kernel: the node's
#       disk restored, the module loads as at boot (modules-load.d), it is
#       DKMS's build for this kernel, udev gives /dev/strixpeer root:rdma
#       0660, a user in group rdma allocates, one outside gets EACCES.
#   guest-provision.sh ofed-install <deb dir> <core dir>
#       Natively, in a node of its own: OFED's peer-memory core installed
#       as DOCA-OFED's DKMS package leaves it, then the four packages: DKMS
#       links strixpeer against OFED's core (mode_ofed_install says how).
#   guest-provision.sh boot-ofed <state dir>
#       In the VM, booted into the kernel the core was built for: the
#       module loads at boot on OFED's core, PeerDirect is active.
#
# Prints TAP to $SP_OUT/provision-<mode>[-<kver>].tap; exit 0 when all pass.
set -u
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
export DEBIAN_FRONTEND=noninteractive
mode=$1
shift
out=${SP_OUT:?SP_OUT not set}
kver=$(uname -r)
version=$(cat VERSION)
name=$mode
case $mode in boot | boot-ofed) name=$mode-$kver ;; esac
log=$out/provision-$name.log
: > "$log"
tap=()
failed=0
case_() {	# case_ <0|1> <name> [# SKIP reason]
	if [ "$1" -eq 0 ]; then
		tap+=("ok $((${#tap[@]} + 1)) $2${3:+ $3}")
	else
		tap+=("not ok $((${#tap[@]} + 1)) $2")
		failed=$((failed + 1))
		echo "FAILED: $2" >> "$log"
	fi
}
check() {	# check <name> <command...>: a case passes when the command does
	local name=$1
	shift
	echo "== $name: $*" >> "$log"
	local t0=$SECONDS
	"$@" >> "$log" 2>&1
	local st=$?
	echo "-- $((SECONDS - t0)) s, exit $st" >> "$log"
	case_ $st "$name"
}
finish() {
	{
		echo "TAP version 13"
		echo "1..${#tap[@]}"
		printf '%s\n' "${tap[@]}"
	} > "$out/provision-$name.tap"
	[ "$failed" -eq 0 ]
	exit
}

start_udevd() {
	/lib/systemd/systemd-udevd --daemon >> "$log" 2>&1 || return 1
	udevadm settle -t 30 >> "$log" 2>&1
}

# "root:rdma 660" when udev applied the package's rule.
dev_perms() {
	local _
	for _ in $(seq 50); do
		[ -e /dev/strixpeer ] && break
		sleep 0.1
	done
	udevadm settle -t 30 2>/dev/null
	stat -c '%U:%G %a' /dev/strixpeer 2>&1
}

# The module that modprobe would load is DKMS's build for the running kernel.
modprobe_uses_dkms_build() {
	local path
	path=$(modinfo -k "$kver" -n strixpeer) || return 1
	echo "modinfo -n: $path"
	case $path in
	/lib/modules/"$kver"/updates/dkms/strixpeer.ko*) ;;
	*) return 1 ;;
	esac
	[ "$(modinfo -k "$kver" -F vermagic strixpeer | cut -d' ' -f1)" = "$kver" ]
}

# run_as <user> <command...>: with the user's uid, gid and groups.
run_as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$u" --init-groups "$@"
}

# Nothing of strixpeer's left: package files, DKMS tree, sources, modules.
nothing_left() {	# nothing_left <file list> [keep-conffiles]
	local left=0 f
	while read -r f; do
		[ -n "$f" ] || continue
		[ -d "$f" ] && continue	# directories (and /lib -> usr/lib) are shared
		if [ "${2:-}" = keep-conffiles ] && grep -qxF "$f" "$out/conffiles.txt"; then
			continue
		fi
		if [ -f "$f" ] || [ -L "$f" ]; then
			echo "left behind: $f"
			left=1
		fi
	done < "$1"
	for f in /var/lib/dkms/strixpeer /usr/src/strixpeer-"$version" \
		/lib/modules/*/updates/dkms/strixpeer.ko*; do
		[ -e "$f" ] && { echo "left behind: $f"; left=1; }
	done
	if dkms status 2>/dev/null | grep -q strixpeer; then
		echo "dkms status still lists strixpeer"
		left=1
	fi
	return $left
}

mode_node_install() {
	local debdir=$1 kver2=$2 dkms_deb=${3:-} debs st fake k sid_dkms dkms_ver
	debs=("$debdir"/libstrixpeer1_*.deb "$debdir"/libstrixpeer-dev_*.deb \
		"$debdir"/strixpeer-utils_*.deb "$debdir"/strixpeer-dkms_*.deb)

	getent group rdma > /dev/null && groupdel rdma	# as on a fresh node
	check debs_install dpkg -i "${debs[@]}"
	for p in libstrixpeer1 libstrixpeer-dev strixpeer-utils strixpeer-dkms; do
		dpkg -L "$p" 2>/dev/null
	done | sort -u > "$out/package-files.txt"
	dpkg-query -W -f='${Conffiles}\n' strixpeer-dkms | awk 'NF {print $1}' > "$out/conffiles.txt"
	check postinst_created_group_rdma getent group rdma
	check dkms_built_for_running_kernel \
		bash -c "dkms status strixpeer/$version -k $kver | grep -w installed"
	check modprobe_finds_dkms_build modprobe_uses_dkms_build
	check udev_rule_installed grep -q 'KERNEL=="strixpeer".*GROUP="rdma".*MODE="0660"' \
		/lib/udev/rules.d/60-strixpeer.rules
	check modules_load_d_names_strixpeer grep -qx strixpeer /usr/lib/modules-load.d/strixpeer.conf
	check modprobe_d_is_a_conffile grep -qx /etc/modprobe.d/strixpeer.conf "$out/conffiles.txt"

	useradd -M -s /bin/sh -G rdma sp-rdma >> "$log" 2>&1
	useradd -M -s /bin/sh sp-other >> "$log" 2>&1
	mkdir -p /usr/local/lib/strixpeer-test
	check dev_package_builds_against_installed_library bash -c \
		"cc -Wall -Werror \$(pkg-config --cflags strixpeer) -o /usr/local/lib/strixpeer-test/alloc \
			tests/vm/provision-alloc.c \$(pkg-config --libs strixpeer) &&
		 ldd /usr/local/lib/strixpeer-test/alloc | grep 'libstrixpeer.so.1 => /\(usr/\)\{0,1\}lib/x86_64-linux-gnu/libstrixpeer.so.1 '"
	check dev_package_static_library_links bash -c \
		"cc -Wall -Werror \$(pkg-config --cflags strixpeer) -o /usr/local/lib/strixpeer-test/alloc-static \
			tests/vm/provision-alloc.c -Wl,-Bstatic -lstrixpeer -Wl,-Bdynamic \
			\$(pkg-config --libs libnl-genl-3.0 libibverbs) &&
		 ! ldd /usr/local/lib/strixpeer-test/alloc-static | grep -q libstrixpeer"
	check dev_package_cmake_finds_strixpeer bash -c \
		"d=\$(mktemp -d) && cp tests/vm/provision-alloc.c \$d/ &&
		 printf 'cmake_minimum_required(VERSION 3.13)\nproject(a C)\nfind_package(strixpeer $version REQUIRED)\nadd_executable(a provision-alloc.c)\ntarget_link_libraries(a PRIVATE strixpeer::strixpeer)\n' > \$d/CMakeLists.txt &&
		 cmake -S \$d -B \$d/b && cmake --build \$d/b &&
		 ldd \$d/b/a | grep -q 'libstrixpeer.so.1 => /\(usr/\)\{0,1\}lib/x86_64-linux-gnu/'"
	check installed_cli_uses_installed_library bash -c \
		"ldd /usr/bin/strixpeerctl | grep 'libstrixpeer.so.1 => /\(usr/\)\{0,1\}lib/x86_64-linux-gnu/libstrixpeer.so.1 ' &&
		 ! readelf -d /usr/bin/strixpeerctl | grep -q 'R\(UN\)\{0,1\}PATH' &&
		 [ \"\$(setpriv --reuid=sp-other --regid=sp-other --clear-groups env -i PATH=/usr/local/bin:/usr/bin:/bin \
			bash -c 'command -v strixpeerctl')\" = /usr/bin/strixpeerctl ] && strixpeerctl -V"
	check man_pages_installed bash -c 'man -w 8 strixpeerctl && man -w 3 libstrixpeer &&
		MANPAGER=cat man sp_buf_alloc | grep -q sp_buf_alloc'
	check bash_completion_installed bash -c \
		'. /usr/share/bash-completion/completions/strixpeerctl && complete -p strixpeerctl'

	# Kernel update: kver2's modules tree and headers arrive (what its
	# linux-image and linux-headers packages unpack; node-root.sh keeps them
	# aside until now), and the hook linux-headers runs on install builds.
	check nothing_built_for_new_kernel_before_update bash -c \
		"[ ! -e /lib/modules/$kver2 ] && ! dkms status strixpeer/$version -k $kver2 | grep -qw installed && ! ls /var/lib/dkms/strixpeer/$version/$kver2 2>/dev/null"
	mkdir -p "/lib/modules/$kver2"
	mount --bind "/run/strixpeer-node/modules-$kver2" "/lib/modules/$kver2"
	check kernel_update_hook_builds_for_new_kernel /etc/kernel/header_postinst.d/dkms "$kver2"
	check dkms_installed_for_new_kernel bash -c \
		"dkms status strixpeer/$version -k $kver2 | grep -w installed &&
		 modinfo -k $kver2 -n strixpeer | grep '^/lib/modules/$kver2/updates/dkms/' &&
		 [ \"\$(modinfo -k $kver2 -F vermagic strixpeer | cut -d' ' -f1)\" = $kver2 ]"

	# Unsupported kernels: too old, and one without a required option.
	# dkms skips strixpeer with a message (BUILD_EXCLUSIVE, status 77) and
	# builds nothing. The kernel hook then succeeds with dkms >= 3.0.11;
	# Debian 12's dkms 3.0.10 counts the skip as a failed autoinstall (dkms
	# bug #302, fixed by dkms PR #314), so the hook's success is checked with
	# sid's dkms, unpacked (not installed) beside the node's.
	fake=/var/tmp/strixpeer-fake-kernels
	sid_dkms=/var/tmp/dkms-sid
	rm -rf "${sid_dkms:?}"
	[ -f "$dkms_deb" ] && dpkg-deb -x "$dkms_deb" "$sid_dkms"
	dkms_ver=$(dkms --version | sed 's/^dkms-//')
	for k in 5.10.0-99-amd64 "$kver-nodmabuf"; do
		mkdir -p "$fake/$k/include" "/lib/modules/$k"
		cp "/lib/modules/$kver/build/.config" "$fake/$k/.config"
		ln -sfn "$fake/$k" "/lib/modules/$k/build"
		[ "$k" = "$kver-nodmabuf" ] && sed -i '/^CONFIG_DMA_SHARED_BUFFER=/d' "$fake/$k/.config"
		echo "== unsupported $k: dkms build" >> "$log"
		dkms build "strixpeer/$version" -k "$k" > "$out/unsupported-$k.log" 2>&1
		st=$?
		cat "$out/unsupported-$k.log" >> "$log"
		echo "-- exit $st" >> "$log"
		[ $st -eq 77 ] && grep -q 'BUILD_EXCLUSIVE' "$out/unsupported-$k.log" &&
			! ls /lib/modules/"$k"/updates/dkms/strixpeer.ko* > /dev/null 2>&1
		case_ $? "unsupported_kernel_${k}_skipped_with_message"
		if dpkg --compare-versions "$dkms_ver" ge 3.0.11; then
			check "unsupported_kernel_${k}_hook_succeeds" /etc/kernel/postinst.d/dkms "$k"
		else
			case_ 0 "unsupported_kernel_${k}_hook_succeeds" \
				"# SKIP dkms $dkms_ver fails autoinstall on a BUILD_EXCLUSIVE skip (dkms bug #302, fixed in 3.0.11); checked with sid's dkms below"
		fi
		if [ -x "$sid_dkms/usr/sbin/dkms" ]; then
			echo "== unsupported $k: $("$sid_dkms/usr/sbin/dkms" --version) autoinstall" >> "$log"
			"$sid_dkms/usr/sbin/dkms" autoinstall -k "$k" > "$out/unsupported-sid-$k.log" 2>&1
			st=$?
			cat "$out/unsupported-sid-$k.log" >> "$log"
			echo "-- exit $st" >> "$log"
			[ $st -eq 0 ] && grep -q 'BUILD_EXCLUSIVE' "$out/unsupported-sid-$k.log" &&
				! ls /lib/modules/"$k"/updates/dkms/strixpeer.ko* > /dev/null 2>&1
			case_ $? "unsupported_kernel_${k}_autoinstall_succeeds_with_sid_dkms"
		else
			# a download that failed is a failure, not a skip
			case_ 1 "unsupported_kernel_${k}_autoinstall_succeeds_with_sid_dkms" \
				"# no dkms .deb from sid: provision.sh could not download it (see sid-dkms.log)"
		fi
		rm -rf "/lib/modules/$k" "${fake:?}/$k"
	done
	rm -rf "$sid_dkms"
	finish
}

mode_node_remove() {
	local kver2=$1
	# dpkg -r: every file but the conffile goes, and DKMS's builds for both
	# kernels; dpkg -P: the conffile too.
	check dpkg_remove dpkg -r strixpeer-dkms strixpeer-utils libstrixpeer-dev libstrixpeer1
	check dpkg_remove_leaves_only_conffiles nothing_left "$out/package-files.txt" keep-conffiles
	check dpkg_purge dpkg -P strixpeer-dkms strixpeer-utils libstrixpeer-dev libstrixpeer1
	check dpkg_purge_leaves_no_package bash -c \
		"! dpkg -l 'strixpeer*' 'libstrixpeer*' 2>/dev/null | grep '^[a-z][a-z] ' &&
		 [ ! -e /etc/modprobe.d/strixpeer.conf ]"
	check dpkg_purge_leaves_nothing nothing_left "$out/package-files.txt"

	# From a checkout: make dkms-install / dkms-remove (running kernel).
	check make_dkms_install make -s dkms-install
	check make_dkms_install_built_for_running_kernel bash -c \
		"dkms status strixpeer/$version -k $kver | grep -w installed &&
		 [ \"\$(modinfo -k $kver -F vermagic strixpeer | cut -d' ' -f1)\" = $kver ] &&
		 ! ls /lib/modules/$kver2/updates/dkms/strixpeer.ko* 2>/dev/null"
	check make_dkms_remove make -s dkms-remove
	: > "$out/empty.txt"
	check make_dkms_remove_leaves_nothing nothing_left "$out/empty.txt"
	finish
}

# The node's saved disk restored, booted as its modules-load.d says: the
# module loaded is DKMS's build for this kernel.
boot_saved_node() {	# boot_saved_node <state dir>
	local state=$1
	check state_restored bash -c "tar -xpf '$state/state-root.tar' -C / &&
		tar -xpf '$state/state-modules-$kver.tar' -C /lib/modules/$kver"
	start_udevd || echo "systemd-udevd did not start" >> "$log"
	check boot_modules_load_d_loads_module bash -c \
		'/lib/systemd/systemd-modules-load && grep -q "^strixpeer " /proc/modules'
	check loaded_module_is_dkms_build_for_this_kernel modprobe_uses_dkms_build
}

mode_boot() {
	local st
	boot_saved_node "$1"
	check loaded_module_version bash -c "[ \"\$(cat /sys/module/strixpeer/version)\" = $version ]"
	st=$(dev_perms)
	echo "/dev/strixpeer: $st" >> "$log"
	[ "$st" = "root:rdma 660" ]
	case_ $? "dev_strixpeer_root_rdma_0660"
	check rdma_group_user_allocates run_as sp-rdma /usr/local/lib/strixpeer-test/alloc
	check rdma_group_user_allocates_static_lib run_as sp-rdma /usr/local/lib/strixpeer-test/alloc-static
	run_as sp-other /usr/local/lib/strixpeer-test/alloc > "$out/other-user-$kver.txt" 2>&1
	st=$?
	cat "$out/other-user-$kver.txt" >> "$log"
	[ $st -ne 0 ] && grep -q 'open: EACCES' "$out/other-user-$kver.txt"
	case_ $? "user_outside_rdma_gets_EACCES"
	check installed_cli_talks_to_module bash -c 'strixpeerctl status && strixpeerctl -j config show'
	check rdma_group_user_runs_cli run_as sp-rdma env -i PATH=/usr/local/bin:/usr/bin:/bin \
		strixpeerctl status
	check modprobe_r_and_modprobe bash -c 'modprobe -r strixpeer && modprobe strixpeer'
	finish
}

# An OFED node (DOCA-OFED's mlnx-ofed-kernel-dkms as it leaves a node): the
# peer-memory core's RDMA modules in updates/dkms/, where modprobe prefers
# them to the kernel's own, and its Module.symvers in
# /usr/src/ofa_kernel/<arch>/<kver>/ with default/ pointing there. The
# modules are OFED 25.10's core on Debian 6.12's RDMA stack for this kernel
# (../shared/peermem's prebuilt ones, or build.sh's: build-realcore.sh
# --fixture), copied in by provision.sh.
mode_ofed_install() {
	local debdir=$1 fix=$2 debs deps
	debs=("$debdir"/libstrixpeer1_*.deb "$debdir"/libstrixpeer-dev_*.deb \
		"$debdir"/strixpeer-utils_*.deb "$debdir"/strixpeer-dkms_*.deb)
	check ofed_core_installed bash -c "
		mkdir -p /lib/modules/$kver/updates/dkms /usr/src/ofa_kernel/x86_64/$kver &&
		cp '$fix'/*.ko /lib/modules/$kver/updates/dkms/ &&
		cp '$fix/Module.symvers' /usr/src/ofa_kernel/x86_64/$kver/ &&
		ln -sfn x86_64/$kver /usr/src/ofa_kernel/default && depmod -a $kver"
	check ofed_core_is_what_modprobe_loads bash -c \
		"modinfo -k $kver -n ib_uverbs | grep -q '^/lib/modules/$kver/updates/dkms/ib_uverbs.ko'"
	check debs_install_on_ofed_node dpkg -i "${debs[@]}"
	check dkms_built_for_running_kernel_on_ofed_node \
		bash -c "dkms status strixpeer/$version -k $kver | grep -w installed"
	check modprobe_finds_dkms_build_on_ofed_node modprobe_uses_dkms_build
	# what the build decided, where install.md tells the admin to look
	check dkms_make_log_says_peerdirect_from_ofed grep -qxF \
		"strixpeer: PeerDirect yes: ib_register_peer_memory_client from /usr/src/ofa_kernel/x86_64/$kver/Module.symvers" \
		"/var/lib/dkms/strixpeer/$version/$kver/x86_64/log/make.log"
	# linked against OFED's core: the peer API comes from its ib_uverbs
	deps=$(modinfo -k "$kver" -F depends strixpeer 2>&1)
	echo "strixpeer depends: $deps" >> "$log"
	[[ ",$deps," == *,ib_uverbs,* ]]
	case_ $? "dkms_build_links_against_ofed_ib_uverbs"
	modprobe --show-depends -S "$kver" strixpeer > "$out/ofed-show-depends.txt" 2>&1
	cat "$out/ofed-show-depends.txt" >> "$log"
	grep -q "^insmod /lib/modules/$kver/updates/dkms/ib_uverbs.ko" "$out/ofed-show-depends.txt" &&
		grep -q "^insmod /lib/modules/$kver/updates/dkms/ib_core.ko" "$out/ofed-show-depends.txt"
	case_ $? "modprobe_strixpeer_pulls_ofed_core"
	finish
}

# The OFED node booted: the module loads as at boot with OFED's core under
# it, and PeerDirect is active (a client registered with the real core).
mode_boot_ofed() {
	boot_saved_node "$1"
	# the running ib_uverbs is OFED's: it exports the peer-memory API
	check running_ib_uverbs_is_ofeds grep -qw ib_register_peer_memory_client /proc/kallsyms
	dmesg > "$out/dmesg-ofed.txt" 2>&1
	check dmesg_says_client_registered grep -q "strixpeer: PeerDirect client 'strixpeer' registered" \
		"$out/dmesg-ofed.txt"
	strixpeerctl -j status > "$out/status-ofed.json" 2>&1
	cat "$out/status-ofed.json" >> "$log"
	check status_says_peerdirect_available python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["peerdirect"]
assert p["available"] is True and p["client"] == "strixpeer", p' "$out/status-ofed.json"
	check modprobe_r_and_modprobe bash -c 'modprobe -r strixpeer && modprobe strixpeer &&
		grep -q "^strixpeer " /proc/modules'
	finish
}

case $mode in
ofed-install) [ $# -eq 2 ] || { echo "usage: $0 ofed-install <deb dir> <core dir>" >&2; exit 2; }
	mode_ofed_install "$@" ;;
boot-ofed) [ $# -eq 1 ] || { echo "usage: $0 boot-ofed <state dir>" >&2; exit 2; }
	mode_boot_ofed "$@" ;;
node-install) [ $# -ge 2 ] || { echo "usage: $0 node-install <deb dir> <kver2> [sid dkms .deb]" >&2; exit 2; }
	mode_node_install "$@" ;;
node-remove) [ $# -eq 1 ] || { echo "usage: $0 node-remove <kver2>" >&2; exit 2; }
	mode_node_remove "$@" ;;
boot) [ $# -eq 1 ] || { echo "usage: $0 boot <state dir>" >&2; exit 2; }
	mode_boot "$@" ;;
*) echo "usage: $0 node-install ... | node-remove ... | boot ... | ofed-install ... | boot-ofed ..." >&2; exit 2 ;;
esac
