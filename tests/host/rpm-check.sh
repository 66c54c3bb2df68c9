#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The RPMs (rpm/strixpeer.spec) as a Fedora node gets them (tests/run-all.sh):
# 'make rpm' builds the source RPM and six binary RPMs, rpmlint
# (rpm/rpmlint.toml: Fedora's stance on the tags that differ) finds no
# error, the file lists match the Debian packages' (build/deb/, made by
# tests/host/lintian-check.sh or here) package by package, the library goes to
# /usr/lib64 and the CLI needs no RUNPATH there, and the DKMS package's
# scriptlets add, build, install and remove the module. The library
# directory 'make install' picks by itself is checked for the three
# layouts (Debian multiarch, a real /usr/lib64, a /usr/lib64 link), and
# scripts/install-deps.sh's choice of package manager for Fedora and for
# a distribution it does not know (os-release fixtures, dry run).
# On this Debian host rpmbuild runs with --nodeps: the BuildRequires are
# Fedora's packages, which rpm's database here does not know. Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
echo "TAP version 13"
if ! command -v rpmbuild > /dev/null || ! command -v rpmlint > /dev/null; then
	echo "1..0 # SKIP rpmbuild or rpmlint not installed (scripts/install-deps.sh installs rpm and rpmlint)"
	exit 0
fi
echo "1..12"
out=build/rpm-check
rm -rf "$out"
mkdir -p "$out"
failed=0
n=0
t() {	# t <ok|not ok> <name> [comment...]: one TAP line
	n=$((n + 1))
	local r=$1 name=$2
	shift 2
	echo "$r $n $name${*:+ # $*}"
	[ "$r" = ok ] || failed=1
}
skip_rest() {
	while [ $n -lt 12 ]; do t "not ok" "rpm_step_$((n + 1))" "make rpm failed"; done
	exit 1
}

# 1. the packages
if make -s rpm RPM_FLAGS="--nodeps" > "$out/make-rpm.log" 2>&1; then
	t ok make_rpm_builds_source_and_binary_packages
else
	t "not ok" make_rpm_builds_source_and_binary_packages "see $out/make-rpm.log:"
	tail -n 20 "$out/make-rpm.log" | sed 's/^/# /'
	skip_rest
fi
v=$(cat VERSION)
miss=""
for p in SRPMS/strixpeer-$v-1.src RPMS/x86_64/strixpeer-$v-1.x86_64 \
	RPMS/noarch/strixpeer-dkms-$v-1.noarch RPMS/x86_64/libstrixpeer-$v-1.x86_64 \
	RPMS/x86_64/libstrixpeer-devel-$v-1.x86_64 RPMS/x86_64/libstrixpeer-static-$v-1.x86_64 \
	RPMS/x86_64/strixpeer-utils-$v-1.x86_64; do
	[ -f "build/rpm/$p.rpm" ] || miss="$miss $p.rpm"
done
if [ -z "$miss" ]; then
	t ok every_package_built_dkms_noarch
else
	t "not ok" every_package_built_dkms_noarch "missing:$miss; built: $(cd build/rpm && find . -name '*.rpm' | tr '\n' ' ')"
fi
R=build/rpm/RPMS

