#!/bin/sh
# Prints the path of a promtool binary, taken (never installed: the package
# would start a Prometheus server) from Debian's prometheus package into the
# cache. Prints nothing and exits 1 when it cannot be had.
set -eu
cache=${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}/promtool
bin=$cache/promtool
if [ ! -x "$bin" ]; then
	rm -rf "$cache"
	mkdir -p "$cache/deb"
	(cd "$cache/deb" && apt-get download prometheus >/dev/null 2>&1) || exit 1
	dpkg-deb -x "$cache"/deb/prometheus_*.deb "$cache/deb/root"
	cp "$cache/deb/root/usr/bin/promtool" "$bin"
	rm -rf "$cache/deb"
fi
"$bin" --version >/dev/null 2>&1 || exit 1
echo "$bin"
