#!/bin/sh
# apt-sid.sh: apt-cache / apt-get download on Debian sid (unstable) through a
# private apt configuration in the cache. The host's sources.list, package
# lists and dpkg state are neither read nor written: sid is only ever a
# place to download packages from, to unpack them (never install them).
#
#   apt-sid.sh update               fetch sid's package lists (at most every 6 h)
#   apt-sid.sh cache <args...>      apt-cache <args...> on sid
#   apt-sid.sh download <pkgs...>   apt-get download into the current directory
#
# Cache: ${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}/apt-sid/.
# STRIXPEER_SID_MIRROR overrides the mirror (default http://deb.debian.org/debian).
set -eu

CACHE=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}
D=$CACHE/apt-sid
MIRROR=${STRIXPEER_SID_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

mkdir -p "$D/lists/partial" "$D/cache/archives/partial" "$D/prefs.d" "$D/parts.d"
echo "deb [arch=amd64 signed-by=$KEYRING] $MIRROR sid main" > "$D/sources.list"
: > "$D/status"
: > "$D/preferences"

case $D in *" "*) echo "apt-sid.sh: the cache path must not contain spaces: $D" >&2; exit 1 ;; esac
OPTS="-o Dir::Etc::sourcelist=$D/sources.list -o Dir::Etc::sourceparts=$D/parts.d
 -o Dir::Etc::preferences=$D/preferences -o Dir::Etc::preferencesparts=$D/prefs.d
 -o Dir::State::lists=$D/lists -o Dir::State::status=$D/status -o Dir::Cache=$D/cache
 -o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o Debug::NoLocking=1"
# as root, apt would hand downloads to user _apt, who cannot write to a
# cache under root's home
[ "$(id -u)" -ne 0 ] || OPTS="$OPTS -o APT::Sandbox::User=root"

run() {	# run <apt-get|apt-cache> <args...> with the private options
	prog=$1
	shift
	# shellcheck disable=SC2086 # word splitting wanted
	"$prog" $OPTS "$@"
}

case ${1:-} in
update)
	stamp=$D/lists/.updated
	if [ -f "$stamp" ] && [ -z "$(find "$stamp" -mmin +360)" ]; then
		exit 0
	fi
	[ -f "$KEYRING" ] || { echo "apt-sid.sh: no $KEYRING (package debian-archive-keyring)" >&2; exit 1; }
	run apt-get -q update >&2
	touch "$stamp"
	;;
cache)
	shift
	run apt-cache "$@"
	;;
download)
	shift
	run apt-get -q download "$@"
	;;
*)
	echo "usage: $0 update | cache <args...> | download <pkgs...>" >&2
	exit 2
	;;
esac
