// SPDX-License-Identifier: GPL-2.0
/*
 * sp_peersim: a simulated PeerDirect core and HCA, for tests.
 *
 * The peer-memory API (ib_register_peer_memory_client() and friends) is not
 * in mainline Linux; it lives in MLNX_OFED / DOCA-OFED's ib_core and in
 * Ubuntu kernels. This module plays both halves a peer-memory client deals
 * with on such a system, on kernels that have neither:
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

#include "peer_mem_abi.h"
#include "peersim_conftest.h"
#include "peersim_uapi.h"

/* Symbol namespaces are string literals since 6.13 (cdd30ebb1b9f). */
#ifdef PSIM_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

/* A dma-buf's kernel mapping without holding its resv lock: 6.2 split it. */
static int psim_dma_buf_vmap(struct dma_buf *dbuf, struct iosys_map *map)
{
#ifdef PSIM_HAVE_DMA_BUF_VMAP_UNLOCKED
	return dma_buf_vmap_unlocked(dbuf, map);
#else
	return dma_buf_vmap(dbuf, map);
#endif
}

static void psim_dma_buf_vunmap(struct dma_buf *dbuf, struct iosys_map *map)
{
#ifdef PSIM_HAVE_DMA_BUF_VMAP_UNLOCKED
	dma_buf_vunmap_unlocked(dbuf, map);
#else
	dma_buf_vunmap(dbuf, map);
#endif
}

/* The importer callback for a moving buffer: renamed in 7.x. */
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
#define PSIM_DMA_BUF_MOVE_NOTIFY	invalidate_mappings
#else
#define PSIM_DMA_BUF_MOVE_NOTIFY	move_notify
#endif

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
static bool psim_sysfs;

static unsigned int max_seg_size;
module_param(max_seg_size, uint, 0444);
MODULE_PARM_DESC(max_seg_size,
		 "DMA max segment size of the simulated HCA in bytes (0: the kernel default, 64 KiB; mlx5 uses 2 GiB)");

static unsigned int reg_delay_ms;
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
static atomic_t psim_mtt_held = ATOMIC_INIT(0);

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

/* core_context of a registration whose client did not ask for invalidation */
#define PSIM_NO_INVALIDATION_ID	U32_MAX
/* All simulated MRs support invalidation (mlx5 MRs do). */
#define PSIM_MR_INVAL_SUPP	true
/* "DMA" is done in chunks of this size, through a bounce buffer. */
#define PSIM_DMA_CHUNK		SZ_64K
/* At most this many clients are reported by PEERSIM_IOC_CLIENTS. */
#define PSIM_MAX_CLIENTS_REPORT	256

/**
 * struct psim_client - a registered peer-memory client
 * @kobj: /sys/kernel/mm/memory_peers/<name>
 * @node: in psim_clients (until its unregistration finished)
 * @ops: the client's registration, as passed
 * @name: copy of ops->name
 * @version: copy of ops->version
 * @invalidation_required: the client asked for the invalidate callback
 * @dying: being unregistered: no new registration may use it
 * @usecnt: 1 while registered, plus one per registration using it
 * @usecnt_zero: completed when @usecnt drops to zero
 * @mrs: core_context -> struct psim_mr, for the invalidate callback
 * @next_id: cyclic allocation cursor of @mrs
 * @acquire_calls: acquire() calls
 * @claims: acquire() calls that claimed
 * @num_alloc_mrs: sysfs counter, as the real core's
 * @num_dealloc_mrs: sysfs counter
 * @num_reg_pages: sysfs counter
 * @num_dereg_pages: sysfs counter
 * @num_reg_bytes: sysfs counter
 * @num_dereg_bytes: sysfs counter
 * @num_free_callbacks: sysfs counter: invalidate callback calls
 */
struct psim_client {
	struct kobject kobj;
	struct list_head node;
	const struct peer_memory_client *ops;
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	bool invalidation_required;
	bool dying;
	refcount_t usecnt;
	struct completion usecnt_zero;
	struct xarray mrs;
	u32 next_id;
	atomic64_t acquire_calls;
	atomic64_t claims;
	atomic64_t num_alloc_mrs;
	atomic64_t num_dealloc_mrs;
	atomic64_t num_reg_pages;
	atomic64_t num_dereg_pages;
	atomic64_t num_reg_bytes;
	atomic64_t num_dereg_bytes;
	atomic64_t num_free_callbacks;
};

/* The core's mapping state of a peer MR (as ib_umem_peer's). */
enum psim_map_state {
	PSIM_UNMAPPED = PEERSIM_CORE_UNMAPPED,
	PSIM_MAPPED = PEERSIM_CORE_MAPPED,
	PSIM_INVALIDATED = PEERSIM_CORE_INVALIDATED,
};

/* One entry of the simulated HCA's translation table. */
struct psim_seg {
	dma_addr_t addr;
	u64 len;
};

/**
 * struct psim_mr - a registered memory region
 * @kref: the owning fd holds one; the invalidate callback one while it runs
 * @path: PEERSIM_PATH_GUP, PEERSIM_PATH_PEER or PEERSIM_PATH_DMABUF
 * @addr: registered address (dma-buf: offset into the dma-buf)
 * @length: registered length
 * @writable: registered with PEERSIM_ACCESS_WRITE
 * @mm: the registering process's mm; pinned_vm is charged to it
 * @npages: PAGE_SIZE pages charged to @mm
 * @mtt: the DMA segments, copied at registration (the "MTT")
 * @nmtt: entries of @mtt
 * @first_off: offset of the MR's first byte in @mtt[0]
 * @dma_bytes: sum of the @mtt lengths
 * @page_size: PAGE_SIZE (GUP) or the client's page size
 * @dma_sem: the DMA fence: read by DMA, written by the fence
 * @dma_off: no DMA any more (under @dma_sem)
 * @invalidated: fenced by an invalidation (under @dma_sem)
 * @deregistered: fenced by deregistration (under @dma_sem)
 * @invalidated_at_ns: when the invalidation fenced it
 * @free_callbacks: invalidate callbacks that named this MR
 * @gup: GUP path: the pinned pages, DMA-mapped
 * @client: peer path: the client that claimed the range
 * @client_ctx: peer path: its context from acquire()
 * @client_put: release() was called and the client reference dropped
 * @xa_id: peer path: the core_context the client got
 * @mapping_lock: see the locking notes at the top
 * @state: the core's mapping state (under @mapping_lock)
 * @notifier_active: the invalidation notifier is active (under
 *	@mapping_lock): set when the MR is activated, cleared when
 *	deregistration stops it (legacy: also when an invalidation tore it down)
 * @early_invalidated: legacy: invalidated before activation
 * @sgt: peer path: the core's sg table the client fills
 * @nmap: legacy: mapped entries, as dma_map() reported
 * @first_sg: modern: first entry, trimmed for a large client page size
 * @last_sg: modern: last entry, trimmed for a large client page size
 * @first_dma_address: original values of the trimmed entries
 * @first_dma_length: ditto
 * @first_length: ditto
 * @last_dma_length: ditto
 * @last_length: ditto
 * @dbuf: dma-buf path: the dma-buf (the MR's own reference)
 * @dbuf_attach: dma-buf path: the simulated HCA's dynamic attachment
 * @dbuf_sgt: dma-buf path: the exporter's mapping while mapped (under resv)
 * @dbuf_pinned: dma-buf path: dma_buf_pin()ned at registration
 * @max_seg: longest @mtt entry (dma-buf path)
 * @exp_nents: entries of the exporter's table as it gave it (dma-buf path)
 * @exp_max_seg: longest of those, before any trimming or splitting
 */
struct psim_mr {
	struct kref kref;
	u32 path;
	unsigned long addr;
	size_t length;
	bool writable;
	struct mm_struct *mm;
	unsigned long npages;

	struct psim_seg *mtt;
	unsigned int nmtt;
	u64 first_off;
	u64 dma_bytes;
	u64 page_size;

	struct rw_semaphore dma_sem;
	bool dma_off;
	bool invalidated;
	bool deregistered;
	u64 invalidated_at_ns;
	atomic_t free_callbacks;

	struct sg_append_table gup;

	struct psim_client *client;
	void *client_ctx;
	bool client_put;
	u32 xa_id;
	struct mutex mapping_lock;
	enum psim_map_state state;
	bool notifier_active;
	bool early_invalidated;
	struct sg_table sgt;
	int nmap;
	struct scatterlist *first_sg;
	struct scatterlist *last_sg;
	dma_addr_t first_dma_address;
	unsigned int first_dma_length;
	unsigned int first_length;
	unsigned int last_dma_length;
	unsigned int last_length;

