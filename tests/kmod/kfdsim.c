// SPDX-License-Identifier: GPL-2.0
/*
 * sp_kfdsim: what amdgpu's KFD does with a user pointer, for the tests of
 * strixpeer buffers as GPU memory, as a misc device (kfdsim_uapi.h).
 *
 * WATCH is a KFD userptr's mmu interval notifier and nothing else: it
 * counts the invalidations of a range by event, which is what a KFD
 * userptr pays for each one (its process's queues are evicted until the
 * range is revalidated). The NUMA-balancing test counts PROTECTION_VMA.
 *
 * USERPTR is a KFD userptr BO (hipHostRegister()), modelled on amdgpu_hmm.c
 * and amdgpu_ttm.c: an mmu interval notifier on the range, then
 * amdgpu_hmm_range_get_pages() - hmm_range_fault() between
 * mmu_interval_read_begin() and a retry check under the notifier lock -
 * and an sg table of the pages mapped for the device, as
 * amdgpu_ttm_tt_pin_userptr() maps it. With SP_KFDSIM_USERPTR_PIN the
 * pages are pinned instead (pin_user_pages_fast(FOLL_WRITE |
 * FOLL_LONGTERM)), as amdgpu did before HMM. ANONONLY refuses a VMA with a
 * file, as amdgpu_ttm_tt_get_user_pages() does. An invalidation marks the
 * range invalid under the notifier lock (KFD evicts the process's queues
 * there); the next GPU access revalidates it - gets the pages again, maps
 * them anew - as KFD's restore worker does before the queues run again
 * (here on demand, not after a delay). The "GPU" reads and writes the
 * pages of its sg table with the CPU, under the notifier lock and only
 * while the range is valid, as amdgpu updates GPU page tables only then.
 *
 * IMPORT* is amdgpu's import of a foreign dma-buf: kfdsim_dmabuf.c.
 *
 * Not modelled: GPU page tables and queues, eviction fences, the restore
 * delay, the per-BO ranges of a process (one userptr per file here).
 *
 * Locking: kfdsim_file.lock (mutex) serialises a file's ioctls and guards
 * the watch and the userptr's pages, sg table and DMA mapping; it is taken
 * before mmap_lock. kfdsim_file.notifier_lock (mutex, as amdgpu's
 * notifier_lock) guards up_valid and the counters of the userptr; the
 * invalidate callbacks take only it, and nothing allocates memory or
 * takes mmap_lock under it. Order: lock -> mmap_lock -> notifier_lock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/hmm.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/sched/mm.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kfdsim_priv.h"
#include "kfdsim_uapi.h"

/* The device the "GPU" maps userptr pages for. */
static struct platform_device *kfdsim_pdev;

struct kfdsim_file {
	struct mutex lock;		/* see the top of this file */
	bool watching;
	struct mmu_interval_notifier watch;
	atomic64_t events[SP_KFDSIM_NR_EVENTS];
	atomic64_t total;

	/* the userptr; fields under lock unless said otherwise */
	bool has_userptr;
	struct mmu_interval_notifier up_mni;
	unsigned long up_addr, up_length, up_npages;
	u32 up_flags;
	struct page **up_pages;
	unsigned long *up_pfns;		/* hmm_range_fault()'s output */
	unsigned long up_npinned;	/* SP_KFDSIM_USERPTR_PIN */
	struct sg_table up_sgt;
	bool up_mapped;			/* up_sgt built and DMA-mapped */
	u64 up_segments;
	struct mutex notifier_lock;	/* guards what follows */
	bool up_valid;
	u64 up_invalidations, up_unmaps, up_revalidations;

	struct kfdsim_import *imp;	/* kfdsim_dmabuf.c's; under lock */
};

