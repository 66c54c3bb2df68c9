/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * sp_gpusim's ioctl interface: driver ioctls on its DRM device (card or
 * render node; every ioctl is allowed on render nodes). Find the device by
 * DRM_IOCTL_VERSION's name, SP_GPUSIM_DRIVER_NAME.
 *
 * sp_gpusim is a stand-in for amdgpu/TTM as dma-buf importers and CPU
 * mappings see a GPU buffer object (BO): see tests/kmod/gpusim.c's header
 * for what it reproduces and what not.
 *
 * Generic DRM ioctls work as on any GEM driver: GEM_CLOSE,
 * PRIME_HANDLE_TO_FD (a dynamic dma-buf exporter with pin/unpin), and
 * mmap() of the render/card fd at a BO's mmap_offset (drm_gem_mmap: a
 * VM_PFNMAP|VM_IO mapping, faulted in page by page; MAP_PRIVATE is refused
 * with EINVAL, as TTM refuses copy-on-write mappings).
 *
 * Errors worth knowing:
 *   EINVAL  bad size, domain, flags, pad; a range outside the BO
 *   ENOENT  no BO with that handle in this file
 *   EBUSY   MOVE/EVICT of a pinned BO (TTM never moves pinned BOs);
 *	     POPULATE of a BO that has been exported
 *   ENOMEM  no memory for the new backing (nothing moved)
 *   E2BIG   CREATE above the size limit (see SP_GPUSIM_MAX_*)
 */
#ifndef _UAPI_SP_GPUSIM_H
#define _UAPI_SP_GPUSIM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define SP_GPUSIM_DRIVER_NAME		"sp_gpusim"
#define SP_GPUSIM_SYSFS_PARAMS		"/sys/module/sp_gpusim/parameters"

/* Where a BO's backing lives (sp_gpusim_create.domain, _move.domain). */
#define SP_GPUSIM_DOMAIN_VRAM		0 /* "carve-out": mapped only for P2P importers */
#define SP_GPUSIM_DOMAIN_GTT		1 /* system pages the GPU maps: any importer */
#define SP_GPUSIM_DOMAIN_SYSTEM		2 /* evicted: moved back to GTT on map/pin */

/* sp_gpusim_create.flags */
/*
 * 2 MiB backing slots, none allocated until POPULATE: objects of any size
 * (e.g. > 4 GiB) cost only what a test populates. An unpopulated slot is
 * one shared scratch slot for DMA and SIGBUS for the CPU.
 */
#define SP_GPUSIM_CREATE_SPARSE		(1U << 0)
/*
 * As VFIO-PCI's dma-bufs: attaches only importers that can be revoked
 * (dma_buf_attach_revocable(): an invalidate_mappings callback), and
 * SP_GPUSIM_IOC_REVOKE revokes them.
 */
#define SP_GPUSIM_CREATE_REVOCABLE_ONLY	(1U << 1)
#define SP_GPUSIM_CREATE_FLAGS		(SP_GPUSIM_CREATE_SPARSE | \
					 SP_GPUSIM_CREATE_REVOCABLE_ONLY)

/* Size limits: fully backed BOs, sparse BOs. */
#define SP_GPUSIM_MAX_BACKED		(256ULL << 20)
#define SP_GPUSIM_MAX_SPARSE		(64ULL << 30)

/**
 * struct sp_gpusim_create - SP_GPUSIM_IOC_CREATE: a new BO, handle in this
 *	file (like amdgpu's GEM_CREATE + GEM_MMAP)
 * @size: in: bytes, a multiple of 4 KiB (sparse: of 2 MiB)
 * @domain: in: SP_GPUSIM_DOMAIN_VRAM or _GTT
 * @flags: in: SP_GPUSIM_CREATE_*
 * @handle: out: GEM handle
 * @pad: zero
 * @mmap_offset: out: the BO's DRM fake offset (for mmap of this fd)
 */
struct sp_gpusim_create {
	__u64 size;
	__u32 domain;
	__u32 flags;
	__u32 handle;
	__u32 pad;
	__u64 mmap_offset;
};

/**
 * struct sp_gpusim_populate - SP_GPUSIM_IOC_POPULATE: back the 2 MiB slots
 *	of a sparse BO that cover a range with real, zeroed pages
 * @handle: the BO (not exported yet: EBUSY otherwise)
 * @pad: zero
 * @offset: byte offset
 * @length: bytes
 */
