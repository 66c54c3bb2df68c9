/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sp_peersim's internal interface between its two halves: the simulated
 * peer-memory core (peersim_core.c) and the simulated HCA that drives it
 * (peersim_hca.c). The locking rules of what is declared here are in
 * peersim_core.c's header comment.
 */
#ifndef PEERSIM_H
#define PEERSIM_H

#include <linux/completion.h>
#include <linux/dma-buf.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "peer_mem_abi.h"
#include "peersim_uapi.h"

/* core_context of a registration whose client did not ask for invalidation */
#define PSIM_NO_INVALIDATION_ID	U32_MAX
/* All simulated MRs support invalidation (mlx5 MRs do). */
#define PSIM_MR_INVAL_SUPP	true

/**
 * struct psim_client - a registered peer-memory client
 * @kobj: /sys/kernel/mm/memory_peers/<name>
 * @node: in psim_clients (until its unregistration finished)
 * @ops: the client's registration, as passed
 * @name: copy of ops->name
 * @version: copy of ops->version
 * @invalidation_required: the client asked for the invalidate callback
 * @dying: being unregistered: no new registration may use it
 * @usecnt: 1 while registered, plus one per registration using it
 * @usecnt_zero: completed when @usecnt drops to zero
 * @mrs: core_context -> struct psim_mr, for the invalidate callback
 * @next_id: cyclic allocation cursor of @mrs
 * @acquire_calls: acquire() calls
 * @claims: acquire() calls that claimed
 * @num_alloc_mrs: sysfs counter, as the real core's
 * @num_dealloc_mrs: sysfs counter
 * @num_reg_pages: sysfs counter
 * @num_dereg_pages: sysfs counter
 * @num_reg_bytes: sysfs counter
 * @num_dereg_bytes: sysfs counter
 * @num_free_callbacks: sysfs counter: invalidate callback calls
 */
struct psim_client {
	struct kobject kobj;
	struct list_head node;
	const struct peer_memory_client *ops;
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	bool invalidation_required;
	bool dying;
	refcount_t usecnt;
	struct completion usecnt_zero;
	struct xarray mrs;
	u32 next_id;
	atomic64_t acquire_calls;
	atomic64_t claims;
	atomic64_t num_alloc_mrs;
	atomic64_t num_dealloc_mrs;
	atomic64_t num_reg_pages;
	atomic64_t num_dereg_pages;
	atomic64_t num_reg_bytes;
	atomic64_t num_dereg_bytes;
	atomic64_t num_free_callbacks;
};

/* The core's mapping state of a peer MR (as ib_umem_peer's). */
enum psim_map_state {
	PSIM_UNMAPPED = PEERSIM_CORE_UNMAPPED,
	PSIM_MAPPED = PEERSIM_CORE_MAPPED,
	PSIM_INVALIDATED = PEERSIM_CORE_INVALIDATED,
};

/* One entry of the simulated HCA's translation table. */
struct psim_seg {
	dma_addr_t addr;
	u64 len;
};

