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
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/crc32.h>
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

#include "gpusim_uapi.h"
#include "peersim_conftest.h"

#ifdef PSIM_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

static unsigned int move_delay_ms = 10;
module_param(move_delay_ms, uint, 0644);
MODULE_PARM_DESC(move_delay_ms, "Latency of the simulated copy engine per move (ms)");

static bool p2p;
module_param(p2p, bool, 0644);
MODULE_PARM_DESC(p2p, "Importers may reach VRAM peer-to-peer (default N: VRAM BOs migrate to GTT when mapped)");

#define GPUSIM_POISON		0x5350504f49534f4eULL	/* "SPPOISON" */
#define GPUSIM_SPARSE_ORDER	(21 - PAGE_SHIFT)	/* 2 MiB slots */
/* At most this much old backing waits in quarantine; the oldest goes first. */
#define GPUSIM_QUARANTINE_MAX	(256ULL << 20)

/**
 * struct gpusim_bo - a buffer object
 * @base: the GEM object (first: vm_private_data and dmabuf->priv point here)
 * @order: slot size is PAGE_SIZE << @order
 * @nslots: slots covering the object
 * @sparse: slots stay unbacked until POPULATE
 * @domain: SP_GPUSIM_DOMAIN_* (resv)
 * @slots: current backing, one page (of @order) per slot, NULL = unbacked
 *	(resv; a move replaces the array)
 * @pin_count: dma_buf_pin()s held (resv)
 * @moves: moves so far
 * @mappings: importer mappings alive (map_dma_buf minus unmap_dma_buf)
 * @revocable_only: SP_GPUSIM_CREATE_REVOCABLE_ONLY
 * @revoked: REVOKE ran: no new mappings (resv)
 */
struct gpusim_bo {
	struct drm_gem_object base;
	unsigned int order;
	unsigned long nslots;
	bool sparse;
	bool revocable_only;
	bool revoked;
	u32 domain;
	struct page **slots;
	unsigned int pin_count;
	atomic64_t moves;
	atomic_t mappings;
};

/**
 * struct gpusim_ghost - the old backing of one move
 * @node: in gpusim_quarantine once the copy ran
 * @bo: the BO (a reference until the copy ran)
 * @order: slot order
 * @nslots: entries of @old and @new
 * @old: the backing moved away from
 * @new: the backing moved to (the BO's, filled by the copy)
 * @csum: crc32 of each old slot when the move was announced
 * @fence: signalled when the copy finished
 * @work: the copy engine's job
 */
struct gpusim_ghost {
	struct list_head node;
	struct gpusim_bo *bo;
	unsigned int order;
	unsigned long nslots;
	struct page **old;
	struct page **new;
	u32 *csum;
	struct dma_fence *fence;
	struct delayed_work work;
};

static struct platform_device *gpusim_pdev;
static struct drm_device *gpusim_drm;
static struct workqueue_struct *gpusim_wq;
static struct page *gpusim_scratch;	/* 2 MiB, the unbacked slots' DMA target */
static u64 gpusim_fence_ctx;
static atomic64_t gpusim_fence_seqno;
static DEFINE_SPINLOCK(gpusim_fence_lock);

static DEFINE_SPINLOCK(gpusim_lock);
static LIST_HEAD(gpusim_quarantine);	/* gpusim_lock */
static u64 gpusim_quarantined;		/* bytes, gpusim_lock */

static atomic64_t gpusim_moves, gpusim_moves_in_map, gpusim_moves_in_pin;
static atomic64_t gpusim_stale_writes, gpusim_checked, gpusim_live_bos;
/* A BO's mapping count reached 0 (REVOKE waits for that). */
static DECLARE_WAIT_QUEUE_HEAD(gpusim_unmap_wq);

static inline struct gpusim_bo *to_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct gpusim_bo, base);
}

static inline size_t gpusim_slot_size(unsigned int order)
{
	return PAGE_SIZE << order;
}

/* --- the copy engine's fence -------------------------------------------- */

static const char *gpusim_fence_driver(struct dma_fence *f)
{
	return "sp_gpusim";
}

static const char *gpusim_fence_timeline(struct dma_fence *f)
{
	return "copy";
}

static const struct dma_fence_ops gpusim_fence_ops = {
	.get_driver_name = gpusim_fence_driver,
	.get_timeline_name = gpusim_fence_timeline,
};

static struct dma_fence *gpusim_fence_new(void)
{
	struct dma_fence *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (f)
		dma_fence_init(f, &gpusim_fence_ops, &gpusim_fence_lock,
			       gpusim_fence_ctx,
			       atomic64_inc_return(&gpusim_fence_seqno));
	return f;
}

