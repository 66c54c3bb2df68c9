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
 * Pinned, shared mappings (struct sp_peer_map): every registration of a
 * dma-buf for one device uses one dynamic attachment that is pinned
 * (dma_buf_pin()) and mapped once, until its last registration is gone.
 * A PeerDirect MR cannot follow a move: the core calls get_pages() and
 * dma_map() under its mapping lock, dma_map() must take the dma-buf's
 * reservation lock to map, and the exporter holds that reservation lock
 * while it announces a move (move_notify), so telling the core from there
 * would invert the two (and a deferred invalidation cannot be fenced: the
 * exporter may wait for fences with the reservation lock held). So the
 * buffer must not move while it is registered - exactly what upstream
 * ib_core does for non-ODP dma-buf MRs (ib_umem_dmabuf_get_pinned()), what
 * amdgpu's pin callback is written for ("RDMA NICs without ODP"), and
 * what kernels without CONFIG_DMABUF_MOVE_NOTIFY do anyway. An exporter may
 * migrate the buffer inside our pin or map (amdgpu does for an importer
 * that cannot reach VRAM peer to peer) and announce that to us: then
 * nothing of ours is mapped yet, and what we map next is where it landed.
 * A move announced for a mapping that is pinned would be the exporter's
 * bug: logged, the mapping retired for new registrations.
 *
 * A mapping pins its whole dma-buf: making one charges that to the
 * registering user (sp_peer_charge(), below), and dma_map() fails with
 * -EDQUOT past the user's RLIMIT_MEMLOCK or max_peer_pinned_per_user.
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
 *   sp_peer_maps_lock the list of shared mappings; a leaf: mappings are
 *                     made and torn down outside it
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

enum sp_inval_state { SP_INVAL_NONE, SP_INVAL_RUNNING, SP_INVAL_DONE };
enum sp_map_state { SP_MAP_CREATING, SP_MAP_READY, SP_MAP_FAILED };

/**
 * struct sp_peer_map - a pinned mapping of one dma-buf for one device,
 *	shared by every registration of that dma-buf for that device
 * @node: in sp_peer_maps while new registrations may use it
 *	(sp_peer_maps_lock)
 * @users: registrations using it, plus one while it is made
 *	(sp_peer_maps_lock)
 * @dmabuf: our reference on the dma-buf
 * @dev: the NIC's device
 * @state: set by the maker before @made completes, constant after
 * @error: why making it failed (SP_MAP_FAILED)
 * @made: completed once @state is READY or FAILED
 * @attach: our dynamic attachment (importer_priv is this map)
 * @pinned: dma_buf_pin() succeeded (resv)
 * @sgt: the exporter's mapping (resv; constant while READY)
 * @moved: the exporter announced a move of the pinned buffer (written
 *	under resv, read without it: no new registration uses the map)
 * @charged: bytes charged for the pin (the whole dma-buf), 0 once
 *	uncharged (sp_peer_maps_lock)
 * @uid: real uid of the process that made the map: charged in
 *	sp_peer_users until the pin goes
 * @user: whose locked_vm carries @charged (a reference), NULL when the
 *	maker had CAP_IPC_LOCK
 */
struct sp_peer_map {
	struct list_head node;
	unsigned int users;
	struct dma_buf *dmabuf;
	struct device *dev;
	enum sp_map_state state;
	int error;
	struct completion made;
	struct dma_buf_attachment *attach;
	bool pinned;
	struct sg_table *sgt;
	bool moved;
	u64 charged;
	kuid_t uid;
	struct user_struct *user;
};

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

static DEFINE_MUTEX(sp_peer_maps_lock);
static LIST_HEAD(sp_peer_maps);