	struct dma_buf *dbuf;
	struct dma_buf_attachment *dbuf_attach;
	struct sg_table *dbuf_sgt;
	bool dbuf_pinned;
	u64 max_seg;
	unsigned int exp_nents;
	u64 exp_max_seg;
};

/* Per open file: its MRs, by handle. */
struct psim_file {
	struct xarray mrs;
};

static bool psim_legacy;
static struct device *psim_dev;
static struct platform_device *psim_pdev;
static struct kobject *psim_mm_kobj;

static DEFINE_MUTEX(psim_clients_lock);
static LIST_HEAD(psim_clients);		/* under psim_clients_lock */
static unsigned int psim_nclients;	/* not dying; under psim_clients_lock */
static struct kobject *psim_peers_kobj;	/* under psim_clients_lock */

static atomic64_t psim_live_mrs = ATOMIC64_INIT(0);
static atomic64_t psim_invalidations = ATOMIC64_INIT(0);

#define psim_client_err(mr, fmt, ...) \
	pr_err("client %s: " fmt, (mr)->client->name, ##__VA_ARGS__)

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
static bool psim_client_ex(const struct peer_memory_client *ops, u32 *flags)
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

/* The client unmaps itself after invalidating (modern cores only). */
static bool psim_unmap_on_invalidate(const struct psim_client *c)
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

static int psim_invalidate(void *reg_handle, u64 core_context);

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

/*
 * Asks the clients, in registration order, whether the range is theirs;
 * the first claim wins and holds a use of the client.
 */
static struct psim_client *psim_get_client(unsigned long addr, size_t size,
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

/* release() for the MR's claim, and drop its use of the client. */
static void psim_put_client(struct psim_mr *mr)
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

/* --- MRs -------------------------------------------------------------------- */

static struct psim_mr *psim_mr_alloc(u64 addr, u64 length, bool writable)
{
	struct psim_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL);

	if (!mr)
		return NULL;
	kref_init(&mr->kref);
	mr->addr = addr;
	mr->length = length;
	mr->writable = writable;
	mr->xa_id = PSIM_NO_INVALIDATION_ID;
	init_rwsem(&mr->dma_sem);
	mutex_init(&mr->mapping_lock);
	mr->mm = current->mm;
	mmgrab(mr->mm);
	return mr;
}

static void psim_mr_free(struct kref *kref)
{
	struct psim_mr *mr = container_of(kref, struct psim_mr, kref);

	kvfree(mr->mtt);
	if (mr->dbuf)
		dma_buf_put(mr->dbuf);
	mutex_destroy(&mr->mapping_lock);
	kfree(mr);
}

static inline void psim_mr_put(struct psim_mr *mr)
{
	kref_put(&mr->kref, psim_mr_free);
}

/*
 * The DMA fence: waits for in-flight DMA, then no DMA touches the MR's
 * memory any more. For an invalidation this is what revoking the mkey is
 * to mlx5; deregistration does it first too.
 */
static void psim_mr_fence(struct psim_mr *mr, bool invalidation)
{
	down_write(&mr->dma_sem);
	if (invalidation && !mr->invalidated) {
		mr->invalidated = true;
		mr->invalidated_at_ns = ktime_get_ns();
	}
	if (!invalidation)
		mr->deregistered = true;
	mr->dma_off = true;
	up_write(&mr->dma_sem);
}

/*
 * Copies the first n DMA segments of sgl into the MR's translation table,
 * the way an HCA driver writes its MTT; checks they cover the range.
 */
static int psim_mtt_build(struct psim_mr *mr, struct scatterlist *sgl,
			  unsigned int n, u64 first_off)
{
	struct scatterlist *sg;
	u64 total = 0;
	unsigned int i;

	if (!sgl || !n) {
		if (mr->path == PEERSIM_PATH_PEER)
			psim_client_err(mr, "dma_map() succeeded with an empty mapping\n");
		return -EINVAL;
	}
	mr->mtt = kvmalloc_array(n, sizeof(*mr->mtt), GFP_KERNEL);
	if (!mr->mtt)
		return -ENOMEM;
	for_each_sg(sgl, sg, n, i) {
		mr->mtt[i].addr = sg_dma_address(sg);
		mr->mtt[i].len = sg_dma_len(sg);
		total += sg_dma_len(sg);
	}
	if (total < first_off + mr->length) {
		if (mr->path == PEERSIM_PATH_PEER)
			psim_client_err(mr, "%u DMA segments hold %llu bytes, the range needs %llu (offset %llu + length %zu)\n",
					n, total, first_off + mr->length,
					first_off, mr->length);
		kvfree(mr->mtt);
		mr->mtt = NULL;
		return -EINVAL;
	}
	mr->nmtt = n;
	mr->first_off = first_off;
	mr->dma_bytes = total;
	return 0;
}

/* --- GUP path (ib_umem_get) ---------------------------------------------- */

static void psim_gup_unpin(struct psim_mr *mr, bool dirty)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_sg(&mr->gup.sgt, sg, i)
		unpin_user_page_range_dirty_lock(sg_page(sg),
						 DIV_ROUND_UP(sg->length, PAGE_SIZE),
						 dirty && mr->writable);
	sg_free_append_table(&mr->gup);
}

