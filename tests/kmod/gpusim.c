// SPDX-License-Identifier: GPL-2.0
/*
 * sp_gpusim: a DRM driver that behaves like amdgpu/TTM as far as dma-buf
 * importers and CPU mappings can tell, for the tests of strixpeer's
 * PeerDirect client and of every other importer in the project.
 *
 * What it reproduces of amdgpu/TTM:
 *  - GEM buffer objects (BOs) with a DRM fake mmap offset, mapped into a
 *    process through the real drm_gem_mmap() on the card or render node:
 *    a VM_PFNMAP|VM_IO|VM_DONTEXPAND|VM_DONTDUMP VMA, vm_private_data the
 *    BO, vm_pgoff the fake offset (plus the page offset of a split VMA),
 *    copy-on-write mappings refused as ttm_bo_mmap_obj() refuses them,
 *    PTEs inserted by the fault handler with the BO's reservation lock
 *    held, after waiting for the BO's move fences (ttm_bo_vm_fault_idle).
 *  - PRIME export through the object's export callback, as
 *    amdgpu_gem_prime_export(): drm_gem_prime_export() with the dma-buf's
 *    ops replaced by dynamic ones (attach/pin/unpin/map/unmap under the
 *    reservation lock). Only the BO's registered dma-buf (obj->dma_buf, set
 *    by DRM's PRIME path) is told about moves, as amdgpu_bo_move_notify()
 *    tells only bo->tbo.base.dma_buf.
 *  - Moves. Evictions and migrations on demand (an ioctl), and inside
 *    map_dma_buf() and pin() when the attachment cannot reach the BO where
 *    it is: a VRAM BO is mapped only for peer-to-peer attachments (module
 *    parameter p2p; a NIC behind a root port without P2P is not one), so a
 *    non-P2P importer's map or pin first migrates it to GTT, announcing the
 *    move to every dynamic importer, the one being mapped included. A
 *    SYSTEM (evicted) BO moves back to GTT on map or pin. Pinned BOs never
 *    move (EBUSY). Every move gets new backing pages; the copy runs
 *    asynchronously on a "copy engine" (a workqueue, after move_delay_ms)
 *    and is fenced by a kernel fence in the reservation object that
 *    importers and CPU faults must wait for; before the copy the new pages
 *    hold poison, so reading them early shows garbage and writing them
 *    early is lost.
 *  - The old backing is checksummed when the move is announced, checked
 *    when the copy runs, then poisoned and quarantined; STATS with DRAIN
 *    checks the poison and frees it. Any write into old backing after the
 *    move was announced (a DMA through a stale mapping) is counted in
 *    stale_writes and logged.
 *
 * What it does not reproduce:
 *  - VRAM is system RAM here (on Strix Halo the carve-out is DRAM too), and
 *    exports always carry struct pages; amdgpu hands P2P importers page-less
 *    tables of bus addresses (dma_map_resource()).
 *  - TTM keeps the pages on a GTT->SYSTEM eviction and pipelines moves
 *    behind GPU work; here every move gets new pages and waits for the
 *    previous move first. No GPU work, no GPU page tables, no KFD eviction
 *    fences, no userptr, no swap-out to shmem.
 *  - Sparse BOs (any size, 2 MiB slots backed only where a test populates
 *    them) stand in for BOs of tens of GiB: unpopulated slots are one shared
 *    scratch slot for DMA and SIGBUS for the CPU. amdgpu backs every page.
 *  - No vmap, no dma-buf mmap, no CPU access sync (not needed by the
 *    importers under test).
 *
 * Two test-only stand-ins of other kernel code (gpusim_uapi.h): REVOKE
 * does to a REVOCABLE_ONLY BO what VFIO-PCI does to its dma-bufs on a
 * reset, and HOLD is a userptr BO's mmu interval notifier whose
 * invalidation waits, as amdgpu's waits for the BO's fences.
 *
 * Locking: the BO's reservation lock (obj->resv, shared with its dma-bufs)
 * protects its domain, backing and pin count, as in TTM; taken by the
 * ioctls, the dma-buf callbacks (the core holds it) and the fault handler
 * (mmap_lock -> resv, the documented order). The copy engine takes no lock
 * on the BO: it only touches the backing the move handed it and signals
 * the fence. The DRM device's object_name_lock (obj->dma_buf) is taken
 * before resv, never inside it. gpusim_lock (spinlock) protects the
 * quarantine list.
 *
 * Files: this one is the DRM driver (its BO ioctls, HOLD, load and
 * unload); gpusim_move.c the copy engine, the backing and the moves
 * (module parameter move_delay_ms); gpusim_dmabuf.c the dma-buf export
 * and the CPU mapping (module parameter p2p); gpusim_priv.h what they
 * share. Calls go one way: gpusim.c -> gpusim_dmabuf.c -> gpusim_move.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include <drm/drm_device.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_prime.h>
#include <drm/drm_vma_manager.h>

#include "gpusim_priv.h"
#include "gpusim_uapi.h"
#include "peersim_conftest.h"

#ifdef PSIM_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

#define GPUSIM_SPARSE_ORDER	(21 - PAGE_SHIFT)	/* 2 MiB slots */

