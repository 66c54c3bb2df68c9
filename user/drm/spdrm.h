/* SPDX-License-Identifier: MIT */
/*
 * DRM dumb buffers without libdrm: the one place strixpeer's own programs
 * find a DRM device by its driver's name and make, map, export and import
 * a GEM buffer object. strixpeerctl bench (a GPU buffer on a claimed card),
 * the test programs (tests/lib/dmabuf_util.h, gpusim.h), the fuzzer and the
 * suite's hipMalloc stand-in (tests/preload/gpualloc.c) use it; in the test
 * VM the driver is vgem, on a node amdgpu.
 *
 * The structs and ioctl numbers are the kernel's uapi (include/uapi/drm/
 * drm.h, drm_mode.h) under names of our own, so that no DRM header is
 * needed. The examples keep their own few lines (examples/gpu_import.c):
 * they are programs users copy, built against the installed library only.
 *
 * Internal: a static archive (build/spdrm/libspdrm.a), never part of
 * libstrixpeer. Functions return like ioctl(2) (-1 and errno) unless they
 * say otherwise; nothing allocates, so an LD_PRELOAD malloc may call them.
 */
#ifndef SP_DRM_H
#define SP_DRM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

struct sp_drm_version {
	int version_major, version_minor, version_patchlevel;
	size_t name_len;
	char *name;
	size_t date_len;
	char *date;
	size_t desc_len;
	char *desc;
};

struct sp_drm_create_dumb {
	uint32_t height, width, bpp, flags, handle, pitch;
	uint64_t size;
};

struct sp_drm_map_dumb {
	uint32_t handle, pad;
	uint64_t offset;
};

struct sp_drm_prime_handle {
	uint32_t handle, flags;
	int32_t fd;
};

struct sp_drm_gem_close {
	uint32_t handle, pad;
};

#define SP_DRM_IOCTL_VERSION		_IOWR('d', 0x00, struct sp_drm_version)
#define SP_DRM_IOCTL_GEM_CLOSE		_IOW('d', 0x09, struct sp_drm_gem_close)
#define SP_DRM_IOCTL_PRIME_HANDLE_TO_FD	_IOWR('d', 0x2d, struct sp_drm_prime_handle)
#define SP_DRM_IOCTL_PRIME_FD_TO_HANDLE	_IOWR('d', 0x2e, struct sp_drm_prime_handle)
#define SP_DRM_IOCTL_MODE_CREATE_DUMB	_IOWR('d', 0xB2, struct sp_drm_create_dumb)
#define SP_DRM_IOCTL_MODE_MAP_DUMB	_IOWR('d', 0xB3, struct sp_drm_map_dumb)

/*
 * The first /dev/dri/<@prefix>N, N from @first on (64 tried; "card" 0,
 * "renderD" 128), whose driver is one of the comma-separated @drivers
 * ("vgem", or claim_gem_drivers' "amdgpu,vgem"): its fd, opened O_RDWR |
 * O_CLOEXEC, the driver's name in @drv (@len bytes, NULL: not wanted).
 * -1 when there is none.
 */
int sp_drm_find(const char *prefix, int first, const char *drivers, char *drv, size_t len);

/*
 * A dumb buffer of at least @size bytes in rows of @pitch bytes (32 bits a
 * pixel; 4096 or 16384 suit every driver's alignment): its GEM handle in
 * *@handle, its real size in *@got (NULL: not wanted).
 */
int sp_drm_dumb_create(int card, uint64_t size, uint32_t pitch, uint32_t *handle,
		       uint64_t *got);

/* The offset at which @card's mmap maps the buffer @handle, in *@offset. */
int sp_drm_dumb_offset(int card, uint32_t handle, uint64_t *offset);

/* The buffer @handle as a dma-buf (PRIME): the new fd, or -1. @flags: O_RDWR | O_CLOEXEC. */
int sp_drm_prime_export(int card, uint32_t handle, uint32_t flags);

/* The dma-buf @fd imported into @card (PRIME): its GEM handle in *@handle. */
int sp_drm_prime_import(int card, int fd, uint32_t *handle);

/* Drops the GEM handle @handle (the object goes with its last reference). */
int sp_drm_gem_release(int card, uint32_t handle);

#endif /* SP_DRM_H */
