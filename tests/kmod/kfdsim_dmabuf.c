// SPDX-License-Identifier: GPL-2.0
/*
 * sp_kfdsim's dma-buf import: what amdgpu does with a foreign dma-buf
 * (hipImportExternalMemory(), VK_EXT_external_memory_dma_buf), modelled on
 * amdgpu_dma_buf.c and amdgpu_ttm.c.
 *
 * amdgpu attaches dynamically (dma_buf_dynamic_attach() with importer ops
 * that allow peer-to-peer and have a move_notify), makes a "GTT" BO of it
 * and maps the attachment (dma_buf_map_attachment()) under the dma-buf's
 * reservation lock when TTM validates that BO - amdgpu_ttm_backend_bind()
 * - not at import. The exporter's move_notify (7.x: invalidate_mappings),
 * called with the reservation lock held, evicts the BO: the mapping goes
 * and the VMs' page tables of it are invalidated; the next command
 * submission or KFD restore validates the BO again, which maps it anew.
 * TTM evicts such a BO for its own reasons too (memory pressure): EVICT
 * does that. A static attachment (dma_buf_attach()) is mapped once; the
 * exporter pins the buffer and never moves it.
 *
 * The "GPU" reads and writes through the DMA addresses of the mapping
 * (sg_dma_address(), translated back with dma_to_phys(): there is no
 * IOMMU in front of the test device), never through sg_page(), which the
 * exporter need not fill (CONFIG_DMABUF_DEBUG scrambles it).
 *
 * strixpeer's exporter (kmod/export.c) never moves a buffer and so never
 * calls move_notify; the dma-buf keeps the buffer alive after the handle
 * is freed, the fd closed or the process gone.
 *
 * Locking: the file's lock (kfdsim.c) serialises the ioctls and guards
 * the struct. A dynamic import's mapping and counters are guarded by the
 * dma-buf's reservation lock, which move_notify is called under; a static
 * import's mapping is made at import and dropped at destroy, both under
 * the file's lock only. The reservation lock is taken under the file's
 * lock; nothing here takes the file's lock under it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-direct.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "peersim_conftest.h"
#include "kfdsim_priv.h"
#include "kfdsim_uapi.h"

/* Symbol namespaces are string literals since 6.13 (cdd30ebb1b9f). */
#ifdef PSIM_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

/* The importer callback for a moving buffer: renamed in 7.x. */
#ifdef PSIM_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
#define KFDSIM_DMA_BUF_MOVE_NOTIFY	invalidate_mappings
#else
#define KFDSIM_DMA_BUF_MOVE_NOTIFY	move_notify
#endif

struct kfdsim_import {
	struct device *dev;
	struct dma_buf *dbuf;
	struct dma_buf_attachment *attach;
	bool dynamic;
	/* dynamic: under dbuf->resv; static: see the top of this file */
	struct sg_table *sgt;
	u64 segments;
	u64 maps, move_notifies, evictions, revalidations;
	bool invalidated;		/* since the last map */
};

/*
 * Map a static attachment, or unmap it: dma_buf_map_attachment() wants the
 * reservation lock held since the _unlocked() variants for static
 * importers came (all the suite's kernels have them).
 */
static struct sg_table *kfdsim_map_static(struct dma_buf_attachment *attach)
{
#ifdef PSIM_HAVE_DMA_BUF_MAP_ATTACHMENT_UNLOCKED
	return dma_buf_map_attachment_unlocked(attach, DMA_BIDIRECTIONAL);
#else
	return dma_buf_map_attachment(attach, DMA_BIDIRECTIONAL);
#endif
}

static void kfdsim_unmap_static(struct dma_buf_attachment *attach,
				struct sg_table *sgt)
{
#ifdef PSIM_HAVE_DMA_BUF_MAP_ATTACHMENT_UNLOCKED
	dma_buf_unmap_attachment_unlocked(attach, sgt, DMA_BIDIRECTIONAL);
#else
	dma_buf_unmap_attachment(attach, sgt, DMA_BIDIRECTIONAL);
#endif
}

/* The mapping must cover the whole dma-buf. */
static int kfdsim_import_take(struct kfdsim_import *imp, struct sg_table *sgt)
{
	struct scatterlist *sg;
	u64 covered = 0;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i)
		covered += sg_dma_len(sg);
	if (covered < imp->dbuf->size) {
		pr_err("dma-buf exporter %s: the mapping covers %llu of %zu bytes\n",
		       imp->dbuf->exp_name, covered, imp->dbuf->size);
		return -EINVAL;
	}
	imp->sgt = sgt;
	imp->segments = sgt->nents;
	imp->maps++;
	if (imp->invalidated)
		imp->revalidations++;
	imp->invalidated = false;
	return 0;
}

/*
 * Validation (amdgpu_ttm_backend_bind() of an imported BO): map the
 * attachment unless mapped, then wait for the exporter's kernel fences
 * (its moves) before the GPU may touch it. Context: dbuf->resv held.
 */
