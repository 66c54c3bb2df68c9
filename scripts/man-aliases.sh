#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
#   man-aliases.sh <man page dir> <version script>
#
# Prints "function:page", once, for every function the library exports (the
# version script's names) that has no page of its own: the section 3 page
# whose NAME line lists it (sp_dev_open.3, sp_buf_alloc.3, ...), else
# libstrixpeer.3 (which make install links to the overview, libstrixpeer(7)).
# 'make install' makes each an alias (a .so link: 'man sp_buf_free' shows
# sp_buf_alloc(3)); the Debian package turns them into symlinks.
set -eu
dir=$1
map=$2
# a function in two version nodes (a new default version) is listed once
for f in $(sed -n 's/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/\1/p' "$map" | sort -u); do
	[ -e "$dir/$f.3" ] && continue
	page=libstrixpeer.3
	for p in "$dir"/*.3; do
		# the NAME section's line: "a, b, c \- what they do"
		if sed -n '/^\.SH NAME/{n;p;q;}' "$p" | sed 's/\\-.*//' | tr ', ' '\n\n' |
			grep -qx "$f"; then
			page=$(basename "$p")
			break
		fi
	done
	echo "$f:$page"
done
