// SPDX-License-Identifier: GPL-2.0
/*
 * sp_peersim's core half, continued (see peersim_core.c for what the core
 * simulates, its two semantics and its locking): the core's half of an MR
 * registration as ib_umem_get() + ib_peer_umem_get() do it - GUP first,
 * then the peer clients, on a modern or a legacy core -, the invalidate
 * callback handed to the clients, and deregistration
 * (ib_umem_release()).
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
#include "peersim_core_priv.h"

/* --- GUP path (ib_umem_get) ---------------------------------------------- */

static void psim_gup_unpin(struct psim_mr *mr, bool dirty)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_sg(&mr->gup.sgt, sg, i)
		unpin_user_page_range_dirty_lock(sg_page(sg),
						 DIV_ROUND_UP(sg->length, PAGE_SIZE),
						 dirty && mr->writable);
	sg_free_append_table(&mr->gup);
}

static int psim_gup_get(struct psim_mr *mr)
{
	unsigned int gup_flags = FOLL_LONGTERM;
	unsigned long npages = mr->npages;
	unsigned long cur = mr->addr & PAGE_MASK;
	struct page **pages;
	long pinned;
	int ret = 0;

	pages = (struct page **)__get_free_page(GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	if (mr->writable)
		gup_flags |= FOLL_WRITE;

	while (npages) {
		cond_resched();
		pinned = pin_user_pages_fast(cur,
					     min_t(unsigned long, npages,
						   PAGE_SIZE / sizeof(struct page *)),
					     gup_flags, pages);
		if (pinned <= 0) {
			ret = pinned ? pinned : -EFAULT;
			goto out_release;
		}
		cur += pinned * PAGE_SIZE;
		npages -= pinned;
		ret = sg_alloc_append_table_from_pages(&mr->gup, pages, pinned,
						       0, pinned << PAGE_SHIFT,
						       dma_get_max_seg_size(psim_dev),
						       npages, GFP_KERNEL);
		if (ret) {
			unpin_user_pages(pages, pinned);
			goto out_release;
		}
	}

	ret = dma_map_sgtable(psim_dev, &mr->gup.sgt, DMA_BIDIRECTIONAL, 0);
	if (ret)
		goto out_release;
	ret = psim_mtt_build(mr, mr->gup.sgt.sgl, mr->gup.sgt.nents,
			     mr->addr & ~PAGE_MASK);
	if (ret)
		goto out_unmap;
	mr->path = PEERSIM_PATH_GUP;
	mr->page_size = PAGE_SIZE;
	free_page((unsigned long)pages);
	return 0;

out_unmap:
	dma_unmap_sgtable(psim_dev, &mr->gup.sgt, DMA_BIDIRECTIONAL, 0);
out_release:
	psim_gup_unpin(mr, false);
	memset(&mr->gup, 0, sizeof(mr->gup));
	free_page((unsigned long)pages);
	return ret;
}

static void psim_gup_release(struct psim_mr *mr)
{
	dma_unmap_sgtable(psim_dev, &mr->gup.sgt, DMA_BIDIRECTIONAL, 0);
	psim_gup_unpin(mr, true);
}

/* --- peer path: modern core (ib_peer_umem_get) ------------------------- */

/*
 * For a client page size above PAGE_SIZE, trims the first and last DMA
 * segment to the PAGE_SIZE-aligned range, saving what it changes.
 */
static int psim_fix_peer_sgls(struct psim_mr *mr, unsigned long psz)
{
	unsigned long end = mr->addr + mr->length;
	unsigned long head = ALIGN_DOWN(mr->addr, PAGE_SIZE) -
			     ALIGN_DOWN(mr->addr, psz);
	unsigned long tail = ALIGN(end, psz) - ALIGN(end, PAGE_SIZE);
	struct scatterlist *sg, *last = NULL;
	unsigned int i;

	if (!mr->sgt.sgl || !mr->sgt.nents) {
		psim_client_err(mr, "dma_map() succeeded with an empty mapping\n");
		return -EINVAL;
	}
	for_each_sg(mr->sgt.sgl, sg, mr->sgt.nents, i)
		last = sg;
	if (sg_dma_len(mr->sgt.sgl) <= head ||
	    sg_dma_len(last) <= tail + (last == mr->sgt.sgl ? head : 0)) {
		psim_client_err(mr, "first/last DMA segment (%u/%u bytes) too short for page size %lu at %#lx+%zu\n",
				sg_dma_len(mr->sgt.sgl), sg_dma_len(last), psz,
				mr->addr, mr->length);
		return -EINVAL;
	}

	sg = mr->sgt.sgl;
	mr->first_sg = sg;
	mr->first_dma_address = sg_dma_address(sg);
	mr->first_dma_length = sg_dma_len(sg);
	mr->first_length = sg->length;
	sg_dma_address(sg) += head;
	sg_dma_len(sg) -= head;
	sg->length -= head;

	mr->last_sg = last;
	mr->last_dma_length = sg_dma_len(last);
	mr->last_length = last->length;
	sg_dma_len(last) -= tail;
	last->length -= tail;
	return 0;
}

/* Gives the client its sg entries back as it built them. */
static void psim_unfix_peer_sgls(struct psim_mr *mr)
{
	if (mr->last_sg) {
		sg_dma_len(mr->last_sg) = mr->last_dma_length;
		mr->last_sg->length = mr->last_length;
		mr->last_sg = NULL;
	}
	if (mr->first_sg) {
		sg_dma_address(mr->first_sg) = mr->first_dma_address;
		sg_dma_len(mr->first_sg) = mr->first_dma_length;
		mr->first_sg->length = mr->first_length;
		mr->first_sg = NULL;
	}
}

static int psim_check_page_size(struct psim_mr *mr, unsigned long psz)
{
	if (psz < PAGE_SIZE || !is_power_of_2(psz)) {
		psim_client_err(mr, "get_page_size() returned %lu\n", psz);
		return -EINVAL;
	}
	return 0;
}

/*
 * Moves a modern peer MR from state cur to state to, calling the client
 * where the real core does. Context: the caller holds mapping_lock, except
 * for the deregistration of an INVALIDATE_UNMAPS client, which first
 * parks the state at UNMAPPED under the lock (so the invalidate callback
 * does nothing) and then calls this without it, as the real core does.
 */
static void psim_peer_unmap(struct psim_mr *mr, enum psim_map_state cur,
			    enum psim_map_state to)
{
	struct psim_client *c = mr->client;

	if (cur == PSIM_MAPPED &&
	    (to == PSIM_UNMAPPED || to == PSIM_INVALIDATED)) {
		/* The core never looks at the sg table again; the client may. */
		psim_unfix_peer_sgls(mr);
		if (to == PSIM_UNMAPPED) {
			c->ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
			c->ops->put_pages(&mr->sgt, mr->client_ctx);
		}
		memset(&mr->sgt, 0, sizeof(mr->sgt));
		atomic64_inc(&c->num_dealloc_mrs);
	}
	if ((cur == PSIM_MAPPED || cur == PSIM_INVALIDATED) &&
	    to == PSIM_UNMAPPED) {
		atomic64_add(mr->nmtt, &c->num_dereg_pages);
		atomic64_add(mr->length, &c->num_dereg_bytes);
	}
	mr->state = to;
}

static int psim_peer_get_modern(struct psim_mr *mr)
{
	const struct peer_memory_client *ops = mr->client->ops;
	struct psim_client *c = mr->client;
	unsigned long psz;
	int ret = 0;

	/*
	 * Held until the MR is activated: an invalidation that comes in
	 * meanwhile waits, and then finds the MR mapped (or, after a
	 * failure, unmapped).
	 */
	mutex_lock(&mr->mapping_lock);
	if (c->invalidation_required) {
		ret = xa_alloc_cyclic(&c->mrs, &mr->xa_id, mr,
				      XA_LIMIT(0, PSIM_NO_INVALIDATION_ID - 1),
				      &c->next_id, GFP_KERNEL);
		if (ret < 0)
			goto out_unlock;
	}

	/*
	 * Write is always asked for, to break CoW at registration; a
	 * read-only MR says with force that read-only pages are fine.
	 */
	ret = ops->get_pages(mr->addr, mr->length, 1, !mr->writable, NULL,
			     mr->client_ctx, mr->xa_id);
	if (ret)
		goto out_xa;
	ret = psim_reg_delay();
	if (ret)
		goto out_put_pages;
	/* dma_map() reports the mapped entries straight into sgt.nents */
	ret = ops->dma_map(&mr->sgt, mr->client_ctx, psim_dev, 0,
			   (int *)&mr->sgt.nents);
	if (ret)
		goto out_put_pages;

	psz = ops->get_page_size(mr->client_ctx);
	ret = psim_check_page_size(mr, psz);
	if (ret)
		goto out_unmap;
	mr->page_size = psz;
	if (psz != PAGE_SIZE) {
		ret = psim_fix_peer_sgls(mr, psz);
		if (ret)
			goto out_unmap;
	}
	ret = psim_mtt_build(mr, mr->sgt.sgl, mr->sgt.nents,
			     mr->addr & ~PAGE_MASK);
	if (ret)
		goto out_unfix;

	mr->state = PSIM_MAPPED;
	atomic64_add(mr->nmtt, &c->num_reg_pages);
	atomic64_add(mr->length, &c->num_reg_bytes);
	atomic64_inc(&c->num_alloc_mrs);
	/*
	 * Activation (ib_umem_activate_invalidation_notifier(), once the
	 * mkey exists): from here on the invalidate callback may fence and
	 * unmap the MR.
	 */
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		mr->notifier_active = true;
	mutex_unlock(&mr->mapping_lock);
	return 0;

out_unfix:
	psim_unfix_peer_sgls(mr);
out_unmap:
	ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
out_put_pages:
	ops->put_pages(&mr->sgt, mr->client_ctx);
out_xa:
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		xa_erase(&c->mrs, mr->xa_id);
out_unlock:
	memset(&mr->sgt, 0, sizeof(mr->sgt));
	mutex_unlock(&mr->mapping_lock);
	return ret;
}

/* ib_umem_stop_invalidation_notifier() + ib_peer_umem_release() */
static void psim_peer_dereg_modern(struct psim_mr *mr)
{
	struct psim_client *c = mr->client;
	enum psim_map_state cur;

	if (mr->xa_id != PSIM_NO_INVALIDATION_ID) {
		bool self_unmaps = psim_unmap_on_invalidate(c);

		mutex_lock(&mr->mapping_lock);
		mr->notifier_active = false;
		if (!self_unmaps) {
			psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
			mutex_unlock(&mr->mapping_lock);
		} else {
			/* Parks the invalidate callback, unmaps outside the lock. */
			cur = mr->state;
			mr->state = PSIM_UNMAPPED;
			mutex_unlock(&mr->mapping_lock);
			psim_peer_unmap(mr, cur, PSIM_UNMAPPED);
		}
		mutex_lock(&mr->mapping_lock);
		psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
		mutex_unlock(&mr->mapping_lock);
		xa_erase(&c->mrs, mr->xa_id);
	} else {
		/* No invalidation: nobody else looks at the state. */
		psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
	}
	psim_put_client(mr);
}

/* The invalidate callback's work for a modern core (mlx5 + ib_core). */
static void psim_invalidate_modern(struct psim_mr *mr)
{
	mutex_lock(&mr->mapping_lock);
	/* mlx5's invalidation function: revoke the mkey, wait for DMA */
	if (mr->state == PSIM_MAPPED && mr->notifier_active)
		psim_mr_fence(mr, true);
	if (psim_unmap_on_invalidate(mr->client))
		psim_peer_unmap(mr, mr->state, PSIM_INVALIDATED);
	else
		psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
	mutex_unlock(&mr->mapping_lock);
}

/* --- peer path: legacy core ----------------------------------------------- */

/* dma_unmap() + put_pages() of a legacy MR. Context: owns the teardown. */
static void psim_legacy_unmap(struct psim_mr *mr)
{
	struct psim_client *c = mr->client;

	c->ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
	c->ops->put_pages(&mr->sgt, mr->client_ctx);
	atomic64_add(mr->nmap, &c->num_dereg_pages);
	atomic64_add((u64)mr->nmap * mr->page_size, &c->num_dereg_bytes);
	atomic64_inc(&c->num_dealloc_mrs);
	mr->state = PSIM_UNMAPPED;
}

static int psim_peer_get_legacy(struct psim_mr *mr)
{
	const struct peer_memory_client *ops = mr->client->ops;
	struct psim_client *c = mr->client;
	u64 core_context = 0;
	unsigned long psz;
	int ret;

	if (c->invalidation_required) {
		ret = xa_alloc_cyclic(&c->mrs, &mr->xa_id, mr,
				      XA_LIMIT(0, PSIM_NO_INVALIDATION_ID - 1),
				      &c->next_id, GFP_KERNEL);
		if (ret < 0)
			return ret;
		core_context = mr->xa_id;
	}

	/* No lock is held across the client's calls (deadlock avoidance). */
	ret = ops->get_pages(mr->addr, mr->length, mr->writable, 1, &mr->sgt,
			     mr->client_ctx, core_context);
	if (ret)
		goto out_xa;
	psz = ops->get_page_size(mr->client_ctx);
	ret = psim_check_page_size(mr, psz);
	if (ret)
		goto out_put_pages;
	mr->page_size = psz;
	ret = psim_reg_delay();
	if (ret)
		goto out_put_pages;
	ret = ops->dma_map(&mr->sgt, mr->client_ctx, psim_dev, 0, &mr->nmap);
	if (ret)
		goto out_put_pages;
	if (mr->nmap <= 0) {
		psim_client_err(mr, "dma_map() succeeded with %d entries\n",
				mr->nmap);
		ret = -EINVAL;
		goto out_unmap;
	}
	/* The client may be invalidated in here; the sg list must still be its. */
	ret = psim_mtt_window();
	if (ret)
		goto out_unmap;
	ret = psim_mtt_build(mr, mr->sgt.sgl, mr->nmap,
			     mr->addr & (psz - 1));
	if (ret)
		goto out_unmap;

	/* Activation: fails if the client invalidated the MR meanwhile. */
	mutex_lock(&mr->mapping_lock);
	if (mr->early_invalidated) {
		mutex_unlock(&mr->mapping_lock);
		pr_info("client %s invalidated a registration before its activation\n",
			c->name);
		ret = -EINVAL;
		goto out_unmap;
	}
	mr->state = PSIM_MAPPED;
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		mr->notifier_active = true;
	mutex_unlock(&mr->mapping_lock);
	atomic64_add(mr->nmap, &c->num_reg_pages);
	atomic64_add((u64)mr->nmap * psz, &c->num_reg_bytes);
	atomic64_inc(&c->num_alloc_mrs);
	return 0;

out_unmap:
	ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
out_put_pages:
	ops->put_pages(&mr->sgt, mr->client_ctx);
out_xa:
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		xa_erase(&c->mrs, mr->xa_id);
	return ret;
}

static void psim_peer_dereg_legacy(struct psim_mr *mr)
{
	bool release = false;

	mutex_lock(&mr->mapping_lock);
	if (mr->state == PSIM_MAPPED) {
		/* destroy the invalidation context first, then unmap */
		mr->notifier_active = false;
		if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
			xa_erase(&mr->client->mrs, mr->xa_id);
		psim_legacy_unmap(mr);
		release = true;
	}
	mutex_unlock(&mr->mapping_lock);
	/* else an invalidation already tore it all down, release() included */
	if (release)
		psim_put_client(mr);
}

/*
 * The invalidate callback's work for a legacy core: the driver's
 * invalidation function deregisters the MR's memory right away, release()
 * included, all under the core's lock.
 */
static void psim_invalidate_legacy(struct psim_mr *mr)
{
	mutex_lock(&mr->mapping_lock);
	if (!mr->notifier_active) {
		/* not activated yet: the registration will fail */
		mr->early_invalidated = true;
		mutex_unlock(&mr->mapping_lock);
		return;
	}
	psim_mr_fence(mr, true);
	mr->notifier_active = false;
	xa_erase(&mr->client->mrs, mr->xa_id);
	psim_legacy_unmap(mr);
	psim_put_client(mr);
	mutex_unlock(&mr->mapping_lock);
}

/* --- the invalidate callback --------------------------------------------- */

/**
 * psim_invalidate() - the core's invalidate callback
 * @reg_handle: the client, as ib_register_peer_memory_client() returned it
 * @core_context: the registration, as the client got it
 *
 * Handed to clients that ask for it. Looks the registration up by
 * core_context (unknown: nothing to do), fences its DMA, and unmaps as the
 * semantics in force say.
 *
 * Context: process context, may sleep: it takes the MR's mapping lock,
 * which a modern core holds across get_pages()/dma_map() of that MR, and
 * waits for in-flight DMA. Must not be called from within the client's
 * own get_pages()/dma_map() for the same MR, nor with a lock held that
 * those (or, for legacy cores, dma_unmap/put_pages/release) take.
 * Return: 0.
 */
int psim_invalidate(void *reg_handle, u64 core_context)
{
	struct psim_client *c = reg_handle;
	struct psim_mr *mr = NULL;

	might_sleep();
	atomic64_inc(&psim_invalidations);

	/*
	 * The client need not fence invalidation against put_pages(), so
	 * core_context is an id looked up here, not a pointer.
	 */
	xa_lock(&c->mrs);
	atomic64_inc(&c->num_free_callbacks);
	if (core_context < PSIM_NO_INVALIDATION_ID)
		mr = xa_load(&c->mrs, core_context);
	if (mr)
		kref_get(&mr->kref);
	xa_unlock(&c->mrs);
	if (!mr)
		return 0;

	atomic_inc(&mr->free_callbacks);
	if (psim_legacy)
		psim_invalidate_legacy(mr);
	else
		psim_invalidate_modern(mr);
	psim_mr_put(mr);
	return 0;
}

/* --- registration / deregistration (ib_umem_get / ib_umem_release) ------- */

static int psim_peer_get(struct psim_mr *mr, int gup_ret)
{
	int ret;

	mr->client = psim_get_client(mr->addr, mr->length, &mr->client_ctx);
	if (!mr->client)
		return gup_ret;
	mr->path = PEERSIM_PATH_PEER;
	if (psim_legacy)
		ret = psim_peer_get_legacy(mr);
	else
		ret = psim_peer_get_modern(mr);
	if (ret)
		psim_put_client(mr);
	return ret;
}

/* Pins and maps [addr, addr + length): GUP first, then the peer clients. */
int psim_umem_get(struct psim_mr *mr)
{
	unsigned long end = mr->addr + mr->length;
	unsigned long lock_limit;
	s64 new_pinned;
	int ret;

	if (!mr->length || end < mr->addr || PAGE_ALIGN(end) < end)
		return -EINVAL;
	if (!can_do_mlock())
		return -EPERM;
	mr->npages = (PAGE_ALIGN(end) - ALIGN_DOWN(mr->addr, PAGE_SIZE)) >>
		     PAGE_SHIFT;
	if (mr->npages > UINT_MAX)
		return -EINVAL;

	lock_limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	new_pinned = atomic64_add_return(mr->npages, &mr->mm->pinned_vm);
	if (new_pinned > lock_limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(mr->npages, &mr->mm->pinned_vm);
		return -ENOMEM;
	}

	ret = psim_gup_get(mr);
	/* When pinning fails the range may belong to a peer client. */
	if (ret)
		ret = psim_peer_get(mr, ret);
	if (ret)
		atomic64_sub(mr->npages, &mr->mm->pinned_vm);
	return ret;
}

/*
 * Deregisters an MR its fd no longer holds: DMA off first (as mlx5 revokes
 * the mkey), then the unmapping the path needs, then the reference.
 */
void psim_mr_dereg(struct psim_mr *mr)
{
	psim_mr_fence(mr, false);
	if (mr->path == PEERSIM_PATH_GUP)
		psim_gup_release(mr);
	else if (mr->path == PEERSIM_PATH_DMABUF)
		psim_dmabuf_release(mr);
	else if (psim_legacy)
		psim_peer_dereg_legacy(mr);
	else
		psim_peer_dereg_modern(mr);
	atomic64_sub(mr->npages, &mr->mm->pinned_vm);
	mmdrop(mr->mm);
	mr->mm = NULL;
	atomic64_dec(&psim_live_mrs);
	psim_mr_put(mr);
}

