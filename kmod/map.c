// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - mapping buffers into user space (the device's and the
 * dma-buf's mmap), with ordinary struct pages so that GUP works.
 *
 * Two ways to map, chosen at build time by a conftest probe (SP_HUGE_MAP):
 *
 * - 4 KiB path (kernels before 6.15): high-order allocations are split into
 *   order-0 pages, each with its own reference count, and every page is
 *   inserted at mmap time with vm_insert_pages() (VM_MIXEDMAP). The memory
 *   stays physically contiguous and naturally aligned for the NIC, but the
 *   CPU and GUP see 4 KiB entries.
 *
 * - PMD path (vmf_insert_folio_pmd(), 6.15+): 2 MiB allocations stay
 *   compound folios and are mapped on fault with one PMD entry each
 *   (huge_fault); smaller allocations are split and mapped on fault with
 *   one PTE each (fault, returning the page to the core). The VMA is an
 *   ordinary shared file mapping - deliberately not VM_MIXEDMAP: the core
 *   treats PMDs in VM_MIXEDMAP VMAs as "special" and would neither drop
 *   the folio's reference nor its rmap when such a PMD is split (partial
 *   munmap, mprotect or MADV_DONTNEED). Mappings are populated lazily; a
 *   registration (GUP) faults them in, 512 faults per GiB.
 *
 * On both paths the device's get_unmapped_area (main.c) places mappings so
 * that addresses and buffer offsets agree modulo 2 MiB, which PMD mapping
 * needs and which lets an HCA's MTT use 2 MiB pages.
 *
 * shmem buffers (allocator=shmem, shmem.c) map the buffer's shmem file
 * instead, on every kernel: see sp_shm_mmap().
 */
#include <linux/fs.h>
#include <linux/mempolicy.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "strixpeer.h"

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

#if SP_HUGE_MAP
/*
 * PMD path. The core calls ->huge_fault first where a 2 MiB-aligned range
 * of the VMA is unmapped; whatever it declines (VM_FAULT_FALLBACK) ends up
 * in ->fault, one 4 KiB page at a time. Both only read the buffer's page
 * array, which never changes while the VMA holds its reference, so they
 * work under the mmap lock or the per-VMA lock alike.
 */
static vm_fault_t sp_vm_fault(struct vm_fault *vmf)
{
	struct sp_buf *buf = vmf->vma->vm_private_data;
	unsigned long idx = vmf->pgoff & SP_COOKIE_PGOFF_MASK;
	struct page *page;

	if (idx >= buf->nr_pages)
		return VM_FAULT_SIGBUS;
	/* The core maps it, takes the rmap and keeps this reference. */
	page = buf->pages[idx];
	get_page(page);
	vmf->page = page;
	return 0;
}

static vm_fault_t sp_vm_huge_fault(struct vm_fault *vmf, unsigned int order)
{
	struct vm_area_struct *vma = vmf->vma;
	struct sp_buf *buf = vma->vm_private_data;
	unsigned long haddr = vmf->address & PMD_MASK;
	unsigned long idx;
	struct folio *folio;

	if (order != SP_HUGE_ORDER)
		return VM_FAULT_FALLBACK;
	if (haddr < vma->vm_start || haddr + PMD_SIZE > vma->vm_end)
		return VM_FAULT_FALLBACK;
	/* The buffer page at haddr: a 2 MiB page must start there. */
	idx = (vmf->pgoff - ((vmf->address - haddr) >> PAGE_SHIFT)) &
	      SP_COOKIE_PGOFF_MASK;
	if (!IS_ALIGNED(idx, 1UL << SP_HUGE_ORDER) ||
	    idx + (1UL << SP_HUGE_ORDER) > buf->nr_pages)
		return VM_FAULT_FALLBACK;
	folio = page_folio(buf->pages[idx]);
	if (folio_order(folio) != SP_HUGE_ORDER ||
	    &folio->page != buf->pages[idx])
		return VM_FAULT_FALLBACK;
	/* Takes its own folio reference and the rmap; zap drops both. */
	return vmf_insert_folio_pmd(vmf, folio, vmf->flags & FAULT_FLAG_WRITE);
}

