#!/bin/bash
# Host-side check of tests/vm/kernels.sh's bookkeeping when several
# checkouts share one kernel cache (run by tests/run-all.sh). Prints TAP.
#
# Two fake checkouts share one fake cache, without any download: a fake
# apt-cache and apt-get first in PATH answer fetch's questions and
# "download" tiny fake kernel packages (STRIXPEER_SID=0). Checkout "a" has
# no ../shared, checkout "b" has ../shared/kernels/ with a fake debug
# kernel image .deb. Checked:
# - b's fetch unpacks the debug kernel; a's fetch then leaves its root
#   alone (kernels.sh used to delete it as "stale"), and b's next fetch
#   finds it cached;
# - each checkout's 'list' shows what it uses: the debug kernel for b
#   only, whichever fetched last; the index (run-vm.sh's name lookup)
#   still knows it;
# - a fetch removes roots left half-unpacked (no .strixpeer-complete) and
#   the Debian root it replaced (the archive moved to a new ABI), and no
#   other complete root.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
PATH=$PATH:/usr/sbin:/sbin

for tool in dpkg-deb depmod; do
	if ! command -v "$tool" > /dev/null; then
		skip "kernels_cache_shared_by_two_checkouts" "$tool not found"
		finish
	fi
done

t=$(mktemp -d "${TMPDIR:-/tmp}/sp-kcache.XXXXXX") && [ -d "$t" ] || exit 1
trap 'rm -rf "$t"' EXIT
cache=$t/cache
dbg=6.12.0-fakedebug

# The two checkouts: kernels.sh at its place (it finds ../shared from its
# own path).
for c in a b; do
	mkdir -p "$t/$c/repo/tests/vm"
	cp tests/vm/kernels.sh "$t/$c/repo/tests/vm/"
done

# The fake archive ($SP_FAKE_APT): depends/<package> is what 'apt-cache
# depends <package>' prints below the package's name; 'apt-get download
# <package>' builds <package>_1_amd64.deb in the current directory: an
# image package holds boot/vmlinuz-<kver> and lib/modules/<kver>/, any
# other package a file in /usr/share/doc.
mkdir -p "$t/bin" "$t/apt/depends"
cat > "$t/bin/apt-cache" << 'EOF'
#!/bin/bash
[ "$1" = depends ] && [ -f "$SP_FAKE_APT/depends/$2" ] || exit 0
echo "$2"
cat "$SP_FAKE_APT/depends/$2"
EOF
cat > "$t/bin/apt-get" << 'EOF'
#!/bin/bash
set -eu
[ "$1" = download ] || exit 1
shift
[ "$1" != -q ] || shift
p=$1
d=$(mktemp -d "$SP_FAKE_APT/pkg.XXXXXX")
mkdir -p "$d/DEBIAN"
case $p in
linux-image-*)
	mkdir -p "$d/boot" "$d/lib/modules/${p#linux-image-}/kernel"
	echo "fake kernel" > "$d/boot/vmlinuz-${p#linux-image-}" ;;
*)
	mkdir -p "$d/usr/share/doc/$p"
	echo "fake" > "$d/usr/share/doc/$p/README" ;;
esac
printf 'Package: %s\nVersion: 1\nArchitecture: amd64\nMaintainer: strixpeer tests <tests@invalid>\nDescription: fake package\n' \
	"$p" > "$d/DEBIAN/control"
dpkg-deb -Zgzip --root-owner-group --build "$d" "${p}_1_amd64.deb" > /dev/null
rm -rf "$d"
EOF
chmod +x "$t/bin/apt-cache" "$t/bin/apt-get"
export SP_FAKE_APT=$t/apt
archive() {	# archive <meta> <kver> <series>: the meta package depends on <kver>
	echo "  Depends: linux-image-$2" > "$t/apt/depends/$1"
	printf '  Depends: linux-headers-%s-common\n  Depends: linux-kbuild-%s\n' "$2" "$3" \
		> "$t/apt/depends/linux-headers-$2"
}
archive linux-image-amd64 6.1.0-1-amd64 6.1
archive linux-image-6.12-amd64 6.12.1+deb12-amd64 6.12

# The fake debug kernel .deb in b's ../shared/kernels/.
mkdir -p "$t/b/shared/kernels"
(cd "$t/b/shared/kernels" && PATH=$t/bin:$PATH apt-get download "linux-image-$dbg") > "$t/deb.log" 2>&1
result $? "fake_debug_kernel_deb_builds" "$(cat "$t/deb.log")"

