/* SPDX-License-Identifier: MIT */
/*
 * Real dma-buf exporters for the tests: vgem (DRM dumb buffers, PRIME
 * export, mapped through the card or the dma-buf), udmabuf (memfd pages)
 * and the system dma-heap. Each buffer is mapped through its exporter's
 * own mmap, as a GPU buffer would be (GUP fails on such a PFN mapping).
 *
 * The DRM structs and ioctls (SP_DRM_IOCTL_*) and the dumb-buffer helpers
 * are user/drm/spdrm.h's, shared with strixpeerctl bench: no libdrm.
 */
#ifndef SP_DMABUF_UTIL_H
#define SP_DMABUF_UTIL_H

#include "sp_test.h"

#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <sys/mman.h>

#include "drm/spdrm.h"

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
