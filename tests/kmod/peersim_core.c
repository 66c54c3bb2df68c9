// SPDX-License-Identifier: GPL-2.0
/*
 * sp_peersim: a simulated PeerDirect core and HCA, for tests.
 *
 * This file, sp_peersim's core half, is the simulated PeerDirect
 * peer-memory core. It owns the client registration and the two exported
 * symbols, /sys/kernel/mm/memory_peers, the core's half of an MR
 * registration (ib_umem_get(): GUP, then the peer clients, in either
 * semantics), the invalidate callback and its plumbing, and the core's
 * module parameters. The simulated HCA - its device, ioctls, MRs and
 * "DMA", and the dma-buf path - is peersim_hca.c; peersim.h is what the
 * two share. This file keeps the client registration, sysfs, the module
 * parameters and load/unload; peersim_core_umem.c the core's half of the
 * MR registration, the invalidate callback, and deregistration;
 * peersim_core_priv.h is what those two share.
 *
 * The peer-memory API (ib_register_peer_memory_client() and friends) is not
 * in mainline Linux; it lives in MLNX_OFED / DOCA-OFED's ib_core and in
 * Ubuntu's linux-nvidia kernels (not its generic ones since 6.8). This
 * module plays both halves a peer-memory client deals with on such a
 * system, on kernels that have neither:
 *
 *  - the core: it exports the two registration functions with the real
 *    ABI (peer_mem_abi.h), keeps the clients in registration order,
 *    publishes /sys/kernel/mm/memory_peers/<name>/ where OFED would (see
 *    memory_peers_sysfs below), and registers "MRs" the way ib_umem_get() +
 *    ib_peer_umem_get() do: pin with GUP first, and ask the clients (first
 *    claim wins) only when that fails;
 *  - the HCA: a platform device whose struct device the DMA API maps for,
 *    which performs "DMA" into and out of registered MRs through the DMA
 *    addresses it was given (translated back with dma_to_phys(): the VMs
 *    these tests run in have no IOMMU), and which is fenced against
 *    invalidation the way mlx5 revokes an mkey.
 *
 * sysfs and names, as OFED's core decides them: OFED adds
 * /sys/kernel/mm/memory_peers/<name>/ only when its configure finds mm_kobj
 * exported (HAVE_MM_KOBJ_EXPORTED: Debian's 6.1 exports it; 6.12 and sid's
 * 7.x do not), and there kobject_add() refuses a second client of the same
 * name. Without it the core has no sysfs and never compares names: two
 * clients may register as "amdkfd", and are asked in registration order
 * (../shared/peermem/README.md: the 6.12 port, checked in the VM).
 * memory_peers_sysfs=-1 (the default) does what OFED built for this kernel
 * does (the build looks for mm_kobj in the kernel's Module.symvers, as
 * OFED's configure does); 1 models a core with sysfs on any kernel, for
 * the tests of tools that look for memory_peers/<name>/version (RCCL);
 * 0 one without.
 *
 * Two core behaviours are implemented, chosen at load time with the
 * "semantics" parameter:
 *
 *  modern (Ubuntu, current OFED): get_pages() gets sg_head == NULL and
 *	write == 1 (force == !writable); the client builds the sg table in
 *	dma_map(); get_page_size() is asked after dma_map() and, when it is
 *	not PAGE_SIZE, the core trims the first and last DMA segment to the
 *	PAGE_SIZE-aligned range (and restores them before unmapping). The
 *	core holds the MR's mapping lock from before get_pages() until the MR
 *	is activated, and the invalidate callback takes it. After an
 *	invalidation the core calls dma_unmap() + put_pages() itself, unless
 *	the client registered the extended form with
 *	PEER_MEM_INVALIDATE_UNMAPS. release() is called at deregistration.
 *
 *  legacy (older MLNX_OFED): get_pages() gets the core's zeroed sg_head to
 *	fill and write == the MR's write access (force == 1);
 *	get_page_size() is asked before dma_map(); no lock is held across the
 *	client's calls. An invalidation of an activated MR tears the whole
 *	registration down inside the callback: dma_unmap(), put_pages() and
 *	release(), as mlx5_invalidate_umem() did through ib_umem_release().
 *	An invalidation that arrives before the MR is activated only marks it;
 *	the registration then fails (EINVAL) and is unwound. The extended form
 *	is ignored.
 *
 * Locking, outermost first:
 *
 *  psim_clients_lock (mutex): the client list, the memory_peers kobject.
 *	Held across acquire() calls, as the real core holds its list lock.
 *  mr->mapping_lock (mutex): the core's mapping state of a peer MR
 *	(state, notifier_active, early_invalidated) and, in legacy mode, the
 *	teardown done by an invalidation. Modern: held by the registering
 *	thread across get_pages(), the reg_delay_ms sleep, dma_map() and
 *	get_page_size(), and taken by the invalidate callback; so a client
 *	must have no lock dependency from its get_pages()/dma_map() to its
 *	calls of the invalidate callback (lockdep sees such a chain here as
 *	it would on a real core).
 *  mr->dma_sem (rwsem): the DMA fence. "DMA" holds it for reading, the
 *	fence (invalidation, deregistration) takes it for writing, which
 *	waits for in-flight DMA. Nothing that may fault (copy_{to,from}_user)
 *	runs under it, so no lock order with mmap_lock arises.
 *  client->mrs' xa_lock: core_context -> MR lookup in the invalidate
 *	callback, which takes an MR reference under it.
 *
 * dma-buf MRs (ib_umem_dmabuf) use no mapping_lock; their mapping is under
 * the dma-buf's reservation lock, which the exporter holds when it calls
 * move_notify:
 *
 *  dmabuf->resv (ww_mutex, outermost for these MRs): the attachment's
 *	mapping (dbuf_sgt), the pin, and the MTT (mtt, nmtt, first_off,
 *	dma_bytes, max_seg) of a dma-buf MR: map, unmap and move_notify all
 *	run under it, as ib_umem_dmabuf_map_pages/unmap_pages do. Taken by
 *	registration, the "page fault" that maps a moved MR again (DMA,
 *	MR_SEGS) and deregistration; never while holding dma_sem, and nothing
 *	that may fault (copy_{to,from}_user, mmap_lock) runs under it.
 *  mr->dma_sem inside it: the MTT of a dma-buf MR changes only with both
 *	held (dma_sem for writing), so DMA and MR_INFO read it under dma_sem
 *	alone; dma_off is set with the MTT gone (moved: "needs remap") and
 *	cleared only by a mapping that finds the MR not deregistered.
 *
 * As with ib_core on a real HCA, a GUP registration is one DMA_BIDIRECTIONAL
 * mapping of its pages: with CONFIG_DMA_API_DEBUG, a page registered in two
 * MRs at once is reported ("cacheline tracking EEXIST, overlapping mappings
 * aren't supported"), and warned about past seven. Tests that must be
 * warning-free on a debug kernel register disjoint ranges.
 *
 * This module deviates from a real core only where a real core would
 * crash, corrupt state or warn for a reason that is not the client's:
 *  - a client page size that is not a power of two >= PAGE_SIZE, an empty
 *    mapping, or DMA segments too short for the range fail the
 *    registration with EINVAL and a message naming the client;
 *  - a client without get_page_size() is refused at registration (real
 *    cores call it unconditionally), and so is, with sysfs, a duplicate
 *    name (with a message, where a real core fails in sysfs with a
 *    warning);
 *  - with sysfs, memory_peers/<name> stays until the unregistration has
 *    finished, so that a client re-registering under its name meanwhile is
 *    refused rather than colliding in sysfs;
 *  - the invalidate callback asserts might_sleep() even for an unknown
 *    core_context;
 *  - the per-client dereg counters count what the registration counted
 *    (the Ubuntu core adds the already-cleared nents).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/dma-buf.h>
#include <linux/dma-direct.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/highmem.h>
#include <linux/iosys-map.h>
#include <linux/kernfs.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/log2.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/platform_device.h>
#include <linux/refcount.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "peersim_conftest.h"
#include "peersim.h"
#include "peersim_core_priv.h"

static char *semantics = "modern";
module_param(semantics, charp, 0444);
MODULE_PARM_DESC(semantics,
		 "Core behaviour: \"modern\" (Ubuntu/current OFED) or \"legacy\" (older MLNX_OFED); read at load");

#ifdef PSIM_MM_KOBJ_EXPORTED
#define PSIM_SYSFS_DEFAULT	1
#else
#define PSIM_SYSFS_DEFAULT	0
#endif
static int memory_peers_sysfs = -1;
module_param(memory_peers_sysfs, int, 0444);
MODULE_PARM_DESC(memory_peers_sysfs,
		 "Publish /sys/kernel/mm/memory_peers/<name>/ and refuse duplicate names: -1 as OFED does on this kernel (only where mm_kobj is exported), 1 always, 0 never; read at load, then reads back 0 or 1");
bool psim_sysfs;

unsigned int reg_delay_ms;
module_param(reg_delay_ms, uint, 0644);
MODULE_PARM_DESC(reg_delay_ms,
		 "Killable sleep between the client's get_pages() and dma_map() in every peer registration (ms)");

/*
 * Legacy semantics: while set, a peer registration waits after dma_map()
 * and before it walks the client's sg list into its MTT (no core lock is
 * held there, as on a real legacy core) until it is cleared again; tests
 * see the waiting registrations in PEERSIM_IOC_INFO's mtt_held.
 */
