// SPDX-License-Identifier: MIT
/* tests/lib/dmabuf_util.h's functions: the suite's library (build/tests/libsptest.a). */
#include "dmabuf_util.h"

const char *const sp_exporter_name[3] = { "vgem", "udmabuf", "dma-heap" };

int sp_vgem_card(void)
{
	return sp_drm_find("card", 0, "vgem", NULL, 0);
}

void sp_xbuf_new(enum sp_exporter kind, size_t len, int via_card,
		 struct sp_xbuf *x)
{
	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->len = len;
	x->card = -1;
	x->fd = -1;
	if (kind == SP_EXP_VGEM) {
		uint64_t got = 0, offset = 0;

		CHECK(len % 16384 == 0, "vgem buffers here are multiples of 16 KiB");
		x->card = sp_vgem_card();
		if (x->card < 0)
			SKIP("no vgem card in /dev/dri (modprobe vgem)");
		CHECK_OK(sp_drm_dumb_create(x->card, len, 16384, &x->gem, &got));
		CHECK(got >= len, "dumb buffer of %llu bytes", (unsigned long long)got);
		x->fd = sp_drm_prime_export(x->card, x->gem, O_RDWR | O_CLOEXEC);
		CHECK(x->fd >= 0, "PRIME_HANDLE_TO_FD: %s", strerror(errno));
		CHECK_OK(sp_drm_dumb_offset(x->card, x->gem, &offset));
		x->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
			      via_card ? x->card : x->fd, via_card ? (off_t)offset : 0);
	} else if (kind == SP_EXP_UDMABUF) {
		struct udmabuf_create uc = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = len };
		int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
		int memfd;

		if (dev < 0)
			SKIP("no /dev/udmabuf: CONFIG_UDMABUF is not set in this kernel");
		memfd = memfd_create("sp-udmabuf", MFD_ALLOW_SEALING | MFD_CLOEXEC);
		CHECK(memfd >= 0, "memfd_create: %s", strerror(errno));
		CHECK_OK(ftruncate(memfd, (off_t)len));
		CHECK_OK(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK));
		uc.memfd = (uint32_t)memfd;
		x->fd = ioctl(dev, UDMABUF_CREATE, &uc);
		CHECK(x->fd >= 0, "UDMABUF_CREATE: %s", strerror(errno));
		close(memfd);
		close(dev);
		x->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	} else {
		struct dma_heap_allocation_data ha = { .len = len,
						       .fd_flags = O_RDWR | O_CLOEXEC };
		int heap = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);

		if (heap < 0)
			SKIP("no /dev/dma_heap/system: CONFIG_DMABUF_HEAPS_SYSTEM is not set in this kernel");
		CHECK_OK(ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &ha));
		x->fd = (int)ha.fd;
		close(heap);
		x->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	}
	CHECK(x->map != MAP_FAILED, "%s mmap: %s", sp_exporter_name[kind], strerror(errno));
}

void sp_xbuf_free(struct sp_xbuf *x)
{
	if (x->map && x->map != MAP_FAILED)
		munmap(x->map, x->len);
	if (x->fd >= 0)
		close(x->fd);
	if (x->card >= 0)
		close(x->card);	/* drops the GEM handle */
	x->map = NULL;
	x->fd = x->card = -1;
}

uint32_t sp_vgem_import(int card, int fd)
{
	uint32_t handle = 0;

	CHECK_OK(sp_drm_prime_import(card, fd, &handle));
	return handle;
}

void sp_vgem_close(int card, uint32_t handle)
{
	CHECK_OK(sp_drm_gem_release(card, handle));
}

long sp_dmabuf_count(void)
{
	FILE *f = fopen("/sys/kernel/debug/dma_buf/bufinfo", "re");
	char line[512];
	long n = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Total %ld objects", &n) == 1)
			break;
	fclose(f);
	return n;
}
