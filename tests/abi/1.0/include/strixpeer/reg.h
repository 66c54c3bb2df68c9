/* SPDX-License-Identifier: MIT */
/*
 * libstrixpeer - registering memory with a NIC: sp_reg_mr() and its cache.
 *
 * Part of <strixpeer.h>, which includes it inside its extern "C" block
 * after the types it uses: include <strixpeer.h>, not this file.
 */
#ifndef STRIXPEER_REG_H
#define STRIXPEER_REG_H

#ifndef STRIXPEER_H
#error "include <strixpeer.h>, not <strixpeer/reg.h>"
#endif

/*
 * Registering memory with a NIC. libstrixpeer links
 * libibverbs for these; struct ibv_pd and struct ibv_mr come from
 * <infiniband/verbs.h>.
 */
struct ibv_pd;
struct ibv_mr;

/** Opaque handle on a registration made by sp_reg_mr(). */
struct sp_mr;

/** How sp_reg_mr() registered a range. */
enum sp_reg_path {
	SP_REG_PLAIN = 1,	/**< ibv_reg_mr(), the pages pinned normally */
	SP_REG_DMABUF,		/**< ibv_reg_dmabuf_mr() on the range's dma-buf */
	SP_REG_PEERDIRECT,	/**< ibv_reg_mr(), claimed by strixpeer's
				 *   PeerDirect client through an import */
};

/** sp_reg_mr() flags */
#define SP_REG_NO_PLAIN		(1U << 0) /**< never the plain path */
#define SP_REG_NO_DMABUF	(1U << 1) /**< never ibv_reg_dmabuf_mr() */
#define SP_REG_NO_PEERDIRECT	(1U << 2) /**< never through an import */
#define SP_REG_NO_CACHE		(1U << 3) /**< a registration of its own */

/** Registration cache counters, as returned by sp_reg_cache_stats(). */
struct sp_reg_stats {
	uint64_t hits;		/**< sp_reg_mr() calls served from the cache */
	uint64_t misses;	/**< ... that registered */
	uint64_t entries;	/**< registrations alive now (used or idle) */
	uint64_t idle;		/**< ... kept without a user (buffers, imports) */
	uint64_t dropped;	/**< entries dropped because their memory went */
};

/**
 * sp_reg_mr() - register a range with a NIC by the best path
 * @dev: the device whose buffers and imports the range may lie in
 * @pd: protection domain
 * @addr: start of the range
 * @length: bytes, > 0
 * @access: IBV_ACCESS_* flags
 * @flags: SP_REG_* bits
 * @mrp: receives the registration (sp_mr_ibv() gives its lkey/rkey)
 *
 * The paths, in order:
 * - inside an import (sp_import_dmabuf()): ibv_reg_dmabuf_mr() on the
 *   import's dma-buf when the device supports it; else ibv_reg_mr(), which
 *   the kernel serves by pinning the pages or, when they cannot be pinned
 *   (a GPU buffer's mapping), through strixpeer's PeerDirect client;
 * - GPU memory this process mapped (a GEM mapping that sp_gem_dmabuf()
 *   resolves: hipMalloc() memory, a buffer object's mmap(2)), which the
 *   kernel can never pin: ibv_reg_mr(), served only by a peer-memory
 *   client (strixpeer's zero-change mode or another), reported as
 *   SP_REG_PEERDIRECT; else ibv_reg_dmabuf_mr() on the object's dma-buf
 *   where the NIC supports it (a writable registration of a read-only
 *   mapping fails with -EACCES);
 * - anywhere else (strixpeer buffers, host memory): ibv_reg_mr(); for a
 *   strixpeer buffer whose pages cannot be pinned that way, the buffer's
 *   dma-buf with ibv_reg_dmabuf_mr().
 * sp_mr_path() tells which one served. When none can, the error message
 * names why each path was unavailable.
 *
 * The registration is cached by (pd, range, access): registering it again
 * returns the same sp_mr with one more reference and costs no kernel call.
 * A registration inside a strixpeer buffer or an import of @dev stays
 * cached after its last sp_dereg_mr() ("register a pool once"), until the
 * buffer or import is freed or unmapped, sp_reg_cache_flush() or
 * sp_dev_close(); other memory is deregistered with its last reference,
 * since the library cannot see it being freed; a hit on a GPU range asks
 * the module which dma-buf is mapped there now and registers anew if it
 * is another one. Only the process that
 * opened @dev may use it (-EACCES after fork(): open your own device and
 * verbs context in the child).
 *
 * Return: 0 for a new registration, 1 for a cache hit, or negative errno.
 */