static bool mtt_hold;
static DECLARE_WAIT_QUEUE_HEAD(psim_mtt_wq);
atomic_t psim_mtt_held = ATOMIC_INIT(0);

static int psim_set_mtt_hold(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	wake_up_all(&psim_mtt_wq);
	return ret;
}

static const struct kernel_param_ops psim_mtt_hold_ops = {
	.set = psim_set_mtt_hold,
	.get = param_get_bool,
};
module_param_cb(mtt_hold, &psim_mtt_hold_ops, &mtt_hold, 0644);
MODULE_PARM_DESC(mtt_hold,
		 "Legacy semantics: hold peer registrations between dma_map() and building the MTT while set (at most 60 s)");

bool psim_legacy;
static struct kobject *psim_mm_kobj;

DEFINE_MUTEX(psim_clients_lock);
LIST_HEAD(psim_clients);		/* under psim_clients_lock */
unsigned int psim_nclients;	/* not dying; under psim_clients_lock */
static struct kobject *psim_peers_kobj;	/* under psim_clients_lock */

atomic64_t psim_invalidations = ATOMIC64_INIT(0);

/* --- sysfs: /sys/kernel/mm/memory_peers/<name>/ ------------------------- */

static inline struct psim_client *to_psim_client(struct kobject *kobj)
{
	return container_of(kobj, struct psim_client, kobj);
}

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct psim_client *c = to_psim_client(kobj);

	return sysfs_emit(buf, "%.*s\n", (int)sizeof(c->version), c->version);
}

