// SPDX-License-Identifier: MIT
/* tests/lib/gpusim.h's functions: the suite's library (build/tests/libsptest.a). */
#include "gpusim.h"

int sp_drm_node(const char *prefix, int first, const char *name)
{
	return sp_drm_find(prefix, first, name, NULL, 0);
}

int gpusim_open(void)
{
	int fd = sp_drm_node("renderD", 128, SP_GPUSIM_DRIVER_NAME);

	if (fd < 0)
		SKIP("no %s render node in /dev/dri (sp_gpusim.ko not loaded)",
		     SP_GPUSIM_DRIVER_NAME);
	return fd;
}

uint32_t gpusim_create(int fd, uint64_t size, uint32_t domain, uint32_t flags,
		       uint64_t *mmap_offset)
{
	struct sp_gpusim_create c = { .size = size, .domain = domain, .flags = flags };

	CHECK(ioctl(fd, DRM_IOCTL_SP_GPUSIM_CREATE, &c) == 0, "GPUSIM_CREATE %" PRIu64 ": %s",
	      size, strerror(errno));
	if (mmap_offset)
		*mmap_offset = c.mmap_offset;
	return c.handle;
}

void gpusim_populate(int fd, uint32_t handle, uint64_t offset, uint64_t length)
{
	struct sp_gpusim_populate p = { .handle = handle, .offset = offset, .length = length };

	CHECK(ioctl(fd, DRM_IOCTL_SP_GPUSIM_POPULATE, &p) == 0, "GPUSIM_POPULATE: %s",
	      strerror(errno));
}

int gpusim_move(int fd, uint32_t handle, uint32_t domain, uint32_t flags,
		uint32_t *moved)
{
	struct sp_gpusim_move m = { .handle = handle, .domain = domain, .flags = flags };
	int ret = ioctl(fd, DRM_IOCTL_SP_GPUSIM_MOVE, &m);

	if (moved)
		*moved = m.moved;
	return ret;
}

struct sp_gpusim_info gpusim_info(int fd, uint32_t handle)
{
	struct sp_gpusim_info i = { .handle = handle };

	CHECK(ioctl(fd, DRM_IOCTL_SP_GPUSIM_INFO, &i) == 0, "GPUSIM_INFO: %s", strerror(errno));
	return i;
}

struct sp_gpusim_stats gpusim_stats(int fd, uint32_t flags)
{
	struct sp_gpusim_stats s = { .flags = flags };

	CHECK(ioctl(fd, DRM_IOCTL_SP_GPUSIM_STATS, &s) == 0, "GPUSIM_STATS: %s", strerror(errno));
	return s;
}

int gpusim_hold(int fd, uint32_t op, const void *addr, uint64_t len,
		uint32_t timeout_ms, struct sp_gpusim_hold *out)
{
	struct sp_gpusim_hold h = { .addr = (uintptr_t)addr, .length = len, .op = op,
				    .timeout_ms = timeout_ms };
	int ret = ioctl(fd, DRM_IOCTL_SP_GPUSIM_HOLD, &h) ? -errno : 0;

	if (out)
		*out = h;
	return ret;
}

int gpusim_revoke(int fd, uint32_t handle, uint32_t timeout_ms, uint32_t *left)
{
	struct sp_gpusim_revoke r = { .handle = handle, .timeout_ms = timeout_ms };
	int ret = ioctl(fd, DRM_IOCTL_SP_GPUSIM_REVOKE, &r) ? -errno : 0;

	if (left)
		*left = r.mappings;
	return ret;
}

void *sp_window_truncate(void *arg)
{
	struct sp_window *w = arg;

	/* unmap_mapping_range(): an MMU_NOTIFY_CLEAR without mmap_lock */
	if (ftruncate(w->memfd, 0))
		perror("ftruncate");
	return NULL;
}

void sp_window_open(struct sp_window *w)
{
	struct sp_gpusim_hold h;
	int ret;

	w->gfd = gpusim_open();
	w->alen = 1 * MiB;
	w->memfd = memfd_create("sp_window", MFD_CLOEXEC);
	CHECK(w->memfd >= 0, "memfd_create: %s", strerror(errno));
	CHECK_OK(ftruncate(w->memfd, (off_t)w->alen));
	w->a = mmap(NULL, w->alen, PROT_READ | PROT_WRITE, MAP_SHARED, w->memfd, 0);
	CHECK(w->a != MAP_FAILED, "mmap memfd: %s", strerror(errno));
	memset(w->a, 0x5a, w->alen);
	ret = gpusim_hold(w->gfd, SP_GPUSIM_HOLD_ARM, w->a, w->alen, 0, NULL);
	CHECK(ret == 0, "HOLD_ARM: %s", strerror(-ret));
	CHECK(pthread_create(&w->trunc, NULL, sp_window_truncate, w) == 0, "pthread_create");
	ret = gpusim_hold(w->gfd, SP_GPUSIM_HOLD_WAIT, NULL, 0, 30000, &h);
	CHECK(ret == 0, "the truncation's invalidation was not held within 30 s: %s (held %u, total %llu)",
	      strerror(-ret), h.held, (unsigned long long)h.total);
}

int sp_window_held(struct sp_window *w)
{
	return gpusim_hold(w->gfd, SP_GPUSIM_HOLD_WAIT, NULL, 0, 0, NULL) == 0;
}

