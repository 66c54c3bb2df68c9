#!/bin/bash
# Compares tests/vm/guest-suite.sh's plan with what a finished 'make check'
# ran: for each kernel of <check dir> (a build/check/ with vm-<name>/
# timing.txt, one line per program run, in order), the rows --plan says
# run on that kernel (with <kmod dir>/<kver>'s builds deciding the stages
# built for some kernels only) against the programs the run timed. Prints
# the differences per kernel: "-name" ran then and is not planned, "+name"
# planned and did not run; the order is compared too, and the run's VM
# time less the seconds of the programs no longer planned (an estimate of
# the plan's VM time: the programs' own time, not a narrowed row's). Exit
# 0 when the plan is the run for every kernel.
#
#   tests/vm/plan-diff.sh <check dir> [<kmod dir>]   (default: <check dir>/../kmod)
set -u
cd "$(dirname "$0")/../.." || exit 1
check=${1:?usage: plan-diff.sh <build/check dir> [<build/kmod dir>]}
kmod=${2:-$check/../kmod}
rc=0
n=0
for t in "$check"/vm-*/timing.txt; do
	[ -e "$t" ] || continue
	name=$(basename "$(dirname "$t")")
	name=${name#vm-}
	# the kernel's version: its build directory in <kmod dir>
	kver=
	for d in "$kmod"/*/; do
		k=$(basename "$d")
		case $name:$k in
		debug-*:*) [ "debug-$k" = "$name" ] && kver=$k ;;
		6.1:6.1.*) kver=$k ;;
		6.12:6.12.*) [[ $k == *spdebug* ]] || kver=$k ;;
		sid:6.* | sid:*spdebug*) ;;
		sid:*) kver=$k ;;
		esac
	done
	if [ -z "$kver" ]; then
		echo "plan-diff: $name: no build directory for it in $kmod" >&2
		rc=1
		continue
	fi
	n=$((n + 1))
	old=$(sed -n 's/^\([^:]*\): exit .*/\1/p' "$t")
	new=$(tests/vm/guest-suite.sh --plan "$kver" "$kmod/$kver/strixpeer.ko" | awk '$1 == "run" { print $2 }')
	if [ "$old" = "$new" ]; then
		echo "$name ($kver): the plan is the run: $(echo "$new" | wc -l) programs, same order"
		continue
	fi
	rc=1
	d=$(diff <(sort <<< "$old") <(sort <<< "$new") | sed -n 's/^< /-/p; s/^> /+/p' | tr '\n' ' ')
	vm=$(sed -n "s/^$name: VM run took \([0-9]*\) s.*/\1/p" "$check/timing.txt" 2> /dev/null)
	gone=$(comm -23 <(sort <<< "$old") <(sort <<< "$new") |
		while read -r p; do sed -n "s/^$p: exit [0-9]*, \([0-9]*\) s$/\1/p" "$t"; done |
		awk '{ s += $1 } END { print s + 0 }')
	[ -z "$vm" ] || d="$d(VM run $vm s, without these about $((vm - gone)) s)"
	if [ -z "$(comm -3 <(sort <<< "$old") <(sort <<< "$new"))" ]; then
		echo "$name ($kver): the same $(echo "$new" | wc -l) programs, in another order:"
		diff <(echo "$old") <(echo "$new") | sed 's/^/  /'
	else
		echo "$name ($kver): $d"
	fi
done
[ "$n" -gt 0 ] || { echo "plan-diff: no vm-*/timing.txt in $check" >&2; exit 2; }
exit $rc
