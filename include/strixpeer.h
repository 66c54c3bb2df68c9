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
 * struct and error: libstrixpeer(3).
 */
#ifndef STRIXPEER_H
#define STRIXPEER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/** Module-wide counters (sysfs), as returned by sp_stats_read(). */
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

/*
 * Control plane (generic netlink family "strixpeer").
 * These calls need no /dev/strixpeer access; changing the configuration
 * needs CAP_NET_ADMIN.
 */

/** Opaque handle on a netlink socket talking to the module. */
struct sp_ctl;

/** One NUMA node, as reported by sp_ctl_info(). */
struct sp_node_info {
	int id;				/**< node number */
	uint64_t free_bytes;		/**< free memory */
	uint64_t free_huge;		/**< free 2 MiB blocks */
};

#define SP_MAX_NODES 64

/** Module information, as returned by sp_ctl_info(). */
struct sp_info {
	char version[32];		/**< module release */
	unsigned int abi_major;
	unsigned int abi_minor;
	uint64_t features;		/**< SP_FEAT_* bits */
	uint64_t page_sizes;		/**< bit n: 2^n-byte pages */
	char peerdirect_reason[160];	/**< empty when PeerDirect is active */
	unsigned int nr_nodes;
	struct sp_node_info nodes[SP_MAX_NODES];
};

/** One buffer of the node, as listed by sp_ctl_bufs(). */
struct sp_buf_entry {
	uint32_t id;			/**< node-wide id */
	uint32_t pid;			/**< allocating process */
	uint64_t size;
	uint32_t node;
	uint64_t page_size;
	uint32_t chunks;		/**< physically contiguous runs */
	uint32_t map_count;
	int pinned;			/**< pages held by a driver (an MR) */
	int exported;			/**< exported as dma-buf */
	/* dma-buf export */
	uint32_t exports;		/**< live dma-bufs of the buffer */
	uint32_t attachments;		/**< devices attached to them */
	/* holders (empty/0 from an older module) */
	char comm[16];			/**< allocator's comm, a hint as @pid */
	uint32_t handle;		/**< handle on its file, 0: freed */
	uint32_t nr_dmabuf_inos;	/**< entries of @dmabuf_inos */
	uint64_t dmabuf_inos[32];	/**< inode of each live dma-buf */
};

/** Node-wide counters, as returned by sp_ctl_stats(). */
struct sp_counters {
	uint64_t buffers, pinned_bytes, peak_pinned_bytes;
	uint64_t allocs, frees, mmaps;
	uint64_t fail_nomem, fail_memlock, fail_max_buf_size, fail_max_pinned;
	uint64_t peer_acquires, peer_claims, peer_invalidations;
	uint64_t dmabuf_exports, dmabuf_attachments;
};

/** Configuration, for sp_ctl_config_get() and sp_ctl_config_set(). */
struct sp_config {
	uint64_t max_buf_size;		/**< largest buffer, bytes */
	uint64_t max_pinned_bytes;	/**< node-wide pin limit, 0: none */
	int default_node;		/**< -1: the caller's node */
	int require_huge;		/**< 2 MiB pages by default */
};

/** sp_ctl_config_set() mask bits: which fields to change */
#define SP_CONFIG_MAX_BUF_SIZE		(1U << 0)
#define SP_CONFIG_MAX_PINNED_BYTES	(1U << 1)
#define SP_CONFIG_DEFAULT_NODE		(1U << 2)
#define SP_CONFIG_REQUIRE_HUGE		(1U << 3)

/** sp_event.type */
enum sp_event_type {
	SP_EVENT_BUF_CREATED = 1,	/**< @buf is set */
	SP_EVENT_BUF_FREED,		/**< @buf is set */
	SP_EVENT_LIMIT,			/**< @limit, @pid, @size are set */
	SP_EVENT_CONFIG,		/**< @pid and @config are set */
	SP_EVENT_PEER,			/**< @peer, @import_id, @pid, @size
					 *   (and @reason) are set; only with
					 *   SP_MONITOR_PEER */
	SP_EVENT_EXPORT,		/**< @export_event, @buf, @pid (and
					 *   @device) are set; only with
					 *   SP_MONITOR_EXPORT */
};

