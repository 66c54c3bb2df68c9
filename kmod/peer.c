// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer's PeerDirect (peer-memory) client: lets ib_core register MRs
 * on imported dma-buf ranges (import.c), e.g. a GPU buffer's CPU mapping,
 * which ib_umem cannot pin.
 *
 * The core asks us only after its own pinning failed. acquire() claims a
 * range that lies entirely inside one live import of the calling process
 * (or, in zero-change mode, inside one recognised GEM mapping, which then
 * gets an implicit import of its own). get_pages() records the core's
 * context; dma_map() attaches to the dma-buf for the NIC's struct device
 * (a dynamic attachment: the exporter may move the buffer and tells us
 * through move_notify, or pins it when the kernel lacks move notification),
 * maps it, and hands the core an sg table of PAGE_SIZE-aligned DMA runs,
 * contiguous pages merged up to the device's max segment size.
 * dma_unmap(), put_pages() and release() undo exactly that, and are
 * idempotent: the core may call them after an invalidation already did.
 *
 * Both core generations are served: modern cores pass a NULL sg_head to
 * get_pages() and honour peer_memory_client_ex's PEER_MEM_INVALIDATE_UNMAPS
 * (we register that way: after our invalidate call the core leaves the
 * unmapping to us); legacy MLNX cores pass their sg_head to get_pages(),
 * ask get_page_size() before dma_map(), and call dma_unmap()/put_pages()
 * from inside the invalidate callback. We fill sg_head in dma_map() for
 * both.
 *
 * Invalidation (sp_peer_ctx_invalidate) tells the core first - after its
 * callback returns the HCA no longer uses the MR - then unmaps. Locking,
 * outermost first, and why nothing deadlocks:
 *   import->lock      held by whoever ends an import, across the core's
 *                     invalidate callback (import.c)
 *   core mapping lock the core holds it around get_pages()/dma_map() and
 *                     takes it in its invalidate callback
 *   dma-buf resv      dma_map() and the unmapping take it; the exporter
 *                     holds it when calling move_notify
 *   ctx->lock         innermost: our state, never held across a core call
 * get_pages()/dma_map() never take import->lock, so the invalidating
 * thread (import->lock -> mapping lock) cannot wait on them in reverse.
 * move_notify runs under the resv lock and calls into the core (mapping
 * lock); it only does so for a registration that is already mapped, whose
 * registering thread no longer needs the resv lock, and marks itself the
 * resv holder so that unmapping from inside the callback does not relock.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>

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

enum sp_inval_state { SP_INVAL_NONE, SP_INVAL_RUNNING, SP_INVAL_DONE };

/**
 * struct sp_peer_ctx - one claimed registration (client_context)
 * @imp: the import it maps (a reference)
 * @node: in @imp->ctxs, under @imp->lock
 * @map_off: byte offset into the dma-buf of the first page
 * @map_len: bytes, whole pages
 * @lock: protects everything below; innermost lock, never held across a
 *	call into the core
 * @have_core_ctx: get_pages() ran; @core_context is the core's id
 * @core_context: for the invalidate callback
 * @attach: our dynamic attachment for the NIC's device
 * @exp_sgt: the exporter's mapping (resv lock held to change it)
 * @sgt: the table we built for the core (a copy of the core's sg_head)
 * @have_sgt: @sgt is allocated
 * @inval: invalidation state; once not NONE, get_pages()/dma_map() fail
 * @inval_done: completed when an invalidation finished
 * @inval_task: the task running the invalidation (calling the core)
 * @resv_owner: the task holding the resv lock in move_notify
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
	u64 core_context;
	struct dma_buf_attachment *attach;
	struct sg_table *exp_sgt;
	struct sg_table sgt;
	bool have_sgt;
	enum sp_inval_state inval;
	struct completion inval_done;
	struct task_struct *inval_task;
	struct task_struct *resv_owner;
	bool release_deferred;
	struct work_struct release_work;
};

static void *sp_peer_handle;
static invalidate_peer_memory sp_peer_core_invalidate;
static char sp_reason_buf[160];

/* Undo the exporter's mapping; resv lock held (by us or by move_notify). */
static void sp_peer_unmap_exporter_locked(struct sp_peer_ctx *ctx)
{
	dma_resv_assert_held(ctx->imp->dmabuf->resv);
	mutex_lock(&ctx->lock);
	if (ctx->exp_sgt) {
		dma_buf_unmap_attachment(ctx->attach, ctx->exp_sgt,
					 DMA_BIDIRECTIONAL);
		ctx->exp_sgt = NULL;
	}
	mutex_unlock(&ctx->lock);
}

