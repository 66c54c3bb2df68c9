// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer imports: "bytes [offset, offset + length) of this dma-buf are
 * mapped at [va, va + length) of my address space". The PeerDirect client
 * (peer.c) claims registrations of such ranges and maps the dma-buf for the
 * NIC; a GPU buffer's CPU mapping (a TTM PFN mapping) cannot be pinned by
 * ib_umem, so this is how ibv_reg_mr() on it can work.
 *
 * Every live import sits in one interval tree keyed by VA (imports of
 * different processes may overlap; one process's may not). An import ends
 * on UNIMPORT, when its fd is closed, when any part of its range is
 * unmapped and when its process exits (an mmu interval notifier sees both),
 * and for an implicit import (zero-change mode, below) when its one
 * registration is released. Ending invalidates every registration using
 * the import before the ending call returns; the dma-buf reference goes
 * with the last registration.
 *
 * Locking, outermost first:
 *   sp_imports_lock (mutex): the interval tree and each import's @in_tree
 *   sp_import.lock (mutex): an import's registrations and @dead; held
 *	across their invalidation (peer.c), so no path that the core runs
 *	under its own locks (get_pages, dma_map) may take it
 * The notifier callback takes no lock at all: it may run under mmap_lock
 * and reclaim, where invalidating (ib_core's locks, the dma-buf's
 * reservation lock) is not allowed. It queues @unmap_work, which ends the
 * import from process context. The pages stay valid meanwhile: a dma-buf
 * is not freed by unmapping a CPU mapping of it, and our reference on it
 * lives until the last registration is gone.
 */
#include <linux/dma-buf.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/interval_tree.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#if IS_ENABLED(CONFIG_DRM)
#include <drm/drm_device.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_prime.h>
#include <drm/drm_vma_manager.h>
#endif

#include <uapi/strixpeer.h>

#include "strixpeer.h"

bool sp_claim_gem_mappings = true;
module_param_named(claim_gem_mappings, sp_claim_gem_mappings, bool, 0644);
MODULE_PARM_DESC(claim_gem_mappings,
		 "Claim registrations of amdgpu/vgem GEM mappings that were not imported (default Y)");

static DEFINE_MUTEX(sp_imports_lock);
static struct rb_root_cached sp_import_tree = RB_ROOT_CACHED;
static DEFINE_XARRAY_ALLOC1(sp_import_ids);
static u32 sp_import_next_id;
static struct workqueue_struct *sp_import_wq;

static void sp_import_free(struct kref *ref)
{
	struct sp_import *imp = container_of(ref, struct sp_import, ref);

	WARN_ON(imp->in_tree || imp->notifier_live || imp->nr_ctxs);
	xa_erase(&sp_import_ids, imp->id);
	dma_buf_put(imp->dmabuf);
	mmdrop(imp->mm);
	mutex_destroy(&imp->lock);
	atomic64_dec(&sp_stats.imports);
	kfree(imp);
}

void sp_import_put(struct sp_import *imp)
{
	kref_put(&imp->ref, sp_import_free);
}

/*
 * The range is going away (munmap, mremap, exit). Other events (fork's
 * write protection, a zap when the exporter moves the buffer, madvise)
 * leave the dma-buf bytes where they are and are none of our business;
 * moves reach us through the dma-buf's move_notify instead.
 */
static bool sp_import_invalidate_range(struct mmu_interval_notifier *mni,
				       const struct mmu_notifier_range *range,
				       unsigned long cur_seq)
{
	struct sp_import *imp = container_of(mni, struct sp_import, notifier);
	int reason;

	if (range->event != MMU_NOTIFY_UNMAP &&
	    range->event != MMU_NOTIFY_RELEASE)
		return true;
	mmu_interval_set_seq(mni, cur_seq);
	reason = range->event == MMU_NOTIFY_RELEASE ? STRIXPEER_INVAL_EXIT :
						      STRIXPEER_INVAL_UNMAP;
	if (atomic_cmpxchg(&imp->unmap_reason, 0, reason) == 0) {
		/* The notifier is live, so the owner's reference is too. */
		kref_get(&imp->ref);
		queue_work(sp_import_wq, &imp->unmap_work);
	}
	return true;
}

static const struct mmu_interval_notifier_ops sp_import_mni_ops = {
	.invalidate = sp_import_invalidate_range,
};

static void sp_import_unmap_work(struct work_struct *work)
{
	struct sp_import *imp = container_of(work, struct sp_import,
					     unmap_work);

	sp_import_end(imp, atomic_read(&imp->unmap_reason));
	sp_import_put(imp);
}

/**
 * sp_import_end() - end an import: no new claims, registrations invalidated
 * @imp: the import (caller holds a reference)
 * @reason: STRIXPEER_INVAL_*, reported with the invalidations
 *
 * Idempotent; a second caller returns once the first has invalidated.
 * Context: process context, may sleep; takes sp_imports_lock, then
 * @imp->lock. Never from the notifier callback (removes the notifier).
 */
void sp_import_end(struct sp_import *imp, enum strixpeer_inval_reason reason)
{
	bool remove_notifier = false;

	mutex_lock(&sp_imports_lock);
	if (imp->in_tree) {
		interval_tree_remove(&imp->it, &sp_import_tree);
		imp->in_tree = false;
	}
	mutex_unlock(&sp_imports_lock);

	mutex_lock(&imp->lock);
	if (!imp->dead) {
		imp->dead = true;
		remove_notifier = imp->notifier_live;
		imp->notifier_live = false;
		sp_peer_invalidate_all(imp, reason);
	}
	mutex_unlock(&imp->lock);

	if (remove_notifier)
		mmu_interval_notifier_remove(&imp->notifier);
}

/*
 * A new import of @dmabuf for @mm; @va..@length must be page aligned and
 * the caller's mm must be @mm (the notifier is inserted into it).
 */
static struct sp_import *sp_import_new(struct mm_struct *mm,
				       struct dma_buf *dmabuf, u64 offset,
				       u64 length, unsigned long va,
				       bool implicit)
{
	struct sp_import *imp;
	int ret;

	imp = kzalloc(sizeof(*imp), GFP_KERNEL);
	if (!imp)
		return ERR_PTR(-ENOMEM);
	kref_init(&imp->ref);
	mutex_init(&imp->lock);
	INIT_LIST_HEAD(&imp->ctxs);
	INIT_WORK(&imp->unmap_work, sp_import_unmap_work);
	imp->mm = mm;
	mmgrab(mm);
	imp->pid = task_tgid_nr(current);
	imp->dmabuf = dmabuf;
	imp->offset = offset;
	imp->length = length;
	imp->va = va;
	imp->implicit = implicit;
	imp->it.start = va;
	imp->it.last = va + length - 1;

	ret = xa_alloc_cyclic(&sp_import_ids, &imp->id, imp, xa_limit_31b,
			      &sp_import_next_id, GFP_KERNEL);
	if (ret < 0)
		goto err;
	ret = mmu_interval_notifier_insert(&imp->notifier, mm, va, length,
					   &sp_import_mni_ops);
	if (ret) {
		xa_erase(&sp_import_ids, imp->id);
		goto err;
	}
	imp->notifier_live = true;
	atomic64_inc(&sp_stats.imports);
	return imp;

err:
	mmdrop(mm);
	mutex_destroy(&imp->lock);
	kfree(imp);
	return ERR_PTR(ret);
}

/* Drop an import that was never published (no claims, no handle). */
static void sp_import_discard(struct sp_import *imp)
{
	if (imp->notifier_live) {
		mmu_interval_notifier_remove(&imp->notifier);
		imp->notifier_live = false;
	}
	imp->dead = true;
	sp_import_put(imp);
}

static bool sp_import_overlaps(struct mm_struct *mm, unsigned long start,
			       unsigned long last)
{
	struct interval_tree_node *it;

	lockdep_assert_held(&sp_imports_lock);
	for (it = interval_tree_iter_first(&sp_import_tree, start, last); it;
	     it = interval_tree_iter_next(it, start, last))
		if (container_of(it, struct sp_import, it)->mm == mm)
			return true;
	return false;
}

int sp_import_create(struct sp_file *f, int fd, u64 offset, u64 length,
		     unsigned long va, u32 *handle, u32 *id)
{
	struct dma_buf *dmabuf;
	struct sp_import *imp;
	int ret;

	if (!length || !PAGE_ALIGNED(offset) || !PAGE_ALIGNED(length) ||
	    !PAGE_ALIGNED(va) || va + length < va || va + length > TASK_SIZE)
		return -EINVAL;
	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return -EBADF;	/* not open, or not a dma-buf */
	if (offset > dmabuf->size || length > dmabuf->size - offset) {
		dma_buf_put(dmabuf);
		return -ERANGE;
	}

	imp = sp_import_new(f->mm, dmabuf, offset, length, va, false);
	if (IS_ERR(imp)) {
		dma_buf_put(dmabuf);
		return PTR_ERR(imp);
	}

	mutex_lock(&sp_imports_lock);
	if (sp_import_overlaps(f->mm, imp->it.start, imp->it.last)) {
		mutex_unlock(&sp_imports_lock);
		sp_import_discard(imp);
		return -EEXIST;
	}
	interval_tree_insert(&imp->it, &sp_import_tree);
	imp->in_tree = true;
	mutex_unlock(&sp_imports_lock);

	/*
	 * The handle's reference is the creation reference. Once the handle
	 * is published another thread may UNIMPORT it: imp is not touched
	 * after that.
	 */
	*id = imp->id;
	ret = xa_alloc(&f->imports, handle, imp, XA_LIMIT(1, U32_MAX),
		       GFP_KERNEL);
	if (ret) {
		sp_import_end(imp, STRIXPEER_INVAL_UNIMPORT);
		sp_import_put(imp);
		return ret == -EBUSY ? -EMFILE : ret;
	}
	return 0;
}

int sp_import_destroy(struct sp_file *f, u32 handle,
		      enum strixpeer_inval_reason reason)
{
	struct sp_import *imp = xa_erase(&f->imports, handle);

	if (!imp)
		return -ENOENT;
	sp_import_end(imp, reason);
	sp_import_put(imp);
	return 0;
}

int sp_import_info(struct sp_file *f, struct strixpeer_import_info *info)
{
	struct sp_import *imp;

	xa_lock(&f->imports);
	imp = xa_load(&f->imports, info->handle);
	if (imp)
		kref_get(&imp->ref);
	xa_unlock(&f->imports);
	if (!imp)
		return -ENOENT;

	info->va = imp->va;
	info->length = imp->length;
	info->offset = imp->offset;
	info->dmabuf_size = imp->dmabuf->size;
	info->id = imp->id;
	mutex_lock(&imp->lock);
	info->state = imp->dead ? STRIXPEER_IMPORT_UNMAPPED :
				  STRIXPEER_IMPORT_ACTIVE;
	info->registrations = imp->nr_ctxs;
	mutex_unlock(&imp->lock);
	sp_import_put(imp);
	return 0;
}

/* The file is closed: every import it holds ends. */
void sp_import_release_all(struct sp_file *f)
{
	struct sp_import *imp;
	unsigned long idx;

	xa_for_each(&f->imports, idx, imp)
		sp_import_destroy(f, idx, STRIXPEER_INVAL_CLOSE);
	xa_destroy(&f->imports);
}

/**
 * sp_import_find() - the live import of @mm that contains a whole range
 * @mm: address space of the registering process
 * @addr: start of the range
 * @size: bytes
 *
 * Context: takes sp_imports_lock.
 * Return: the import that contains [@addr, @addr + @size), with a
 * reference taken; NULL when no import of @mm overlaps the range;
 * ERR_PTR(-EEXIST) when one overlaps it without containing it.
 */
struct sp_import *sp_import_find(struct mm_struct *mm, unsigned long addr,
				 size_t size)
{
	unsigned long last = addr + size - 1;
	struct interval_tree_node *it;
	struct sp_import *found = NULL;

	if (!size || last < addr)
		return NULL;
	mutex_lock(&sp_imports_lock);
	for (it = interval_tree_iter_first(&sp_import_tree, addr, last); it;
	     it = interval_tree_iter_next(it, addr, last)) {
		struct sp_import *imp = container_of(it, struct sp_import, it);

		if (imp->mm != mm)
			continue;
		if (it->start <= addr && last <= it->last) {
			kref_get(&imp->ref);
			found = imp;
		} else {
			found = ERR_PTR(-EEXIST);
		}
		break;	/* a process's imports never overlap */
	}
	mutex_unlock(&sp_imports_lock);
	return found;
}

#if IS_ENABLED(CONFIG_DRM)
/*
 * Zero-change mode: a registration of a range no import covers, which lies
 * inside one VMA created by drm_gem_mmap() on a DRM device file of a driver
 * listed here. Recognition, and why it is safe:
 *  - vma->vm_file->f_op->mmap == drm_gem_mmap proves the VMA was made by
 *    DRM's GEM mmap path on a DRM file, so vm_file->private_data is that
 *    file's struct drm_file, and drm_gem_mmap_obj() stored the GEM object
 *    in vm_private_data and took a reference the VMA keeps until it is
 *    closed (mmap_lock, held here, keeps the VMA).
 *  - Drivers may replace vm_private_data in their mmap callback, so only
 *    drivers known to leave a GEM object there are recognised: vgem (the
 *    shmem helpers keep the object) and amdgpu (TTM stores the
 *    ttm_buffer_object, whose first member is the GEM object). The name is
 *    read from the DRM device the file belongs to.
 *  - drm_gem_mmap() only maps whole objects from their start: the VMA's
 *    first page is object offset 0 unless its head was unmapped, which
 *    shows in vm_pgoff - relative for the shmem helpers, still carrying
 *    the fake mmap offset for TTM. A vm_pgoff that fits both readings is
 *    declined rather than guessed at.
 * The object's dma-buf is its existing export (PRIME) or a new one made
 * with the driver's own export path; either way strixpeer holds a dma-buf
 * reference, never the object alone.
 */
static const char *const sp_gem_drivers[] = { "amdgpu", "vgem" };

static bool sp_gem_driver_known(const struct drm_device *dev)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sp_gem_drivers); i++)
		if (!strcmp(dev->driver->name, sp_gem_drivers[i]))
			return true;
	return false;
}