/* --- backing ----------------------------------------------------------------- */

static struct page *gpusim_slot_alloc(unsigned int order)
{
	gfp_t gfp = GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN;

	if (order)
		gfp |= __GFP_COMP | __GFP_RETRY_MAYFAIL;
	return alloc_pages(gfp, order);
}

static void gpusim_slots_free(struct page **slots, unsigned long n,
			      unsigned int order)
{
	unsigned long i;

	if (!slots)
		return;
	for (i = 0; i < n; i++)
		if (slots[i])
			__free_pages(slots[i], order);
	kvfree(slots);
}

static void gpusim_slot_poison(struct page *page, unsigned int order)
{
	memset64(page_address(page), GPUSIM_POISON,
		 gpusim_slot_size(order) / sizeof(u64));
}

/* 4 KiB pages of @page (a slot) whose poison was overwritten. */
static unsigned long gpusim_slot_check(struct page *page, unsigned int order)
{
	unsigned long bad = 0, j, k;

	for (j = 0; j < (1UL << order); j++) {
		const u64 *p = page_address(page) + j * PAGE_SIZE;

		for (k = 0; k < PAGE_SIZE / sizeof(u64); k++) {
			if (p[k] != GPUSIM_POISON) {
				bad++;
				break;
			}
		}
	}
	return bad;
}

static void gpusim_count_stale(unsigned long pages, const char *when)
{
	if (!pages)
		return;
	atomic64_add(pages, &gpusim_stale_writes);
	pr_err_ratelimited("%lu page(s) of moved-away backing written %s\n",
			   pages, when);
}

static void gpusim_ghost_free(struct gpusim_ghost *g)
{
	gpusim_slots_free(g->old, g->nslots, g->order);
	kvfree(g->csum);
	kfree(g);
}

/* Checks the quarantined old backing and frees it. */
static void gpusim_ghost_check(struct gpusim_ghost *g)
{
	unsigned long i, bad = 0;

	for (i = 0; i < g->nslots; i++)
		if (g->old[i])
			bad += gpusim_slot_check(g->old[i], g->order);
	gpusim_count_stale(bad, "after the move's copy (stale DMA)");
	atomic64_add((u64)g->nslots * gpusim_slot_size(g->order),
		     &gpusim_checked);
	gpusim_ghost_free(g);
}

static void gpusim_quarantine_drain(u64 keep)
{
	struct gpusim_ghost *g;

	for (;;) {
		spin_lock(&gpusim_lock);
		g = list_first_entry_or_null(&gpusim_quarantine,
					     struct gpusim_ghost, node);
		if (!g || gpusim_quarantined <= keep) {
			spin_unlock(&gpusim_lock);
			return;
		}
		list_del(&g->node);
		gpusim_quarantined -= (u64)g->nslots * gpusim_slot_size(g->order);
		spin_unlock(&gpusim_lock);
		gpusim_ghost_check(g);
	}
}

/*
 * The copy engine: checks nobody wrote the old backing since the move was
 * announced, copies it to the new backing, poisons it, signals the fence
 * and quarantines it. Takes no lock on the BO.
 */
static void gpusim_ghost_work(struct work_struct *work)
{
	struct gpusim_ghost *g = container_of(to_delayed_work(work),
					      struct gpusim_ghost, work);
	size_t sz = gpusim_slot_size(g->order);
	unsigned long i, bad = 0;

	for (i = 0; i < g->nslots; i++) {
		if (!g->old[i])
			continue;
		if (crc32_le(~0, page_address(g->old[i]), sz) != g->csum[i])
			bad += 1UL << g->order;
		memcpy(page_address(g->new[i]), page_address(g->old[i]), sz);
		gpusim_slot_poison(g->old[i], g->order);
	}
	gpusim_count_stale(bad, "between the move's announcement and its copy");
	dma_fence_signal(g->fence);
	dma_fence_put(g->fence);
	g->fence = NULL;
	drm_gem_object_put(&g->bo->base);
	g->bo = NULL;

	spin_lock(&gpusim_lock);
	list_add_tail(&g->node, &gpusim_quarantine);
	gpusim_quarantined += (u64)g->nslots * sz;
	spin_unlock(&gpusim_lock);
	gpusim_quarantine_drain(GPUSIM_QUARANTINE_MAX);
}

/*
 * The BO's registered dma-buf (obj->dma_buf, set by DRM's PRIME export
 * path under object_name_lock), with a reference; NULL if it has none.
 * Context: not under resv (see gpusim_notify_importers()).
 */