static int psim_gup_get(struct psim_mr *mr)
{
	unsigned int gup_flags = FOLL_LONGTERM;
	unsigned long npages = mr->npages;
	unsigned long cur = mr->addr & PAGE_MASK;
	struct page **pages;
	long pinned;
	int ret = 0;

	pages = (struct page **)__get_free_page(GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	if (mr->writable)
		gup_flags |= FOLL_WRITE;

	while (npages) {
		cond_resched();
		pinned = pin_user_pages_fast(cur,
					     min_t(unsigned long, npages,
						   PAGE_SIZE / sizeof(struct page *)),
					     gup_flags, pages);
		if (pinned <= 0) {
			ret = pinned ? pinned : -EFAULT;
			goto out_release;
		}
		cur += pinned * PAGE_SIZE;
		npages -= pinned;
		ret = sg_alloc_append_table_from_pages(&mr->gup, pages, pinned,
						       0, pinned << PAGE_SHIFT,
						       dma_get_max_seg_size(psim_dev),
						       npages, GFP_KERNEL);
		if (ret) {
			unpin_user_pages(pages, pinned);
			goto out_release;
		}
	}

	ret = dma_map_sgtable(psim_dev, &mr->gup.sgt, DMA_BIDIRECTIONAL, 0);
	if (ret)
		goto out_release;
	ret = psim_mtt_build(mr, mr->gup.sgt.sgl, mr->gup.sgt.nents,
			     mr->addr & ~PAGE_MASK);
	if (ret)
		goto out_unmap;
	mr->path = PEERSIM_PATH_GUP;
	mr->page_size = PAGE_SIZE;
	free_page((unsigned long)pages);
	return 0;

out_unmap:
	dma_unmap_sgtable(psim_dev, &mr->gup.sgt, DMA_BIDIRECTIONAL, 0);
out_release:
	psim_gup_unpin(mr, false);
	memset(&mr->gup, 0, sizeof(mr->gup));
	free_page((unsigned long)pages);
	return ret;
}

static void psim_gup_release(struct psim_mr *mr)
{
	dma_unmap_sgtable(psim_dev, &mr->gup.sgt, DMA_BIDIRECTIONAL, 0);
	psim_gup_unpin(mr, true);
}

/* --- peer path: modern core (ib_peer_umem_get) ------------------------- */

/*
 * For a client page size above PAGE_SIZE, trims the first and last DMA
 * segment to the PAGE_SIZE-aligned range, saving what it changes.
 */
static int psim_fix_peer_sgls(struct psim_mr *mr, unsigned long psz)
{
	unsigned long end = mr->addr + mr->length;
	unsigned long head = ALIGN_DOWN(mr->addr, PAGE_SIZE) -
			     ALIGN_DOWN(mr->addr, psz);
	unsigned long tail = ALIGN(end, psz) - ALIGN(end, PAGE_SIZE);
	struct scatterlist *sg, *last = NULL;
	unsigned int i;

	if (!mr->sgt.sgl || !mr->sgt.nents) {
		psim_client_err(mr, "dma_map() succeeded with an empty mapping\n");
		return -EINVAL;
	}
	for_each_sg(mr->sgt.sgl, sg, mr->sgt.nents, i)
		last = sg;
	if (sg_dma_len(mr->sgt.sgl) <= head ||
	    sg_dma_len(last) <= tail + (last == mr->sgt.sgl ? head : 0)) {
		psim_client_err(mr, "first/last DMA segment (%u/%u bytes) too short for page size %lu at %#lx+%zu\n",
				sg_dma_len(mr->sgt.sgl), sg_dma_len(last), psz,
				mr->addr, mr->length);
		return -EINVAL;
	}

	sg = mr->sgt.sgl;
	mr->first_sg = sg;
	mr->first_dma_address = sg_dma_address(sg);
	mr->first_dma_length = sg_dma_len(sg);
	mr->first_length = sg->length;
	sg_dma_address(sg) += head;
	sg_dma_len(sg) -= head;
	sg->length -= head;

	mr->last_sg = last;
	mr->last_dma_length = sg_dma_len(last);
	mr->last_length = last->length;
	sg_dma_len(last) -= tail;
	last->length -= tail;
	return 0;
}

/* Gives the client its sg entries back as it built them. */
static void psim_unfix_peer_sgls(struct psim_mr *mr)
{
	if (mr->last_sg) {
		sg_dma_len(mr->last_sg) = mr->last_dma_length;
		mr->last_sg->length = mr->last_length;
		mr->last_sg = NULL;
	}
	if (mr->first_sg) {
		sg_dma_address(mr->first_sg) = mr->first_dma_address;
		sg_dma_len(mr->first_sg) = mr->first_dma_length;
		mr->first_sg->length = mr->first_length;
		mr->first_sg = NULL;
	}
}

static int psim_check_page_size(struct psim_mr *mr, unsigned long psz)
{
	if (psz < PAGE_SIZE || !is_power_of_2(psz)) {
		psim_client_err(mr, "get_page_size() returned %lu\n", psz);
		return -EINVAL;
	}
	return 0;
}

/* The killable pause of reg_delay_ms, for tests that kill mid-registration. */
static int psim_reg_delay(void)
{
	long timeout = msecs_to_jiffies(READ_ONCE(reg_delay_ms));

	while (timeout > 0) {
		timeout = schedule_timeout_killable(timeout);
		if (fatal_signal_pending(current))
			return -EINTR;
	}
	return 0;
}

/*
 * The mtt_hold window of a legacy registration. Bounded: a test that dies
 * holding it costs a registration 60 s, never a hang.
 */
static int psim_mtt_window(void)
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

/*
 * Moves a modern peer MR from state cur to state to, calling the client
 * where the real core does. Context: the caller holds mapping_lock, except
 * for the deregistration of an INVALIDATE_UNMAPS client, which first
 * parks the state at UNMAPPED under the lock (so the invalidate callback
 * does nothing) and then calls this without it, as the real core does.
 */
static void psim_peer_unmap(struct psim_mr *mr, enum psim_map_state cur,
			    enum psim_map_state to)
{
	struct psim_client *c = mr->client;

	if (cur == PSIM_MAPPED &&
	    (to == PSIM_UNMAPPED || to == PSIM_INVALIDATED)) {
		/* The core never looks at the sg table again; the client may. */
		psim_unfix_peer_sgls(mr);
		if (to == PSIM_UNMAPPED) {
			c->ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
			c->ops->put_pages(&mr->sgt, mr->client_ctx);
		}
		memset(&mr->sgt, 0, sizeof(mr->sgt));
		atomic64_inc(&c->num_dealloc_mrs);
	}
	if ((cur == PSIM_MAPPED || cur == PSIM_INVALIDATED) &&
	    to == PSIM_UNMAPPED) {
		atomic64_add(mr->nmtt, &c->num_dereg_pages);
		atomic64_add(mr->length, &c->num_dereg_bytes);
	}
	mr->state = to;
}

static int psim_peer_get_modern(struct psim_mr *mr)
{
	const struct peer_memory_client *ops = mr->client->ops;
	struct psim_client *c = mr->client;
	unsigned long psz;
	int ret = 0;

	/*
	 * Held until the MR is activated: an invalidation that comes in
	 * meanwhile waits, and then finds the MR mapped (or, after a
	 * failure, unmapped).
	 */
	mutex_lock(&mr->mapping_lock);
	if (c->invalidation_required) {
		ret = xa_alloc_cyclic(&c->mrs, &mr->xa_id, mr,
				      XA_LIMIT(0, PSIM_NO_INVALIDATION_ID - 1),
				      &c->next_id, GFP_KERNEL);
		if (ret < 0)
			goto out_unlock;
	}

	/*
	 * Write is always asked for, to break CoW at registration; a
	 * read-only MR says with force that read-only pages are fine.
	 */
	ret = ops->get_pages(mr->addr, mr->length, 1, !mr->writable, NULL,
			     mr->client_ctx, mr->xa_id);
	if (ret)
		goto out_xa;
	ret = psim_reg_delay();
	if (ret)
		goto out_put_pages;
	/* dma_map() reports the mapped entries straight into sgt.nents */
	ret = ops->dma_map(&mr->sgt, mr->client_ctx, psim_dev, 0,
			   (int *)&mr->sgt.nents);
	if (ret)
		goto out_put_pages;

	psz = ops->get_page_size(mr->client_ctx);
	ret = psim_check_page_size(mr, psz);
	if (ret)
		goto out_unmap;
	mr->page_size = psz;
	if (psz != PAGE_SIZE) {
		ret = psim_fix_peer_sgls(mr, psz);
		if (ret)
			goto out_unmap;
	}
	ret = psim_mtt_build(mr, mr->sgt.sgl, mr->sgt.nents,
			     mr->addr & ~PAGE_MASK);
	if (ret)
		goto out_unfix;

	mr->state = PSIM_MAPPED;
	atomic64_add(mr->nmtt, &c->num_reg_pages);
	atomic64_add(mr->length, &c->num_reg_bytes);
	atomic64_inc(&c->num_alloc_mrs);
	/*
	 * Activation (ib_umem_activate_invalidation_notifier(), once the
	 * mkey exists): from here on the invalidate callback may fence and
	 * unmap the MR.
	 */
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		mr->notifier_active = true;
	mutex_unlock(&mr->mapping_lock);
	return 0;

out_unfix:
	psim_unfix_peer_sgls(mr);
out_unmap:
	ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
out_put_pages:
	ops->put_pages(&mr->sgt, mr->client_ctx);
out_xa:
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		xa_erase(&c->mrs, mr->xa_id);
out_unlock:
	memset(&mr->sgt, 0, sizeof(mr->sgt));
	mutex_unlock(&mr->mapping_lock);
	return ret;
}

/* ib_umem_stop_invalidation_notifier() + ib_peer_umem_release() */
static void psim_peer_dereg_modern(struct psim_mr *mr)
{
	struct psim_client *c = mr->client;
	enum psim_map_state cur;

	if (mr->xa_id != PSIM_NO_INVALIDATION_ID) {
		bool self_unmaps = psim_unmap_on_invalidate(c);

		mutex_lock(&mr->mapping_lock);
		mr->notifier_active = false;
		if (!self_unmaps) {
			psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
			mutex_unlock(&mr->mapping_lock);
		} else {
			/* Parks the invalidate callback, unmaps outside the lock. */
			cur = mr->state;
			mr->state = PSIM_UNMAPPED;
			mutex_unlock(&mr->mapping_lock);
			psim_peer_unmap(mr, cur, PSIM_UNMAPPED);
		}
		mutex_lock(&mr->mapping_lock);
		psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
		mutex_unlock(&mr->mapping_lock);
		xa_erase(&c->mrs, mr->xa_id);
	} else {
		/* No invalidation: nobody else looks at the state. */
		psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
	}
	psim_put_client(mr);
}

/* The invalidate callback's work for a modern core (mlx5 + ib_core). */
static void psim_invalidate_modern(struct psim_mr *mr)
{
	mutex_lock(&mr->mapping_lock);
	/* mlx5's invalidation function: revoke the mkey, wait for DMA */
	if (mr->state == PSIM_MAPPED && mr->notifier_active)
		psim_mr_fence(mr, true);
	if (psim_unmap_on_invalidate(mr->client))
		psim_peer_unmap(mr, mr->state, PSIM_INVALIDATED);
	else
		psim_peer_unmap(mr, mr->state, PSIM_UNMAPPED);
	mutex_unlock(&mr->mapping_lock);
}

/* --- peer path: legacy core ----------------------------------------------- */

/* dma_unmap() + put_pages() of a legacy MR. Context: owns the teardown. */
static void psim_legacy_unmap(struct psim_mr *mr)
{
	struct psim_client *c = mr->client;

	c->ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
	c->ops->put_pages(&mr->sgt, mr->client_ctx);
	atomic64_add(mr->nmap, &c->num_dereg_pages);
	atomic64_add((u64)mr->nmap * mr->page_size, &c->num_dereg_bytes);
	atomic64_inc(&c->num_dealloc_mrs);
	mr->state = PSIM_UNMAPPED;
}

static int psim_peer_get_legacy(struct psim_mr *mr)
{
	const struct peer_memory_client *ops = mr->client->ops;
	struct psim_client *c = mr->client;
	u64 core_context = 0;
	unsigned long psz;
	int ret;

	if (c->invalidation_required) {
		ret = xa_alloc_cyclic(&c->mrs, &mr->xa_id, mr,
				      XA_LIMIT(0, PSIM_NO_INVALIDATION_ID - 1),
				      &c->next_id, GFP_KERNEL);
		if (ret < 0)
			return ret;
		core_context = mr->xa_id;
	}

	/* No lock is held across the client's calls (deadlock avoidance). */
	ret = ops->get_pages(mr->addr, mr->length, mr->writable, 1, &mr->sgt,
			     mr->client_ctx, core_context);
	if (ret)
		goto out_xa;
	psz = ops->get_page_size(mr->client_ctx);
	ret = psim_check_page_size(mr, psz);
	if (ret)
		goto out_put_pages;
	mr->page_size = psz;
	ret = psim_reg_delay();
	if (ret)
		goto out_put_pages;
	ret = ops->dma_map(&mr->sgt, mr->client_ctx, psim_dev, 0, &mr->nmap);
	if (ret)
		goto out_put_pages;
	if (mr->nmap <= 0) {
		psim_client_err(mr, "dma_map() succeeded with %d entries\n",
				mr->nmap);
		ret = -EINVAL;
		goto out_unmap;
	}
	/* The client may be invalidated in here; the sg list must still be its. */
	ret = psim_mtt_window();
	if (ret)
		goto out_unmap;
	ret = psim_mtt_build(mr, mr->sgt.sgl, mr->nmap,
			     mr->addr & (psz - 1));
	if (ret)
		goto out_unmap;

	/* Activation: fails if the client invalidated the MR meanwhile. */
	mutex_lock(&mr->mapping_lock);
	if (mr->early_invalidated) {
		mutex_unlock(&mr->mapping_lock);
		pr_info("client %s invalidated a registration before its activation\n",
			c->name);
		ret = -EINVAL;
		goto out_unmap;
	}
	mr->state = PSIM_MAPPED;
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		mr->notifier_active = true;
	mutex_unlock(&mr->mapping_lock);
	atomic64_add(mr->nmap, &c->num_reg_pages);
	atomic64_add((u64)mr->nmap * psz, &c->num_reg_bytes);
	atomic64_inc(&c->num_alloc_mrs);
	return 0;

out_unmap:
	ops->dma_unmap(&mr->sgt, mr->client_ctx, psim_dev);
out_put_pages:
	ops->put_pages(&mr->sgt, mr->client_ctx);
out_xa:
	if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
		xa_erase(&c->mrs, mr->xa_id);
	return ret;
}

static void psim_peer_dereg_legacy(struct psim_mr *mr)
{
	bool release = false;

	mutex_lock(&mr->mapping_lock);
	if (mr->state == PSIM_MAPPED) {
		/* destroy the invalidation context first, then unmap */
		mr->notifier_active = false;
		if (mr->xa_id != PSIM_NO_INVALIDATION_ID)
			xa_erase(&mr->client->mrs, mr->xa_id);
		psim_legacy_unmap(mr);
		release = true;
	}
	mutex_unlock(&mr->mapping_lock);
	/* else an invalidation already tore it all down, release() included */
	if (release)
		psim_put_client(mr);
}

/*
 * The invalidate callback's work for a legacy core: the driver's
 * invalidation function deregisters the MR's memory right away, release()
 * included, all under the core's lock.
 */
static void psim_invalidate_legacy(struct psim_mr *mr)
{
	mutex_lock(&mr->mapping_lock);
	if (!mr->notifier_active) {
		/* not activated yet: the registration will fail */
		mr->early_invalidated = true;
		mutex_unlock(&mr->mapping_lock);
		return;
	}
	psim_mr_fence(mr, true);
	mr->notifier_active = false;
	xa_erase(&mr->client->mrs, mr->xa_id);
	psim_legacy_unmap(mr);
	psim_put_client(mr);
	mutex_unlock(&mr->mapping_lock);
}

/* --- the invalidate callback --------------------------------------------- */

/*
 * Handed to clients that ask for it. Looks the registration up by
 * core_context (unknown: nothing to do), fences its DMA, and unmaps as the
 * semantics in force say. Returns 0.
 *
 * Context: process context, may sleep: it takes the MR's mapping lock,
 * which a modern core holds across get_pages()/dma_map() of that MR, and
 * waits for in-flight DMA. Must not be called from within the client's
 * own get_pages()/dma_map() for the same MR, nor with a lock held that
 * those (or, for legacy cores, dma_unmap/put_pages/release) take.
 */
static int psim_invalidate(void *reg_handle, u64 core_context)
{
	struct psim_client *c = reg_handle;
	struct psim_mr *mr = NULL;

	might_sleep();
	atomic64_inc(&psim_invalidations);

	/*
	 * The client need not fence invalidation against put_pages(), so
	 * core_context is an id looked up here, not a pointer.
	 */
	xa_lock(&c->mrs);
	atomic64_inc(&c->num_free_callbacks);
	if (core_context < PSIM_NO_INVALIDATION_ID)
		mr = xa_load(&c->mrs, core_context);
	if (mr)
		kref_get(&mr->kref);
	xa_unlock(&c->mrs);
	if (!mr)
		return 0;

	atomic_inc(&mr->free_callbacks);
	if (psim_legacy)
		psim_invalidate_legacy(mr);
	else
		psim_invalidate_modern(mr);
	psim_mr_put(mr);
	return 0;
}

/* --- dma-buf path (ib_umem_dmabuf) ----------------------------------------- */

/*
 * Walks the exporter's DMA segments, keeping the part inside the MR's
 * PAGE_SIZE-aligned range [start, end) as ib_umem_dmabuf_map_pages() trims
 * its first and last entry, and splitting what is kept at the device's
 * max_seg_size as the HCA writes its translation table. Counts the entries
 * (fills out when given) and the bytes that lie in the range.
 */
static unsigned int psim_dmabuf_walk(struct psim_mr *mr, struct sg_table *sgt,
				     struct psim_seg *out, u64 *covered)
{
	u64 start = ALIGN_DOWN(mr->addr, PAGE_SIZE);
	u64 end = ALIGN(mr->addr + mr->length, PAGE_SIZE);
	u64 max = dma_get_max_seg_size(psim_dev);
	struct scatterlist *sg;
	unsigned int n = 0;
	u64 cur = 0;
	int i;

	*covered = 0;
	for_each_sgtable_dma_sg(sgt, sg, i) {
		u64 len = sg_dma_len(sg);
		u64 s = max(cur, start), e = min(cur + len, end);

		if (s < e) {
			dma_addr_t addr = sg_dma_address(sg) + (s - cur);

			*covered += e - s;
			while (s < e) {
				u64 k = min(e - s, max);

				if (out) {
					out[n].addr = addr;
					out[n].len = k;
				}
				n++;
				addr += k;
				s += k;
			}
		}
		cur += len;
		if (cur >= end)
			break;
	}
	return n;
}

/* Gives the exporter its mapping back. Context: resv held, DMA fenced. */
static void psim_dmabuf_unmap(struct psim_mr *mr)
{
	dma_resv_assert_held(mr->dbuf->resv);
	lockdep_assert_held_write(&mr->dma_sem);

	if (!mr->dbuf_sgt)
		return;
	kvfree(mr->mtt);
	mr->mtt = NULL;
	mr->nmtt = 0;
	mr->dma_bytes = 0;
	mr->max_seg = 0;
	dma_buf_unmap_attachment(mr->dbuf_attach, mr->dbuf_sgt,
				 DMA_BIDIRECTIONAL);
	mr->dbuf_sgt = NULL;
}

/*
 * ib_umem_dmabuf_map_pages(): maps the attachment unless it is mapped,
 * builds the MTT from the exporter's table, waits for the kernel fences
 * (the exporter's moves), and only then lets DMA in.
 * Context: resv held; takes dma_sem.
 */
static int psim_dmabuf_map(struct psim_mr *mr)
{
	struct dma_resv *resv = mr->dbuf->resv;
	struct psim_seg *mtt = NULL;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned int n, i;
	u64 covered, need;
	long lret;

	dma_resv_assert_held(resv);

	if (!mr->dbuf_sgt) {
		sgt = dma_buf_map_attachment(mr->dbuf_attach, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt))
			return PTR_ERR(sgt);
		need = ALIGN(mr->addr + mr->length, PAGE_SIZE) -
		       ALIGN_DOWN(mr->addr, PAGE_SIZE);
		n = psim_dmabuf_walk(mr, sgt, NULL, &covered);
		if (!n || covered < need) {
			pr_err("dma-buf exporter %s: DMA mapping covers %llu of the %llu bytes at offset %#lx (buffer %zu bytes)\n",
			       mr->dbuf->exp_name, covered, need,
			       ALIGN_DOWN(mr->addr, PAGE_SIZE), mr->dbuf->size);
			dma_buf_unmap_attachment(mr->dbuf_attach, sgt,
						 DMA_BIDIRECTIONAL);
			return -EINVAL;
		}
		mtt = kvmalloc_array(n, sizeof(*mtt), GFP_KERNEL);
		if (!mtt) {
			dma_buf_unmap_attachment(mr->dbuf_attach, sgt,
						 DMA_BIDIRECTIONAL);
			return -ENOMEM;
		}
		psim_dmabuf_walk(mr, sgt, mtt, &covered);

		down_write(&mr->dma_sem);
		mr->dbuf_sgt = sgt;
		mr->exp_nents = sgt->nents;
		mr->exp_max_seg = 0;
		for_each_sgtable_dma_sg(sgt, sg, i)
			mr->exp_max_seg = max_t(u64, mr->exp_max_seg,
						sg_dma_len(sg));
		mr->mtt = mtt;
		mr->nmtt = n;
		mr->first_off = mr->addr & ~PAGE_MASK;
		mr->dma_bytes = covered;
		mr->max_seg = 0;
		for (i = 0; i < n; i++)
			mr->max_seg = max(mr->max_seg, mtt[i].len);
		up_write(&mr->dma_sem);
	}

	/*
	 * The table is valid now, the contents may not be yet: wait for the
	 * exporter's move (kernel fences) to finish.
	 */
	lret = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, false,
				     MAX_SCHEDULE_TIMEOUT);
	if (lret <= 0) {
		down_write(&mr->dma_sem);
		mr->dma_off = true;
		psim_dmabuf_unmap(mr);
		up_write(&mr->dma_sem);
		return lret ? (int)lret : -ETIMEDOUT;
	}

	down_write(&mr->dma_sem);
	if (!mr->deregistered)
		mr->dma_off = false;
	up_write(&mr->dma_sem);
	return 0;
}

