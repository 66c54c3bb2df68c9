// SPDX-License-Identifier: GPL-2.0
/*
 * sp_peersim's HCA half (peersim_hca.c): the simulated HCA that drives
 * the simulated core of peersim_core.c (see there for what the module
 * simulates). It owns the HCA's platform device (whose struct device the
 * DMA API maps for), its misc device and ioctls, the MRs (their
 * translation table, the "MTT", and the DMA fence), the dma-buf path
 * (ib_umem_dmabuf), the "DMA" copies, and module_init/module_exit, which
 * bring up the core first, then the HCA.
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

/* Symbol namespaces are string literals since 6.13 (cdd30ebb1b9f). */
#ifdef PSIM_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

/* A dma-buf's kernel mapping without holding its resv lock: 6.2 split it. */
static int psim_dma_buf_vmap(struct dma_buf *dbuf, struct iosys_map *map)
{
#ifdef PSIM_HAVE_DMA_BUF_VMAP_UNLOCKED
	return dma_buf_vmap_unlocked(dbuf, map);
#else
	return dma_buf_vmap(dbuf, map);
#endif
}

static void psim_dma_buf_vunmap(struct dma_buf *dbuf, struct iosys_map *map)
{
#ifdef PSIM_HAVE_DMA_BUF_VMAP_UNLOCKED
	dma_buf_vunmap_unlocked(dbuf, map);
#else
	dma_buf_vunmap(dbuf, map);
#endif
}

/* The importer callback for a moving buffer: renamed in 7.x. */
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
#define PSIM_DMA_BUF_MOVE_NOTIFY	invalidate_mappings
#else
#define PSIM_DMA_BUF_MOVE_NOTIFY	move_notify
#endif

static unsigned int max_seg_size;
module_param(max_seg_size, uint, 0444);
MODULE_PARM_DESC(max_seg_size,
		 "DMA max segment size of the simulated HCA in bytes (0: the kernel default, 64 KiB; mlx5 uses 2 GiB)");

/* "DMA" is done in chunks of this size, through a bounce buffer. */
#define PSIM_DMA_CHUNK		SZ_64K
/* At most this many clients are reported by PEERSIM_IOC_CLIENTS. */
#define PSIM_MAX_CLIENTS_REPORT	256

/* Per open file: its MRs, by handle. */
struct psim_file {
	struct xarray mrs;
};

struct device *psim_dev;
static struct platform_device *psim_pdev;

atomic64_t psim_live_mrs = ATOMIC64_INIT(0);

/* --- MRs -------------------------------------------------------------------- */

static struct psim_mr *psim_mr_alloc(u64 addr, u64 length, bool writable)
{
	struct psim_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL);

	if (!mr)
		return NULL;
	kref_init(&mr->kref);
	mr->addr = addr;
	mr->length = length;
	mr->writable = writable;
	mr->xa_id = PSIM_NO_INVALIDATION_ID;
	init_rwsem(&mr->dma_sem);
	mutex_init(&mr->mapping_lock);
	mr->mm = current->mm;
	mmgrab(mr->mm);
	return mr;
}

void psim_mr_free(struct kref *kref)
{
	struct psim_mr *mr = container_of(kref, struct psim_mr, kref);

	kvfree(mr->mtt);
	if (mr->dbuf)
		dma_buf_put(mr->dbuf);
	mutex_destroy(&mr->mapping_lock);
	kfree(mr);
}


/*
 * The DMA fence: waits for in-flight DMA, then no DMA touches the MR's
 * memory any more. For an invalidation this is what revoking the mkey is
 * to mlx5; deregistration does it first too.
 */
void psim_mr_fence(struct psim_mr *mr, bool invalidation)
{
	down_write(&mr->dma_sem);
	if (invalidation && !mr->invalidated) {
		mr->invalidated = true;
		mr->invalidated_at_ns = ktime_get_ns();
	}
	if (!invalidation)
		mr->deregistered = true;
	mr->dma_off = true;
	up_write(&mr->dma_sem);
}

/*
 * Copies the first n DMA segments of sgl into the MR's translation table,
 * the way an HCA driver writes its MTT; checks they cover the range.
 */
