// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer buffers: pinned system memory, 2 MiB pages first, on one NUMA
 * node, mapped into user space page by page with vm_insert_pages() so that
 * pin_user_pages() - and with it a plain ibv_reg_mr() on any verbs
 * provider - works on the mapping. (A remap_pfn_range() mapping would be
 * VM_PFNMAP, which GUP refuses.)
 *
 * High-order allocations are split into order-0 pages: each page then has
 * its own reference count, so vm_insert_page(), GUP pins taken by an MR and
 * our own reference all work the same way on every kernel, while the
 * memory stays physically contiguous and naturally aligned for the NIC.
 *
 * The pages are allocated without __GFP_MOVABLE: they stay pinned for the
 * buffer's lifetime and must not sit in ZONE_MOVABLE or CMA, where a
 * FOLL_LONGTERM pin (ib_umem) would try to migrate them.
 */
#include <linux/capability.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include <uapi/strixpeer.h>

#include "strixpeer.h"

/* Every live buffer by node-wide id (netlink's view); see sp_buf_get_next(). */
static DEFINE_XARRAY_ALLOC1(sp_all_bufs);
static u32 sp_next_id;

/*
 * Reserve @bytes of the node-wide max_pinned_bytes (0: unlimited). The
 * reservation is pinned_bytes itself, taken before the pages are, so
 * concurrent allocations cannot overshoot the limit together.
 */
static int sp_reserve(u64 bytes)
{
	u64 max = READ_ONCE(sp_max_pinned_bytes);
	s64 now = atomic64_add_return(bytes, &sp_stats.pinned_bytes);
	s64 peak = atomic64_read(&sp_stats.peak_pinned_bytes);

	if (max && (u64)now > max) {
		atomic64_sub(bytes, &sp_stats.pinned_bytes);
		return -ENOSPC;
	}
	while (now > peak &&
	       !atomic64_try_cmpxchg(&sp_stats.peak_pinned_bytes, &peak, now))
		;
	return 0;
}

/*
 * Charge @npages to @mm's pinned_vm the way ib_umem does: the caller's
 * RLIMIT_MEMLOCK applies unless it has CAP_IPC_LOCK.
 */
static int sp_charge(struct mm_struct *mm, unsigned long npages)
{
	u64 limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 pinned = atomic64_add_return(npages, &mm->pinned_vm);

	if ((u64)pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -EDQUOT;
	}
	return 0;
}

static void sp_uncharge(struct mm_struct *mm, unsigned long npages)
{
	atomic64_sub(npages, &mm->pinned_vm);
}