/*
 * The "page fault" of a dma-buf MR the exporter moved: maps it again under
 * the reservation lock, as mlx5's ODP fault handler does for dma-buf MRs.
 * Nothing to do when it is mapped (or pinned, which never moves).
 */
static int psim_dmabuf_fault(struct psim_mr *mr)
{
	struct dma_resv *resv = mr->dbuf->resv;
	int ret;

	if (READ_ONCE(mr->dbuf_sgt) || mr->dbuf_pinned)
		return 0;
	ret = dma_resv_lock_interruptible(resv, NULL);
	if (ret)
		return ret;
	/*
	 * Deregistration fences before it takes resv to unmap and detach:
	 * seen here, the attachment may be gone.
	 */
	down_read(&mr->dma_sem);
	ret = mr->deregistered ? -ENOENT : 0;
	up_read(&mr->dma_sem);
	if (!ret)
		ret = psim_dmabuf_map(mr);
	dma_resv_unlock(resv);
	return ret;
}

/*
 * move_notify (7.x: invalidate_mappings): the exporter is about to move the
 * buffer. Fences the MR's DMA (waits for in-flight transfers, as mlx5
 * zaps the MTT and waits), gives the mapping back, and leaves the MR to be
 * mapped again at its next use. Context: the exporter holds resv.
 */