#if SP_NODE_POLICY
/* The buffer's node, bound (see sp_node_policy_get()); never a reference. */
static struct mempolicy *sp_vm_get_policy(struct vm_area_struct *vma,
					  unsigned long addr, pgoff_t *ilx)
{
	struct sp_buf *buf = vma->vm_private_data;

	return sp_node_policy(buf->node);
}
#endif

static const struct vm_operations_struct sp_vm_ops = {
	.open = sp_vm_open,
	.close = sp_vm_close,
	.fault = sp_vm_fault,
	.huge_fault = sp_vm_huge_fault,
#if SP_NODE_POLICY
	.get_policy = sp_vm_get_policy,
#endif
};

/*
 * Not VM_MIXEDMAP (see the top of this file); VM_HUGEPAGE so that huge
 * faults happen under THP "madvise" too (THP "never", or MADV_NOHUGEPAGE
 * on the range, leaves 4 KiB entries).
 */
static int sp_buf_map_pages(struct sp_buf *buf, struct vm_area_struct *vma,
			    unsigned long pgoff)
{
	sp_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_HUGEPAGE);
	sp_node_policy_get(buf->node);
	return 0;
}
#else
/*
 * 4 KiB path. Every page is inserted at mmap time; a fault only happens
 * after the PTEs were zapped (madvise(MADV_DONTNEED), fork without page
 * copy), and re-inserts the same page.
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

/*
 * No VM_IO or VM_PFNMAP: GUP refuses those, and pinning is the point.
 * VM_MIXEDMAP is what vm_insert_pages() would set itself.
 */
static int sp_buf_map_pages(struct sp_buf *buf, struct vm_area_struct *vma,
			    unsigned long pgoff)
{
	unsigned long left = vma_pages(vma);

	sp_vm_flags_set(vma, VM_MIXEDMAP | VM_DONTEXPAND | VM_DONTDUMP);
	return vm_insert_pages(vma, vma->vm_start, buf->pages + pgoff, &left);
}
#endif

/*
 * What the VMAs of one mmap share (vm_private_data; open() on split and
 * fork takes another reference): the buffer and the file the mapping was
 * made through, which holds the module (/dev/strixpeer's f_op->owner) or
 * the dma-buf (and through it the module).
 */
struct sp_shm_vma {
	struct kref ref;
	struct sp_buf *buf;
	struct file *via;
};

static void sp_shm_vma_release(struct kref *ref)
{
	struct sp_shm_vma *sv = container_of(ref, struct sp_shm_vma, ref);

	sp_buf_put(sv->buf);
	/* deferred (task work or delayed_fput): after our close returned */
	fput(sv->via);
	kfree(sv);
}

static void sp_shm_vm_open(struct vm_area_struct *vma)
{
	struct sp_shm_vma *sv = vma->vm_private_data;

	kref_get(&sv->ref);
	atomic_inc(&sv->buf->map_count);
}

static void sp_shm_vm_close(struct vm_area_struct *vma)
{
	struct sp_shm_vma *sv = vma->vm_private_data;

	atomic_dec(&sv->buf->map_count);
	kref_put(&sv->ref, sp_shm_vma_release);
}

/*
 * The buffer's page at the file index; the core locks it, maps it (one
 * PMD for a 2 MiB folio at a suitably aligned address: finish_fault()) and
 * keeps this reference. buf->pages never changes while the VMA holds the
 * buffer, so this works under the mmap lock or the per-VMA lock alike.
 */