/** sp_event.export_event: what happened to a dma-buf of a buffer */
enum sp_export_event {
	SP_EXPORT_CREATE = 1,		/**< a dma-buf of the buffer was made */
	SP_EXPORT_ATTACH,		/**< a device (@device) attached */
	SP_EXPORT_DETACH,		/**< a device (@device) detached */
	SP_EXPORT_RELEASE,		/**< the last reference to a dma-buf went */
};

/** sp_event.peer: what the PeerDirect client did */
enum sp_peer_event {
	SP_PEER_CLAIM = 1,		/**< claimed a registration of an import */
	SP_PEER_MAP,			/**< mapped it for a device */
	SP_PEER_INVALIDATE,		/**< told the core to stop using it */
};

/** sp_event.reason: why a registration was invalidated */
enum sp_inval_reason {
	SP_INVAL_UNIMPORT = 1,		/**< sp_import_free(), or its registration ended */
	SP_INVAL_CLOSE,			/**< the importing device fd was closed */
	SP_INVAL_UNMAP,			/**< part of the range was unmapped */
	SP_INVAL_EXIT,			/**< the importing process exited */
	SP_INVAL_MOVE,			/**< never sent: registrations pin the buffer */
};

/** sp_ctl_monitor_ex() flags */
#define SP_MONITOR_PEER		(1U << 0) /**< also PeerDirect events */
#define SP_MONITOR_EXPORT	(1U << 1) /**< also dma-buf export events */

/** sp_event.limit: which limit refused an allocation */
enum sp_limit {
	SP_LIMIT_MAX_BUF_SIZE = 1,
	SP_LIMIT_MAX_PINNED_BYTES,
	SP_LIMIT_MEMLOCK,
	SP_LIMIT_NO_MEMORY,
};

/** An event from the module's "events" group. */
struct sp_event {
	enum sp_event_type type;
	struct sp_buf_entry buf;
	enum sp_limit limit;
	uint32_t pid;
	uint64_t size;
	struct sp_config config;
	/* with SP_MONITOR_PEER */
	enum sp_peer_event peer;
	uint32_t import_id;
	enum sp_inval_reason reason;
	/* with SP_MONITOR_EXPORT */
	enum sp_export_event export_event;
	char device[64];		/**< importer's device (attach, detach) */
};

/**
 * sp_ctl_open() - open a netlink socket to the module
 * @ctlp: receives the handle
 *
 * Return: 0, -ENOENT when the module (its netlink family) is not loaded,
 * or negative errno.
 */
int sp_ctl_open(struct sp_ctl **ctlp);

/**
 * sp_ctl_close() - close the socket
 * @ctl: handle, or NULL
 */
void sp_ctl_close(struct sp_ctl *ctl);

/**
 * sp_ctl_info() - module version, features, PeerDirect state, NUMA nodes
 * @ctl: handle
 * @info: filled in
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_info(struct sp_ctl *ctl, struct sp_info *info);

/**
 * sp_ctl_bufs() - list the node's buffers
 * @ctl: handle
 * @pid: only this process's buffers, or 0 for all
 * @cb: called for each buffer; a non-zero return stops the listing
 * @arg: passed to @cb
 *
 * Without CAP_SYS_ADMIN only buffers of the caller's uid are listed.
 *
 * Return: 0, @cb's non-zero value, or negative errno.
 */
int sp_ctl_bufs(struct sp_ctl *ctl, uint32_t pid,
		int (*cb)(const struct sp_buf_entry *e, void *arg), void *arg);

/**
 * sp_ctl_buf_get() - one buffer by id
 * @ctl: handle
 * @id: node-wide buffer id
 * @e: filled in
 *
 * Return: 0, -ENOENT when no such buffer is visible, or negative errno.
 */