static struct dma_buf *gpusim_registered_dmabuf(struct gpusim_bo *bo)
{
	struct drm_device *dev = bo->base.dev;
	struct dma_buf *dmabuf;

	mutex_lock(&dev->object_name_lock);
	dmabuf = bo->base.dma_buf;
	if (dmabuf)
		get_dma_buf(dmabuf);
	mutex_unlock(&dev->object_name_lock);
	return dmabuf;
}

/*
 * amdgpu_bo_move_notify(): only the importers of the BO's registered
 * dma-buf hear of the move (7.x renamed the call). Like amdgpu, it reads
 * obj->dma_buf under the reservation lock alone: object_name_lock may not
 * nest inside it (DRM's PRIME export takes object_name_lock and then
 * dma-buf locks that are taken before resv). That read races with the
 * BO's last handle going away, in amdgpu too; the tests never close a
 * BO's last handle while it moves.
 * Context: resv held.
 */
static void gpusim_notify_importers(struct gpusim_bo *bo)
{
	struct dma_buf *dmabuf = READ_ONCE(bo->base.dma_buf);

	dma_resv_assert_held(bo->base.resv);
	if (!dmabuf)
		return;
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	dma_buf_invalidate_mappings(dmabuf);
#else
	dma_buf_move_notify(dmabuf);
#endif
}

enum gpusim_move_why { GPUSIM_MOVE_IOCTL, GPUSIM_MOVE_IN_MAP, GPUSIM_MOVE_IN_PIN };

/**
 * gpusim_move() - move a BO to @domain, as ttm_bo_validate() would
 * @bo: the BO
 * @domain: SP_GPUSIM_DOMAIN_*
 * @why: what asked (counted)
 *
 * Allocates the new backing first (on failure nothing moved), waits for a
 * previous move, announces the move to the importers of the BO's
 * registered dma-buf and zaps the CPU mappings, switches the backing and
 * leaves the copy to the copy engine, fenced.
 *
 * Context: the BO's reservation lock held.
 * Return: 1 moved, 0 already there, -EBUSY pinned, -errno.
 */
static int gpusim_move(struct gpusim_bo *bo, u32 domain, enum gpusim_move_why why)
{
	struct dma_resv *resv = bo->base.resv;
	struct gpusim_ghost *g;
	unsigned long i;
	long lret;
	int ret;

	dma_resv_assert_held(resv);
	if (bo->domain == domain)
		return 0;
	if (bo->pin_count)
		return -EBUSY;
	lret = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, true,
				     MAX_SCHEDULE_TIMEOUT);
	if (lret < 0)
		return lret;

	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g)
		return -ENOMEM;
	g->order = bo->order;
	g->nslots = bo->nslots;
	INIT_DELAYED_WORK(&g->work, gpusim_ghost_work);
	g->new = kvcalloc(bo->nslots, sizeof(*g->new), GFP_KERNEL);
	g->csum = kvcalloc(bo->nslots, sizeof(*g->csum), GFP_KERNEL);
	g->fence = gpusim_fence_new();
	ret = -ENOMEM;
	if (!g->new || !g->csum || !g->fence)
		goto out_free;
	for (i = 0; i < bo->nslots; i++) {
		if (!bo->slots[i])
			continue;
		g->new[i] = gpusim_slot_alloc(bo->order);
		if (!g->new[i])
			goto out_free;
		gpusim_slot_poison(g->new[i], bo->order);
	}
	ret = dma_resv_reserve_fences(resv, 1);
	if (ret)
		goto out_free;

	/* Past here the move happens: importers first, then CPU mappings. */
	gpusim_notify_importers(bo);
	drm_vma_node_unmap(&bo->base.vma_node,
			   bo->base.dev->anon_inode->i_mapping);
	for (i = 0; i < bo->nslots; i++)
		if (bo->slots[i])
			g->csum[i] = crc32_le(~0, page_address(bo->slots[i]),
					      gpusim_slot_size(bo->order));
	g->old = bo->slots;
	bo->slots = g->new;
	bo->domain = domain;
	dma_resv_add_fence(resv, g->fence, DMA_RESV_USAGE_KERNEL);

	atomic64_inc(&bo->moves);
	atomic64_inc(&gpusim_moves);
	if (why == GPUSIM_MOVE_IN_MAP)
		atomic64_inc(&gpusim_moves_in_map);
	else if (why == GPUSIM_MOVE_IN_PIN)
		atomic64_inc(&gpusim_moves_in_pin);
	drm_gem_object_get(&bo->base);
	g->bo = bo;
	queue_delayed_work(gpusim_wq, &g->work,
			   msecs_to_jiffies(READ_ONCE(move_delay_ms)));
	return 1;