struct sp_gpusim_populate {
	__u32 handle;
	__u32 pad;
	__u64 offset;
	__u64 length;
};

/* sp_gpusim_move.flags */
#define SP_GPUSIM_MOVE_EVICT		(1U << 0) /* next domain down: VRAM->GTT->SYSTEM */
#define SP_GPUSIM_MOVE_WAIT		(1U << 1) /* return after the copy finished */
#define SP_GPUSIM_MOVE_FLAGS		(SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT)

/**
 * struct sp_gpusim_move - SP_GPUSIM_IOC_MOVE: move a BO as TTM evicts or
 *	validates one: the dma-buf importers are told (move_notify /
 *	invalidate_mappings), CPU mappings are zapped, new backing is
 *	allocated; a "copy engine" copies the contents after move_delay_ms
 *	and signals the move's fence (a kernel fence in the BO's reservation
 *	object); then the old backing is poisoned and quarantined until
 *	STATS with SP_GPUSIM_STATS_DRAIN checks that nobody wrote it.
 * @handle: the BO
 * @domain: target domain (ignored with SP_GPUSIM_MOVE_EVICT)
 * @flags: SP_GPUSIM_MOVE_*
 * @pad: zero
 * @moved: out: 1 if the BO moved, 0 if it already was in @domain
 */
struct sp_gpusim_move {
	__u32 handle;
	__u32 domain;
	__u32 flags;
	__u32 moved;
};

/**
 * struct sp_gpusim_info - SP_GPUSIM_IOC_INFO
 * @handle: in: the BO
 * @domain: out: SP_GPUSIM_DOMAIN_*
 * @size: out: bytes
 * @moves: out: moves of this BO so far
 * @pin_count: out: dma_buf_pin()s held on it
 * @exported: out: 1 when the BO has its registered dma-buf (what
 *	PRIME_HANDLE_TO_FD returns and what the BO's moves notify)
 * @attachments: out: attachments to that dma-buf
 * @mappings: out: importer mappings (map_dma_buf) alive, of any dma-buf
 * @populated: out: bytes with real backing
 * @move_pending: out: 1 while the last move's copy has not finished
 */
struct sp_gpusim_info {
	__u32 handle;
	__u32 domain;
	__u64 size;
	__u64 moves;
	__u32 pin_count;
	__u32 exported;
	__u32 attachments;
	__u32 mappings;
	__u64 populated;
	__u32 move_pending;
	__u32 pad;
};

/* sp_gpusim_stats.flags */
#define SP_GPUSIM_STATS_DRAIN		(1U << 0) /* finish moves, check + free old backing */

/**
 * struct sp_gpusim_stats - SP_GPUSIM_IOC_STATS: module-wide counters
 * @flags: in: SP_GPUSIM_STATS_*
 * @pad: zero
 * @moves: out: moves done (any BO)
 * @moves_in_map: out: moves done inside map_dma_buf (a non-P2P importer)
 * @moves_in_pin: out: moves done inside pin
 * @stale_writes: out: old backing found written after its move was
 *	announced (counted per 4 KiB page): DMA or CPU access after
 *	invalidation. Must stay 0.
 * @quarantined: out: bytes of old backing waiting to be checked
 * @checked: out: bytes of old backing checked and freed
 * @live_bos: out: BOs alive
 */
struct sp_gpusim_stats {
	__u32 flags;
	__u32 pad;
	__u64 moves;
	__u64 moves_in_map;
	__u64 moves_in_pin;
	__u64 stale_writes;
	__u64 quarantined;
	__u64 checked;
	__u64 live_bos;
};

/**
 * struct sp_gpusim_revoke - SP_GPUSIM_IOC_REVOKE: what VFIO-PCI does to its
 *	dma-bufs on a device reset or close (vfio_pci_dma_buf_move()): under
 *	the reservation lock, mark the BO revoked (no new mappings: ENODEV)
 *	and invalidate every attachment's mappings, wait for the fences; then
 *	wait for the importers to unmap - here at most @timeout_ms (VFIO waits
 *	without bound)
 * @handle: in: a BO created with SP_GPUSIM_CREATE_REVOCABLE_ONLY
 * @timeout_ms: in: at most 10000
 * @mappings: out: importer mappings still alive when it returned
 * @pad: zero
 *
 * ETIMEDOUT when mappings were left after @timeout_ms.
 */