static struct platform_device *gpusim_pdev;
static struct drm_device *gpusim_drm;
static atomic64_t gpusim_live_bos;

/* --- BOs ------------------------------------------------------------------------ */

static void gpusim_bo_free(struct drm_gem_object *obj)
{
	struct gpusim_bo *bo = to_bo(obj);

	gpusim_slots_free(bo->slots, bo->nslots, bo->order);
	drm_gem_object_release(obj);
	kfree(bo);
	atomic64_dec(&gpusim_live_bos);
}

static const struct drm_gem_object_funcs gpusim_gem_funcs = {
	.free = gpusim_bo_free,
	.export = gpusim_prime_export,
	.mmap = gpusim_gem_mmap,
	.vm_ops = &gpusim_vm_ops,
};

static int gpusim_ioc_create(struct drm_device *dev, void *data,
			     struct drm_file *file)
{
	struct sp_gpusim_create *c = data;
	bool sparse = c->flags & SP_GPUSIM_CREATE_SPARSE;
	unsigned int order = sparse ? GPUSIM_SPARSE_ORDER : 0;
	struct gpusim_bo *bo;
	unsigned long i;
	int ret;

	if ((c->flags & ~SP_GPUSIM_CREATE_FLAGS) || c->pad || !c->size ||
	    !IS_ALIGNED(c->size, gpusim_slot_size(order)) ||
	    (c->domain != SP_GPUSIM_DOMAIN_VRAM &&
	     c->domain != SP_GPUSIM_DOMAIN_GTT))
		return -EINVAL;
	if (c->size > (sparse ? SP_GPUSIM_MAX_SPARSE : SP_GPUSIM_MAX_BACKED))
		return -E2BIG;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return -ENOMEM;
	bo->base.funcs = &gpusim_gem_funcs;
	drm_gem_private_object_init(dev, &bo->base, c->size);
	atomic64_inc(&gpusim_live_bos);
	bo->order = order;
	bo->nslots = c->size >> (PAGE_SHIFT + order);
	bo->sparse = sparse;
	bo->revocable_only = c->flags & SP_GPUSIM_CREATE_REVOCABLE_ONLY;
	bo->domain = c->domain;
	bo->slots = kvcalloc(bo->nslots, sizeof(*bo->slots), GFP_KERNEL);
	ret = -ENOMEM;
	if (!bo->slots)
		goto out_put;
	for (i = 0; !sparse && i < bo->nslots; i++) {
		bo->slots[i] = gpusim_slot_alloc(order);
		if (!bo->slots[i])
			goto out_put;
	}
	ret = drm_gem_create_mmap_offset(&bo->base);
	if (ret)
		goto out_put;
	ret = drm_gem_handle_create(file, &bo->base, &c->handle);
	if (ret)
		goto out_put;
	c->mmap_offset = drm_vma_node_offset_addr(&bo->base.vma_node);
out_put:
	/* the handle holds the object now, or nothing does */
	drm_gem_object_put(&bo->base);
	return ret;
}