/**
 * struct psim_mr - a registered memory region
 * @kref: the owning fd holds one; the invalidate callback one while it runs
 * @path: PEERSIM_PATH_GUP, PEERSIM_PATH_PEER or PEERSIM_PATH_DMABUF
 * @addr: registered address (dma-buf: offset into the dma-buf)
 * @length: registered length
 * @writable: registered with PEERSIM_ACCESS_WRITE
 * @mm: the registering process's mm; pinned_vm is charged to it
 * @npages: PAGE_SIZE pages charged to @mm
 * @mtt: the DMA segments, copied at registration (the "MTT")
 * @nmtt: entries of @mtt
 * @first_off: offset of the MR's first byte in @mtt[0]
 * @dma_bytes: sum of the @mtt lengths
 * @page_size: PAGE_SIZE (GUP) or the client's page size
 * @dma_sem: the DMA fence: read by DMA, written by the fence
 * @dma_off: no DMA any more (under @dma_sem)
 * @invalidated: fenced by an invalidation (under @dma_sem)
 * @deregistered: fenced by deregistration (under @dma_sem)
 * @invalidated_at_ns: when the invalidation fenced it
 * @free_callbacks: invalidate callbacks that named this MR
 * @gup: GUP path: the pinned pages, DMA-mapped
 * @client: peer path: the client that claimed the range
 * @client_ctx: peer path: its context from acquire()
 * @client_put: release() was called and the client reference dropped
 * @xa_id: peer path: the core_context the client got
 * @mapping_lock: see the locking notes at the top
 * @state: the core's mapping state (under @mapping_lock)
 * @notifier_active: the invalidation notifier is active (under
 *	@mapping_lock): set when the MR is activated, cleared when
 *	deregistration stops it (legacy: also when an invalidation tore it down)
 * @early_invalidated: legacy: invalidated before activation
 * @sgt: peer path: the core's sg table the client fills
 * @nmap: legacy: mapped entries, as dma_map() reported
 * @first_sg: modern: first entry, trimmed for a large client page size
 * @last_sg: modern: last entry, trimmed for a large client page size
 * @first_dma_address: original values of the trimmed entries
 * @first_dma_length: ditto
 * @first_length: ditto
 * @last_dma_length: ditto
 * @last_length: ditto
 * @dbuf: dma-buf path: the dma-buf (the MR's own reference)
 * @dbuf_attach: dma-buf path: the simulated HCA's dynamic attachment
 * @dbuf_sgt: dma-buf path: the exporter's mapping while mapped (under resv)
 * @dbuf_pinned: dma-buf path: dma_buf_pin()ned at registration
 * @max_seg: longest @mtt entry (dma-buf path)
 * @exp_nents: entries of the exporter's table as it gave it (dma-buf path)
 * @exp_max_seg: longest of those, before any trimming or splitting
 */
struct psim_mr {
	struct kref kref;
	u32 path;
	unsigned long addr;
	size_t length;
	bool writable;
	struct mm_struct *mm;
	unsigned long npages;

	struct psim_seg *mtt;
	unsigned int nmtt;
	u64 first_off;
	u64 dma_bytes;
	u64 page_size;

	struct rw_semaphore dma_sem;
	bool dma_off;
	bool invalidated;
	bool deregistered;
	u64 invalidated_at_ns;
	atomic_t free_callbacks;

	struct sg_append_table gup;

	struct psim_client *client;
	void *client_ctx;
	bool client_put;
	u32 xa_id;
	struct mutex mapping_lock;
	enum psim_map_state state;
	bool notifier_active;
	bool early_invalidated;
	struct sg_table sgt;
	int nmap;
	struct scatterlist *first_sg;
	struct scatterlist *last_sg;
	dma_addr_t first_dma_address;
	unsigned int first_dma_length;
	unsigned int first_length;
	unsigned int last_dma_length;
	unsigned int last_length;

	struct dma_buf *dbuf;
	struct dma_buf_attachment *dbuf_attach;
	struct sg_table *dbuf_sgt;
	bool dbuf_pinned;
	u64 max_seg;
	unsigned int exp_nents;
	u64 exp_max_seg;
};

#define psim_client_err(mr, fmt, ...) \
	pr_err("client %s: " fmt, (mr)->client->name, ##__VA_ARGS__)

/* peersim_core.c: its module parameters and state */
extern unsigned int reg_delay_ms;
extern atomic_t psim_mtt_held;
extern bool psim_legacy;
extern bool psim_sysfs;
extern struct mutex psim_clients_lock;
extern struct list_head psim_clients;	/* under psim_clients_lock */
extern unsigned int psim_nclients;	/* not dying; under psim_clients_lock */
extern atomic64_t psim_invalidations;

/* peersim_core.c: clients, MR (de)registration, load and unload */
bool psim_client_ex(const struct peer_memory_client *ops, u32 *flags);
int psim_umem_get(struct psim_mr *mr);
void psim_mr_dereg(struct psim_mr *mr);
int psim_core_init(void);
void psim_core_exit(void);

/* peersim_hca.c: its state */
extern struct device *psim_dev;
extern atomic64_t psim_live_mrs;

/* peersim_hca.c: the MRs */
void psim_mr_free(struct kref *kref);

static inline void psim_mr_put(struct psim_mr *mr)
{
	kref_put(&mr->kref, psim_mr_free);
}

void psim_mr_fence(struct psim_mr *mr, bool invalidation);
int psim_mtt_build(struct psim_mr *mr, struct scatterlist *sgl,
		   unsigned int n, u64 first_off);
void psim_dmabuf_release(struct psim_mr *mr);

#endif /* PEERSIM_H */