void sp_window_release(struct sp_window *w)
{
	CHECK_OK(gpusim_hold(w->gfd, SP_GPUSIM_HOLD_RELEASE, NULL, 0, 0, NULL));
}

void sp_window_close(struct sp_window *w)
{
	sp_window_release(w);
	CHECK(pthread_join(w->trunc, NULL) == 0, "pthread_join");
	CHECK_OK(gpusim_hold(w->gfd, SP_GPUSIM_HOLD_REMOVE, NULL, 0, 0, NULL));
	munmap(w->a, w->alen);
	close(w->memfd);
	close(w->gfd);
}

const char *sp_task_wchan(int tid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", tid);
	f = fopen(path, "re");
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = '\0';
		fclose(f);
	}
	return buf;
}

int sp_waits_in_read_begin(int tid)
{
	char wchan[128];

	return strstr(sp_task_wchan(tid, wchan, sizeof(wchan)), "mmu_interval_read_begin") != NULL;
}

int sp_prime_export(int drm_fd, uint32_t handle)
{
	int fd = sp_drm_prime_export(drm_fd, handle, O_RDWR | O_CLOEXEC);

	CHECK(fd >= 0, "PRIME_HANDLE_TO_FD: %s", strerror(errno));
	return fd;
}

void gpusim_check_no_stale(int fd, uint64_t stale_before)
{
	struct sp_gpusim_stats s = gpusim_stats(fd, SP_GPUSIM_STATS_DRAIN);

	CHECK(s.stale_writes == stale_before,
	      "%" PRIu64 " page(s) of moved-away backing were written (DMA after invalidation)",
	      (uint64_t)(s.stale_writes - stale_before));
	CHECK(s.quarantined == 0, "%" PRIu64 " bytes not checked", (uint64_t)s.quarantined);
}

uint8_t *sp_aperture(size_t len, size_t align)
{
	uint8_t *p = mmap(NULL, len + align, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uintptr_t a;

	CHECK(p != MAP_FAILED, "aperture mmap: %s", strerror(errno));
	a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	if (a > (uintptr_t)p)
		munmap(p, a - (uintptr_t)p);
	munmap((uint8_t *)a + len, (uintptr_t)p + align - a);
	return (uint8_t *)a;
}

void sp_rocm_map(uint8_t *at, size_t len, int drm_fd, uint64_t mmap_offset)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, drm_fd,
		       (off_t)mmap_offset);

	CHECK(p == at, "BO mmap at %p: %s", (void *)at, strerror(errno));
	CHECK_OK(madvise(at, len, MADV_DONTFORK));
}

void sp_rocm_free(uint8_t *at, size_t len)
{
	void *p = mmap(at, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		       -1, 0);

	CHECK(p == at, "PROT_NONE over %p: %s", (void *)at, strerror(errno));
}

void sp_rocm_bo_new(struct sp_rocm_bo *b, size_t len, uint32_t domain)
{
	b->gfd = gpusim_open();
	b->len = len;
	b->handle = gpusim_create(b->gfd, len, domain, 0, &b->mmap_offset);
	b->ap = sp_aperture(64 * MiB, 2 * MiB);
	b->va = b->ap;
	sp_rocm_map(b->va, len, b->gfd, b->mmap_offset);
	memset(b->va, 0, len);
}

void sp_rocm_bo_free(struct sp_rocm_bo *b)
{
	munmap(b->ap, 64 * MiB);
	close(b->gfd);
}

int64_t sp_maps_offset(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long start, end, off;
	char line[512];
	int64_t ret = -1;

	CHECK(f, "/proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %*s %lx", &start, &end, &off) == 3 &&
		    start <= (uintptr_t)addr && (uintptr_t)addr < end) {
			ret = (int64_t)off;
			break;
		}
	}
	fclose(f);
	return ret;
}

int sp_maps_count(const void *addr, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	uintptr_t a = (uintptr_t)addr;
	unsigned long start, end;
	char line[512];
	int n = 0;

	CHECK(f, "/proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &start, &end) == 2 && start < a + len && end > a)
			n++;
	fclose(f);
	return n;
}

void sp_vgem_bo_new(size_t len, struct sp_vgem_bo *b)
{
	memset(b, 0, sizeof(*b));
	b->len = len;
	b->dmabuf = -1;
	CHECK(len % 16384 == 0, "vgem buffers here are multiples of 16 KiB");
	b->card = sp_vgem_card();
	if (b->card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	CHECK_OK(sp_drm_dumb_create(b->card, len, 16384, &b->handle, NULL));
	CHECK_OK(sp_drm_dumb_offset(b->card, b->handle, &b->mmap_offset));
	b->node = sp_drm_node("renderD", 128, "vgem");
	if (b->node >= 0) {
		b->dmabuf = sp_prime_export(b->card, b->handle);
		sp_vgem_import(b->node, b->dmabuf);	/* a handle in the render file */
	} else {
		b->node = b->card;
	}
}

void sp_vgem_bo_free(struct sp_vgem_bo *b)
{
	if (b->node >= 0 && b->node != b->card)
		close(b->node);
	if (b->dmabuf >= 0)
		close(b->dmabuf);
	if (b->card >= 0)
		close(b->card);
	b->card = b->node = b->dmabuf = -1;
}