static struct gpusim_bo *gpusim_lookup(struct drm_file *file, u32 handle)
{
	struct drm_gem_object *obj = drm_gem_object_lookup(file, handle);

	return obj ? to_bo(obj) : NULL;
}

static int gpusim_ioc_populate(struct drm_device *dev, void *data,
			       struct drm_file *file)
{
	struct sp_gpusim_populate *p = data;
	struct gpusim_bo *bo;
	unsigned long i, first, last;
	int ret = 0;

	if (p->pad || !p->length)
		return -EINVAL;
	bo = gpusim_lookup(file, p->handle);
	if (!bo)
		return -ENOENT;
	if (p->offset > bo->base.size || p->length > bo->base.size - p->offset) {
		ret = -EINVAL;
		goto out_put;
	}
	ret = dma_resv_lock_interruptible(bo->base.resv, NULL);
	if (ret)
		goto out_put;
	if (bo->base.dma_buf || atomic_read(&bo->mappings)) {
		ret = -EBUSY;
		goto out_unlock;
	}
	first = p->offset >> (PAGE_SHIFT + bo->order);
	last = (p->offset + p->length - 1) >> (PAGE_SHIFT + bo->order);
	for (i = first; i <= last; i++) {
		if (bo->slots[i])
			continue;
		bo->slots[i] = gpusim_slot_alloc(bo->order);
		if (!bo->slots[i]) {
			ret = -ENOMEM;
			break;
		}
	}
out_unlock:
	dma_resv_unlock(bo->base.resv);
out_put:
	drm_gem_object_put(&bo->base);
	return ret;
}

static int gpusim_ioc_move(struct drm_device *dev, void *data,
			   struct drm_file *file)
{
	static const u32 evict_to[] = {
		[SP_GPUSIM_DOMAIN_VRAM] = SP_GPUSIM_DOMAIN_GTT,
		[SP_GPUSIM_DOMAIN_GTT] = SP_GPUSIM_DOMAIN_SYSTEM,
		[SP_GPUSIM_DOMAIN_SYSTEM] = SP_GPUSIM_DOMAIN_SYSTEM,
	};
	struct sp_gpusim_move *m = data;
	struct gpusim_bo *bo;
	u32 domain;
	long lret;
	int ret;

	if ((m->flags & ~SP_GPUSIM_MOVE_FLAGS) || m->moved ||
	    (!(m->flags & SP_GPUSIM_MOVE_EVICT) &&
	     m->domain > SP_GPUSIM_DOMAIN_SYSTEM))
		return -EINVAL;
	bo = gpusim_lookup(file, m->handle);
	if (!bo)
		return -ENOENT;
	ret = dma_resv_lock_interruptible(bo->base.resv, NULL);
	if (ret)
		goto out_put;
	domain = m->flags & SP_GPUSIM_MOVE_EVICT ? evict_to[bo->domain] : m->domain;
	ret = gpusim_move(bo, domain, GPUSIM_MOVE_IOCTL);
	dma_resv_unlock(bo->base.resv);
	if (ret < 0)
		goto out_put;
	m->moved = ret;
	ret = 0;
	if (m->flags & SP_GPUSIM_MOVE_WAIT) {
		lret = dma_resv_wait_timeout(bo->base.resv, DMA_RESV_USAGE_KERNEL,
					     true, MAX_SCHEDULE_TIMEOUT);
		if (lret < 0)
			ret = lret;
	}
out_put:
	drm_gem_object_put(&bo->base);
	return ret;
}

static int gpusim_ioc_info(struct drm_device *dev, void *data,
			   struct drm_file *file)
{
	struct sp_gpusim_info *info = data;
	struct dma_buf_attachment *a;
	struct dma_buf *dmabuf;
	struct gpusim_bo *bo;
	unsigned long i;
	int ret;