#define PSIM_STAT_ATTR(_name)						\
static ssize_t _name##_show(struct kobject *kobj,			\
			    struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%llu\n",				\
			  (u64)atomic64_read(&to_psim_client(kobj)->_name)); \
}									\
static struct kobj_attribute psim_attr_##_name = __ATTR_RO(_name)

static struct kobj_attribute psim_attr_version = __ATTR_RO(version);
PSIM_STAT_ATTR(num_alloc_mrs);
PSIM_STAT_ATTR(num_dealloc_mrs);
PSIM_STAT_ATTR(num_reg_pages);
PSIM_STAT_ATTR(num_dereg_pages);
PSIM_STAT_ATTR(num_reg_bytes);
PSIM_STAT_ATTR(num_dereg_bytes);
PSIM_STAT_ATTR(num_free_callbacks);

static struct attribute *psim_client_attrs[] = {
	&psim_attr_version.attr,
	&psim_attr_num_alloc_mrs.attr,
	&psim_attr_num_dealloc_mrs.attr,
	&psim_attr_num_reg_pages.attr,
	&psim_attr_num_dereg_pages.attr,
	&psim_attr_num_reg_bytes.attr,
	&psim_attr_num_dereg_bytes.attr,
	&psim_attr_num_free_callbacks.attr,
	NULL,
};
ATTRIBUTE_GROUPS(psim_client);