/*
 * Accounting of PeerDirect pins (docs/peerdirect.md, "What a registration
 * pins, and who pays"). A shared mapping pins its whole dma-buf, however
 * little of it is registered, so making one charges the dma-buf's size,
 * once, to the process that made it (the first registration of that
 * dma-buf for that device):
 *
 * - against max_peer_pinned_per_user (all of the uid's mappings
 *   together; CAP_IPC_LOCK does not exempt from it);
 * - to the user's locked_vm against the caller's RLIMIT_MEMLOCK, like a
 *   strixpeer buffer (buffer.c), unless the caller has CAP_IPC_LOCK.
 *
 * Later registrations that share the mapping pin nothing new and pay
 * nothing; the charge stays with the first registrant's user until the
 * last registration is gone and the mapping unpinned, whoever ends first.
 * Past a limit dma_map() fails with -EDQUOT, which the core returns from
 * ibv_reg_mr().
 *
 * struct sp_peer_user: one uid's pins, in sp_peer_users by uid, under
 * sp_peer_maps_lock; freed with the uid's last charged mapping.
 */
struct sp_peer_user {
	unsigned int maps;
	u64 bytes;
};

static DEFINE_XARRAY(sp_peer_users);

static void sp_peer_refuse(const struct sp_peer_map *m, const char *limit,
			   u64 max, u64 held)
{
	atomic64_inc(&sp_stats.peer_fail_limit);
	pr_info_ratelimited("strixpeer: %s[%d] uid %u: PeerDirect registration refused (EDQUOT): pinning dma-buf %s of %zu bytes would pass %s (%llu bytes; the user pins %llu)\n",
			    current->comm, task_pid_nr(current),
			    from_kuid(&init_user_ns, current_uid()),
			    m->dmabuf->exp_name, m->dmabuf->size, limit, max,
			    held);
}

/*
 * Charge @m's pin to the calling process's user (see above).
 * Context: sp_peer_maps_lock held; @m not yet pinned.
 */
static int sp_peer_charge(struct sp_peer_map *m)
{
	u64 bytes = PAGE_ALIGN((u64)m->dmabuf->size);
	u64 max = READ_ONCE(sp_max_peer_pinned_per_user), held;
	kuid_t uid = current_uid();
	struct sp_peer_user *pu;
	int ret;

	lockdep_assert_held(&sp_peer_maps_lock);
	pu = xa_load(&sp_peer_users, __kuid_val(uid));
	held = pu ? pu->bytes : 0;
	if (max && held + bytes > max) {
		sp_peer_refuse(m, "max_peer_pinned_per_user", max, held);
		return -EDQUOT;
	}
	if (!capable(CAP_IPC_LOCK)) {
		struct user_struct *user = current_user();
		unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
		unsigned long npages = bytes >> PAGE_SHIFT;
		unsigned long cur = atomic_long_read(&user->locked_vm), new;

		do {
			new = cur + npages;
			if (new > limit || new < cur) {
				sp_peer_refuse(m, "RLIMIT_MEMLOCK (locked_vm)",
					       (u64)limit << PAGE_SHIFT,
					       (u64)cur << PAGE_SHIFT);
				sp_event_limit(STRIXPEER_LIMIT_MEMLOCK, bytes);
				return -EDQUOT;
			}
		} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
		m->user = get_uid(user);
	}
	if (!pu) {
		pu = kzalloc(sizeof(*pu), GFP_KERNEL_ACCOUNT);
		ret = pu ? xa_err(xa_store(&sp_peer_users, __kuid_val(uid), pu,
					   GFP_KERNEL_ACCOUNT)) : -ENOMEM;
		if (ret) {
			kfree(pu);
			if (m->user) {
				atomic_long_sub(bytes >> PAGE_SHIFT,
						&m->user->locked_vm);
				free_uid(m->user);
				m->user = NULL;
			}
			return ret;
		}
	}
	pu->maps++;
	pu->bytes += bytes;
	m->uid = uid;
	m->charged = bytes;
	atomic64_add(bytes, &sp_stats.peer_pinned_bytes);
	return 0;
}