	if (info->pad)
		return -EINVAL;
	bo = gpusim_lookup(file, info->handle);
	if (!bo)
		return -ENOENT;
	dmabuf = gpusim_registered_dmabuf(bo);
	ret = dma_resv_lock_interruptible(bo->base.resv, NULL);
	if (ret)
		goto out_put;
	info->domain = bo->domain;
	info->size = bo->base.size;
	info->moves = atomic64_read(&bo->moves);
	info->pin_count = bo->pin_count;
	info->mappings = atomic_read(&bo->mappings);
	info->populated = 0;
	for (i = 0; i < bo->nslots; i++)
		if (bo->slots[i])
			info->populated += gpusim_slot_size(bo->order);
	info->move_pending = !dma_resv_test_signaled(bo->base.resv,
						     DMA_RESV_USAGE_KERNEL);
	/* the attachment list is under resv */
	info->exported = !!dmabuf;
	info->attachments = 0;
	if (dmabuf)
		list_for_each_entry(a, &dmabuf->attachments, node)
			info->attachments++;
	dma_resv_unlock(bo->base.resv);
out_put:
	if (dmabuf)
		dma_buf_put(dmabuf);
	drm_gem_object_put(&bo->base);
	return ret;
}

static int gpusim_ioc_stats(struct drm_device *dev, void *data,
			    struct drm_file *file)
{
	struct sp_gpusim_stats *s = data;

	if ((s->flags & ~SP_GPUSIM_STATS_DRAIN) || s->pad)
		return -EINVAL;
	if (s->flags & SP_GPUSIM_STATS_DRAIN) {
		flush_workqueue(gpusim_wq);
		gpusim_quarantine_drain(0);
	}
	s->moves = atomic64_read(&gpusim_moves);
	s->moves_in_map = atomic64_read(&gpusim_moves_in_map);
	s->moves_in_pin = atomic64_read(&gpusim_moves_in_pin);
	s->stale_writes = atomic64_read(&gpusim_stale_writes);
	spin_lock(&gpusim_lock);
	s->quarantined = gpusim_quarantined;
	spin_unlock(&gpusim_lock);
	s->checked = atomic64_read(&gpusim_checked);
	s->live_bos = atomic64_read(&gpusim_live_bos);
	return 0;
}

static int gpusim_ioc_revoke(struct drm_device *dev, void *data,
			     struct drm_file *file)
{
	struct sp_gpusim_revoke *r = data;
	struct dma_buf *dmabuf;
	struct gpusim_bo *bo;
	int ret = 0;

	if (r->pad || r->timeout_ms > 10000)
		return -EINVAL;
	bo = gpusim_lookup(file, r->handle);
	if (!bo)
		return -ENOENT;
	if (!bo->revocable_only) {
		ret = -EINVAL;
		goto out_put;
	}
	dmabuf = gpusim_registered_dmabuf(bo);
	dma_resv_lock(bo->base.resv, NULL);
	bo->revoked = true;
	if (dmabuf) {
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
		dma_buf_invalidate_mappings(dmabuf);
#else
		dma_buf_move_notify(dmabuf);
#endif
	}
	dma_resv_wait_timeout(bo->base.resv, DMA_RESV_USAGE_BOOKKEEP, false,
			      MAX_SCHEDULE_TIMEOUT);
	dma_resv_unlock(bo->base.resv);
	if (!wait_event_timeout(gpusim_unmap_wq, !atomic_read(&bo->mappings),
				msecs_to_jiffies(r->timeout_ms)))
		ret = -ETIMEDOUT;
	r->mappings = atomic_read(&bo->mappings);
	if (dmabuf)
		dma_buf_put(dmabuf);
out_put:
	drm_gem_object_put(&bo->base);
	return ret;
}

/*
 * HOLD (gpusim_uapi.h): gpusim_hold_lock guards the notifier's insertion
 * and removal and its owner; the invalidate callback reads only
 * gpusim_hold_armed and sleeps on gpusim_hold_wq.
 */
