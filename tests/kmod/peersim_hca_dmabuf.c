// SPDX-License-Identifier: GPL-2.0
/*
 * sp_peersim's HCA half, its dma-buf path (see peersim_hca.c): dma-buf MRs
 * as ib_umem_dmabuf makes them - a dynamic attachment (or a pinned one),
 * the exporter's table trimmed to the MR and split at the device's
 * max_seg_size into the MTT, the importer callback for a moving buffer,
 * and the "page fault" that maps a moved MR again. Locking: the dma-buf's
 * reservation lock, then mr->dma_sem (peersim_core.c's header comment).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/dma-buf.h>
#include <linux/dma-direct.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/highmem.h>
#include <linux/iosys-map.h>
#include <linux/kernfs.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/log2.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/platform_device.h>
#include <linux/refcount.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "peersim_conftest.h"
#include "peersim.h"
#include "peersim_hca_priv.h"

/* The importer callback for a moving buffer: renamed in 7.x. */
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
#define PSIM_DMA_BUF_MOVE_NOTIFY	invalidate_mappings
#else
#define PSIM_DMA_BUF_MOVE_NOTIFY	move_notify
#endif

/* --- dma-buf path (ib_umem_dmabuf) ----------------------------------------- */

/*
 * Walks the exporter's DMA segments, keeping the part inside the MR's
 * PAGE_SIZE-aligned range [start, end) as ib_umem_dmabuf_map_pages() trims
 * its first and last entry, and splitting what is kept at the device's
 * max_seg_size as the HCA writes its translation table. Counts the entries
 * (fills out when given) and the bytes that lie in the range.
 */
static unsigned int psim_dmabuf_walk(struct psim_mr *mr, struct sg_table *sgt,
				     struct psim_seg *out, u64 *covered)
{
	u64 start = ALIGN_DOWN(mr->addr, PAGE_SIZE);
	u64 end = ALIGN(mr->addr + mr->length, PAGE_SIZE);
	u64 max = dma_get_max_seg_size(psim_dev);
	struct scatterlist *sg;
	unsigned int n = 0;
	u64 cur = 0;
	int i;

	*covered = 0;
	for_each_sgtable_dma_sg(sgt, sg, i) {
		u64 len = sg_dma_len(sg);
		u64 s = max(cur, start), e = min(cur + len, end);

		if (s < e) {
			dma_addr_t addr = sg_dma_address(sg) + (s - cur);

			*covered += e - s;
			while (s < e) {
				u64 k = min(e - s, max);

				if (out) {
					out[n].addr = addr;
					out[n].len = k;
				}
				n++;
				addr += k;
				s += k;
			}
		}
		cur += len;
		if (cur >= end)
			break;
	}
	return n;
}

/* Gives the exporter its mapping back. Context: resv held, DMA fenced. */
static void psim_dmabuf_unmap(struct psim_mr *mr)
{
	dma_resv_assert_held(mr->dbuf->resv);
	lockdep_assert_held_write(&mr->dma_sem);

	if (!mr->dbuf_sgt)
		return;
	kvfree(mr->mtt);
	mr->mtt = NULL;
	mr->nmtt = 0;
	mr->dma_bytes = 0;
	mr->max_seg = 0;
	dma_buf_unmap_attachment(mr->dbuf_attach, mr->dbuf_sgt,
				 DMA_BIDIRECTIONAL);
	mr->dbuf_sgt = NULL;
}

/*
 * ib_umem_dmabuf_map_pages(): maps the attachment unless it is mapped,
 * builds the MTT from the exporter's table, waits for the kernel fences
 * (the exporter's moves), and only then lets DMA in.
 * Context: resv held; takes dma_sem.
 */
