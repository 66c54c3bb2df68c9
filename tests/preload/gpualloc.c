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

#include "drm/spdrm.h"

#define SP_EXPORT __attribute__((visibility("default")))


#define MAX_BOS 64

static struct { void *addr; size_t len; } bos[MAX_BOS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int card = -1;
static size_t min_size = 1 << 20;
static int log_on;
/* glibc's own (exported for interposers: no dlsym, which may allocate) */
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t size);

__attribute__((constructor)) static void init(void)
{
	const char *m = getenv("SP_GPUALLOC_MIN"), *l = getenv("SP_GPUALLOC_LOG");

	if (m && *m)
		min_size = strtoull(m, NULL, 0);
	log_on = l && *l == '1';
	card = sp_drm_find("card", 0, "vgem", NULL, 0);	/* dumb buffers are made there */
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
	uint64_t got, offset;
	uint32_t handle;
	uint8_t *r, *p;
	size_t pad;

	if (card < 0 || sp_drm_dumb_create(card, size, 16384, &handle, &got))
		return NULL;
	if (sp_drm_dumb_offset(card, handle, &offset))
		return NULL;
	/* an address range with room to align in, the BO mapped over its middle */
	pad = align > 4096 ? align : 0;
	r = mmap(NULL, got + pad, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)r + pad) & ~(uintptr_t)(pad ? pad - 1 : 0));
	if (p > r)
		munmap(r, (size_t)(p - r));
	if (r + got + pad > p + got)
		munmap(p + got, (size_t)(r + got + pad - (p + got)));
	if (mmap(p, got, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, card,
		 (off_t)offset) == MAP_FAILED) {
		munmap(p, got);
		return NULL;
	}
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_BOS; i++) {
		if (!bos[i].addr) {
			bos[i].addr = p;
			bos[i].len = got;
			pthread_mutex_unlock(&lock);
			/*
			 * The mapping holds the object; its handle stays in the
			 * card's file until the process exits, as ROCm keeps it.
			 */
			if (log_on)
				fprintf(stderr, "gpualloc: %zu bytes of GPU memory at %p (vgem BO %u)\n",
					size, p, handle);
			return p;
		}
	}
	pthread_mutex_unlock(&lock);
	munmap(p, got);
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