static void psim_client_kobj_release(struct kobject *kobj)
{
	struct psim_client *c = to_psim_client(kobj);

	xa_destroy(&c->mrs);
	kfree(c);
}

static const struct kobj_type psim_client_ktype = {
	.release = psim_client_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = psim_client_groups,
};

/*
 * /sys/kernel/mm's kobject. mm_kobj is exported to modules on 6.1 but no
 * longer on 6.12, so it is found through sysfs: a kobject directory's
 * kernfs node carries its kobject as private data. It lives as long as
 * the kernel.
 */
static struct kobject *psim_find_mm_kobj(void)
{
	struct kernfs_node *kn = kernfs_find_and_get(kernel_kobj->sd, "mm");
	struct kobject *kobj = NULL;

	if (!kn)
		return NULL;
	if (kernfs_type(kn) == KERNFS_DIR)
		kobj = kn->priv;
	kernfs_put(kn);
	return kobj;
}

/* --- clients --------------------------------------------------------------- */

/*
 * The extended form is recognised by a non-zero last version byte and an
 * ex_size covering the flags; *flags receives them.
 */
bool psim_client_ex(const struct peer_memory_client *ops, u32 *flags)
{
	const struct peer_memory_client_ex *ex;

	if (!ops->version[IB_PEER_MEMORY_VER_MAX - 1])
		return false;
	ex = container_of(ops, const struct peer_memory_client_ex, client);
	if (ex->ex_size < offsetofend(struct peer_memory_client_ex, flags))
		return false;
	*flags = ex->flags;
	return true;
}

/**
 * psim_unmap_on_invalidate() - does the client unmap after invalidating?
 * @c: the client
 *
 * Only a modern core honours PEER_MEM_INVALIDATE_UNMAPS.
 *
 * Return: true if the client unmaps itself after invalidating.
 */
bool psim_unmap_on_invalidate(const struct psim_client *c)
{
	u32 flags;

	if (psim_legacy)
		return false;
	return psim_client_ex(c->ops, &flags) &&
	       (flags & PEER_MEM_INVALIDATE_UNMAPS);
}

static int psim_check_mandatory(const struct peer_memory_client *pc)
{
	static const struct {
		size_t offset;
		const char *name;
	} mandatory[] = {
		{ offsetof(struct peer_memory_client, acquire), "acquire" },
		{ offsetof(struct peer_memory_client, get_pages), "get_pages" },
		{ offsetof(struct peer_memory_client, put_pages), "put_pages" },
		{ offsetof(struct peer_memory_client, dma_map), "dma_map" },
		{ offsetof(struct peer_memory_client, dma_unmap), "dma_unmap" },
		/* not checked by the real cores, which call it unconditionally */
		{ offsetof(struct peer_memory_client, get_page_size), "get_page_size" },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(mandatory); i++) {
		if (!*(void * const *)((const char *)pc + mandatory[i].offset)) {
			pr_err("peer memory client %.*s is missing mandatory function %s\n",
			       IB_PEER_MEMORY_NAME_MAX, pc->name, mandatory[i].name);
			return -EINVAL;
		}
	}
	return 0;
}

/**
 * ib_register_peer_memory_client() - register a peer-memory client
 * @peer_client: the client's callbacks, name and version; must stay valid
 *	until ib_unregister_peer_memory_client() returned. May be the
 *	client member of a struct peer_memory_client_ex.
 * @invalidate_callback: when not NULL, receives the core's invalidate
 *	callback, and the client is then only asked for registrations that
 *	support invalidation
 *
 * Clients are asked in registration order. With sysfs (psim_sysfs), a
 * client whose name is already registered (or still being unregistered)
 * is refused; without, names are not compared, as on OFED's core there.
 *
 * Context: process context; takes the client-list mutex.
 * Return: the handle to pass to the invalidate callback and to
 *	ib_unregister_peer_memory_client(), or NULL on failure.
 */
