// SPDX-License-Identifier: MIT
/*
 * The suite's stand-in for ROCm's runtime (build/tests/libspgpurt.so, test
 * only, never installed): it exports the HIP and HSA entry points
 * user/gpu/hiprt.h's table looks up, so that strixpeerctl gpu runs end to
 * end in the VM (STRIXPEER_HIP_LIB = STRIXPEER_HSA_LIB = this file).
 *
 * What it does, on the suite's simulated drivers:
 * - hipMalloc, hipExtMallocWithFlags: an sp_gpusim buffer object (GTT, as
 *   on an APU whose carve-out is small) mapped as libhsakmt maps one: the
 *   render node at the BO's fake offset, MAP_SHARED | MAP_FIXED over a
 *   PROT_NONE aperture, MADV_DONTFORK - a PFN mapping the kernel cannot
 *   pin. hsa_amd_portable_export_dmabuf: the BO's PRIME dma-buf.
 * - hipHostMalloc: anonymous memory registered with sp_kfdsim as KFD
 *   registers a userptr BO; hipHostRegister: the same over the caller's
 *   range (a strixpeer buffer included); hipMallocManaged: anonymous memory.
 * - hipImportExternalMemory: sp_kfdsim's dma-buf import (a dynamic
 *   attachment, as amdgpu's), on a duplicate of the caller's fd: like ROCm
 *   (hsa_amd_interop_map_buffer(), KFD's own dma-buf reference) it leaves
 *   the fd to the caller, who may close it once imported. The mapped
 *   buffer is the dma-buf's mmap (a real ROCm gives a GPU address the CPU
 *   cannot use: callers must not read it with the CPU); hipFree() of it
 *   unmaps it, hipDestroyExternalMemory() drops the import (a buffer
 *   still mapped stays, as ROCm's holds its own reference). Flags other
 *   than ROCm's (0, hipExternalMemoryDedicated; a buffer's 0) are refused.
 * - "GPU" writes (hipMemcpyAsync, hipMemsetD32Async into any memory) and
 *   reads go through those CPU mappings.
 * - SP_GPURT_HOLD=stream|device holds every asynchronous write back (a
 *   shadow copy) until a fence at least that strong: stream
 *   (hipStreamSynchronize of its stream, or hipDeviceSynchronize) or device
 *   (hipDeviceSynchronize only), so that the suite proves strixpeerctl gpu
 *   proof sees a missing fence. Writes into memory of the import mapping
 *   are held like any other. SP_GPURT_HOLD=lost drops them: no fence
 *   makes them land (a write that never reaches the memory the NIC reads,
 *   as users report of hipMemcpyAsync into a registered buffer), so the
 *   matrix says "never" and the proof must measure no figure there.
 * - Streams: hipStreamCreate's are blocking, hipStreamCreateWithFlags(
 *   hipStreamNonBlocking)'s are not. hipMemcpy (synchronous, never held)
 *   runs on the null stream, which, as in ROCm's clr (WaitActiveStreams),
 *   first waits for the work of the null stream and of every blocking
 *   stream: their held writes are applied before it copies, whatever
 *   SP_GPURT_HOLD says. A non-blocking stream's held writes are not: the
 *   copy reads memory as it is, as a real copy racing a non-blocking
 *   stream may.
 *
 * What it cannot reproduce: no GPU executes anything; no caches, no
 * coherence protocol (its reads always see memory), no write-combining,
 * no DMA engines or queues (work runs at the call, or at the fence when
 * held), no timing (nothing it does is a figure of a GPU), no system-scope
 * fence distinct from hipDeviceSynchronize, no VRAM placement, eviction or
 * sub-allocation; one device; not thread-safe beyond one caller thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "drm/spdrm.h"
#include "gpu/hiprt.h"	/* ROCm's ABI: checked against its headers */
#include "../kmod/gpusim_uapi.h"
#include "../kmod/kfdsim_uapi.h"

#define SP_EXPORT __attribute__((visibility("default")))

/* ROCm's headers declare the entry points; the stand-in includes none. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

/* hipError_t and hsa_status_t values (ROCm's) */
enum {
	E_OK = 0, E_INVALID_VALUE = 1, E_OUT_OF_MEMORY = 2, E_NO_DEVICE = 100,
	E_INVALID_DEVICE = 101, E_INVALID_HANDLE = 400, E_NOT_SUPPORTED = 801,
	HSA_E_INVALID_ARGUMENT = 0x1001,
};

#define MAX_ALLOCS	64
#define AP_ALIGN	(2UL << 20)

enum akind { A_FREE, A_DEVICE, A_HOST, A_MANAGED, A_REGISTERED, A_IMPORT };