static struct page *sp_alloc_chunk(int node, unsigned int order,
				   bool huge_only)
{
	gfp_t gfp = GFP_HIGHUSER | __GFP_ZERO | __GFP_NOWARN | __GFP_THISNODE;

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

static void sp_put_pages(struct page **pages, unsigned long nr)
{
	unsigned long i;

	for (i = 0; i < nr; i++) {
		put_page(pages[i]);
		if (!(i & 4095))
			cond_resched();
	}
}

static void sp_count_failure(int err, u64 size)
{
	switch (err) {
	case -ENOSPC:
		atomic64_inc(&sp_stats.fail_max_pinned);
		sp_nl_limit_event(STRIXPEER_LIMIT_MAX_PINNED_BYTES, size);
		break;
	case -EDQUOT:
		atomic64_inc(&sp_stats.fail_memlock);
		sp_nl_limit_event(STRIXPEER_LIMIT_MEMLOCK, size);
		break;
	case -ENOMEM:
		atomic64_inc(&sp_stats.fail_nomem);
		sp_nl_limit_event(STRIXPEER_LIMIT_NO_MEMORY, size);
		break;
	}
}

/**
 * sp_buf_create() - allocate and charge a buffer
 * @size: bytes, a multiple of PAGE_SIZE (of 2 MiB when @huge_only)
 * @node: online NUMA node with memory; every page comes from it
 * @huge_only: fail with -ENOMEM rather than use pages below 2 MiB
 *
 * The bytes count against the node-wide max_pinned_bytes (-ENOSPC) and
 * the pages are charged to current->mm's pinned_vm (-EDQUOT). A fatal
 * signal aborts a long allocation with -EINTR; every failure gives back
 * all and is counted and announced as a limit event.
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

	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf) {
		ret = -ENOMEM;
		goto out_unreserve;
	}
	kref_init(&buf->ref);
	buf->size = size;
	buf->nr_pages = nr_pages;
	buf->node = node;
	buf->min_order = SP_HUGE_ORDER;
	buf->pid = task_tgid_nr(current);
	buf->uid = current_uid();

	buf->pages = kvmalloc_array(nr_pages, sizeof(*buf->pages),
				    GFP_KERNEL | __GFP_NOWARN);
	if (!buf->pages) {
		ret = -ENOMEM;
		goto out_free_buf;
	}

	ret = sp_charge(current->mm, nr_pages);
	if (ret)
		goto out_free_array;
	buf->charged_mm = current->mm;
	mmgrab(buf->charged_mm);

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
		if (order)
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

	ret = xa_alloc_cyclic(&sp_all_bufs, &buf->id, buf, xa_limit_31b,
			      &sp_next_id, GFP_KERNEL);
	if (ret < 0)
		goto out_put_pages;

	atomic64_inc(&sp_stats.buffers);
	atomic64_inc(&sp_stats.allocs);
	return buf;

out_put_pages:
	sp_put_pages(buf->pages, i);
	sp_uncharge(buf->charged_mm, nr_pages);
	mmdrop(buf->charged_mm);
out_free_array:
	kvfree(buf->pages);
out_free_buf:
	kfree(buf);
out_unreserve:
	atomic64_sub(size, &sp_stats.pinned_bytes);
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
	unsigned long i;

	for (i = 0; i < buf->nr_pages; i++) {
		if (folio_maybe_dma_pinned(page_folio(buf->pages[i])))
			return true;
		if (!(i & 4095))
			cond_resched();
	}
	return false;
}

static void sp_buf_release(struct kref *ref)
{
	struct sp_buf *buf = container_of(ref, struct sp_buf, ref);

	xa_erase(&sp_all_bufs, buf->id);
	sp_nl_buf_event(buf, STRIXPEER_CMD_BUF_FREED_NTF);
	/*
	 * Pages still pinned by an MR keep their GUP pins and are freed by
	 * the last unpin; only our own reference goes here.
	 */
	sp_put_pages(buf->pages, buf->nr_pages);
	sp_uncharge(buf->charged_mm, buf->nr_pages);
	mmdrop(buf->charged_mm);
	atomic64_sub(buf->size, &sp_stats.pinned_bytes);
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

static void sp_vm_open(struct vm_area_struct *vma)
{
	struct sp_buf *buf = vma->vm_private_data;

	kref_get(&buf->ref);
	atomic_inc(&buf->map_count);
}

static void sp_vm_close(struct vm_area_struct *vma)
{
	struct sp_buf *buf = vma->vm_private_data;

	atomic_dec(&buf->map_count);
	sp_buf_put(buf);
}

/*
 * Every page is inserted at mmap time; a fault only happens after the
 * PTEs were zapped (madvise(MADV_DONTNEED), fork without page copy), and
 * re-inserts the same page.
 */
static vm_fault_t sp_vm_fault(struct vm_fault *vmf)
{
	struct sp_buf *buf = vmf->vma->vm_private_data;
	unsigned long idx = vmf->pgoff & SP_COOKIE_PGOFF_MASK;

	if (idx >= buf->nr_pages)
		return VM_FAULT_SIGBUS;
	return vmf_insert_page(vmf->vma, vmf->address, buf->pages[idx]);
}

static const struct vm_operations_struct sp_vm_ops = {
	.open = sp_vm_open,
	.close = sp_vm_close,
	.fault = sp_vm_fault,
};

/**
 * sp_buf_mmap() - map part of a buffer into a VMA
 * @buf: buffer; the VMA takes its own reference on success
 * @vma: shared mapping being created
 * @pgoff: first page of @buf to map
 *
 * Context: mmap handler, mmap lock held for writing.
 * Return: 0, -EINVAL for a private mapping or one beyond the buffer, or
 * vm_insert_pages()'s error.
 */
int sp_buf_mmap(struct sp_buf *buf, struct vm_area_struct *vma,
		unsigned long pgoff)
{
	unsigned long npages = vma_pages(vma);
	unsigned long left = npages;
	int ret;

	mmap_assert_write_locked(vma->vm_mm);

	/* A private mapping would copy on write away from the NIC's pages. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (pgoff >= buf->nr_pages || npages > buf->nr_pages - pgoff)
		return -EINVAL;

	/*
	 * No VM_IO or VM_PFNMAP: GUP refuses those, and pinning is the point.
	 * VM_MIXEDMAP is what vm_insert_pages() would set itself.
	 */
	sp_vm_flags_set(vma, VM_MIXEDMAP | VM_DONTEXPAND | VM_DONTDUMP);
	ret = vm_insert_pages(vma, vma->vm_start, buf->pages + pgoff, &left);
	if (ret)
		return ret;	/* the core unmaps what was inserted */

	vma->vm_ops = &sp_vm_ops;
	vma->vm_private_data = buf;
	sp_vm_open(vma);
	atomic64_inc(&sp_stats.mmaps);
	return 0;
}