struct sp_gpusim_revoke {
	__u32 handle;
	__u32 timeout_ms;
	__u32 mappings;
	__u32 pad;
};

/* sp_gpusim_hold.op */
#define SP_GPUSIM_HOLD_ARM		0 /* watch [addr, addr + length) of the caller */
#define SP_GPUSIM_HOLD_WAIT		1 /* wait until an invalidation is held */
#define SP_GPUSIM_HOLD_RELEASE		2 /* let held (and later) invalidations go */
#define SP_GPUSIM_HOLD_REMOVE		3 /* stop watching */

/**
 * struct sp_gpusim_hold - SP_GPUSIM_IOC_HOLD: a userptr BO's mmu interval
 *	notifier, as amdgpu's (amdgpu_hmm.c): its invalidate waits - like
 *	amdgpu's for the BO's fences - until RELEASE (or 30 s). While it
 *	waits the process's mm is "invalidating": the kernel defers every
 *	interval notifier inserted into that mm until the invalidation ends.
 *	One at a time, module-wide, owned by the DRM file that armed it
 *	(removed when that file is closed).
 * @addr: in (ARM): page aligned, in the caller's address space
 * @length: in (ARM): bytes, page aligned
 * @op: in: SP_GPUSIM_HOLD_*
 * @timeout_ms: in (WAIT): at most 60000; ETIMEDOUT when nothing was held
 * @held: out: invalidations waiting in the notifier now
 * @pad: zero
 * @total: out: invalidations held since the module loaded
 *
 * EBUSY: ARM while one is armed; ENOENT: REMOVE of none of this file's.
 */
struct sp_gpusim_hold {
	__u64 addr;
	__u64 length;
	__u32 op;
	__u32 timeout_ms;
	__u32 held;
	__u32 pad;
	__u64 total;
};

/* DRM driver ioctls: DRM_COMMAND_BASE (0x40) + n. */
#define SP_GPUSIM_IOCTL_BASE		0x40
#define DRM_SP_GPUSIM_CREATE		0x00
#define DRM_SP_GPUSIM_POPULATE		0x01
#define DRM_SP_GPUSIM_MOVE		0x02
#define DRM_SP_GPUSIM_INFO		0x03
#define DRM_SP_GPUSIM_STATS		0x04
#define DRM_SP_GPUSIM_REVOKE		0x05
#define DRM_SP_GPUSIM_HOLD		0x06

#define DRM_IOCTL_SP_GPUSIM_CREATE	_IOWR('d', SP_GPUSIM_IOCTL_BASE + DRM_SP_GPUSIM_CREATE, \
					      struct sp_gpusim_create)
#define DRM_IOCTL_SP_GPUSIM_POPULATE	_IOW('d', SP_GPUSIM_IOCTL_BASE + DRM_SP_GPUSIM_POPULATE, \
					     struct sp_gpusim_populate)
#define DRM_IOCTL_SP_GPUSIM_MOVE	_IOWR('d', SP_GPUSIM_IOCTL_BASE + DRM_SP_GPUSIM_MOVE, \
					      struct sp_gpusim_move)
#define DRM_IOCTL_SP_GPUSIM_INFO	_IOWR('d', SP_GPUSIM_IOCTL_BASE + DRM_SP_GPUSIM_INFO, \
					      struct sp_gpusim_info)
#define DRM_IOCTL_SP_GPUSIM_STATS	_IOWR('d', SP_GPUSIM_IOCTL_BASE + DRM_SP_GPUSIM_STATS, \
					      struct sp_gpusim_stats)
#define DRM_IOCTL_SP_GPUSIM_REVOKE	_IOWR('d', SP_GPUSIM_IOCTL_BASE + DRM_SP_GPUSIM_REVOKE, \
					      struct sp_gpusim_revoke)
#define DRM_IOCTL_SP_GPUSIM_HOLD	_IOWR('d', SP_GPUSIM_IOCTL_BASE + DRM_SP_GPUSIM_HOLD, \
					      struct sp_gpusim_hold)

#endif /* _UAPI_SP_GPUSIM_H */
