// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer buffers: pinned system memory, 2 MiB pages first, on one NUMA
 * node, mapped into user space with ordinary struct pages so that
 * pin_user_pages() - and with it a plain ibv_reg_mr() on any verbs
 * provider - works on the mapping. (A remap_pfn_range() mapping would be
 * VM_PFNMAP, which GUP refuses.)
 *
 * Mapping them is map.c's; with the allocator parameter at "shmem" the
 * pages are a shmem file's (shmem.c).
 *
 * The pages are allocated without __GFP_MOVABLE: they stay pinned for the
 * buffer's lifetime and must not sit in ZONE_MOVABLE or CMA, where a
 * FOLL_LONGTERM pin (ib_umem) would try to migrate them.
 */
#include <linux/capability.h>
#include <linux/gfp.h>
#include <linux/mempolicy.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>

#include <uapi/strixpeer.h>

#include "strixpeer.h"

/* Every live buffer by node-wide id (netlink's view); see sp_buf_get_next(). */
static DEFINE_XARRAY_ALLOC1(sp_all_bufs);
static u32 sp_next_id;

/*
 * Bytes of live buffers plus allocations in flight: what the node-wide
 * max_pinned_bytes bounds. sp_stats.pinned_bytes counts live buffers only.
 */
static atomic64_t sp_reserved;

/*
 * Reserve @bytes of the node-wide max_pinned_bytes (0: unlimited) before
 * any page is taken, so concurrent allocations cannot overshoot the limit
 * together.
 */
static int sp_reserve(u64 bytes)
{
	u64 max = READ_ONCE(sp_max_pinned_bytes);
	s64 now = atomic64_add_return(bytes, &sp_reserved);

	if (max && (u64)now > max) {
		atomic64_sub(bytes, &sp_reserved);
		return -ENOSPC;
	}
	return 0;
}

/* A buffer of @bytes now exists: count it, and the peak. */
static void sp_account_live(u64 bytes)
{
	s64 now = atomic64_add_return(bytes, &sp_stats.pinned_bytes);
	s64 peak = atomic64_read(&sp_stats.peak_pinned_bytes);

	while (now > peak &&
	       !atomic64_try_cmpxchg(&sp_stats.peak_pinned_bytes, &peak, now))
		;
}

/*
 * Charge @buf's pages the way io_uring charges its rings (the model is
 * documented in include/uapi/strixpeer.h and the README):
 *
 * - to the calling user's locked_vm (struct user_struct: every process of
 *   the uid, shared with io_uring, perf and XDP), against the caller's
 *   RLIMIT_MEMLOCK, unless the caller has CAP_IPC_LOCK. The charge
 *   belongs to the buffer and stays until the buffer is freed, whoever
 *   holds it by then - a child after fork, an image after execve, the
 *   receiver of an fd - so none of those lets a user pin past the limit;
 * - not to the calling mm's pinned_vm: ib_umem_get() adds what a process
 *   registers there and refuses past RLIMIT_MEMLOCK, so a charge of ours
 *   would count a registered buffer twice against the one limit and let a
 *   process register only half of what it may allocate.
 *
 * The pages and the module's objects are also charged to the caller's
 * memory cgroup (__GFP_ACCOUNT), see sp_alloc_chunk().
 */
static int sp_charge(struct sp_buf *buf)
{
	unsigned long npages = buf->nr_pages;

	if (!capable(CAP_IPC_LOCK)) {
		struct user_struct *user = current_user();
		unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
		unsigned long cur = atomic_long_read(&user->locked_vm), new;

		do {
			new = cur + npages;
			if (new > limit || new < cur)
				return -EDQUOT;
		} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
		buf->user = get_uid(user);
	}
	return 0;
}

static void sp_uncharge(struct sp_buf *buf)
{
	if (buf->user) {
		atomic_long_sub(buf->nr_pages, &buf->user->locked_vm);
		free_uid(buf->user);
	}
}

/* Keep a chunk of this order as one compound folio (PMD path only). */
static bool sp_keep_folio(unsigned int order)
{
	return SP_HUGE_MAP && order == SP_HUGE_ORDER;
}

static struct page *sp_alloc_chunk(int node, unsigned int order,
				   bool huge_only)
{
	/* __GFP_ACCOUNT: the caller's memory cgroup pays for the pages. */
	gfp_t gfp = GFP_HIGHUSER | __GFP_ZERO | __GFP_NOWARN | __GFP_THISNODE |
		    __GFP_ACCOUNT;

	if (sp_keep_folio(order))
		gfp |= __GFP_COMP;

	/*
	 * Opportunistic high orders give up quickly; what the caller cannot
	 * do without (order 0, or 2 MiB when required) may reclaim and
	 * compact, but fails rather than invoking the OOM killer.
	 */
	if (order && !huge_only)
		gfp |= __GFP_NORETRY;
	else
		gfp |= __GFP_RETRY_MAYFAIL;
	return alloc_pages_node(node, gfp, order);
}

