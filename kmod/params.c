// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - the module parameters of the buffers' limits and placement,
 * writable at run time in /sys/module/strixpeer/parameters/ (root) and
 * through netlink's config-set (netlink.c, under sp_config_lock). A sysfs
 * write is checked as config-set checks the value, or fails and the value
 * stays. Readers use READ_ONCE(), writers WRITE_ONCE() (strixpeer.h).
 *
 * The PeerDirect client's parameters are peer.c's, the imports' import.c's,
 * the GEM recognition's gem.c's.
 */
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/nodemask.h>
#include <linux/numa.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "strixpeer.h"

unsigned long sp_max_buf_size = 64UL << 30;

/*
 * max_buf_size: 4096 to SP_BUF_SIZE_LIMIT, as config-set takes it, or the
 * write fails (ERANGE) and the value stays.
 */
static int sp_set_max_buf_size(const char *val, const struct kernel_param *kp)
{
	unsigned long v;
	int ret = kstrtoul(val, 0, &v);

	if (ret)
		return ret;
	if (v < SZ_4K || v > SP_BUF_SIZE_LIMIT)
		return -ERANGE;
	WRITE_ONCE(*(unsigned long *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops sp_max_buf_size_ops = {
	.set = sp_set_max_buf_size,
	.get = param_get_ulong,
};
module_param_cb(max_buf_size, &sp_max_buf_size_ops, &sp_max_buf_size, 0644);
MODULE_PARM_DESC(max_buf_size,
		 "Largest buffer in bytes (default 64 GiB, at most 1 TiB: a buffer's mmap window)");

unsigned long sp_max_pinned_bytes;
module_param_named(max_pinned_bytes, sp_max_pinned_bytes, ulong, 0644);
MODULE_PARM_DESC(max_pinned_bytes,
		 "Most bytes all buffers may pin together (default 0: unlimited)");

/*
 * default_node: -1 or a node that is online and has memory, as config-set
 * takes it, or the write fails (EINVAL) and the value stays.
 */
static int sp_set_default_node(const char *val, const struct kernel_param *kp)
{
	int nid, ret = kstrtoint(val, 0, &nid);

	if (ret)
		return ret;
	if (nid != NUMA_NO_NODE &&
	    (nid < 0 || nid >= nr_node_ids || !node_state(nid, N_MEMORY)))
		return -EINVAL;
	WRITE_ONCE(*(int *)kp->arg, nid);
	return 0;
}

static const struct kernel_param_ops sp_default_node_ops = {
	.set = sp_set_default_node,
	.get = param_get_int,
};

int sp_default_node = NUMA_NO_NODE;
module_param_cb(default_node, &sp_default_node_ops, &sp_default_node, 0644);
MODULE_PARM_DESC(default_node,
		 "NUMA node for buffers that name none (-1: the caller's node)");

bool sp_require_huge;
module_param_named(require_huge, sp_require_huge, bool, 0644);
MODULE_PARM_DESC(require_huge,
		 "Buffers that do not say otherwise need 2 MiB pages (default N)");

/*
 * max_peer_pinned_per_user: GPU (dma-buf) bytes the PeerDirect mappings of
 * one uid may pin together (peer.c), CAP_IPC_LOCK or not; 0: no bound but
 * RLIMIT_MEMLOCK. A bound below one page would refuse every registration:
 * ERANGE (peerdirect=0 turns PeerDirect off).
 */
static int sp_set_peer_pinned(const char *val, const struct kernel_param *kp)
{
	unsigned long v;
	int ret = kstrtoul(val, 0, &v);

	if (ret)
		return ret;
	if (v && v < PAGE_SIZE)
		return -ERANGE;
	WRITE_ONCE(*(unsigned long *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops sp_peer_pinned_ops = {
	.set = sp_set_peer_pinned,
	.get = param_get_ulong,
};

unsigned long sp_max_peer_pinned_per_user;
module_param_cb(max_peer_pinned_per_user, &sp_peer_pinned_ops,
		&sp_max_peer_pinned_per_user, 0644);
MODULE_PARM_DESC(max_peer_pinned_per_user,
		 "Most GPU bytes one user's PeerDirect registrations may pin, CAP_IPC_LOCK too (default 0: only RLIMIT_MEMLOCK)");

/*
 * allocator: where new buffers' pages come from. "pages" (default):
 * alloc_pages_node(), 2 MiB first (buffer.c). "shmem": a file of a private
 * tmpfs mount per node (shmem.c), which GUP-fast pins 512 pages at a time
 * on every kernel. A write changes the allocator of buffers made after
 * it; each buffer keeps the one it was made with. Not through config-set.
 */
int sp_allocator = SP_ALLOC_PAGES;

static const char * const sp_allocator_names[] = {
	[SP_ALLOC_PAGES] = "pages",
	[SP_ALLOC_SHMEM] = "shmem",
};

static int sp_set_allocator(const char *val, const struct kernel_param *kp)
{
	int v = sysfs_match_string(sp_allocator_names, val);

	if (v < 0)
		return -EINVAL;
	/* shmem.c needs tmpfs (not ramfs) and huge tmpfs pages */
	if (v == SP_ALLOC_SHMEM && !(IS_ENABLED(CONFIG_SHMEM) &&
				     IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE)))
		return -EOPNOTSUPP;
	WRITE_ONCE(*(int *)kp->arg, v);
	return 0;
}

static int sp_get_allocator(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%s\n",
			 sp_allocator_names[READ_ONCE(*(int *)kp->arg)]);
}

static const struct kernel_param_ops sp_allocator_ops = {
	.set = sp_set_allocator,
	.get = sp_get_allocator,
};
module_param_cb(allocator, &sp_allocator_ops, &sp_allocator, 0644);
MODULE_PARM_DESC(allocator,
		 "Allocator of new buffers: pages (default) or shmem");
