// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - the module-wide counters (struct sp_stats) and their read-only
 * files in /sys/class/misc/strixpeer/stats/, which main.c's misc device
 * carries. Every mechanism updates the counters with atomic64 operations;
 * this file calls into none of them.
 */
#include <linux/device.h>
#include <linux/sysfs.h>

#include "strixpeer.h"

struct sp_stats sp_stats;

#define SP_STAT_ATTR(_name)						\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *out)	\
{									\
	return sysfs_emit(out, "%lld\n",				\
			  (long long)atomic64_read(&sp_stats._name));	\
}									\
static DEVICE_ATTR_RO(_name)

SP_STAT_ATTR(buffers);
SP_STAT_ATTR(pinned_bytes);
SP_STAT_ATTR(peak_pinned_bytes);
SP_STAT_ATTR(allocs);
SP_STAT_ATTR(frees);
SP_STAT_ATTR(fail_nomem);
SP_STAT_ATTR(fail_memlock);
SP_STAT_ATTR(fail_max_buf_size);
SP_STAT_ATTR(fail_max_pinned);
SP_STAT_ATTR(mmaps);
SP_STAT_ATTR(peer_pinned_bytes);

static struct attribute *sp_attrs[] = {
	&dev_attr_buffers.attr,
	&dev_attr_pinned_bytes.attr,
	&dev_attr_peak_pinned_bytes.attr,
	&dev_attr_allocs.attr,
	&dev_attr_frees.attr,
	&dev_attr_fail_nomem.attr,
	&dev_attr_fail_memlock.attr,
	&dev_attr_fail_max_buf_size.attr,
	&dev_attr_fail_max_pinned.attr,
	&dev_attr_mmaps.attr,
	&dev_attr_peer_pinned_bytes.attr,
	NULL,
};

static const struct attribute_group sp_attr_group = {
	.name = "stats",
	.attrs = sp_attrs,
};

const struct attribute_group *sp_stats_groups[] = {
	&sp_attr_group,
	NULL,
};
