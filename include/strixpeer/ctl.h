/* SPDX-License-Identifier: MIT */
/*
 * libstrixpeer - the control plane: sp_ctl_*(), the generic netlink family.
 *
 * Part of <strixpeer.h>, which includes it inside its extern "C" block
 * after the types it uses: include <strixpeer.h>, not this file.
 */
#ifndef STRIXPEER_CTL_H
#define STRIXPEER_CTL_H

#ifndef STRIXPEER_H
#error "include <strixpeer.h>, not <strixpeer/ctl.h>"
#endif

/*
 * Control plane (generic netlink family "strixpeer").
 * These calls need no /dev/strixpeer access; changing the configuration
 * needs CAP_SYS_ADMIN (the limits are node-wide: not the CAP_NET_ADMIN a
 * container may hold).
 */

/** Opaque handle on a netlink socket talking to the module. */
struct sp_ctl;

/*
 * Extensible structs. Every struct this header passes between a program and
 * the library starts with uint32_t size, as perf_event_attr does: a program
 * sets it to sizeof the struct it was compiled with (0, a zeroed struct, or
 * any value below SP_<STRUCT>_SIZE_VER0 means that first size); the library
 * fills at most that many bytes, only the fields it knows, and sets size to
 * the bytes it filled. New fields are only ever appended, so a program
 * built against an older header gets the fields it knows from a newer
 * library, and SP_HAS() tells a newer program which fields an older library
 * filled. Structs the library hands to callbacks (sp_buf_entry, sp_event)
 * carry the library's own size.
 */

/**
 * SP_HAS() - whether the struct at @p, of @p->size bytes, includes @field
 * @type: the struct type
 * @p: pointer to it
 * @field: a member of @type
 */
#define SP_HAS(type, p, field) \
	(offsetof(type, field) + sizeof(((type *)0)->field) <= (size_t)(p)->size)

/** One NUMA node, as reported by sp_ctl_info(). */
struct sp_node_info {
	int id;				/**< node number */
	uint64_t free_bytes;		/**< free memory */
	uint64_t free_huge;		/**< free 2 MiB blocks */
};

#define SP_MAX_NODES 64

/** Module information, as returned by sp_ctl_info(). */
struct sp_info {
	uint32_t size;			/**< in: sizeof(struct sp_info); out: bytes filled */
	char version[32];		/**< module release */
	unsigned int abi_major;
	unsigned int abi_minor;
	uint64_t features;		/**< SP_FEAT_* bits */
	uint64_t page_sizes;		/**< bit n: 2^n-byte pages */
	char peerdirect_reason[160];	/**< empty when PeerDirect is active */
	unsigned int nr_nodes;
	struct sp_node_info nodes[SP_MAX_NODES];
};
#define SP_INFO_SIZE_VER0 1768		/**< sizeof(struct sp_info) in 0.1.0 */

