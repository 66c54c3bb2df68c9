#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# 'make install' and README's build commands, on the host (tests/run-all.sh
# runs it after 'make user'). Prints TAP.
#
# 1. Into a DESTDIR: every file in place (the library, its symlinks, the
#    static library, pkg-config and CMake files, header, CLI in bin/, man
#    pages of sections 3, 4 and 8 and an alias page per exported function,
#    bash completion), the CLI's RUNPATH right for a system and a
#    non-system LIBDIR, the library's NEEDED only libnl and libibverbs, a
#    program using sp_dev_open() linked statically with pkg-config
#    --static --libs strixpeer alone, and 'make uninstall' removes every file again.
# 2. For real, as docs/install.md says (make install PREFIX=/usr/local), in
#    a throwaway root: an overlay of the host's root in a private mount
#    namespace, so nothing reaches the host. A user with a plain PATH runs
#    the installed CLI; docs/library.md's examples (the blocks marked
#    "test:") are written out and built with exactly its commands (pkg-config,
#    static, CMake) and run; 'man sp_buf_alloc', 'man 4 strixpeer' and
#    'man strixpeerctl-bench' work; 'make uninstall'
#    leaves nothing behind (checked on the overlay's upper layer).
set -u
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
. tests/lib/tap.sh
runpath() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p'; }

# The files install puts under PREFIX=/usr/local, LIBDIR=/usr/local/lib.
expected() {
	local f
	printf '%s\n' bin/strixpeerctl include/strixpeer.h \
		include/strixpeer/ctl.h include/strixpeer/reg.h lib/libstrixpeer.so.1.0.0 \
		lib/libstrixpeer.so.1 lib/libstrixpeer.so lib/libstrixpeer.a \
		lib/strixpeer/libstrixpeer-preload.so \
		lib/pkgconfig/strixpeer.pc lib/cmake/strixpeer/strixpeerConfig.cmake \
		lib/cmake/strixpeer/strixpeerConfigVersion.cmake \
		share/bash-completion/completions/strixpeerctl \
		lib/systemd/system/strixpeer-textfile.service \
		lib/systemd/system/strixpeer-textfile.timer \
		lib/systemd/system/strixpeer-monitor.service
	for f in docs/man/*.3; do echo "share/man/man3/${f##*/}"; done
	for f in docs/man/*.4; do echo "share/man/man4/${f##*/}"; done
	for f in docs/man/*.7; do echo "share/man/man7/${f##*/}"; done
	for f in docs/man/*.8; do echo "share/man/man8/${f##*/}"; done
	echo share/man/man3/libstrixpeer.3
	sed -n 's/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/\1/p' user/lib/libstrixpeer.map | sort -u |
		while read -r f; do [ -e "docs/man/$f.3" ] || echo "share/man/man3/$f.3"; done
}