static void psim_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	struct psim_mr *mr = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);

	atomic_inc(&mr->free_callbacks);
	down_write(&mr->dma_sem);
	mr->dma_off = true;
	mr->invalidated_at_ns = ktime_get_ns();
	psim_dmabuf_unmap(mr);
	up_write(&mr->dma_sem);
}

static const struct dma_buf_attach_ops psim_dmabuf_attach_ops = {
	.allow_peer2peer = true,
	.PSIM_DMA_BUF_MOVE_NOTIFY = psim_dmabuf_move_notify,
};

/* A pinned attachment must never be moved (ib_core only warns). */
static void psim_dmabuf_pinned_move_notify(struct dma_buf_attachment *attach)
{
	struct psim_mr *mr = attach->importer_priv;

	atomic_inc(&mr->free_callbacks);
	dev_warn_ratelimited(psim_dev,
			     "move_notify for a pinned dma-buf MR (exporter %s)\n",
			     attach->dmabuf->exp_name);
}

static const struct dma_buf_attach_ops psim_dmabuf_pinned_attach_ops = {
	.allow_peer2peer = true,
	.PSIM_DMA_BUF_MOVE_NOTIFY = psim_dmabuf_pinned_move_notify,
};

/*
 * ib_umem_dmabuf_get() (+ _pinned()) and the first mapping mlx5 makes at
 * registration. Reports the mapping's entries and longest entry.
 */
static int psim_dmabuf_get(struct psim_mr *mr, int fd, bool pinned,
			   struct peersim_reg_dmabuf_mr *r)
{
	struct dma_buf_attachment *attach;
	struct dma_buf *dbuf;
	u64 end;
	int ret;

	if (!mr->length || check_add_overflow((u64)mr->addr, (u64)mr->length, &end))
		return -EINVAL;
	dbuf = dma_buf_get(fd);
	if (IS_ERR(dbuf)) {
		ret = PTR_ERR(dbuf);
		/* dma_buf_get() says EINVAL for a file that is no dma-buf */
		return ret == -EINVAL ? -EBADF : ret;
	}
	if (end > dbuf->size) {
		ret = -EINVAL;
		goto out_put;
	}
	mr->dbuf = dbuf;
	mr->path = PEERSIM_PATH_DMABUF;
	mr->page_size = PAGE_SIZE;
	mr->dbuf_pinned = pinned;
	mr->dma_off = true;	/* until mapped */

	attach = dma_buf_dynamic_attach(dbuf, psim_dev,
					pinned ? &psim_dmabuf_pinned_attach_ops :
						 &psim_dmabuf_attach_ops, mr);
	if (IS_ERR(attach)) {
		ret = PTR_ERR(attach);
		goto out_put;
	}
	mr->dbuf_attach = attach;

	dma_resv_lock(dbuf->resv, NULL);
	if (pinned) {
		ret = dma_buf_pin(attach);
		if (ret)
			goto out_unlock;
	}
	ret = psim_dmabuf_map(mr);
	if (ret)
		goto out_unpin;
	/* the MTT is stable while resv is held */
	r->nents = mr->nmtt;
	r->max_seg = mr->max_seg;
	r->exp_nents = mr->exp_nents;
	r->exp_max_seg = mr->exp_max_seg;
	dma_resv_unlock(dbuf->resv);
	return 0;

out_unpin:
	if (pinned)
		dma_buf_unpin(attach);
out_unlock:
	dma_resv_unlock(dbuf->resv);
	dma_buf_detach(dbuf, attach);
	mr->dbuf_attach = NULL;
out_put:
	mr->dbuf = NULL;
	dma_buf_put(dbuf);
	return ret;
}

/*
 * ib_umem_dmabuf_release(), except that the dma-buf reference goes with
 * the MR's last reference (psim_mr_free()): an ioctl still holding the MR
 * may look at its reservation lock. Context: the MR is fenced
 * (deregistered).
 */
static void psim_dmabuf_release(struct psim_mr *mr)
{
	struct dma_buf *dbuf = mr->dbuf;

	dma_resv_lock(dbuf->resv, NULL);
	down_write(&mr->dma_sem);
	psim_dmabuf_unmap(mr);
	up_write(&mr->dma_sem);
	if (mr->dbuf_pinned)
		dma_buf_unpin(mr->dbuf_attach);
	dma_resv_unlock(dbuf->resv);

	dma_buf_detach(dbuf, mr->dbuf_attach);
	mr->dbuf_attach = NULL;
}

/* --- registration / deregistration (ib_umem_get / ib_umem_release) ------- */

static int psim_peer_get(struct psim_mr *mr, int gup_ret)
{
	int ret;

	mr->client = psim_get_client(mr->addr, mr->length, &mr->client_ctx);
	if (!mr->client)
		return gup_ret;
	mr->path = PEERSIM_PATH_PEER;
	if (psim_legacy)
		ret = psim_peer_get_legacy(mr);
	else
		ret = psim_peer_get_modern(mr);
	if (ret)
		psim_put_client(mr);
	return ret;
}