static int psim_dmabuf_map(struct psim_mr *mr)
{
	struct dma_resv *resv = mr->dbuf->resv;
	struct psim_seg *mtt = NULL;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned int n, i;
	u64 covered, need;
	long lret;

	dma_resv_assert_held(resv);

	if (!mr->dbuf_sgt) {
		sgt = dma_buf_map_attachment(mr->dbuf_attach, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt))
			return PTR_ERR(sgt);
		need = ALIGN(mr->addr + mr->length, PAGE_SIZE) -
		       ALIGN_DOWN(mr->addr, PAGE_SIZE);
		n = psim_dmabuf_walk(mr, sgt, NULL, &covered);
		if (!n || covered < need) {
			pr_err("dma-buf exporter %s: DMA mapping covers %llu of the %llu bytes at offset %#lx (buffer %zu bytes)\n",
			       mr->dbuf->exp_name, covered, need,
			       ALIGN_DOWN(mr->addr, PAGE_SIZE), mr->dbuf->size);
			dma_buf_unmap_attachment(mr->dbuf_attach, sgt,
						 DMA_BIDIRECTIONAL);
			return -EINVAL;
		}
		mtt = kvmalloc_array(n, sizeof(*mtt), GFP_KERNEL);
		if (!mtt) {
			dma_buf_unmap_attachment(mr->dbuf_attach, sgt,
						 DMA_BIDIRECTIONAL);
			return -ENOMEM;
		}
		psim_dmabuf_walk(mr, sgt, mtt, &covered);

		down_write(&mr->dma_sem);
		mr->dbuf_sgt = sgt;
		mr->exp_nents = sgt->nents;
		mr->exp_max_seg = 0;
		for_each_sgtable_dma_sg(sgt, sg, i)
			mr->exp_max_seg = max_t(u64, mr->exp_max_seg,
						sg_dma_len(sg));
		mr->mtt = mtt;
		mr->nmtt = n;
		mr->first_off = mr->addr & ~PAGE_MASK;
		mr->dma_bytes = covered;
		mr->max_seg = 0;
		for (i = 0; i < n; i++)
			mr->max_seg = max(mr->max_seg, mtt[i].len);
		up_write(&mr->dma_sem);
	}

	/*
	 * The table is valid now, the contents may not be yet: wait for the
	 * exporter's move (kernel fences) to finish.
	 */
	lret = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, false,
				     MAX_SCHEDULE_TIMEOUT);
	if (lret <= 0) {
		down_write(&mr->dma_sem);
		mr->dma_off = true;
		psim_dmabuf_unmap(mr);
		up_write(&mr->dma_sem);
		return lret ? (int)lret : -ETIMEDOUT;
	}

	down_write(&mr->dma_sem);
	if (!mr->deregistered)
		mr->dma_off = false;
	up_write(&mr->dma_sem);
	return 0;
}

/**
 * psim_dmabuf_fault() - map a moved dma-buf MR again
 * @mr: the MR
 *
 * The "page fault" of a dma-buf MR the exporter moved: maps it again under
 * the reservation lock, as mlx5's ODP fault handler does for dma-buf MRs.
 * Nothing to do when it is mapped (or pinned, which never moves).
 *
 * Return: 0, or a negative errno.
 */
int psim_dmabuf_fault(struct psim_mr *mr)
{
	struct dma_resv *resv = mr->dbuf->resv;
	int ret;

	if (READ_ONCE(mr->dbuf_sgt) || mr->dbuf_pinned)
		return 0;
	ret = dma_resv_lock_interruptible(resv, NULL);
	if (ret)
		return ret;
	/*
	 * Deregistration fences before it takes resv to unmap and detach:
	 * seen here, the attachment may be gone.
	 */
	down_read(&mr->dma_sem);
	ret = mr->deregistered ? -ENOENT : 0;
	up_read(&mr->dma_sem);
	if (!ret)
		ret = psim_dmabuf_map(mr);
	dma_resv_unlock(resv);
	return ret;
}

/*
 * move_notify (7.x: invalidate_mappings): the exporter is about to move the
 * buffer. Fences the MR's DMA (waits for in-flight transfers, as mlx5
 * zaps the MTT and waits), gives the mapping back, and leaves the MR to be
 * mapped again at its next use. Context: the exporter holds resv.
 */
static void psim_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	struct psim_mr *mr = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);

	atomic_inc(&mr->free_callbacks);
	down_write(&mr->dma_sem);
	mr->dma_off = true;
	mr->invalidated_at_ns = ktime_get_ns();
	psim_dmabuf_unmap(mr);
	up_write(&mr->dma_sem);
}

static const struct dma_buf_attach_ops psim_dmabuf_attach_ops = {
	.allow_peer2peer = true,
	.PSIM_DMA_BUF_MOVE_NOTIFY = psim_dmabuf_move_notify,
};

