/* SPDX-License-Identifier: GPL-2.0 */
/*
 * strixpeer - internal declarations shared by the module's files.
 */
#ifndef _STRIXPEER_INTERNAL_H
#define _STRIXPEER_INTERNAL_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cred.h>
#include <linux/interval_tree.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mm_types.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include <uapi/strixpeer.h>

#include "compat.h"
#include "events.h"

/* 2 MiB on x86-64 and arm64 with 4 KiB pages. */
#define SP_HUGE_ORDER		(PMD_SHIFT - PAGE_SHIFT)

/*
 * What the ioctl and netlink info report (uapi STRIXPEER_FEAT_* bits);
 * STRIXPEER_FEAT_PEERDIRECT is added while the client is registered.
 */
#define SP_FEATURES		(STRIXPEER_FEAT_BUFFERS | STRIXPEER_FEAT_NUMA | \
				 STRIXPEER_FEAT_DMABUF_EXPORT | \
				 STRIXPEER_FEAT_DMABUF_IMPORT | SP_FEAT_GEM)
#if IS_ENABLED(CONFIG_DRM)
#define SP_FEAT_GEM		STRIXPEER_FEAT_GEM_DMABUF
#else
#define SP_FEAT_GEM		0
#endif
#define SP_PAGE_SIZES		((1ULL << PAGE_SHIFT) | (1ULL << PMD_SHIFT))

/*
 * mmap cookie: handle << SP_COOKIE_SHIFT. Each buffer owns a 1 TiB window
 * of the device's file offsets, so a mapping may start anywhere inside it.
 */
#define SP_COOKIE_SHIFT		40
#define SP_MAX_HANDLE		((1U << (63 - SP_COOKIE_SHIFT)) - 1)
#define SP_COOKIE_PGOFF_MASK	((1UL << (SP_COOKIE_SHIFT - PAGE_SHIFT)) - 1)
/*
 * The largest max_buf_size (module parameter and config-set): all of a
 * buffer must fit its mmap window, or offsets past it would reach the
 * next handle's buffer.
 */
#define SP_BUF_SIZE_LIMIT	(1ULL << SP_COOKIE_SHIFT)

/**
 * struct sp_file - per-open-file state of /dev/strixpeer
 * @mm: address space of the process that opened the file (mmgrab'ed);
 *	only that process may issue ioctls or mmap on it
 * @bufs: handle -> struct sp_buf; the xarray holds one reference on each
 *	buffer. Its xa_lock orders lookups (which take a reference) against
 *	BUF_FREE and release (which erase, then drop that reference).
 * @imports: handle -> struct sp_import, one reference each, same rules
 * @pid: tgid of the opener (fdinfo; a hint once passed on or forked)
 * @comm: comm of the opener at open
 */
struct sp_file {
	struct mm_struct *mm;
	struct xarray bufs;
	struct xarray imports;
	pid_t pid;
	char comm[TASK_COMM_LEN];
};

struct device;
struct dma_buf;
struct dma_buf_attachment;
struct sk_buff;
struct sp_peer_ctx;

/**
 * struct sp_import - a dma-buf range declared at a VA range of one process
 * @ref: held by the file's handle (or, for an implicit import, by the one
 *	registration that created it), by each registration using it, by
 *	a queued @unmap_work, and by the IMPORT ioctl until its result was
 *	copied out
 * @it: node in its mm's interval tree of live imports, keyed by VA
 * @in_tree: @it is linked (sp_imports_lock)
 * @mm: the process's address space (mmgrab'ed)
 * @pid: tgid of the importing process
 * @uid: real uid of the importing process (max_imports counts IMPORT
 *	handles per uid)
 * @id: node-wide id (netlink, events)
 * @dmabuf: our reference on the dma-buf (an implicit import gets it after
 *	its notifier was inserted, before it is published)
 * @offset: byte offset into @dmabuf of @va
 * @length: bytes
 * @va: start of the range
 * @implicit: created by the zero-change mode for one registration of a
 *	GEM mapping, not by the IMPORT ioctl; never in the tree
 * @notifier: mmu interval notifier over the range (unmap and exit)
 * @notifier_live: @notifier is inserted, or about to be (under @lock: set
 *	before the insertion, whose callback may start the ending at once;
 *	cleared by the one ending caller, which removes the notifier)
 * @unmap_work: ends the import after the notifier saw the range go
 * @unmap_reason: STRIXPEER_INVAL_UNMAP or _EXIT, set by the notifier
 * @lock: protects @ctxs and @dead; held while registrations are
 *	invalidated, so an ending caller returns only once none can DMA
 * @ctxs: struct sp_peer_ctx using this import
 * @nr_ctxs: length of @ctxs
 * @dead: ended; no new registration may claim it
 */
