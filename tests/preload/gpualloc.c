// SPDX-License-Identifier: MIT
/*
 * Test-only stand-in for hipMalloc() under an unmodified program
 * (LD_PRELOAD=libspgpualloc.so, with libstrixpeer-preload.so): every
 * memalign(), posix_memalign() and aligned_alloc() of at least
 * SP_GPUALLOC_MIN bytes (default 1 MiB), at any power-of-two alignment up
 * to 1 GiB, gets GPU memory instead - a vgem
 * buffer object mapped as libhsakmt maps a hipMalloc() allocation (the
 * render node, MAP_SHARED, a PFN mapping the kernel cannot pin) - and
 * free() gives it back. perftest allocates its buffers with memalign(),
 * so ib_write_bw then runs on "GPU memory" it knows nothing about, as it
 * would with --use_rocm on a Strix Halo node.
 *
 * What it does not reproduce of ROCm: no GPU, no VRAM/GTT placement or
 * eviction (vgem's pages are shmem and never move), and no HIP runtime;
 * realloc() of such memory is refused (perftest never does it).
 * SP_GPUALLOC_LOG=1 says on stderr what it handed out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define SP_EXPORT __attribute__((visibility("default")))

struct dumb_create { uint32_t height, width, bpp, flags, handle, pitch; uint64_t size; };
struct dumb_map { uint32_t handle, pad; uint64_t offset; };
struct drm_ver { int major, minor, patch; size_t name_len; char *name;
		 size_t date_len; char *date; size_t desc_len; char *desc; };
#define IOCTL_VERSION		_IOWR('d', 0x00, struct drm_ver)
#define IOCTL_CREATE_DUMB	_IOWR('d', 0xB2, struct dumb_create)
#define IOCTL_MAP_DUMB		_IOWR('d', 0xB3, struct dumb_map)

#define MAX_BOS 64

static struct { void *addr; size_t len; } bos[MAX_BOS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int card = -1;
static size_t min_size = 1 << 20;
static int log_on;
/* glibc's own (exported for interposers: no dlsym, which may allocate) */
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t size);

/* vgem's card (dumb buffers are created there) */
static int vgem_card(void)
{
	for (int i = 0; i < 16; i++) {
		char path[32], name[16] = "";
		struct drm_ver v = { .name_len = sizeof(name) - 1, .name = name };
		int fd;

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!ioctl(fd, IOCTL_VERSION, &v) && !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return -1;
}

__attribute__((constructor)) static void init(void)
{
	const char *m = getenv("SP_GPUALLOC_MIN"), *l = getenv("SP_GPUALLOC_LOG");

	if (m && *m)
		min_size = strtoull(m, NULL, 0);
	log_on = l && *l == '1';
	card = vgem_card();
	if (log_on)
		fprintf(stderr, "gpualloc: vgem card fd %d, allocations of %zu bytes and more are GPU buffers\n",
			card, min_size);
}

/*
 * A BO of at least @size bytes mapped at a fresh address that is a multiple
 * of @align (a power of two; libhsakmt puts large allocations on 2 MiB
 * boundaries too), or NULL.
 */
static void *bo_alloc(size_t size, size_t align)
{
	struct dumb_create c = { .width = 4096, .bpp = 32 };
	struct dumb_map md = { 0 };
	uint8_t *r, *p;
	size_t pad;

	c.height = (uint32_t)((size + 16383) / 16384);
	if (card < 0 || ioctl(card, IOCTL_CREATE_DUMB, &c))
		return NULL;
	md.handle = c.handle;
	if (ioctl(card, IOCTL_MAP_DUMB, &md))
		return NULL;
	/* an address range with room to align in, the BO mapped over its middle */
	pad = align > 4096 ? align : 0;
	r = mmap(NULL, c.size + pad, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)r + pad) & ~(uintptr_t)(pad ? pad - 1 : 0));
	if (p > r)
		munmap(r, (size_t)(p - r));
	if (r + c.size + pad > p + c.size)
		munmap(p + c.size, (size_t)(r + c.size + pad - (p + c.size)));
	if (mmap(p, c.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, card,
		 (off_t)md.offset) == MAP_FAILED) {
		munmap(p, c.size);
		return NULL;
	}
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_BOS; i++) {
		if (!bos[i].addr) {
			bos[i].addr = p;
			bos[i].len = c.size;
			pthread_mutex_unlock(&lock);
			/*
			 * The mapping holds the object; its handle stays in the
			 * card's file until the process exits, as ROCm keeps it.
			 */
			if (log_on)
				fprintf(stderr, "gpualloc: %zu bytes of GPU memory at %p (vgem BO %u)\n",
					size, p, c.handle);
			return p;
		}
	}
	pthread_mutex_unlock(&lock);
	munmap(p, c.size);
	return NULL;
}

static int bo_free(void *p)
{
	int found = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_BOS; i++) {
		if (p && bos[i].addr == p) {
			munmap(p, bos[i].len);
			bos[i].addr = NULL;
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}

SP_EXPORT void *memalign(size_t align, size_t size)
{
	void *p;

	if (size >= min_size && align && !(align & (align - 1)) && align <= (1UL << 30) &&
	    (p = bo_alloc(size, align)))
		return p;
	return __libc_memalign(align, size);
}

SP_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	void *p = memalign(align, size);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

SP_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	return memalign(align, size);
}

SP_EXPORT void free(void *p)
{
	if (bo_free(p))
		return;
	__libc_free(p);
}
