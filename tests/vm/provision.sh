#!/bin/bash
# Node provisioning, as 'make check' runs it (tests/run-all.sh):
#
#   provision.sh <outdir>
#
# 1. host: 'make deb' builds the four Debian packages;
# 2. natively, in a throwaway overlay of the host's root that "runs"
#    Debian's 6.12 (tests/vm/node-root.sh): the packages installed, DKMS
#    builds, a kernel update to 6.1, unsupported kernels; the node's disk is
#    saved; then removal and the checkout's make dkms-install/-remove;
# 3. VM on 6.12, then VM on 6.1 (the reboot after the kernel update), each
#    restoring the saved disk: the module loads at boot, it is DKMS's build
#    for that kernel, udev permissions, users in and outside group rdma
#    (tests/vm/guest-provision.sh boot);
# 4. an OFED node: the real peer-memory core installed as DOCA-OFED leaves
#    it, the packages, DKMS against OFED, a VM boot with PeerDirect active.
#
# Writes TAP files into <outdir>: host.tap (steps, VM runs, kernel logs) and
# guest-provision.sh's. Exit 0 when everything passed.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=$1
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
tap=()
failed=0
case_() {	# case_ <0|1> <name> [# SKIP reason]
	if [ "$1" -eq 0 ]; then
		tap+=("ok $((${#tap[@]} + 1)) $2${3:+ $3}")
	else
		tap+=("not ok $((${#tap[@]} + 1)) $2")
		failed=$((failed + 1))
	fi
}
finish() {
	{
		echo "TAP version 13"
		echo "1..${#tap[@]}"
		printf '%s\n' "${tap[@]}"
	} > "$out/host.tap"
	[ "$failed" -eq 0 ]
	exit
}
kernel_of() {	# kernel_of <name>: "<kver> <root>" from kernels.sh list
	tests/vm/kernels.sh list 2> /dev/null | awk -v n="$1" '$1 == n {print $2, $3}'
}
# vm <name> <kver> <outdir> <args...>: one VM run of guest-provision.sh.
vm() {
	local name=$1 kver=$2 vout=$3 t0 rc
	shift 3
	t0=$(date +%s)
	tests/vm/run-vm.sh --quiet --timeout 600 "$kver" "$vout" -- \
		tests/vm/guest-provision.sh "$@"
	rc=$?
	echo "provision $name ($kver): VM run took $(( $(date +%s) - t0 )) s (exit $rc)" |
		tee -a "$out/timing.txt"
	case $rc in
	124 | 125) case_ 1 "${name}_vm_run" ;;	# timeout, crash: see console.log
	*) case_ 0 "${name}_vm_run" ;;
	esac
	if grep -hE 'BUG:|WARNING:|Oops|KASAN|UBSAN|general protection|Call Trace' \
		"$vout/console.log" "$vout/dmesg.txt" > "$vout/kernel-complaints.txt" 2> /dev/null; then
		case_ 1 "${name}_kernel_log_clean"
	else
		case_ 0 "${name}_kernel_log_clean"
	fi
	cp "$vout"/provision-*.tap "$out/" 2> /dev/null
}

read -r k1 r1 <<< "$(kernel_of 6.12)"
read -r k2 r2 <<< "$(kernel_of 6.1)"
if [ -z "${k1:-}" ] || [ -z "${k2:-}" ]; then
	case_ 1 "kernels_6.12_and_6.1_available"
	finish
fi

t0=$(date +%s)
# The packages the host checks built (tests/host/lintian-check.sh) from this
# very tree are used as they are: build/deb/tree.sha256 is the Makefile's
# hash of the files they were built from, computed here the same way.
tree_sha=$(git ls-files -z --cached --others --exclude-standard 2> /dev/null |
	xargs -0r sha256sum 2> /dev/null | sha256sum | cut -c1-32)
if [ -f build/deb/tree.sha256 ] && [ "$(cat build/deb/tree.sha256)" = "$tree_sha" ] &&
	ls build/deb/strixpeer-dkms_*_all.deb > /dev/null 2>&1; then
	echo "provision: the packages in build/deb were built from this tree ($tree_sha): used as they are" |
		tee "$out/make-deb.log"
	case_ 0 "make_deb"