struct sp_import {
	struct kref ref;
	struct interval_tree_node it;
	bool in_tree;
	struct mm_struct *mm;
	pid_t pid;
	kuid_t uid;
	u32 id;
	struct dma_buf *dmabuf;
	u64 offset;
	u64 length;
	unsigned long va;
	bool implicit;
	bool vma_read_only;
	struct mmu_interval_notifier notifier;
	bool notifier_live;
	struct work_struct unmap_work;
	atomic_t unmap_reason;
	struct mutex lock;
	struct list_head ctxs;
	unsigned int nr_ctxs;
	bool dead;
};

/**
 * struct sp_buf - a strixpeer buffer
 * @ref: held by the owning file's xarray and by every VMA mapping it
 * @id: node-wide id in sp_all_bufs (netlink's buffer id)
 * @size: bytes (nr_pages << PAGE_SHIFT)
 * @nr_pages: number of PAGE_SIZE pages
 * @pages: every PAGE_SIZE page. High-order allocations are split into
 *	order-0 pages, one reference of ours each - except, where the kernel
 *	can PMD-map them (SP_HUGE_MAP), 2 MiB pages: those stay compound
 *	folios holding one reference of ours, their entries here are the
 *	folio's pages, and they sit at 2 MiB-aligned offsets of the buffer
 * @min_order: smallest allocation order used
 * @page_size: the page size backing every byte, one of SP_PAGE_SIZES:
 *	2 MiB when every allocation was a 2 MiB page, else PAGE_SIZE
 * @nr_huge: 2 MiB pages kept as compound folios (SP_HUGE_MAP builds)
 * @nr_chunks: physically contiguous runs
 * @node: NUMA node of every page
 * @map_count: live VMAs
 * @exports: live dma-bufs of the buffer (each holds a reference)
 * @attachments: devices attached to those dma-bufs
 * @user: user whose locked_vm is charged (a reference), NULL when the
 *	allocating caller had CAP_IPC_LOCK
 * @pid: tgid of the allocating process
 * @uid: real uid of the allocating process (netlink dump visibility)
 * @comm: comm of the allocating process at allocation (a hint, like @pid:
 *	the process may have exited, and a child after fork or the receiver
 *	of a passed fd holds the buffer under another pid)
 * @handle: handle on the owning file, 0 once it was freed or the file was
 *	released (WRITE_ONCE under the file's bufs xa_lock; a snapshot)
 * @exp_lock: protects @exp_list
 * @exp_list: struct sp_export of every live dma-buf of the buffer
 * @allocator: SP_ALLOC_PAGES or SP_ALLOC_SHMEM, the allocator parameter's
 *	value when the buffer was made; kept for the buffer's life
 * @shm_file: SP_ALLOC_SHMEM: the shmem file whose folios @pages holds (one
 *	reference of ours per folio) and which its mappings map; else NULL
 */
struct sp_buf {
	struct kref ref;
	u32 id;
	pid_t pid;
	kuid_t uid;
	u64 size;
	unsigned long nr_pages;
	struct page **pages;
	unsigned int min_order;
	u64 page_size;
	unsigned int nr_huge;
	unsigned int nr_chunks;
	int node;
	atomic_t map_count;
	atomic_t exports;
	atomic_t attachments;
	struct user_struct *user;
	char comm[TASK_COMM_LEN];
	u32 handle;
	spinlock_t exp_lock;
	struct list_head exp_list;
	int allocator;
	struct file *shm_file;
};

/**
 * struct sp_stats - module-wide counters; stats.c's table says which netlink
 * attribute and sysfs file shows each
 */
struct sp_stats {
	atomic64_t buffers;
	atomic64_t pinned_bytes;
	atomic64_t peak_pinned_bytes;
	atomic64_t allocs;
	atomic64_t frees;
	atomic64_t fail_nomem;
	atomic64_t fail_memlock;
	atomic64_t fail_max_buf_size;
	atomic64_t fail_max_pinned;
	atomic64_t mmaps;
	atomic64_t peer_acquires;	/* ranges the core asked about */
	atomic64_t peer_claims;		/* ... and we claimed */
	atomic64_t peer_maps;		/* dma_map()s that succeeded */
	atomic64_t peer_invalidations;	/* invalidate callbacks made */
	atomic64_t peer_registrations;	/* live claimed registrations */
	atomic64_t imports;		/* live imports (incl. implicit) */
	atomic64_t dmabuf_exports;	/* live dma-bufs of buffers */
	atomic64_t dmabuf_attachments;	/* devices attached to them */
	atomic64_t peer_pinned_bytes;	/* dma-buf bytes peer maps pin */
	atomic64_t peer_fail_limit;	/* ... refused: a pin limit */
};

extern struct sp_stats sp_stats;
/* stats.c: the misc device's sysfs groups (stats/), filled by sp_stats_init() */
extern const struct attribute_group *sp_stats_groups[];
void sp_stats_init(void);
/* stats.c: every counter into a stats-get reply; -EMSGSIZE when full */
int sp_stats_put(struct sk_buff *msg);

/*
 * Configuration (params.c): module parameters, also set through netlink's
 * config-set. Readers use READ_ONCE(); writers use WRITE_ONCE().
 */
