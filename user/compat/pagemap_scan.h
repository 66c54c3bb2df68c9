/* SPDX-License-Identifier: MIT */
/*
 * PAGEMAP_SCAN (Linux 6.7, <linux/fs.h>) for headers that predate it, as
 * Debian 12's do: the ioctl on /proc/<pid>/pagemap that reports which
 * pages of a range are mapped huge. A kernel without it fails the ioctl
 * with ENOTTY (or EINVAL), which the callers take as "cannot tell".
 * Used by strixpeerctl bench (user/bench/mem.c) and tests/guest/huge_map.c.
 */
#ifndef SP_COMPAT_PAGEMAP_SCAN_H
#define SP_COMPAT_PAGEMAP_SCAN_H

#include <linux/fs.h>
#include <linux/types.h>
#include <sys/ioctl.h>

#ifndef PAGEMAP_SCAN
struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};

struct pm_scan_arg {
	__u64 size, flags, start, end, walk_end, vec, vec_len, max_pages;
	__u64 category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define PAGEMAP_SCAN	_IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_HUGE	(1 << 6)
#endif

#endif
