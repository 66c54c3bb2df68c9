/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sp_kfdsim's parts (tests/kmod/kfdsim.c, kfdsim_dmabuf.c): what the
 * userptr side and the dma-buf import share.
 */
#ifndef SP_KFDSIM_PRIV_H
#define SP_KFDSIM_PRIV_H

#include <linux/device.h>
#include <linux/types.h>

struct kfdsim_import;

/* tests/lib/sp_test.h's sp_pattern() (rdma/rc.c's): splitmix64's finaliser */
static inline u8 kfdsim_pattern(u64 pos, u32 seed)
{
	u64 x = (pos + 1) * 0x9E3779B97F4A7C15ULL +
		((u64)seed + 1) * 0xD1B54A32D192ED03ULL;

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return (u8)(x ^ (x >> 31));
}

/*
 * The SP_KFDSIM_IOC_IMPORT* ioctls of one file, whose import is *@imp
 * (NULL: none), for the "GPU" @dev. Context: the file's lock held.
 */
long kfdsim_dmabuf_ioctl(struct device *dev, struct kfdsim_import **imp,
			 unsigned int cmd, void __user *arg);

/* Drops an import: unmap, detach, the dma-buf reference. */
void kfdsim_dmabuf_destroy(struct kfdsim_import *imp);

#endif /* SP_KFDSIM_PRIV_H */