static void sp_peer_unmap_exporter(struct sp_peer_ctx *ctx)
{
	struct dma_resv *resv = ctx->imp->dmabuf->resv;
	bool held = READ_ONCE(ctx->resv_owner) == current;

	if (!held)
		dma_resv_lock(resv, NULL);
	sp_peer_unmap_exporter_locked(ctx);
	if (!held)
		dma_resv_unlock(resv);
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
 * Tell the core, then unmap. @resv_held: called from move_notify.
 * Waits for an invalidation already running elsewhere unless @resv_held
 * (that one may need the resv lock we hold to finish).
 */
static void sp_peer_ctx_invalidate(struct sp_peer_ctx *ctx,
				   enum strixpeer_inval_reason reason,
				   bool resv_held)
{
	struct sp_import *imp = ctx->imp;
	enum sp_inval_state was;
	bool notify, deferred;
	u64 core_ctx;

	mutex_lock(&ctx->lock);
	was = ctx->inval;
	if (was == SP_INVAL_NONE) {
		if (resv_held && !ctx->exp_sgt) {
			/* Not mapped yet: a mapping made after us is fresh. */
			mutex_unlock(&ctx->lock);
			return;
		}
		ctx->inval = SP_INVAL_RUNNING;
		ctx->inval_task = current;
		if (resv_held)
			ctx->resv_owner = current;
	}
	notify = ctx->have_core_ctx;
	core_ctx = ctx->core_context;
	mutex_unlock(&ctx->lock);

	if (was != SP_INVAL_NONE) {
		if (was == SP_INVAL_RUNNING && !resv_held)
			wait_for_completion(&ctx->inval_done);
		return;
	}

	if (notify) {
		/* Returns once the HCA no longer uses the registration. */
		sp_peer_core_invalidate(sp_peer_handle, core_ctx);
		atomic64_inc(&sp_stats.peer_invalidations);
		sp_nl_peer_event(imp, STRIXPEER_PEER_INVALIDATE, ctx->map_len,
				 reason);
	}
	/* Whatever the core left (PEER_MEM_INVALIDATE_UNMAPS) is ours. */
	sp_peer_unmap_exporter(ctx);
	sp_peer_free_sgt(ctx);

	mutex_lock(&ctx->lock);
	ctx->inval = SP_INVAL_DONE;
	ctx->inval_task = NULL;
	ctx->resv_owner = NULL;
	deferred = ctx->release_deferred;
	mutex_unlock(&ctx->lock);
	complete_all(&ctx->inval_done);
	/* Our caller may hold the import's or the resv lock: not here. */
	if (deferred)
		sp_import_queue_work(&ctx->release_work);
}

void sp_peer_invalidate_all(struct sp_import *imp,
			    enum strixpeer_inval_reason reason)
{
	struct sp_peer_ctx *ctx;

	lockdep_assert_held(&imp->lock);
	list_for_each_entry(ctx, &imp->ctxs, node)
		sp_peer_ctx_invalidate(ctx, reason, false);
}

static void sp_peer_move_notify(struct dma_buf_attachment *attach)
{
	sp_peer_ctx_invalidate(attach->importer_priv, STRIXPEER_INVAL_MOVE,
			       true);
}

static const struct dma_buf_attach_ops sp_peer_importer_ops = {
	.allow_peer2peer = true,
	.SP_DMA_BUF_MOVE_NOTIFY = sp_peer_move_notify,
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
	if (IS_ERR(imp))	/* crosses an import's edge: not ours */
		return 0;
	if (!imp)
		imp = sp_import_from_gem(start, end - start);
	if (!imp)
		return 0;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		goto decline;
	if (!try_module_get(THIS_MODULE)) {
		kfree(ctx);
		goto decline;
	}
	mutex_init(&ctx->lock);
	init_completion(&ctx->inval_done);
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
	sp_nl_peer_event(imp, STRIXPEER_PEER_CLAIM, ctx->map_len, 0);
	*client_context = ctx;
	return 1;

decline:
	if (imp->implicit)
		sp_import_end(imp, STRIXPEER_INVAL_UNIMPORT);
	sp_import_put(imp);
	return 0;
}

static int sp_peer_get_pages(unsigned long addr, size_t size, int write,
			     int force, struct sg_table *sg_head,
			     void *client_context, u64 core_context)
{
	struct sp_peer_ctx *ctx = client_context;
	int ret = 0;

	/*
	 * The dma-buf reference taken at import keeps the memory; there is
	 * nothing to pin. A legacy core's sg_head is filled by dma_map().
	 */
	mutex_lock(&ctx->lock);
	if (ctx->inval != SP_INVAL_NONE) {
		ret = -ENOENT;
	} else {
		ctx->core_context = core_context;
		ctx->have_core_ctx = true;
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

static int sp_peer_dma_map(struct sg_table *sg_head, void *client_context,
			   struct device *dma_device, int dmasync, int *nmap)
{
	struct sp_peer_ctx *ctx = client_context;
	struct dma_buf *dmabuf = ctx->imp->dmabuf;
	unsigned int max_seg = rounddown(dma_get_max_seg_size(dma_device),
					 PAGE_SIZE);
	struct dma_buf_attachment *attach;
	struct sg_table *exp;
	long wait;
	int n, ret;

	if (!max_seg)
		max_seg = PAGE_SIZE;
	attach = dma_buf_dynamic_attach(dmabuf, dma_device,
					&sp_peer_importer_ops, ctx);
	if (IS_ERR(attach))
		return PTR_ERR(attach);

	dma_resv_lock(dmabuf->resv, NULL);
	mutex_lock(&ctx->lock);
	if (ctx->inval != SP_INVAL_NONE || !ctx->have_core_ctx ||
	    ctx->attach) {
		ret = ctx->attach ? -EBUSY : -ENOENT;
		goto unlock;
	}
	/* Published under resv: move_notify can see us from here on. */
	ctx->attach = attach;
	exp = dma_buf_map_attachment(attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(exp)) {
		ret = PTR_ERR(exp);
		goto unpublish;
	}
	/* A move the exporter started must finish before the NIC looks. */
	wait = dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_KERNEL,
				     false, MAX_SCHEDULE_TIMEOUT);
	ret = wait < 0 ? wait : 0;
	if (!ret) {
		n = sp_peer_runs(exp, ctx->map_off, ctx->map_len, max_seg,
				 NULL);
		ret = n < 0 ? n : sg_alloc_table(&ctx->sgt, n, GFP_KERNEL);
	}
	if (ret) {
		dma_buf_unmap_attachment(attach, exp, DMA_BIDIRECTIONAL);
		goto unpublish;
	}
	sp_peer_runs(exp, ctx->map_off, ctx->map_len, max_seg, ctx->sgt.sgl);
	ctx->have_sgt = true;
	ctx->exp_sgt = exp;
	*sg_head = ctx->sgt;
	*nmap = ctx->sgt.nents;	/* may point into *sg_head: set last */
	mutex_unlock(&ctx->lock);
	dma_resv_unlock(dmabuf->resv);

	atomic64_inc(&sp_stats.peer_maps);
	sp_nl_peer_event(ctx->imp, STRIXPEER_PEER_MAP, ctx->map_len, 0);
	return 0;

unpublish:
	ctx->attach = NULL;
unlock:
	mutex_unlock(&ctx->lock);
	dma_resv_unlock(dmabuf->resv);
	dma_buf_detach(dmabuf, attach);
	return ret;
}

static int sp_peer_dma_unmap(struct sg_table *sg_head, void *client_context,
			     struct device *dma_device)
{
	sp_peer_unmap_exporter(client_context);
	return 0;
}

static void sp_peer_put_pages(struct sg_table *sg_head, void *client_context)
{
	struct sp_peer_ctx *ctx = client_context;

	/* Normally unmapped already; a core's error path may skip dma_unmap. */
	sp_peer_unmap_exporter(ctx);
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

	sp_peer_unmap_exporter(ctx);
	sp_peer_free_sgt(ctx);
	if (ctx->attach)	/* no move_notify after this returns */
		dma_buf_detach(imp->dmabuf, ctx->attach);

	if (imp->implicit)
		sp_import_end(imp, STRIXPEER_INVAL_UNIMPORT);
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
 * invalidation (holding the import's lock, or the resv lock in
 * move_notify) and finish the release afterwards, from a worker.
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
	sp_peer_handle = ib_register_peer_memory_client(c,
						&sp_peer_core_invalidate);
	if (!sp_peer_handle || !sp_peer_core_invalidate) {
		if (sp_peer_handle)
			ib_unregister_peer_memory_client(sp_peer_handle);
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
	if (sp_peer_handle)
		ib_unregister_peer_memory_client(sp_peer_handle);
	sp_peer_handle = NULL;
	sp_reason = SP_REASON_NO_API;
}

#else /* !SP_HAVE_PEERDIRECT */

void sp_peer_invalidate_all(struct sp_import *imp,
			    enum strixpeer_inval_reason reason)
{
	lockdep_assert_held(&imp->lock);
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
