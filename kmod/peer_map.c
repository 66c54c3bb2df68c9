// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer's PeerDirect client (peer.c): the pinned mappings of dma-bufs
 * that its registrations share, and what they cost their users.
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
 * Kernels with dma_buf_attach_revocable() (7.x) make that callback
 * optional for pinned importers and read it as a promise: an importer
 * that supplies it unmaps within bounded time when it is called (the
 * revocation VFIO-PCI does on a device reset, waiting without bound for
 * the unmaps, while the NIC could still reach the device). We cannot keep
 * that promise - ending every registration of the mapping means calling
 * the core, which the reservation lock held there forbids - so there we
 * supply none: such exporters refuse to attach us, and registrations of
 * their dma-bufs fail instead of outliving a revocation. Like the
 * in-kernel pinned importer, ib_umem_dmabuf's pinned ops.
 *
 * A mapping pins its whole dma-buf: making one charges that to the
 * registering user (sp_peer_charge(), below), and dma_map() fails with
 * -EDQUOT past the user's RLIMIT_MEMLOCK or max_peer_pinned_per_user.
 *
 *
 * Locking: sp_peer_maps_lock (mutex) guards the list of mappings, each
 * mapping's @users and the per-user accounting; a leaf, never held across
 * a call into the exporter. The dma-buf's reservation lock is taken alone
 * (attach, pin, map; unmap, unpin) and held by the exporter in
 * move_notify, which takes no lock of ours and never calls the core.
 */
#include <linux/capability.h>
#include <linux/completion.h>
#include <linux/cred.h>
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/uidgid.h>
#include <linux/xarray.h>

#include "strixpeer.h"

#ifdef SP_HAVE_PEERDIRECT

#include "peer_map.h"

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
		sp_event_limit(STRIXPEER_LIMIT_MAX_PEER_PINNED_PER_USER, bytes);
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

#ifndef STRIXPEER_HAVE_DMA_BUF_ATTACH_REVOCABLE
/*
 * The exporter moves the buffer (7.x before dma_buf_attach_revocable():
 * invalidates our mappings). Called with the dma-buf's reservation lock
 * held; takes no lock of ours and never calls the core (see the top of
 * this file).
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
#else
/* Pinned, not revocable: no callback (see the top of this file). */
static const struct dma_buf_attach_ops sp_peer_importer_ops = {
	.allow_peer2peer = true,
};
#endif

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

/**
 * sp_peer_map_put() - drop a use of a shared mapping
 * @m: the mapping, from sp_peer_map_get()
 *
 * The last use unmaps, unpins, detaches and uncharges, after which the
 * exporter may move the buffer again.
 *
 * Context: process context; takes sp_peer_maps_lock, then (alone) the
 * dma-buf's reservation lock.
 */
void sp_peer_map_put(struct sp_peer_map *m)
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

/**
 * sp_peer_map_get() - the pinned mapping of a dma-buf for a device
 * @dmabuf: the dma-buf (the caller's reference; the mapping takes its own)
 * @dev: the NIC's DMA device
 *
 * Made, and charged to the caller, on first use; waits while another
 * registration makes it.
 *
 * Context: process context; may sleep for as long as the exporter pins
 * (and perhaps migrates) the buffer. Caller holds no lock of ours.
 * Return: the mapping (a use of it), or an ERR_PTR: -EDQUOT past the
 * caller's limits, -ENOMEM, or the exporter's error.
 */
struct sp_peer_map *sp_peer_map_get(struct dma_buf *dmabuf, struct device *dev)
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

/**
 * sp_peer_maps_idle() - no mapping left and nobody charged
 *
 * Context: module exit (every registration held a module reference).
 * Return: true when no mapping and no per-user charge is left.
 */
bool sp_peer_maps_idle(void)
{
	bool idle;

	mutex_lock(&sp_peer_maps_lock);
	idle = list_empty(&sp_peer_maps) && xa_empty(&sp_peer_users);
	mutex_unlock(&sp_peer_maps_lock);
	return idle;
}

#endif /* SP_HAVE_PEERDIRECT */
