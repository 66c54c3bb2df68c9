#!/bin/bash
# Runs the fuzzer (build/tests/fuzz, from tests/fuzz/*.c) inside the test VM,
# as root, once per seed; prints TAP, one case per seed.
#
#   SP_FUZZ_SEEDS    seeds, "random" for a fresh one (default: "0x5eed 0x1",
#                    the fixed seeds make check runs)
#   SP_FUZZ_SECONDS  seconds of fuzzing per seed (default 45)
#   SP_FUZZ_PHASES   phases (default: the fuzzer's, root,user,fault-root,fault-user)
#   SP_FUZZ_KMEMLEAK 1: the fuzzer scans with kmemleak before and after (about
#                    a minute on the debug kernel under TCG); default 0: the
#                    suite's own scan at its end (guest-suite.sh) covers the run
#
# The fuzzer's output goes to $SP_OUT/fuzz-<seed>.log and, as TAP comments,
# its summary (calls per category, reports with their replay commands).
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
out=${SP_OUT:-/tmp}
seeds=${SP_FUZZ_SEEDS:-0x5eed 0x1}
secs=${SP_FUZZ_SECONDS:-45}
bin=build/tests/fuzz
read -r -a list <<< "$seeds"
echo "TAP version 13"
echo "1..${#list[@]}"
if [ ! -x "$bin" ]; then
	for i in "${!list[@]}"; do
		echo "not ok $((i + 1)) fuzz_${list[$i]} # $bin not built (make user)"
	done
	exit 1
fi
rc=0
n=0
for seed in "${list[@]}"; do
	n=$((n + 1))
	if [ "$seed" = random ]; then
		seed=$(printf '%#x' "$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')")
	fi
	log=$out/fuzz-$seed.log
	[ ! -e "$log" ] || log=$out/fuzz-$seed-$n.log	# a seed run twice keeps both logs
	args=(--seed "$seed" --seconds "$secs")
	[ -z "${SP_FUZZ_PHASES:-}" ] || args+=(--phases "$SP_FUZZ_PHASES")
	[ "${SP_FUZZ_KMEMLEAK:-0}" = 1 ] || args+=(--no-kmemleak)
	t0=$(date +%s)
	"$bin" "${args[@]}" > "$log" 2>&1
	r=$?
	took=$(( $(date +%s) - t0 ))
	grep -E '^fuzz: (seed|phase .*:.* ops|summary|calls|reports|report|  *replay|.*left out|.*not used|.*warnings|unprivileged|kmemleak scan|seconds spent|succeeded|ioctls answered|.*exporters absent|.*force_sigsegv.*)' "$log" |
		sed 's/^/# /'
	# The guest must still start programs: a case whose run broke the
	# guest's root filesystem (every later exec failing) is no pass.
	if ! broken=$(env true 2>&1) || ! broken=$(sed -n 1p /etc/os-release 2>&1 > /dev/null); then
		echo "not ok $n fuzz_seed_${seed}_${secs}s # the guest cannot start programs after the run: ${broken:-env true failed}; kernel: $(dmesg 2>/dev/null | grep -E 'overlayfs|9p' | tail -n 1)"
		rc=1
		continue
	fi
	case $r in
	0) echo "ok $n fuzz_seed_${seed}_${secs}s # ${took} s" ;;
	4) echo "ok $n fuzz_seed_${seed}_${secs}s # SKIP $(tail -n 1 "$log")" ;;
	*)	# the first report on the case's line: a summary that shows only
		# failing lines still says what was found
		first=$(grep -m 1 '^fuzz: report 1:' "$log" | cut -c 1-300)
		echo "not ok $n fuzz_seed_${seed}_${secs}s # exit $r after ${took} s: ${first:-$(tail -n 1 "$log" | cut -c 1-300)}; see $log"
		if [ $r -ge 126 ] && [ $r -le 127 ]; then
			# the shell could not start it: say what it saw of the
			# program and of where its log goes
			{ ls -l "$bin"; ls -ld "$out"; wc -c "$log"; df -h "$out" .; } 2>&1 | sed 's/^/# /'
		fi
		rc=1 ;;
	esac
done
exit $rc