static enum sp_kfdsim_event kfdsim_event(enum mmu_notifier_event ev)
{
	switch (ev) {
	case MMU_NOTIFY_UNMAP:
		return SP_KFDSIM_EV_UNMAP;
	case MMU_NOTIFY_CLEAR:
		return SP_KFDSIM_EV_CLEAR;
	case MMU_NOTIFY_PROTECTION_VMA:
		return SP_KFDSIM_EV_PROTECTION_VMA;
	case MMU_NOTIFY_PROTECTION_PAGE:
		return SP_KFDSIM_EV_PROTECTION_PAGE;
	case MMU_NOTIFY_SOFT_DIRTY:
		return SP_KFDSIM_EV_SOFT_DIRTY;
	case MMU_NOTIFY_RELEASE:
		return SP_KFDSIM_EV_RELEASE;
	case MMU_NOTIFY_MIGRATE:
		return SP_KFDSIM_EV_MIGRATE;
	default:
		return SP_KFDSIM_EV_OTHER;
	}
}

static void kfdsim_count(struct kfdsim_file *kf,
			 const struct mmu_notifier_range *range)
{
	atomic64_inc(&kf->events[kfdsim_event(range->event)]);
	atomic64_inc(&kf->total);
}

static bool kfdsim_watch_invalidate(struct mmu_interval_notifier *mni,
				    const struct mmu_notifier_range *range,
				    unsigned long cur_seq)
{
	struct kfdsim_file *kf = container_of(mni, struct kfdsim_file, watch);

	mmu_interval_set_seq(mni, cur_seq);
	kfdsim_count(kf, range);
	return true;
}

static const struct mmu_interval_notifier_ops kfdsim_watch_ops = {
	.invalidate = kfdsim_watch_invalidate,
};

static int kfdsim_ioc_watch(struct kfdsim_file *kf, void __user *arg)
{
	struct sp_kfdsim_watch w;
	int ret;

	if (copy_from_user(&w, arg, sizeof(w)))
		return -EFAULT;
	if (!w.length || !PAGE_ALIGNED(w.addr) || !PAGE_ALIGNED(w.length) ||
	    !current->mm)
		return -EINVAL;
	mutex_lock(&kf->lock);
	if (kf->watching) {
		ret = -EBUSY;
	} else {
		ret = mmu_interval_notifier_insert(&kf->watch, current->mm,
						   w.addr, w.length,
						   &kfdsim_watch_ops);
		kf->watching = !ret;
	}
	mutex_unlock(&kf->lock);
	return ret;
}

static int kfdsim_ioc_counts(struct kfdsim_file *kf, void __user *arg)
{
	struct sp_kfdsim_counts c = {};
	int i;

	for (i = 0; i < SP_KFDSIM_NR_EVENTS; i++)
		c.events[i] = atomic64_read(&kf->events[i]);
	c.total = atomic64_read(&kf->total);
	return copy_to_user(arg, &c, sizeof(c)) ? -EFAULT : 0;
}

static bool kfdsim_userptr_invalidate(struct mmu_interval_notifier *mni,
				      const struct mmu_notifier_range *range,
				      unsigned long cur_seq)
{
	struct kfdsim_file *kf = container_of(mni, struct kfdsim_file, up_mni);

	/* as amdgpu_hmm_invalidate_hsa(): the notifier lock may sleep */
	if (!mmu_notifier_range_blockable(range))
		return false;
	mutex_lock(&kf->notifier_lock);
	mmu_interval_set_seq(mni, cur_seq);
	kfdsim_count(kf, range);
	if (kf->up_valid) {		/* KFD: evict the queues */
		kf->up_valid = false;
		kf->up_invalidations++;
	}
	if (range->event == MMU_NOTIFY_UNMAP ||
	    range->event == MMU_NOTIFY_RELEASE)
		kf->up_unmaps++;
	mutex_unlock(&kf->notifier_lock);
	return true;
}

static const struct mmu_interval_notifier_ops kfdsim_userptr_ops = {
	.invalidate = kfdsim_userptr_invalidate,
};

/* Drop the pages: DMA mapping, sg table, pins. Context: kf->lock held. */
static void kfdsim_userptr_put_pages(struct kfdsim_file *kf)
{
	lockdep_assert_held(&kf->lock);
	if (kf->up_mapped) {
		dma_unmap_sgtable(&kfdsim_pdev->dev, &kf->up_sgt,
				  DMA_BIDIRECTIONAL, 0);
		sg_free_table(&kf->up_sgt);
		kf->up_mapped = false;
	}
	if (kf->up_npinned) {
		unpin_user_pages(kf->up_pages, kf->up_npinned);
		kf->up_npinned = 0;
	}
}