out_free:
	if (g->fence)
		dma_fence_put(g->fence);
	gpusim_slots_free(g->new, g->nslots, g->order);
	kvfree(g->csum);
	kfree(g);
	return ret;
}

/* --- dma-buf export (amdgpu_dmabuf_ops-like: dynamic) ---------------------- */

/*
 * dma_buf_attach_revocable() (7.x): the importer supplies the callback an
 * exporter calls to take its mappings away. Before 7.x every dynamic
 * importer had to supply one.
 */
static bool gpusim_attach_revocable(struct dma_buf_attachment *attach)
{
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	return attach->importer_ops && attach->importer_ops->invalidate_mappings;
#else
	return attach->importer_ops && attach->importer_ops->move_notify;
#endif
}

static int gpusim_dmabuf_attach(struct dma_buf *dmabuf,
				struct dma_buf_attachment *attach)
{
	struct gpusim_bo *bo = to_bo(dmabuf->priv);

	/* vfio_pci_dma_buf_attach() */
	if (bo->revocable_only && !gpusim_attach_revocable(attach))
		return -EOPNOTSUPP;
	/* pci_p2pdma_distance() < 0 in amdgpu_dma_buf_attach() */
	if (!READ_ONCE(p2p))
		attach->peer2peer = false;
	return 0;
}

/*
 * Where the BO must be for @attach to map it; to pin it (@all), where
 * every attachment of @attach's dma-buf can reach it.
 */
static u32 gpusim_reachable_domain(struct gpusim_bo *bo,
				   struct dma_buf_attachment *attach, bool all)
{
	struct dma_buf_attachment *a;

	if (bo->domain == SP_GPUSIM_DOMAIN_SYSTEM)
		return SP_GPUSIM_DOMAIN_GTT;
	if (bo->domain != SP_GPUSIM_DOMAIN_VRAM)
		return bo->domain;
	if (!all)
		return attach->peer2peer ? SP_GPUSIM_DOMAIN_VRAM :
					   SP_GPUSIM_DOMAIN_GTT;
	/* amdgpu_dma_buf_pin(): VRAM only if every attachment can do P2P */
	list_for_each_entry(a, &attach->dmabuf->attachments, node)
		if (!a->peer2peer)
			return SP_GPUSIM_DOMAIN_GTT;
	return SP_GPUSIM_DOMAIN_VRAM;
}

static int gpusim_dmabuf_pin(struct dma_buf_attachment *attach)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);
	struct dma_resv *resv = attach->dmabuf->resv;
	long lret;
	int ret;

	dma_resv_assert_held(resv);
	if (!bo->pin_count) {
		ret = gpusim_move(bo, gpusim_reachable_domain(bo, attach, true),
				  GPUSIM_MOVE_IN_PIN);
		if (ret < 0)
			return ret;
	}
	/* pin's contract: the memory is usable when it returns */
	lret = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, false,
				     MAX_SCHEDULE_TIMEOUT);
	if (lret < 0)
		return lret;
	bo->pin_count++;
	return 0;
}

static void gpusim_dmabuf_unpin(struct dma_buf_attachment *attach)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);

	dma_resv_assert_held(attach->dmabuf->resv);
	if (!WARN_ON(!bo->pin_count))
		bo->pin_count--;
}

static void gpusim_sgt_unmap(struct device *dev, struct sg_table *sgt,
			     enum dma_data_direction dir)
{
	bool scratch_done = false;
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_sg(sgt, sg, i) {
		if (!sg_dma_len(sg))
			break;	/* the rest was never mapped */
		if (sg_page(sg) == gpusim_scratch) {
			if (scratch_done)
				continue;
			scratch_done = true;
		}
		dma_unmap_page_attrs(dev, sg_dma_address(sg), sg_dma_len(sg),
				     dir, DMA_ATTR_SKIP_CPU_SYNC);
	}
	sg_free_table(sgt);
	kfree(sgt);
}