int psim_mtt_build(struct psim_mr *mr, struct scatterlist *sgl,
			  unsigned int n, u64 first_off)
{
	struct scatterlist *sg;
	u64 total = 0;
	unsigned int i;

	if (!sgl || !n) {
		if (mr->path == PEERSIM_PATH_PEER)
			psim_client_err(mr, "dma_map() succeeded with an empty mapping\n");
		return -EINVAL;
	}
	mr->mtt = kvmalloc_array(n, sizeof(*mr->mtt), GFP_KERNEL);
	if (!mr->mtt)
		return -ENOMEM;
	for_each_sg(sgl, sg, n, i) {
		mr->mtt[i].addr = sg_dma_address(sg);
		mr->mtt[i].len = sg_dma_len(sg);
		total += sg_dma_len(sg);
	}
	if (total < first_off + mr->length) {
		if (mr->path == PEERSIM_PATH_PEER)
			psim_client_err(mr, "%u DMA segments hold %llu bytes, the range needs %llu (offset %llu + length %zu)\n",
					n, total, first_off + mr->length,
					first_off, mr->length);
		kvfree(mr->mtt);
		mr->mtt = NULL;
		return -EINVAL;
	}
	mr->nmtt = n;
	mr->first_off = first_off;
	mr->dma_bytes = total;
	return 0;
}

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

/*
 * The "page fault" of a dma-buf MR the exporter moved: maps it again under
 * the reservation lock, as mlx5's ODP fault handler does for dma-buf MRs.
 * Nothing to do when it is mapped (or pinned, which never moves).
 */
static int psim_dmabuf_fault(struct psim_mr *mr)
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

/*
 * ib_umem_dmabuf_get() (+ _pinned()) and the first mapping mlx5 makes at
 * registration. Reports the mapping's entries and longest entry.
 */
