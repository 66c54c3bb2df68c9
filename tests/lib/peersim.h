/* SPDX-License-Identifier: MIT */
/*
 * Wrappers around sp_peersim's ioctls (tests/kmod/peersim_uapi.h) for the
 * test programs: the simulated PeerDirect core + HCA. Every function
 * returns like ioctl(2): 0 (or the fd) on success, -1 with errno set on
 * failure, so that CHECK_OK/CHECK_ERR apply.
 */
#ifndef SP_PEERSIM_H
#define SP_PEERSIM_H

#include "tap.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/ioctl.h>

#include "../kmod/peersim_uapi.h"

/* Opens /dev/sp_peersim; skips the case when the module is not loaded. */
int peersim_test_open(void);

int peersim_info(int fd, struct peersim_info *info);

/* ibv_reg_mr(): *out (optional) receives the handle, path, client, ... */
int peersim_reg_mr(int fd, const void *addr, uint64_t length,
		   uint32_t access, struct peersim_reg_mr *out);

/*
 * ibv_reg_dmabuf_mr(): registers [offset, offset + length) of the dma-buf
 * dmabuf_fd; flags are PEERSIM_DMABUF_* (PINNED: as
 * ib_umem_dmabuf_get_pinned()). *out (optional) receives the handle, nents
 * and max_seg. Returns like ioctl(2).
 */
int peersim_reg_dmabuf_mr(int fd, int dmabuf_fd, uint64_t offset,
			  uint64_t length, uint32_t access, uint32_t flags,
			  struct peersim_reg_dmabuf_mr *out);

int peersim_dereg_mr(int fd, uint32_t handle);

int peersim_mr_info(int fd, uint32_t handle, struct peersim_mr_info *out);

/* "DMA" len bytes from buf into the MR at offset. */
int peersim_dma_write(int fd, uint32_t handle, uint64_t offset,
		      const void *buf, uint64_t len);

/* The CPU copies through the dma-buf's kernel mapping (dma_buf_vmap()). */
int peersim_vmap_copy(int fd, uint32_t handle, uint64_t offset,
		      void *buf, uint64_t len, int to_mem);

/* "DMA" len bytes from the MR at offset into buf. */
int peersim_dma_read(int fd, uint32_t handle, uint64_t offset,
		     void *buf, uint64_t len);

/*
 * The MR's DMA segments: *count is the capacity of segs on input, the
 * MR's number of segments on output.
 */
int peersim_mr_segs(int fd, uint32_t handle, struct peersim_seg *segs,
		    uint32_t *count);

/* Registered clients in registration order; *count as in peersim_mr_segs. */
int peersim_clients(int fd, struct peersim_client *clients,
		    uint32_t *count);

/* Number of MRs registered on all fds. */
uint64_t peersim_live_mrs(int fd);

/*
 * Registers a dma-buf MR and checks what the module reports about it: path,
 * range, access, and that its DMA segments (MR_SEGS) add up to nents and
 * max_seg and stay within the device's max_seg_size. Fails the case on any
 * error; returns the handle.
 */
uint32_t peersim_reg_dmabuf(int fd, int dmabuf_fd, uint64_t offset,
			    uint64_t length, uint32_t access, uint32_t flags);

/*
 * Whether sp_peersim publishes /sys/kernel/mm/memory_peers: 1 or 0 as its
 * memory_peers_sysfs parameter reads back after load (a core built where
 * mm_kobj is exported, or not: see tests/kmod/peersim_core.c), -1 when it is
 * not loaded.
 */
int peersim_has_sysfs(void);

/*
 * A counter of /sys/kernel/mm/memory_peers/<client>/<attr>; -1 with errno
 * when it cannot be read.
 */
int64_t peersim_peer_stat(const char *client, const char *attr);

/* A module parameter of sp_peersim as text (newline stripped), or -1. */
int peersim_param_get(const char *name, char *buf, size_t len);

/* Sets a writable parameter of sp_peersim (reg_delay_ms), or -1. */
int peersim_param_set(const char *name, const char *val);

#endif /* SP_PEERSIM_H */
