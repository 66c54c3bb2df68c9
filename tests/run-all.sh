#!/bin/bash
# The whole test suite ('make check'): host-side checks, then one VM boot
# per kernel (Debian 6.1, Debian 6.12, Debian sid's newest, and every debug
# kernel found in ../shared/kernels/) running every TAP program inside, then
# node provisioning (Debian packages, DKMS, a kernel update; two VM boots,
# tests/vm/provision.sh). Ends with one line "N passed, N failed, N skipped"
# and exits non-zero on any failure.
#
# Environment: SP_KERNELS="6.1 6.12 ..." limits the kernels (names as
# 'tests/vm/kernels.sh list' prints them; SP_KERNELS=none: no VM, which is
# make check-host); SP_TESTS="abi rdma_rxe" limits
# the programs run in the VM to those rows of tests/vm/suite.tab; SP_PROVISION=0 leaves out provisioning;
# SP_VM_JOBS (default 2) is how many kernels and provisioning run at once.
set -u
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
out=$repo/build/check
rm -rf "$out"
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
start_all=$(date +%s)

pass=0 fail=0 skip=0
record() {	# record <ok|fail|skip> <name> [reason]
	local line
	case $1 in
	ok) pass=$((pass + 1)); line="ok      $2" ;;
	fail) fail=$((fail + 1)); line="FAIL    $2${3:+: $3}" ;;
	skip) skip=$((skip + 1)); line="skip    $2: $3" ;;
	esac
	echo "$line" | tee -a "$summary"
}

# TAP file -> records; a program that stopped early counts as a failure.
record_tap() {	# record_tap <prefix> <file>
	local prefix=$1 file=$2 planned seen=0 line name
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$file" | head -n 1)
	while IFS= read -r line; do
		case $line in
		"not ok "*)
			name=${line#not ok }; name=${name#* }
			record fail "$prefix/$name"; seen=$((seen + 1)) ;;
		"ok "*"# SKIP"*)
			name=${line#ok }; name=${name#* }
			record skip "$prefix/${name%% # SKIP*}" "${name#* # SKIP }"; seen=$((seen + 1)) ;;
		"ok "*)
			name=${line#ok }; name=${name#* }
			record ok "$prefix/$name"; seen=$((seen + 1)) ;;
		esac
	done < "$file"
	# A whole program that skips ("1..0 # SKIP reason": a tool, a download,
	# a build it needs) skips for what this machine lacks, and make check
	# installs, fetches and builds all of that itself: a failure, with the
	# reason. Skips are single cases, for what the kernel under test lacks.
	line=$(sed -n 's/^1\.\.0 *# *SKIP *//p' "$file" | head -n 1)
	if [ -z "$planned" ] && [ "$seen" = 0 ] && [ -n "$line" ]; then
		record fail "$prefix" "skipped as a whole: $line"
		return
	fi
	if [ -z "$planned" ] || [ "$seen" -lt "$planned" ]; then
		# its last words, so that CI's summary says why (a program that
		# could not start leaves only its shell's or timeout's message)
		line=$(grep -v '^[[:space:]]*$' "$file" 2> /dev/null | tail -n 1 | cut -c 1-200)
		record fail "$prefix" "stopped after $seen of ${planned:-?} cases (see $file; $(wc -c < "$file" 2> /dev/null || echo no) bytes, last line: ${line:-none})"
	fi
}

# host_tap <name> <command...>: one host check's TAP into $out/<name>.tap,
# recorded as host/<name>, its time in timing.txt (where a run's time went;
# "restored from the cache" when tests/lib/host-cache.sh restored it)
host_tap() {
	local name=$1 t0
	shift
	t0=$(date +%s)
	"$@" > "$out/$name.tap" 2>&1
	echo "host/$name: $(( $(date +%s) - t0 )) s$(grep -q '^# restored from ' "$out/$name.tap" &&
		echo ' (restored from the cache: same inputs)')" >> "$out/timing.txt"
	record_tap "host/$name" "$out/$name.tap"
}

echo "== host checks"
t0=$(date +%s)
if make -s user > "$out/build-user.log" 2>&1; then
	record ok "host/build_userspace_Werror"