/* Context: sp_peer_maps_lock held; @m unpinned, or never pinned. */
static void sp_peer_uncharge(struct sp_peer_map *m)
{
	struct sp_peer_user *pu;

	lockdep_assert_held(&sp_peer_maps_lock);
	if (!m->charged)
		return;
	pu = xa_load(&sp_peer_users, __kuid_val(m->uid));
	if (!WARN_ON_ONCE(!pu)) {
		pu->bytes -= m->charged;
		if (!--pu->maps) {
			xa_erase(&sp_peer_users, __kuid_val(m->uid));
			kfree(pu);
		}
	}
	if (m->user) {
		atomic_long_sub(m->charged >> PAGE_SHIFT, &m->user->locked_vm);
		free_uid(m->user);
		m->user = NULL;
	}
	atomic64_sub(m->charged, &sp_stats.peer_pinned_bytes);
	m->charged = 0;
}

/* GPU bytes PeerDirect mappings made by @uid's processes pin now. */
u64 sp_peer_pinned_by(kuid_t uid)
{
	struct sp_peer_user *pu;
	u64 bytes;

	mutex_lock(&sp_peer_maps_lock);
	pu = xa_load(&sp_peer_users, __kuid_val(uid));
	bytes = pu ? pu->bytes : 0;
	mutex_unlock(&sp_peer_maps_lock);
	return bytes;
}

/*
 * The exporter moves the buffer (7.x: invalidates our mappings). Called
 * with the dma-buf's reservation lock held; takes no lock of ours and
 * never calls the core (see the top of this file).
 */
static void sp_peer_move_notify(struct dma_buf_attachment *attach)
{
	struct sp_peer_map *m = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	/* Inside our own pin or map: nothing mapped yet, the next map is fresh. */
	if (!m->pinned || !m->sgt)
		return;
	WRITE_ONCE(m->moved, true);
	pr_err_ratelimited("strixpeer: exporter %s moved a dma-buf that a PeerDirect registration pins; its registrations may reach stale memory until they end\n",
			   attach->dmabuf->exp_name);
}

static const struct dma_buf_attach_ops sp_peer_importer_ops = {
	.allow_peer2peer = true,
	.SP_DMA_BUF_MOVE_NOTIFY = sp_peer_move_notify,
};

/* Attaches, pins and maps @m; undone by sp_peer_map_put(). */
static int sp_peer_map_make(struct sp_peer_map *m)
{
	struct dma_resv *resv = m->dmabuf->resv;
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	long wait;
	int ret;

	attach = dma_buf_dynamic_attach(m->dmabuf, m->dev, &sp_peer_importer_ops,
					m);
	if (IS_ERR(attach))
		return PTR_ERR(attach);
	m->attach = attach;

	dma_resv_lock(resv, NULL);
	/* The exporter may move the buffer in here and tell us: see above. */
	ret = dma_buf_pin(attach);
	if (ret) {
		/* a full GTT fails every attempt: say so, but not every time */
		pr_info_ratelimited("strixpeer: %s[%d]: PeerDirect registration failed: exporter %s could not pin a dma-buf of %zu bytes (%d)\n",
				    current->comm, task_pid_nr(current),
				    m->dmabuf->exp_name, m->dmabuf->size, ret);
		goto unlock;
	}
	m->pinned = true;
	sgt = dma_buf_map_attachment(attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto unlock;
	}
	m->sgt = sgt;
	/* A move the exporter started must finish before the NIC looks. */
	wait = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, false,
				     MAX_SCHEDULE_TIMEOUT);
	ret = wait < 0 ? wait : 0;
unlock:
	dma_resv_unlock(resv);
	return ret;
}

/*
 * Drops a use of @m; the last one unmaps, unpins and detaches, after
 * which the exporter may move the buffer again.
 * Context: process context; takes sp_peer_maps_lock, then (alone) the
 * dma-buf's reservation lock.
 */