/** One buffer of the node, as listed by sp_ctl_bufs() and sp_ctl_buf_get(). */
struct sp_buf_entry {
	uint32_t size;			/**< bytes of this struct (sp_ctl_buf_get(): in and out) */
	uint32_t id;			/**< node-wide id */
	uint32_t pid;			/**< allocating process */
	uint32_t node;
	uint64_t bytes;			/**< buffer size */
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
#define SP_BUF_ENTRY_SIZE_VER0 336	/**< sizeof(struct sp_buf_entry) in 0.1.0 */

/**
 * struct sp_counters - the node-wide counters, as returned by sp_ctl_stats()
 *
 * One field per attribute of the netlink spec's stats set, in its order
 * (tests/host/spec-check.py checks it): a new counter is appended.
 * PeerDirect pins: a registration pins the whole dma-buf it lies in; the pin
 * is shared by every registration of that dma-buf for one device and charged
 * once, to the uid (and locked_vm, against RLIMIT_MEMLOCK unless
 * CAP_IPC_LOCK) of the process that made the first of them.
 */
struct sp_counters {
	uint32_t size;			/**< in: sizeof(struct sp_counters); out: bytes filled */
	uint32_t reserved;		/**< 0 */
	uint64_t buffers;		/**< buffers alive now */
	uint64_t pinned_bytes;		/**< bytes pinned by buffers now */
	uint64_t peak_pinned_bytes;	/**< highest pinned_bytes seen */
	uint64_t allocs;		/**< buffers allocated since load */
	uint64_t frees;			/**< buffers freed since load */
	uint64_t fail_nomem;		/**< allocations failed: no memory */
	uint64_t fail_memlock;		/**< allocations failed: RLIMIT_MEMLOCK */
	uint64_t fail_max_buf_size;	/**< allocations failed: max_buf_size */
	uint64_t fail_max_pinned;	/**< allocations failed: max_pinned_bytes */
	uint64_t mmaps;			/**< mappings created since load */
	uint64_t peer_acquires;		/**< ranges the PeerDirect core asked about */
	uint64_t peer_claims;		/**< ... and strixpeer claimed */
	uint64_t peer_invalidations;	/**< registrations invalidated */
	uint64_t dmabuf_exports;	/**< dma-bufs of buffers alive now */
	uint64_t dmabuf_attachments;	/**< devices attached to them */
	uint64_t peer_maps;		/**< PeerDirect mappings made for a device */
	uint64_t imports;		/**< imports alive now */
	uint64_t peer_registrations;	/**< claimed registrations alive now */
	uint64_t peer_pinned_bytes;	/**< dma-buf bytes PeerDirect pins, node-wide */
	uint64_t peer_fail_limit;	/**< registrations refused (EDQUOT) */
	uint64_t peer_pinned_bytes_user; /**< ... of peer_pinned_bytes charged to
					  *   the caller's uid */
};
#define SP_COUNTERS_SIZE_VER0 176	/**< sizeof(struct sp_counters) in 0.1.0 */

/** Configuration, for sp_ctl_config_get() and sp_ctl_config_set(). */
struct sp_config {
	uint32_t size;			/**< in: sizeof(struct sp_config); out (get): bytes filled */
	int default_node;		/**< -1: the caller's node */
	uint64_t max_buf_size;		/**< largest buffer, bytes */
	uint64_t max_pinned_bytes;	/**< node-wide pin limit, 0: none */
	int require_huge;		/**< 2 MiB pages by default */
	uint32_t reserved;		/**< 0 */
	uint64_t max_peer_pinned_per_user; /**< PeerDirect pin bound per uid, 0:
					    *   none; read-only (module parameter) */
};
#define SP_CONFIG_SIZE_VER0 40		/**< sizeof(struct sp_config) in 0.1.0 */

/** sp_ctl_config_set() mask bits: which fields to change */
#define SP_CONFIG_MAX_BUF_SIZE		(1U << 0)
#define SP_CONFIG_MAX_PINNED_BYTES	(1U << 1)
#define SP_CONFIG_DEFAULT_NODE		(1U << 2)
#define SP_CONFIG_REQUIRE_HUGE		(1U << 3)

/** sp_event.type */
enum sp_event_type {
	SP_EVENT_BUF_CREATED = 1,	/**< @buf is set */
	SP_EVENT_BUF_FREED,		/**< @buf is set */
	SP_EVENT_LIMIT,			/**< @limit, @pid, @bytes are set */
	SP_EVENT_CONFIG,		/**< @pid and @config are set */
	SP_EVENT_PEER,			/**< @peer, @import_id, @pid, @bytes
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
	SP_LIMIT_MAX_PEER_PINNED_PER_USER, /**< a PeerDirect pin past max_peer_pinned_per_user */
};

/**
 * struct sp_event - an event from the module's "events" group
 *
 * The library fills it (@size is its own sizeof) and passes it to the
 * callback; @buf and @config point into library memory valid until the
 * callback returns, so each can grow on its own.
 */
struct sp_event {
	uint32_t size;			/**< bytes of this struct */
	enum sp_event_type type;
	const struct sp_buf_entry *buf;	/**< BUF_CREATED, BUF_FREED, EXPORT; else NULL */
	const struct sp_config *config;	/**< CONFIG; else NULL */
	enum sp_limit limit;
	uint32_t pid;
	uint64_t bytes;			/**< LIMIT: size asked for; PEER: range size */
	/* with SP_MONITOR_PEER */
	enum sp_peer_event peer;
	uint32_t import_id;
	enum sp_inval_reason reason;
	/* with SP_MONITOR_EXPORT */
	enum sp_export_event export_event;
	char device[64];		/**< importer's device (attach, detach) */
};
#define SP_EVENT_SIZE_VER0 120		/**< sizeof(struct sp_event) in 0.1.0 */

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
 * @info: @info->size set by the caller; filled in
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
 * @e: @e->size set by the caller; filled in
 *
 * Return: 0, -ENOENT when no such buffer is visible, or negative errno.
 */
int sp_ctl_buf_get(struct sp_ctl *ctl, uint32_t id, struct sp_buf_entry *e);

/**
 * sp_ctl_stats() - every node-wide counter, in one request
 * @ctl: handle
 * @c: @c->size set by the caller (see SP_HAS()); filled in, zeros for
 *	counters the module does not report
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_stats(struct sp_ctl *ctl, struct sp_counters *c);

/**
 * sp_ctl_config_get() - current configuration
 * @ctl: handle
 * @cfg: @cfg->size set by the caller; filled in
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_config_get(struct sp_ctl *ctl, struct sp_config *cfg);

/**
 * sp_ctl_config_set() - change the configuration (CAP_SYS_ADMIN)
 * @ctl: handle
 * @cfg: new values, @cfg->size set by the caller
 * @mask: SP_CONFIG_* bits naming the fields of @cfg to apply
 *	(max_peer_pinned_per_user is a module parameter, not settable here)
 *
 * All named fields change, or none; the module announces the change.
 *
 * Return: 0, -EPERM without CAP_SYS_ADMIN, -EINVAL with the module's
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
 * Superseded before 0.1.0 and kept (same symbols, same structs) for the
 * callers not converted yet; new code uses sp_ctl_stats(), whose
 * struct sp_counters has every one of these counters, and
 * sp_ctl_config_get() for max_peer_pinned_per_user. Two more requests
 * each.
 */

/** Superseded by struct sp_counters (peer_* and imports). */
struct sp_peer_counters {
	uint64_t acquires;		/**< ranges the core asked about */
	uint64_t claims;		/**< ... and strixpeer claimed */
	uint64_t maps;			/**< mappings made for a device */
	uint64_t invalidations;		/**< registrations invalidated */
	uint64_t registrations;		/**< claimed registrations alive now */
	uint64_t imports;		/**< imports alive now */
};

/**
 * sp_ctl_peer_stats() - superseded by sp_ctl_stats(), kept for old callers
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
 * sp_ctl_peer_pins() - superseded by sp_ctl_stats() and sp_ctl_config_get()
 * @ctl: handle
 * @p: filled in; zeros from a module that does not report them
 *
 * Return: 0 or negative errno.
 */
int sp_ctl_peer_pins(struct sp_ctl *ctl, struct sp_peer_pins *p);

#endif /* STRIXPEER_CTL_H */