/* Byte offset in @obj of @addr in @vma, or -1 if it cannot be told. */
static s64 sp_gem_offset(struct vm_area_struct *vma,
			 struct drm_gem_object *obj, unsigned long addr)
{
	unsigned long npages = obj->size >> PAGE_SHIFT;
	unsigned long start = drm_vma_node_start(&obj->vma_node);
	unsigned long pgoff = vma->vm_pgoff;
	bool fake = pgoff >= start && pgoff - start < npages;
	bool relative = pgoff < npages;

	if (fake == relative)
		return -1;
	if (fake)
		pgoff -= start;
	return ((s64)pgoff << PAGE_SHIFT) + (addr - vma->vm_start);
}

struct sp_import *sp_import_from_gem(unsigned long addr, size_t size)
{
	struct mm_struct *mm = current->mm;
	struct drm_gem_object *obj = NULL;
	struct vm_area_struct *vma;
	unsigned long end = PAGE_ALIGN(addr + size);
	struct dma_buf *dmabuf;
	struct sp_import *imp;
	s64 off = -1;

	addr &= PAGE_MASK;
	if (!READ_ONCE(sp_claim_gem_mappings) || !mm || end <= addr)
		return NULL;
	size = end - addr;

	mmap_read_lock(mm);
	vma = vma_lookup(mm, addr);
	if (vma && addr + size <= vma->vm_end && vma->vm_file &&
	    vma->vm_file->f_op->mmap == drm_gem_mmap) {
		struct drm_file *dfile = vma->vm_file->private_data;

		if (sp_gem_driver_known(dfile->minor->dev)) {
			obj = vma->vm_private_data;
			off = sp_gem_offset(vma, obj, addr);
			if (off >= 0 && off + size <= obj->size)
				drm_gem_object_get(obj);
			else
				obj = NULL;
		}
	}
	mmap_read_unlock(mm);
	if (!obj)
		return NULL;

