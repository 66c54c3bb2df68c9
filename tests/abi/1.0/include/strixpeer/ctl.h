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
 * sp_ctl_config_set() - change the configuration (CAP_SYS_ADMIN)
 * @ctl: handle
 * @cfg: new values
 * @mask: SP_CONFIG_* bits naming the fields of @cfg to apply
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

#endif /* STRIXPEER_CTL_H */