/* Pins and maps [addr, addr + length): GUP first, then the peer clients. */
static int psim_umem_get(struct psim_mr *mr)
{
	unsigned long end = mr->addr + mr->length;
	unsigned long lock_limit;
	s64 new_pinned;
	int ret;

	if (!mr->length || end < mr->addr || PAGE_ALIGN(end) < end)
		return -EINVAL;
	if (!can_do_mlock())
		return -EPERM;
	mr->npages = (PAGE_ALIGN(end) - ALIGN_DOWN(mr->addr, PAGE_SIZE)) >>
		     PAGE_SHIFT;
	if (mr->npages > UINT_MAX)
		return -EINVAL;

	lock_limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	new_pinned = atomic64_add_return(mr->npages, &mr->mm->pinned_vm);
	if (new_pinned > lock_limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(mr->npages, &mr->mm->pinned_vm);
		return -ENOMEM;
	}

	ret = psim_gup_get(mr);
	/* When pinning fails the range may belong to a peer client. */
	if (ret)
		ret = psim_peer_get(mr, ret);
	if (ret)
		atomic64_sub(mr->npages, &mr->mm->pinned_vm);
	return ret;
}

/*
 * Deregisters an MR its fd no longer holds: DMA off first (as mlx5 revokes
 * the mkey), then the unmapping the path needs, then the reference.
 */
static void psim_mr_dereg(struct psim_mr *mr)
{
	psim_mr_fence(mr, false);
	if (mr->path == PEERSIM_PATH_GUP)
		psim_gup_release(mr);
	else if (mr->path == PEERSIM_PATH_DMABUF)
		psim_dmabuf_release(mr);
	else if (psim_legacy)
		psim_peer_dereg_legacy(mr);
	else
		psim_peer_dereg_modern(mr);
	atomic64_sub(mr->npages, &mr->mm->pinned_vm);
	mmdrop(mr->mm);
	mr->mm = NULL;
	atomic64_dec(&psim_live_mrs);
	psim_mr_put(mr);
}

/* --- "DMA" ------------------------------------------------------------------- */

/* Copies between buf and the RAM at phys, page by page. */
static int psim_copy_phys(phys_addr_t phys, void *buf, size_t n, bool to_mem)
{
	while (n) {
		unsigned long pfn = PHYS_PFN(phys);
		size_t off = offset_in_page(phys);
		size_t k = min_t(size_t, n, PAGE_SIZE - off);
		struct page *page;
		void *va;

		if (!pfn_valid(pfn)) {
			pr_warn_ratelimited("DMA to %pa: not RAM\n", &phys);
			return -EIO;
		}
		page = pfn_to_page(pfn);
		va = kmap_local_page(page);
		if (to_mem) {
			memcpy(va + off, buf, k);
			flush_dcache_page(page);
		} else {
			memcpy(buf, va + off, k);
		}
		kunmap_local(va);
		phys += k;
		buf += k;
		n -= k;
	}
	return 0;
}

/*
 * Transfers n bytes at the MR position (*si, *soff), advancing it.
 * Context: the caller holds dma_sem for reading and found DMA allowed.
 */
static int psim_dma_chunk(struct psim_mr *mr, unsigned int *si, u64 *soff,
			  void *buf, size_t n, bool to_mem)
{
	lockdep_assert_held_read(&mr->dma_sem);

	while (n) {
		struct psim_seg *seg;
		size_t k;
		int ret;

		if (*si >= mr->nmtt)
			return -EIO;
		seg = &mr->mtt[*si];
		if (*soff >= seg->len) {
			(*si)++;
			*soff = 0;
			continue;
		}
		k = min_t(u64, n, seg->len - *soff);
		ret = psim_copy_phys(dma_to_phys(psim_dev, seg->addr + *soff),
				     buf, k, to_mem);
		if (ret)
			return ret;
		*soff += k;
		buf += k;
		n -= k;
	}
	return 0;
}

/* Looks up an MR of this fd, with a reference. */
static struct psim_mr *psim_file_get_mr(struct psim_file *f, u32 handle)
{
	struct psim_mr *mr;

	xa_lock(&f->mrs);
	mr = xa_load(&f->mrs, handle);
	if (mr)
		kref_get(&mr->kref);
	xa_unlock(&f->mrs);
	return mr;
}

/*
 * PEERSIM_DMA_VMAP: the CPU copies through the exporter's kernel mapping of
 * the whole dma-buf (dma_buf_vmap()), no DMA involved. The MR's own
 * reference keeps the dma-buf; no psim lock is held.
 */
static int psim_dma_vmap(struct psim_mr *mr, const struct peersim_dma *d,
			 bool to_mem)
{
	void __user *ubuf = u64_to_user_ptr(d->buf);
	struct iosys_map map;
	void *p;
	int ret;

	ret = psim_dma_buf_vmap(mr->dbuf, &map);
	if (ret)
		return ret;
	if (map.is_iomem) {
		psim_dma_buf_vunmap(mr->dbuf, &map);
		return -EOPNOTSUPP;
	}
	p = map.vaddr + mr->addr + d->offset;
	if (to_mem)
		ret = copy_from_user(p, ubuf, d->length) ? -EFAULT : 0;
	else
		ret = copy_to_user(ubuf, p, d->length) ? -EFAULT : 0;
	psim_dma_buf_vunmap(mr->dbuf, &map);
	return ret;
}

static int psim_dma(struct psim_file *f, const struct peersim_dma *d,
		    bool to_mem)
{
	void __user *ubuf = u64_to_user_ptr(d->buf);
	unsigned int si;
	struct psim_mr *mr;
	u64 done = 0, soff;
	void *bounce;
	int ret = 0;

	if (d->flags & ~PEERSIM_DMA_FLAGS)
		return -EINVAL;
	mr = psim_file_get_mr(f, d->handle);
	if (!mr)
		return -ENOENT;
	if (d->offset > mr->length || d->length > mr->length - d->offset) {
		ret = -EINVAL;
		goto out_put;
	}
	if (to_mem && !mr->writable) {
		ret = -EACCES;
		goto out_put;
	}
	if (d->flags & PEERSIM_DMA_VMAP) {
		ret = mr->path == PEERSIM_PATH_DMABUF && !READ_ONCE(mr->deregistered) ?
		      psim_dma_vmap(mr, d, to_mem) : -EINVAL;
		goto out_put;
	}
	bounce = kvmalloc(min_t(u64, max_t(u64, d->length, 1), PSIM_DMA_CHUNK),
			  GFP_KERNEL);
	if (!bounce) {
		ret = -ENOMEM;
		goto out_put;
	}

	do {
		size_t n = min_t(u64, d->length - done, PSIM_DMA_CHUNK);

		if (to_mem && copy_from_user(bounce, ubuf + done, n)) {
			ret = -EFAULT;
			break;
		}
		if (mr->path == PEERSIM_PATH_DMABUF) {
			ret = psim_dmabuf_fault(mr);
			if (ret)
				break;
		}
		/* No fault may happen under dma_sem: see the locking notes. */
		ret = down_read_killable(&mr->dma_sem);
		if (ret)
			break;
		if (mr->dma_off && !mr->deregistered && !mr->invalidated) {
			/* a dma-buf MR moved since the fault: map it again */
			up_read(&mr->dma_sem);
			if (fatal_signal_pending(current)) {
				ret = -EINTR;
				break;
			}
			continue;
		}
		if (mr->dma_off) {
			ret = mr->deregistered ? -ENOENT : -ENOLINK;
		} else if (n) {
			/* find the chunk's first byte (the MTT may be new) */
			si = 0;
			soff = mr->first_off + d->offset + done;
			while (si < mr->nmtt && soff >= mr->mtt[si].len)
				soff -= mr->mtt[si++].len;
			ret = psim_dma_chunk(mr, &si, &soff, bounce, n, to_mem);
		}
		up_read(&mr->dma_sem);
		if (ret)
			break;
		if (!to_mem && copy_to_user(ubuf + done, bounce, n)) {
			ret = -EFAULT;
			break;
		}
		done += n;
		cond_resched();
	} while (done < d->length);

	kvfree(bounce);
out_put:
	psim_mr_put(mr);
	return ret;
}

/* --- ioctls ------------------------------------------------------------------ */

static int psim_ioc_info(struct psim_file *f, void *data)
{
	struct peersim_info *info = data;

	info->abi_version = PEERSIM_ABI_VERSION;
	info->semantics = psim_legacy ? PEERSIM_SEM_LEGACY : PEERSIM_SEM_MODERN;
	info->live_mrs = atomic64_read(&psim_live_mrs);
	info->max_seg_size = dma_get_max_seg_size(psim_dev);
	info->page_size = PAGE_SIZE;
	mutex_lock(&psim_clients_lock);
	info->nclients = psim_nclients;
	mutex_unlock(&psim_clients_lock);
	info->reg_delay_ms = READ_ONCE(reg_delay_ms);
	info->invalidations = atomic64_read(&psim_invalidations);
	info->mtt_held = atomic_read(&psim_mtt_held);
	info->reserved = 0;
	return 0;
}

