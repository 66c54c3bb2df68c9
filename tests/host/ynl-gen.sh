#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ynl-gen.sh: the netlink code the kernel's YNL generator makes from
# docs/netlink/strixpeer.yaml.
#
#   ynl-gen.sh           regenerate include/uapi/strixpeer_nl.h ("make netlink-gen")
#   ynl-gen.sh --check   TAP: regenerate into a temporary directory and compare
#                        it with the checked-in header, and the generator's
#                        request policies (--mode kernel) with kmod/netlink.c's
#
# The generator is tools/net/ynl/ynl-gen-c.py of Debian's linux-source-6.12
# (the header's banner names the version; --check uses that one). It expects a kernel tree: the spec is copied to
# Documentation/netlink/specs/ of the extracted tools (the schemas sit one
# level up) and the banner's spec path is rewritten to this tree's.
#
# Only the uapi header is generated code in the tree. The module keeps its
# hand-written ops and policies because the generated kernel code does not
# fit it: its genl_split_ops need 6.2 (the module builds for 6.1), config-set
# checks CAP_SYS_ADMIN before it validates values (a generated op's policy
# would refuse a bad value first), and the events group's
# GENL_MCAST_CAP_SYS_ADMIN depends on the kernel. --check holds the
# hand-written policies to the generator's, entry by entry.
#
# Cache: ${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}/ynl/<version>/ (the
# linux-source deb is shared with tests/vm/build-realcore.sh's realcore/src/).
# Needs Debian's python3 with yaml and jsonschema (make deps installs them).
set -eu
cd "$(dirname "$0")/../.."
spec=docs/netlink/strixpeer.yaml
hdr=include/uapi/strixpeer_nl.h
check=0
case ${1:-} in
--check) check=1 ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