/*
 * amdgpu_ttm_tt_get_user_pages(): the VMA must exist, and under ANONONLY
 * have no file. Context: mmap_lock of @mm held.
 */
static int kfdsim_userptr_check_vma(struct kfdsim_file *kf,
				    struct mm_struct *mm)
{
	struct vm_area_struct *vma = vma_lookup(mm, kf->up_addr);

	if (!vma || vma->vm_end - kf->up_addr < kf->up_length)
		return -EFAULT;
	if ((kf->up_flags & SP_KFDSIM_USERPTR_ANONONLY) && vma->vm_file) {
		pr_info_ratelimited("%s[%d]: userptr at %#lx refused: AMDGPU_GEM_USERPTR_ANONONLY, and the VMA has a file (%pD)\n",
				    current->comm, task_tgid_nr(current),
				    kf->up_addr, vma->vm_file);
		return -EPERM;
	}
	return 0;
}

/* amdgpu_hmm_range_get_pages(). Return: 0 with *@seq, or -errno. */
static int kfdsim_userptr_hmm(struct kfdsim_file *kf, struct mm_struct *mm,
			      unsigned long *seq)
{
	struct hmm_range range = {
		.notifier = &kf->up_mni,
		.start = kf->up_addr,
		.end = kf->up_addr + kf->up_length,
		.hmm_pfns = kf->up_pfns,
		.default_flags = HMM_PFN_REQ_FAULT | HMM_PFN_REQ_WRITE,
	};
	unsigned long timeout = jiffies +
				msecs_to_jiffies(HMM_RANGE_DEFAULT_TIMEOUT);
	unsigned long i;
	int ret;

	do {
		range.notifier_seq = mmu_interval_read_begin(&kf->up_mni);
		mmap_read_lock(mm);
		ret = kfdsim_userptr_check_vma(kf, mm);
		if (!ret)
			ret = hmm_range_fault(&range);
		mmap_read_unlock(mm);
	} while (ret == -EBUSY && !time_after(jiffies, timeout));
	if (ret)
		return ret;
	for (i = 0; i < kf->up_npages; i++)
		kf->up_pages[i] = hmm_pfn_to_page(kf->up_pfns[i]);
	*seq = range.notifier_seq;
	return 0;
}

/* The pre-HMM way: long-term pins. Only from the userptr's own process. */
static int kfdsim_userptr_pin(struct kfdsim_file *kf, struct mm_struct *mm,
			      unsigned long *seq)
{
	int ret;

	if (mm != current->mm)
		return -ESRCH;
	*seq = mmu_interval_read_begin(&kf->up_mni);
	mmap_read_lock(mm);
	ret = kfdsim_userptr_check_vma(kf, mm);
	mmap_read_unlock(mm);
	if (ret)
		return ret;
	while (kf->up_npinned < kf->up_npages) {
		ret = pin_user_pages_fast(kf->up_addr +
					  (kf->up_npinned << PAGE_SHIFT),
					  kf->up_npages - kf->up_npinned,
					  FOLL_WRITE | FOLL_LONGTERM,
					  kf->up_pages + kf->up_npinned);
		if (ret <= 0) {
			kfdsim_userptr_put_pages(kf);
			return ret ? ret : -EFAULT;
		}
		kf->up_npinned += ret;
	}
	return 0;
}

/*
 * Get the pages, build and DMA-map the sg table, and mark the range valid
 * unless an invalidation came in between (then start over). Context:
 * kf->lock held, no page held.
 */
