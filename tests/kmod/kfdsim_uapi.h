/* SPDX-License-Identifier: MIT */
/*
 * sp_kfdsim (tests/kmod/kfdsim.c): what amdgpu's KFD does with a user
 * pointer and a foreign dma-buf, as a misc device /dev/sp_kfdsim, for the
 * tests. One open file is one process's view: at most one watch, one
 * userptr and one dma-buf import at a time
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

/*
 * IMPORT: import a dma-buf as amdgpu imports a foreign one
 * (hipImportExternalMemory(), amdgpu_dma_buf.c): a dynamic attachment
 * (importer ops with allow_peer2peer and move_notify) mapped with
 * dma_buf_map_attachment() under the dma-buf's reservation lock when the
 * "GPU" validates it - at import and at its next use after a move_notify
 * or an EVICT - or, with SP_KFDSIM_IMPORT_STATIC, a static attachment
 * mapped once (the exporter pins). One import per file; the file holds a
 * dma-buf reference until DESTROY_IMPORT or close.
 */
#define SP_KFDSIM_IMPORT_STATIC		(1U << 0)

struct sp_kfdsim_import {
	__s32 fd;
	__u32 flags;
};

/* IMPORT_STATUS: the import's state. */
struct sp_kfdsim_import_status {
	__u64 size;		/* of the dma-buf */
	__u32 dynamic;		/* dma_buf_dynamic_attach() */
	__u32 mapped;		/* a mapping is held now */
	__u64 dma_segments;	/* entries of the last mapping */
	__u64 maps;		/* dma_buf_map_attachment() calls */
	__u64 move_notifies;	/* the exporter's (7.x: invalidate_mappings) */
	__u64 evictions;	/* EVICT_IMPORT: unmapped as TTM evicts a GTT BO */
	__u64 revalidations;	/* maps again at a use after either */
};

/*
 * IMPORT_FILL and IMPORT_CHECK take struct sp_kfdsim_gpu (flags 0) and
 * work as FILL and CHECK, through the import's DMA mapping.
 */
#define SP_KFDSIM_IOC_IMPORT		_IOW('K', 0x08, struct sp_kfdsim_import)
#define SP_KFDSIM_IOC_IMPORT_FILL	_IOWR('K', 0x09, struct sp_kfdsim_gpu)
#define SP_KFDSIM_IOC_IMPORT_CHECK	_IOWR('K', 0x0a, struct sp_kfdsim_gpu)
#define SP_KFDSIM_IOC_IMPORT_STATUS	_IOR('K', 0x0b, struct sp_kfdsim_import_status)
#define SP_KFDSIM_IOC_EVICT_IMPORT	_IO('K', 0x0c)
#define SP_KFDSIM_IOC_DESTROY_IMPORT	_IO('K', 0x0d)

#endif /* SP_KFDSIM_UAPI_H */