# node: the chrooted half (part 2), run by this script in the throwaway root.
if [ "${1:-}" = node ]; then
	out=$2
	as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups env -i \
		PATH=/usr/local/bin:/usr/bin:/bin HOME=/nonexistent LANG=C.UTF-8 "$@"; }
	step() {	# step <name> <command...>: a case, output in the log
		local name=$1
		shift
		echo "== $name: $*" >> "$out/node.log"
		"$@" >> "$out/node.log" 2>&1
		echo "$name $?" >> "$out/node.results"
	}
	step make_install_prefix_usr_local make -s install PREFIX=/usr/local
	step user_runs_installed_cli bash -c "$(declare -f as_user)
		[ \"\$(as_user bash -c 'command -v strixpeerctl')\" = /usr/local/bin/strixpeerctl ] &&
		as_user strixpeerctl -V | grep -qx 'strixpeerctl $(cat VERSION)' &&
		ldd /usr/local/bin/strixpeerctl | grep -q 'libstrixpeer.so.1 => /usr/local/lib/libstrixpeer.so.1 '"
	step installed_cli_without_module_says_why bash -c "$(declare -f as_user)
		as_user strixpeerctl status > $out/status.txt 2>&1; [ \$? -eq 1 ] &&
		grep -Eq '^ +loaded +no$' $out/status.txt && grep -q 'modprobe strixpeer' $out/status.txt"
	step man_finds_every_function bash -c '
		for f in $(sed -n "s/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/\1/p" user/lib/libstrixpeer.map); do
			MANPAGER=cat MANWIDTH=80 man "$f" 2> /dev/null | grep -qw "$f" || { echo "man $f"; exit 1; }
		done
		MANPAGER=cat man 8 strixpeerctl | grep -q "^SYNOPSIS"'
	# the device and module page (section 4) and bench's own page, by name
	step man_finds_device_and_bench_pages bash -c '
		MANPAGER=cat MANWIDTH=80 man 4 strixpeer 2> /dev/null | grep -q "^ *STRIXPEER_IOC_BUF_ALLOC" &&
		MANPAGER=cat MANWIDTH=80 man strixpeer 2> /dev/null | grep -q "^STRIXPEER(4)" &&
		MANPAGER=cat MANWIDTH=80 man strixpeerctl-bench 2> /dev/null | grep -q "^STRIXPEERCTL-BENCH(8)" &&
		[ "$(man -w 4 strixpeer)" = /usr/local/share/man/man4/strixpeer.4 ] &&
		[ "$(man -w strixpeerctl-bench)" = /usr/local/share/man/man8/strixpeerctl-bench.8 ]'

	# the library's examples (docs/library.md, README links it), with its own commands
	ex=/tmp/strixpeer-readme
	rm -rf "$ex"
	mkdir -p "$ex/cmake"
	awk -v dir="$ex" '
		/^<!-- test: .* -->$/ { what = $3; next }
		what != "" && /^```/ && !inblock { inblock = 1; n++; file = (what == "build") ? dir "/build" n ".sh" : dir "/" what; next }
		inblock && /^```/ { inblock = 0; what = ""; next }
		inblock { print > file }
	' docs/library.md
	cp "$ex/app.c" "$ex/cmake/"
	cp "$ex/CMakeLists.txt" "$ex/cmake/" 2> /dev/null
	step readme_examples_found bash -c "ls $ex/app.c $ex/share.c $ex/CMakeLists.txt $ex/build*.sh &&
		[ \$(ls $ex/build*.sh | wc -l) -eq 2 ]"
	step readme_build_commands bash -c "cd $ex && for b in build*.sh; do cat \$b; bash -e \$b || exit 1; done"
	step readme_app_links_installed_library bash -c "$(declare -f as_user)
		cd $ex && ldd app | grep -q 'libstrixpeer.so.1 => /usr/local/lib/libstrixpeer.so.1 ' &&
		ldd app | grep -q libibverbs && ! ldd app-static | grep -q libstrixpeer &&
		for p in app app-static; do as_user ./\$p > \$p.out 2>&1; [ \$? -eq 1 ] &&
			grep -q '^strixpeer: /dev/strixpeer does not exist: is the strixpeer module loaded' \$p.out || exit 1; done"
	step readme_share_example_compiles bash -c "cd $ex &&
		cc -Wall -Wextra -Werror -c share.c \$(pkg-config --cflags strixpeer)"
	# the PeerDirect fragment, in a function that declares what it uses
	awk '/^```c$/ { c = 1; buf = ""; next } c && /^```$/ { c = 0; if (buf ~ /sp_import_dmabuf\(/) print buf; next }
		c { buf = buf $0 "\n" }' docs/library.md > "$ex/import-body.c"
	{
		printf '#include <stdio.h>\n#include <infiniband/verbs.h>\n#include <strixpeer.h>\n'
		printf 'struct ibv_mr *f(struct sp_dev *dev, struct ibv_pd *pd, int dmabuf_fd, void *ptr, size_t size);\n'
		printf 'struct ibv_mr *f(struct sp_dev *dev, struct ibv_pd *pd, int dmabuf_fd, void *ptr, size_t size)\n{\n'
		printf '\tstruct ibv_mr *mr;\n'
		cat "$ex/import-body.c"
		printf '\treturn mr;\n}\n'
	} > "$ex/import.c"
	step readme_import_fragment_compiles bash -c "cd $ex && [ -s import-body.c ] &&
		cc -Wall -Werror -c import.c \$(pkg-config --cflags strixpeer)"
	step readme_cmake_example bash -c "$(declare -f as_user)
		cd $ex/cmake && cmake -S . -B b > cmake.log 2>&1 && cmake --build b >> cmake.log 2>&1 &&
		ldd b/app | grep -q 'libstrixpeer.so.1 => /usr/local/lib/' &&
		{ as_user b/app 2>&1; true; } | grep -q '^strixpeer: /dev/strixpeer does not exist' ||
		{ cat cmake.log; exit 1; }"
	step cmake_version_check bash -c "cd $ex/cmake && sed 's/strixpeer 0.1 REQUIRED/strixpeer 1.0/' CMakeLists.txt > v.txt &&
		mkdir v && cp app.c v/ && mv v.txt v/CMakeLists.txt &&
		cmake -S v -B v/b 2>&1 | grep -q 'strixpeer.*not.*found\|Could not find a configuration file\|version: $(cat VERSION)'"
	step make_uninstall make -s uninstall PREFIX=/usr/local
	exit 0
fi

# --- 1. DESTDIR --------------------------------------------------------------
t=$repo/build/install-check
rm -rf "$t"
mkdir -p "$t"
if make -s install-lib DESTDIR="$t/dest" PREFIX=/usr/local > "$t/destdir.log" 2>&1; then
	(cd "$t/dest/usr/local" && find . ! -type d | sed 's|^\./||' | sort) > "$t/got.txt"
	expected | sort > "$t/want.txt"
	diff "$t/want.txt" "$t/got.txt" > "$t/diff.txt"
	result $? "destdir_install_puts_every_file" "$(cat "$t/diff.txt")"
else
	result 1 "destdir_install_puts_every_file" "$(tail -n 5 "$t/destdir.log")"
fi
d=$t/dest/usr/local
[ "$(runpath "$d/bin/strixpeerctl")" = /usr/local/lib ] &&
	[ "$(readlink "$d/lib/libstrixpeer.so.1")" = libstrixpeer.so.1.0.0 ] &&
	[ "$(readlink "$d/lib/libstrixpeer.so")" = libstrixpeer.so.1.0.0 ] &&
	[ "$(cat "$d/share/man/man3/sp_buf_free.3")" = ".so man3/sp_buf_alloc.3" ] &&
	[ "$(cat "$d/share/man/man3/libstrixpeer.3")" = ".so man7/libstrixpeer.7" ]
result $? "destdir_cli_runpath_and_links" "RUNPATH '$(runpath "$d/bin/strixpeerctl")'"
grep -qx 'Requires: libibverbs' "$d/lib/pkgconfig/strixpeer.pc" &&
	grep -qx 'Requires.private: libnl-genl-3.0' "$d/lib/pkgconfig/strixpeer.pc" &&
	PKG_CONFIG_PATH=$d/lib/pkgconfig pkg-config --libs strixpeer | grep -q -- '-lstrixpeer.*-libverbs'
result $? "pkg_config_brings_libibverbs" "$(PKG_CONFIG_PATH=$d/lib/pkgconfig pkg-config --libs strixpeer 2>&1)"
api=$(sed -n 's/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/\1/p' user/lib/libstrixpeer.map | sort -u)
[ "$(nm -g --defined-only "$d/lib/libstrixpeer.a" | awk 'NF == 3 {print $3}' | sort -u)" = "$api" ] &&
	[ "$(nm -D --defined-only "$d/lib/libstrixpeer.so.1.0.0" | awk '$3 ~ /^sp_/ {sub(/@.*/, "", $3); print $3}' | sort -u)" = "$api" ]
result $? "libraries_export_only_the_api" \
	"$(nm -g --defined-only "$d/lib/libstrixpeer.a" | awk 'NF == 3 {print $3}' | sort -u | comm -3 - <(echo "$api") | tr '\n' ' ')"
# libstrixpeer.so links what the library uses, and nothing else: libnl
# (the control plane) and libibverbs (sp_reg_mr()), no librdmacm, no libm
# (strixpeerctl bench's, linked into strixpeerctl only)
needed=$(readelf -d "$d/lib/libstrixpeer.so.1.0.0" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
other=$(for n in $needed; do
	case $n in libnl-genl-3.so.*|libnl-3.so.*|libibverbs.so.*|libc.so.*|ld-linux*) ;;
	*) echo "$n" ;; esac
done)
[ -n "$needed" ] && [ -z "$other" ] &&
	! nm -D --defined-only "$d/lib/libstrixpeer.so.1.0.0" | grep -q sp_bench
