// SPDX-License-Identifier: GPL-2.0
/*
 * sp_gpusim's moves (see gpusim.c for what the module reproduces): the
 * copy engine's fence, the BOs' backing slots, the quarantine of the old
 * backing of every move (checksummed when the move is announced, checked
 * when the copy runs, then poisoned and checked again when it is freed),
 * and gpusim_move(), which ttm_bo_validate() stands for. The copy engine
 * takes no lock on the BO; gpusim_lock protects the quarantine.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/crc32.h>
#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include <drm/drm_device.h>
#include <drm/drm_gem.h>
#include <drm/drm_vma_manager.h>

#include "gpusim_priv.h"
#include "peersim_conftest.h"

#define GPUSIM_POISON		0x5350504f49534f4eULL	/* "SPPOISON" */
/* At most this much old backing waits in quarantine; the oldest goes first. */
#define GPUSIM_QUARANTINE_MAX	(256ULL << 20)

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

unsigned int gpusim_move_delay_ms = 10;
module_param_named(move_delay_ms, gpusim_move_delay_ms, uint, 0644);
MODULE_PARM_DESC(move_delay_ms, "Latency of the simulated copy engine per move (ms)");

struct workqueue_struct *gpusim_wq;	/* the copy engine */
u64 gpusim_fence_ctx;
static atomic64_t gpusim_fence_seqno;
static DEFINE_SPINLOCK(gpusim_fence_lock);

DEFINE_SPINLOCK(gpusim_lock);
static LIST_HEAD(gpusim_quarantine);	/* gpusim_lock */
u64 gpusim_quarantined;			/* bytes, gpusim_lock */

atomic64_t gpusim_moves, gpusim_moves_in_map, gpusim_moves_in_pin;
atomic64_t gpusim_stale_writes, gpusim_checked;

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

/**
 * gpusim_slot_alloc() - allocate one zeroed backing slot
 * @order: the slot is PAGE_SIZE << @order (compound when @order > 0)
 *
 * Context: may sleep.
 * Return: the slot's first page, or NULL.
 */
struct page *gpusim_slot_alloc(unsigned int order)
{
	gfp_t gfp = GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN;

	if (order)
		gfp |= __GFP_COMP | __GFP_RETRY_MAYFAIL;
	return alloc_pages(gfp, order);
}

/**
 * gpusim_slots_free() - free a backing array and its slots
 * @slots: the array (kvmalloc'ed; NULL entries are unbacked slots), or NULL
 * @n: entries of @slots
 * @order: the slots' order
 */
void gpusim_slots_free(struct page **slots, unsigned long n,
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

/**
 * gpusim_quarantine_drain() - check and free quarantined old backing
 * @keep: bytes that may stay quarantined (the oldest go first)
 *
 * Context: may sleep; takes gpusim_lock.
 */
void gpusim_quarantine_drain(u64 keep)
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

/**
 * gpusim_registered_dmabuf() - the BO's registered dma-buf
 * @bo: the BO
 *
 * The BO's registered dma-buf is obj->dma_buf, set by DRM's PRIME export
 * path under object_name_lock.
 *
 * Context: not under resv (see gpusim_notify_importers()).
 * Return: it, with a reference; NULL if it has none.
 */
struct dma_buf *gpusim_registered_dmabuf(struct gpusim_bo *bo)
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
int gpusim_move(struct gpusim_bo *bo, u32 domain, enum gpusim_move_why why)
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
			   msecs_to_jiffies(READ_ONCE(gpusim_move_delay_ms)));
	return 1;

out_free:
	if (g->fence)
		dma_fence_put(g->fence);
	gpusim_slots_free(g->new, g->nslots, g->order);
	kvfree(g->csum);
	kfree(g);
	return ret;
}