# 2. rpmlint
rpmlint -c rpm/rpmlint.toml $R/*/*.rpm build/rpm/SRPMS/*.rpm rpm/strixpeer.spec \
	> "$out/rpmlint.txt" 2>&1
rc=$?
errs=$(grep -c ': E: ' "$out/rpmlint.txt")
if [ $rc -eq 0 ] && [ "$errs" -eq 0 ]; then
	t ok rpmlint_no_errors "$(grep -c ': W: ' "$out/rpmlint.txt") warnings in $out/rpmlint.txt"
else
	t "not ok" rpmlint_no_errors "rpmlint exit $rc, $errs errors: $(grep ': E: ' "$out/rpmlint.txt" | head -n 3 | tr '\n' ';')"
fi
grep ': [EW]: ' "$out/rpmlint.txt" | grep -v -e devel-file-in-non-devel-package \
	-e manpage-not-compressed | sed 's/^/# /' | cut -c1-160 | head -n 20

# 3. file lists, package by package, against the debs
if ! ls build/deb/strixpeer-dkms_*_all.deb > /dev/null 2>&1; then
	make -s deb > "$out/make-deb.log" 2>&1 || true
fi
norm() {	# paths of regular files and links, in one spelling
	sed -e 's|^\./|/|' -e 's| -> .*||' \
		-e 's|^/usr/lib/x86_64-linux-gnu/|LIBDIR/|' -e 's|^/usr/lib64/|LIBDIR/|' \
		-e 's|^/lib/udev/|/usr/lib/udev/|' -e 's/\.gz$//' -e 's/\.bz2$//' |
		grep -v -e '^/usr/share/doc/' -e '^/usr/share/licenses/' -e '^/usr/lib/\.build-id' \
			-e '^/usr/share/lintian/' | sort -u
}
debfiles() {	# debfiles <deb>: non-directories
	dpkg-deb -c "$1" | awk '$1 !~ /^d/ { $1=$2=$3=$4=$5=""; sub(/^ +/, ""); print }' | norm
}
rpmfiles() {	# rpmfiles <rpm>...: non-directories
	local f
	for f in "$@"; do
		rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$f" 2> /dev/null
	done | awk '$1 !~ /^d/ { print $2 }' | norm
}
diffs=""
cmp_pkg() {	# cmp_pkg <deb name> <rpm name>...
	local deb=$1 d
	shift
	d=$(ls build/deb/${deb}_*.deb 2> /dev/null | head -n 1)
	if [ -z "$d" ]; then
		diffs="$diffs $deb(no .deb)"
		return
	fi
	local rpms=()
	for r in "$@"; do rpms+=("$(ls $R/*/"$r"-"$v"-1.*.rpm | head -n 1)"); done
	debfiles "$d" > "$out/$deb.deb.list"
	rpmfiles "${rpms[@]}" > "$out/$deb.rpm.list"
	if ! diff -u "$out/$deb.deb.list" "$out/$deb.rpm.list" > "$out/$deb.diff"; then
		diffs="$diffs $deb"
		grep '^[-+]/' "$out/$deb.diff" | head -n 5 | sed "s/^/# $deb: /"
	fi
}
cmp_pkg strixpeer-dkms strixpeer-dkms
cmp_pkg libstrixpeer1 libstrixpeer
cmp_pkg libstrixpeer-dev libstrixpeer-devel libstrixpeer-static
cmp_pkg strixpeer-utils strixpeer-utils
if [ -z "$diffs" ]; then
	t ok file_lists_match_the_debs "$(cat "$out"/*.rpm.list | wc -l) files in 4 package pairs"
else
	t "not ok" file_lists_match_the_debs "differ:$diffs (deb - / rpm +, in $out/*.diff)"
fi

# 4. lib64 and no RUNPATH
x=$out/root
mkdir -p "$x"
for f in $R/x86_64/libstrixpeer-$v-1.x86_64.rpm $R/x86_64/strixpeer-utils-$v-1.x86_64.rpm; do
	(cd "$x" && rpm2cpio "$OLDPWD/$f" | cpio -idm --quiet)
done
rp=$(readelf -d "$x/usr/bin/strixpeerctl" 2> /dev/null | grep -E 'RPATH|RUNPATH')
if [ -f "$x/usr/lib64/libstrixpeer.so.1.0.0" ] && [ -L "$x/usr/lib64/libstrixpeer.so.1" ] &&
	[ -z "$rp" ] && readelf -d "$x/usr/bin/strixpeerctl" | grep -q 'NEEDED.*libstrixpeer.so.1'; then
	t ok library_in_lib64_cli_without_runpath
else
	t "not ok" library_in_lib64_cli_without_runpath "files: $(cd "$x" && find . -name 'libstrixpeer*' | tr '\n' ' '); rpath: ${rp:-none}"
fi

# 5. the DKMS scriptlets
s=$(rpm -qp --scripts $R/noarch/strixpeer-dkms-$v-1.noarch.rpm 2> /dev/null)
echo "$s" > "$out/dkms-scripts.txt"
miss=""
for w in "groupadd -r rdma" "dkms add -m strixpeer -v $v" "dkms build -m strixpeer -v $v" \
	"dkms install -m strixpeer -v $v" "dkms remove -m strixpeer -v $v -q --all"; do
	echo "$s" | grep -qF -- "$w" || miss="$miss '$w'"
done
if [ -z "$miss" ]; then
	t ok dkms_scriptlets_add_build_install_remove
else
	t "not ok" dkms_scriptlets_add_build_install_remove "missing:$miss (see $out/dkms-scripts.txt)"
fi
if rpm -qp --qf '%{VERSION}\n' $R/noarch/strixpeer-dkms-$v-1.noarch.rpm 2> /dev/null | grep -qx "$v" &&
	(cd "$x" && rpm2cpio "$OLDPWD/$R/noarch/strixpeer-dkms-$v-1.noarch.rpm" | cpio -idm --quiet) &&
	grep -qx "PACKAGE_VERSION=\"$v\"" "$x/usr/src/strixpeer-$v/dkms.conf"; then
	t ok dkms_conf_names_the_version