else
	record fail "host/build_userspace_Werror" "see $out/build-user.log"
	tail -n 20 "$out/build-user.log"
fi

# The VM runs some programs as nobody from the checkout, which it binds at a
# neutral path (tests/vm/run-vm.sh): whatever lies above the checkout (a
# clone in root's 0700 home), its own directories and built programs must
# be readable by other users. Said here, before any VM, rather than as
# failures deep in the guest's logs.
unreachable=$(find . build build/tests -maxdepth 0 ! -perm -o=x -print 2> /dev/null
	find build/strixpeerctl build/libstrixpeer.so* build/tests -maxdepth 1 -type f \
		-perm -u=x ! -perm -o=rx -print 2> /dev/null)
if [ -z "$unreachable" ]; then
	record ok "host/checkout_reachable_by_other_users"
else
	record fail "host/checkout_reachable_by_other_users" \
		"not readable by other users (umask $(umask)?): $(echo "$unreachable" | head -n 3 | tr '\n' ' ')- chmod -R o+rX the checkout"
fi

# The examples (UCX, Open MPI, rdma_cm; the VM's engine tests run them),
# and checkpatch on the amdkfd stand-in the VM builds (tests/kmod/amdkfd_stub).
if make -s examples > "$out/build-examples.log" 2>&1 &&
	! grep -q 'left out' "$out/build-examples.log"; then
	record ok "host/build_examples_Werror"
else
	record fail "host/build_examples_Werror" "see $out/build-examples.log"
	tail -n 20 "$out/build-examples.log"
fi
echo "host/build user, examples: $(( $(date +%s) - t0 )) s" >> "$out/timing.txt"
# promtool checks strixpeerctl's Prometheus output inside the VM.
SP_PROMTOOL=$(tests/host/fetch-promtool.sh) || SP_PROMTOOL=
export SP_PROMTOOL

echo "== kernels"
t0=$(date +%s)
if ! tests/vm/kernels.sh fetch > "$out/kernels.log" 2>&1; then
	record fail "host/fetch_kernels" "see $out/kernels.log"
	tail -n 20 "$out/kernels.log"
fi
mapfile -t kernels < <(tests/vm/kernels.sh list 2> /dev/null)

[ ${#kernels[@]} -gt 0 ] || record fail "host/kernels_available" "tests/vm/kernels.sh list is empty"

echo "host/kernels fetched: $(( $(date +%s) - t0 )) s" >> "$out/timing.txt"

want=${SP_KERNELS:-}
# SP_TESTS names rows of tests/vm/suite.tab: a name no row has fails here,
# before any VM boots, with the names there are.
# shellcheck disable=SC2086 # SP_TESTS: a list of words
if [ -n "${SP_TESTS:-}" ] && ! tests/vm/guest-suite.sh --plan 6.12 /nonexistent/strixpeer.ko $SP_TESTS \
	> /dev/null 2> "$out/sp-tests.log"; then
	record fail "host/SP_TESTS_names_rows_of_the_suite_table" "$(tr '\n' ' ' < "$out/sp-tests.log")"
	want=none
fi
# One job per kernel (build the modules with W=1, boot, run the suite) and
# one for provisioning, SP_VM_JOBS (default 2) at a time: each VM is
# single-threaded TCG, so two keep both cores of a 2-core machine busy.
# The first job (a debug kernel: the longest) starts now, beside the rest of
# the host checks, which keep the other core busy; the others start once the
# host checks are done. Results are recorded in a fixed order once every
# job has finished. The host checks below must not rebuild anything in
# build/ that the VM runs (it reads the checkout live): everything it runs
# was built above.
jobs=()
for k in "${kernels[@]}"; do
	read -r name _ <<< "$k"
	if [ -n "$want" ] && ! [[ " $want " == *" $name "* ]]; then
		continue
	fi
	case $name in debug-*) jobs=("$k" "${jobs[@]}") ;; *) jobs+=("$k") ;; esac