extern unsigned long sp_max_buf_size;
extern unsigned long sp_max_pinned_bytes;
extern int sp_default_node;
extern bool sp_require_huge;
extern unsigned long sp_max_peer_pinned_per_user;
extern int sp_allocator;

/* The allocator parameter's values (params.c, shmem.c) */
#define SP_ALLOC_PAGES	0	/* alloc_pages_node(), today's allocator */
#define SP_ALLOC_SHMEM	1	/* a file of a private per-node tmpfs mount */

struct sp_buf *sp_buf_create(u64 size, int node, bool huge_only);
struct sp_buf *sp_buf_get_next(unsigned long *id);
void sp_put_pages(struct page **pages, unsigned long nr);
void sp_node_policy_get(int node);
struct mempolicy *sp_node_policy(int node);

/* shmem.c: the shmem allocator */
int sp_shm_fill(struct sp_buf *buf, bool huge_only);
void sp_shm_free(struct sp_buf *buf);
void sp_shm_exit(void);
bool sp_buf_pinned(const struct sp_buf *buf);
void sp_buf_snapshot(struct sp_event_buf *eb, const struct sp_buf *buf);
void sp_buf_event(const struct sp_buf *buf, u8 cmd);
void sp_buf_put(struct sp_buf *buf);
int sp_buf_mmap(struct sp_buf *buf, struct vm_area_struct *vma,
		unsigned long pgoff);
void sp_buf_exit(void);

/* dma-buf export of buffers (export.c). */
struct dma_buf *sp_export_create(struct sp_buf *buf, u32 flags);
/* At most this many dma-buf inode numbers per buffer in a netlink reply. */
#define SP_MAX_REPORTED_INOS	32
unsigned int sp_export_inos(struct sp_buf *buf, u64 *inos, unsigned int max);

/* GEM mapping recognition (gem.c). */
struct sp_gem_range {
	struct dma_buf *dmabuf;	/* referenced: the caller puts it */
	u64 offset;		/* of the range's start in @dmabuf */
	bool ro;		/* a mapping of the range is not writable */
};
int sp_gem_lookup(struct mm_struct *mm, unsigned long start, unsigned long end,
		  bool need_handle, struct sp_gem_range *r);
struct sp_gem_dmabuf_req {
	struct strixpeer_gem_dmabuf u;	/* first: what is copied in and out */
	struct dma_buf *dmabuf;
};
int sp_ioctl_gem_dmabuf(struct sp_file *f, void *data);
void sp_ioctl_gem_dmabuf_commit(struct sp_file *f, void *data);
void sp_ioctl_gem_dmabuf_undo(struct sp_file *f, void *data);

/* Imports of dma-buf ranges (import.c). */
extern bool sp_claim_gem_mappings;
extern unsigned int sp_max_imports;
int sp_import_create(struct sp_file *f, int fd, u64 offset, u64 length,
		     unsigned long va, u32 *handle, u32 *id,
		     struct sp_import **held);
int sp_import_destroy(struct sp_file *f, u32 handle, struct sp_import *expect,
		      enum strixpeer_inval_reason reason);
int sp_import_info(struct sp_file *f, struct strixpeer_import_info *info);
void sp_import_release_all(struct sp_file *f);
struct sp_import *sp_import_find(struct mm_struct *mm, unsigned long addr,
				 size_t size);
struct sp_import *sp_import_from_gem(unsigned long addr, size_t size);
bool sp_import_unmapped(struct sp_import *imp);
void sp_import_end(struct sp_import *imp, enum strixpeer_inval_reason reason);
void sp_import_finish(struct sp_import *imp, enum strixpeer_inval_reason reason);
void sp_import_put(struct sp_import *imp);
void sp_import_queue_work(struct work_struct *work);
int sp_import_init(void);
void sp_import_exit(void);

/*
 * Who hears that an import ended: the owner of its registrations. peer.c
 * installs itself in sp_peer_init() before it registers with the
 * peer-memory core and removes itself in sp_peer_exit() after it has
 * unregistered, so no registration exists without a listener. @end runs
 * with the import's lock held and must invalidate every registration of
 * the import before it returns. With no listener (PeerDirect unavailable)
 * an import has no registrations.
 */
struct sp_import_listener {
	void (*end)(struct sp_import *imp, enum strixpeer_inval_reason reason);
};
void sp_import_set_listener(const struct sp_import_listener *l);

/*
 * PeerDirect client (peer.c; without the peer-memory API at build time it
 * only reports why). It hears of ended imports as their listener.
 */
bool sp_peer_active(void);
const char *sp_peer_reason(void);
u64 sp_peer_pinned_by(kuid_t uid);
int sp_peer_init(void);
void sp_peer_exit(void);

/* Generic netlink control plane (netlink.c). */
int sp_nl_init(void);
void sp_nl_exit(void);

#endif /* _STRIXPEER_INTERNAL_H */
