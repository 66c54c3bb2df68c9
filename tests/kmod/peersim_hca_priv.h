/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sp_peersim's HCA half, between its files: peersim_hca.c (the device,
 * the MRs, the misc device, load and unload), peersim_hca_dmabuf.c (the
 * dma-buf path) and peersim_hca_ioctl.c (the "DMA" and the ioctls). What
 * the core half uses too is in peersim.h.
 */
#ifndef PEERSIM_HCA_PRIV_H
#define PEERSIM_HCA_PRIV_H

#include <linux/fs.h>
#include <linux/types.h>
#include <linux/xarray.h>

#include "peersim.h"

/* Per open file: its MRs, by handle. */
struct psim_file {
	struct xarray mrs;
};

/* peersim_hca.c: the MRs */
struct psim_mr *psim_mr_alloc(u64 addr, u64 length, bool writable);

/* peersim_hca_dmabuf.c: the dma-buf path */
int psim_dmabuf_get(struct psim_mr *mr, int fd, bool pinned,
		    struct peersim_reg_dmabuf_mr *r);
int psim_dmabuf_fault(struct psim_mr *mr);

/* peersim_hca_ioctl.c: the misc device's ioctl handler */
long psim_ioctl(struct file *filp, unsigned int cmd, unsigned long arg);

#endif /* PEERSIM_HCA_PRIV_H */
