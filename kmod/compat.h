/* SPDX-License-Identifier: GPL-2.0 */
/*
 * strixpeer - thin wrappers over kernel API differences.
 *
 * Each STRIXPEER_HAVE_* comes from one compile test in kmod/conftest.sh,
 * run against the target kernel at build time (kmod/conftest.h). Logic
 * files call the sp_* wrappers below and never test kernel versions.
 */
#ifndef _STRIXPEER_COMPAT_H
#define _STRIXPEER_COMPAT_H

#include <linux/mm.h>
#include <linux/huge_mm.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/fs_context.h>
#include <linux/shmem_fs.h>
#include <net/genetlink.h>

#include "conftest.h"

/* vm_flags became read-only with vm_flags_set() in 6.3 (bc292ab00f6c). */
static inline void sp_vm_flags_set(struct vm_area_struct *vma,
				   unsigned long flags)
{
#ifdef STRIXPEER_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/*
 * The parsed attributes of a dump request: struct genl_dumpit_info holds a
 * struct genl_info since the split-ops rework (6.2-6.6); 6.1 has ->attrs.
 */
static inline struct nlattr **sp_genl_dump_attrs(struct netlink_callback *cb)
{
#ifdef STRIXPEER_HAVE_GENL_DUMPIT_INFO_INFO
	return genl_dumpit_info(cb)->info.attrs;
#else
	return genl_dumpit_info(cb)->attrs;
#endif
}

/* Symbol namespaces are string literals since 6.13 (cdd30ebb1b9f). */
#ifdef STRIXPEER_HAVE_MODULE_IMPORT_NS_IDENT
#define SP_MODULE_IMPORT_NS_DMA_BUF()	MODULE_IMPORT_NS(DMA_BUF)
#else
#define SP_MODULE_IMPORT_NS_DMA_BUF()	MODULE_IMPORT_NS("DMA_BUF")
#endif

/*
 * The dma_buf_attach_ops member the exporter calls before it moves a buffer:
 * move_notify until 7.x renamed it invalidate_mappings.
 */
#ifdef STRIXPEER_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
#define SP_DMA_BUF_MOVE_NOTIFY	invalidate_mappings
#else
#define SP_DMA_BUF_MOVE_NOTIFY	move_notify
#endif

/*
 * PMD mappings of a buffer's 2 MiB pages from the fault handler: 6.15
 * (vmf_insert_folio_pmd()). SP_HUGE_MAP says whether this build has them;
 * without, buffer.c splits every allocation and maps 4 KiB pages.
 */
#ifdef STRIXPEER_HAVE_VMF_INSERT_FOLIO_PMD
#define SP_HUGE_MAP		1
#else
#define SP_HUGE_MAP		0
#endif

/*
 * A get_policy vm_op on buffer mappings (buffer.c): where the PMD path maps
 * buffers as ordinary file mappings, NUMA balancing would otherwise scan
 * them (see sp_vm_get_policy()). Needs CONFIG_NUMA and 6.7's signature.
 */
#if SP_HUGE_MAP && defined(CONFIG_NUMA) && \
	defined(STRIXPEER_HAVE_VM_OPS_GET_POLICY_ILX)
#define SP_NODE_POLICY		1
#else
#define SP_NODE_POLICY		0
#endif

/*
 * The device's get_unmapped_area: 2 MiB-aligned placement (address and
 * buffer offset congruent modulo 2 MiB) where thp_get_unmapped_area() is
 * there to do it (CONFIG_TRANSPARENT_HUGEPAGE), else the mm's default.
 */
#ifdef STRIXPEER_HAVE_THP_GET_UNMAPPED_AREA
#define sp_get_unmapped_area	thp_get_unmapped_area
#else
#define sp_get_unmapped_area	NULL
#endif

/*
 * A get_policy vm_op on shmem-backed buffer mappings (shmem.c): those are
 * never VM_MIXEDMAP, on any kernel, so NUMA balancing would scan them.
 * 6.7+ has the interleave-index form, 6.1-6.6 get_policy(vma, addr).
 */
#if defined(CONFIG_NUMA) && (defined(STRIXPEER_HAVE_VM_OPS_GET_POLICY_ILX) || \
	defined(STRIXPEER_HAVE_VM_OPS_GET_POLICY_ADDR))
#define SP_VM_POLICY		1
#else
#define SP_VM_POLICY		0
#endif

/* A buffer's shmem file: 7.x passes vma_flags_t, earlier VM_* flags. */
static inline struct file *sp_shmem_file_setup(struct vfsmount *mnt,
					       const char *name, loff_t size)
{
#ifdef STRIXPEER_HAVE_SHMEM_FILE_SETUP_VMA_FLAGS
	return shmem_file_setup_with_mnt(mnt, name, size, EMPTY_VMA_FLAGS);
#else
	return shmem_file_setup_with_mnt(mnt, name, size, 0);
#endif
}

/*
 * The folio at @index of a shmem file, allocated with @gfp if absent, with
 * a reference. 6.1 has the page form only; its reference is the folio's.
 */
static inline struct folio *sp_shmem_read_folio(struct address_space *mapping,
						pgoff_t index, gfp_t gfp)
{
#ifdef STRIXPEER_HAVE_SHMEM_READ_FOLIO_GFP
	return shmem_read_folio_gfp(mapping, index, gfp);
#else
	struct page *page = shmem_read_mapping_page_gfp(mapping, index, gfp);

	return IS_ERR(page) ? ERR_CAST(page) : page_folio(page);
#endif
}

/* An internal mount: fc_mount_longterm() where it exists (7.x). */
static inline struct vfsmount *sp_fc_mount(struct fs_context *fc)
{
#ifdef STRIXPEER_HAVE_FC_MOUNT_LONGTERM
	return fc_mount_longterm(fc);
#else
	return fc_mount(fc);
#endif
}

#endif /* _STRIXPEER_COMPAT_H */
