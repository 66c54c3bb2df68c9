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
 * Locking: kfdsim_file.lock (mutex) guards a file's watch; the invalidate
 * callback only counts (atomics).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kfdsim_uapi.h"

struct kfdsim_file {
	struct mutex lock;		/* guards watching */
	bool watching;
	struct mmu_interval_notifier watch;
	atomic64_t events[SP_KFDSIM_NR_EVENTS];
	atomic64_t total;
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

static long kfdsim_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	struct kfdsim_file *kf = file->private_data;

	switch (cmd) {
	case SP_KFDSIM_IOC_WATCH:
		return kfdsim_ioc_watch(kf, (void __user *)arg);
	case SP_KFDSIM_IOC_COUNTS:
		return kfdsim_ioc_counts(kf, (void __user *)arg);
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
	file->private_data = kf;
	return 0;
}

static int kfdsim_release(struct inode *inode, struct file *file)
{
	struct kfdsim_file *kf = file->private_data;

	if (kf->watching)
		mmu_interval_notifier_remove(&kf->watch);
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
	return misc_register(&kfdsim_misc);
}

static void __exit kfdsim_exit(void)
{
	misc_deregister(&kfdsim_misc);
}

module_init(kfdsim_init);
module_exit(kfdsim_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("strixpeer developers");
MODULE_DESCRIPTION("strixpeer tests: what amdgpu's KFD does with a user pointer");