static int psim_ioc_reg_mr(struct psim_file *f, void *data)
{
	struct peersim_reg_mr *r = data;
	struct psim_mr *mr;
	u32 handle;
	int ret;

	if ((r->access & ~PEERSIM_ACCESS_ALL) || r->reserved)
		return -EINVAL;
	mr = psim_mr_alloc(r->addr, r->length, r->access & PEERSIM_ACCESS_WRITE);
	if (!mr)
		return -ENOMEM;
	ret = psim_umem_get(mr);
	if (ret)
		goto out_free;

	atomic64_inc(&psim_live_mrs);
	ret = xa_alloc(&f->mrs, &handle, mr, XA_LIMIT(1, INT_MAX), GFP_KERNEL);
	if (ret) {
		psim_mr_dereg(mr);
		return ret;
	}
	r->handle = handle;
	r->path = mr->path;
	r->nents = mr->nmtt;
	r->page_size = mr->page_size;
	memset(r->client, 0, sizeof(r->client));
	if (mr->path == PEERSIM_PATH_PEER)
		strscpy(r->client, mr->client->name, sizeof(r->client));
	return 0;

out_free:
	mmdrop(mr->mm);
	psim_mr_put(mr);
	return ret;
}

/* ibv_reg_dmabuf_mr(): ib_umem_dmabuf_get() or ib_umem_dmabuf_get_pinned() */
static int psim_ioc_reg_dmabuf_mr(struct psim_file *f, void *data)
{
	struct peersim_reg_dmabuf_mr *r = data;
	struct psim_mr *mr;
	u32 handle;
	int ret;

	if ((r->flags & ~PEERSIM_DMABUF_FLAGS) ||
	    (r->access & ~PEERSIM_ACCESS_ALL) || r->reserved || r->reserved2)
		return -EINVAL;
	if (r->offset != (unsigned long)r->offset || r->length != (size_t)r->length)
		return -EINVAL;
	mr = psim_mr_alloc(r->offset, r->length, r->access & PEERSIM_ACCESS_WRITE);
	if (!mr)
		return -ENOMEM;
	ret = psim_dmabuf_get(mr, r->fd, r->flags & PEERSIM_DMABUF_PINNED, r);
	if (ret)
		goto out_free;

	atomic64_inc(&psim_live_mrs);
	ret = xa_alloc(&f->mrs, &handle, mr, XA_LIMIT(1, INT_MAX), GFP_KERNEL);
	if (ret) {
		psim_mr_dereg(mr);
		return ret;
	}
	r->handle = handle;
	return 0;

out_free:
	mmdrop(mr->mm);
	psim_mr_put(mr);
	return ret;
}

static int psim_dereg_handle(struct psim_file *f, u32 handle)
{
	struct psim_mr *mr = xa_erase(&f->mrs, handle);

	if (!mr)
		return -ENOENT;
	psim_mr_dereg(mr);
	return 0;
}

/* REG_MR's result could not be copied out: the MR goes again. */
static void psim_ioc_reg_mr_undo(struct psim_file *f, void *data)
{
	struct peersim_reg_mr *r = data;

	psim_dereg_handle(f, r->handle);
}

/* REG_DMABUF_MR's result could not be copied out: the MR goes again. */
static void psim_ioc_reg_dmabuf_mr_undo(struct psim_file *f, void *data)
{
	struct peersim_reg_dmabuf_mr *r = data;

	psim_dereg_handle(f, r->handle);
}

static int psim_ioc_dereg_mr(struct psim_file *f, void *data)
{
	struct peersim_mr_handle *h = data;

	if (h->reserved)
		return -EINVAL;
	return psim_dereg_handle(f, h->handle);
}

static int psim_ioc_mr_info(struct psim_file *f, void *data)
{
	struct peersim_mr_info *info = data;
	struct psim_mr *mr;

	if (info->reserved)
		return -EINVAL;
	mr = psim_file_get_mr(f, info->handle);
	if (!mr)
		return -ENOENT;

	down_read(&mr->dma_sem);
	info->state = mr->invalidated ? PEERSIM_MR_INVALIDATED : PEERSIM_MR_ACTIVE;
	info->invalidated_at_ns = mr->invalidated_at_ns;
	/* a dma-buf MR's MTT changes under dma_sem (locking notes) */
	info->nents = mr->nmtt;
	info->dma_bytes = mr->dma_bytes;
	info->first_offset = mr->first_off;
	if (mr->path == PEERSIM_PATH_DMABUF)
		info->core_state = mr->nmtt ? PEERSIM_CORE_MAPPED :
					      PEERSIM_CORE_UNMAPPED;
	up_read(&mr->dma_sem);
	info->path = mr->path;
	info->page_size = mr->page_size;
	info->addr = mr->addr;
	info->length = mr->length;
	info->free_callbacks = atomic_read(&mr->free_callbacks);
	info->access = mr->writable ? PEERSIM_ACCESS_WRITE : 0;
	info->core_context = PEERSIM_NO_CORE_CONTEXT;
	if (mr->path == PEERSIM_PATH_GUP)
		info->core_state = PEERSIM_CORE_UNMAPPED;
	if (mr->path == PEERSIM_PATH_PEER) {
		/* what get_pages() got: legacy cores pass 0 for "none" */
		info->core_context = mr->xa_id;
		if (psim_legacy && mr->xa_id == PSIM_NO_INVALIDATION_ID)
			info->core_context = 0;
		mutex_lock(&mr->mapping_lock);
		info->core_state = mr->state;
		mutex_unlock(&mr->mapping_lock);
	}
	psim_mr_put(mr);
	return 0;
}

static int psim_ioc_mr_segs(struct psim_file *f, void *data)
{
	struct peersim_mr_segs *s = data;
	struct peersim_seg __user *useg = u64_to_user_ptr(s->segs);
	struct peersim_seg *snap = NULL;
	unsigned int i, n, total;
	struct psim_mr *mr;
	int ret = 0;

	mr = psim_file_get_mr(f, s->handle);
	if (!mr)
		return -ENOENT;
	/*
	 * Snapshot under dma_sem (a dma-buf MR's MTT may be replaced), copy
	 * out without it: copy_to_user may fault (locking notes).
	 */
	for (;;) {
		if (mr->path == PEERSIM_PATH_DMABUF) {
			ret = psim_dmabuf_fault(mr);
			if (ret)
				goto out_put;
		}
		down_read(&mr->dma_sem);
		if (mr->invalidated) {
			ret = -ENOLINK;
		} else if (mr->dma_off && !mr->deregistered) {
			/* a dma-buf MR moved since the fault: map it again */
			up_read(&mr->dma_sem);
			if (fatal_signal_pending(current)) {
				ret = -EINTR;
				goto out_put;
			}
			continue;
		}
		total = mr->nmtt;
		n = min(s->count, total);
		if (!ret && n) {
			snap = kvmalloc_array(n, sizeof(*snap), GFP_KERNEL);
			if (!snap)
				ret = -ENOMEM;
			for (i = 0; snap && i < n; i++) {
				snap[i].dma_addr = mr->mtt[i].addr;
				snap[i].len = mr->mtt[i].len;
			}
		}
		up_read(&mr->dma_sem);
		break;
	}
	if (!ret && n && copy_to_user(useg, snap, n * sizeof(*snap)))
		ret = -EFAULT;
	if (!ret)
		s->count = total;
	kvfree(snap);
out_put:
	psim_mr_put(mr);
	return ret;
}

static int psim_ioc_clients(struct psim_file *f, void *data)
{
	struct peersim_clients *cl = data;
	struct peersim_client __user *uc = u64_to_user_ptr(cl->clients);
	struct peersim_client *snap;
	unsigned int cap, n = 0, total = 0;
	struct psim_client *c;
	int ret = 0;
	u32 exflags;

	if (cl->reserved)
		return -EINVAL;
	cap = min_t(u32, cl->count, PSIM_MAX_CLIENTS_REPORT);
	snap = kcalloc(max(cap, 1U), sizeof(*snap), GFP_KERNEL);
	if (!snap)
		return -ENOMEM;

	/* Snapshot under the lock, copy out without it. */
	mutex_lock(&psim_clients_lock);
	list_for_each_entry(c, &psim_clients, node) {
		struct peersim_client *p;

		if (c->dying)
			continue;
		total++;
		if (n >= cap)
			continue;
		p = &snap[n];
		memcpy(p->name, c->name, sizeof(p->name));
		memcpy(p->version, c->version, sizeof(p->version));
		if (c->invalidation_required)
			p->flags |= PEERSIM_CLIENT_INVAL_CB;
		if (psim_client_ex(c->ops, &exflags)) {
			p->flags |= PEERSIM_CLIENT_EX;
			if (exflags & PEER_MEM_INVALIDATE_UNMAPS)
				p->flags |= PEERSIM_CLIENT_INVALIDATE_UNMAPS;
		}
		p->live_mrs = refcount_read(&c->usecnt) - 1;
		p->acquire_calls = atomic64_read(&c->acquire_calls);
		p->claims = atomic64_read(&c->claims);
		n++;
	}
	mutex_unlock(&psim_clients_lock);

	if (n && copy_to_user(uc, snap, n * sizeof(*snap)))
		ret = -EFAULT;
	cl->count = total;
	kfree(snap);
	return ret;
}