void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback)
{
	struct kobject *created = NULL;
	struct psim_client *c, *other;
	int ret;

	if (psim_check_mandatory(peer_client))
		return NULL;
	if (!peer_client->name[0] ||
	    strnlen(peer_client->name, IB_PEER_MEMORY_NAME_MAX) == IB_PEER_MEMORY_NAME_MAX) {
		pr_err("peer memory client name is empty or not NUL-terminated\n");
		return NULL;
	}

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	kobject_init(&c->kobj, &psim_client_ktype);
	c->ops = peer_client;
	memcpy(c->name, peer_client->name, sizeof(c->name));
	memcpy(c->version, peer_client->version, sizeof(c->version));
	refcount_set(&c->usecnt, 1);
	init_completion(&c->usecnt_zero);
	xa_init_flags(&c->mrs, XA_FLAGS_ALLOC);

	mutex_lock(&psim_clients_lock);
	if (!psim_sysfs)
		goto no_sysfs;
	list_for_each_entry(other, &psim_clients, node) {
		if (!strcmp(other->name, c->name)) {
			pr_err("peer memory client %s is already registered\n",
			       c->name);
			goto out_unlock;
		}
	}
	if (!psim_peers_kobj) {
		psim_peers_kobj = kobject_create_and_add("memory_peers",
							 psim_mm_kobj);
		if (!psim_peers_kobj)
			goto out_unlock;
		created = psim_peers_kobj;
	}
	ret = kobject_add(&c->kobj, psim_peers_kobj, "%s", c->name);
	if (ret) {
		pr_err("peer memory client %s: sysfs: %d\n", c->name, ret);
		goto out_peers;
	}
no_sysfs:
	/*
	 * If the peer wants the invalidate callback, every registration it
	 * serves must support invalidation.
	 */
	if (invalidate_callback) {
		*invalidate_callback = psim_invalidate;
		c->invalidation_required = true;
	}
	list_add_tail(&c->node, &psim_clients);
	psim_nclients++;
	mutex_unlock(&psim_clients_lock);
	pr_info("peer memory client %s registered (%s, %s semantics)\n",
		c->name, c->invalidation_required ? "invalidation" : "no invalidation",
		psim_legacy ? "legacy" : "modern");
	return c;

out_peers:
	if (created) {
		kobject_put(created);
		psim_peers_kobj = NULL;
	}
out_unlock:
	mutex_unlock(&psim_clients_lock);
	kobject_put(&c->kobj);
	return NULL;
}
EXPORT_SYMBOL(ib_register_peer_memory_client);

/**
 * ib_unregister_peer_memory_client() - unregister a peer-memory client
 * @reg_handle: what ib_register_peer_memory_client() returned
 *
 * The client is asked for no new registration from here on. Waits until
 * every registration that uses the client is gone; after that the core
 * calls none of the client's callbacks any more.
 *
 * Context: process context, may sleep for as long as registrations exist.
 */
void ib_unregister_peer_memory_client(void *reg_handle)
{
	struct psim_client *c = reg_handle;

	mutex_lock(&psim_clients_lock);
	c->dying = true;
	psim_nclients--;
	mutex_unlock(&psim_clients_lock);

	if (refcount_dec_and_test(&c->usecnt))
		complete(&c->usecnt_zero);
	wait_for_completion(&c->usecnt_zero);

	/*
	 * The name stays taken (and memory_peers/<name> present) until here,
	 * so a new registration under the same name cannot collide in sysfs.
	 */
	mutex_lock(&psim_clients_lock);
	list_del(&c->node);
	pr_info("peer memory client %s unregistered\n", c->name);
	kobject_put(&c->kobj);
	if (list_empty(&psim_clients) && psim_peers_kobj) {
		kobject_put(psim_peers_kobj);
		psim_peers_kobj = NULL;
	}
	mutex_unlock(&psim_clients_lock);
}
EXPORT_SYMBOL(ib_unregister_peer_memory_client);

/**
 * psim_get_client() - find the client that claims a range
 * @addr: start of the range
 * @size: its length
 * @client_ctx: receives the claiming client's context
 *
 * Asks the clients, in registration order, whether the range is theirs;
 * the first claim wins and holds a use of the client.
 *
 * Context: takes psim_clients_lock (held across acquire()).
 * Return: the claiming client, or NULL if none claims the range.
 */