static void sp_count_failure(int err, u64 size)
{
	switch (err) {
	case -ENOSPC:
		atomic64_inc(&sp_stats.fail_max_pinned);
		sp_event_limit(STRIXPEER_LIMIT_MAX_PINNED_BYTES, size);
		break;
	case -EDQUOT:
		atomic64_inc(&sp_stats.fail_memlock);
		sp_event_limit(STRIXPEER_LIMIT_MEMLOCK, size);
		break;
	case -ENOMEM:
		atomic64_inc(&sp_stats.fail_nomem);
		sp_event_limit(STRIXPEER_LIMIT_NO_MEMORY, size);
		break;
	}
}

/**
 * sp_buf_create() - allocate and charge a buffer
 * @size: bytes, a multiple of PAGE_SIZE (of 2 MiB when @huge_only)
 * @node: online NUMA node with memory; every page comes from it
 * @huge_only: fail with -ENOMEM rather than use pages below 2 MiB
 *
 * 2 MiB pages come first; once one cannot be had, smaller orders are used
 * for the rest, so 2 MiB pages always sit at 2 MiB-aligned offsets of the
 * buffer (the fault handler relies on that). With the allocator parameter
 * at "shmem" the pages are a shmem file's instead (sp_shm_fill()).
 *
 * The bytes count against the node-wide max_pinned_bytes (-ENOSPC), then
 * against the user's RLIMIT_MEMLOCK (-EDQUOT, see sp_charge()), both
 * before any memory is allocated; the pages and the buffer's own memory
 * are charged to the caller's memory cgroup (-ENOMEM at its limit). A
 * fatal signal aborts a long allocation with -EINTR; every failure gives
 * back all and is counted and announced as a limit event.
 *
 * Context: process context, may sleep.
 * Return: the buffer with one reference held, or an ERR_PTR().
 */
struct sp_buf *sp_buf_create(u64 size, int node, bool huge_only)
{
	unsigned long nr_pages = size >> PAGE_SHIFT;
	unsigned int order = SP_HUGE_ORDER;
	struct sp_buf *buf;
	unsigned long i = 0;
	int ret;

	ret = sp_reserve(size);
	if (ret)
		goto out_count;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL_ACCOUNT);
	if (!buf) {
		ret = -ENOMEM;
		goto out_unreserve;
	}
	kref_init(&buf->ref);
	buf->size = size;
	buf->nr_pages = nr_pages;
	buf->node = node;
	buf->min_order = SP_HUGE_ORDER;
	buf->allocator = READ_ONCE(sp_allocator);
	buf->pid = task_tgid_nr(current);
	buf->uid = current_uid();
	get_task_comm(buf->comm, current);
	spin_lock_init(&buf->exp_lock);
	INIT_LIST_HEAD(&buf->exp_list);

	ret = sp_charge(buf);
	if (ret)
		goto out_free_buf;

	/* The id, reserved (NULL) until the buffer is whole: shmem names by it */
	ret = xa_alloc_cyclic(&sp_all_bufs, &buf->id, NULL, xa_limit_31b,
			      &sp_next_id, GFP_KERNEL_ACCOUNT);
	if (ret < 0)
		goto out_uncharge;

	buf->pages = kvmalloc_array(nr_pages, sizeof(*buf->pages),
				    GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!buf->pages) {
		ret = -ENOMEM;
		goto out_erase;
	}

	if (buf->allocator == SP_ALLOC_SHMEM) {
		ret = sp_shm_fill(buf, huge_only);
		if (ret)
			goto out_free_pages;
		i = nr_pages;
	}

	while (i < nr_pages) {
		struct page *page;
		unsigned long j;

		while (order && (1UL << order) > nr_pages - i)
			order--;
		page = sp_alloc_chunk(node, order, huge_only);
		if (!page) {
			if (!order || huge_only) {
				ret = -ENOMEM;
				goto out_put_pages;
			}
			order--;
			continue;
		}
		if (sp_keep_folio(order))
			buf->nr_huge++;
		else if (order)
			split_page(page, order);
		if (!i || page_to_pfn(page) != page_to_pfn(buf->pages[i - 1]) + 1)
			buf->nr_chunks++;
		/*
		 * By pfn, not nth_page(): 7.x removed nth_page() (a split
		 * block's pages are consecutive pfns on every kernel).
		 */
		for (j = 0; j < (1UL << order); j++)
			buf->pages[i + j] = pfn_to_page(page_to_pfn(page) + j);
		buf->min_order = min(buf->min_order, order);
		i += 1UL << order;

		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto out_put_pages;
		}
		cond_resched();
	}

	/* Only sizes the module advertises (page_sizes): 2 MiB or 4 KiB. */
	buf->page_size = buf->min_order >= SP_HUGE_ORDER ? PMD_SIZE : PAGE_SIZE;

	/* Replaces the reserved entry: allocates nothing, cannot fail. */
	xa_store(&sp_all_bufs, buf->id, buf, GFP_KERNEL);

	sp_account_live(size);
	atomic64_inc(&sp_stats.buffers);
	atomic64_inc(&sp_stats.allocs);
	return buf;