int sp_reg_mr(struct sp_dev *dev, struct ibv_pd *pd, void *addr,
	      size_t length, int access, unsigned int flags,
	      struct sp_mr **mrp);

/** sp_gem_dmabuf() out_flags */
#define SP_GEM_READ_ONLY	(1U << 0) /**< a mapping of the range is read-only */

/**
 * sp_gem_dmabuf() - the dma-buf of a GPU buffer this process has mapped
 * @dev: device
 * @addr: first byte of the range: GPU memory mapped by this process
 *	(hipMalloc() memory, a libdrm/libhsakmt buffer object's mmap(2) of
 *	a DRM card or render node) of a driver in the module's
 *	claim_gem_drivers parameter (default amdgpu,vgem)
 * @length: bytes, > 0; the range lies in one buffer object, mapped at
 *	consecutive offsets of it (in one mapping or adjacent ones)
 * @fd: receives a new close-on-exec file descriptor of the object's
 *	dma-buf (the one its PRIME export gives); close it when done
 * @offset: receives the byte offset of @addr in that dma-buf
 * @out_flags: NULL, or receives SP_GEM_READ_ONLY when a mapping of the
 *	range is read-only
 *
 * For ibv_reg_dmabuf_mr(pd, *offset, length, (uintptr_t)addr, *fd,
 * access) on kernels without a peer-memory core (sp_reg_mr() does that
 * itself). A process reaches only buffer objects it holds a handle of
 * through the DRM file it mapped them with. Needs module ABI 1.3
 * (SP_FEAT_GEM_DMABUF).
 *
 * Return: 0, or negative errno: -ENOENT (part of the range is no GPU
 * mapping of such a driver: host memory, a hole, a dma-buf's own mmap),
 * -EXDEV (two buffer objects, or offsets of one that are not
 * consecutive), -EACCES (no handle of the object is held any more),
 * -EINVAL (an empty or wrapping range), -EMFILE, -EOPNOTSUPP (the module
 * predates ABI 1.3, or the kernel has no DRM).
 */
int sp_gem_dmabuf(struct sp_dev *dev, const void *addr, size_t length,
		  int *fd, uint64_t *offset, unsigned int *out_flags);

/**
 * sp_mr_ibv() - the verbs MR of a registration
 * @mr: registration
 *
 * Return: the MR, owned by @mr.
 */
struct ibv_mr *sp_mr_ibv(const struct sp_mr *mr);

/**
 * sp_mr_path() - how the range was registered
 * @mr: registration
 *
 * Return: an enum sp_reg_path value.
 */
enum sp_reg_path sp_mr_path(const struct sp_mr *mr);

/**
 * sp_reg_path_name() - "plain", "dmabuf" or "peerdirect"
 * @path: enum sp_reg_path value
 *
 * Return: a static string ("unknown" for other values).
 */
const char *sp_reg_path_name(enum sp_reg_path path);

/**
 * sp_dereg_mr() - drop a reference to a registration
 * @mr: registration, or NULL
 *
 * The last reference deregisters it, unless the cache keeps it (see
 * sp_reg_mr()).
 *
 * Return: 0 or negative errno (ibv_dereg_mr()'s error).
 */
int sp_dereg_mr(struct sp_mr *mr);

/**
 * sp_reg_cache_flush() - deregister every cached registration nobody uses
 * @dev: device
 *
 * Return: the number deregistered, or negative errno (the first
 * ibv_dereg_mr() error; the entries are gone all the same).
 */
int sp_reg_cache_flush(struct sp_dev *dev);

/**
 * sp_reg_cache_stats() - the registration cache's counters
 * @dev: device
 * @st: filled in
 *
 * Return: 0.
 */
int sp_reg_cache_stats(const struct sp_dev *dev, struct sp_reg_stats *st);

#endif /* STRIXPEER_REG_H */