static int kfdsim_userptr_validate(struct kfdsim_file *kf)
{
	struct mm_struct *mm = kf->up_mni.mm;
	unsigned long seq;
	int tries, ret;

	lockdep_assert_held(&kf->lock);
	if (!mmget_not_zero(mm))
		return -ESRCH;		/* the process is gone */
	for (tries = 0; tries < 16; tries++) {
		if (kf->up_flags & SP_KFDSIM_USERPTR_PIN)
			ret = kfdsim_userptr_pin(kf, mm, &seq);
		else
			ret = kfdsim_userptr_hmm(kf, mm, &seq);
		if (ret)
			break;
		ret = sg_alloc_table_from_pages_segment(&kf->up_sgt,
				kf->up_pages, kf->up_npages, 0, kf->up_length,
				dma_get_max_seg_size(&kfdsim_pdev->dev),
				GFP_KERNEL);
		if (ret) {
			kfdsim_userptr_put_pages(kf);
			break;
		}
		ret = dma_map_sgtable(&kfdsim_pdev->dev, &kf->up_sgt,
				      DMA_BIDIRECTIONAL, 0);
		if (ret) {
			sg_free_table(&kf->up_sgt);
			kfdsim_userptr_put_pages(kf);
			break;
		}
		kf->up_mapped = true;
		kf->up_segments = kf->up_sgt.nents;
		mutex_lock(&kf->notifier_lock);
		if (!mmu_interval_read_retry(&kf->up_mni, seq)) {
			kf->up_valid = true;
			mutex_unlock(&kf->notifier_lock);
			break;
		}
		mutex_unlock(&kf->notifier_lock);
		kfdsim_userptr_put_pages(kf);
		ret = -EBUSY;
	}
	mmput(mm);
	return ret;
}

/* Context: kf->lock held. */
static void kfdsim_userptr_destroy(struct kfdsim_file *kf)
{
	lockdep_assert_held(&kf->lock);
	if (!kf->has_userptr)
		return;
	mmu_interval_notifier_remove(&kf->up_mni);
	kfdsim_userptr_put_pages(kf);
	kvfree(kf->up_pfns);
	kvfree(kf->up_pages);
	kf->up_pfns = NULL;
	kf->up_pages = NULL;
	kf->up_valid = false;
	kf->has_userptr = false;
}

static int kfdsim_ioc_userptr(struct kfdsim_file *kf, void __user *arg)
{
	struct sp_kfdsim_userptr u;
	int ret;

	if (copy_from_user(&u, arg, sizeof(u)))
		return -EFAULT;
	if (u.pad || u.flags & ~(SP_KFDSIM_USERPTR_PIN |
				 SP_KFDSIM_USERPTR_ANONONLY) ||
	    !u.length || !PAGE_ALIGNED(u.addr) || !PAGE_ALIGNED(u.length) ||
	    u.addr + u.length < u.addr || !current->mm)
		return -EINVAL;
	mutex_lock(&kf->lock);
	if (kf->has_userptr) {
		ret = -EBUSY;
		goto out;
	}
	kf->up_addr = u.addr;
	kf->up_length = u.length;
	kf->up_npages = u.length >> PAGE_SHIFT;
	kf->up_flags = u.flags;
	kf->up_pages = kvcalloc(kf->up_npages, sizeof(*kf->up_pages),
				GFP_KERNEL);
	kf->up_pfns = kvcalloc(kf->up_npages, sizeof(*kf->up_pfns),
			       GFP_KERNEL);
	ret = -ENOMEM;
	if (!kf->up_pages || !kf->up_pfns)
		goto out_free;
	ret = mmu_interval_notifier_insert(&kf->up_mni, current->mm, u.addr,
					   u.length, &kfdsim_userptr_ops);
	if (ret)
		goto out_free;
	kf->has_userptr = true;
	/* AMDGPU_GEM_USERPTR_VALIDATE: get the pages now */
	ret = kfdsim_userptr_validate(kf);
	if (ret)
		kfdsim_userptr_destroy(kf);
	goto out;

out_free:
	kvfree(kf->up_pfns);
	kvfree(kf->up_pages);
	kf->up_pfns = NULL;
	kf->up_pages = NULL;
out:
	mutex_unlock(&kf->lock);
	return ret;
}

/*
 * The GPU's access to [g->offset, + g->length) through the sg table.
 * Context: kf->lock and kf->notifier_lock held, the table mapped.
 */