static int psim_dmabuf_get(struct psim_mr *mr, int fd, bool pinned,
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

/* --- "DMA" ------------------------------------------------------------------- */

/* Copies between buf and the RAM at phys, page by page. */
static int psim_copy_phys(phys_addr_t phys, void *buf, size_t n, bool to_mem)
{
	while (n) {
		unsigned long pfn = PHYS_PFN(phys);
		size_t off = offset_in_page(phys);
		size_t k = min_t(size_t, n, PAGE_SIZE - off);
		struct page *page;
		void *va;

		if (!pfn_valid(pfn)) {
			pr_warn_ratelimited("DMA to %pa: not RAM\n", &phys);
			return -EIO;
		}
		page = pfn_to_page(pfn);
		va = kmap_local_page(page);
		if (to_mem) {
			memcpy(va + off, buf, k);
			flush_dcache_page(page);
		} else {
			memcpy(buf, va + off, k);
		}
		kunmap_local(va);
		phys += k;
		buf += k;
		n -= k;
	}
	return 0;
}

/*
 * Transfers n bytes at the MR position (*si, *soff), advancing it.
 * Context: the caller holds dma_sem for reading and found DMA allowed.
 */
static int psim_dma_chunk(struct psim_mr *mr, unsigned int *si, u64 *soff,
			  void *buf, size_t n, bool to_mem)
{
	lockdep_assert_held_read(&mr->dma_sem);

	while (n) {
		struct psim_seg *seg;
		size_t k;
		int ret;

		if (*si >= mr->nmtt)
			return -EIO;
		seg = &mr->mtt[*si];
		if (*soff >= seg->len) {
			(*si)++;
			*soff = 0;
			continue;
		}
		k = min_t(u64, n, seg->len - *soff);
		ret = psim_copy_phys(dma_to_phys(psim_dev, seg->addr + *soff),
				     buf, k, to_mem);
		if (ret)
			return ret;
		*soff += k;
		buf += k;
		n -= k;
	}
	return 0;
}

/* Looks up an MR of this fd, with a reference. */
static struct psim_mr *psim_file_get_mr(struct psim_file *f, u32 handle)
{
	struct psim_mr *mr;

	xa_lock(&f->mrs);
	mr = xa_load(&f->mrs, handle);
	if (mr)
		kref_get(&mr->kref);
	xa_unlock(&f->mrs);
	return mr;
}

/*
 * PEERSIM_DMA_VMAP: the CPU copies through the exporter's kernel mapping of
 * the whole dma-buf (dma_buf_vmap()), no DMA involved. The MR's own
 * reference keeps the dma-buf; no psim lock is held.
 */
static int psim_dma_vmap(struct psim_mr *mr, const struct peersim_dma *d,
			 bool to_mem)
{
	void __user *ubuf = u64_to_user_ptr(d->buf);
	struct iosys_map map;
	void *p;
	int ret;

	ret = psim_dma_buf_vmap(mr->dbuf, &map);
	if (ret)
		return ret;
	if (map.is_iomem) {
		psim_dma_buf_vunmap(mr->dbuf, &map);
		return -EOPNOTSUPP;
	}
	p = map.vaddr + mr->addr + d->offset;
	if (to_mem)
		ret = copy_from_user(p, ubuf, d->length) ? -EFAULT : 0;
	else
		ret = copy_to_user(ubuf, p, d->length) ? -EFAULT : 0;
	psim_dma_buf_vunmap(mr->dbuf, &map);
	return ret;
}

static int psim_dma(struct psim_file *f, const struct peersim_dma *d,
		    bool to_mem)
{
	void __user *ubuf = u64_to_user_ptr(d->buf);
	unsigned int si;
	struct psim_mr *mr;
	u64 done = 0, soff;
	void *bounce;
	int ret = 0;

	if (d->flags & ~PEERSIM_DMA_FLAGS)
		return -EINVAL;
	mr = psim_file_get_mr(f, d->handle);
	if (!mr)
		return -ENOENT;
	if (d->offset > mr->length || d->length > mr->length - d->offset) {
		ret = -EINVAL;
		goto out_put;
	}
	if (to_mem && !mr->writable) {
		ret = -EACCES;
		goto out_put;
	}
	if (d->flags & PEERSIM_DMA_VMAP) {
		ret = mr->path == PEERSIM_PATH_DMABUF && !READ_ONCE(mr->deregistered) ?
		      psim_dma_vmap(mr, d, to_mem) : -EINVAL;
		goto out_put;
	}
	bounce = kvmalloc(min_t(u64, max_t(u64, d->length, 1), PSIM_DMA_CHUNK),
			  GFP_KERNEL);
	if (!bounce) {
		ret = -ENOMEM;
		goto out_put;
	}

	do {
		size_t n = min_t(u64, d->length - done, PSIM_DMA_CHUNK);

		if (to_mem && copy_from_user(bounce, ubuf + done, n)) {
			ret = -EFAULT;
			break;
		}
		if (mr->path == PEERSIM_PATH_DMABUF) {
			ret = psim_dmabuf_fault(mr);
			if (ret)
				break;
		}
		/* No fault may happen under dma_sem: see the locking notes. */
		ret = down_read_killable(&mr->dma_sem);
		if (ret)
			break;
		if (mr->dma_off && !mr->deregistered && !mr->invalidated) {
			/* a dma-buf MR moved since the fault: map it again */
			up_read(&mr->dma_sem);
			if (fatal_signal_pending(current)) {
				ret = -EINTR;
				break;
			}
			continue;
		}
		if (mr->dma_off) {
			ret = mr->deregistered ? -ENOENT : -ENOLINK;
		} else if (n) {
			/* find the chunk's first byte (the MTT may be new) */
			si = 0;
			soff = mr->first_off + d->offset + done;
			while (si < mr->nmtt && soff >= mr->mtt[si].len)
				soff -= mr->mtt[si++].len;
			ret = psim_dma_chunk(mr, &si, &soff, bounce, n, to_mem);
		}
		up_read(&mr->dma_sem);
		if (ret)
			break;
		if (!to_mem && copy_to_user(ubuf + done, bounce, n)) {
			ret = -EFAULT;
			break;
		}
		done += n;
		cond_resched();
	} while (done < d->length);

	kvfree(bounce);
out_put:
	psim_mr_put(mr);
	return ret;
}

/* --- ioctls ------------------------------------------------------------------ */

static int psim_ioc_info(struct psim_file *f, void *data)
{
	struct peersim_info *info = data;

	info->abi_version = PEERSIM_ABI_VERSION;
	info->semantics = psim_legacy ? PEERSIM_SEM_LEGACY : PEERSIM_SEM_MODERN;
	info->live_mrs = atomic64_read(&psim_live_mrs);
	info->max_seg_size = dma_get_max_seg_size(psim_dev);
	info->page_size = PAGE_SIZE;
	mutex_lock(&psim_clients_lock);
	info->nclients = psim_nclients;
	mutex_unlock(&psim_clients_lock);
	info->reg_delay_ms = READ_ONCE(reg_delay_ms);
	info->invalidations = atomic64_read(&psim_invalidations);
	info->mtt_held = atomic_read(&psim_mtt_held);
	info->reserved = 0;
	return 0;
}

static int psim_ioc_reg_mr(struct psim_file *f, void *data)
{
	struct peersim_reg_mr *r = data;
	struct psim_mr *mr;
	u32 handle;
	int ret;

	if ((r->access & ~PEERSIM_ACCESS_ALL) || r->reserved)
		return -EINVAL;
	mr = psim_mr_alloc(r->addr, r->length, r->access & PEERSIM_ACCESS_WRITE);
	if (!mr)
		return -ENOMEM;
	ret = psim_umem_get(mr);
	if (ret)
		goto out_free;

	atomic64_inc(&psim_live_mrs);
	ret = xa_alloc(&f->mrs, &handle, mr, XA_LIMIT(1, INT_MAX), GFP_KERNEL);
	if (ret) {
		psim_mr_dereg(mr);
		return ret;
	}
	r->handle = handle;
	r->path = mr->path;
	r->nents = mr->nmtt;
	r->page_size = mr->page_size;
	memset(r->client, 0, sizeof(r->client));
	if (mr->path == PEERSIM_PATH_PEER)
		strscpy(r->client, mr->client->name, sizeof(r->client));
	return 0;

out_free:
	mmdrop(mr->mm);
	psim_mr_put(mr);
	return ret;
}

/* ibv_reg_dmabuf_mr(): ib_umem_dmabuf_get() or ib_umem_dmabuf_get_pinned() */
static int psim_ioc_reg_dmabuf_mr(struct psim_file *f, void *data)
{
	struct peersim_reg_dmabuf_mr *r = data;
	struct psim_mr *mr;
	u32 handle;
	int ret;

	if ((r->flags & ~PEERSIM_DMABUF_FLAGS) ||
	    (r->access & ~PEERSIM_ACCESS_ALL) || r->reserved || r->reserved2)
		return -EINVAL;
	if (r->offset != (unsigned long)r->offset || r->length != (size_t)r->length)
		return -EINVAL;
	mr = psim_mr_alloc(r->offset, r->length, r->access & PEERSIM_ACCESS_WRITE);
	if (!mr)
		return -ENOMEM;
	ret = psim_dmabuf_get(mr, r->fd, r->flags & PEERSIM_DMABUF_PINNED, r);
	if (ret)
		goto out_free;

	atomic64_inc(&psim_live_mrs);
	ret = xa_alloc(&f->mrs, &handle, mr, XA_LIMIT(1, INT_MAX), GFP_KERNEL);
	if (ret) {
		psim_mr_dereg(mr);
		return ret;
	}
	r->handle = handle;
	return 0;

out_free:
	mmdrop(mr->mm);
	psim_mr_put(mr);
	return ret;
}

static int psim_dereg_handle(struct psim_file *f, u32 handle)
{
	struct psim_mr *mr = xa_erase(&f->mrs, handle);

	if (!mr)
		return -ENOENT;
	psim_mr_dereg(mr);
	return 0;
}

/* REG_MR's result could not be copied out: the MR goes again. */
static void psim_ioc_reg_mr_undo(struct psim_file *f, void *data)
{
	struct peersim_reg_mr *r = data;

	psim_dereg_handle(f, r->handle);
}

/* REG_DMABUF_MR's result could not be copied out: the MR goes again. */
static void psim_ioc_reg_dmabuf_mr_undo(struct psim_file *f, void *data)
{
	struct peersim_reg_dmabuf_mr *r = data;

	psim_dereg_handle(f, r->handle);
}

static int psim_ioc_dereg_mr(struct psim_file *f, void *data)
{
	struct peersim_mr_handle *h = data;

	if (h->reserved)
		return -EINVAL;
	return psim_dereg_handle(f, h->handle);
}

static int psim_ioc_mr_info(struct psim_file *f, void *data)
{
	struct peersim_mr_info *info = data;
	struct psim_mr *mr;

	if (info->reserved)
		return -EINVAL;
	mr = psim_file_get_mr(f, info->handle);
	if (!mr)
		return -ENOENT;

	down_read(&mr->dma_sem);
	info->state = mr->invalidated ? PEERSIM_MR_INVALIDATED : PEERSIM_MR_ACTIVE;
	info->invalidated_at_ns = mr->invalidated_at_ns;
	/* a dma-buf MR's MTT changes under dma_sem (locking notes) */
	info->nents = mr->nmtt;
	info->dma_bytes = mr->dma_bytes;
	info->first_offset = mr->first_off;
	if (mr->path == PEERSIM_PATH_DMABUF)
		info->core_state = mr->nmtt ? PEERSIM_CORE_MAPPED :
					      PEERSIM_CORE_UNMAPPED;
	up_read(&mr->dma_sem);
	info->path = mr->path;
	info->page_size = mr->page_size;
	info->addr = mr->addr;
	info->length = mr->length;
	info->free_callbacks = atomic_read(&mr->free_callbacks);
	info->access = mr->writable ? PEERSIM_ACCESS_WRITE : 0;
	info->core_context = PEERSIM_NO_CORE_CONTEXT;
	if (mr->path == PEERSIM_PATH_GUP)
		info->core_state = PEERSIM_CORE_UNMAPPED;
	if (mr->path == PEERSIM_PATH_PEER) {
		/* what get_pages() got: legacy cores pass 0 for "none" */
		info->core_context = mr->xa_id;
		if (psim_legacy && mr->xa_id == PSIM_NO_INVALIDATION_ID)
			info->core_context = 0;
		mutex_lock(&mr->mapping_lock);
		info->core_state = mr->state;
		mutex_unlock(&mr->mapping_lock);
	}
	psim_mr_put(mr);
	return 0;
}

static int psim_ioc_mr_segs(struct psim_file *f, void *data)
{
	struct peersim_mr_segs *s = data;
	struct peersim_seg __user *useg = u64_to_user_ptr(s->segs);
	struct peersim_seg *snap = NULL;
	unsigned int i, n, total;
	struct psim_mr *mr;
	int ret = 0;

	mr = psim_file_get_mr(f, s->handle);
	if (!mr)
		return -ENOENT;
	/*
	 * Snapshot under dma_sem (a dma-buf MR's MTT may be replaced), copy
	 * out without it: copy_to_user may fault (locking notes).
	 */
	for (;;) {
		if (mr->path == PEERSIM_PATH_DMABUF) {
			ret = psim_dmabuf_fault(mr);
			if (ret)
				goto out_put;
		}
		down_read(&mr->dma_sem);
		if (mr->invalidated) {
			ret = -ENOLINK;
		} else if (mr->dma_off && !mr->deregistered) {
			/* a dma-buf MR moved since the fault: map it again */
			up_read(&mr->dma_sem);
			if (fatal_signal_pending(current)) {
				ret = -EINTR;
				goto out_put;
			}
			continue;
		}
		total = mr->nmtt;
		n = min(s->count, total);
		if (!ret && n) {
			snap = kvmalloc_array(n, sizeof(*snap), GFP_KERNEL);
			if (!snap)
				ret = -ENOMEM;
			for (i = 0; snap && i < n; i++) {
				snap[i].dma_addr = mr->mtt[i].addr;
				snap[i].len = mr->mtt[i].len;
			}
		}
		up_read(&mr->dma_sem);
		break;
	}
	if (!ret && n && copy_to_user(useg, snap, n * sizeof(*snap)))
		ret = -EFAULT;
	if (!ret)
		s->count = total;
	kvfree(snap);
out_put:
	psim_mr_put(mr);
	return ret;
}

static int psim_ioc_clients(struct psim_file *f, void *data)
{
	struct peersim_clients *cl = data;
	struct peersim_client __user *uc = u64_to_user_ptr(cl->clients);
	struct peersim_client *snap;
	unsigned int cap, n = 0, total = 0;
	struct psim_client *c;
	int ret = 0;
	u32 exflags;

	if (cl->reserved)
		return -EINVAL;
	cap = min_t(u32, cl->count, PSIM_MAX_CLIENTS_REPORT);
	snap = kcalloc(max(cap, 1U), sizeof(*snap), GFP_KERNEL);
	if (!snap)
		return -ENOMEM;

	/* Snapshot under the lock, copy out without it. */
	mutex_lock(&psim_clients_lock);
	list_for_each_entry(c, &psim_clients, node) {
		struct peersim_client *p;

		if (c->dying)
			continue;
		total++;
		if (n >= cap)
			continue;
		p = &snap[n];
		memcpy(p->name, c->name, sizeof(p->name));
		memcpy(p->version, c->version, sizeof(p->version));
		if (c->invalidation_required)
			p->flags |= PEERSIM_CLIENT_INVAL_CB;
		if (psim_client_ex(c->ops, &exflags)) {
			p->flags |= PEERSIM_CLIENT_EX;
			if (exflags & PEER_MEM_INVALIDATE_UNMAPS)
				p->flags |= PEERSIM_CLIENT_INVALIDATE_UNMAPS;
		}
		p->live_mrs = refcount_read(&c->usecnt) - 1;
		p->acquire_calls = atomic64_read(&c->acquire_calls);
		p->claims = atomic64_read(&c->claims);
		n++;
	}
	mutex_unlock(&psim_clients_lock);

	if (n && copy_to_user(uc, snap, n * sizeof(*snap)))
		ret = -EFAULT;
	cl->count = total;
	kfree(snap);
	return ret;
}

static int psim_ioc_dma_write(struct psim_file *f, void *data)
{
	return psim_dma(f, data, true);
}

static int psim_ioc_dma_read(struct psim_file *f, void *data)
{
	return psim_dma(f, data, false);
}

/**
 * struct psim_ioctl_desc - one ioctl command
 * @cmd: the command as this module knows it (direction, current size)
 * @min_size: size of the struct's first version; smaller is refused
 * @fn: handler, works on a kernel copy of the struct
 * @undo: reverts @fn when its result cannot be copied back (optional)
 */
struct psim_ioctl_desc {
	unsigned int cmd;
	unsigned int min_size;
	int (*fn)(struct psim_file *f, void *data);
	void (*undo)(struct psim_file *f, void *data);
};

#define PSIM_IOCTL(_cmd, _type, _fn, _undo)				\
	[_IOC_NR(_cmd)] = { .cmd = _cmd, .min_size = sizeof(_type),	\
			    .fn = _fn, .undo = _undo }

static const struct psim_ioctl_desc psim_ioctls[] = {
	PSIM_IOCTL(PEERSIM_IOC_INFO, struct peersim_info, psim_ioc_info, NULL),
	PSIM_IOCTL(PEERSIM_IOC_REG_MR, struct peersim_reg_mr, psim_ioc_reg_mr,
		   psim_ioc_reg_mr_undo),
	PSIM_IOCTL(PEERSIM_IOC_DEREG_MR, struct peersim_mr_handle,
		   psim_ioc_dereg_mr, NULL),
	PSIM_IOCTL(PEERSIM_IOC_MR_INFO, struct peersim_mr_info,
		   psim_ioc_mr_info, NULL),
	PSIM_IOCTL(PEERSIM_IOC_DMA_WRITE, struct peersim_dma,
		   psim_ioc_dma_write, NULL),
	PSIM_IOCTL(PEERSIM_IOC_DMA_READ, struct peersim_dma,
		   psim_ioc_dma_read, NULL),
	PSIM_IOCTL(PEERSIM_IOC_MR_SEGS, struct peersim_mr_segs,
		   psim_ioc_mr_segs, NULL),
	PSIM_IOCTL(PEERSIM_IOC_CLIENTS, struct peersim_clients,
		   psim_ioc_clients, NULL),
	PSIM_IOCTL(PEERSIM_IOC_REG_DMABUF_MR, struct peersim_reg_dmabuf_mr,
		   psim_ioc_reg_dmabuf_mr, psim_ioc_reg_dmabuf_mr_undo),
};

union psim_ioctl_data {
	struct peersim_info info;
	struct peersim_reg_mr reg;
	struct peersim_mr_handle handle;
	struct peersim_mr_info mr_info;
	struct peersim_dma dma;
	struct peersim_mr_segs segs;
	struct peersim_clients clients;
	struct peersim_reg_dmabuf_mr reg_dmabuf;
};

static long psim_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct psim_file *f = filp->private_data;
	void __user *uarg = (void __user *)arg;
	unsigned int usize = _IOC_SIZE(cmd);
	const struct psim_ioctl_desc *desc;
	union psim_ioctl_data data;
	unsigned int ksize;
	int ret;

	if (_IOC_TYPE(cmd) != PEERSIM_IOC_MAGIC ||
	    _IOC_NR(cmd) >= ARRAY_SIZE(psim_ioctls))
		return -ENOTTY;
	desc = &psim_ioctls[_IOC_NR(cmd)];
	if (!desc->fn || _IOC_DIR(cmd) != _IOC_DIR(desc->cmd))
		return -ENOTTY;
	if (usize < desc->min_size)
		return -EINVAL;

	ksize = _IOC_SIZE(desc->cmd);
	BUILD_BUG_ON(sizeof(data) > 128);
	memset(&data, 0, sizeof(data));
	if (_IOC_DIR(cmd) & _IOC_WRITE) {
		/* Zero-fills a smaller struct; -E2BIG on a non-zero newer tail. */
		ret = copy_struct_from_user(&data, ksize, uarg, usize);
		if (ret)
			return ret;
	}

	ret = desc->fn(f, &data);
	if (ret || !(_IOC_DIR(cmd) & _IOC_READ))
		return ret;

	if (copy_to_user(uarg, &data, min(usize, ksize)) ||
	    (usize > ksize && clear_user(uarg + ksize, usize - ksize))) {
		if (desc->undo)
			desc->undo(f, &data);
		return -EFAULT;
	}
	return 0;
}