done
[ "${SP_PROVISION:-1}" = 0 ] || jobs+=("provision")
# Longest first after the debug kernels, so that the two lanes end
# together: the debug kernel's lane runs beside the host checks, the other
# lane's kernels after them (estimated from the programs' times of a warm
# run under load, tests/vm/plan-diff.sh: debug 19.5 min, 6.12 9.5, sid
# 5.4, 6.1 3.9, provisioning 3.6). Test programs that leave the shortest
# lane go to 6.1 (tests/vm/suite.tab's kernels column).
ordered=()
for w in 'debug-*' 6.12 sid 6.1 provision '*'; do
	for j in "${jobs[@]}"; do
		# shellcheck disable=SC2053 # $w is a pattern
		[[ ${j%% *} == $w ]] || continue
		[[ " ${ordered[*]-} " == *" ${j%% *} "* ]] && continue
		ordered+=("$j")
	done
done
jobs=("${ordered[@]}")

kernel_job() {	# kernel_job <name> <kver>: build, boot, test; leaves $vout/job-rc
	local name=$1 kver=$2 bdir=$repo/build/kmod/$2 vout=$out/vm-$1 t0 vrc
	mkdir -p "$vout"
	t0=$(date +%s)
	# strixpeer without and with the peer-memory API, sp_peersim, sp_gpusim
	if ! tests/vm/build-module.sh "$kver" W=1 > "$vout/build.txt" 2>&1 ||
		grep -q 'warning:' "$bdir/build.log" "$bdir/peersim/build.log" \
			"$bdir/pd/build.log"; then
		echo build > "$vout/job-rc"
		return
	fi
	echo "$name: module builds took $(( $(date +%s) - t0 )) s$(grep -q '^build-module.sh: restored' "$vout/build.txt" &&
		echo ' (restored from the cache: same inputs)')" > "$vout/build-time.txt"
	# the module's file graph, here in the lane rather than after every job
	/usr/bin/python3 tests/host/file-graph.py kmod "$bdir" > "$vout/file-graph.txt" 2>&1
	echo $? > "$vout/file-graph-rc"
	t0=$(date +%s)
	# the bound on a VM that hangs: the debug kernel's run is the longest
	# and went past 2400 s with four VMs sharing two cores
	local vmt=2400
	case $name in debug-*) vmt=4200 ;; esac
	# shellcheck disable=SC2086 # SP_TESTS: a list of words
	tests/vm/run-vm.sh --quiet --timeout "$vmt" "$kver" "$vout" -- \
		tests/vm/guest-suite.sh "$bdir/strixpeer.ko" ${SP_TESTS:-} > "$vout/run-vm.txt" 2>&1
	vrc=$?
	echo "$name: VM run took $(( $(date +%s) - t0 )) s (exit $vrc)" > "$vout/vm-time.txt"
	echo "$vrc" > "$vout/job-rc"
}

provision_job() {
	local t0
	t0=$(date +%s)
	tests/vm/provision.sh "$out/provision" > "$out/provision.txt" 2>&1
	echo "provision: $(( $(date +%s) - t0 )) s in all" > "$out/provision-time.txt"
}

start_job() {	# start_job <job>: in the background
	local name kver
	if [ "$1" = provision ]; then
		provision_job &
	else
		read -r name kver _ <<< "$1"
		kernel_job "$name" "$kver" &
	fi
}

