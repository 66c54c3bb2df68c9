// SPDX-License-Identifier: GPL-2.0
/*
 * sp_gpusim's two ways into a BO besides its ioctls (see gpusim.c for what
 * the module reproduces): the PRIME export with dynamic dma-buf ops, as
 * amdgpu_dmabuf_ops (attach/pin/unpin/map/unmap under the reservation
 * lock, moving the BO where the attachment can reach it), and the CPU
 * mapping that drm_gem_mmap() hands over (a PFN mapping whose fault
 * handler waits for the BO's move, as ttm_bo_vm_fault_idle()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include <drm/drm_gem.h>
#include <drm/drm_prime.h>
#include <drm/drm_vma_manager.h>

#include "gpusim_priv.h"
#include "gpusim_uapi.h"
#include "peersim_conftest.h"

bool gpusim_p2p;
module_param_named(p2p, gpusim_p2p, bool, 0644);
MODULE_PARM_DESC(p2p, "Importers may reach VRAM peer-to-peer (default N: VRAM BOs migrate to GTT when mapped)");

struct page *gpusim_scratch;	/* 2 MiB, the unbacked slots' DMA target */
/* A BO's mapping count reached 0 (REVOKE waits for that). */
DECLARE_WAIT_QUEUE_HEAD(gpusim_unmap_wq);

/* --- dma-buf export (amdgpu_dmabuf_ops-like: dynamic) ---------------------- */

/*
 * dma_buf_attach_revocable() (7.x): the importer supplies the callback an
 * exporter calls to take its mappings away. Before 7.x every dynamic
 * importer had to supply one.
 */
static bool gpusim_attach_revocable(struct dma_buf_attachment *attach)
{
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	return attach->importer_ops && attach->importer_ops->invalidate_mappings;
#else
	return attach->importer_ops && attach->importer_ops->move_notify;
#endif
}

static int gpusim_dmabuf_attach(struct dma_buf *dmabuf,
				struct dma_buf_attachment *attach)
{
	struct gpusim_bo *bo = to_bo(dmabuf->priv);

	/* vfio_pci_dma_buf_attach() */
	if (bo->revocable_only && !gpusim_attach_revocable(attach))
		return -EOPNOTSUPP;
	/* pci_p2pdma_distance() < 0 in amdgpu_dma_buf_attach() */
	if (!READ_ONCE(gpusim_p2p))
		attach->peer2peer = false;
	return 0;
}

/*
 * Where the BO must be for @attach to map it; to pin it (@all), where
 * every attachment of @attach's dma-buf can reach it.
 */
static u32 gpusim_reachable_domain(struct gpusim_bo *bo,
				   struct dma_buf_attachment *attach, bool all)
{
	struct dma_buf_attachment *a;

	if (bo->domain == SP_GPUSIM_DOMAIN_SYSTEM)
		return SP_GPUSIM_DOMAIN_GTT;
	if (bo->domain != SP_GPUSIM_DOMAIN_VRAM)
		return bo->domain;
	if (!all)
		return attach->peer2peer ? SP_GPUSIM_DOMAIN_VRAM :
					   SP_GPUSIM_DOMAIN_GTT;
	/* amdgpu_dma_buf_pin(): VRAM only if every attachment can do P2P */
	list_for_each_entry(a, &attach->dmabuf->attachments, node)
		if (!a->peer2peer)
			return SP_GPUSIM_DOMAIN_GTT;
	return SP_GPUSIM_DOMAIN_VRAM;
}

static int gpusim_dmabuf_pin(struct dma_buf_attachment *attach)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);
	struct dma_resv *resv = attach->dmabuf->resv;
	long lret;
	int ret;

	dma_resv_assert_held(resv);
	if (!bo->pin_count) {
		ret = gpusim_move(bo, gpusim_reachable_domain(bo, attach, true),
				  GPUSIM_MOVE_IN_PIN);
		if (ret < 0)
			return ret;
	}
	/* pin's contract: the memory is usable when it returns */
	lret = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, false,
				     MAX_SCHEDULE_TIMEOUT);
	if (lret < 0)
		return lret;
	bo->pin_count++;
	return 0;
}

static void gpusim_dmabuf_unpin(struct dma_buf_attachment *attach)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);

	dma_resv_assert_held(attach->dmabuf->resv);
	if (!WARN_ON(!bo->pin_count))
		bo->pin_count--;
}

static void gpusim_sgt_unmap(struct device *dev, struct sg_table *sgt,
			     enum dma_data_direction dir)
{
	bool scratch_done = false;
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_sg(sgt, sg, i) {
		if (!sg_dma_len(sg))
			break;	/* the rest was never mapped */
		if (sg_page(sg) == gpusim_scratch) {
			if (scratch_done)
				continue;
			scratch_done = true;
		}
		dma_unmap_page_attrs(dev, sg_dma_address(sg), sg_dma_len(sg),
				     dir, DMA_ATTR_SKIP_CPU_SYNC);
	}
	sg_free_table(sgt);
	kfree(sgt);
}

