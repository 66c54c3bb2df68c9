/* SPDX-License-Identifier: MIT */
/*
 * libstrixpeer - user-space access to strixpeer buffers.
 *
 * Every function that can fail returns 0 (or a positive value where
 * documented) on success and a negative errno on failure; sp_errmsg()
 * then describes the failure of the calling thread's last call in words.
 *
 * Build with pkg-config --cflags --libs strixpeer (it adds -libverbs), or
 * CMake's find_package(strixpeer) and strixpeer::strixpeer. Every function,
 * struct and error: libstrixpeer(7). The control plane and NIC registration
 * are declared in <strixpeer/ctl.h> and <strixpeer/reg.h>, which this header
 * includes.
 */
#ifndef STRIXPEER_H
#define STRIXPEER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle on an open /dev/strixpeer. */
struct sp_dev;
/** Opaque handle on a strixpeer buffer allocated through an sp_dev. */
struct sp_buf;
/** Opaque handle on an imported dma-buf range (PeerDirect). */
struct sp_import;

/** Module and ABI versions, as returned by sp_dev_version(). */
struct sp_version {
	unsigned int abi_major;		/**< module's ABI major version */
	unsigned int abi_minor;		/**< module's ABI minor version */
	unsigned int module_major;	/**< module release */
	unsigned int module_minor;
	unsigned int module_patch;
	uint64_t features;		/**< SP_FEAT_* bits */
	uint64_t page_sizes;		/**< bit n: 2^n-byte pages back buffers */
};

/** Properties of one buffer, as returned by sp_buf_query(). */
struct sp_buf_info {
	uint32_t handle;		/**< handle on its sp_dev */
	int node;			/**< NUMA node of every page */
	uint64_t size;			/**< bytes */
	uint64_t page_size;		/**< page size backing every byte: 2 MiB
					 *   when all pages are 2 MiB, else 4 KiB */
	uint32_t nr_chunks;		/**< physically contiguous runs */
	uint32_t map_count;		/**< live mappings (any process) */
	uint64_t mmap_offset;		/**< offset for mmap(2) on sp_dev_fd() */
};

/** State of one import, as returned by sp_import_query(). */
struct sp_import_info {
	uint32_t id;			/**< node-wide import id */
	uint32_t registrations;		/**< PeerDirect registrations using it */
	void *addr;			/**< start of the imported range */
	uint64_t length;		/**< bytes */
	uint64_t offset;		/**< offset into the dma-buf */
	uint64_t dmabuf_size;		/**< size of the whole dma-buf */
	int unmapped;			/**< 1: ended because it was unmapped */
};

/**
 * Module-wide counters (sysfs), as returned by sp_stats_read(): the eight
 * that need no netlink. sp_ctl_stats() returns every counter, these included.
 */
struct sp_stats {
	uint64_t buffers;		/**< buffers alive now */
	uint64_t pinned_bytes;		/**< bytes pinned by buffers now */
	uint64_t peak_pinned_bytes;	/**< highest pinned_bytes seen */
	uint64_t allocs;		/**< buffers allocated since load */
	uint64_t frees;			/**< buffers freed since load */
	uint64_t fail_nomem;		/**< allocations failed: no memory */
	uint64_t fail_memlock;		/**< allocations failed: RLIMIT_MEMLOCK */
	uint64_t mmaps;			/**< mappings created since load */
};

/** sp_version.features bits (same values as the kernel ABI's) */
#define SP_FEAT_BUFFERS		(1ULL << 0) /**< buffers can be allocated */
#define SP_FEAT_NUMA		(1ULL << 1) /**< buffers placed on a chosen node */
#define SP_FEAT_PEERDIRECT	(1ULL << 2) /**< PeerDirect client active */
#define SP_FEAT_DMABUF_EXPORT	(1ULL << 3) /**< buffers exported as dma-buf */
#define SP_FEAT_DMABUF_IMPORT	(1ULL << 4) /**< dma-bufs imported */
#define SP_FEAT_GEM_DMABUF	(1ULL << 5) /**< sp_gem_dmabuf() works */

/** Node argument: the module's default node (normally the caller's). */
#define SP_NODE_DEFAULT		(-1)

