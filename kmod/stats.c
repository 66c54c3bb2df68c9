// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - the module-wide counters (struct sp_stats): the one table that
 * names each counter's netlink attribute and sysfs file, the stats-get reply
 * netlink.c sends, and the read-only files in /sys/class/misc/strixpeer/stats/
 * that main.c's misc device carries. Every mechanism updates the counters
 * with atomic64 operations; this file calls into none of them.
 *
 * A new counter is a field of struct sp_stats, a line of sp_stat_table[] and
 * its attribute in docs/netlink/strixpeer.yaml ("make netlink-gen" then
 * regenerates include/uapi/strixpeer_nl.h); tests/host/spec-check.py checks
 * that the table, the header and the spec agree.
 */
#include <linux/device.h>
#include <linux/kernel.h>
#include <linux/sysfs.h>
#include <net/netlink.h>

#include "strixpeer.h"

struct sp_stats sp_stats;

/**
 * struct sp_stat - one counter of struct sp_stats
 * @file: its file in stats/, or NULL when only netlink carries it
 * @attr: its STRIXPEER_A_STATS_* attribute
 * @counter: the counter
 */
struct sp_stat {
	const char *file;
	int attr;
	atomic64_t *counter;
};

static const struct sp_stat sp_stat_table[] = {
	{ "buffers", STRIXPEER_A_STATS_BUFFERS, &sp_stats.buffers },
	{ "pinned_bytes", STRIXPEER_A_STATS_PINNED_BYTES, &sp_stats.pinned_bytes },
	{ "peak_pinned_bytes", STRIXPEER_A_STATS_PEAK_PINNED_BYTES,
	  &sp_stats.peak_pinned_bytes },
	{ "allocs", STRIXPEER_A_STATS_ALLOCS, &sp_stats.allocs },
	{ "frees", STRIXPEER_A_STATS_FREES, &sp_stats.frees },
	{ "fail_nomem", STRIXPEER_A_STATS_FAIL_NOMEM, &sp_stats.fail_nomem },
	{ "fail_memlock", STRIXPEER_A_STATS_FAIL_MEMLOCK, &sp_stats.fail_memlock },
	{ "fail_max_buf_size", STRIXPEER_A_STATS_FAIL_MAX_BUF_SIZE,
	  &sp_stats.fail_max_buf_size },
	{ "fail_max_pinned", STRIXPEER_A_STATS_FAIL_MAX_PINNED,
	  &sp_stats.fail_max_pinned },
	{ "mmaps", STRIXPEER_A_STATS_MMAPS, &sp_stats.mmaps },
	{ "peer_pinned_bytes", STRIXPEER_A_STATS_PEER_PINNED_BYTES,
	  &sp_stats.peer_pinned_bytes },
	{ NULL, STRIXPEER_A_STATS_PEER_ACQUIRES, &sp_stats.peer_acquires },
	{ NULL, STRIXPEER_A_STATS_PEER_CLAIMS, &sp_stats.peer_claims },
	{ NULL, STRIXPEER_A_STATS_PEER_MAPS, &sp_stats.peer_maps },
	{ NULL, STRIXPEER_A_STATS_PEER_INVALIDATIONS,
	  &sp_stats.peer_invalidations },
	{ NULL, STRIXPEER_A_STATS_PEER_REGISTRATIONS,
	  &sp_stats.peer_registrations },
	{ NULL, STRIXPEER_A_STATS_IMPORTS, &sp_stats.imports },
	{ NULL, STRIXPEER_A_STATS_DMABUF_EXPORTS, &sp_stats.dmabuf_exports },
	{ NULL, STRIXPEER_A_STATS_DMABUF_ATTACHMENTS,
	  &sp_stats.dmabuf_attachments },
	{ NULL, STRIXPEER_A_STATS_PEER_FAIL_LIMIT, &sp_stats.peer_fail_limit },
};

int sp_stats_put(struct sk_buff *msg)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sp_stat_table); i++)
		if (nla_put_u64_64bit(msg, sp_stat_table[i].attr,
				      atomic64_read(sp_stat_table[i].counter),
				      STRIXPEER_A_STATS_PAD))
			return -EMSGSIZE;
	return 0;
}

static ssize_t sp_stat_show(struct device *dev, struct device_attribute *attr,
			    char *out)
{
	struct dev_ext_attribute *ea =
		container_of(attr, struct dev_ext_attribute, attr);

	return sysfs_emit(out, "%lld\n", (long long)atomic64_read(ea->var));
}

/* sp_stats_init() fills them from sp_stat_table[] before the device exists. */
static struct dev_ext_attribute sp_stat_files[ARRAY_SIZE(sp_stat_table)];
static struct attribute *sp_attrs[ARRAY_SIZE(sp_stat_table) + 1];

void sp_stats_init(void)
{
	size_t i, n = 0;

	for (i = 0; i < ARRAY_SIZE(sp_stat_table); i++) {
		struct dev_ext_attribute *ea = &sp_stat_files[n];

		if (!sp_stat_table[i].file)
			continue;
		sysfs_attr_init(&ea->attr.attr);
		ea->attr.attr.name = sp_stat_table[i].file;
		ea->attr.attr.mode = 0444;
		ea->attr.show = sp_stat_show;
		ea->var = sp_stat_table[i].counter;
		sp_attrs[n++] = &ea->attr.attr;
	}
	sp_attrs[n] = NULL;
}

static const struct attribute_group sp_attr_group = {
	.name = "stats",
	.attrs = sp_attrs,
};

const struct attribute_group *sp_stats_groups[] = {
	&sp_attr_group,
	NULL,
};
