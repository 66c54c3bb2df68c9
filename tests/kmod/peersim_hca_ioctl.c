// SPDX-License-Identifier: GPL-2.0
/*
 * sp_peersim's HCA half, its ioctls (see peersim_hca.c): the "DMA" the
 * simulated HCA performs into and out of registered MRs (through the DMA
 * addresses of their MTT, or a dma-buf's kernel mapping), fenced by each
 * MR's dma_sem, and the misc device's ioctl commands and dispatcher
 * (extensible structs, as peersim_uapi.h describes them).
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

/* "DMA" is done in chunks of this size, through a bounce buffer. */
#define PSIM_DMA_CHUNK		SZ_64K
/* At most this many clients are reported by PEERSIM_IOC_CLIENTS. */
#define PSIM_MAX_CLIENTS_REPORT	256

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

/**
 * psim_ioctl() - the misc device's ioctl handler
 * @filp: an open /dev/sp_peersim
 * @cmd: the command
 * @arg: its struct, in user memory
 *
 * Return: 0, -ENOTTY for an unknown command, or a negative errno.
 */
long psim_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
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