out_put_pages:
	sp_put_pages(buf->pages, i);
out_free_pages:
	kvfree(buf->pages);
out_erase:
	xa_erase(&sp_all_bufs, buf->id);
out_uncharge:
	sp_uncharge(buf);
out_free_buf:
	kfree(buf);
out_unreserve:
	atomic64_sub(size, &sp_reserved);
out_count:
	sp_count_failure(ret, size);
	return ERR_PTR(ret);
}

/**
 * sp_buf_get_next() - the live buffer with the lowest id >= *@id
 * @id: in: where to start; out: the buffer's id
 *
 * Buffers being released (reference count already zero) are skipped.
 *
 * Context: takes and releases sp_all_bufs' xa_lock.
 * Return: the buffer with a reference held (drop with sp_buf_put()), or
 * NULL when there is none.
 */
struct sp_buf *sp_buf_get_next(unsigned long *id)
{
	struct sp_buf *buf;

	xa_lock(&sp_all_bufs);
	for (;;) {
		buf = xa_find(&sp_all_bufs, id, ULONG_MAX, XA_PRESENT);
		if (!buf || kref_get_unless_zero(&buf->ref))
			break;
		(*id)++;
	}
	xa_unlock(&sp_all_bufs);
	return buf;
}

/**
 * sp_buf_pinned() - does a driver (an MR, say) hold pins on the pages?
 * @buf: buffer, referenced by the caller
 *
 * Context: process context, may sleep.
 * Return: true when any page may be DMA-pinned (folio_maybe_dma_pinned()).
 */
bool sp_buf_pinned(const struct sp_buf *buf)
{
	unsigned long i = 0, n = 0;

	while (i < buf->nr_pages) {
		struct folio *folio = page_folio(buf->pages[i]);

		if (folio_maybe_dma_pinned(folio))
			return true;
		i += folio_nr_pages(folio);
		if (!(++n & 1023))
			cond_resched();
	}
	return false;
}

/**
 * sp_buf_snapshot() - what an event or a dump shows of a buffer
 * @eb: filled in
 * @buf: the buffer, referenced by the caller (or being released)
 */
void sp_buf_snapshot(struct sp_event_buf *eb, const struct sp_buf *buf)
{
	eb->id = buf->id;
	eb->pid = buf->pid;
	eb->size = buf->size;
	eb->page_size = buf->page_size;
	eb->node = buf->node;
	eb->nr_chunks = buf->nr_chunks;
	eb->map_count = atomic_read(&buf->map_count);
	eb->exports = atomic_read(&buf->exports);
	eb->attachments = atomic_read(&buf->attachments);
}

/**
 * sp_buf_event() - report that a buffer was created or freed
 * @buf: the buffer
 * @cmd: STRIXPEER_CMD_BUF_CREATED_NTF or STRIXPEER_CMD_BUF_FREED_NTF
 */
void sp_buf_event(const struct sp_buf *buf, u8 cmd)
{
	struct sp_event_buf eb;

	sp_buf_snapshot(&eb, buf);
	sp_event_buf(&eb, cmd);
}


/*
 * At module exit every buffer is gone: each holds the module through its
 * files, mappings or dma-bufs. The tree may still hold empty nodes, as
 * sp_import_ids may (sp_import_exit()): an xa_alloc_cyclic() whose node
 * allocation failed part-way leaves the nodes it had inserted, and only
 * xa_destroy() frees them (kmemleak reported four after the fuzzer's
 * fault-injection phases, allocated by xa_alloc_cyclic() in an ioctl;
 * this is the one such tree that was not destroyed).
 */
void sp_buf_exit(void)
{
	unsigned long id = 0;

	WARN_ON(xa_find(&sp_all_bufs, &id, ULONG_MAX, XA_PRESENT));
	xa_destroy(&sp_all_bufs);
	sp_shm_exit();
}

static void sp_buf_release(struct kref *ref)
{
	struct sp_buf *buf = container_of(ref, struct sp_buf, ref);

	xa_erase(&sp_all_bufs, buf->id);
	sp_buf_event(buf, STRIXPEER_CMD_BUF_FREED_NTF);
	/*
	 * Pages still pinned by an MR keep their GUP pins and are freed by
	 * the last unpin; only our own reference goes here.
	 */
	sp_put_pages(buf->pages, buf->nr_pages);
	if (buf->shm_file)
		sp_shm_free(buf);
	sp_uncharge(buf);
	atomic64_sub(buf->size, &sp_stats.pinned_bytes);
	atomic64_sub(buf->size, &sp_reserved);
	atomic64_dec(&sp_stats.buffers);
	atomic64_inc(&sp_stats.frees);
	kvfree(buf->pages);
	kfree(buf);
}

/**
 * sp_buf_put() - drop a reference; the last one frees the buffer
 * @buf: buffer
 *
 * Context: process context, may sleep (called from ioctl, file release
 * and VMA close, the latter with the mmap lock held).
 */
void sp_buf_put(struct sp_buf *buf)
{
	might_sleep();
	kref_put(&buf->ref, sp_buf_release);
}
