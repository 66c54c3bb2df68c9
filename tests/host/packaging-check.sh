#!/bin/bash
# Host-side checks of the DKMS and Debian packaging (run by tests/run-all.sh
# after 'make user'). Prints TAP.
#
# - dkms.conf names the module Kbuild builds; its kernel regex takes the
#   matrix's kernels and refuses older ones; every kernel in the matrix has
#   the options BUILD_EXCLUSIVE_CONFIG requires (else DKMS would skip it);
# - debian/changelog's version is VERSION's;
# - the modprobe.d file and strixpeer(4) document every module parameter,
#   strixpeer(4) every ioctl; every man page is installed by make install
#   and shipped by a Debian package and an RPM;
# - the bash completion offers every object 'strixpeerctl help' lists, and
#   completes commands, keys and values;
# - the VM suite's table (tests/vm/suite.tab) has a row for every guest
#   program, names only programs that exist, and parses.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh

# --- dkms.conf ----------------------------------------------------------------
conf=$(
	# shellcheck disable=SC2034 # variables dkms.conf may refer to
	kernelver=x kernel_source_dir=x dkms_tree=x
	# shellcheck disable=SC1091
	. ./dkms.conf
	printf '%s\n' "$PACKAGE_NAME" "${BUILT_MODULE_NAME[0]}" "$BUILD_EXCLUSIVE_KERNEL" \
		"$BUILD_EXCLUSIVE_ARCH" "$BUILD_EXCLUSIVE_CONFIG" "$AUTOINSTALL"
)
mapfile -t c <<< "$conf"
obj=$(sed -n 's/^obj-m *:= *\(.*\)\.o$/\1/p' Kbuild)
[ "${c[0]}" = strixpeer ] && [ "${c[1]}" = "$obj" ] && [ "${c[5]}" = yes ]
result $? "dkms_conf_names_the_Kbuild_module_and_autoinstalls" "PACKAGE_NAME=${c[0]} BUILT_MODULE_NAME=${c[1]} obj-m=$obj"

bad=""
for k in 6.1.0-57-amd64 6.1.140 6.9.1 6.12.117+deb12-amd64 6.12.117-spdebug 6.19.0-rc1 \
	7.2.13+deb14-amd64 10.0.1; do
	[[ $k =~ ${c[2]} ]] || bad="$bad accepts:$k"
done
for k in 6.0.19 5.15.0-91-generic 5.10.0-30-amd64 4.19.0-26-amd64 3.16.0; do
	[[ $k =~ ${c[2]} ]] && bad="$bad refuses:$k"
done
[ -z "$bad" ]
result $? "dkms_conf_kernel_regex_is_6.1_or_newer" "wrong:$bad"
[[ x86_64 =~ ${c[3]} ]]
result $? "dkms_conf_arch_takes_x86_64"

missing=""
kernels=$(tests/vm/kernels.sh list 2> /dev/null)
while read -r name kver root; do
	[ -n "$name" ] || continue
	cfg=$root/usr/src/linux-headers-$kver/.config
	[ -f "$cfg" ] || continue
	for o in ${c[4]}; do
		grep -q "^$o=[ym]" "$cfg" || missing="$missing $name:$o"
	done
done <<< "$kernels"
if [ -z "$kernels" ]; then
	skip matrix_kernels_have_the_required_options "no kernels fetched yet"
else
	[ -z "$missing" ]
	result $? "matrix_kernels_have_the_required_options" "missing:$missing"
fi

# --- Debian packaging ------------------------------------------------------------
dv=$(dpkg-parsechangelog -S Version 2> /dev/null || sed -n '1s/.*(\(.*\)).*/\1/p' debian/changelog)
[ "${dv%-*}" = "$(cat VERSION)" ]
result $? "debian_changelog_version_is_VERSION" "changelog $dv, VERSION $(cat VERSION)"

