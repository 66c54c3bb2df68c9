/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sp_gpusim's internal interface between its files: gpusim.c (the DRM
 * driver: its BO ioctls, HOLD, load and unload), gpusim_move.c (the copy
 * engine, the backing and the moves) and gpusim_dmabuf.c (the dynamic
 * dma-buf export and the CPU mapping). What sp_gpusim reproduces of
 * amdgpu/TTM, what it does not, and its locking are in gpusim.c's header
 * comment.
 */
#ifndef GPUSIM_PRIV_H
#define GPUSIM_PRIV_H

#include <linux/atomic.h>
#include <linux/dma-buf.h>
#include <linux/mm.h>
#include <linux/mm_types.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include <drm/drm_gem.h>

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

static inline struct gpusim_bo *to_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct gpusim_bo, base);
}

static inline size_t gpusim_slot_size(unsigned int order)
{
	return PAGE_SIZE << order;
}

enum gpusim_move_why { GPUSIM_MOVE_IOCTL, GPUSIM_MOVE_IN_MAP, GPUSIM_MOVE_IN_PIN };

/* gpusim_move.c: its module parameter and state (STATS reads it) */
extern unsigned int gpusim_move_delay_ms;
extern struct workqueue_struct *gpusim_wq;	/* the copy engine */
extern u64 gpusim_fence_ctx;
extern spinlock_t gpusim_lock;
extern u64 gpusim_quarantined;		/* bytes, gpusim_lock */
extern atomic64_t gpusim_moves, gpusim_moves_in_map, gpusim_moves_in_pin;
extern atomic64_t gpusim_stale_writes, gpusim_checked;

/* gpusim_move.c: backing, quarantine and moves */
struct page *gpusim_slot_alloc(unsigned int order);
void gpusim_slots_free(struct page **slots, unsigned long n,
		       unsigned int order);
void gpusim_quarantine_drain(u64 keep);
struct dma_buf *gpusim_registered_dmabuf(struct gpusim_bo *bo);
int gpusim_move(struct gpusim_bo *bo, u32 domain, enum gpusim_move_why why);

/* gpusim_dmabuf.c: its module parameter and state */
extern bool gpusim_p2p;
extern struct page *gpusim_scratch;	/* 2 MiB, the unbacked slots' DMA target */
/* A BO's mapping count reached 0 (REVOKE waits for that). */
extern struct wait_queue_head gpusim_unmap_wq;

/* gpusim_dmabuf.c: the GEM object's export and mmap callbacks */
extern const struct vm_operations_struct gpusim_vm_ops;
struct dma_buf *gpusim_prime_export(struct drm_gem_object *obj, int flags);
int gpusim_gem_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma);

#endif /* GPUSIM_PRIV_H */