/* A pinned attachment must never be moved (ib_core only warns). */
static void psim_dmabuf_pinned_move_notify(struct dma_buf_attachment *attach)
{
	struct psim_mr *mr = attach->importer_priv;

	atomic_inc(&mr->free_callbacks);
	dev_warn_ratelimited(psim_dev,
			     "move_notify for a pinned dma-buf MR (exporter %s)\n",
			     attach->dmabuf->exp_name);
}

static const struct dma_buf_attach_ops psim_dmabuf_pinned_attach_ops = {
	.allow_peer2peer = true,
	.PSIM_DMA_BUF_MOVE_NOTIFY = psim_dmabuf_pinned_move_notify,
};

/**
 * psim_dmabuf_get() - register a dma-buf MR
 * @mr: the MR (addr: offset into the dma-buf)
 * @fd: the dma-buf's fd
 * @pinned: dma_buf_pin() the attachment (ib_umem_dmabuf_get_pinned())
 * @r: receives the mapping's entries and longest entry
 *
 * ib_umem_dmabuf_get() (+ _pinned()) and the first mapping mlx5 makes at
 * registration. Reports the mapping's entries and longest entry.
 *
 * Return: 0, or a negative errno.
 */
int psim_dmabuf_get(struct psim_mr *mr, int fd, bool pinned,
		    struct peersim_reg_dmabuf_mr *r)
{
	struct dma_buf_attachment *attach;
	struct dma_buf *dbuf;
	u64 end;
	int ret;

	if (!mr->length || check_add_overflow((u64)mr->addr, (u64)mr->length, &end))
		return -EINVAL;
	dbuf = dma_buf_get(fd);
	if (IS_ERR(dbuf)) {
		ret = PTR_ERR(dbuf);
		/* dma_buf_get() says EINVAL for a file that is no dma-buf */
		return ret == -EINVAL ? -EBADF : ret;
	}
	if (end > dbuf->size) {
		ret = -EINVAL;
		goto out_put;
	}
	mr->dbuf = dbuf;
	mr->path = PEERSIM_PATH_DMABUF;
	mr->page_size = PAGE_SIZE;
	mr->dbuf_pinned = pinned;
	mr->dma_off = true;	/* until mapped */

	attach = dma_buf_dynamic_attach(dbuf, psim_dev,
					pinned ? &psim_dmabuf_pinned_attach_ops :
						 &psim_dmabuf_attach_ops, mr);
	if (IS_ERR(attach)) {
		ret = PTR_ERR(attach);
		goto out_put;
	}
	mr->dbuf_attach = attach;

	dma_resv_lock(dbuf->resv, NULL);
	if (pinned) {
		ret = dma_buf_pin(attach);
		if (ret)
			goto out_unlock;
	}
	ret = psim_dmabuf_map(mr);
	if (ret)
		goto out_unpin;
	/* the MTT is stable while resv is held */
	r->nents = mr->nmtt;
	r->max_seg = mr->max_seg;
	r->exp_nents = mr->exp_nents;
	r->exp_max_seg = mr->exp_max_seg;
	dma_resv_unlock(dbuf->resv);
	return 0;

out_unpin:
	if (pinned)
		dma_buf_unpin(attach);
out_unlock:
	dma_resv_unlock(dbuf->resv);
	dma_buf_detach(dbuf, attach);
	mr->dbuf_attach = NULL;
out_put:
	mr->dbuf = NULL;
	dma_buf_put(dbuf);
	return ret;
}

/*
 * ib_umem_dmabuf_release(), except that the dma-buf reference goes with
 * the MR's last reference (psim_mr_free()): an ioctl still holding the MR
 * may look at its reservation lock. Context: the MR is fenced
 * (deregistered).
 */
void psim_dmabuf_release(struct psim_mr *mr)
{
	struct dma_buf *dbuf = mr->dbuf;

	dma_resv_lock(dbuf->resv, NULL);
	down_write(&mr->dma_sem);
	psim_dmabuf_unmap(mr);
	up_write(&mr->dma_sem);
	if (mr->dbuf_pinned)
		dma_buf_unpin(mr->dbuf_attach);
	dma_resv_unlock(dbuf->resv);

	dma_buf_detach(dbuf, mr->dbuf_attach);
	mr->dbuf_attach = NULL;
}