static int psim_open(struct inode *inode, struct file *filp)
{
	struct psim_file *f;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	xa_init_flags(&f->mrs, XA_FLAGS_ALLOC1);
	filp->private_data = f;
	return 0;
}

/* Last close of the fd: its MRs are deregistered. */
static int psim_release(struct inode *inode, struct file *filp)
{
	struct psim_file *f = filp->private_data;
	struct psim_mr *mr;
	unsigned long idx;

	xa_for_each(&f->mrs, idx, mr) {
		xa_erase(&f->mrs, idx);
		psim_mr_dereg(mr);
	}
	xa_destroy(&f->mrs);
	kfree(f);
	return 0;
}

static const struct file_operations psim_fops = {
	.owner = THIS_MODULE,
	.open = psim_open,
	.release = psim_release,
	.unlocked_ioctl = psim_ioctl,
	.compat_ioctl = psim_ioctl,
};

static struct miscdevice psim_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "sp_peersim",
	.fops = &psim_fops,
	.mode = 0600,
};

/* --- the simulated HCA's device ----------------------------------------- */

static int psim_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	int ret;

	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	/* "DMA" translates addresses back with dma_to_phys(): no IOMMU. */
	if (device_iommu_mapped(dev)) {
		dev_err(dev, "behind an IOMMU: DMA addresses cannot be followed\n");
		return -ENODEV;
	}
	if (max_seg_size) {
		if (!dev->dma_parms) {
			dev_err(dev, "no dma_parms: cannot set max_seg_size\n");
			return -EIO;
		}
		dma_set_max_seg_size(dev, max_seg_size);
	}
	psim_dev = dev;
	return 0;
}

