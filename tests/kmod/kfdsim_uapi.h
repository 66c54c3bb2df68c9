/* SPDX-License-Identifier: MIT */
/*
 * sp_kfdsim (tests/kmod/kfdsim.c): what amdgpu's KFD does with a user
 * pointer, as a misc device /dev/sp_kfdsim, for the tests. One open file
 * is one process's view: at most one watch and one userptr at a time.
 */
#ifndef SP_KFDSIM_UAPI_H
#define SP_KFDSIM_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define SP_KFDSIM_DEVICE	"/dev/sp_kfdsim"

/* The mmu notifier events, by what they are (the kernel's enum moves). */
enum sp_kfdsim_event {
	SP_KFDSIM_EV_UNMAP,
	SP_KFDSIM_EV_CLEAR,
	SP_KFDSIM_EV_PROTECTION_VMA,
	SP_KFDSIM_EV_PROTECTION_PAGE,
	SP_KFDSIM_EV_SOFT_DIRTY,
	SP_KFDSIM_EV_RELEASE,
	SP_KFDSIM_EV_MIGRATE,
	SP_KFDSIM_EV_OTHER,
	SP_KFDSIM_NR_EVENTS = 16,
};

/* WATCH: an mmu interval notifier on [addr, addr + length) that counts. */
struct sp_kfdsim_watch {
	__u64 addr;
	__u64 length;
};

/* COUNTS: invalidations seen by the watch (or the userptr), by event. */
struct sp_kfdsim_counts {
	__u64 events[SP_KFDSIM_NR_EVENTS];
	__u64 total;
};

#define SP_KFDSIM_IOC_WATCH	_IOW('K', 0x01, struct sp_kfdsim_watch)
#define SP_KFDSIM_IOC_COUNTS	_IOR('K', 0x02, struct sp_kfdsim_counts)

#endif /* SP_KFDSIM_UAPI_H */