	mutex_lock(&obj->dev->object_name_lock);
	dmabuf = obj->dma_buf;
	if (dmabuf)
		get_dma_buf(dmabuf);
	mutex_unlock(&obj->dev->object_name_lock);
	if (!dmabuf)
		dmabuf = obj->funcs->export ? obj->funcs->export(obj, O_RDWR) :
					      drm_gem_prime_export(obj, O_RDWR);
	drm_gem_object_put(obj);
	if (IS_ERR(dmabuf))
		return NULL;

	imp = sp_import_new(mm, dmabuf, off, size, addr, true);
	if (IS_ERR(imp)) {
		dma_buf_put(dmabuf);
		return NULL;
	}
	return imp;
}
#else
struct sp_import *sp_import_from_gem(unsigned long addr, size_t size)
{
	return NULL;
}
#endif

/* Work that must not run under the caller's locks (peer.c). */
void sp_import_queue_work(struct work_struct *work)
{
	queue_work(sp_import_wq, work);
}

int sp_import_init(void)
{
	sp_import_wq = alloc_workqueue("strixpeer_unmap", WQ_UNBOUND, 0);
	return sp_import_wq ? 0 : -ENOMEM;
}

/* Every file is closed and every registration released by now. */
void sp_import_exit(void)
{
	destroy_workqueue(sp_import_wq);
	WARN_ON(!xa_empty(&sp_import_ids));
}

SP_MODULE_IMPORT_NS_DMA_BUF();