static DEFINE_MUTEX(gpusim_hold_lock);
static struct mmu_interval_notifier gpusim_hold_mni;
static struct drm_file *gpusim_hold_owner;
static bool gpusim_hold_armed;
static atomic_t gpusim_hold_held = ATOMIC_INIT(0);
static atomic64_t gpusim_hold_total = ATOMIC64_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(gpusim_hold_wq);

static bool gpusim_hold_invalidate(struct mmu_interval_notifier *mni,
				   const struct mmu_notifier_range *range,
				   unsigned long cur_seq)
{
	/* exit, or released: nothing to wait for */
	if (range->event == MMU_NOTIFY_RELEASE || !READ_ONCE(gpusim_hold_armed))
		return true;
	if (!mmu_notifier_range_blockable(range))
		return false;
	mmu_interval_set_seq(mni, cur_seq);
	atomic_inc(&gpusim_hold_held);
	atomic64_inc(&gpusim_hold_total);
	wake_up_all(&gpusim_hold_wq);
	if (!wait_event_timeout(gpusim_hold_wq, !READ_ONCE(gpusim_hold_armed),
				30 * HZ))
		pr_warn("a held invalidation went after 30 s without RELEASE\n");
	atomic_dec(&gpusim_hold_held);
	return true;
}

static const struct mmu_interval_notifier_ops gpusim_hold_ops = {
	.invalidate = gpusim_hold_invalidate,
};

static void gpusim_hold_release(void)
{
	WRITE_ONCE(gpusim_hold_armed, false);
	wake_up_all(&gpusim_hold_wq);
}

/* Stop watching, if @file armed the hold. Context: may sleep. */
static int gpusim_hold_remove(struct drm_file *file)
{
	int ret = -ENOENT;

	mutex_lock(&gpusim_hold_lock);
	if (gpusim_hold_owner == file) {
		gpusim_hold_release();
		mmu_interval_notifier_remove(&gpusim_hold_mni);
		gpusim_hold_owner = NULL;
		ret = 0;
	}
	mutex_unlock(&gpusim_hold_lock);
	return ret;
}

static int gpusim_ioc_hold(struct drm_device *dev, void *data,
			   struct drm_file *file)
{
	struct sp_gpusim_hold *h = data;
	long left;
	int ret = 0;

	if (h->pad)
		return -EINVAL;
	switch (h->op) {
	case SP_GPUSIM_HOLD_ARM:
		if (!h->length || !PAGE_ALIGNED(h->addr) ||
		    !PAGE_ALIGNED(h->length) || !current->mm)
			return -EINVAL;
		mutex_lock(&gpusim_hold_lock);
		if (gpusim_hold_owner) {
			ret = -EBUSY;
		} else {
			WRITE_ONCE(gpusim_hold_armed, true);
			ret = mmu_interval_notifier_insert(&gpusim_hold_mni,
							   current->mm, h->addr,
							   h->length,
							   &gpusim_hold_ops);
			if (ret)
				WRITE_ONCE(gpusim_hold_armed, false);
			else
				gpusim_hold_owner = file;
		}
		mutex_unlock(&gpusim_hold_lock);
		break;
	case SP_GPUSIM_HOLD_WAIT:
		if (h->timeout_ms > 60000)
			return -EINVAL;
		left = wait_event_interruptible_timeout(gpusim_hold_wq,
				atomic_read(&gpusim_hold_held) > 0,
				msecs_to_jiffies(h->timeout_ms));
		ret = left < 0 ? left : left ? 0 : -ETIMEDOUT;
		break;
	case SP_GPUSIM_HOLD_RELEASE:
		gpusim_hold_release();
		break;
	case SP_GPUSIM_HOLD_REMOVE:
		ret = gpusim_hold_remove(file);
		break;
	default:
		return -EINVAL;
	}
	h->held = atomic_read(&gpusim_hold_held);
	h->total = atomic64_read(&gpusim_hold_total);
	return ret;
}

static void gpusim_postclose(struct drm_device *dev, struct drm_file *file)
{
	gpusim_hold_remove(file);
}