cache=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
n=0
fail=0
tap() {	# tap ok|fail name [diagnostic lines]
	local res=$1 name=$2
	shift 2
	n=$((n + 1))
	[ $# -gt 0 ] && printf '# %s\n' "$@"
	if [ "$res" = ok ]; then echo "ok $n $name"; else echo "not ok $n $name"; fail=1; fi
}
skip_all() {
	[ $check = 1 ] || { echo "ynl-gen.sh: $*" >&2; exit 1; }
	echo "1..0 # SKIP $*"
	exit 0
}

# The generator version: SP_YNL_SRCVER, else for --check the one that made
# the checked-in header (its banner says), else the archive's newest.
srcdir=$cache/realcore/src
mkdir -p "$srcdir" "$cache/ynl"
candidate() { apt-cache policy linux-source-6.12 2>/dev/null | awk '$1 == "Candidate:" { print $2 }'; }
srcver=${SP_YNL_SRCVER:-}
if [ -z "$srcver" ] && [ $check = 1 ]; then
	srcver=$(sed -n 's#^/\*\t.* (tests/host/ynl-gen.sh, linux-source-6.12 \([^ ]*\)) \*/$#\1#p' "$hdr")
	if [ -n "$srcver" ] && ! apt-cache show "linux-source-6.12=$srcver" > /dev/null 2>&1 &&
		[ ! -f "$srcdir/linux-source-6.12_${srcver}_all.deb" ] &&
		[ ! -f "$cache/ynl/$srcver/.done" ]; then
		echo "# the archive no longer serves linux-source-6.12 $srcver (the header's); using $(candidate)"
		srcver=
	fi
fi
[ -n "$srcver" ] || srcver=$(candidate)
[ -n "$srcver" ] || skip_all "the archive serves no linux-source-6.12"
tree=$cache/ynl/$srcver
if [ ! -f "$tree/.done" ]; then
	exec 9> "$cache/ynl/lock"
	flock 9
	if [ ! -f "$tree/.done" ]; then
		deb=$srcdir/linux-source-6.12_${srcver}_all.deb
		if [ ! -f "$deb" ]; then
			(cd "$cache/ynl" && apt-get download "linux-source-6.12=$srcver") >&2 ||
				skip_all "apt-get download linux-source-6.12=$srcver failed"
			deb=$cache/ynl/linux-source-6.12_${srcver}_all.deb
		fi
		rm -rf "$tree" "$tree.tmp"
		mkdir -p "$tree.tmp"
		dpkg-deb --fsys-tarfile "$deb" |
			tar -xO --wildcards '*/linux-source-6.12.tar.xz' | xz -dc |
			tar -x -C "$tree.tmp" --strip-components=1 \
				linux-source-6.12/tools/net/ynl linux-source-6.12/Documentation/netlink \
				linux-source-6.12/MAINTAINERS
		[ -d "$tree.tmp/tools/net/ynl" ] ||
			skip_all "linux-source-6.12 $srcver has no tools/net/ynl"
		touch "$tree.tmp/.done"
		mv "$tree.tmp" "$tree"
	fi
	exec 9>&-
fi
/usr/bin/python3 -c "import yaml, jsonschema" 2>/dev/null ||
	skip_all "python3 lacks yaml or jsonschema (make deps installs python3-yaml python3-jsonschema)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The generator resolves the schema from the spec's directory and finds the
# kernel root by MAINTAINERS above it: a private copy of the tree's netlink
# documentation, so concurrent runs do not share a spec file.
mkdir -p "$work/k/Documentation/netlink/specs" "$work/k/tools/net"
cp "$tree"/Documentation/netlink/*.yaml "$work/k/Documentation/netlink/"
ln -s "$tree/tools/net/ynl" "$work/k/tools/net/ynl"
: > "$work/k/MAINTAINERS"
cp "$spec" "$work/k/Documentation/netlink/specs/strixpeer.yaml"
gen() {	# gen <mode> <--header|--source> <out>
	(cd "$work/k" && /usr/bin/python3 tools/net/ynl/ynl-gen-c.py --mode "$1" "$2" \
		--spec Documentation/netlink/specs/strixpeer.yaml -o "$3") > "$work/gen.log" 2>&1
}
banner="s#^/\*\tDocumentation/netlink/specs/strixpeer.yaml \*/\$#/*\t$spec (tests/host/ynl-gen.sh, linux-source-6.12 $srcver) */#"

if ! gen uapi --header "$work/uapi.h"; then
	[ $check = 1 ] || { cat "$work/gen.log" >&2; exit 1; }
	mapfile -t log < <(tail -n 20 "$work/gen.log")
	echo "1..1"
	tap fail ynl_generates_from_the_spec "${log[@]}"
	exit 1
fi
sed -i "$banner" "$work/uapi.h"
if [ $check = 0 ]; then
	cp "$work/uapi.h" "$hdr"
	echo "ynl-gen.sh: wrote $hdr (linux-source-6.12 $srcver)"
	exit 0
fi

echo "1..2"
if diff -u "$hdr" "$work/uapi.h" > "$work/uapi.diff"; then
	tap ok uapi_header_is_the_generators_output
else
	mapfile -t d < <(head -n 40 "$work/uapi.diff")
	tap fail uapi_header_is_the_generators_output "$hdr differs from YNL's output (make netlink-gen):" "${d[@]}"
fi

# Each generated request policy entry must be an entry of kmod/netlink.c's
# policy of the same command (genl_ops: one policy per command, so buf-get's
# do and dump policies are one there), and nothing more.
if ! gen kernel --source "$work/nl.c"; then
	mapfile -t log < <(tail -n 20 "$work/gen.log")
	tap fail module_policies_are_the_generators "${log[@]}"
	exit 1
fi
mapfile -t p < <(/usr/bin/python3 - "$work/nl.c" kmod/netlink.c <<'EOF'
import re
import sys


def policies(path):
    out = {}
    text = open(path).read()
    for name, body in re.findall(r"struct nla_policy (strixpeer_\w+?)_nl_policy\[[^\]]*\] = \{(.*?)\n\};",
                                 text, re.S):
        name = re.sub(r"_(do|dump)$", "", name)
        ents = out.setdefault(name, {})
        for attr, val in re.findall(r"\[(STRIXPEER_A_\w+)\]\s*=\s*(.+?),?\n", body + "\n"):
            ents[attr] = re.sub(r"\s+", "", val).replace(",}", "}")
    return out


gen, mod = policies(sys.argv[1]), policies(sys.argv[2])
for name in sorted(set(gen) | set(mod)):
    g, m = gen.get(name, {}), mod.get(name, {})
    if name not in mod:
        print("kmod/netlink.c has no %s_nl_policy" % name)
    elif name not in gen:
        print("%s_nl_policy is in kmod/netlink.c, not in YNL's output" % name)
    for attr in sorted(set(g) | set(m)):
        if g.get(attr) != m.get(attr):
            print("%s[%s]: YNL %s, kmod/netlink.c %s" % (name, attr, g.get(attr), m.get(attr)))
if not gen:
    print("no request policy in YNL's output")
EOF
)
if [ ${#p[@]} -eq 0 ]; then
	tap ok module_policies_are_the_generators
else
	tap fail module_policies_are_the_generators "${p[@]}"
fi
exit $fail