struct alloc {
	enum akind kind;
	uint8_t *ptr;
	size_t len;
	uint8_t *ap;		/* device: the aperture (PROT_NONE reservation) */
	size_t aplen;
	uint32_t handle;	/* device: the BO */
	int kfd;		/* host, registered, import: its sp_kfdsim file */
	int dmabuf;		/* import: the dma-buf (the caller's, not ours) */
};

struct held {
	struct held *next;
	void *stream;
	int blocking;		/* its stream is the null stream or a blocking one */
	uint8_t *dst;
	size_t len;
	uint8_t data[];
};

struct stream {
	int magic;
	unsigned int flags;	/* hipStreamNonBlocking (1) or 0 */
};

#define STREAM_MAGIC	0x5350

static struct alloc allocs[MAX_ALLOCS];
static int gfd = -2;		/* -2: not looked for yet */
static int hold_level;		/* 0 none, 1 stream, 2 device, 3 lost */
static struct held *held_head, **held_tail = &held_head;

__attribute__((constructor)) static void standin_init(void)
{
	const char *h = getenv("SP_GPURT_HOLD");

	if (h && !strcmp(h, "stream"))
		hold_level = 1;
	else if (h && !strcmp(h, "device"))
		hold_level = 2;
	else if (h && !strcmp(h, "lost"))
		hold_level = 3;
	else if (h && h[0] && strcmp(h, "none"))
		fprintf(stderr, "libspgpurt: SP_GPURT_HOLD=%s is not none, stream, device or lost\n",
			h);
}

static int gpusim_fd(void)
{
	if (gfd == -2)
		gfd = sp_drm_find("renderD", 128, SP_GPUSIM_DRIVER_NAME, NULL, 0);
	return gfd;
}

static struct alloc *slot(void)
{
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].kind == A_FREE) {
			memset(&allocs[i], 0, sizeof(allocs[i]));
			allocs[i].kfd = allocs[i].dmabuf = -1;
			return &allocs[i];
		}
	return NULL;
}

static struct alloc *find(const void *p, enum akind kind)
{
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].kind == kind && allocs[i].ptr == p)
			return &allocs[i];
	return NULL;
}

/* The allocation holding [p, p + len), any kind. */
static struct alloc *holding(const void *p, size_t len)
{
	const uint8_t *b = p;

	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].kind != A_FREE && b >= allocs[i].ptr &&
		    len <= allocs[i].len && b - allocs[i].ptr <= (ptrdiff_t)(allocs[i].len - len))
			return &allocs[i];
	return NULL;
}