struct psim_client *psim_get_client(unsigned long addr, size_t size,
				    void **client_ctx)
{
	struct psim_client *c;
	int ret;

	mutex_lock(&psim_clients_lock);
	list_for_each_entry(c, &psim_clients, node) {
		if (c->dying)
			continue;
		if (c->invalidation_required && !PSIM_MR_INVAL_SUPP)
			continue;
		atomic64_inc(&c->acquire_calls);
		ret = c->ops->acquire(addr, size, NULL, NULL, client_ctx);
		if (ret > 0) {
			atomic64_inc(&c->claims);
			refcount_inc(&c->usecnt);
			mutex_unlock(&psim_clients_lock);
			return c;
		}
	}
	mutex_unlock(&psim_clients_lock);
	return NULL;
}

/**
 * psim_put_client() - end a peer MR's claim
 * @mr: the MR; calls after the first do nothing
 *
 * release() for the MR's claim, and drop its use of the client.
 */
void psim_put_client(struct psim_mr *mr)
{
	struct psim_client *c = mr->client;

	if (mr->client_put)
		return;
	mr->client_put = true;
	if (c->ops->release)
		c->ops->release(mr->client_ctx);
	if (refcount_dec_and_test(&c->usecnt))
		complete(&c->usecnt_zero);
}

/* --- the registration pauses (reg_delay_ms, mtt_hold) ---------------------- */

/**
 * psim_reg_delay() - the killable pause of reg_delay_ms
 *
 * For tests that kill mid-registration.
 *
 * Context: may sleep.
 * Return: 0, or -EINTR when a fatal signal is pending.
 */
int psim_reg_delay(void)
{
	long timeout = msecs_to_jiffies(READ_ONCE(reg_delay_ms));

	while (timeout > 0) {
		timeout = schedule_timeout_killable(timeout);
		if (fatal_signal_pending(current))
			return -EINTR;
	}
	return 0;
}

/**
 * psim_mtt_window() - the mtt_hold window of a legacy registration
 *
 * Bounded: a test that dies holding it costs a registration 60 s, never a
 * hang.
 *
 * Context: may sleep.
 * Return: 0, or a negative errno when a fatal signal ended the wait.
 */
int psim_mtt_window(void)
{
	long left;

	if (!READ_ONCE(mtt_hold))
		return 0;
	atomic_inc(&psim_mtt_held);
	left = wait_event_killable_timeout(psim_mtt_wq, !READ_ONCE(mtt_hold),
					   60 * HZ);
	atomic_dec(&psim_mtt_held);
	if (!left)
		pr_warn("mtt_hold still set after 60 s; building the MTT\n");
	return left < 0 ? (int)left : 0;
}

/* --- load and unload (called by psim_init / psim_exit) -------------------- */

int psim_core_init(void)
{
	if (sysfs_streq(semantics, "modern")) {
		psim_legacy = false;
	} else if (sysfs_streq(semantics, "legacy")) {
		psim_legacy = true;
	} else {
		pr_err("semantics=%s: must be modern or legacy\n", semantics);
		return -EINVAL;
	}
	if (memory_peers_sysfs < -1 || memory_peers_sysfs > 1) {
		pr_err("memory_peers_sysfs=%d: must be -1, 0 or 1\n", memory_peers_sysfs);
		return -EINVAL;
	}
	psim_sysfs = memory_peers_sysfs < 0 ? PSIM_SYSFS_DEFAULT : memory_peers_sysfs;
	memory_peers_sysfs = psim_sysfs;	/* the parameter reads back the choice */
	psim_mm_kobj = psim_sysfs ? psim_find_mm_kobj() : NULL;
	if (psim_sysfs && !psim_mm_kobj) {
		pr_err("/sys/kernel/mm not found\n");
		return -ENOENT;
	}
	return 0;
}

void psim_core_exit(void)
{
	/*
	 * Clients link against this module, so none can be registered here
	 * (the module loader refuses the unload while they are loaded).
	 */
	mutex_lock(&psim_clients_lock);
	if (!list_empty(&psim_clients))
		pr_err("unloading with peer memory clients registered\n");
	mutex_unlock(&psim_clients_lock);
}
