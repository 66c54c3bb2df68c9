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

#include "kmod/peersim_uapi.h"

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
