#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian packages as Debian's own checker sees them (tests/run-all.sh):
# 'make deb' builds the source package and the four binary packages, and
# lintian finds no error or warning in any of them (the .changes names them
# all). Informational tags are printed as TAP comments. Every package that
# ships README.md ships docs/*.md beside it, and every relative Markdown
# link in those (README.md's docs/install.md, a page's install.md or
# perf/) resolves to a file or directory in the same package. Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
echo "TAP version 13"
if ! command -v lintian > /dev/null; then
	echo "1..0 # SKIP lintian not installed (scripts/install-deps.sh installs it)"
	exit 0
fi
echo "1..5"
out=build/lintian-check
rm -rf "$out"
mkdir -p "$out"
failed=0
if make -s deb > "$out/make-deb.log" 2>&1; then
	echo "ok 1 make_deb_builds_source_and_binary_packages"
else
	echo "not ok 1 make_deb_builds_source_and_binary_packages"
	tail -n 20 "$out/make-deb.log" | sed 's/^/# /'
	echo "not ok 2 lintian_no_errors_or_warnings # make deb failed"
	echo "not ok 3 changes_names_source_and_every_package # make deb failed"
	echo "not ok 4 utils_ships_systemd_units_not_enabled # make deb failed"
	echo "not ok 5 doc_links_resolve_in_each_package # make deb failed"
	exit 1
fi
changes=$(ls build/deb/strixpeer_*.changes 2> /dev/null | head -n 1)
lintian --pedantic --fail-on error,warning "$changes" > "$out/lintian.txt" 2> "$out/lintian.err"
rc=$?
if [ $rc -eq 0 ] && ! grep -q '^[EW]: ' "$out/lintian.txt"; then
	echo "ok 2 lintian_no_errors_or_warnings"
else
	echo "not ok 2 lintian_no_errors_or_warnings"
	failed=1
fi
sed 's/^/# /' "$out/lintian.txt" | head -n 40
grep -v 'running with root privileges' "$out/lintian.err" | sed 's/^/# /' | head -n 10
files=$(sed -n '/^Files:/,/^[^ ]/p' "$changes")
miss=""
for f in '\.dsc$' '\.tar\.xz$' 'strixpeer-dkms_.*_all\.deb$' 'libstrixpeer1_.*\.deb$' \
	'libstrixpeer-dev_.*\.deb$' 'strixpeer-utils_.*\.deb$'; do
	echo "$files" | grep -q "$f" || miss="$miss $f"
done
if [ -z "$miss" ]; then
	echo "ok 3 changes_names_source_and_every_package"
else
	echo "not ok 3 changes_names_source_and_every_package"
	echo "# missing:$miss"
	failed=1
fi
# strixpeer-utils ships the units (not enabled by its scripts) and the rules
utils=$(ls build/deb/strixpeer-utils_*.deb 2> /dev/null | head -n 1)
list=$(dpkg-deb -c "$utils" 2>&1)
miss=""
for f in usr/lib/systemd/system/strixpeer-textfile.service \
	usr/lib/systemd/system/strixpeer-textfile.timer \
	usr/lib/systemd/system/strixpeer-monitor.service \
	usr/share/doc/strixpeer-utils/examples/strixpeer.rules.yml; do
	echo "$list" | grep -q " \./$f$" || miss="$miss $f"
done
mkdir -p "$out/utils-control"
dpkg-deb -e "$utils" "$out/utils-control" 2> /dev/null
if [ -z "$miss" ] && ! grep -qs 'deb-systemd-helper enable\|systemctl.*start' "$out"/utils-control/post*; then
	echo "ok 4 utils_ships_systemd_units_not_enabled"
else
	echo "not ok 4 utils_ships_systemd_units_not_enabled"
	echo "# missing:$miss; scripts: $(cat "$out"/utils-control/post* 2> /dev/null | tr '\n' ' ' | head -c 300)"
	failed=1
fi
# 5. The Markdown docs as installed: in every package whose doc directory
# has README.md, README.md and docs/*.md are there uncompressed (a link
# names the .md), and every relative link target in them - ](target),
# outside code blocks and code spans, without its #anchor; http(s),
# mailto and anchor-only links aside - exists in the same package, inside
# its tree.
md_links() {	# md_links <file.md>: the link targets, one a line
	awk '/^[ \t]*(```|~~~)/ { code = !code; next }
		!code {
			line = $0
			gsub(/`[^`]*`/, "", line)
			while (match(line, /\]\([^)]*\)/)) {
				print substr(line, RSTART + 2, RLENGTH - 3)
				line = substr(line, RSTART + RLENGTH)
			}
		}' "$1"
}
bad=""
nlinks=0
npkgs=0
for deb in build/deb/*.deb; do
	pkg=$(dpkg-deb -f "$deb" Package)
	root=$out/root-$pkg
	rm -rf "$root"
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root" || { bad="$bad $pkg:not-extracted"; continue; }
	doc=$root/usr/share/doc/$pkg
	for z in $(cd "$doc" 2> /dev/null && find . -name '*.md.gz' | sed 's|^\./||'); do
		bad="$bad $pkg:$z(compressed)"
	done
	[ -f "$doc/README.md" ] || continue
	npkgs=$((npkgs + 1))
	ls "$doc"/docs/*.md > /dev/null 2>&1 || bad="$bad $pkg:no-docs/*.md"
	for md in "$doc/README.md" "$doc"/docs/*.md; do
		[ -f "$md" ] || continue
		while read -r t; do
			t=${t#<}
			t=${t%%>*}
			t=${t%% *}
			t=${t%%#*}
			case $t in
			'' | http:* | https:* | mailto:*) continue ;;
			esac
			nlinks=$((nlinks + 1))
			p=$(realpath -m "$(dirname "$md")/$t")
			case $p in
			"$(realpath "$root")"/*) [ -e "$p" ] && continue ;;
			esac
			bad="$bad $pkg:${md#"$doc"/}->$t"
		done < <(md_links "$md")
	done
done
if [ -z "$bad" ] && [ $npkgs -eq 4 ] && [ $nlinks -gt 0 ]; then
	echo "ok 5 doc_links_resolve_in_each_package # $nlinks links in $npkgs packages"
else
	echo "not ok 5 doc_links_resolve_in_each_package"
	echo "# $npkgs packages with README.md (want 4), $nlinks relative links; unresolved:" \
		"$(echo "$bad" | cut -c1-1500)"
	failed=1
fi
[ $failed -eq 0 ]
