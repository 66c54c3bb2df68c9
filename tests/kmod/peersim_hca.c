// SPDX-License-Identifier: GPL-2.0
/*
 * sp_peersim's HCA half (peersim_hca.c): the simulated HCA that drives
 * the simulated core of peersim_core.c (see there for what the module
 * simulates). It owns the HCA's platform device (whose struct device the
 * DMA API maps for), its misc device and ioctls, the MRs (their
 * translation table, the "MTT", and the DMA fence), the dma-buf path
 * (ib_umem_dmabuf), the "DMA" copies, and module_init/module_exit, which
 * bring up the core first, then the HCA. The dma-buf path is
 * peersim_hca_dmabuf.c, the "DMA" copies and the ioctls are
 * peersim_hca_ioctl.c; peersim_hca_priv.h is what the three share.
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
#include "peersim_hca_priv.h"

/* Symbol namespaces are string literals since 6.13 (cdd30ebb1b9f). */
#ifdef PSIM_HAVE_MODULE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

static unsigned int max_seg_size;
module_param(max_seg_size, uint, 0444);
MODULE_PARM_DESC(max_seg_size,
		 "DMA max segment size of the simulated HCA in bytes (0: the kernel default, 64 KiB; mlx5 uses 2 GiB)");

struct device *psim_dev;
static struct platform_device *psim_pdev;

atomic64_t psim_live_mrs = ATOMIC64_INIT(0);

/* --- MRs -------------------------------------------------------------------- */

/**
 * psim_mr_alloc() - a new MR of the calling process
 * @addr: registered address (dma-buf: offset into the dma-buf)
 * @length: registered length
 * @writable: registered with PEERSIM_ACCESS_WRITE
 *
 * The MR holds the caller's mm (mmgrab()) and one reference (the fd's).
 *
 * Return: the MR, or NULL.
 */
struct psim_mr *psim_mr_alloc(u64 addr, u64 length, bool writable)
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

void psim_mr_free(struct kref *kref)
{
	struct psim_mr *mr = container_of(kref, struct psim_mr, kref);

	kvfree(mr->mtt);
	if (mr->dbuf)
		dma_buf_put(mr->dbuf);
	mutex_destroy(&mr->mapping_lock);
	kfree(mr);
}


/*
 * The DMA fence: waits for in-flight DMA, then no DMA touches the MR's
 * memory any more. For an invalidation this is what revoking the mkey is
 * to mlx5; deregistration does it first too.
 */
void psim_mr_fence(struct psim_mr *mr, bool invalidation)
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
int psim_mtt_build(struct psim_mr *mr, struct scatterlist *sgl,
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

	ret = psim_core_init();
	if (ret)
		return ret;

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
	psim_core_exit();
	platform_device_unregister(psim_pdev);
	platform_driver_unregister(&psim_driver);
	psim_dev = NULL;
}

module_init(psim_init);
module_exit(psim_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("strixpeer developers");
MODULE_DESCRIPTION("strixpeer tests: simulated PeerDirect core and HCA");