static size_t round4k(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

SP_EXPORT int hipRuntimeGetVersion(int *v)
{
	if (!v)
		return E_INVALID_VALUE;
	*v = 60400000;	/* the ABI it follows: ROCm 6.4's */
	return E_OK;
}

SP_EXPORT const char *hipGetErrorString(int e)
{
	switch (e) {
	case E_OK: return "hipSuccess";
	case E_INVALID_VALUE: return "hipErrorInvalidValue";
	case E_OUT_OF_MEMORY: return "hipErrorOutOfMemory";
	case E_NO_DEVICE: return "hipErrorNoDevice";
	case E_INVALID_DEVICE: return "hipErrorInvalidDevice";
	case E_INVALID_HANDLE: return "hipErrorInvalidHandle";
	case E_NOT_SUPPORTED: return "hipErrorNotSupported";
	default: return "hipErrorUnknown";
	}
}

SP_EXPORT int hipGetDeviceCount(int *n)
{
	if (!n)
		return E_INVALID_VALUE;
	*n = gpusim_fd() >= 0;
	return *n ? E_OK : E_NO_DEVICE;
}

SP_EXPORT int hipSetDevice(int d)
{
	return d == 0 && gpusim_fd() >= 0 ? E_OK : E_INVALID_DEVICE;
}

SP_EXPORT int hipDeviceGetName(char *name, int len, int d)
{
	if (!name || len <= 0)
		return E_INVALID_VALUE;
	if (d != 0 || gpusim_fd() < 0)
		return E_INVALID_DEVICE;
	snprintf(name, (size_t)len, "sp_gpusim (the suite's stand-in, not a GPU)");
	return E_OK;
}

/* A GTT BO mapped as libhsakmt's fmm_map_to_cpu() maps one. */
static int device_alloc(void **out, size_t size)
{
	struct sp_gpusim_create c = { .domain = SP_GPUSIM_DOMAIN_GTT };
	struct sp_drm_gem_close gc = { 0 };
	struct alloc *a;
	uint8_t *ap, *va;
	size_t aplen;

	if (!out || !size)
		return E_INVALID_VALUE;
	if (gpusim_fd() < 0)
		return E_NO_DEVICE;
	a = slot();
	if (!a)
		return E_OUT_OF_MEMORY;
	c.size = round4k(size);
	if (ioctl(gfd, DRM_IOCTL_SP_GPUSIM_CREATE, &c))
		return E_OUT_OF_MEMORY;
	aplen = c.size + AP_ALIGN;
	ap = mmap(NULL, aplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ap == MAP_FAILED)
		goto out_close;
	va = (uint8_t *)(((uintptr_t)ap + AP_ALIGN - 1) & ~(uintptr_t)(AP_ALIGN - 1));
	if (mmap(va, c.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, gfd,
		 (off_t)c.mmap_offset) == MAP_FAILED)
		goto out_unmap;
	madvise(va, c.size, MADV_DONTFORK);
	a->kind = A_DEVICE;
	a->ptr = va;
	a->len = c.size;
	a->ap = ap;
	a->aplen = aplen;
	a->handle = c.handle;
	*out = va;
	return E_OK;
out_unmap:
	munmap(ap, aplen);
out_close:
	gc.handle = c.handle;
	ioctl(gfd, SP_DRM_IOCTL_GEM_CLOSE, &gc);
	return E_OUT_OF_MEMORY;
}

SP_EXPORT int hipMalloc(void **out, size_t size)
{
	return device_alloc(out, size);
}

SP_EXPORT int hipExtMallocWithFlags(void **out, size_t size, unsigned int flags)
{
	if (flags > 4)
		return E_INVALID_VALUE;
	return device_alloc(out, size);
}

/* Held writes into [p, p + len) are dropped: the memory is going away. */
static void drop_held(const uint8_t *p, size_t len)
{
	struct held **pp = &held_head, *h;

	while ((h = *pp)) {
		if (h->dst + h->len > p && h->dst < p + len) {
			*pp = h->next;
			free(h);
		} else {
			pp = &h->next;
		}
	}
	held_tail = &held_head;
	for (h = held_head; h; h = h->next)
		held_tail = &h->next;
}

SP_EXPORT int hipFree(void *p)
{
	struct alloc *a;
	struct sp_drm_gem_close gc = { 0 };

	if (!p)
		return E_OK;
	a = find(p, A_IMPORT);
	if (a) {
		/* a mapped external buffer: ROCm frees it with hipFree too */
		drop_held(a->ptr, a->len);
		munmap(a->ptr, a->len);
		a->kind = A_FREE;
		return E_OK;
	}
	a = find(p, A_DEVICE);
	if (!a)
		return E_INVALID_VALUE;
	drop_held(a->ptr, a->len);
	munmap(a->ap, a->aplen);
	gc.handle = a->handle;
	ioctl(gfd, SP_DRM_IOCTL_GEM_CLOSE, &gc);
	a->kind = A_FREE;
	return E_OK;
}

/* KFD's userptr registration of [p, p + len) in a new sp_kfdsim file. */
static int userptr(uint8_t *p, size_t len, int *kfd)
{
	struct sp_kfdsim_userptr u = { .addr = (uintptr_t)p, .length = len };
	int fd = open(SP_KFDSIM_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return E_NOT_SUPPORTED;
	if (ioctl(fd, SP_KFDSIM_IOC_USERPTR, &u)) {
		close(fd);
		return errno == ENOMEM ? E_OUT_OF_MEMORY : E_INVALID_VALUE;
	}
	*kfd = fd;
	return E_OK;
}

SP_EXPORT int hipHostMalloc(void **out, size_t size, unsigned int flags)
{
	struct alloc *a;
	uint8_t *p;
	int e;

	(void)flags;
	if (!out || !size)
		return E_INVALID_VALUE;
	a = slot();
	if (!a)
		return E_OUT_OF_MEMORY;
	p = mmap(NULL, round4k(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return E_OUT_OF_MEMORY;
	e = userptr(p, round4k(size), &a->kfd);
	if (e) {
		munmap(p, round4k(size));
		return e;
	}
	a->kind = A_HOST;
	a->ptr = p;
	a->len = round4k(size);
	*out = p;
	return E_OK;
}

SP_EXPORT int hipHostFree(void *p)
{
	struct alloc *a;

	if (!p)
		return E_OK;
	a = find(p, A_HOST);
	if (!a)
		return E_INVALID_VALUE;
	drop_held(a->ptr, a->len);
	close(a->kfd);
	munmap(a->ptr, a->len);
	a->kind = A_FREE;
	return E_OK;
}

SP_EXPORT int hipMallocManaged(void **out, size_t size, unsigned int flags)
{
	struct alloc *a;
	uint8_t *p;

	if (!out || !size || flags != 1)
		return E_INVALID_VALUE;
	a = slot();
	if (!a)
		return E_OUT_OF_MEMORY;
	p = mmap(NULL, round4k(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return E_OUT_OF_MEMORY;
	a->kind = A_MANAGED;
	a->ptr = p;
	a->len = round4k(size);
	*out = p;
	return E_OK;
}

SP_EXPORT int hipHostRegister(void *p, size_t size, unsigned int flags)
{
	struct alloc *a;
	int e;

	(void)flags;
	if (!p || !size || ((uintptr_t)p & 4095))
		return E_INVALID_VALUE;
	a = slot();
	if (!a)
		return E_OUT_OF_MEMORY;
	e = userptr(p, round4k(size), &a->kfd);
	if (e)
		return e;
	a->kind = A_REGISTERED;
	a->ptr = p;
	a->len = round4k(size);
	return E_OK;
}

SP_EXPORT int hipHostUnregister(void *p)
{
	struct alloc *a = find(p, A_REGISTERED);

	if (!a)
		return E_INVALID_VALUE;
	drop_held(a->ptr, a->len);
	close(a->kfd);
	a->kind = A_FREE;
	return E_OK;
}

struct extmem {
	int kfd;
	int fd;
	unsigned long long size;
};

SP_EXPORT int hipImportExternalMemory(void **out, const struct sp_hip_extmem_handle_desc *d)
{
	struct sp_kfdsim_import imp = { 0 };
	struct extmem *m;

	if (!out || !d || d->type != SP_HIP_EXT_MEM_OPAQUE_FD || d->handle.fd < 0 || !d->size ||
	    d->flags > 1)
		return E_INVALID_VALUE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return E_OUT_OF_MEMORY;
	m->kfd = open(SP_KFDSIM_DEVICE, O_RDWR | O_CLOEXEC);
	if (m->kfd < 0) {
		free(m);
		return E_NOT_SUPPORTED;
	}
	imp.fd = d->handle.fd;
	if (ioctl(m->kfd, SP_KFDSIM_IOC_IMPORT, &imp))
		goto out_close;
	/* ours: the caller's fd stays the caller's */
	m->fd = fcntl(d->handle.fd, F_DUPFD_CLOEXEC, 0);
	if (m->fd < 0)
		goto out_close;
	m->size = d->size;
	*out = m;
	return E_OK;
out_close:
	close(m->kfd);
	free(m);
	return E_INVALID_VALUE;
}

SP_EXPORT int hipExternalMemoryGetMappedBuffer(void **out, void *mem,
					       const struct sp_hip_extmem_buffer_desc *d)
{
	struct extmem *m = mem;
	struct alloc *a;
	uint8_t *p;

	if (!out || !m || !d || !d->size || d->offset + d->size > m->size || (d->offset & 4095) ||
	    d->flags)
		return E_INVALID_VALUE;
	a = slot();
	if (!a)
		return E_OUT_OF_MEMORY;
	p = mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, (off_t)d->offset);
	if (p == MAP_FAILED)
		return E_INVALID_VALUE;
	a->kind = A_IMPORT;
	a->ptr = p;
	a->len = d->size;
	a->dmabuf = m->fd;
	*out = p;
	return E_OK;
}

SP_EXPORT int hipDestroyExternalMemory(void *mem)
{
	struct extmem *m = mem;

	if (!m)
		return E_INVALID_VALUE;
	/* a mapped buffer not yet hipFree()d keeps the dma-buf by its mmap */
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].kind == A_IMPORT && allocs[i].dmabuf == m->fd)
			allocs[i].dmabuf = -1;
	close(m->fd);
	close(m->kfd);
	free(m);
	return E_OK;
}

/* An asynchronous "GPU" write: done now, or held until its fence. */
static int gpu_write(void *stream, void *dst, const void *src, size_t len, const uint32_t *fill)
{
	struct held *h;

	if (!hold_level) {
		if (fill)
			for (size_t i = 0; i < len / 4; i++)
				((uint32_t *)dst)[i] = *fill;
		else
			memmove(dst, src, len);
		return E_OK;
	}
	if (hold_level == 3)
		return E_OK;	/* lost: never lands */
	h = malloc(sizeof(*h) + len);
	if (!h)
		return E_OUT_OF_MEMORY;
	h->next = NULL;
	h->stream = stream;
	h->blocking = !stream || !(((struct stream *)stream)->flags & 1);
	h->dst = dst;
	h->len = len;
	if (fill)
		for (size_t i = 0; i < len / 4; i++)
			memcpy(h->data + 4 * i, fill, 4);
	else
		memcpy(h->data, src, len);
	*held_tail = h;
	held_tail = &h->next;
	return E_OK;
}

/*
 * Apply the held writes of @stream (@all 1: every stream's; 2: the null
 * stream's and the blocking streams'), in order.
 */
static void flush_held(void *stream, int all)
{
	struct held **pp = &held_head, *h;

	while ((h = *pp)) {
		if (all == 1 || (all == 2 && h->blocking) || (!all && h->stream == stream)) {
			memcpy(h->dst, h->data, h->len);
			*pp = h->next;
			free(h);
		} else {
			pp = &h->next;
		}
	}
	held_tail = &held_head;
	for (h = held_head; h; h = h->next)
		held_tail = &h->next;
}

static int bad_stream(void *s)
{
	return s && ((struct stream *)s)->magic != STREAM_MAGIC;
}

SP_EXPORT int hipMemcpy(void *dst, const void *src, size_t len, int kind)
{
	if ((!dst || !src) && len)
		return E_INVALID_VALUE;
	if (kind < 0 || kind > 4)
		return E_INVALID_VALUE;
	flush_held(NULL, 2);	/* the null stream waits for the blocking streams */
	memmove(dst, src, len);
	return E_OK;
}

SP_EXPORT int hipMemcpyAsync(void *dst, const void *src, size_t len, int kind, void *stream)
{
	if (((!dst || !src) && len) || kind < 0 || kind > 4 || bad_stream(stream))
		return E_INVALID_VALUE;
	/* a device-to-host copy is a read of GPU-visible memory: never held */
	if (kind == 2 || !holding(dst, len)) {
		memmove(dst, src, len);
		return E_OK;
	}
	return gpu_write(stream, dst, src, len, NULL);
}

SP_EXPORT int hipMemsetD32Async(void *dst, int value, size_t count, void *stream)
{
	uint32_t v = (uint32_t)value;

	if ((!dst && count) || bad_stream(stream) || !holding(dst, count * 4))
		return E_INVALID_VALUE;
	return gpu_write(stream, dst, NULL, count * 4, &v);
}

SP_EXPORT int hipStreamCreateWithFlags(void **out, unsigned int flags)
{
	struct stream *s;

	if (!out || flags > 1)
		return E_INVALID_VALUE;
	s = calloc(1, sizeof(*s));
	if (!s)
		return E_OUT_OF_MEMORY;
	s->magic = STREAM_MAGIC;
	s->flags = flags;
	*out = s;
	return E_OK;
}

SP_EXPORT int hipStreamCreate(void **out)
{
	return hipStreamCreateWithFlags(out, 0);
}

SP_EXPORT int hipStreamSynchronize(void *s)
{
	if (bad_stream(s))
		return E_INVALID_HANDLE;
	if (hold_level <= 1)
		flush_held(s, 0);
	return E_OK;
}

SP_EXPORT int hipStreamDestroy(void *s)
{
	if (!s || bad_stream(s))
		return E_INVALID_HANDLE;
	hipStreamSynchronize(s);
	((struct stream *)s)->magic = 0;
	free(s);
	return E_OK;
}

SP_EXPORT int hipDeviceSynchronize(void)
{
	flush_held(NULL, 1);
	return E_OK;
}

SP_EXPORT int hsa_init(void)
{
	return 0;
}

SP_EXPORT int hsa_shut_down(void)
{
	return 0;
}

SP_EXPORT int hsa_status_string(int status, const char **s)
{
	if (!s)
		return HSA_E_INVALID_ARGUMENT;
	*s = status ? "HSA_STATUS_ERROR_INVALID_ARGUMENT (stand-in)" : "HSA_STATUS_SUCCESS";
	return 0;
}

SP_EXPORT int hsa_amd_portable_export_dmabuf(const void *ptr, size_t size, int *fd,
					     uint64_t *offset)
{
	struct sp_drm_prime_handle ph = { .flags = O_CLOEXEC | O_RDWR };
	struct alloc *a = holding(ptr, size);

	if (!a || a->kind != A_DEVICE || !fd || !offset || !size)
		return HSA_E_INVALID_ARGUMENT;
	ph.handle = a->handle;
	if (ioctl(gfd, SP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph))
		return HSA_E_INVALID_ARGUMENT;
	*fd = ph.fd;
	*offset = (uint64_t)((const uint8_t *)ptr - a->ptr);
	return 0;
}

SP_EXPORT int hsa_amd_portable_close_dmabuf(int fd)
{
	return close(fd) ? HSA_E_INVALID_ARGUMENT : 0;
}
