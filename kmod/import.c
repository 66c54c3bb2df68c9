// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer imports: "bytes [offset, offset + length) of this dma-buf are
 * mapped at [va, va + length) of my address space". The PeerDirect client
 * (peer.c) claims registrations of such ranges and maps the dma-buf for the
 * NIC; a GPU buffer's CPU mapping (a TTM PFN mapping) cannot be pinned by
 * ib_umem, so this is how ibv_reg_mr() on it can work.
 *
 * Every live explicit import (IMPORT ioctl) sits in its process's interval
 * tree, keyed by VA (one process's imports may not overlap; different
 * processes' may, and each looks only at its own tree: one process's many
 * imports cost another's registrations nothing). An implicit import
 * (zero-change mode, below) belongs to the one registration that made it
 * and is in no tree. An import ends on UNIMPORT,
 * when its fd is closed, when any part of its range is unmapped and when
 * its process exits (an mmu interval notifier sees both), and an implicit
 * one when its registration is released. Ending invalidates every
 * registration using the import before the ending call returns (for
 * unmap and exit: before the worker that ends it returns); the dma-buf
 * reference goes with the last registration.
 *
 * Which import a registration uses (docs/peerdirect.md): the explicit
 * import of the process that contains the range, if there is one;
 * otherwise, in zero-change mode, an implicit import of the GEM mapping(s)
 * the range lies in - also where the range overlaps an explicit import
 * without lying inside it. Explicit and implicit imports of the same
 * memory never block each other; each is ended by its own triggers.
 *
 * Locking, outermost first:
 *   sp_imports_lock (mutex): sp_mm_imports, each mm's interval tree and
 *	each import's @in_tree
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

#include <uapi/strixpeer.h>

#include "strixpeer.h"

bool sp_claim_gem_mappings = true;
module_param_named(claim_gem_mappings, sp_claim_gem_mappings, bool, 0644);
MODULE_PARM_DESC(claim_gem_mappings,
		 "Claim registrations of amdgpu/vgem GEM mappings that were not imported (default Y)");

unsigned int sp_max_imports = 65536;
module_param_named(max_imports, sp_max_imports, uint, 0644);
MODULE_PARM_DESC(max_imports,
		 "Most IMPORT handles one user may hold at once, all processes together (default 65536; 0: none)");

/*
 * Live IMPORT handles per user (uid in the initial namespace -> count, as
 * an xarray value entry), so that no user can grow its processes' import
 * trees - and their registrations' searches in them - without bound.
 */
static DEFINE_MUTEX(sp_user_imports_lock);
static DEFINE_XARRAY(sp_user_imports);

/* Count one more import of @uid; -EMFILE at max_imports. */
static int sp_user_imports_inc(kuid_t uid)
{
	unsigned long idx = from_kuid(&init_user_ns, uid);
	unsigned long n;
	int ret;

	mutex_lock(&sp_user_imports_lock);
	n = xa_to_value(xa_load(&sp_user_imports, idx) ?: xa_mk_value(0));
	if (n >= READ_ONCE(sp_max_imports)) {
		ret = -EMFILE;
	} else {
		ret = xa_err(xa_store(&sp_user_imports, idx, xa_mk_value(n + 1),
				      GFP_KERNEL_ACCOUNT));
	}
	mutex_unlock(&sp_user_imports_lock);
	return ret;
}

static void sp_user_imports_dec(kuid_t uid)
{
	unsigned long idx = from_kuid(&init_user_ns, uid);
	unsigned long n;

	mutex_lock(&sp_user_imports_lock);
	n = xa_to_value(xa_load(&sp_user_imports, idx) ?: xa_mk_value(0));
	if (!WARN_ON(!n)) {
		if (n == 1)
			xa_erase(&sp_user_imports, idx);
		else	/* replaces an entry: allocates nothing */
			xa_store(&sp_user_imports, idx, xa_mk_value(n - 1),
				 GFP_KERNEL);
	}
	mutex_unlock(&sp_user_imports_lock);
}

static DEFINE_MUTEX(sp_imports_lock);

/*
 * Each mm's explicit imports in a tree: sp_mm_imports maps the mm to the
 * tree's root (index: the mm's address over a power of two <= sizeof(struct
 * mm_struct), which two live mm_structs cannot share). An entry exists
 * only while its tree is not empty, and each import in it holds its mm
 * (mmgrab): the mm's address is not reused while the entry is there.
 */
static DEFINE_XARRAY(sp_mm_imports);
#define sp_mm_key(mm)	((unsigned long)(mm) >> ilog2(sizeof(struct mm_struct)))

/* @mm's tree, or NULL when it has none. */
static struct rb_root_cached *sp_mm_imports_find(const struct mm_struct *mm)
{
	lockdep_assert_held(&sp_imports_lock);
	return xa_load(&sp_mm_imports, sp_mm_key(mm));
}

/* @mm's tree, made (empty: all zeroes) if it has none; NULL: no memory. */
static struct rb_root_cached *sp_mm_imports_get(const struct mm_struct *mm)
{
	struct rb_root_cached *tree = sp_mm_imports_find(mm);

	if (tree)
		return tree;
	tree = kzalloc(sizeof(*tree), GFP_KERNEL_ACCOUNT);
	if (tree && xa_err(xa_store(&sp_mm_imports, sp_mm_key(mm), tree,
				    GFP_KERNEL_ACCOUNT))) {
		kfree(tree);
		tree = NULL;
	}
	return tree;
}

/* Drop @mm's @tree (may be NULL) if it is empty. */
static void sp_mm_imports_tidy(const struct mm_struct *mm,
			       struct rb_root_cached *tree)
{
	lockdep_assert_held(&sp_imports_lock);
	if (tree && RB_EMPTY_ROOT(&tree->rb_root)) {
		xa_erase(&sp_mm_imports, sp_mm_key(mm));
		kfree(tree);
	}
}

static DEFINE_XARRAY_ALLOC1(sp_import_ids);
static u32 sp_import_next_id;
static struct workqueue_struct *sp_import_wq;

static void sp_import_free(struct kref *ref)
{
	struct sp_import *imp = container_of(ref, struct sp_import, ref);

	WARN_ON(imp->in_tree || imp->notifier_live || imp->nr_ctxs);
	xa_erase(&sp_import_ids, imp->id);
	if (imp->dmabuf)	/* an implicit import may be dropped before it has one */
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

static const struct sp_import_listener *sp_import_listener;

/**
 * sp_import_set_listener() - install (or with NULL remove) who hears that
 *	an import ended
 * @l: the listener (struct sp_import_listener says when peer.c sets it)
 *
 * Context: module init or exit, outside every import's lock.
 */
void sp_import_set_listener(const struct sp_import_listener *l)
{
	WRITE_ONCE(sp_import_listener, l);
}

/**
 * sp_import_end() - end an import: no new claims, registrations invalidated
 * @imp: the import (caller holds a reference)
 * @reason: STRIXPEER_INVAL_*, reported with the invalidations
 *
 * Idempotent; a second caller returns once the first has invalidated.
 * The invalidating is the listener's (struct sp_import_listener).
 * Context: process context, may sleep; takes sp_imports_lock, then
 * @imp->lock. Never from the notifier callback (removes the notifier).
 */
void sp_import_end(struct sp_import *imp, enum strixpeer_inval_reason reason)
{
	const struct sp_import_listener *listener = READ_ONCE(sp_import_listener);
	bool remove_notifier = false;

	mutex_lock(&sp_imports_lock);
	if (imp->in_tree) {
		struct rb_root_cached *tree = sp_mm_imports_find(imp->mm);

		interval_tree_remove(&imp->it, tree);
		imp->in_tree = false;
		sp_mm_imports_tidy(imp->mm, tree);
	}
	mutex_unlock(&sp_imports_lock);

	mutex_lock(&imp->lock);
	if (!imp->dead) {
		imp->dead = true;
		remove_notifier = imp->notifier_live;
		imp->notifier_live = false;
		if (listener)
			listener->end(imp, reason);
	}
	mutex_unlock(&imp->lock);

	if (remove_notifier)
		mmu_interval_notifier_remove(&imp->notifier);
}

/*
 * A new import of @dmabuf for @mm; @va..@length must be page aligned and
 * the caller's mm must be @mm (the notifier is inserted into it). An
 * implicit import gets its dma-buf after its notifier watches the range
 * (@dmabuf NULL): see sp_import_from_gem(). On success the import holds
 * @dmabuf's reference, its notifier is in the mm's interval tree (every
 * unmap that starts from now on calls it) and *@seq is the notifier's
 * sequence for mmu_interval_read_retry().
 *
 * Context: process context, no lock held that an mmu notifier callback
 * of this mm may take (it waits for the mm's running invalidations).
 */
static struct sp_import *sp_import_new(struct mm_struct *mm,
				       struct dma_buf *dmabuf, u64 offset,
				       u64 length, unsigned long va,
				       bool implicit, unsigned long *seq)
{
	struct sp_import *imp;
	int ret;

	imp = kzalloc(sizeof(*imp), GFP_KERNEL_ACCOUNT);
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
			      &sp_import_next_id, GFP_KERNEL_ACCOUNT);
	if (ret < 0)
		goto err;
	/*
	 * Live before it is inserted: the notifier may fire the moment it
	 * is, and the worker it queues ends the import - that ending caller
	 * must see the notifier to remove it, or the mm would keep calling
	 * a freed import.
	 */
	mutex_lock(&imp->lock);
	imp->notifier_live = true;
	mutex_unlock(&imp->lock);
	ret = mmu_interval_notifier_insert(&imp->notifier, mm, va, length,
					   &sp_import_mni_ops);
	if (ret) {
		xa_erase(&sp_import_ids, imp->id);
		goto err;
	}
	/*
	 * While an invalidation of this mm overlapping another subscription
	 * runs (an ODP MR's, a userptr BO's, another import's: truncation,
	 * reclaim, migration, TTM eviction - without mmap_lock), the insert
	 * only queues the notifier on the mm's deferred list, and it joins
	 * the interval tree when the last such invalidation ends: an unmap
	 * meanwhile would not call it (mm/mmu_notifier.c,
	 * __mmu_interval_notifier_insert()). mmu_interval_read_begin() waits
	 * for that end; from its return on, every unmap of the range calls
	 * sp_import_invalidate_range(). One that ended before it returned
	 * left no VMA: sp_import_from_gem() looks only after this.
	 */
	*seq = mmu_interval_read_begin(&imp->notifier);
	atomic64_inc(&sp_stats.imports);
	return imp;

err:
	mmdrop(mm);
	mutex_destroy(&imp->lock);
	kfree(imp);
	return ERR_PTR(ret);
}

/**
 * sp_import_finish() - end an import and drop its owner's reference
 * @imp: the import (the caller owns the handle's reference, or for an
 *	implicit import its registration's)
 * @reason: STRIXPEER_INVAL_*, reported with the invalidations
 *
 * A worker the notifier queued holds a reference of its own: it is
 * cancelled (its reference dropped here) or waited for, so that the
 * import's dma-buf reference goes before this returns, not later from the
 * worker (a dma-buf file released from a worker is freed asynchronously,
 * by the kernel's delayed fput).
 *
 * Context: process context, not from the import workqueue's unmap worker;
 * takes the import's locks (sp_import_end()).
 */
void sp_import_finish(struct sp_import *imp, enum strixpeer_inval_reason reason)
{
	sp_import_end(imp, reason);
	/* ended: its notifier is gone and queues nothing any more */
	if (cancel_work_sync(&imp->unmap_work))
		sp_import_put(imp);
	sp_import_put(imp);
}

/*
 * Drop an import that was never published (no claims, no handle). Its
 * notifier may have fired meanwhile and queued the worker.
 */
static void sp_import_discard(struct sp_import *imp)
{
	sp_import_finish(imp, STRIXPEER_INVAL_UNIMPORT);
}

/*
 * The range goes away: its notifier fired (the worker may not have run).
 * Context: any; a snapshot (the notifier may fire right after).
 */
bool sp_import_unmapped(struct sp_import *imp)
{
	return atomic_read(&imp->unmap_reason) != 0;
}

/* Whether a live import in @tree overlaps [@start, @last]. */
static bool sp_import_overlaps(struct rb_root_cached *tree, unsigned long start,
			       unsigned long last)
{
	struct interval_tree_node *it;

	lockdep_assert_held(&sp_imports_lock);
	for (it = interval_tree_iter_first(tree, start, last); it;
	     it = interval_tree_iter_next(it, start, last)) {
		if (!sp_import_unmapped(container_of(it, struct sp_import, it)))
			return true;
	}
	return false;
}

/**
 * sp_import_create() - the IMPORT ioctl
 * @f: the file
 * @fd: dma-buf fd
 * @offset: byte offset into the dma-buf of @va
 * @length: bytes
 * @va: start of the range in the caller's address space
 * @handle: out: the new handle
 * @id: out: the import's node-wide id
 * @held: out: the import, with a reference of the caller's (drop it with
 *	sp_import_put() once the result was copied out, or pass it to
 *	sp_import_destroy() to undo)
 *
 * Context: process context, the caller's mm is @f's.
 * Return: 0 or a negative errno (see include/uapi/strixpeer.h).
 */
int sp_import_create(struct sp_file *f, int fd, u64 offset, u64 length,
		     unsigned long va, u32 *handle, u32 *id,
		     struct sp_import **held)
{
	kuid_t uid = current_uid();
	struct rb_root_cached *tree;
	struct dma_buf *dmabuf;
	struct sp_import *imp;
	unsigned long seq;
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

	ret = sp_user_imports_inc(uid);
	if (ret) {
		dma_buf_put(dmabuf);
		pr_info_ratelimited("strixpeer: %s[%d]: import refused: uid %u holds max_imports (%u) imports\n",
				    current->comm, task_pid_nr(current),
				    from_kuid(&init_user_ns, uid),
				    READ_ONCE(sp_max_imports));
		return ret;
	}
	imp = sp_import_new(f->mm, dmabuf, offset, length, va, false, &seq);
	if (IS_ERR(imp)) {
		sp_user_imports_dec(uid);
		dma_buf_put(dmabuf);
		return PTR_ERR(imp);
	}
	imp->uid = uid;

	mutex_lock(&sp_imports_lock);
	tree = sp_mm_imports_get(f->mm);
	ret = !tree ? -ENOMEM :
	      sp_import_overlaps(tree, imp->it.start, imp->it.last) ? -EEXIST : 0;
	if (ret) {
		sp_mm_imports_tidy(f->mm, tree);
		mutex_unlock(&sp_imports_lock);
		sp_import_discard(imp);
		sp_user_imports_dec(uid);
		return ret;
	}
	/*
	 * The notifier is in the mm's tree (sp_import_new()): an unmap since
	 * the insert may have ended the import (dead) or queued its ending,
	 * any later one will. Such an import gets its handle but never
	 * enters the tree (IMPORT_INFO says unmapped), so that it can
	 * neither be claimed nor block a new one. An unmap that ended while
	 * the notifier was still deferred is one that raced this IMPORT: it
	 * counts as made before it (as an IMPORT of a range not mapped).
	 */
	mutex_lock(&imp->lock);
	if (!imp->dead && !atomic_read(&imp->unmap_reason)) {
		interval_tree_insert(&imp->it, tree);
		imp->in_tree = true;
	}
	mutex_unlock(&imp->lock);
	sp_mm_imports_tidy(f->mm, tree);
	mutex_unlock(&sp_imports_lock);

	/*
	 * The handle's reference is the creation reference; the caller gets
	 * one of its own. Once the handle is published another thread may
	 * UNIMPORT it: imp is only compared with, not used, after that.
	 */
	*id = imp->id;
	kref_get(&imp->ref);
	ret = xa_alloc(&f->imports, handle, imp, XA_LIMIT(1, U32_MAX),
		       GFP_KERNEL_ACCOUNT);
	if (ret) {
		sp_import_put(imp);
		sp_import_finish(imp, STRIXPEER_INVAL_UNIMPORT);
		sp_user_imports_dec(uid);
		return ret == -EBUSY ? -EMFILE : ret;
	}
	*held = imp;
	return 0;
}

/*
 * End the import behind @handle - only if it is @expect, when given (the
 * undo of an IMPORT whose result could not be copied out must not end an
 * import another thread got the same handle for meanwhile).
 */
int sp_import_destroy(struct sp_file *f, u32 handle, struct sp_import *expect,
		      enum strixpeer_inval_reason reason)
{
	struct sp_import *imp;

	if (expect)
		imp = xa_cmpxchg(&f->imports, handle, expect, NULL, 0) == expect ?
		      expect : NULL;
	else
		imp = xa_erase(&f->imports, handle);
	if (!imp)
		return -ENOENT;
	sp_user_imports_dec(imp->uid);
	sp_import_finish(imp, reason);
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
	/*
	 * What the claim path sees: unmapped from the notifier on, not only
	 * once its worker ended the import (which may wait for the core).
	 */
	info->state = imp->dead || sp_import_unmapped(imp) ?
		      STRIXPEER_IMPORT_UNMAPPED : STRIXPEER_IMPORT_ACTIVE;
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
		sp_import_destroy(f, idx, NULL, STRIXPEER_INVAL_CLOSE);
	xa_destroy(&f->imports);
}

/**
 * sp_import_find() - the live import of @mm that contains a whole range
 * @mm: address space of the registering process
 * @addr: start of the range
 * @size: bytes
 *
 * An import whose range was unmapped (its ending may still be queued) is
 * not found.
 *
 * Context: takes sp_imports_lock.
 * Return: the import that contains [@addr, @addr + @size), with a
 * reference taken; NULL when none does.
 */
struct sp_import *sp_import_find(struct mm_struct *mm, unsigned long addr,
				 size_t size)
{
	unsigned long last = addr + size - 1;
	struct interval_tree_node *it;
	struct sp_import *found = NULL;
	struct rb_root_cached *tree;

	if (!size || last < addr)
		return NULL;
	mutex_lock(&sp_imports_lock);
	tree = sp_mm_imports_find(mm);	/* only @mm's own imports */
	for (it = tree ? interval_tree_iter_first(tree, addr, last) : NULL; it;
	     it = interval_tree_iter_next(it, addr, last)) {
		struct sp_import *imp = container_of(it, struct sp_import, it);

		if (sp_import_unmapped(imp))
			continue;
		/* a process's live imports never overlap: this is the one */
		if (it->start <= addr && last <= it->last) {
			kref_get(&imp->ref);
			found = imp;
		}
		break;
	}
	mutex_unlock(&sp_imports_lock);
	return found;
}

/*
 * Zero-change mode: a registration of a range that no explicit import
 * contains, lying in GEM mappings of a driver listed in claim_gem_drivers
 * (gem.c says what such a mapping is). The import holds the object's
 * dma-buf; a range with a non-writable mapping is marked so (a writable
 * registration of it must fail, as GUP's would).
 */
struct sp_import *sp_import_from_gem(unsigned long addr, size_t size)
{
	struct mm_struct *mm = current->mm;
	unsigned long end = PAGE_ALIGN(addr + size);
	struct sp_gem_range r;
	struct sp_import *imp;
	unsigned long seq;

	addr &= PAGE_MASK;
	if (!READ_ONCE(sp_claim_gem_mappings) || !mm || end <= addr)
		return NULL;

	/*
	 * The mmu interval notifier read flow: the notifier is in the mm's
	 * tree (sp_import_new() waited for that) before the mappings are
	 * looked at, and the look is retried - here: declined - if an unmap
	 * began since. An unmap that ended before the notifier was in the
	 * tree removed its VMAs first, so the look sees it; any later one
	 * calls the notifier. No window in which a claim outlives its
	 * mapping unseen.
	 */
	imp = sp_import_new(mm, NULL, 0, end - addr, addr, true, &seq);
	if (IS_ERR(imp))
		return NULL;
	if (sp_gem_lookup(mm, addr, end, false, &r))
		goto discard;
	imp->dmabuf = r.dmabuf;
	imp->offset = r.offset;
	imp->vma_read_only = r.ro;
	/* the notifier moves the sequence only for an unmap (or exit) */
	if (mmu_interval_read_retry(&imp->notifier, seq) ||
	    sp_import_unmapped(imp))
		goto discard;
	return imp;

discard:
	sp_import_discard(imp);
	return NULL;
}

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

/*
 * Every file is closed and every registration released by now: no import
 * id or mm tree is left. The xarrays may still hold empty nodes: an
 * xa_alloc_cyclic() or xa_store() whose node allocation failed part-way
 * leaves the nodes it had inserted, and only xa_destroy() frees them (seen
 * under the fuzzer's fault injection: xa_nodes reported by kmemleak).
 */
void sp_import_exit(void)
{
	unsigned long id = 0;

	destroy_workqueue(sp_import_wq);
	WARN_ON(xa_find(&sp_import_ids, &id, ULONG_MAX, XA_PRESENT));
	xa_destroy(&sp_import_ids);
	id = 0;
	WARN_ON(xa_find(&sp_mm_imports, &id, ULONG_MAX, XA_PRESENT));
	xa_destroy(&sp_mm_imports);
}

SP_MODULE_IMPORT_NS_DMA_BUF();