static int kfdsim_import_validate(struct kfdsim_import *imp)
{
	struct sg_table *sgt;
	long lret;
	int ret;

	dma_resv_assert_held(imp->dbuf->resv);
	if (!imp->sgt) {
		sgt = dma_buf_map_attachment(imp->attach, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt))
			return PTR_ERR(sgt);
		ret = kfdsim_import_take(imp, sgt);
		if (ret) {
			dma_buf_unmap_attachment(imp->attach, sgt,
						 DMA_BIDIRECTIONAL);
			return ret;
		}
	}
	lret = dma_resv_wait_timeout(imp->dbuf->resv, DMA_RESV_USAGE_KERNEL,
				     true, msecs_to_jiffies(10000));
	if (lret < 0)
		return (int)lret;
	return lret ? 0 : -ETIMEDOUT;
}

/*
 * The BO leaves "GTT": give the mapping back, the next use maps again.
 * Context: dbuf->resv held (the exporter's, in move_notify).
 */
static void kfdsim_import_invalidate(struct kfdsim_import *imp)
{
	dma_resv_assert_held(imp->dbuf->resv);
	if (!imp->sgt)
		return;
	dma_buf_unmap_attachment(imp->attach, imp->sgt, DMA_BIDIRECTIONAL);
	imp->sgt = NULL;
	imp->invalidated = true;
}

/*
 * amdgpu_dma_buf_move_notify(): the exporter is about to move the buffer;
 * amdgpu validates the BO into no placement (unbinding unmaps it) and
 * invalidates the VMs' mappings of it. Context: the exporter holds resv.
 */
static void kfdsim_move_notify(struct dma_buf_attachment *attach)
{
	struct kfdsim_import *imp = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	imp->move_notifies++;
	kfdsim_import_invalidate(imp);
}

static const struct dma_buf_attach_ops kfdsim_attach_ops = {
	.allow_peer2peer = true,
	.KFDSIM_DMA_BUF_MOVE_NOTIFY = kfdsim_move_notify,
};

void kfdsim_dmabuf_destroy(struct kfdsim_import *imp)
{
	struct dma_buf *dbuf = imp->dbuf;

	if (imp->dynamic) {
		dma_resv_lock(dbuf->resv, NULL);
		kfdsim_import_invalidate(imp);
		dma_resv_unlock(dbuf->resv);
	} else if (imp->sgt) {
		kfdsim_unmap_static(imp->attach, imp->sgt);
	}
	dma_buf_detach(dbuf, imp->attach);
	dma_buf_put(dbuf);
	kfree(imp);
}

static int kfdsim_ioc_import(struct device *dev, struct kfdsim_import **impp,
			     void __user *arg)
{
	struct sp_kfdsim_import req;
	struct kfdsim_import *imp;
	struct sg_table *sgt;
	int ret;

	if (copy_from_user(&req, arg, sizeof(req)))
		return -EFAULT;
	if (req.flags & ~SP_KFDSIM_IMPORT_STATIC)
		return -EINVAL;
	if (*impp)
		return -EBUSY;
	/* the "GPU" translates DMA addresses back with dma_to_phys() */
	if (device_iommu_mapped(dev))
		return -EOPNOTSUPP;
	imp = kzalloc(sizeof(*imp), GFP_KERNEL);
	if (!imp)
		return -ENOMEM;
	imp->dev = dev;
	imp->dynamic = !(req.flags & SP_KFDSIM_IMPORT_STATIC);
	imp->dbuf = dma_buf_get(req.fd);
	if (IS_ERR(imp->dbuf)) {
		ret = PTR_ERR(imp->dbuf);
		goto out_free;
	}
	if (imp->dynamic)
		imp->attach = dma_buf_dynamic_attach(imp->dbuf, dev,
						     &kfdsim_attach_ops, imp);
	else
		imp->attach = dma_buf_attach(imp->dbuf, dev);
	if (IS_ERR(imp->attach)) {
		ret = PTR_ERR(imp->attach);
		goto out_put;
	}
	if (imp->dynamic) {
		/* the BO is validated when first used; here, at once */
		ret = dma_resv_lock_interruptible(imp->dbuf->resv, NULL);
		if (ret)
			goto out_detach;
		ret = kfdsim_import_validate(imp);
		if (ret)
			kfdsim_import_invalidate(imp);
		dma_resv_unlock(imp->dbuf->resv);
		if (ret)
			goto out_detach;
	} else {
		sgt = kfdsim_map_static(imp->attach);
		if (IS_ERR(sgt)) {
			ret = PTR_ERR(sgt);
			goto out_detach;
		}
		ret = kfdsim_import_take(imp, sgt);
		if (ret) {
			kfdsim_unmap_static(imp->attach, sgt);
			goto out_detach;
		}
	}
	*impp = imp;
	return 0;

out_detach:
	dma_buf_detach(imp->dbuf, imp->attach);
out_put:
	dma_buf_put(imp->dbuf);
out_free:
	kfree(imp);
	return ret;
}

/*
 * The GPU's access to [g->offset, + g->length) of the dma-buf through the
 * DMA addresses of the mapping. Context: the mapping is held (resv for a
 * dynamic import).
 */
