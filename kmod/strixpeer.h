/* SPDX-License-Identifier: GPL-2.0 */
/*
 * strixpeer - internal declarations shared by the module's files.
 */
#ifndef _STRIXPEER_INTERNAL_H
#define _STRIXPEER_INTERNAL_H

#include <linux/atomic.h>
#include <linux/cred.h>
#include <linux/kref.h>
#include <linux/mm_types.h>
#include <linux/types.h>
#include <linux/xarray.h>

#include <uapi/strixpeer.h>

#include "compat.h"

/* 2 MiB on x86-64 and arm64 with 4 KiB pages. */
#define SP_HUGE_ORDER		(PMD_SHIFT - PAGE_SHIFT)

/* What the ioctl and netlink info report (uapi STRIXPEER_FEAT_* bits). */
#define SP_FEATURES		(STRIXPEER_FEAT_BUFFERS | STRIXPEER_FEAT_NUMA)
#define SP_PAGE_SIZES		((1ULL << PAGE_SHIFT) | (1ULL << PMD_SHIFT))

/*
 * mmap cookie: handle << SP_COOKIE_SHIFT. Each buffer owns a 1 TiB window
 * of the device's file offsets, so a mapping may start anywhere inside it.
 */
#define SP_COOKIE_SHIFT		40
#define SP_MAX_HANDLE		((1U << (63 - SP_COOKIE_SHIFT)) - 1)
#define SP_COOKIE_PGOFF_MASK	((1UL << (SP_COOKIE_SHIFT - PAGE_SHIFT)) - 1)

/**
 * struct sp_file - per-open-file state of /dev/strixpeer
 * @mm: address space of the process that opened the file (mmgrab'ed);
 *	only that process may issue ioctls or mmap on it
 * @bufs: handle -> struct sp_buf; the xarray holds one reference on each
 *	buffer. Its xa_lock orders lookups (which take a reference) against
 *	BUF_FREE and release (which erase, then drop that reference).
 */
struct sp_file {
	struct mm_struct *mm;
	struct xarray bufs;
};

/**
 * struct sp_buf - a strixpeer buffer
 * @ref: held by the owning file's xarray and by every VMA mapping it
 * @id: node-wide id in sp_all_bufs (netlink's buffer id)
 * @size: bytes (nr_pages << PAGE_SHIFT)
 * @nr_pages: number of PAGE_SIZE pages
 * @pages: every PAGE_SIZE page; high-order allocations are split, so each
 *	entry is an ordinary order-0 page holding one reference of ours
 * @min_order: smallest allocation order used
 * @nr_chunks: physically contiguous runs
 * @node: NUMA node of every page
 * @map_count: live VMAs
 * @charged_mm: address space charged for the pinned pages (mmgrab'ed)
 * @pid: tgid of the allocating process
 * @uid: real uid of the allocating process (netlink dump visibility)
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
	unsigned int nr_chunks;
	int node;
	atomic_t map_count;
	struct mm_struct *charged_mm;
};

/**
 * struct sp_stats - module-wide counters, exported read-only in sysfs
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
	/* filled by the PeerDirect and dma-buf paths once they exist */
	atomic64_t peer_acquires;
	atomic64_t peer_claims;
	atomic64_t peer_invalidations;
	atomic64_t dmabuf_exports;
	atomic64_t dmabuf_attachments;
};

extern struct sp_stats sp_stats;

/*
 * Configuration (main.c): module parameters, also set through netlink's
 * config-set. Readers use READ_ONCE(); writers use WRITE_ONCE().
 */
extern unsigned long sp_max_buf_size;
extern unsigned long sp_max_pinned_bytes;
extern int sp_default_node;
extern bool sp_require_huge;

struct sp_buf *sp_buf_create(u64 size, int node, bool huge_only);
struct sp_buf *sp_buf_get_next(unsigned long *id);
bool sp_buf_pinned(const struct sp_buf *buf);
void sp_buf_put(struct sp_buf *buf);
int sp_buf_mmap(struct sp_buf *buf, struct vm_area_struct *vma,
		unsigned long pgoff);

/* Generic netlink control plane (netlink.c). */
int sp_nl_init(void);
void sp_nl_exit(void);
void sp_nl_buf_event(struct sp_buf *buf, u8 cmd);
void sp_nl_limit_event(u32 limit, u64 size);

#endif /* _STRIXPEER_INTERNAL_H */
