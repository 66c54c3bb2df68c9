/* SPDX-License-Identifier: MIT */
/*
 * Real dma-buf exporters for the tests: vgem (DRM dumb buffers, PRIME
 * export, mapped through the card or the dma-buf), udmabuf (memfd pages)
 * and the system dma-heap. Each buffer is mapped through its exporter's
 * own mmap, as a GPU buffer would be (GUP fails on such a PFN mapping).
 *
 * The few DRM ioctls are declared here (from the kernel's uapi
 * include/uapi/drm/drm.h and drm_mode.h) so that the tests need no libdrm.
 */
#ifndef SP_DMABUF_UTIL_H
#define SP_DMABUF_UTIL_H

#include "sp_test.h"

#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <sys/mman.h>

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

#define SP_DRM_IOCTL_VERSION		_IOWR('d', 0x00, struct sp_drm_version)
#define SP_DRM_IOCTL_PRIME_HANDLE_TO_FD	_IOWR('d', 0x2d, struct sp_drm_prime_handle)
#define SP_DRM_IOCTL_MODE_CREATE_DUMB	_IOWR('d', 0xB2, struct sp_drm_create_dumb)
#define SP_DRM_IOCTL_MODE_MAP_DUMB	_IOWR('d', 0xB3, struct sp_drm_map_dumb)

struct sp_drm_gem_close {
	uint32_t handle, pad;
};

#define SP_DRM_IOCTL_GEM_CLOSE		_IOW('d', 0x09, struct sp_drm_gem_close)
#define SP_DRM_IOCTL_PRIME_FD_TO_HANDLE	_IOWR('d', 0x2e, struct sp_drm_prime_handle)

enum sp_exporter { SP_EXP_VGEM, SP_EXP_UDMABUF, SP_EXP_HEAP };

extern const char *const sp_exporter_name[3];

/* A buffer of an exporter, mapped through the exporter's own mmap. */
struct sp_xbuf {
	enum sp_exporter kind;
	int fd;			/* the dma-buf */
	int card;		/* vgem: the DRM card fd */
	uint32_t gem;		/* vgem: GEM handle */
	uint8_t *map;		/* the mapping (dma-buf mmap, or card for vgem) */
	size_t len;
};

/* The vgem card's fd, or -1. */
int sp_vgem_card(void);

/*
 * Allocates @len bytes from @kind and maps them (through the card for
 * vgem when @via_card, else through the dma-buf). Skips the case when the
 * exporter is not on this kernel.
 */
void sp_xbuf_new(enum sp_exporter kind, size_t len, int via_card,
		 struct sp_xbuf *x);

void sp_xbuf_free(struct sp_xbuf *x);

/* vgem imports the dma-buf @fd (PRIME); returns the GEM handle. */
uint32_t sp_vgem_import(int card, int fd);

/* Drops a GEM handle (an import's attachment goes with its last one). */
void sp_vgem_close(int card, uint32_t handle);

/* dma-bufs alive on the node (debugfs), or -1 when it cannot be read. */
long sp_dmabuf_count(void);

#endif /* SP_DMABUF_UTIL_H */
