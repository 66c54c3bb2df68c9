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
static inline int peersim_test_open(void)
{
	int fd = open(PEERSIM_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		SKIP("%s not present: sp_peersim.ko not loaded", PEERSIM_DEVICE_PATH);
	CHECK(fd >= 0, "open %s: %s", PEERSIM_DEVICE_PATH, strerror(errno));
	return fd;
}

static inline int peersim_info(int fd, struct peersim_info *info)
{
	memset(info, 0, sizeof(*info));
	return ioctl(fd, PEERSIM_IOC_INFO, info);
}

/* ibv_reg_mr(): *out (optional) receives the handle, path, client, ... */
static inline int peersim_reg_mr(int fd, const void *addr, uint64_t length,
				 uint32_t access, struct peersim_reg_mr *out)
{
	struct peersim_reg_mr r = {
		.addr = (uintptr_t)addr, .length = length, .access = access,
	};
	int ret = ioctl(fd, PEERSIM_IOC_REG_MR, &r);

	if (out)
		*out = r;
	return ret;
}

/*
 * ibv_reg_dmabuf_mr(): registers [offset, offset + length) of the dma-buf
 * dmabuf_fd; flags are PEERSIM_DMABUF_* (PINNED: as
 * ib_umem_dmabuf_get_pinned()). *out (optional) receives the handle, nents
 * and max_seg. Returns like ioctl(2).
 */
static inline int peersim_reg_dmabuf_mr(int fd, int dmabuf_fd, uint64_t offset,
					uint64_t length, uint32_t access, uint32_t flags,
					struct peersim_reg_dmabuf_mr *out)
{
	struct peersim_reg_dmabuf_mr r = {
		.fd = dmabuf_fd, .flags = flags, .offset = offset,
		.length = length, .access = access,
	};
	int ret = ioctl(fd, PEERSIM_IOC_REG_DMABUF_MR, &r);

	if (out)
		*out = r;
	return ret;
}

static inline int peersim_dereg_mr(int fd, uint32_t handle)
{
	struct peersim_mr_handle h = { .handle = handle };

	return ioctl(fd, PEERSIM_IOC_DEREG_MR, &h);
}

static inline int peersim_mr_info(int fd, uint32_t handle, struct peersim_mr_info *out)
{
	memset(out, 0, sizeof(*out));
	out->handle = handle;
	return ioctl(fd, PEERSIM_IOC_MR_INFO, out);
}

/* "DMA" len bytes from buf into the MR at offset. */
static inline int peersim_dma_write(int fd, uint32_t handle, uint64_t offset,
				    const void *buf, uint64_t len)
{
	struct peersim_dma d = {
		.handle = handle, .offset = offset, .length = len,
		.buf = (uintptr_t)buf,
	};

	return ioctl(fd, PEERSIM_IOC_DMA_WRITE, &d);
}

/* The CPU copies through the dma-buf's kernel mapping (dma_buf_vmap()). */
static inline int peersim_vmap_copy(int fd, uint32_t handle, uint64_t offset,
				    void *buf, uint64_t len, int to_mem)
{
	struct peersim_dma d = {
		.handle = handle, .flags = PEERSIM_DMA_VMAP, .offset = offset,
		.length = len, .buf = (uintptr_t)buf,
	};

	return ioctl(fd, to_mem ? PEERSIM_IOC_DMA_WRITE : PEERSIM_IOC_DMA_READ, &d);
}

/* "DMA" len bytes from the MR at offset into buf. */
static inline int peersim_dma_read(int fd, uint32_t handle, uint64_t offset,
				   void *buf, uint64_t len)
{
	struct peersim_dma d = {
		.handle = handle, .offset = offset, .length = len,
		.buf = (uintptr_t)buf,
	};

	return ioctl(fd, PEERSIM_IOC_DMA_READ, &d);
}

/*
 * The MR's DMA segments: *count is the capacity of segs on input, the
 * MR's number of segments on output.
 */
static inline int peersim_mr_segs(int fd, uint32_t handle, struct peersim_seg *segs,
				  uint32_t *count)
{
	struct peersim_mr_segs s = {
		.handle = handle, .count = *count, .segs = (uintptr_t)segs,
	};
	int ret = ioctl(fd, PEERSIM_IOC_MR_SEGS, &s);

	if (!ret)
		*count = s.count;
	return ret;
}

/* Registered clients in registration order; *count as in peersim_mr_segs. */
static inline int peersim_clients(int fd, struct peersim_client *clients,
				  uint32_t *count)
{
	struct peersim_clients c = {
		.count = *count, .clients = (uintptr_t)clients,
	};
	int ret = ioctl(fd, PEERSIM_IOC_CLIENTS, &c);

	if (!ret)
		*count = c.count;
	return ret;
}

/* Number of MRs registered on all fds. */
static inline uint64_t peersim_live_mrs(int fd)
{
	struct peersim_info info;

	CHECK(peersim_info(fd, &info) == 0, "PEERSIM_IOC_INFO: %s", strerror(errno));
	return info.live_mrs;
}

/*
 * Registers a dma-buf MR and checks what the module reports about it: path,
 * range, access, and that its DMA segments (MR_SEGS) add up to nents and
 * max_seg and stay within the device's max_seg_size. Fails the case on any
 * error; returns the handle.
 */
static inline uint32_t peersim_reg_dmabuf(int fd, int dmabuf_fd, uint64_t offset,
					  uint64_t length, uint32_t access, uint32_t flags)
{
	struct peersim_reg_dmabuf_mr r;
	struct peersim_mr_info mi;
	struct peersim_info info;
	struct peersim_seg *segs;
	uint64_t sum = 0, longest = 0, psz;
	uint32_t n;

	CHECK(peersim_info(fd, &info) == 0, "PEERSIM_IOC_INFO: %s", strerror(errno));
	psz = info.page_size;
	CHECK(peersim_reg_dmabuf_mr(fd, dmabuf_fd, offset, length, access, flags, &r) == 0,
	      "REG_DMABUF_MR fd %d offset %" PRIu64 " length %" PRIu64 " flags %#x: %s",
	      dmabuf_fd, offset, length, flags, strerror(errno));
	CHECK(r.handle > 0 && r.nents > 0, "handle %u nents %u", r.handle, r.nents);
	CHECK(r.max_seg > 0 && r.max_seg <= info.max_seg_size,
	      "max_seg %" PRIu64 ", device max %" PRIu64, (uint64_t)r.max_seg,
	      (uint64_t)info.max_seg_size);

	CHECK(peersim_mr_info(fd, r.handle, &mi) == 0, "MR_INFO: %s", strerror(errno));
	CHECK(mi.path == PEERSIM_PATH_DMABUF, "path %u", mi.path);
	CHECK(mi.state == PEERSIM_MR_ACTIVE && mi.core_state == PEERSIM_CORE_MAPPED,
	      "state %u core_state %u", mi.state, mi.core_state);
	CHECK(mi.addr == offset && mi.length == length && mi.access == access,
	      "addr %" PRIu64 " length %" PRIu64 " access %u", (uint64_t)mi.addr,
	      (uint64_t)mi.length, mi.access);
	CHECK(mi.nents == r.nents && mi.page_size == psz, "nents %u page_size %" PRIu64,
	      mi.nents, (uint64_t)mi.page_size);
	CHECK(mi.first_offset == offset % psz, "first_offset %" PRIu64,
	      (uint64_t)mi.first_offset);
	CHECK(mi.core_context == PEERSIM_NO_CORE_CONTEXT, "core_context");

	n = r.nents;
	segs = calloc(n, sizeof(*segs));
	CHECK(segs, "calloc");
	CHECK(peersim_mr_segs(fd, r.handle, segs, &n) == 0, "MR_SEGS: %s", strerror(errno));
	CHECK(n == r.nents, "MR_SEGS says %u segments, REG said %u", n, r.nents);
	for (uint32_t i = 0; i < n; i++) {
		CHECK(segs[i].len > 0 && segs[i].len <= info.max_seg_size,
		      "segment %u: %" PRIu64 " bytes, device max %" PRIu64, i,
		      (uint64_t)segs[i].len, (uint64_t)info.max_seg_size);
		sum += segs[i].len;
		if (segs[i].len > longest)
			longest = segs[i].len;
	}
	free(segs);
	CHECK(longest == r.max_seg, "longest segment %" PRIu64 ", max_seg %" PRIu64,
	      longest, (uint64_t)r.max_seg);
	/* the PAGE_SIZE-aligned range, as ib_umem_dmabuf_map_pages() trims it */
	CHECK(sum == mi.dma_bytes &&
	      sum == (offset + length + psz - 1) / psz * psz - offset / psz * psz,
	      "segments hold %" PRIu64 " bytes (dma_bytes %" PRIu64 ") for %" PRIu64
	      "+%" PRIu64, sum, (uint64_t)mi.dma_bytes, offset, length);
	return r.handle;
}

/*
 * Whether sp_peersim publishes /sys/kernel/mm/memory_peers: 1 or 0 as its
 * memory_peers_sysfs parameter reads back after load (a core built where
 * mm_kobj is exported, or not: see tests/kmod/peersim_core.c), -1 when it is
 * not loaded.
 */
static inline int peersim_has_sysfs(void)
{
	FILE *f = fopen("/sys/module/sp_peersim/parameters/memory_peers_sysfs", "re");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * A counter of /sys/kernel/mm/memory_peers/<client>/<attr>; -1 with errno
 * when it cannot be read.
 */
static inline int64_t peersim_peer_stat(const char *client, const char *attr)
{
	char path[256], val[64];
	int64_t v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%.64s/%.64s", PEERSIM_SYSFS_PEERS, client, attr);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(val, sizeof(val), f))
		v = strtoll(val, NULL, 10);
	else
		errno = EIO;
	fclose(f);
	return v;
}

/* A module parameter of sp_peersim as text (newline stripped), or -1. */
static inline int peersim_param_get(const char *name, char *buf, size_t len)
{
	char path[128];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "%s/%.64s", PEERSIM_SYSFS_PARAMS, name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		errno = EIO;
		ret = -1;
	} else {
		buf[strcspn(buf, "\n")] = '\0';
	}
	fclose(f);
	return ret;
}

/* Sets a writable parameter of sp_peersim (reg_delay_ms), or -1. */
static inline int peersim_param_set(const char *name, const char *val)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%.64s", PEERSIM_SYSFS_PARAMS, name);
	f = fopen(path, "we");
	if (!f)
		return -1;
	if (fputs(val, f) < 0) {
		fclose(f);
		return -1;
	}
	return fclose(f) ? -1 : 0;
}

#endif /* SP_PEERSIM_H */