/** sp_buf_alloc() flags */
#define SP_ALLOC_HUGE_ONLY	(1U << 0)  /**< 2 MiB pages or -ENOMEM */
#define SP_ALLOC_ALLOW_SMALL	(1U << 1)  /**< fall back to smaller pages */
#define SP_ALLOC_UNMAPPED	(1U << 16) /**< do not map; see sp_buf_map() */

/**
 * sp_lib_version() - version of this library
 *
 * Return: a string such as "0.1.0".
 */
const char *sp_lib_version(void);

/**
 * sp_errmsg() - what went wrong in this thread's last failed call
 *
 * Return: a message that names the cause and, where there is one, the fix.
 * Valid until the thread's next call into the library.
 */
const char *sp_errmsg(void);

/**
 * sp_dev_open() - open the strixpeer device and check its version
 * @path: device node, or NULL for /dev/strixpeer
 * @devp: receives the handle
 *
 * Refuses a module whose ABI this library cannot use (-EPROTONOSUPPORT)
 * with a message saying which side to update.
 *
 * Return: 0 or negative errno (-ENOENT: module not loaded; -EACCES: no
 * permission on the device node).
 */
int sp_dev_open(const char *path, struct sp_dev **devp);

/**
 * sp_dev_close() - close the device
 * @dev: handle, or NULL
 *
 * Buffers not freed yet are unmapped and freed, imports ended, and
 * registrations made by sp_reg_mr() deregistered (their handles become
 * invalid). In a forked child, closing an inherited device frees only the
 * child's copy: the parent's registrations stay.
 */
void sp_dev_close(struct sp_dev *dev);

/**
 * sp_dev_fd() - the device's file descriptor
 * @dev: handle
 *
 * Return: the fd, owned by @dev.
 */
int sp_dev_fd(const struct sp_dev *dev);

/**
 * sp_dev_version() - module and ABI versions read at open
 * @dev: handle
 * @ver: filled in
 *
 * Return: 0.
 */
int sp_dev_version(const struct sp_dev *dev, struct sp_version *ver);

/**
 * sp_buf_alloc() - allocate a buffer and map it into this process
 * @dev: handle
 * @size: bytes; rounded up to the page size (2 MiB with SP_ALLOC_HUGE_ONLY)
 * @node: NUMA node, or SP_NODE_DEFAULT
 * @flags: SP_ALLOC_* bits
 * @bufp: receives the buffer
 *
 * The mapping is shared, readable and writable, and can be registered with
 * ibv_reg_mr() on any verbs device. It starts 2 MiB-aligned; on kernels
 * 6.15 and later its 2 MiB pages are mapped with 2 MiB (PMD) entries, on
 * first access.
 *
 * Return: 0 or negative errno (-EFBIG: above the module's max_buf_size;
 * -ENOSPC: all buffers together would exceed max_pinned_bytes; -EDQUOT:
 * RLIMIT_MEMLOCK; -ENOMEM: the pages could not be had; -EINVAL: size 0,
 * contradictory flags, or a node that is offline or has no memory).
 */
int sp_buf_alloc(struct sp_dev *dev, size_t size, int node,
		 unsigned int flags, struct sp_buf **bufp);

/**
 * sp_buf_map() - map a buffer allocated with SP_ALLOC_UNMAPPED
 * @buf: buffer
 *
 * Return: 0, -EBUSY when already mapped, or negative errno.
 */
int sp_buf_map(struct sp_buf *buf);

/**
 * sp_buf_unmap() - remove this library's mapping of a buffer
 * @buf: buffer
 *
 * Return: 0, or -EINVAL when not mapped.
 */
int sp_buf_unmap(struct sp_buf *buf);

/**
 * sp_buf_addr() - address of the buffer's mapping
 * @buf: buffer
 *
 * Return: the address, or NULL when not mapped.
 */
void *sp_buf_addr(const struct sp_buf *buf);

/**
 * sp_buf_size() - size of the buffer in bytes (after rounding)
 * @buf: buffer
 *
 * Return: bytes.
 */
size_t sp_buf_size(const struct sp_buf *buf);