ks() {	# ks <a|b> <command>: that checkout's kernels.sh on the shared cache
	PATH=$t/bin:$PATH STRIXPEER_CACHE=$cache STRIXPEER_SID=0 "$t/$1/repo/tests/vm/kernels.sh" "$2"
}
names() {	# the names 'list' prints, on one line
	awk '{ printf "%s%s", sep, $1; sep = " " }'
}
complete() {	# complete <kver>: its root is there and complete
	[ -f "$cache/kernels/$1/.strixpeer-complete" ] && [ -f "$cache/kernels/$1/boot/vmlinuz-$1" ]
}

ks b fetch > "$t/fetch-b1.out" 2> "$t/fetch-b1.log" &&
	complete "$dbg" && complete 6.1.0-1-amd64 && complete 6.12.1+deb12-amd64
result $? "fetch_with_shared_unpacks_debian_and_debug_kernels" "$(cat "$t/fetch-b1.log")"
[ "$(ks b list | names)" = "6.1 6.12 debug-$dbg" ] && [ "$(names < "$t/fetch-b1.out")" = "6.1 6.12 debug-$dbg" ]
result $? "list_with_shared_shows_the_debug_kernel" "$(ks b list 2>&1)"

ks a fetch > "$t/fetch-a1.out" 2> "$t/fetch-a1.log" &&
	complete "$dbg" && ! grep -q "removing" "$t/fetch-a1.log"
result $? "fetch_without_shared_keeps_the_other_checkouts_debug_kernel" "$(cat "$t/fetch-a1.log")"
[ "$(ks a list | names)" = "6.1 6.12" ] && [ "$(names < "$t/fetch-a1.out")" = "6.1 6.12" ]
result $? "list_without_shared_shows_only_the_debian_kernels" "$(ks a list 2>&1)"
[ "$(ks b list | names)" = "6.1 6.12 debug-$dbg" ]
result $? "list_with_shared_still_shows_the_debug_kernel_after_the_other_fetch" "$(ks b list 2>&1)"
grep -q "^debug-$dbg $dbg $cache/kernels/$dbg\$" "$cache/kernels.list"
result $? "index_still_resolves_the_debug_kernels_name" "$(cat "$cache/kernels.list")"

ks b fetch > /dev/null 2> "$t/fetch-b2.log" &&
	grep -q "debug-$dbg: cached" "$t/fetch-b2.log" && ! grep -q "unpacking" "$t/fetch-b2.log"
result $? "refetch_with_shared_finds_the_debug_kernel_cached" "$(cat "$t/fetch-b2.log")"

# An interrupted fetch's leftovers, a complete root no index names, and a
# new 6.1 ABI in the archive; then a's fetch.
mkdir -p "$cache/kernels/6.1.0-9-amd64.tmp/boot" "$cache/kernels/6.2.0-half/boot" \
	"$cache/kernels/6.5.0-other/boot"
echo stamp > "$cache/kernels/6.5.0-other/.strixpeer-complete"
archive linux-image-amd64 6.1.0-2-amd64 6.1
ks a fetch > /dev/null 2> "$t/fetch-a2.log" &&
	[ ! -e "$cache/kernels/6.1.0-9-amd64.tmp" ] && [ ! -e "$cache/kernels/6.2.0-half" ]
result $? "fetch_removes_half_unpacked_roots" "$(cat "$t/fetch-a2.log"; ls "$cache/kernels")"
[ ! -e "$cache/kernels/6.1.0-1-amd64" ] && complete 6.1.0-2-amd64 &&
	[ "$(ks a list | head -n 1)" = "6.1 6.1.0-2-amd64 $cache/kernels/6.1.0-2-amd64" ]
result $? "fetch_replaces_the_debian_kernel_of_a_new_abi" "$(cat "$t/fetch-a2.log"; ls "$cache/kernels")"
expect="6.1 6.1.0-2-amd64 $cache/kernels/6.1.0-2-amd64
6.12 6.12.1+deb12-amd64 $cache/kernels/6.12.1+deb12-amd64
debug-$dbg $dbg $cache/kernels/$dbg"
complete "$dbg" && complete 6.12.1+deb12-amd64 && [ -d "$cache/kernels/6.5.0-other" ] &&
	[ "$(ks b list)" = "$expect" ]
result $? "fetch_keeps_every_other_complete_root" "$(cat "$t/fetch-a2.log"; ls "$cache/kernels"; ks b list)"

finish
