// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - the shmem allocator (allocator=shmem, params.c), and what
 * both allocators share below buffer.c and map.c: the per-node mempolicy
 * their mappings report, dropping a buffer's page references.
 *
 * Why: since 6.5 GUP-fast refuses a FOLL_LONGTERM|FOLL_WRITE pin of a folio
 * that is not anonymous, hugetlb or shmem (gup_fast_folio_allowed()), so
 * every ibv_reg_mr of a page-allocator buffer falls back to the slow path
 * (docs/performance.md). A buffer whose pages are a shmem file's folios,
 * PMD-mapped, is pinned 512 pages at a time like THP.
 * docs/design/shmem-allocator.md reads the design from the kernel source.
 *
 * Allocation: one private tmpfs mount per memory node, made at the node's
 * first shmem buffer (huge=within_size, mpol=bind:<node>, noswap where the
 * kernel has it). A buffer is one file of it, "strixpeer:<id>", sized at
 * creation and charged then (no VM_NORESERVE: overcommit refuses it with
 * -ENOMEM up front). Its mapping is unevictable, allocates without
 * __GFP_MOVABLE (a folio in ZONE_MOVABLE or CMA would make a FOLL_LONGTERM
 * pin fail), and its inode is S_IMMUTABLE, so fallocate(PUNCH_HOLE) and
 * MADV_REMOVE fail with EPERM. Every folio is read once, kept with one
 * reference of ours in buf->pages and checked: its node (a cpuset can
 * override the mount's bind policy) and, for SP_ALLOC_HUGE_ONLY, its order.
 * shmem decides the folio size itself: 2 MiB where the THP "shmem_enabled"
 * knob does not say deny, smaller large folios on 7.x; without a VMA its
 * 2 MiB attempt neither reclaims nor compacts under THP defrag=madvise.
 *
 * Mapping (map.c): the VMA's file becomes the shmem file (vma_set_file()),
 * with vm_pgoff the buffer offset = the file index; the VMA keeps our
 * vm_ops, whose fault hands back the buffer's page, and finish_fault()
 * maps a 2 MiB folio with one PMD. shmem's own mmap is never called: no
 * userfaultfd, no shmem faults. vma_set_file() drops the file the mapping
 * was made through (/dev/strixpeer or a dma-buf), which pinned the module
 * (or the dma-buf): an sp_shm_vma shared by the VMAs of one mmap (split,
 * fork) holds that file, and the buffer, until their last close.
 */
#include <linux/fs.h>
#include <linux/fs_context.h>
#include <linux/mempolicy.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/sched/signal.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>

#include "strixpeer.h"

/*
 * Gfp of every shmem folio: not movable; high orders and order 0 may
 * reclaim but not OOM. For the 2 MiB attempt shmem keeps only our zone
 * bits and NOWARN/NORETRY (limit_gfp_mask()); the rest is THP defrag's.
 */
#define SP_SHM_GFP	(GFP_HIGHUSER | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

/*
 * One mount per node, made under sp_shm_mnt_lock at the node's first shmem
 * buffer and unmounted at module exit; read without the lock once set
 * (smp_store_release()/smp_load_acquire()).
 */
static DEFINE_MUTEX(sp_shm_mnt_lock);
static struct vfsmount *sp_shm_mnts[MAX_NUMNODES];

static struct vfsmount *sp_shm_mount_opts(const char *opts)
{
	struct file_system_type *type = get_fs_type("tmpfs");
	struct fs_context *fc;
	struct vfsmount *mnt;
	char *data;
	int ret;

	if (!type)
		return ERR_PTR(-ENODEV);
	/* SB_KERNMOUNT: no size limit, no namespace, no path to the files */
	fc = fs_context_for_mount(type, SB_KERNMOUNT);
	if (IS_ERR(fc))
		return ERR_CAST(fc);
	data = kstrdup(opts, GFP_KERNEL);
	if (!data) {
		mnt = ERR_PTR(-ENOMEM);
		goto out_fc;
	}
	ret = generic_parse_monolithic(fc, data);
	kfree(data);
	if (ret) {
		mnt = ERR_PTR(ret);
		goto out_fc;
	}
	mnt = sp_fc_mount(fc);
out_fc:
	put_fs_context(fc);
	return mnt;
}

/*
 * @node's mount. noswap (6.4+, and only for CAP_SYS_ADMIN) is tried first;
 * where the mount refuses it, the unevictable mapping keeps the folios out
 * of swap as well.
 */
static struct vfsmount *sp_shm_mount(int node)
{
	/* pairs with the release below: a seen mount is a whole one */
	struct vfsmount *mnt = smp_load_acquire(&sp_shm_mnts[node]);
	char pol[24] = "", opts[80];

	if (mnt)
		return mnt;
	mutex_lock(&sp_shm_mnt_lock);
	lockdep_assert_held(&sp_shm_mnt_lock);
	mnt = sp_shm_mnts[node];
	if (mnt)
		goto out;
	if (IS_ENABLED(CONFIG_NUMA))
		snprintf(pol, sizeof(pol), ",mpol=bind:%d", node);
	snprintf(opts, sizeof(opts), "huge=within_size%s,noswap", pol);
	mnt = sp_shm_mount_opts(opts);
	if (IS_ERR(mnt)) {
		snprintf(opts, sizeof(opts), "huge=within_size%s", pol);
		mnt = sp_shm_mount_opts(opts);
	}
	if (IS_ERR(mnt)) {
		pr_warn_ratelimited("strixpeer: no tmpfs mount for node %d: %ld\n",
				    node, PTR_ERR(mnt));
		goto out;
	}
	/* publish a whole mount to the lock-free readers above */
	smp_store_release(&sp_shm_mnts[node], mnt);
out:
	mutex_unlock(&sp_shm_mnt_lock);
	return mnt;
}

#if SP_VM_POLICY
/*
 * NUMA balancing (buffer.c's PMD path, and every shmem-backed mapping).
 * task_numa_work() scans every VMA whose policy allows migrate-on-fault:
 * it makes the mapping's entries PROT_NONE so that the next access faults
 * and the page may move - an mmu notifier
 * invalidation (MMU_NOTIFY_PROTECTION_VMA) of every range registered on
 * the mapping, an ODP MR's or a KFD userptr's (which evicts the process's
 * GPU queues until the range is revalidated). Buffer pages are pinned and
 * never move, so each scan is pure overhead. The 4 KiB path's VM_MIXEDMAP
 * VMAs are skipped by the scanner; the PMD path's ordinary file mappings
 * are skipped only when vma_policy_mof() is false - when the get_policy
 * vm_op returns a policy without MPOL_F_MOF.
 *
 * The policy says what is true: MPOL_BIND to the buffer's node (numa_maps
 * shows "bind:N"). One per node, made at the node's first mmap and freed
 * at module exit. mm/mempolicy.c exports no constructor to modules, so it
 * is filled in here as mpol_new() fills one in; it is never MPOL_F_SHARED,
 * so the core takes no reference on what get_policy returns
 * (mpol_cond_put()) - only get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) holds
 * one for a moment (refcnt starts at 1: its put never frees). If the
 * allocation fails, get_policy returns NULL, which stops the scan as well.
 * An mbind() of a mapping stores a VMA policy that get_policy does not
 * consult: the pages stay where they are.
 */
static struct mempolicy *sp_node_pols[MAX_NUMNODES];

/* What get_policy returns for a mapping of a buffer on @node (or NULL). */
struct mempolicy *sp_node_policy(int node)
{
	return READ_ONCE(sp_node_pols[node]);
}

void sp_node_policy_get(int node)
{
	struct mempolicy *pol;

	if (READ_ONCE(sp_node_pols[node]))
		return;
	pol = kzalloc(sizeof(*pol), GFP_KERNEL);
	if (!pol)
		return;
	atomic_set(&pol->refcnt, 1);
	pol->mode = MPOL_BIND;
	pol->flags = 0;		/* no MPOL_F_MOF, no MPOL_F_SHARED */
	pol->nodes = nodemask_of_node(node);
	pol->w.user_nodemask = pol->nodes;
	pol->home_node = NUMA_NO_NODE;
	if (cmpxchg(&sp_node_pols[node], NULL, pol))
		kfree(pol);
}

/* Every mapping is gone: nothing can look a policy up any more. */
static void sp_node_policy_exit(void)
{
	int node;

	for (node = 0; node < MAX_NUMNODES; node++) {
		struct mempolicy *pol = sp_node_pols[node];

		if (!pol)
			continue;
		sp_node_pols[node] = NULL;
		/* a get_mempolicy() still holding it: leave it to leak */
		if (atomic_cmpxchg(&pol->refcnt, 1, 0) == 1)
			kfree(pol);
		else
			pr_warn("strixpeer: node %d's mempolicy still referenced, not freed\n",
				node);
	}
}
#else
void sp_node_policy_get(int node) { }
struct mempolicy *sp_node_policy(int node) { return NULL; }
static inline void sp_node_policy_exit(void) { }
#endif

/*
 * Drop our reference on every folio of @pages[0..@nr): one per order-0
 * page, one per compound 2 MiB folio (whose pages all sit in @pages).
 */
void sp_put_pages(struct page **pages, unsigned long nr)
{
	unsigned long i = 0, n = 0;

	while (i < nr) {
		struct folio *folio = page_folio(pages[i]);

		i += folio_nr_pages(folio);
		folio_put(folio);
		if (!(++n & 1023))
			cond_resched();
	}
}

/* Module exit: no buffer, hence no file of the mounts, is left. */
void sp_shm_exit(void)
{
	int node;

	for (node = 0; node < MAX_NUMNODES; node++) {
		if (sp_shm_mnts[node])
			kern_unmount(sp_shm_mnts[node]);
		sp_shm_mnts[node] = NULL;
	}
	sp_node_policy_exit();
}

/**
 * sp_shm_fill() - give a buffer the folios of a new shmem file
 * @buf: buffer being made: @size, @nr_pages, @node and @id set, @pages
 *	allocated and empty
 * @huge_only: fail unless every folio is 2 MiB
 *
 * Fills @buf->pages, @nr_huge, @nr_chunks, @min_order and @shm_file.
 *
 * Context: process context, may sleep.
 * Return: 0; -ENOMEM when a folio is not on @node, or not 2 MiB with
 * @huge_only, or memory (or overcommit) runs out; -EINTR on a fatal
 * signal; the mount's error. On failure nothing is left allocated.
 */
int sp_shm_fill(struct sp_buf *buf, bool huge_only)
{
	struct address_space *mapping;
	struct vfsmount *mnt;
	struct file *file;
	unsigned long i = 0;
	char name[24];
	int ret = 0;

	mnt = sp_shm_mount(buf->node);
	if (IS_ERR(mnt))
		return PTR_ERR(mnt);
	snprintf(name, sizeof(name), "strixpeer:%u", buf->id);
	file = sp_shmem_file_setup(mnt, name, buf->size);
	if (IS_ERR(file))
		return PTR_ERR(file);
	inode_set_flags(file_inode(file), S_IMMUTABLE, S_IMMUTABLE);
	mapping = file->f_mapping;
	/* before the first read: folios join the LRU as (un)evictable then */
	mapping_set_gfp_mask(mapping, SP_SHM_GFP);
	mapping_set_unevictable(mapping);

	while (i < buf->nr_pages) {
		struct folio *folio = sp_shmem_read_folio(mapping, i, SP_SHM_GFP);
		unsigned long j, nr;
		unsigned int order;

		if (IS_ERR(folio)) {
			ret = PTR_ERR(folio);
			break;
		}
		order = folio_order(folio);
		nr = folio_nr_pages(folio);
		/* we read at every folio's first index, within i_size */
		if (WARN_ON_ONCE(folio->index != i || nr > buf->nr_pages - i))
			ret = -EIO;
		else if (folio_nid(folio) != buf->node ||
			 (huge_only && order < SP_HUGE_ORDER))
			ret = -ENOMEM;
		if (ret) {
			folio_put(folio);
			break;
		}
		/* as shmem's own writers do: never taken for clean cache */
		folio_lock(folio);
		folio_mark_dirty(folio);
		folio_unlock(folio);
		if (order == SP_HUGE_ORDER)
			buf->nr_huge++;
		if (!i || folio_pfn(folio) != page_to_pfn(buf->pages[i - 1]) + 1)
			buf->nr_chunks++;
		for (j = 0; j < nr; j++)
			buf->pages[i + j] = folio_page(folio, j);
		buf->min_order = min(buf->min_order, order);
		i += nr;

		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		cond_resched();
	}
	if (ret) {
		sp_put_pages(buf->pages, i);
		fput(file);
		return ret;
	}
	buf->shm_file = file;
	return 0;
}

/* The buffer's last reference is gone: our folio references went first. */
void sp_shm_free(struct sp_buf *buf)
{
	fput(buf->shm_file);
	buf->shm_file = NULL;
}