int sp_ctl_buf_get(struct sp_ctl *ctl, uint32_t id, struct sp_buf_entry *e);

/**
 * sp_ctl_stats() - node-wide counters
 * @ctl: handle
 * @c: filled in
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_stats(struct sp_ctl *ctl, struct sp_counters *c);

/** PeerDirect and import counters, as returned by sp_ctl_peer_stats(). */
struct sp_peer_counters {
	uint64_t acquires;		/**< ranges the core asked about */
	uint64_t claims;		/**< ... and strixpeer claimed */
	uint64_t maps;			/**< mappings made for a device */
	uint64_t invalidations;		/**< registrations invalidated */
	uint64_t registrations;		/**< claimed registrations alive now */
	uint64_t imports;		/**< imports alive now */
};

/**
 * sp_ctl_peer_stats() - PeerDirect and import counters
 * @ctl: handle
 * @c: filled in
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_peer_stats(struct sp_ctl *ctl, struct sp_peer_counters *c);

/**
 * struct sp_peer_pins - what PeerDirect registrations pin, and the bound
 *
 * A registration pins the whole dma-buf it lies in; the pin is shared by
 * every registration of that dma-buf for one device and charged once, to
 * the uid (and locked_vm, against RLIMIT_MEMLOCK unless CAP_IPC_LOCK) of
 * the process that made the first of them, until the last one is gone.
 */
struct sp_peer_pins {
	uint64_t pinned_bytes;		/**< dma-buf bytes pinned, node-wide */
	uint64_t user_pinned_bytes;	/**< ... charged to the caller's uid */
	uint64_t fail_limit;		/**< registrations refused (EDQUOT) */
	uint64_t max_per_user;		/**< max_peer_pinned_per_user, 0: none */
};

/**
 * sp_ctl_peer_pins() - GPU bytes pinned by PeerDirect
 * @ctl: handle
 * @p: filled in; zeros from a module that does not report them
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_peer_pins(struct sp_ctl *ctl, struct sp_peer_pins *p);

/**
 * sp_ctl_config_get() - current configuration
 * @ctl: handle
 * @cfg: filled in
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_config_get(struct sp_ctl *ctl, struct sp_config *cfg);

/**
 * sp_ctl_config_set() - change the configuration (CAP_NET_ADMIN)
 * @ctl: handle
 * @cfg: new values
 * @mask: SP_CONFIG_* bits naming the fields of @cfg to apply
 *
 * All named fields change, or none; the module announces the change.
 *
 * Return: 0, -EPERM without CAP_NET_ADMIN, -EINVAL with the module's
 * reason in sp_errmsg(), or negative errno.
 */
int sp_ctl_config_set(struct sp_ctl *ctl, const struct sp_config *cfg,
		      unsigned int mask);

/**
 * sp_ctl_monitor() - receive events until told to stop
 * @ctl: handle (used for events only from now on)
 * @cb: called for each event; a non-zero return ends the monitor
 * @arg: passed to @cb
 *
 * Return: @cb's non-zero value, or negative errno.
 */
int sp_ctl_monitor(struct sp_ctl *ctl,
		   int (*cb)(const struct sp_event *ev, void *arg), void *arg);

/**
 * sp_ctl_monitor_ex() - sp_ctl_monitor() with flags
 * @ctl: handle
 * @flags: SP_MONITOR_PEER to receive SP_EVENT_PEER events too
 * @cb: as for sp_ctl_monitor()
 * @arg: passed to @cb
 *
 * Return: as sp_ctl_monitor(); -EINVAL for unknown flags.
 */
int sp_ctl_monitor_ex(struct sp_ctl *ctl, unsigned int flags,
		      int (*cb)(const struct sp_event *ev, void *arg), void *arg);

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

#ifdef __cplusplus
}
#endif

#endif /* STRIXPEER_H */