elif make -s deb > "$out/make-deb.log" 2>&1; then
	case_ 0 "make_deb"
else
	case_ 1 "make_deb"
	tail -n 20 "$out/make-deb.log"
	finish
fi
echo "provision: make deb took $(( $(date +%s) - t0 )) s" | tee -a "$out/timing.txt"

# sid's dkms (>= 3.0.11) for the unsupported-kernel cases: downloaded, only
# ever unpacked in the node.
repo=$PWD
cache=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
dd=$cache/debs/sid-dkms
mkdir -p "$dd"
if tests/vm/apt-sid.sh update > "$out/sid-dkms.log" 2>&1; then
	v=$(tests/vm/apt-sid.sh cache show --no-all-versions dkms 2> /dev/null | sed -n 's/^Version: //p')
	if [ -n "$v" ] && ! ls "$dd"/dkms_"${v/*:/}"_all.deb > /dev/null 2>&1; then
		rm -f "$dd"/*.deb
		(cd "$dd" && "$repo/tests/vm/apt-sid.sh" download dkms) >> "$out/sid-dkms.log" 2>&1
	fi
fi
dkms_deb=$(ls "$dd"/dkms_*_all.deb 2> /dev/null | tail -n 1)

t0=$(date +%s)
tests/vm/node-root.sh "$out/node" "$PWD/build/deb" "$k1" "$r1" "$k2" "$r2" \
	${dkms_deb:+"$dkms_deb"} > "$out/node-root.log" 2>&1
echo "provision: packages and DKMS on the node took $(( $(date +%s) - t0 )) s" | tee -a "$out/timing.txt"
cp "$out/node"/provision-*.tap "$out/" 2> /dev/null
[ -f "$out/node/provision-node-install.tap" ] && [ -f "$out/node/provision-node-remove.tap" ]
case_ $? "node_packages_and_dkms_ran"	# see node-root.log

if [ -f "$out/node/state-root.tar" ]; then
	vm boot-6.12 "$k1" "$out/vm-boot-$k1" boot "$out/node"
	vm boot-6.1-after-kernel-update "$k2" "$out/vm-boot-$k2" boot "$out/node"
else
	case_ 1 "node_state_saved"
fi

# 4. An OFED node on 6.12: the real peer-memory core (OFED 25.10's core on
#    Debian's RDMA stack: ../shared/peermem's prebuilt modules for this
#    kernel, or build.sh's for it, as tests/vm/build-realcore.sh has them)
#    installed as DOCA-OFED installs its own, then the packages; DKMS links
#    strixpeer against it and the VM boots it with PeerDirect.
core=$(tests/vm/build-realcore.sh --fixture "$k1" 2> "$out/ofed-core.log") ||
	core="unsupported: build-realcore.sh --fixture $k1 failed, see $out/ofed-core.log"
if [ -f "$core/ib_uverbs.ko" ]; then
	rm -rf "$out/ofed-core"
	mkdir -p "$out/ofed-core"
	cp "$core"/*.ko "$core/Module.symvers" "$out/ofed-core/"
	t0=$(date +%s)
	SP_NODE_OFED=$out/ofed-core tests/vm/node-root.sh "$out/node-ofed" "$PWD/build/deb" \
		"$k1" "$r1" "$k2" "$r2" > "$out/node-ofed.log" 2>&1
	echo "provision: the OFED node took $(( $(date +%s) - t0 )) s" | tee -a "$out/timing.txt"
	cp "$out/node-ofed"/provision-*.tap "$out/" 2> /dev/null
	[ -f "$out/node-ofed/provision-ofed-install.tap" ] && [ -f "$out/node-ofed/state-root.tar" ]
	case_ $? "ofed_node_packages_and_dkms_ran"	# see node-ofed.log
	[ -f "$out/node-ofed/state-root.tar" ] &&
		vm boot-ofed-6.12 "$k1" "$out/vm-boot-ofed-$k1" boot-ofed "$out/node-ofed"
else
	case_ 0 "ofed_node" "# SKIP no peer-memory core for $k1: ${core#unsupported: }"
fi
finish