echo "== kernels and provisioning, ${SP_VM_JOBS:-2} at a time once the host checks are done: $(for j in "${jobs[@]}"; do printf '%s ' "${j%% *}"; done)"
running=0
first=0
# Provisioning never starts beside the host checks: it uses the packages
# tests/host/lintian-check.sh builds in build/deb.
# The amdkfd stand-in for the engine tests' kernels (tests/guest/engines-guest.sh:
# SP_ENGINES_KERNELS), built here in seconds rather than in the VM, before
# that kernel's VM starts.
build_stub() {	# build_stub <kernels.sh list line>
	local name kver
	read -r name kver _ <<< "$1"
	[[ " ${SP_ENGINES_KERNELS:-6.12 sid} " == *" $name "* ]] || return 0
	[ -z "${SP_KERNELS:-}" ] || [[ " $SP_KERNELS " == *" $name "* ]] || return 0
	if tests/host/build-amdkfd-stub.sh "$kver" > "$out/amdkfd-stub-$name.log" 2>&1; then
		record ok "$name/build_amdkfd_stub_W=1_no_warnings"
	else
		record fail "$name/build_amdkfd_stub_W=1_no_warnings" "see $out/amdkfd-stub-$name.log"
	fi
}
if [ ${#jobs[@]} -gt 0 ] && [ "${jobs[0]}" != provision ]; then
	echo "== ${jobs[0]%% *} starts beside the host checks"
	build_stub "${jobs[0]}"
	start_job "${jobs[0]}"
	running=1
	first=1
fi

echo "== host checks, continued"
# The amdkfd stand-ins of the kernels not yet running (after the first VM
# started: the debug kernel runs no engine test)
t0=$(date +%s)
for k in "${kernels[@]}"; do
	[ "$first" = 1 ] && [ "${k%% *}" = "${jobs[0]%% *}" ] && continue
	build_stub "$k"
done
echo "host/amdkfd stand-ins built: $(( $(date +%s) - t0 )) s" >> "$out/timing.txt"
if [ -f ../shared/tools/checkpatch/checkpatch.pl ]; then
	if perl ../shared/tools/checkpatch/checkpatch.pl --no-tree --terse -q -f \
		tests/kmod/amdkfd_stub/*.c > "$out/checkpatch-amdkfd-stub.log" 2>&1; then
		record ok "host/checkpatch_amdkfd_stub"
	else
		record fail "host/checkpatch_amdkfd_stub" "see $out/checkpatch-amdkfd-stub.log"
	fi
fi

checkpatch=../shared/tools/checkpatch/checkpatch.pl
if [ -f "$checkpatch" ]; then
	if perl "$checkpatch" --no-tree --terse -q -f kmod/*.c kmod/*.h include/uapi/*.h \
		tests/kmod/*.c tests/kmod/*.h \
		> "$out/checkpatch.log" 2>&1; then
		record ok "host/checkpatch_clean"
	else
		record fail "host/checkpatch_clean" "$(grep -cE 'ERROR|WARNING' "$out/checkpatch.log") findings in $out/checkpatch.log"
		head -n 20 "$out/checkpatch.log"
	fi
else
	record skip "host/checkpatch_clean" "no checkpatch.pl at $checkpatch"
fi

# The netlink spec, the uapi header and the module's policies agree.
host_tap spec-check /usr/bin/python3 tests/host/spec-check.py
# The kernel's YNL generator (Debian's linux-source-6.12, cached) makes the
# checked-in include/uapi/strixpeer_nl.h from the spec, and its request
# policies are the module's.
host_tap ynl-gen tests/host/ynl-gen.sh --check

# No file circle in user space and no file over 700 lines (each program's
# objects read with nm; the module's per kernel below).
if /usr/bin/python3 tests/host/file-graph.py user > "$out/file-graph-user.txt" 2>&1; then
	record ok "host/user_file_graph_has_no_circle"
else
	record fail "host/user_file_graph_has_no_circle" "$(grep -v 'no circle' "$out/file-graph-user.txt" | head -n 1)"
fi

# dkms.conf, debian/ and the bash completion agree with the tree.
host_tap packaging-check tests/host/packaging-check.sh

# strixpeerctl doctor against generated fixture trees (tests/doctor/).
host_tap doctor build/tests/doctor-test "$out/doctor-fixtures"
# strixpeerctl bench's SVG plot: paths a shell would need to quote, no gnuplot.
rm -rf "$out/bench-plot"
host_tap bench-plot build/tests/bench-plot-test "$out/bench-plot"
# strixpeerctl's command line; make install/uninstall and README's build
# commands; lintian on the source and binary packages.
host_tap cli-host tests/host/cli-host.sh
# a program built against the 1.0 header runs against today's library
host_tap abi-compat tests/host/abi-compat.sh
host_tap install-check tests/host/install-check.sh
host_tap lintian-check tests/host/lintian-check.sh
# The HIP examples against sid's ROCm headers (compiled, not run).
host_tap hip-examples-check tests/host/hip-examples-check.sh
# strixpeerctl gpu without ROCm: usage, absent and too old runtimes, and
# user/gpu/hiprt.h against the ROCm headers hip-examples-check fetched.
host_tap gpu-host tests/host/gpu-host.sh
# The RPMs for Fedora: rpmbuild, rpmlint, file lists against the debs.
host_tap rpm-check tests/host/rpm-check.sh
host_tap systemd-check tests/host/systemd-check.sh
tests/host/core-claims-check.sh > "$out/core-claims-check.tap" 2>/dev/null
record_tap "host/core-claims-check" "$out/core-claims-check.tap"
# kernels.sh on a cache two checkouts share (fake packages, no download).
host_tap kernels-cache-check tests/host/kernels-cache-check.sh

# Where the PeerDirect build finds OFED's symbols (6.12's headers).
host_tap kbuild-ofed-check tests/host/kbuild-ofed-check.sh
# The feature probes ignore the build's -Werror (every VM kernel's headers).
host_tap conftest-check tests/host/conftest-check.sh

for j in "${jobs[@]:$first}"; do
	if [ "$running" -ge "${SP_VM_JOBS:-2}" ]; then
		wait -n
		running=$((running - 1))
	fi
	start_job "$j"
	running=$((running + 1))
done
wait
echo "== every VM job done: $(( $(date +%s) - start_all )) s"

for j in "${jobs[@]}"; do
	[ "$j" = provision ] && continue
	read -r name kver _ <<< "$j"
	vout=$out/vm-$name
	bdir=$repo/build/kmod/$kver
	echo "== kernel $name ($kver)"
	vrc=$(cat "$vout/job-rc" 2> /dev/null || echo none)
	if [ "$vrc" = build ]; then
		logs=("$bdir/build.log" "$bdir/peersim/build.log" "$bdir/pd/build.log")
		record fail "$name/build_module_W=1_no_warnings" "see ${logs[*]}"
		grep -hE 'warning:|error:' "${logs[@]}" "$vout/build.txt" 2> /dev/null | head -n 20
		continue
	fi
	record ok "$name/build_module_W=1_no_warnings"
	if [ "$(cat "$vout/file-graph-rc" 2> /dev/null)" = 0 ]; then
		record ok "$name/kmod_file_graph_has_no_circle"
	else
		record fail "$name/kmod_file_graph_has_no_circle" "$(grep -v 'no circle' "$vout/file-graph.txt" | head -n 1)"
	fi
	cat "$vout/build-time.txt" "$vout/vm-time.txt" >> "$out/timing.txt" 2> /dev/null
	case $vrc in
	124) record fail "$name/vm_run" "timed out (see $vout/console.log)" ;;
	125) record fail "$name/vm_run" "guest crashed or gave no result (see $vout/console.log)" ;;
	none) record fail "$name/vm_run" "the job left no result (see $vout)" ;;
	*) record ok "$name/vm_run" ;;
	esac
	for tap in "$vout"/*.tap; do
		[ -e "$tap" ] || continue
		record_tap "$name/$(basename "$tap" .tap)" "$tap"
	done
	# Any kernel complaint fails the run (tests/vm/kernel-complaints.sh).
	if tests/vm/kernel-complaints.sh "$vout/console.log" "$vout/dmesg.txt" \
		> "$vout/kernel-complaints.txt"; then
		record fail "$name/kernel_log_clean" "$(head -n 1 "$vout/kernel-complaints.txt")"
	else
		record ok "$name/kernel_log_clean"
	fi
done

# Node provisioning: packages, DKMS, udev, a kernel update and a reboot.
if [ "${SP_PROVISION:-1}" = 0 ]; then
	record skip "provision" "SP_PROVISION=0"
else
	echo "== provisioning (Debian packages, DKMS, kernel update)"
	cat "$out/provision-time.txt" >> "$out/timing.txt" 2> /dev/null
	for tap in "$out/provision"/*.tap; do
		[ -e "$tap" ] || continue
		record_tap "provision/$(basename "$tap" .tap)" "$tap"
	done
fi

echo "== $(( $(date +%s) - start_all )) s in all; details in $out"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