static struct sg_table *gpusim_dmabuf_map(struct dma_buf_attachment *attach,
					  enum dma_data_direction dir)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);
	size_t sz = gpusim_slot_size(bo->order);
	dma_addr_t scratch_dma = DMA_MAPPING_ERROR;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned long i;
	int ret;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (bo->revoked)
		return ERR_PTR(-ENODEV);
	if (!bo->pin_count) {
		/* amdgpu_dma_buf_map(): validate into a reachable domain */
		ret = gpusim_move(bo, gpusim_reachable_domain(bo, attach, false),
				  GPUSIM_MOVE_IN_MAP);
		if (ret < 0)
			return ERR_PTR(ret);
	} else if (bo->domain == SP_GPUSIM_DOMAIN_VRAM && !attach->peer2peer) {
		return ERR_PTR(-EINVAL);	/* pinned where this one cannot go */
	}

	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, bo->nslots, GFP_KERNEL);
	if (ret) {
		kfree(sgt);
		return ERR_PTR(ret);
	}
	for_each_sgtable_sg(sgt, sg, i) {
		struct page *page = bo->slots[i] ?: gpusim_scratch;
		dma_addr_t addr;

		sg_set_page(sg, page, sz, 0);
		sg_dma_len(sg) = 0;
		if (page == gpusim_scratch && scratch_dma != DMA_MAPPING_ERROR) {
			addr = scratch_dma;
		} else {
			addr = dma_map_page_attrs(attach->dev, page, 0, sz, dir,
						  DMA_ATTR_SKIP_CPU_SYNC);
			if (dma_mapping_error(attach->dev, addr)) {
				gpusim_sgt_unmap(attach->dev, sgt, dir);
				return ERR_PTR(-ENOMEM);
			}
			if (page == gpusim_scratch)
				scratch_dma = addr;
		}
		sg_dma_address(sg) = addr;
		sg_dma_len(sg) = sz;
	}
	atomic_inc(&bo->mappings);
	return sgt;
}

static void gpusim_dmabuf_unmap(struct dma_buf_attachment *attach,
				struct sg_table *sgt, enum dma_data_direction dir)
{
	struct gpusim_bo *bo = to_bo(attach->dmabuf->priv);

	gpusim_sgt_unmap(attach->dev, sgt, dir);
	if (atomic_dec_and_test(&bo->mappings))
		wake_up_all(&gpusim_unmap_wq);
}

static const struct dma_buf_ops gpusim_dmabuf_ops = {
	.attach = gpusim_dmabuf_attach,
	.pin = gpusim_dmabuf_pin,
	.unpin = gpusim_dmabuf_unpin,
	.map_dma_buf = gpusim_dmabuf_map,
	.unmap_dma_buf = gpusim_dmabuf_unmap,
	.release = drm_gem_dmabuf_release,
};

/**
 * gpusim_prime_export() - the GEM object's export callback
 * @obj: the BO's GEM object
 * @flags: the dma-buf file's flags
 *
 * As amdgpu_gem_prime_export(): DRM's export, with the driver's dynamic
 * ops.
 *
 * Return: the dma-buf, or an ERR_PTR().
 */
struct dma_buf *gpusim_prime_export(struct drm_gem_object *obj, int flags)
{
	struct dma_buf *buf = drm_gem_prime_export(obj, flags);

	if (!IS_ERR(buf))
		buf->ops = &gpusim_dmabuf_ops;
	return buf;
}

/* --- CPU mapping (drm_gem_mmap -> here) ------------------------------------ */

static vm_fault_t gpusim_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct gpusim_bo *bo = to_bo(vma->vm_private_data);
	unsigned long pgoff, slot;
	vm_fault_t ret = VM_FAULT_SIGBUS;
	struct page *page;
	long lret;

	if (dma_resv_lock_interruptible(bo->base.resv, NULL))
		return VM_FAULT_NOPAGE;
	/* ttm_bo_vm_fault_idle(): the move's copy must be done */
	lret = dma_resv_wait_timeout(bo->base.resv, DMA_RESV_USAGE_KERNEL, true,
				     MAX_SCHEDULE_TIMEOUT);
	if (lret < 0) {
		ret = lret == -ERESTARTSYS ? VM_FAULT_NOPAGE : VM_FAULT_SIGBUS;
		goto out;
	}
	pgoff = vmf->pgoff - drm_vma_node_start(&bo->base.vma_node);
	slot = pgoff >> bo->order;
	if (slot >= bo->nslots)
		goto out;
	page = bo->slots[slot];
	if (!page)
		goto out;	/* sparse and not populated */
	ret = vmf_insert_pfn(vma, vmf->address, page_to_pfn(page) +
			     (pgoff & ((1UL << bo->order) - 1)));
out:
	dma_resv_unlock(bo->base.resv);
	return ret;
}

const struct vm_operations_struct gpusim_vm_ops = {
	.fault = gpusim_vm_fault,
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

/**
 * gpusim_gem_mmap() - the GEM object's mmap callback
 * @obj: the BO's GEM object
 * @vma: the new mapping
 *
 * As ttm_bo_mmap_obj(): no copy-on-write; a PFN mapping, filled by
 * gpusim_vm_ops' fault handler.
 *
 * Return: 0, or -EINVAL for a copy-on-write mapping.
 */
int gpusim_gem_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	if (is_cow_mapping(vma->vm_flags))
		return -EINVAL;
#ifdef PSIM_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
#else
	vma->vm_flags |= VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP;
#endif
	vma->vm_page_prot = vm_get_page_prot(vma->vm_flags);
	return 0;
}
