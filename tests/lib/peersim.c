// SPDX-License-Identifier: MIT
/* tests/lib/peersim.h's functions: the suite's library (build/tests/libsptest.a). */
#include "peersim.h"

int peersim_test_open(void)
{
	int fd = open(PEERSIM_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		SKIP("%s not present: sp_peersim.ko not loaded", PEERSIM_DEVICE_PATH);
	CHECK(fd >= 0, "open %s: %s", PEERSIM_DEVICE_PATH, strerror(errno));
	return fd;
}

int peersim_info(int fd, struct peersim_info *info)
{
	memset(info, 0, sizeof(*info));
	return ioctl(fd, PEERSIM_IOC_INFO, info);
}

int peersim_reg_mr(int fd, const void *addr, uint64_t length,
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

int peersim_reg_dmabuf_mr(int fd, int dmabuf_fd, uint64_t offset,
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

int peersim_dereg_mr(int fd, uint32_t handle)
{
	struct peersim_mr_handle h = { .handle = handle };

	return ioctl(fd, PEERSIM_IOC_DEREG_MR, &h);
}

int peersim_mr_info(int fd, uint32_t handle, struct peersim_mr_info *out)
{
	memset(out, 0, sizeof(*out));
	out->handle = handle;
	return ioctl(fd, PEERSIM_IOC_MR_INFO, out);
}

int peersim_dma_write(int fd, uint32_t handle, uint64_t offset,
		      const void *buf, uint64_t len)
{
	struct peersim_dma d = {
		.handle = handle, .offset = offset, .length = len,
		.buf = (uintptr_t)buf,
	};

	return ioctl(fd, PEERSIM_IOC_DMA_WRITE, &d);
}

int peersim_vmap_copy(int fd, uint32_t handle, uint64_t offset,
		      void *buf, uint64_t len, int to_mem)
{
	struct peersim_dma d = {
		.handle = handle, .flags = PEERSIM_DMA_VMAP, .offset = offset,
		.length = len, .buf = (uintptr_t)buf,
	};

	return ioctl(fd, to_mem ? PEERSIM_IOC_DMA_WRITE : PEERSIM_IOC_DMA_READ, &d);
}

int peersim_dma_read(int fd, uint32_t handle, uint64_t offset,
		     void *buf, uint64_t len)
{
	struct peersim_dma d = {
		.handle = handle, .offset = offset, .length = len,
		.buf = (uintptr_t)buf,
	};

	return ioctl(fd, PEERSIM_IOC_DMA_READ, &d);
}

int peersim_mr_segs(int fd, uint32_t handle, struct peersim_seg *segs,
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

int peersim_clients(int fd, struct peersim_client *clients,
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

uint64_t peersim_live_mrs(int fd)
{
	struct peersim_info info;

	CHECK(peersim_info(fd, &info) == 0, "PEERSIM_IOC_INFO: %s", strerror(errno));
	return info.live_mrs;
}

uint32_t peersim_reg_dmabuf(int fd, int dmabuf_fd, uint64_t offset,
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

int peersim_has_sysfs(void)
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

int64_t peersim_peer_stat(const char *client, const char *attr)
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

int peersim_param_get(const char *name, char *buf, size_t len)
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

int peersim_param_set(const char *name, const char *val)
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