static vm_fault_t sp_shm_vm_fault(struct vm_fault *vmf)
{
	struct sp_shm_vma *sv = vmf->vma->vm_private_data;
	struct sp_buf *buf = sv->buf;
	struct page *page;

	if (vmf->pgoff >= buf->nr_pages)
		return VM_FAULT_SIGBUS;
	page = buf->pages[vmf->pgoff];
	get_page(page);
	vmf->page = page;
	return 0;
}

#if SP_VM_POLICY
/* The buffer's node, bound (see sp_node_policy_get()); never a reference. */
#ifdef STRIXPEER_HAVE_VM_OPS_GET_POLICY_ILX
static struct mempolicy *sp_shm_vm_get_policy(struct vm_area_struct *vma,
					      unsigned long addr, pgoff_t *ilx)
#else
static struct mempolicy *sp_shm_vm_get_policy(struct vm_area_struct *vma,
					      unsigned long addr)
#endif
{
	struct sp_shm_vma *sv = vma->vm_private_data;

	return sp_node_policy(sv->buf->node);
}
#endif

static const struct vm_operations_struct sp_shm_vm_ops = {
	.open = sp_shm_vm_open,
	.close = sp_shm_vm_close,
	.fault = sp_shm_vm_fault,
#if SP_VM_POLICY
	.get_policy = sp_shm_vm_get_policy,
#endif
};

/**
 * sp_shm_mmap() - map part of a shmem-backed buffer
 * @buf: buffer (buf->shm_file set); the mapping takes its own reference
 * @vma: shared mapping being created, checked by sp_buf_mmap()
 * @pgoff: first page of @buf to map
 *
 * Context: mmap handler, mmap lock held for writing.
 * Return: 0 or -ENOMEM.
 */
static int sp_shm_mmap(struct sp_buf *buf, struct vm_area_struct *vma,
		       unsigned long pgoff)
{
	struct sp_shm_vma *sv;

	mmap_assert_write_locked(vma->vm_mm);
	sv = kmalloc(sizeof(*sv), GFP_KERNEL_ACCOUNT);
	if (!sv)
		return -ENOMEM;
	kref_init(&sv->ref);
	kref_get(&buf->ref);
	sv->buf = buf;
	sv->via = get_file(vma->vm_file);

	/* no VM_HUGEPAGE needed: finish_fault() PMD-maps a 2 MiB folio */
	sp_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_pgoff = pgoff;
	vma_set_file(vma, buf->shm_file);
	vma->vm_ops = &sp_shm_vm_ops;
	vma->vm_private_data = sv;
	atomic_inc(&buf->map_count);
	sp_node_policy_get(buf->node);
	return 0;
}

/**
 * sp_buf_mmap() - map part of a buffer into a VMA
 * @buf: buffer; the VMA takes its own reference on success
 * @vma: shared mapping being created
 * @pgoff: first page of @buf to map
 *
 * Context: mmap handler, mmap lock held for writing.
 * Return: 0, -EINVAL for a private mapping or one beyond the buffer, or
 * vm_insert_pages()'s error (4 KiB path).
 */
int sp_buf_mmap(struct sp_buf *buf, struct vm_area_struct *vma,
		unsigned long pgoff)
{
	unsigned long npages = vma_pages(vma);
	int ret;

	mmap_assert_write_locked(vma->vm_mm);

	/* A private mapping would copy on write away from the NIC's pages. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (pgoff >= buf->nr_pages || npages > buf->nr_pages - pgoff)
		return -EINVAL;

	if (buf->shm_file) {
		ret = sp_shm_mmap(buf, vma, pgoff);
		if (!ret)
			atomic64_inc(&sp_stats.mmaps);
		return ret;
	}

	ret = sp_buf_map_pages(buf, vma, pgoff);
	if (ret)
		return ret;	/* the core unmaps what was inserted */

	vma->vm_ops = &sp_vm_ops;
	vma->vm_private_data = buf;
	sp_vm_open(vma);
	atomic64_inc(&sp_stats.mmaps);
	return 0;
}