static struct sg_table *gpusim_dmabuf_map(struct dma_buf_attachment *attach,
					  enum dma_data_direction dir)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);
	size_t sz = gpusim_slot_size(bo->order);
	dma_addr_t scratch_dma = DMA_MAPPING_ERROR;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned long i;
	int ret;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (bo->revoked)
		return ERR_PTR(-ENODEV);
	if (!bo->pin_count) {
		/* amdgpu_dma_buf_map(): validate into a reachable domain */
		ret = gpusim_move(bo, gpusim_reachable_domain(bo, attach, false),
				  GPUSIM_MOVE_IN_MAP);
		if (ret < 0)
			return ERR_PTR(ret);
	} else if (bo->domain == SP_GPUSIM_DOMAIN_VRAM && !attach->peer2peer) {
		return ERR_PTR(-EINVAL);	/* pinned where this one cannot go */
	}

	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, bo->nslots, GFP_KERNEL);
	if (ret) {
		kfree(sgt);
		return ERR_PTR(ret);
	}
	for_each_sgtable_sg(sgt, sg, i) {
		struct page *page = bo->slots[i] ?: gpusim_scratch;
		dma_addr_t addr;

		sg_set_page(sg, page, sz, 0);
		sg_dma_len(sg) = 0;
		if (page == gpusim_scratch && scratch_dma != DMA_MAPPING_ERROR) {
			addr = scratch_dma;
		} else {
			addr = dma_map_page_attrs(attach->dev, page, 0, sz, dir,
						  DMA_ATTR_SKIP_CPU_SYNC);
			if (dma_mapping_error(attach->dev, addr)) {
				gpusim_sgt_unmap(attach->dev, sgt, dir);
				return ERR_PTR(-ENOMEM);
			}
			if (page == gpusim_scratch)
				scratch_dma = addr;
		}
		sg_dma_address(sg) = addr;
		sg_dma_len(sg) = sz;
	}
	atomic_inc(&bo->mappings);
	return sgt;
}

static void gpusim_dmabuf_unmap(struct dma_buf_attachment *attach,
				struct sg_table *sgt, enum dma_data_direction dir)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);

	gpusim_sgt_unmap(attach->dev, sgt, dir);
	if (atomic_dec_and_test(&bo->mappings))
		wake_up_all(&gpusim_unmap_wq);
}

static const struct dma_buf_ops gpusim_dmabuf_ops = {
	.attach = gpusim_dmabuf_attach,
	.pin = gpusim_dmabuf_pin,
	.unpin = gpusim_dmabuf_unpin,
	.map_dma_buf = gpusim_dmabuf_map,
	.unmap_dma_buf = gpusim_dmabuf_unmap,
	.release = drm_gem_dmabuf_release,
};

/* amdgpu_gem_prime_export(): DRM's export, with the driver's dynamic ops. */
static struct dma_buf *gpusim_prime_export(struct drm_gem_object *obj, int flags)
{
	struct dma_buf *buf = drm_gem_prime_export(obj, flags);

	if (!IS_ERR(buf))
		buf->ops = &gpusim_dmabuf_ops;
	return buf;
}

/* --- CPU mapping (drm_gem_mmap -> here) ------------------------------------ */

static vm_fault_t gpusim_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct gpusim_bo *bo = to_bo(vma->vm_private_data);
	unsigned long pgoff, slot;
	vm_fault_t ret = VM_FAULT_SIGBUS;
	struct page *page;
	long lret;

	if (dma_resv_lock_interruptible(bo->base.resv, NULL))
		return VM_FAULT_NOPAGE;
	/* ttm_bo_vm_fault_idle(): the move's copy must be done */
	lret = dma_resv_wait_timeout(bo->base.resv, DMA_RESV_USAGE_KERNEL, true,
				     MAX_SCHEDULE_TIMEOUT);
	if (lret < 0) {
		ret = lret == -ERESTARTSYS ? VM_FAULT_NOPAGE : VM_FAULT_SIGBUS;
		goto out;
	}
	pgoff = vmf->pgoff - drm_vma_node_start(&bo->base.vma_node);
	slot = pgoff >> bo->order;
	if (slot >= bo->nslots)
		goto out;
	page = bo->slots[slot];
	if (!page)
		goto out;	/* sparse and not populated */
	ret = vmf_insert_pfn(vma, vmf->address, page_to_pfn(page) +
			     (pgoff & ((1UL << bo->order) - 1)));
out:
	dma_resv_unlock(bo->base.resv);
	return ret;
}

static const struct vm_operations_struct gpusim_vm_ops = {
	.fault = gpusim_vm_fault,
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

/* ttm_bo_mmap_obj(): no copy-on-write; a PFN mapping. */
static int gpusim_gem_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	if (is_cow_mapping(vma->vm_flags))
		return -EINVAL;
#ifdef PSIM_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
#else
	vma->vm_flags |= VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP;
#endif
	vma->vm_page_prot = vm_get_page_prot(vma->vm_flags);
	return 0;
}

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
	pr_info("ready: move_delay_ms %u, p2p %d\n", move_delay_ms, p2p);
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