/**
 * sp_buf_query() - ask the module about a buffer
 * @buf: buffer
 * @info: filled in
 *
 * Return: 0 or negative errno.
 */
int sp_buf_query(const struct sp_buf *buf, struct sp_buf_info *info);

/**
 * sp_buf_free() - unmap and free a buffer
 * @buf: buffer, or NULL
 *
 * Memory mapped elsewhere (another mapping, a forked child) stays until
 * that mapping goes; pages registered with an MR stay until deregistration.
 *
 * Return: 0 or negative errno; @buf is released in both cases.
 */
int sp_buf_free(struct sp_buf *buf);

/** sp_buf_export() flags (same values as the kernel ABI's) */
#define SP_EXPORT_CLOEXEC	(1U << 0) /**< the fd is close-on-exec */
#define SP_EXPORT_RDWR		(1U << 1) /**< read-write (else read-only) */

/**
 * sp_buf_export() - a new dma-buf of the whole buffer
 * @buf: buffer
 * @flags: SP_EXPORT_* bits
 * @fdp: receives the dma-buf file descriptor; the caller closes it
 *
 * Hand the fd to a GPU (amdgpu/HIP import, DRM PRIME), to
 * ibv_reg_dmabuf_mr(), to another process (SCM_RIGHTS) or mmap(2) it.
 * The memory stays while any dma-buf reference exists, even after
 * sp_buf_free() and close(). The pages never move. Needs module ABI 1.2.
 *
 * Return: 0 or negative errno (-EMFILE: no free fd).
 */
int sp_buf_export(struct sp_buf *buf, unsigned int flags, int *fdp);

/**
 * sp_import_dmabuf() - declare where a dma-buf's bytes are mapped
 * @dev: handle
 * @dmabuf_fd: the dma-buf (e.g. from hsa_amd_portable_export_dmabuf(),
 *	DRM PRIME, udmabuf or a dma-heap); the module keeps its own
 *	reference, so the fd may be closed afterwards (the library keeps a
 *	duplicate for sp_reg_mr() until sp_import_free())
 * @offset: byte offset into the dma-buf of @addr, page aligned
 * @length: bytes, page aligned
 * @addr: page-aligned address where those bytes are mapped in this process
 * @impp: receives the import
 *
 * From then on an ibv_reg_mr() inside [@addr, @addr + @length) that the
 * kernel cannot pin normally (a GPU buffer's mapping) is claimed by
 * strixpeer's PeerDirect client, which maps the dma-buf for the NIC.
 * Registrations are invalidated when the import ends: sp_import_free(),
 * sp_dev_close(), process exit, or an munmap of any part of the range.
 * Needs module ABI 1.1.
 *
 * Return: 0 or negative errno (-EBADF: not a dma-buf; -ERANGE: the dma-buf
 * is smaller; -EEXIST: overlaps an import of this process; -EINVAL:
 * misaligned).
 */
int sp_import_dmabuf(struct sp_dev *dev, int dmabuf_fd, uint64_t offset,
		     size_t length, void *addr, struct sp_import **impp);

/**
 * sp_import_id() - node-wide id of an import (netlink, events)
 * @imp: import
 *
 * Return: the id.
 */
uint32_t sp_import_id(const struct sp_import *imp);

/**
 * sp_import_query() - state of an import
 * @imp: import
 * @info: filled in
 *
 * Return: 0 or negative errno.
 */
int sp_import_query(const struct sp_import *imp, struct sp_import_info *info);

/**
 * sp_import_free() - end an import
 * @imp: import, or NULL
 *
 * Registrations using it are invalidated before this returns; @imp is
 * freed even when the module reports an error.
 *
 * Return: 0 or negative errno.
 */
int sp_import_free(struct sp_import *imp);

/**
 * sp_stats_read() - read the module-wide counters
 * @stats: filled in
 *
 * Return: 0, or negative errno (-ENOENT: module not loaded).
 */
int sp_stats_read(struct sp_stats *stats);

/* The control plane (sp_ctl_*) and NIC registration (sp_reg_*). */
#include <strixpeer/ctl.h>
#include <strixpeer/reg.h>

#ifdef __cplusplus
}
#endif

#endif /* STRIXPEER_H */