# module_param, _named, _cb and _string: every way kmod/ declares one
params=$(sed -n 's/^module_param\(_named\|_cb\|_string\)\{0,1\}(\([a-z_0-9]*\),.*/\2/p' kmod/*.c | sort -u)
undoc=""
for p in $params; do
	grep -q "^#options strixpeer $p=" debian/strixpeer-dkms.strixpeer.modprobe || undoc="$undoc $p"
done
[ -n "$params" ] && [ -z "$undoc" ]
result $? "modprobe_d_documents_every_parameter" "undocumented:$undoc"

# --- man pages ------------------------------------------------------------------
# strixpeer(4) has an entry (a .TP tag) for every module parameter and a
# section for every ioctl of the uapi header.
undoc=""
for p in $params; do
	grep -q "^\.BR $p \" (" docs/man/strixpeer.4 || undoc="$undoc $p"
done
ioctls=$(sed -n 's/^#define \(STRIXPEER_IOC_[A-Z_]*\)[[:space:]]*_IO.*/\1/p' include/uapi/strixpeer.h)
for i in $ioctls; do
	grep -q "^\.SS $i\( \|$\)" docs/man/strixpeer.4 || undoc="$undoc $i"
done
[ -n "$ioctls" ] && [ -z "$undoc" ]
result $? "strixpeer_4_documents_every_parameter_and_ioctl" "undocumented:$undoc"

# Every page in docs/man/ is installed by make install (MAN3, MAN4, MAN7,
# MAN8) and shipped by a Debian package and an RPM: section 4 by
# strixpeer-dkms, 3 and 7 by libstrixpeer-dev/-devel, 8 by strixpeer-utils.
# (what make install-lib would run, asked once: each make -n reads the
# whole Makefile, seconds on a loaded machine)
miss=""
installs=$(make -s -n install-lib DESTDIR=/D PREFIX=/usr 2> /dev/null)
for f in docs/man/*.[3478]; do
	page=${f##*/}
	s=${page##*.}
	grep -q "install -m 0644 .*docs/man/$page.* /D/usr/share/man/man$s/" <<< "$installs" ||
		miss="$miss make:$page"
	case $s in
	3) grep -qx 'usr/share/man/man3/' debian/libstrixpeer-dev.install &&
		grep -qx '%{_mandir}/man3/\*' rpm/strixpeer.spec || miss="$miss pkg:$page" ;;
	7) grep -qx 'usr/share/man/man7/' debian/libstrixpeer-dev.install &&
		sed -n '/^%files -n libstrixpeer-devel/,/^%files/p' rpm/strixpeer.spec | grep -qx "%{_mandir}/man7/$page\*" ||
		miss="$miss pkg:$page" ;;
	4) grep -qx "$f" debian/strixpeer-dkms.manpages &&
		sed -n '/^%files dkms/,/^%files/p' rpm/strixpeer.spec | grep -qx "%{_mandir}/man4/$page\*" ||
		miss="$miss pkg:$page" ;;
	8) grep -qx 'usr/share/man/man8/' debian/strixpeer-utils.install &&
		sed -n '/^%files utils/,/^%changelog/p' rpm/strixpeer.spec | grep -qx '%{_mandir}/man8/\*' ||
		miss="$miss pkg:$page" ;;
	esac
done
[ -z "$miss" ]
result $? "every_man_page_installed_and_packaged" "missing:$miss"

# --- bash completion ----------------------------------------------------------------
comp() {	# comp <words...>: what completing the last word offers
	bash -c '. user/cli/strixpeerctl.bash-completion
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _strixpeerctl
		echo "${COMPREPLY[*]}"' comp strixpeerctl "$@"
}
objects=$(build/strixpeerctl help 2> /dev/null | sed -n '/^objects:/,$ s/^  \([a-z]\+\) .*/\1/p' | sort | tr '\n' ' ')
offered=$(comp '' | tr ' ' '\n' | sort | tr '\n' ' ')
[ -n "$objects" ] && [ "$objects" = "$offered" ]
result $? "completion_offers_every_object" "help lists '$objects', completion offers '$offered'"
want() {	# want <name> <expected> <words...>
	local name=$1 expected=$2 got
	shift 2
	got=$(comp "$@")
	[ "$got" = "$expected" ]
	result $? "completion_$name" "got '$got', want '$expected'"
}
want object_prefix "status stats" st
want option "--json" -j --j
want after_option "config" -j conf
want config_commands "show set" config ''
want config_keys "max_buf_size max_pinned_bytes" config set max
want config_value "yes no" config set require_huge ''
want stats_format "prometheus" stats -f p
want buf_pid "pid" buf show ''
want monitor_timestamp "-t" monitor ''
want nothing_after_monitor_t "" monitor -t ''
want option_timestamp "--timestamp" --t