static void sp_peer_map_put(struct sp_peer_map *m)
{
	struct dma_resv *resv = m->dmabuf->resv;
	bool last;

	mutex_lock(&sp_peer_maps_lock);
	last = !--m->users;
	if (last)
		list_del_init(&m->node);
	mutex_unlock(&sp_peer_maps_lock);
	if (!last)
		return;

	if (m->attach) {
		dma_resv_lock(resv, NULL);
		if (m->sgt)
			dma_buf_unmap_attachment(m->attach, m->sgt,
						 DMA_BIDIRECTIONAL);
		m->sgt = NULL;
		if (m->pinned)
			dma_buf_unpin(m->attach);
		/* the buffer may move from here on, and tell us until detached */
		m->pinned = false;
		dma_resv_unlock(resv);
		/* no move_notify for it after this returns */
		dma_buf_detach(m->dmabuf, m->attach);
	}
	/* unpinned: the charge goes (also for a map that failed to pin) */
	mutex_lock(&sp_peer_maps_lock);
	sp_peer_uncharge(m);
	mutex_unlock(&sp_peer_maps_lock);
	dma_buf_put(m->dmabuf);
	kfree(m);
}

/*
 * The pinned mapping of @dmabuf for @dev, made on first use; waits while
 * another registration makes it.
 * Context: process context; may sleep for as long as the exporter pins
 * (and perhaps migrates) the buffer. Caller holds no lock of ours.
 */
static struct sp_peer_map *sp_peer_map_get(struct dma_buf *dmabuf,
					   struct device *dev)
{
	struct sp_peer_map *m;
	int ret;

	mutex_lock(&sp_peer_maps_lock);
	list_for_each_entry(m, &sp_peer_maps, node) {
		if (m->dmabuf == dmabuf && m->dev == dev && !READ_ONCE(m->moved)) {
			m->users++;
			mutex_unlock(&sp_peer_maps_lock);
			wait_for_completion(&m->made);
			if (m->state == SP_MAP_READY)
				return m;
			ret = m->error;
			sp_peer_map_put(m);
			return ERR_PTR(ret);
		}
	}
	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m) {
		mutex_unlock(&sp_peer_maps_lock);
		return ERR_PTR(-ENOMEM);
	}
	m->users = 1;
	m->dmabuf = dmabuf;
	/* a new pin: charged before the exporter is asked (may migrate) */
	ret = sp_peer_charge(m);
	if (ret) {
		mutex_unlock(&sp_peer_maps_lock);
		kfree(m);
		return ERR_PTR(ret);
	}
	get_dma_buf(dmabuf);
	m->dev = dev;
	init_completion(&m->made);
	list_add(&m->node, &sp_peer_maps);
	mutex_unlock(&sp_peer_maps_lock);

	ret = sp_peer_map_make(m);
	if (ret) {
		mutex_lock(&sp_peer_maps_lock);
		list_del_init(&m->node);	/* the next registration retries */
		mutex_unlock(&sp_peer_maps_lock);
		m->error = ret;
		m->state = SP_MAP_FAILED;
		complete_all(&m->made);
		sp_peer_map_put(m);
		return ERR_PTR(ret);
	}
	m->state = SP_MAP_READY;
	complete_all(&m->made);
	return m;
}

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
 * under its import's lock (sp_peer_invalidate_all()), so two never race;
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
		sp_event_peer(imp, STRIXPEER_PEER_INVALIDATE, ctx->map_len,
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

void sp_peer_invalidate_all(struct sp_import *imp,
			    enum strixpeer_inval_reason reason)
{
	struct sp_peer_ctx *ctx;

	lockdep_assert_held(&imp->lock);
	list_for_each_entry(ctx, &imp->ctxs, node)
		sp_peer_ctx_invalidate(ctx, reason);
}

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
	sp_event_peer(imp, STRIXPEER_PEER_CLAIM, ctx->map_len, 0);
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
	sp_event_peer(ctx->imp, STRIXPEER_PEER_MAP, ctx->map_len, 0);
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
	WARN_ON(!list_empty(&sp_peer_maps));
	WARN_ON(!xa_empty(&sp_peer_users));
	if (sp_peer_handle)
		ib_unregister_peer_memory_client(sp_peer_handle);
	sp_peer_handle = NULL;
	sp_reason = SP_REASON_NO_API;
}

#else /* !SP_HAVE_PEERDIRECT */

u64 sp_peer_pinned_by(kuid_t uid)
{
	return 0;
}

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