static void kfdsim_gpu_access(struct kfdsim_file *kf, struct sp_kfdsim_gpu *g,
			      bool fill)
{
	struct sg_page_iter piter;
	u64 pos = g->offset & PAGE_MASK, end = g->offset + g->length;

	g->bad = ~0ULL;
	for_each_sgtable_page(&kf->up_sgt, &piter, g->offset >> PAGE_SHIFT) {
		u8 *va;
		u64 i, from, to;

		if (pos >= end)
			break;
		from = max(pos, g->offset) - pos;
		to = min_t(u64, end - pos, PAGE_SIZE);
		va = kmap_local_page(sg_page_iter_page(&piter));
		for (i = from; i < to; i++) {
			if (fill) {
				va[i] = kfdsim_pattern(pos + i, g->seed);
			} else if (va[i] != kfdsim_pattern(pos + i, g->seed)) {
				g->bad = pos + i;
				break;
			}
		}
		kunmap_local(va);
		if (g->bad != ~0ULL)
			break;
		pos += PAGE_SIZE;
		cond_resched();
	}
}

static int kfdsim_ioc_gpu(struct kfdsim_file *kf, void __user *arg,
			  bool fill)
{
	struct sp_kfdsim_gpu g;
	bool stale;
	int tries, ret = 0;

	if (copy_from_user(&g, arg, sizeof(g)))
		return -EFAULT;
	stale = g.flags & SP_KFDSIM_GPU_STALE;
	if (g.flags & ~SP_KFDSIM_GPU_STALE || (stale && fill))
		return -EINVAL;
	mutex_lock(&kf->lock);
	if (!kf->has_userptr) {
		ret = -ENOENT;
		goto out;
	}
	if (!g.length || g.offset >= kf->up_length ||
	    g.length > kf->up_length - g.offset ||
	    (stale && !(kf->up_flags & SP_KFDSIM_USERPTR_PIN))) {
		ret = -EINVAL;
		goto out;
	}
	for (tries = 0; ; tries++) {
		mutex_lock(&kf->notifier_lock);
		if (kf->up_valid || (stale && kf->up_mapped))
			break;		/* holding notifier_lock */
		mutex_unlock(&kf->notifier_lock);
		if (stale) {
			ret = -ENODATA;
			goto out;
		}
		if (tries == 16) {
			ret = -EBUSY;
			goto out;
		}
		/* KFD's restore: the pages again, mapped anew */
		kfdsim_userptr_put_pages(kf);
		ret = kfdsim_userptr_validate(kf);
		if (ret)
			goto out;
		mutex_lock(&kf->notifier_lock);
		kf->up_revalidations++;
		mutex_unlock(&kf->notifier_lock);
	}
	kfdsim_gpu_access(kf, &g, fill);
	mutex_unlock(&kf->notifier_lock);
	if (copy_to_user(arg, &g, sizeof(g)))
		ret = -EFAULT;
out:
	mutex_unlock(&kf->lock);
	return ret;
}

static int kfdsim_ioc_status(struct kfdsim_file *kf, void __user *arg)
{
	struct sp_kfdsim_status st = {};
	int ret = 0;

	mutex_lock(&kf->lock);
	if (!kf->has_userptr) {
		ret = -ENOENT;
	} else {
		st.pinned = kf->up_npinned != 0;
		st.nr_pages = kf->up_npages;
		st.dma_segments = kf->up_mapped ? kf->up_segments : 0;
		mutex_lock(&kf->notifier_lock);
		st.valid = kf->up_valid;
		st.invalidations = kf->up_invalidations;
		st.unmaps = kf->up_unmaps;
		st.revalidations = kf->up_revalidations;
		mutex_unlock(&kf->notifier_lock);
	}
	mutex_unlock(&kf->lock);
	if (!ret && copy_to_user(arg, &st, sizeof(st)))
		ret = -EFAULT;
	return ret;
}

static int kfdsim_ioc_destroy(struct kfdsim_file *kf)
{
	int ret = 0;

	mutex_lock(&kf->lock);
	if (kf->has_userptr)
		kfdsim_userptr_destroy(kf);
	else
		ret = -ENOENT;
	mutex_unlock(&kf->lock);
	return ret;
}

