// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer's PeerDirect (peer-memory) client: lets ib_core register MRs
 * on imported dma-buf ranges (import.c), e.g. a GPU buffer's CPU mapping,
 * which ib_umem cannot pin.
 *
 * The core asks us only after its own pinning failed. acquire() claims a
 * range that lies entirely inside one live explicit import of the calling
 * process or, in zero-change mode, inside recognised GEM mappings (an
 * implicit import of its own). get_pages() records the core's context;
 * dma_map() hands the core an sg table of PAGE_SIZE-aligned DMA runs of
 * the range, contiguous pages merged up to the device's max segment size,
 * cut from a pinned mapping of the dma-buf for the NIC's struct device.
 * dma_unmap(), put_pages() and release() undo exactly that, and are
 * idempotent: the core may call them after an invalidation already did.
 *
 * Pinned, shared mappings (struct sp_peer_map) and what they cost their
 * users are peer_map.c's: every registration of a dma-buf for one device
 * shares one pinned mapping, which cannot follow a move, and whose pin is
 * charged to the registering user (-EDQUOT past the user's limits).
 *
 * Both core generations are served: modern cores pass a NULL sg_head to
 * get_pages() and honour peer_memory_client_ex's PEER_MEM_INVALIDATE_UNMAPS
 * (we register that way: after our invalidate call the core leaves the
 * unmapping to us); legacy MLNX cores pass their sg_head to get_pages(),
 * ask get_page_size() before dma_map(), and ignore the extended form. A
 * legacy core holds no lock between get_pages() and activating the MR: it
 * walks our sg list into the HCA's translation table and creates the mkey
 * meanwhile. Invalidating an activated MR, it calls dma_unmap()/put_pages()
 * (and release()) from inside the invalidate callback; invalidating one
 * not yet activated, it only marks it, and unwinds the registration itself
 * (dma_unmap(), put_pages(), release()) once it gets that far. So after a
 * legacy core's callback returned without put_pages(), the mapping and
 * the sg list stay ours to keep until the core's own put_pages(). We fill
 * sg_head in dma_map() for both.
 *
 * Invalidation (sp_peer_ctx_invalidate(), only ever under the import's
 * lock) marks the registration, tells the core - after its callback
 * returns the HCA no longer uses the MR - then drops the registration's
 * use of the mapping (a legacy core that has not put the pages yet drops
 * it itself, see above); the last use unmaps and unpins, so the exporter
 * may move the buffer only once no NIC can reach it.
 *
 * Locking, outermost first:
 *   core client list  OFED's peer_memory_mutex: the core calls every
 *                     client's acquire() under it, so acquire() below
 *                     takes sp_imports_lock, import->lock, mmap_lock,
 *                     DRM's object_name_lock (with dma_buf_export()) and,
 *                     on a process's first claim, mmu notifier registration
 *                     (mm_take_all_locks()); a decline waits in
 *                     mmu_interval_notifier_remove()/cancel_work_sync().
 *                     Nothing of ours calls the core's registration under
 *                     a lock, so there is no cycle; the cost is that
 *                     every peer registration of the node queues behind
 *                     the slowest acquire()
 *   import->lock      held by whoever ends an import, across the core's
 *                     invalidate callback (import.c)
 *   core mapping lock the core holds it around get_pages()/dma_map() (and
 *                     legacy cores around dma_unmap()/put_pages()), and
 *                     takes it in its invalidate callback
 *   dma-buf resv      taken to attach, pin, map, unmap and unpin; the
 *                     exporter holds it in move_notify, which takes no
 *                     lock of ours and never calls the core
 *   ctx->lock         a registration's state; innermost, never held across
 *                     a call into the core or the exporter
 *   sp_peer_maps_lock the list of shared mappings (peer_map.c); a leaf:
 *                     mappings are made and torn down outside it
 * get_pages()/dma_map() never take import->lock, so the invalidating
 * thread (import->lock -> mapping lock) cannot wait on them in reverse.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/capability.h>
#include <linux/dma-resv.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/uidgid.h>

#include "strixpeer.h"

static bool sp_peerdirect = true;
module_param_named(peerdirect, sp_peerdirect, bool, 0444);
MODULE_PARM_DESC(peerdirect,
		 "Register the PeerDirect client at load (default Y)");

static char sp_peer_name[64] = "strixpeer";
module_param_string(peer_client_name, sp_peer_name, sizeof(sp_peer_name),
		    0444);
MODULE_PARM_DESC(peer_client_name,
		 "PeerDirect client name (default strixpeer; memory_peers/<name> in sysfs)");

/* Kbuild passes its own when OFED is installed but not built for this kernel. */
#ifndef SP_REASON_NO_API
#define SP_REASON_NO_API \
	"built without the peer-memory API: ib_register_peer_memory_client was not found in the kernel's Module.symvers, MLNX_OFED/DOCA-OFED's, or SP_PEER_SYMVERS"
#endif

static const char *sp_reason = SP_REASON_NO_API;

bool sp_peer_active(void)
{
	return !sp_reason;
}

const char *sp_peer_reason(void)
{
	return sp_reason;
}

#ifdef SP_HAVE_PEERDIRECT

#include "peer_mem.h"
#include "peer_map.h"

enum sp_inval_state { SP_INVAL_NONE, SP_INVAL_RUNNING, SP_INVAL_DONE };


/**
 * struct sp_peer_ctx - one claimed registration (client_context)
 * @imp: the import it maps (a reference)
 * @node: in @imp->ctxs, under @imp->lock
 * @map_off: byte offset into the dma-buf of the first page
 * @map_len: bytes, whole pages
 * @lock: protects everything below; innermost lock, never held across a
 *	call into the core or the exporter
 * @have_core_ctx: get_pages() ran and put_pages() did not yet;
 *	@core_context is the core's id
 * @legacy_core: get_pages() was handed an sg_head: a legacy core, which
 *	ignores PEER_MEM_INVALIDATE_UNMAPS
 * @core_context: for the invalidate callback
 * @map: our use of the shared mapping, from dma_map() on
 * @sgt: the table we built for the core (a copy of the core's sg_head)
 * @have_sgt: @sgt is allocated
 * @inval: invalidation state; once not NONE, get_pages()/dma_map() fail
 * @inval_task: the task running the invalidation (calling the core)
 * @release_deferred: a legacy core released the context from inside our
 *	invalidate call; @release_work finishes that once the call returned
 * @release_work: runs sp_peer_do_release() on the import workqueue
 */
struct sp_peer_ctx {
	struct sp_import *imp;
	struct list_head node;
	u64 map_off;
	u64 map_len;
	struct mutex lock;
	bool have_core_ctx;
	bool legacy_core;
	u64 core_context;
	struct sp_peer_map *map;
	struct sg_table sgt;
	bool have_sgt;
	enum sp_inval_state inval;
	struct task_struct *inval_task;
	bool release_deferred;
	struct work_struct release_work;
};

static void *sp_peer_handle;
static invalidate_peer_memory sp_peer_core_invalidate;
static char sp_reason_buf[160];


/* Drops the registration's use of the shared mapping (idempotent). */
static void sp_peer_ctx_unmap(struct sp_peer_ctx *ctx)
{
	struct sp_peer_map *m;

	mutex_lock(&ctx->lock);
	m = ctx->map;
	ctx->map = NULL;
	mutex_unlock(&ctx->lock);
	if (m)
		sp_peer_map_put(m);
}

static void sp_peer_free_sgt(struct sp_peer_ctx *ctx)
{
	mutex_lock(&ctx->lock);
	if (ctx->have_sgt) {
		sg_free_table(&ctx->sgt);
		ctx->have_sgt = false;
	}
	mutex_unlock(&ctx->lock);
}

/*
 * Tell the core, then unmap. Every invalidation of a registration runs
 * under its import's lock (sp_peer_import_end()), so two never race;
 * the second finds the first done.
 */
static void sp_peer_ctx_invalidate(struct sp_peer_ctx *ctx,
				   enum strixpeer_inval_reason reason)
{
	struct sp_import *imp = ctx->imp;
	bool notify, deferred, core_unwinds;
	u64 core_ctx;

	lockdep_assert_held(&imp->lock);
	mutex_lock(&ctx->lock);
	if (ctx->inval != SP_INVAL_NONE) {
		mutex_unlock(&ctx->lock);
		return;
	}
	ctx->inval = SP_INVAL_RUNNING;
	ctx->inval_task = current;
	notify = ctx->have_core_ctx;
	core_ctx = ctx->core_context;
	mutex_unlock(&ctx->lock);

	if (notify) {
		/* Returns once the HCA no longer uses the registration. */
		sp_peer_core_invalidate(sp_peer_handle, core_ctx);
		atomic64_inc(&sp_stats.peer_invalidations);
		sp_event_peer(imp->pid, imp->id, STRIXPEER_PEER_INVALIDATE, ctx->map_len,
			      reason);
	}
	/*
	 * A legacy core that returned without put_pages() had not activated
	 * the MR: it may still walk the sg list into its MTT, and it unmaps
	 * and puts the pages itself when it unwinds. Otherwise whatever the
	 * core left (PEER_MEM_INVALIDATE_UNMAPS) is ours.
	 */
	mutex_lock(&ctx->lock);
	core_unwinds = notify && ctx->legacy_core && ctx->have_core_ctx;
	mutex_unlock(&ctx->lock);
	if (!core_unwinds) {
		sp_peer_ctx_unmap(ctx);
		sp_peer_free_sgt(ctx);
	}

	mutex_lock(&ctx->lock);
	ctx->inval = SP_INVAL_DONE;
	ctx->inval_task = NULL;
	deferred = ctx->release_deferred;
	mutex_unlock(&ctx->lock);
	/* Our caller holds the import's lock, which releasing takes. */
	if (deferred)
		sp_import_queue_work(&ctx->release_work);
}

/* The import's listener: it ended, so every registration using it goes. */
static void sp_peer_import_end(struct sp_import *imp,
			       enum strixpeer_inval_reason reason)
{
	struct sp_peer_ctx *ctx;

	lockdep_assert_held(&imp->lock);
	list_for_each_entry(ctx, &imp->ctxs, node)
		sp_peer_ctx_invalidate(ctx, reason);
}

static const struct sp_import_listener sp_peer_listener = {
	.end = sp_peer_import_end,
};

static void sp_peer_release_work(struct work_struct *work);

static int sp_peer_acquire(unsigned long addr, size_t size,
			   void *peer_mem_private_data, char *peer_mem_name,
			   void **client_context)
{
	unsigned long start = addr & PAGE_MASK;
	unsigned long end = PAGE_ALIGN(addr + size);
	struct sp_import *imp;
	struct sp_peer_ctx *ctx;

	atomic64_inc(&sp_stats.peer_acquires);
	if (!current->mm || !size || end <= start)
		return 0;
	imp = sp_import_find(current->mm, start, end - start);
	if (!imp)
		imp = sp_import_from_gem(start, end - start);
	if (!imp)
		return 0;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		goto decline;
	if (!try_module_get(THIS_MODULE)) {
		kfree(ctx);
		goto decline;
	}
	mutex_init(&ctx->lock);
	INIT_WORK(&ctx->release_work, sp_peer_release_work);
	ctx->imp = imp;
	ctx->map_off = imp->offset + (start - imp->va);
	ctx->map_len = end - start;

	mutex_lock(&imp->lock);
	if (imp->dead) {
		mutex_unlock(&imp->lock);
		mutex_destroy(&ctx->lock);
		kfree(ctx);
		module_put(THIS_MODULE);
		goto decline;
	}
	list_add_tail(&ctx->node, &imp->ctxs);
	imp->nr_ctxs++;
	mutex_unlock(&imp->lock);

	atomic64_inc(&sp_stats.peer_claims);
	atomic64_inc(&sp_stats.peer_registrations);
	sp_event_peer(imp->pid, imp->id, STRIXPEER_PEER_CLAIM, ctx->map_len, 0);
	*client_context = ctx;
	return 1;

decline:
	if (imp->implicit)	/* ours alone */
		sp_import_finish(imp, STRIXPEER_INVAL_UNIMPORT);
	else
		sp_import_put(imp);
	return 0;
}

/*
 * Whether the core registers the MR writable. Modern cores always ask for
 * write (to break CoW) and say with force that read-only pages will do;
 * legacy cores pass the MR's write access and force = 1.
 */
static bool sp_peer_writable(bool legacy, int write, int force)
{
	return legacy ? write : write && !force;
}

/*
 * A writable registration needs what a writable pin would: for an import
 * of a dma-buf fd, that file open for writing; for a GEM mapping, VMAs
 * that may be written (the dma-buf we registered for the object may be
 * one somebody else exported read-only: it says nothing of this mapping).
 */
static bool sp_peer_may_write(struct sp_import *imp)
{
	if (imp->implicit)
		return !imp->vma_read_only;
	return imp->dmabuf->file->f_mode & FMODE_WRITE;
}

static int sp_peer_get_pages(unsigned long addr, size_t size, int write,
			     int force, struct sg_table *sg_head,
			     void *client_context, u64 core_context)
{
	struct sp_peer_ctx *ctx = client_context;
	int ret = 0;

	if (sp_peer_writable(sg_head, write, force) &&
	    !sp_peer_may_write(ctx->imp))
		return -EACCES;
	/* claimed just before the range's notifier fired: going away */
	if (sp_import_unmapped(ctx->imp))
		return -ENOENT;

	/*
	 * The dma-buf reference taken at import keeps the memory; pinning
	 * happens in dma_map(), for the device. A legacy core's sg_head is
	 * filled by dma_map().
	 */
	mutex_lock(&ctx->lock);
	if (ctx->inval != SP_INVAL_NONE) {
		ret = -ENOENT;
	} else {
		ctx->core_context = core_context;
		ctx->have_core_ctx = true;
		ctx->legacy_core = !!sg_head;
	}
	mutex_unlock(&ctx->lock);
	return ret;
}

/*
 * Fill @out (or only count, when NULL) with the DMA runs of bytes
 * [@off, @off + @len) of the exporter's mapping @exp: page-aligned,
 * contiguous runs merged, none longer than @max_seg.
 * Return: number of entries, or -EINVAL if @exp is not page granular or
 * shorter than the range.
 */
static int sp_peer_runs(struct sg_table *exp, u64 off, u64 len,
			unsigned int max_seg, struct scatterlist *out)
{
	dma_addr_t run_addr = 0;
	u64 run_len = 0, pos = 0, end = off + len;
	struct scatterlist *sg;
	int n = 0;
	unsigned int i;

	for_each_sgtable_dma_sg(exp, sg, i) {
		u64 s = max(pos, off), e = min(pos + sg_dma_len(sg), end);
		dma_addr_t a = sg_dma_address(sg) + (s - pos);

		pos += sg_dma_len(sg);
		if (s >= e)
			continue;
		if (!PAGE_ALIGNED(a) || !PAGE_ALIGNED(e - s))
			return -EINVAL;
		while (s < e) {
			u64 take;

			if (run_len && run_addr + run_len == a &&
			    run_len < max_seg) {
				take = min_t(u64, e - s, max_seg - run_len);
				run_len += take;
			} else {
				if (run_len && out) {
					sg_dma_address(out) = run_addr;
					sg_dma_len(out) = run_len;
					out->length = run_len;
					out = sg_next(out);
				}
				if (run_len)
					n++;
				take = min_t(u64, e - s, max_seg);
				run_addr = a;
				run_len = take;
			}
			a += take;
			s += take;
		}
		if (pos >= end)
			break;
	}
	if (pos < end)
		return -EINVAL;
	if (run_len && out) {
		sg_dma_address(out) = run_addr;
		sg_dma_len(out) = run_len;
		out->length = run_len;
	}
	return run_len ? n + 1 : n;
}

/* 0 if @ctx may be mapped now, else why not. Context: ctx->lock held. */
static int sp_peer_ctx_mappable(struct sp_peer_ctx *ctx)
{
	lockdep_assert_held(&ctx->lock);
	if (ctx->inval != SP_INVAL_NONE || !ctx->have_core_ctx ||
	    sp_import_unmapped(ctx->imp))
		return -ENOENT;
	return ctx->map ? -EBUSY : 0;
}

static int sp_peer_dma_map(struct sg_table *sg_head, void *client_context,
			   struct device *dma_device, int dmasync, int *nmap)
{
	struct sp_peer_ctx *ctx = client_context;
	struct sg_table sgt = {};
	struct sp_peer_map *m;
	unsigned int max_seg;
	int n, ret;

	/*
	 * Software devices (rxe, siw) register with no DMA device: there is
	 * nothing to map the dma-buf for (OFED's core passes the driver's
	 * ib_device->dma_device as it is).
	 */
	if (!dma_device) {
		pr_info_ratelimited("strixpeer: %s[%d]: peer registration refused: the RDMA device has no DMA device to map for\n",
				    current->comm, task_pid_nr(current));
		return -EINVAL;
	}
	max_seg = rounddown(dma_get_max_seg_size(dma_device), PAGE_SIZE);
	if (!max_seg)
		max_seg = PAGE_SIZE;
	mutex_lock(&ctx->lock);
	ret = sp_peer_ctx_mappable(ctx);
	mutex_unlock(&ctx->lock);
	if (ret)
		return ret;

	m = sp_peer_map_get(ctx->imp->dmabuf, dma_device);
	if (IS_ERR(m))
		return PTR_ERR(m);
	n = sp_peer_runs(m->sgt, ctx->map_off, ctx->map_len, max_seg, NULL);
	ret = n < 0 ? n : sg_alloc_table(&sgt, n, GFP_KERNEL_ACCOUNT);
	if (ret)
		goto put;
	sp_peer_runs(m->sgt, ctx->map_off, ctx->map_len, max_seg, sgt.sgl);

	mutex_lock(&ctx->lock);
	ret = sp_peer_ctx_mappable(ctx);	/* invalidated meanwhile? */
	if (ret) {
		mutex_unlock(&ctx->lock);
		sg_free_table(&sgt);
		goto put;
	}
	ctx->map = m;
	ctx->sgt = sgt;
	ctx->have_sgt = true;
	*sg_head = ctx->sgt;
	*nmap = ctx->sgt.nents;	/* may point into *sg_head: set last */
	mutex_unlock(&ctx->lock);

	atomic64_inc(&sp_stats.peer_maps);
	sp_event_peer(ctx->imp->pid, ctx->imp->id, STRIXPEER_PEER_MAP, ctx->map_len, 0);
	return 0;

put:
	sp_peer_map_put(m);
	return ret;
}

static int sp_peer_dma_unmap(struct sg_table *sg_head, void *client_context,
			     struct device *dma_device)
{
	sp_peer_ctx_unmap(client_context);
	return 0;
}

static void sp_peer_put_pages(struct sg_table *sg_head, void *client_context)
{
	struct sp_peer_ctx *ctx = client_context;

	/* Normally unmapped already; a core's error path may skip dma_unmap. */
	sp_peer_ctx_unmap(ctx);
	sp_peer_free_sgt(ctx);
	mutex_lock(&ctx->lock);
	ctx->have_core_ctx = false;
	mutex_unlock(&ctx->lock);
}

/* We map in PAGE_SIZE granules (runs of whole pages). */
static unsigned long sp_peer_get_page_size(void *client_context)
{
	return PAGE_SIZE;
}

static void sp_peer_do_release(struct sp_peer_ctx *ctx)
{
	struct sp_import *imp = ctx->imp;

	/* Off the list first: no invalidation can reach us after this. */
	mutex_lock(&imp->lock);
	list_del(&ctx->node);
	imp->nr_ctxs--;
	mutex_unlock(&imp->lock);

	sp_peer_ctx_unmap(ctx);
	sp_peer_free_sgt(ctx);
	if (imp->implicit)	/* it ends with its registration */
		sp_import_finish(imp, STRIXPEER_INVAL_UNIMPORT);
	else
		sp_import_put(imp);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	atomic64_dec(&sp_stats.peer_registrations);
	/* The import workqueue is flushed before the module text goes. */
	module_put(THIS_MODULE);
}

static void sp_peer_release_work(struct work_struct *work)
{
	sp_peer_do_release(container_of(work, struct sp_peer_ctx,
					release_work));
}

/*
 * Legacy cores tear the whole registration down inside the invalidate
 * callback, release() included: then we are still inside our own
 * invalidation (holding the import's lock) and finish the release
 * afterwards, from a worker.
 */
static void sp_peer_release(void *client_context)
{
	struct sp_peer_ctx *ctx = client_context;
	bool defer;

	mutex_lock(&ctx->lock);
	defer = ctx->inval_task == current;
	ctx->release_deferred = defer;
	mutex_unlock(&ctx->lock);
	if (!defer)
		sp_peer_do_release(ctx);
}

static struct peer_memory_client_ex sp_peer_client = {
	.client = {
		.acquire = sp_peer_acquire,
		.get_pages = sp_peer_get_pages,
		.dma_map = sp_peer_dma_map,
		.dma_unmap = sp_peer_dma_unmap,
		.put_pages = sp_peer_put_pages,
		.get_page_size = sp_peer_get_page_size,
		.release = sp_peer_release,
	},
	.ex_size = sizeof(struct peer_memory_client_ex),
	.flags = PEER_MEM_INVALIDATE_UNMAPS,
};

int sp_peer_init(void)
{
	struct peer_memory_client *c = &sp_peer_client.client;

	/* The ABI's layout: name, version, then the callbacks in order. */
	BUILD_BUG_ON(offsetof(struct peer_memory_client, acquire) != 80);
	BUILD_BUG_ON(offsetof(struct peer_memory_client, release) !=
		     80 + 6 * sizeof(void *));
	BUILD_BUG_ON(offsetof(struct peer_memory_client_ex, ex_size) !=
		     sizeof(struct peer_memory_client));

	if (!sp_peerdirect) {
		sp_reason = "disabled by the module parameter peerdirect=0";
		goto out;
	}
	if (!sp_peer_name[0]) {
		sp_reason = "the module parameter peer_client_name is empty";
		goto out;
	}
	strscpy(c->name, sp_peer_name, sizeof(c->name));
	strscpy(c->version, SP_VERSION_STR, sizeof(c->version) - 1);
	c->version[sizeof(c->version) - 1] = 1;	/* the _ex form */
	/* Listening before the core can call acquire(), until it no longer can. */
	sp_import_set_listener(&sp_peer_listener);
	sp_peer_handle = ib_register_peer_memory_client(c,
						&sp_peer_core_invalidate);
	if (!sp_peer_handle || !sp_peer_core_invalidate) {
		if (sp_peer_handle)
			ib_unregister_peer_memory_client(sp_peer_handle);
		sp_import_set_listener(NULL);
		sp_peer_handle = NULL;
		snprintf(sp_reason_buf, sizeof(sp_reason_buf),
			 "the peer-memory core refused client '%s' (name already registered?)",
			 c->name);
		sp_reason = sp_reason_buf;
		goto out;
	}
	sp_reason = NULL;
	pr_info("strixpeer: PeerDirect client '%s' registered\n", c->name);
	return 0;
out:
	pr_info("strixpeer: PeerDirect unavailable: %s\n", sp_reason);
	return 0;
}

/* Contexts hold module references, so none is left here. */
void sp_peer_exit(void)
{
	WARN_ON(!sp_peer_maps_idle());
	if (sp_peer_handle)
		ib_unregister_peer_memory_client(sp_peer_handle);
	sp_import_set_listener(NULL);
	sp_peer_handle = NULL;
	sp_reason = SP_REASON_NO_API;
}

#else /* !SP_HAVE_PEERDIRECT */

u64 sp_peer_pinned_by(kuid_t uid)
{
	return 0;
}

int sp_peer_init(void)
{
	pr_info("strixpeer: PeerDirect unavailable: %s\n", sp_reason);
	return 0;
}

void sp_peer_exit(void)
{
}

#endif /* SP_HAVE_PEERDIRECT */