static int psim_ioc_dma_write(struct psim_file *f, void *data)
{
	return psim_dma(f, data, true);
}

static int psim_ioc_dma_read(struct psim_file *f, void *data)
{
	return psim_dma(f, data, false);
}

/**
 * struct psim_ioctl_desc - one ioctl command
 * @cmd: the command as this module knows it (direction, current size)
 * @min_size: size of the struct's first version; smaller is refused
 * @fn: handler, works on a kernel copy of the struct
 * @undo: reverts @fn when its result cannot be copied back (optional)
 */
struct psim_ioctl_desc {
	unsigned int cmd;
	unsigned int min_size;
	int (*fn)(struct psim_file *f, void *data);
	void (*undo)(struct psim_file *f, void *data);
};

#define PSIM_IOCTL(_cmd, _type, _fn, _undo)				\
	[_IOC_NR(_cmd)] = { .cmd = _cmd, .min_size = sizeof(_type),	\
			    .fn = _fn, .undo = _undo }

static const struct psim_ioctl_desc psim_ioctls[] = {
	PSIM_IOCTL(PEERSIM_IOC_INFO, struct peersim_info, psim_ioc_info, NULL),
	PSIM_IOCTL(PEERSIM_IOC_REG_MR, struct peersim_reg_mr, psim_ioc_reg_mr,
		   psim_ioc_reg_mr_undo),
	PSIM_IOCTL(PEERSIM_IOC_DEREG_MR, struct peersim_mr_handle,
		   psim_ioc_dereg_mr, NULL),
	PSIM_IOCTL(PEERSIM_IOC_MR_INFO, struct peersim_mr_info,
		   psim_ioc_mr_info, NULL),
	PSIM_IOCTL(PEERSIM_IOC_DMA_WRITE, struct peersim_dma,
		   psim_ioc_dma_write, NULL),
	PSIM_IOCTL(PEERSIM_IOC_DMA_READ, struct peersim_dma,
		   psim_ioc_dma_read, NULL),
	PSIM_IOCTL(PEERSIM_IOC_MR_SEGS, struct peersim_mr_segs,
		   psim_ioc_mr_segs, NULL),
	PSIM_IOCTL(PEERSIM_IOC_CLIENTS, struct peersim_clients,
		   psim_ioc_clients, NULL),
	PSIM_IOCTL(PEERSIM_IOC_REG_DMABUF_MR, struct peersim_reg_dmabuf_mr,
		   psim_ioc_reg_dmabuf_mr, psim_ioc_reg_dmabuf_mr_undo),
};

union psim_ioctl_data {
	struct peersim_info info;
	struct peersim_reg_mr reg;
	struct peersim_mr_handle handle;
	struct peersim_mr_info mr_info;
	struct peersim_dma dma;
	struct peersim_mr_segs segs;
	struct peersim_clients clients;
	struct peersim_reg_dmabuf_mr reg_dmabuf;
};

static long psim_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct psim_file *f = filp->private_data;
	void __user *uarg = (void __user *)arg;
	unsigned int usize = _IOC_SIZE(cmd);
	const struct psim_ioctl_desc *desc;
	union psim_ioctl_data data;
	unsigned int ksize;
	int ret;

	if (_IOC_TYPE(cmd) != PEERSIM_IOC_MAGIC ||
	    _IOC_NR(cmd) >= ARRAY_SIZE(psim_ioctls))
		return -ENOTTY;
	desc = &psim_ioctls[_IOC_NR(cmd)];
	if (!desc->fn || _IOC_DIR(cmd) != _IOC_DIR(desc->cmd))
		return -ENOTTY;
	if (usize < desc->min_size)
		return -EINVAL;

	ksize = _IOC_SIZE(desc->cmd);
	BUILD_BUG_ON(sizeof(data) > 128);
	memset(&data, 0, sizeof(data));
	if (_IOC_DIR(cmd) & _IOC_WRITE) {
		/* Zero-fills a smaller struct; -E2BIG on a non-zero newer tail. */
		ret = copy_struct_from_user(&data, ksize, uarg, usize);
		if (ret)
			return ret;
	}

	ret = desc->fn(f, &data);
	if (ret || !(_IOC_DIR(cmd) & _IOC_READ))
		return ret;

	if (copy_to_user(uarg, &data, min(usize, ksize)) ||
	    (usize > ksize && clear_user(uarg + ksize, usize - ksize))) {
		if (desc->undo)
			desc->undo(f, &data);
		return -EFAULT;
	}
	return 0;
}

static int psim_open(struct inode *inode, struct file *filp)
{
	struct psim_file *f;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	xa_init_flags(&f->mrs, XA_FLAGS_ALLOC1);
	filp->private_data = f;
	return 0;
}

/* Last close of the fd: its MRs are deregistered. */
static int psim_release(struct inode *inode, struct file *filp)
{
	struct psim_file *f = filp->private_data;
	struct psim_mr *mr;
	unsigned long idx;

	xa_for_each(&f->mrs, idx, mr) {
		xa_erase(&f->mrs, idx);
		psim_mr_dereg(mr);
	}
	xa_destroy(&f->mrs);
	kfree(f);
	return 0;
}

static const struct file_operations psim_fops = {
	.owner = THIS_MODULE,
	.open = psim_open,
	.release = psim_release,
	.unlocked_ioctl = psim_ioctl,
	.compat_ioctl = psim_ioctl,
};

static struct miscdevice psim_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "sp_peersim",
	.fops = &psim_fops,
	.mode = 0600,
};

/* --- the simulated HCA's device ----------------------------------------- */

static int psim_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	int ret;

	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	/* "DMA" translates addresses back with dma_to_phys(): no IOMMU. */
	if (device_iommu_mapped(dev)) {
		dev_err(dev, "behind an IOMMU: DMA addresses cannot be followed\n");
		return -ENODEV;
	}
	if (max_seg_size) {
		if (!dev->dma_parms) {
			dev_err(dev, "no dma_parms: cannot set max_seg_size\n");
			return -EIO;
		}
		dma_set_max_seg_size(dev, max_seg_size);
	}
	psim_dev = dev;
	return 0;
}

static struct platform_driver psim_driver = {
	.probe = psim_probe,
	.driver = {
		.name = "sp_peersim_hca",
		.probe_type = PROBE_FORCE_SYNCHRONOUS,
	},
};

static int __init psim_init(void)
{
	struct platform_device_info info = {
		.name = "sp_peersim_hca",
		.id = PLATFORM_DEVID_NONE,
		.dma_mask = DMA_BIT_MASK(64),
	};
	int ret;

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

	ret = platform_driver_register(&psim_driver);
	if (ret)
		return ret;
	psim_pdev = platform_device_register_full(&info);
	if (IS_ERR(psim_pdev)) {
		ret = PTR_ERR(psim_pdev);
		goto out_driver;
	}
	if (!psim_dev) {
		pr_err("the simulated HCA did not probe\n");
		ret = -ENODEV;
		goto out_device;
	}
	ret = misc_register(&psim_misc);
	if (ret)
		goto out_device;
	pr_info("%s semantics, max DMA segment %u bytes, %s\n",
		psim_legacy ? "legacy" : "modern",
		dma_get_max_seg_size(psim_dev),
		psim_sysfs ? "memory_peers in sysfs" : "no sysfs (names not compared)");
	return 0;

out_device:
	platform_device_unregister(psim_pdev);
out_driver:
	platform_driver_unregister(&psim_driver);
	psim_dev = NULL;
	return ret;
}

static void __exit psim_exit(void)
{
	misc_deregister(&psim_misc);
	/*
	 * Clients link against this module, so none can be registered here
	 * (the module loader refuses the unload while they are loaded).
	 */
	mutex_lock(&psim_clients_lock);
	if (!list_empty(&psim_clients))
		pr_err("unloading with peer memory clients registered\n");
	mutex_unlock(&psim_clients_lock);
	platform_device_unregister(psim_pdev);
	platform_driver_unregister(&psim_driver);
	psim_dev = NULL;
}

module_init(psim_init);
module_exit(psim_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("strixpeer developers");
MODULE_DESCRIPTION("strixpeer tests: simulated PeerDirect core and HCA");