static struct platform_driver psim_driver = {
	.probe = psim_probe,
	.driver = {
		.name = "sp_peersim_hca",
		.probe_type = PROBE_FORCE_SYNCHRONOUS,
	},
};

static int __init psim_init(void)
{
	struct platform_device_info info = {
		.name = "sp_peersim_hca",
		.id = PLATFORM_DEVID_NONE,
		.dma_mask = DMA_BIT_MASK(64),
	};
	int ret;

	ret = psim_core_init();
	if (ret)
		return ret;

	ret = platform_driver_register(&psim_driver);
	if (ret)
		return ret;
	psim_pdev = platform_device_register_full(&info);
	if (IS_ERR(psim_pdev)) {
		ret = PTR_ERR(psim_pdev);
		goto out_driver;
	}
	if (!psim_dev) {
		pr_err("the simulated HCA did not probe\n");
		ret = -ENODEV;
		goto out_device;
	}
	ret = misc_register(&psim_misc);
	if (ret)
		goto out_device;
	pr_info("%s semantics, max DMA segment %u bytes, %s\n",
		psim_legacy ? "legacy" : "modern",
		dma_get_max_seg_size(psim_dev),
		psim_sysfs ? "memory_peers in sysfs" : "no sysfs (names not compared)");
	return 0;

out_device:
	platform_device_unregister(psim_pdev);
out_driver:
	platform_driver_unregister(&psim_driver);
	psim_dev = NULL;
	return ret;
}

static void __exit psim_exit(void)
{
	misc_deregister(&psim_misc);
	psim_core_exit();
	platform_device_unregister(psim_pdev);
	platform_driver_unregister(&psim_driver);
	psim_dev = NULL;
}

module_init(psim_init);
module_exit(psim_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("strixpeer developers");
MODULE_DESCRIPTION("strixpeer tests: simulated PeerDirect core and HCA");