result $? "library_needs_only_libnl_and_libibverbs" "NEEDED: $needed"
# a static link of a program using sp_dev_open() with exactly what
# pkg-config --static --libs strixpeer gives (the .a alone in its libdir)
mkdir -p "$t/static/lib"
cp "$d/lib/libstrixpeer.a" "$t/static/lib/"
cat > "$t/static/app.c" << 'EOF'
#include <stdio.h>
#include <strixpeer.h>

int main(void)
{
	struct sp_dev *dev;

	printf("libstrixpeer %s\n", sp_lib_version());
	if (sp_dev_open(NULL, &dev) < 0) {
		printf("sp_dev_open: %s\n", sp_errmsg());
		return 0;
	}
	sp_dev_close(dev);
	printf("sp_dev_open: ok\n");
	return 0;
}
EOF
spc() { PKG_CONFIG_PATH=$d/lib/pkgconfig pkg-config --define-variable=libdir="$t/static/lib" \
	--define-variable=includedir="$d/include" "$@"; }
static_libs=$(spc --static --libs strixpeer)
# shellcheck disable=SC2046,SC2086 # pkg-config's words, split
(cd "$t/static" && ! echo " $static_libs " | grep -Eq -- ' -l(rdmacm|m) ' &&
	cc -Wall -Werror -o app app.c $(spc --cflags strixpeer) $static_libs > cc.log 2>&1 &&
	! readelf -d app | grep -q 'NEEDED.*libstrixpeer' && ./app > app.out 2>&1 &&
	grep -qx "libstrixpeer $(cat "$repo/VERSION")" app.out && grep -q '^sp_dev_open: ' app.out)