static int kfdsim_import_access(struct kfdsim_import *imp,
				struct sp_kfdsim_gpu *g, bool fill)
{
	u64 pos = 0, end = g->offset + g->length;
	struct scatterlist *sg;
	unsigned int i;

	g->bad = ~0ULL;
	for_each_sgtable_dma_sg(imp->sgt, sg, i) {
		u64 len = sg_dma_len(sg), x;

		if (pos >= end)
			break;
		x = max(pos, g->offset);
		while (x < min(pos + len, end)) {
			phys_addr_t phys = dma_to_phys(imp->dev,
						       sg_dma_address(sg) +
						       (x - pos));
			unsigned long pfn = PHYS_PFN(phys);
			size_t off = offset_in_page(phys), k, j;
			u8 *va;

			k = min_t(u64, PAGE_SIZE - off, min(pos + len, end) - x);
			if (!pfn_valid(pfn)) {
				pr_warn_ratelimited("DMA to %pa: not RAM\n", &phys);
				return -EIO;
			}
			va = kmap_local_page(pfn_to_page(pfn));
			for (j = 0; j < k; j++) {
				if (fill) {
					va[off + j] = kfdsim_pattern(x + j, g->seed);
				} else if (va[off + j] !=
					   kfdsim_pattern(x + j, g->seed)) {
					g->bad = x + j;
					break;
				}
			}
			kunmap_local(va);
			if (g->bad != ~0ULL)
				return 0;
			x += k;
			cond_resched();
		}
		pos += len;
	}
	return 0;
}

static int kfdsim_ioc_import_gpu(struct kfdsim_import *imp, void __user *arg,
				 bool fill)
{
	struct sp_kfdsim_gpu g;
	int ret;

	if (copy_from_user(&g, arg, sizeof(g)))
		return -EFAULT;
	if (!imp)
		return -ENOENT;
	if (g.flags || !g.length || g.offset >= imp->dbuf->size ||
	    g.length > imp->dbuf->size - g.offset)
		return -EINVAL;
	if (imp->dynamic) {
		/* a command submission: the BO validated under resv */
		ret = dma_resv_lock_interruptible(imp->dbuf->resv, NULL);
		if (ret)
			return ret;
		ret = kfdsim_import_validate(imp);
		if (!ret)
			ret = kfdsim_import_access(imp, &g, fill);
		dma_resv_unlock(imp->dbuf->resv);
	} else {
		ret = kfdsim_import_access(imp, &g, fill);
	}
	if (!ret && copy_to_user(arg, &g, sizeof(g)))
		ret = -EFAULT;
	return ret;
}

static int kfdsim_ioc_import_status(struct kfdsim_import *imp,
				    void __user *arg)
{
	struct sp_kfdsim_import_status st = {};

	if (!imp)
		return -ENOENT;
	if (imp->dynamic)
		dma_resv_lock(imp->dbuf->resv, NULL);
	st.size = imp->dbuf->size;
	st.dynamic = imp->dynamic;
	st.mapped = imp->sgt != NULL;
	st.dma_segments = imp->segments;
	st.maps = imp->maps;
	st.move_notifies = imp->move_notifies;
	st.evictions = imp->evictions;
	st.revalidations = imp->revalidations;
	if (imp->dynamic)
		dma_resv_unlock(imp->dbuf->resv);
	return copy_to_user(arg, &st, sizeof(st)) ? -EFAULT : 0;
}

/* TTM evicts the imported BO from "GTT": only a dynamic one moves. */
static int kfdsim_ioc_evict_import(struct kfdsim_import *imp)
{
	int ret;

	if (!imp)
		return -ENOENT;
	if (!imp->dynamic)
		return -EINVAL;
	ret = dma_resv_lock_interruptible(imp->dbuf->resv, NULL);
	if (ret)
		return ret;
	if (imp->sgt)
		imp->evictions++;
	kfdsim_import_invalidate(imp);
	dma_resv_unlock(imp->dbuf->resv);
	return 0;
}

long kfdsim_dmabuf_ioctl(struct device *dev, struct kfdsim_import **imp,
			 unsigned int cmd, void __user *arg)
{
	switch (cmd) {
	case SP_KFDSIM_IOC_IMPORT:
		return kfdsim_ioc_import(dev, imp, arg);
	case SP_KFDSIM_IOC_IMPORT_FILL:
		return kfdsim_ioc_import_gpu(*imp, arg, true);
	case SP_KFDSIM_IOC_IMPORT_CHECK:
		return kfdsim_ioc_import_gpu(*imp, arg, false);
	case SP_KFDSIM_IOC_IMPORT_STATUS:
		return kfdsim_ioc_import_status(*imp, arg);
	case SP_KFDSIM_IOC_EVICT_IMPORT:
		return kfdsim_ioc_evict_import(*imp);
	case SP_KFDSIM_IOC_DESTROY_IMPORT:
		if (!*imp)
			return -ENOENT;
		kfdsim_dmabuf_destroy(*imp);
		*imp = NULL;
		return 0;
	default:
		return -ENOTTY;
	}
}
