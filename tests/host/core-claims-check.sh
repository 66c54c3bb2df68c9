#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# No text in the tree claims a peer-memory core where there is none: since
# 6.8 Ubuntu's generic kernels have none (Ubuntu Discourse topic 44425), so
# "Ubuntu's kernels" (or "an Ubuntu kernel", "OFED, Ubuntu") named as where
# a core, the peer-memory API or PeerDirect comes from is wrong unless the
# same passage says which Ubuntu kernels (linux-nvidia, before 6.8, 5.15,
# generic ones having none). Every file git tracks is read (binary files
# skipped), two lines at a time so that a claim wrapped over a line break is
# caught. The matcher is first checked on known claims and known correct
# sentences, so that a rule that matches nothing cannot pass. Prints TAP.
#
#   core-claims-check.sh [FILE...]   (default: every tracked file)
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh

# A claim: Ubuntu named beside a core word, with no word that says which
# Ubuntu kernels; both within two lines.
ubuntu='Ubuntu'	# the name in prose, not ubuntu-* paths or versions
coreword='ib_core|ib_uverbs|the api|peer[- _]?mem|peerdirect|peer-direct|peer core|peer-memory api|ib_register_peer_memory_client|ib_umem_get_peer|(the|a|its) core\b|core\)|\bcore[:;,]'
qualifier='nvidia|generic|6\.8|6\.5|5\.15|5\.4|before 6|no core|none|dropped|not ubuntu|ubuntu.s announcement|discourse'

# Correct sentences the rule would take for claims (Ubuntu beside a core
# word that is about something else), as exact fragments.
allowed=(
	"Every Debian and Ubuntu kernel has all of them"
	"Ubuntu's and Fedora's kernels and OFED are not booted by"
)

# claims <file>: "LINE: text" for each claim in the file
claims() {
	awk -v u="$ubuntu" -v c="$coreword" -v q="$qualifier" -v ok="$(printf '%s\n' "${allowed[@]}")" '
		BEGIN { nok = split(ok, oks, "\n") }
		function check(text, at,    k) {
			t = tolower(text)
			for (k = 1; k <= nok; k++)
				if (oks[k] != "" && index(text, oks[k]))
					return
			if (text ~ u && t ~ c && t !~ q)
				printf "%d: %s\n", at, substr(text, 1, 160)
		}
		{ line[NR] = $0 }
		END {
			for (i = 1; i <= NR; i++) {
				# the line alone, then with the next (a wrapped claim)
				t = tolower(line[i])
				if (line[i] ~ u && t ~ c && t !~ q) {
					check(line[i] " " line[i + 1], i)
					continue
				}
				if (i < NR && (line[i] ~ u || line[i + 1] ~ u))
					check(line[i] " " line[i + 1], i)
			}
		}' "$1" | awk '!seen[$0]++'
}

# The matcher on what it must find and what it must leave alone.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/bad" <<'EOF'
kernel with the peer-memory API: MLNX_OFED/DOCA-OFED or Ubuntu's kernels
 * DOCA-OFED's ib_core and by Ubuntu kernels ("RDMA/core: Introduce peer
| driver | no peer core (Debian, Fedora, sid) | peer core (OFED, Ubuntu) |
From then on, when the kernel's peer-memory core (MLNX_OFED/DOCA-OFED, or an
Ubuntu kernel) fails to pin a registration
EOF
cat > "$tmp/good" <<'EOF'
kernel with the peer-memory API: MLNX_OFED/DOCA-OFED on any kernel, or
Ubuntu's `linux-nvidia` kernels; Ubuntu's generic kernels have none since
6.8 (Ubuntu Discourse topic 44425), Debian's and Fedora's none at all
Tested on Debian 12; built the same way on Ubuntu, untested there.
  `CONFIG_INTERVAL_TREE` (every Debian and Ubuntu kernel has them);
| peer core (OFED, Ubuntu `linux-nvidia`) |
EOF
found=$(claims "$tmp/bad" | wc -l)
result "$([ "$found" -eq 4 ]; echo $?)" "matcher_finds_known_claims" \
	"found $found of 4 claims: $(claims "$tmp/bad")"
found=$(claims "$tmp/good")
result "$([ -z "$found" ]; echo $?)" "matcher_leaves_correct_sentences_alone" "$found"

if [ $# -gt 0 ]; then
	files=("$@")
else
	mapfile -t files < <(git ls-files)
fi
checked=0
for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	# NEWS records what each release said at the time
	case $f in tests/host/core-claims-check.sh | NEWS) continue ;; esac
	grep -Iq . "$f" 2> /dev/null || continue	# binary or empty
	checked=$((checked + 1))
	while IFS= read -r hit; do
		[ -n "$hit" ] || continue
		num=${hit%%:*}
		result 1 "no_core_claim_${f//[^A-Za-z0-9]/_}_$num" \
			"$f:$hit (name which Ubuntu kernels: linux-nvidia has a core, generic ones since 6.8 none)"
	done < <(claims "$f")
done
result "$([ "$checked" -gt 0 ]; echo $?)" "files_read" "no file read"
echo "# $checked files read" >&2
finish