else
	t "not ok" dkms_conf_names_the_version "$(grep PACKAGE_VERSION "$x/usr/src/strixpeer-$v/dkms.conf" 2>&1)"
fi

# 6. the library directory make install picks by itself
libdir_of() {	# libdir_of <make args...>: where install-lib puts the library
	make -s -n install-lib DESTDIR=/D PREFIX=/usr/local "$@" 2> /dev/null |
		sed -n 's|.*install -m 0644 build/libstrixpeer.so.1.0.0 /D\(.*\)/$|\1|p' | head -n 1
}
l64=$out/layout
mkdir -p "$l64/real" && ln -sfn real "$l64/link"
deb=$(libdir_of)
fed=$(libdir_of MULTIARCH= LIB64_DIR="$PWD/$l64/real")
arch=$(libdir_of MULTIARCH= LIB64_DIR="$PWD/$l64/link")
none=$(libdir_of MULTIARCH= LIB64_DIR="$PWD/$l64/none")
over=$(libdir_of MULTIARCH= LIB64_DIR="$PWD/$l64/real" LIBDIR=/opt/sp/lib)
if [ "$deb" = /usr/local/lib ] && [ "$fed" = /usr/local/lib64 ] && [ "$arch" = /usr/local/lib ] &&
	[ "$none" = /usr/local/lib ] && [ "$over" = /opt/sp/lib ]; then
	t ok install_libdir_follows_the_system_layout
else
	t "not ok" install_libdir_follows_the_system_layout "debian=$deb lib64=$fed link=$arch none=$none LIBDIR=$over"
fi
rp=$(make -s -n build/install/strixpeerctl MULTIARCH= LIB64_DIR="$PWD/$l64/real" PREFIX=/usr/local -B 2> /dev/null |
	grep -o -- '-Wl,-rpath,[^ ]*' | tr -d "'" | head -n 1)
if [ "$rp" = "-Wl,-rpath,/usr/local/lib64" ]; then
	t ok cli_runpath_for_usr_local_lib64
else
	t "not ok" cli_runpath_for_usr_local_lib64 "link line rpath: ${rp:-none}"
fi

# 7. install-deps.sh per distribution (dry run: prints the command)
osr=$out/os-release
mkdir -p "$osr"
printf 'ID=fedora\nVERSION_ID=43\nPRETTY_NAME="Fedora Linux 43 (Workstation Edition)"\n' > "$osr/fedora"
printf 'ID=arch\nPRETTY_NAME="Arch Linux"\n' > "$osr/arch"
f=$(SP_OS_RELEASE=$osr/fedora SP_DEPS_DRY_RUN=1 scripts/install-deps.sh 2>&1)
frc=$?
if [ $frc -eq 0 ] && echo "$f" | grep -q '^\(sudo \)\?dnf install -y .*rdma-core-devel' &&
	echo "$f" | grep -q "kernel-devel-$(uname -r)" && echo "$f" | grep -q 'rpm-build' &&
	! echo "$f" | grep -q apt-get; then
	t ok install_deps_fedora_uses_dnf_and_fedora_names
else
	t "not ok" install_deps_fedora_uses_dnf_and_fedora_names "exit $frc: $(echo "$f" | tail -n 1 | cut -c1-120)"
fi
a=$(SP_OS_RELEASE=$osr/arch SP_DEPS_DRY_RUN=1 scripts/install-deps.sh 2>&1)
arc=$?
if [ $arc -eq 1 ] && echo "$a" | grep -q 'Arch Linux is neither'; then
	t ok install_deps_unknown_distribution_says_so
else
	t "not ok" install_deps_unknown_distribution_says_so "exit $arc: $a"
fi

# 8. README's Fedora block installs files that 'make rpm' built
blk=$(awk '/^<!-- test: rpm -->$/ { on = 1; next } on && /^```/ { if (seen) exit; seen = 1; next } on && seen' README.md)
globs=$(echo "$blk" | grep -o '\./build/rpm/RPMS/[^ ]*\.rpm')
miss=""
for g in $globs; do
	# shellcheck disable=SC2086 # the glob is meant
	[ "$(ls $g 2> /dev/null | wc -l)" -eq 1 ] || miss="$miss $g"
done
if [ -n "$globs" ] && [ -z "$miss" ] && echo "$blk" | grep -q '^make rpm' &&
	echo "$blk" | grep -q 'usermod -aG rdma'; then
	t ok readme_fedora_block_names_built_packages "$(echo "$globs" | wc -w) packages"
else
	t "not ok" readme_fedora_block_names_built_packages "no block, or globs matching not exactly one file:${miss:- none found}"
fi
exit $failed