static const struct drm_ioctl_desc gpusim_ioctls[] = {
	DRM_IOCTL_DEF_DRV(SP_GPUSIM_CREATE, gpusim_ioc_create, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SP_GPUSIM_POPULATE, gpusim_ioc_populate, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SP_GPUSIM_MOVE, gpusim_ioc_move, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SP_GPUSIM_INFO, gpusim_ioc_info, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SP_GPUSIM_STATS, gpusim_ioc_stats, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SP_GPUSIM_REVOKE, gpusim_ioc_revoke, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SP_GPUSIM_HOLD, gpusim_ioc_hold, DRM_RENDER_ALLOW),
};

DEFINE_DRM_GEM_FOPS(gpusim_fops);

static const struct drm_driver gpusim_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER,
	/* optional since 6.6; 6.1's PRIME ioctls need them */
	.prime_handle_to_fd = drm_gem_prime_handle_to_fd,
	.prime_fd_to_handle = drm_gem_prime_fd_to_handle,
	.postclose = gpusim_postclose,
	.ioctls = gpusim_ioctls,
	.num_ioctls = ARRAY_SIZE(gpusim_ioctls),
	.fops = &gpusim_fops,
	.name = SP_GPUSIM_DRIVER_NAME,
	.desc = "strixpeer tests: amdgpu/TTM-like buffer objects",
#ifdef PSIM_HAVE_DRM_DRIVER_DATE
	.date = "20261201",
#endif
	.major = 1,
};

static int __init gpusim_init(void)
{
	int ret;

	gpusim_scratch = gpusim_slot_alloc(GPUSIM_SPARSE_ORDER);
	if (!gpusim_scratch)
		return -ENOMEM;
	gpusim_fence_ctx = dma_fence_context_alloc(1);
	gpusim_wq = alloc_workqueue("sp_gpusim_copy", WQ_UNBOUND, 0);
	ret = -ENOMEM;
	if (!gpusim_wq)
		goto out_scratch;
	gpusim_pdev = platform_device_register_simple(SP_GPUSIM_DRIVER_NAME,
						      PLATFORM_DEVID_NONE, NULL, 0);
	if (IS_ERR(gpusim_pdev)) {
		ret = PTR_ERR(gpusim_pdev);
		goto out_wq;
	}
	gpusim_drm = drm_dev_alloc(&gpusim_driver, &gpusim_pdev->dev);
	if (IS_ERR(gpusim_drm)) {
		ret = PTR_ERR(gpusim_drm);
		goto out_pdev;
	}
	ret = drm_dev_register(gpusim_drm, 0);
	if (ret)
		goto out_drm;
	pr_info("ready: move_delay_ms %u, p2p %d\n", gpusim_move_delay_ms,
		gpusim_p2p);
	return 0;

out_drm:
	drm_dev_put(gpusim_drm);
out_pdev:
	platform_device_unregister(gpusim_pdev);
out_wq:
	destroy_workqueue(gpusim_wq);
out_scratch:
	__free_pages(gpusim_scratch, GPUSIM_SPARSE_ORDER);
	return ret;
}

/* No file or dma-buf of ours is open (each holds a module reference). */
static void __exit gpusim_exit(void)
{
	flush_workqueue(gpusim_wq);
	gpusim_quarantine_drain(0);
	drm_dev_unregister(gpusim_drm);
	drm_dev_put(gpusim_drm);
	platform_device_unregister(gpusim_pdev);
	destroy_workqueue(gpusim_wq);
	__free_pages(gpusim_scratch, GPUSIM_SPARSE_ORDER);
	if (atomic64_read(&gpusim_stale_writes))
		pr_err("%lld page(s) of moved-away backing were written\n",
		       (long long)atomic64_read(&gpusim_stale_writes));
}

module_init(gpusim_init);
module_exit(gpusim_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("strixpeer developers");
MODULE_DESCRIPTION("strixpeer tests: an amdgpu/TTM-like DRM exporter that moves buffers");
