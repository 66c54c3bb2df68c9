#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# DKMS's POST_BUILD for strixpeer (dkms.conf), run in DKMS's build directory
# after each build:
#
#   dkms-post-build.sh <kernel release>
#
# Says what the build did about PeerDirect (Kbuild writes it to
# kmod/peerdirect.txt). A build that lost PeerDirect - OFED installed, but
# not built for this kernel - gets a banner in dkms's output (apt's, on a
# kernel update), not only a line in make.log.
kver=${1:-?}
status=$(cat kmod/peerdirect.txt 2>/dev/null) || exit 0
case $status in
LOST:*)
	echo "************************************************************************"
	echo "strixpeer for $kver: PeerDirect ${status}"
	echo "strixpeerctl status shows the same reason once this build is loaded."
	echo "************************************************************************"
	;;
*)
	echo "strixpeer for $kver: PeerDirect ${status}"
	;;
esac
exit 0
