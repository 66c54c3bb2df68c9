/* SPDX-License-Identifier: MIT */
/*
 * GPU buffers laid out the way ROCm lays them out, for the PeerDirect tests:
 * sp_gpusim (tests/kmod/gpusim.c, an amdgpu/TTM-like DRM driver whose
 * buffers move) and vgem, mapped through DRM's GEM mmap into a PROT_NONE
 * aperture as libhsakmt's fmm_map_to_cpu() does.
 */
#ifndef SP_GPUSIM_H
#define SP_GPUSIM_H

#include "dmabuf_util.h"
#include "../kmod/gpusim_uapi.h"

#include <pthread.h>

/* The first DRM node /dev/dri/<prefix>N (N from first) of driver @name, or -1. */
int sp_drm_node(const char *prefix, int first, const char *name);

/* sp_gpusim's render node; skips the case without it. */
int gpusim_open(void);

uint32_t gpusim_create(int fd, uint64_t size, uint32_t domain, uint32_t flags,
		       uint64_t *mmap_offset);

void gpusim_populate(int fd, uint32_t handle, uint64_t offset, uint64_t length);

/* MOVE: returns like ioctl(2); *moved (optional) as the module reports it. */
int gpusim_move(int fd, uint32_t handle, uint32_t domain, uint32_t flags,
		uint32_t *moved);

struct sp_gpusim_info gpusim_info(int fd, uint32_t handle);

/* Module counters; SP_GPUSIM_STATS_DRAIN first checks all old backing. */
struct sp_gpusim_stats gpusim_stats(int fd, uint32_t flags);

/* HOLD (a userptr BO's notifier that waits): returns 0 or -errno, fills *out. */
int gpusim_hold(int fd, uint32_t op, const void *addr, uint64_t len,
		uint32_t timeout_ms, struct sp_gpusim_hold *out);

/* REVOKE, as VFIO-PCI on a reset: 0 or -errno; *left: mappings still alive. */
int gpusim_revoke(int fd, uint32_t handle, uint32_t timeout_ms, uint32_t *left);

/*
 * An invalidation of this process's mm held open (issue 45): a shared memfd
 * mapping watched by HOLD, truncated by a thread whose invalidation waits
 * in the notifier until sp_window_release(). Meanwhile the kernel defers
 * every interval notifier inserted into this mm. Needs -lpthread.
 */
struct sp_window {
	int gfd;		/* sp_gpusim render node */
	int memfd;
	uint8_t *a;		/* shared mapping of memfd, watched by HOLD */
	size_t alen;
	pthread_t trunc;
};

void *sp_window_truncate(void *arg);

/* Opens the window: returns once the truncation's invalidation is held. */
void sp_window_open(struct sp_window *w);

/* Is an invalidation held right now? */
int sp_window_held(struct sp_window *w);

void sp_window_release(struct sp_window *w);

void sp_window_close(struct sp_window *w);

/* The name task @tid sleeps in (its wchan), into @buf. */
const char *sp_task_wchan(int tid, char *buf, size_t len);

/* "1" when task @tid sleeps in mmu_interval_read_begin(). */
int sp_waits_in_read_begin(int tid);

/* DRM PRIME export of a GEM handle (the BO's registered dma-buf). */
int sp_prime_export(int drm_fd, uint32_t handle);

/* Every old backing checked: no write reached memory after its move. */
void gpusim_check_no_stale(int fd, uint64_t stale_before);

/* A PROT_NONE reservation of @len bytes aligned to @align, as libhsakmt's aperture. */
uint8_t *sp_aperture(size_t len, size_t align);

/*
 * libhsakmt's fmm_map_to_cpu(): the BO at its DRM fake offset, MAP_SHARED |
 * MAP_FIXED over a piece of the aperture, then MADV_DONTFORK.
 */
void sp_rocm_map(uint8_t *at, size_t len, int drm_fd, uint64_t mmap_offset);

/* hipFree(): the range goes back to a PROT_NONE reservation. */
void sp_rocm_free(uint8_t *at, size_t len);

/* A BO mapped through the render node (ROCm-style) at the start of a 64 MiB aperture, zeroed. */
struct sp_rocm_bo {
	int gfd;
	uint32_t handle;
	uint64_t mmap_offset;
	uint8_t *ap, *va;
	size_t len;
};

void sp_rocm_bo_new(struct sp_rocm_bo *b, size_t len, uint32_t domain);

void sp_rocm_bo_free(struct sp_rocm_bo *b);

/* The file offset /proc/self/maps shows for the mapping at @addr, or -1. */
int64_t sp_maps_offset(const void *addr);

/* How many VMAs (lines of /proc/self/maps) cover [@addr, @addr + @len). */
int sp_maps_count(const void *addr, size_t len);

/*
 * A vgem BO as the tests map it ROCm-style: created on the card (dumb
 * buffers exist only there), exported and imported into the render node
 * when vgem has one (vgem's GEM mmap then runs on the render node, as
 * amdgpu's does for ROCm), else mapped through the card.
 */
struct sp_vgem_bo {
	int card;
	int node;		/* the fd to mmap: render node, or the card */
	uint32_t handle;	/* on the card */
	uint64_t mmap_offset;
	int dmabuf;		/* the PRIME export (-1 when mapped via the card) */
	size_t len;
};

void sp_vgem_bo_new(size_t len, struct sp_vgem_bo *b);

void sp_vgem_bo_free(struct sp_vgem_bo *b);

#endif /* SP_GPUSIM_H */