result $? "pkg_config_static_link_works" "libs: $static_libs; $(cat "$t/static/cc.log" "$t/static/app.out" 2> /dev/null | head -n 5)"
make -s uninstall DESTDIR="$t/dest" PREFIX=/usr/local > "$t/uninstall.log" 2>&1 &&
	[ -z "$(find "$t/dest" ! -type d)" ]
result $? "destdir_uninstall_removes_every_file" "$(find "$t/dest" ! -type d | head)"
# a system LIBDIR (as the Debian package builds): no RUNPATH
ma=$(cc -print-multiarch)
make -s install-lib DESTDIR="$t/sys" PREFIX=/usr LIBDIR="/usr/lib/$ma" > "$t/sys.log" 2>&1 &&
	[ -z "$(runpath "$t/sys/usr/bin/strixpeerctl")" ] &&
	grep -qx "libdir=/usr/lib/$ma" "$t/sys/usr/lib/$ma/pkgconfig/strixpeer.pc" &&
	grep -q "\"/usr/lib/$ma\"" "$t/sys/usr/lib/$ma/cmake/strixpeer/strixpeerConfig.cmake"
result $? "system_libdir_cli_without_runpath" "RUNPATH '$(runpath "$t/sys/usr/bin/strixpeerctl")'"
# the tree's own build is not clobbered: build/ is installable again as before
make -s lib > /dev/null 2>&1 && [ "$(runpath build/strixpeerctl)" = '$ORIGIN' ]
result $? "build_tree_cli_keeps_its_origin_runpath"

# --- 2. a real install in a throwaway root --------------------------------------
if [ "$(id -u)" -ne 0 ]; then
	skip "real_install" "needs root (a private mount namespace with an overlay of /)"
	finish
fi
for c in cmake man setpriv unshare; do
	command -v "$c" > /dev/null || { skip "real_install" "$c not installed"; finish; }
done
make -s user > /dev/null 2>&1	# built here, so the node only installs
T=$t/node
mkdir -p "$T"
unshare -m --propagation private bash -c '
	T=$1 repo=$2
	mount -t tmpfs -o mode=0755 tmpfs "$T" || exit 1
	mkdir -p "$T/u" "$T/w" "$T/root"
	mount -t overlay -o "lowerdir=/,upperdir=$T/u,workdir=$T/w" overlay "$T/root" || exit 1
	R=$T/root
	for d in proc sys dev; do mount --rbind "/$d" "$R/$d"; done
	[ -e "$R$repo/Makefile" ] || mount --bind "$repo" "$R$repo" || exit 1
	mkdir -p "$R/run/out"
	chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		bash -c "cd $repo && tests/host/install-check.sh node /run/out"
	cp "$R/run/out/"* "$T/../" 2> /dev/null
	# what the node left: files (not directories) in the upper layer
	(cd "$T/u" && find . ! -type d ! -path "./run/*" ! -path "./tmp/*" ! -path ".$repo/*" \
		! -path ./etc/ld.so.cache ! -path "./var/cache/ldconfig/*" ! -path "./root/*" ! -path "./var/cache/man/*" | sort) > "$T/../left.txt"
' node "$T" "$repo" > "$t/node-outer.log" 2>&1
if [ ! -f "$t/node.results" ]; then
	result 1 "real_install_ran" "$(tail -n 5 "$t/node-outer.log")"
	finish
fi
while read -r name st; do
	result "$st" "$name" "$(sed -n "/^== $name:/,/^== /p" "$t/node.log" | tail -n 15)"
done < "$t/node.results"
[ ! -s "$t/left.txt" ]
result $? "make_uninstall_leaves_nothing" "$(head -n 10 "$t/left.txt")"
finish