# --- the VM suite's table (tests/vm/suite.tab) ---------------------------------
# Every guest program runs somewhere: a row of the table names it (its
# name with command '-', or build/tests/<prog> or build/asan/<prog> in its
# command), or a script names it that a row runs (tests/guest/*.sh,
# tests/doctor/guest.sh, tests/fuzz/*.sh), or make bench's and make demo's
# VM scripts (tests/vm/bench*.sh, tests/vm/guest-demo.sh) do. A program
# nobody names is built and never run.
tab=tests/vm/suite.tab
# name|command of each row, trimmed
rows=$(sed -e 's/[[:space:]]*|[[:space:]]*/|/g' -e 's/^[[:space:]]*//' "$tab" |
	awk -F'|' '!/^#/ && NF >= 6 { print $1 "|" $6 }')
tabprogs=$(while IFS='|' read -r rn c; do
	if [ "$c" = - ]; then
		echo "$rn"
	else
		for w in $c; do
			case $w in build/tests/* | build/asan/*) basename "$w" ;; esac
		done
	fi
done <<< "$rows" | sort -u)
unrun=
for src in tests/guest/*.c; do
	prog=$(basename "$src" .c)
	grep -qx -- "$prog" <<< "$tabprogs" && continue
	grep -qw -- "$prog" tests/guest/*.sh tests/doctor/guest.sh \
		tests/fuzz/*.sh tests/vm/bench*.sh tests/vm/guest-demo.sh 2> /dev/null || unrun="$unrun $prog"
done
[ -z "$unrun" ]
result $? "every_guest_program_has_a_row_in_the_suite_table" "built, never run (add a row to $tab):$unrun"

# Every row's command exists: build/tests/<prog> and build/asan/<prog> are
# built from tests/guest/<prog>.c (or a Makefile rule), a script is in the
# tree and executable.
missing=
while IFS='|' read -r rn c; do
	[ -n "$rn" ] || continue
	w=${c%% *}
	[ "$c" = - ] && w=build/tests/$rn
	case $w in
	build/tests/* | build/asan/*)
		p=$(basename "$w")
		[ -f "tests/guest/$p.c" ] || grep -q "^\$(B)/tests/$p:" Makefile ||
			missing="$missing $rn($w: no tests/guest/$p.c, no Makefile rule)" ;;
	*) [ -f "$w" ] && [ -x "$w" ] || missing="$missing $rn($w: not an executable file)" ;;
	esac
done <<< "$rows"
[ -n "$rows" ] && [ -z "$missing" ]
result $? "every_suite_table_row_names_a_program_that_exists" "rows naming what is not there:$missing"

# The table parses, its names are unique, and every kernel runs rows of
# the core stage (a smoke of the core paths on each).
dups=$(cut -d'|' -f1 <<< "$rows" | sort | uniq -d | tr '\n' ' ')
bad=
for k in 6.1.0-0-amd64 6.12.0-0-amd64 7.0.0-0-amd64 6.12.0-spdebug; do
	plan=$(tests/vm/guest-suite.sh --plan "$k" /nonexistent/strixpeer.ko 2>&1) || { bad="$bad $k: $plan"; continue; }
	grep -q '^run [^ ]* peersim-modern$' <<< "$plan" || bad="$bad $k: no peersim-modern row runs"
done
[ -z "$dups" ] && [ -z "$bad" ]
result $? "suite_table_parses_and_every_kernel_runs_the_core_stage" "duplicate names: ${dups:-none}; ${bad:-}"

finish