static long kfdsim_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	struct kfdsim_file *kf = file->private_data;

	switch (cmd) {
	case SP_KFDSIM_IOC_WATCH:
		return kfdsim_ioc_watch(kf, (void __user *)arg);
	case SP_KFDSIM_IOC_COUNTS:
		return kfdsim_ioc_counts(kf, (void __user *)arg);
	case SP_KFDSIM_IOC_USERPTR:
		return kfdsim_ioc_userptr(kf, (void __user *)arg);
	case SP_KFDSIM_IOC_FILL:
		return kfdsim_ioc_gpu(kf, (void __user *)arg, true);
	case SP_KFDSIM_IOC_CHECK:
		return kfdsim_ioc_gpu(kf, (void __user *)arg, false);
	case SP_KFDSIM_IOC_STATUS:
		return kfdsim_ioc_status(kf, (void __user *)arg);
	case SP_KFDSIM_IOC_DESTROY:
		return kfdsim_ioc_destroy(kf);
	case SP_KFDSIM_IOC_IMPORT:
	case SP_KFDSIM_IOC_IMPORT_FILL:
	case SP_KFDSIM_IOC_IMPORT_CHECK:
	case SP_KFDSIM_IOC_IMPORT_STATUS:
	case SP_KFDSIM_IOC_EVICT_IMPORT:
	case SP_KFDSIM_IOC_DESTROY_IMPORT: {
		long ret;

		mutex_lock(&kf->lock);
		ret = kfdsim_dmabuf_ioctl(&kfdsim_pdev->dev, &kf->imp, cmd,
					  (void __user *)arg);
		mutex_unlock(&kf->lock);
		return ret;
	}
	default:
		return -ENOTTY;
	}
}

static int kfdsim_open(struct inode *inode, struct file *file)
{
	struct kfdsim_file *kf = kzalloc(sizeof(*kf), GFP_KERNEL);

	if (!kf)
		return -ENOMEM;
	mutex_init(&kf->lock);
	mutex_init(&kf->notifier_lock);
	file->private_data = kf;
	return 0;
}

static int kfdsim_release(struct inode *inode, struct file *file)
{
	struct kfdsim_file *kf = file->private_data;

	mutex_lock(&kf->lock);
	kfdsim_userptr_destroy(kf);
	if (kf->imp)
		kfdsim_dmabuf_destroy(kf->imp);
	if (kf->watching)
		mmu_interval_notifier_remove(&kf->watch);
	mutex_unlock(&kf->lock);
	mutex_destroy(&kf->notifier_lock);
	mutex_destroy(&kf->lock);
	kfree(kf);
	return 0;
}

static const struct file_operations kfdsim_fops = {
	.owner = THIS_MODULE,
	.open = kfdsim_open,
	.release = kfdsim_release,
	.unlocked_ioctl = kfdsim_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice kfdsim_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "sp_kfdsim",
	.fops = &kfdsim_fops,
	.mode = 0666,
};

static int __init kfdsim_init(void)
{
	int ret;

	kfdsim_pdev = platform_device_register_simple("sp_kfdsim",
						      PLATFORM_DEVID_NONE,
						      NULL, 0);
	if (IS_ERR(kfdsim_pdev))
		return PTR_ERR(kfdsim_pdev);
	/* a GPU reaches all of system memory */
	ret = dma_coerce_mask_and_coherent(&kfdsim_pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		goto out_pdev;
	/*
	 * As amdgpu: segments of any length (the platform default is 64 KiB,
	 * which DMA-API debug enforces; the sg table is built within it).
	 */
	dma_set_max_seg_size(&kfdsim_pdev->dev, UINT_MAX);
	ret = misc_register(&kfdsim_misc);
	if (ret)
		goto out_pdev;
	return 0;

out_pdev:
	platform_device_unregister(kfdsim_pdev);
	return ret;
}

/* No file is open (each holds a module reference). */
static void __exit kfdsim_exit(void)
{
	misc_deregister(&kfdsim_misc);
	platform_device_unregister(kfdsim_pdev);
}

module_init(kfdsim_init);
module_exit(kfdsim_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("strixpeer developers");
MODULE_DESCRIPTION("strixpeer tests: what amdgpu's KFD does with a user pointer and a dma-buf");
