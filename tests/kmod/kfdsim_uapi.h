/* SPDX-License-Identifier: MIT */
/*
 * sp_kfdsim (tests/kmod/kfdsim.c): what amdgpu's KFD does with a user
 * pointer, as a misc device /dev/sp_kfdsim, for the tests. One open file
 * is one process's view: at most one watch and one userptr at a time
 * (the userptr lives in the mm of the process that made it; the file may
 * be used from another).
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

/* COUNTS: invalidations seen by the watch and the userptr, by event. */
struct sp_kfdsim_counts {
	__u64 events[SP_KFDSIM_NR_EVENTS];
	__u64 total;
};

/*
 * USERPTR: register [addr, addr + length) as KFD registers a userptr BO
 * (hipHostRegister): an mmu interval notifier, then the pages got with
 * hmm_range_fault() (amdgpu_hmm_range_get_pages()) - or, with
 * SP_KFDSIM_USERPTR_PIN, pinned with pin_user_pages_fast(FOLL_WRITE |
 * FOLL_LONGTERM), as amdgpu did before HMM - in an sg table mapped for
 * the device. SP_KFDSIM_USERPTR_ANONONLY: refuse a VMA with a file, as
 * amdgpu does for AMDGPU_GEM_USERPTR_ANONONLY (libdrm's
 * amdgpu_create_bo_from_user_mem(), Mesa/RADV's host-pointer import):
 * -EPERM.
 */
#define SP_KFDSIM_USERPTR_PIN		(1U << 0)
#define SP_KFDSIM_USERPTR_ANONONLY	(1U << 1)

struct sp_kfdsim_userptr {
	__u64 addr;
	__u64 length;
	__u32 flags;
	__u32 pad;
};

/*
 * FILL, CHECK: the "GPU" writes the test pattern (tests/lib/sp_test.h's
 * sp_pattern(): byte at buffer position p is pattern(p, seed)) into
 * [offset, offset + length) of the userptr, or checks it there, through
 * its sg table - revalidating first when an invalidation left the range
 * invalid, as KFD's restore worker does. CHECK's bad is the first wrong
 * byte's offset, or ~0. SP_KFDSIM_GPU_STALE (CHECK, PIN userptrs only):
 * read the pages still held without revalidating - after an unmap, what
 * a pinned registration still holds.
 */
#define SP_KFDSIM_GPU_STALE	(1U << 0)

struct sp_kfdsim_gpu {
	__u64 offset;
	__u64 length;
	__u32 seed;
	__u32 flags;
	__u64 bad;
};

/* STATUS: the userptr's state. */
struct sp_kfdsim_status {
	__u32 valid;		/* pages current (no invalidation since) */
	__u32 pinned;		/* holds page pins (SP_KFDSIM_USERPTR_PIN) */
	__u64 nr_pages;
	__u64 dma_segments;	/* sg table entries after the DMA mapping */
	__u64 invalidations;	/* of a valid range: evictions, as KFD's */
	__u64 unmaps;		/* of those, unmap or exit (UNMAP, RELEASE) */
	__u64 revalidations;	/* restores after an invalidation */
};

#define SP_KFDSIM_IOC_WATCH	_IOW('K', 0x01, struct sp_kfdsim_watch)
#define SP_KFDSIM_IOC_COUNTS	_IOR('K', 0x02, struct sp_kfdsim_counts)
#define SP_KFDSIM_IOC_USERPTR	_IOW('K', 0x03, struct sp_kfdsim_userptr)
#define SP_KFDSIM_IOC_FILL	_IOWR('K', 0x04, struct sp_kfdsim_gpu)
#define SP_KFDSIM_IOC_CHECK	_IOWR('K', 0x05, struct sp_kfdsim_gpu)
#define SP_KFDSIM_IOC_STATUS	_IOR('K', 0x06, struct sp_kfdsim_status)
#define SP_KFDSIM_IOC_DESTROY	_IO('K', 0x07)

#endif /* SP_KFDSIM_UAPI_H */
