/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * sp_peersim's ioctl interface, on /dev/sp_peersim (mode 0600).
 *
 * sp_peersim plays ib_core's peer-memory core plus a PeerDirect-capable HCA
 * for tests: it registers "MRs" the way ib_umem_get() does (pin with GUP
 * first, ask the peer-memory clients only when that fails), maps them for a
 * real struct device through the DMA API, and performs "DMA" into and out
 * of them through the mapped addresses.
 *
 * Every ioctl takes one struct whose size is encoded in the ioctl number.
 * A smaller struct than the module's is accepted down to the size of the
 * struct's first version (otherwise EINVAL) and zero-filled; a larger one
 * only when the bytes the module does not know are zero (otherwise E2BIG).
 * Flags, access bits and reserved fields the module does not know must be
 * zero (otherwise EINVAL). Unknown commands: ENOTTY.
 *
 * MRs belong to the file descriptor that registered them: closing it (or
 * the process exiting) deregisters them all. Handles are only valid on
 * that fd.
 *
 * dma-buf MRs (PEERSIM_IOC_REG_DMABUF_MR, like ibv_reg_dmabuf_mr()) are
 * registered as ib_umem_dmabuf_get() / ib_umem_dmabuf_get_pinned() do: a
 * dynamic attachment of the simulated HCA's device (peer-to-peer allowed),
 * mapped under the dma-buf's reservation lock after the kernel fences
 * signalled. A dynamic MR whose exporter moves the buffer (move_notify /
 * invalidate_mappings) is fenced and unmapped, and mapped again by the next
 * DMA or MR_SEGS, as an ODP page fault maps it on mlx5; MR_INFO's
 * free_callbacks counts such moves. A pinned MR is mapped once and never
 * moves. They count no RLIMIT_MEMLOCK (neither does ib_core).
 *
 * Errors worth knowing:
 *   EINVAL  bad flags/reserved/size; zero length; addr + length overflows;
 *	     DMA range outside the MR; a peer client returned an unusable
 *	     mapping (page size not a power of two, too few DMA bytes, ...:
 *	     see dmesg); legacy semantics: the registration was invalidated
 *	     before it was activated; REG_DMABUF_MR: offset + length
 *	     overflows or exceeds the dma-buf's size, or the exporter's DMA
 *	     mapping does not cover the range (see dmesg)
 *   EBADF   REG_DMABUF_MR: fd is not open, or not a dma-buf (ib_core
 *	     passes on dma_buf_get()'s EINVAL for the latter)
 *   ENOENT  no MR with that handle on this fd (or it was deregistered)
 *   ENOLINK the MR was invalidated by its peer client: no more DMA
 *   EACCES  DMA_WRITE into an MR registered without PEERSIM_ACCESS_WRITE
 *   EPERM   the caller may not lock memory at all (can_do_mlock())
 *   ENOMEM  RLIMIT_MEMLOCK would be exceeded (without CAP_IPC_LOCK)
 *   EFAULT  (REG_MR) pinning failed and no peer client claimed the range
 *	     (the error pin_user_pages_fast() gave is returned as is: mostly
 *	     EFAULT, also ENOMEM, EPERM, ...); bad user pointer elsewhere
 *   EINTR   fatal signal while registering (reg_delay_ms) or waiting for
 *	     the DMA fence
 *   EIO     DMA hit an address that is not RAM (no struct page)
 *   ETIMEDOUT, EINTR, other  (dma-buf MRs) waiting for the dma-buf's
 *	     kernel fences failed, or what the exporter's pin/map returned
 *   other   whatever a peer client's get_pages/dma_map returned
 */
#ifndef _UAPI_SP_PEERSIM_H
#define _UAPI_SP_PEERSIM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PEERSIM_DEVICE_PATH		"/dev/sp_peersim"
#define PEERSIM_SYSFS_PEERS		"/sys/kernel/mm/memory_peers"
#define PEERSIM_SYSFS_PARAMS		"/sys/module/sp_peersim/parameters"

#define PEERSIM_ABI_VERSION		1

#define PEERSIM_IOC_MAGIC		0xCE

/* peersim_info.semantics: the module's "semantics" parameter */
#define PEERSIM_SEM_MODERN		0 /* Ubuntu / current OFED core */
#define PEERSIM_SEM_LEGACY		1 /* older MLNX_OFED core */

/* peersim_reg_mr.access */
#define PEERSIM_ACCESS_WRITE		(1U << 0) /* device may write (DMA_WRITE) */
#define PEERSIM_ACCESS_ALL		PEERSIM_ACCESS_WRITE

/* peersim_reg_mr.path, peersim_mr_info.path */
#define PEERSIM_PATH_GUP		1 /* pinned with pin_user_pages_fast() */
#define PEERSIM_PATH_PEER		2 /* claimed by a peer-memory client */
#define PEERSIM_PATH_DMABUF		3 /* a dma-buf MR (ibv_reg_dmabuf_mr) */

/* peersim_reg_dmabuf_mr.flags */
#define PEERSIM_DMABUF_PINNED		(1U << 0) /* ib_umem_dmabuf_get_pinned() */
#define PEERSIM_DMABUF_FLAGS		PEERSIM_DMABUF_PINNED

/* peersim_mr_info.state */
#define PEERSIM_MR_ACTIVE		1
#define PEERSIM_MR_INVALIDATED		2 /* the client invalidated it */

/* peersim_mr_info.core_state: the core's mapping state of a peer MR */
/* not mapped (GUP MRs: always; dma-buf MRs: moved, mapped at next use) */
#define PEERSIM_CORE_UNMAPPED		0
#define PEERSIM_CORE_MAPPED		1 /* client's (exporter's) mapping in use */
#define PEERSIM_CORE_INVALIDATED	2 /* client unmaps itself (INVALIDATE_UNMAPS) */

/* peersim_mr_info.core_context when the client gets no invalidation id */
#define PEERSIM_NO_CORE_CONTEXT		0xffffffffffffffffULL

/**
 * struct peersim_info - PEERSIM_IOC_INFO (out only)
 * @abi_version: PEERSIM_ABI_VERSION of the module
 * @semantics: PEERSIM_SEM_*
 * @live_mrs: MRs registered on all fds
 * @max_seg_size: dma_get_max_seg_size() of the simulated HCA's device
 * @page_size: the kernel's PAGE_SIZE
 * @nclients: registered peer-memory clients
 * @reg_delay_ms: the reg_delay_ms parameter now
 * @invalidations: invalidate callbacks received since load (all clients)
 * @mtt_held: legacy registrations waiting in the mtt_hold window now
 * @reserved: 0
 */
struct peersim_info {
	__u32 abi_version;
	__u32 semantics;
	__u64 live_mrs;
	__u64 max_seg_size;
	__u64 page_size;
	__u32 nclients;
	__u32 reg_delay_ms;
	__u64 invalidations;
	__u32 mtt_held;
	__u32 reserved;
};

/**
 * struct peersim_reg_mr - PEERSIM_IOC_REG_MR, like ibv_reg_mr()
 * @addr: in: start of the range (any alignment)
 * @length: in: bytes, > 0
 * @access: in: PEERSIM_ACCESS_* (without WRITE: a read-only MR)
 * @handle: out: MR handle (> 0) on this fd
 * @path: out: PEERSIM_PATH_*
 * @nents: out: number of DMA segments the MR holds (as PEERSIM_IOC_MR_SEGS
 *	returns them)
 * @page_size: out: PAGE_SIZE (GUP) or the client's get_page_size()
 * @reserved: zero
 * @client: out: name of the client that claimed the range ("" for GUP)
 */
struct peersim_reg_mr {
	__u64 addr;
	__u64 length;
	__u32 access;
	__u32 handle;
	__u32 path;
	__u32 nents;
	__u64 page_size;
	__u64 reserved;
	char client[64];
};

/**
 * struct peersim_mr_handle - PEERSIM_IOC_DEREG_MR (in only)
 * @handle: the MR to deregister (as ibv_dereg_mr(): fences DMA, stops the
 *	invalidation notifier, unmaps/unpins, releases the client's context)
 * @reserved: zero
 */
struct peersim_mr_handle {
	__u32 handle;
	__u32 reserved;
};

/**
 * struct peersim_mr_info - PEERSIM_IOC_MR_INFO
 * @handle: in: the MR
 * @state: out: PEERSIM_MR_*
 * @path: out: PEERSIM_PATH_*
 * @nents: out: DMA segments (dma-buf MRs: 0 while moved away)
 * @page_size: out: as in peersim_reg_mr (dma-buf MRs: PAGE_SIZE)
 * @addr: out: registered address (dma-buf MRs: the offset into the dma-buf)
 * @length: out: registered length
 * @invalidated_at_ns: out: ktime_get_ns() when the invalidate callback
 *	fenced the MR (dma-buf MRs: the last move_notify), 0 if never
 * @free_callbacks: out: invalidate callbacks that named this MR (dma-buf
 *	MRs: move_notify calls for its attachment)
 * @access: out: PEERSIM_ACCESS_*
 * @core_context: out: the core_context the client got in get_pages
 *	(a client without the invalidate callback gets 0xffffffff from a
 *	modern core, 0 from a legacy one); PEERSIM_NO_CORE_CONTEXT for GUP
 *	MRs
 * @dma_bytes: out: sum of the DMA segment lengths
 * @first_offset: out: offset of the MR's first byte in its first segment
 * @core_state: out: PEERSIM_CORE_*
 * @reserved: zero
 */
struct peersim_mr_info {
	__u32 handle;
	__u32 state;
	__u32 path;
	__u32 nents;
	__u64 page_size;
	__u64 addr;
	__u64 length;
	__u64 invalidated_at_ns;
	__u32 free_callbacks;
	__u32 access;
	__u64 core_context;
	__u64 dma_bytes;
	__u64 first_offset;
	__u32 core_state;
	__u32 reserved;
};

/* peersim_dma.flags */
#define PEERSIM_DMA_VMAP	(1U << 0) /* dma-buf MRs: through dma_buf_vmap() */
#define PEERSIM_DMA_FLAGS	PEERSIM_DMA_VMAP

/**
 * struct peersim_dma - PEERSIM_IOC_DMA_WRITE / PEERSIM_IOC_DMA_READ (in)
 * @handle: the MR
 * @flags: PEERSIM_DMA_*; PEERSIM_DMA_VMAP (dma-buf MRs only, else EINVAL)
 *	copies through the exporter's kernel mapping (dma_buf_vmap()), as a
 *	driver's CPU access to an imported buffer would, instead of DMA
 * @offset: byte offset into the MR
 * @length: bytes to copy; offset + length <= the MR's length
 * @buf: user pointer: source (DMA_WRITE: user -> MR) or destination
 *	(DMA_READ: MR -> user)
 *
 * The device reaches the memory only through the MR's DMA addresses. A
 * transfer that finds the MR invalidated stops with ENOLINK (bytes before
 * that point may have been transferred, as with a real HCA).
 */
struct peersim_dma {
	__u32 handle;
	__u32 flags;
	__u64 offset;
	__u64 length;
	__u64 buf;
};

/* One DMA segment of an MR. */
struct peersim_seg {
	__u64 dma_addr;
	__u64 len;
};

/**
 * struct peersim_mr_segs - PEERSIM_IOC_MR_SEGS: the MR's DMA segments
 * @handle: in: the MR
 * @count: in: capacity of @segs (entries); out: the MR's number of
 *	segments (min(in, out) entries were written)
 * @segs: in: user pointer to struct peersim_seg[count]
 *
 * The segments are what the "HCA" uses (after the core's first/last
 * trimming for client page sizes above PAGE_SIZE). ENOLINK once the MR was
 * invalidated. A dma-buf MR moved by its exporter is mapped again first.
 */
struct peersim_mr_segs {
	__u32 handle;
	__u32 count;
	__u64 segs;
};

/* peersim_client.flags */
#define PEERSIM_CLIENT_INVAL_CB		(1U << 0) /* asked for the invalidate callback */
#define PEERSIM_CLIENT_EX		(1U << 1) /* extended form recognised */
#define PEERSIM_CLIENT_INVALIDATE_UNMAPS (1U << 2) /* ex flag set (honoured in modern only) */

/**
 * struct peersim_client - one registered peer-memory client
 * @name: its name (NUL-terminated)
 * @version: its version bytes, as registered (16 bytes, raw)
 * @flags: PEERSIM_CLIENT_*
 * @live_mrs: registrations holding the client (ib_unregister waits for 0)
 * @acquire_calls: acquire() calls
 * @claims: acquire() calls that claimed
 * @reserved: zero
 */
struct peersim_client {
	char name[64];
	char version[16];
	__u32 flags;
	__u32 live_mrs;
	__u64 acquire_calls;
	__u64 claims;
	__u64 reserved;
};

/**
 * struct peersim_clients - PEERSIM_IOC_CLIENTS: clients in registration
 *	order (the order the core asks them in)
 * @count: in: capacity of @clients (entries); out: number of clients
 * @reserved: zero
 * @clients: in: user pointer to struct peersim_client[count]
 */
struct peersim_clients {
	__u32 count;
	__u32 reserved;
	__u64 clients;
};

/**
 * struct peersim_reg_dmabuf_mr - PEERSIM_IOC_REG_DMABUF_MR, like
 *	ibv_reg_dmabuf_mr()
 * @fd: in: dma-buf file descriptor (the MR keeps its own reference)
 * @flags: in: PEERSIM_DMABUF_*
 * @offset: in: byte offset into the dma-buf (any alignment)
 * @length: in: bytes, > 0, offset + length <= dma-buf size
 * @access: in: PEERSIM_ACCESS_*
 * @handle: out: MR handle (> 0) on this fd
 * @nents: out: DMA segments of the mapping (as PEERSIM_IOC_MR_SEGS returns
 *	them: the exporter's segments trimmed to the PAGE_SIZE-aligned range,
 *	split at the device's max_seg_size)
 * @reserved: zero
 * @max_seg: out: longest DMA segment in bytes
 * @exp_nents: out: entries of the table the exporter returned, as given
 *	(before trimming to the range and splitting at max_seg_size)
 * @reserved2: zero
 * @exp_max_seg: out: longest of those entries in bytes
 *
 * DEREG_MR, MR_INFO (path PEERSIM_PATH_DMABUF), MR_SEGS, DMA_WRITE and
 * DMA_READ work on it as on other MRs.
 */
struct peersim_reg_dmabuf_mr {
	__s32 fd;
	__u32 flags;
	__u64 offset;
	__u64 length;
	__u32 access;
	__u32 handle;
	__u32 nents;
	__u32 reserved;
	__u64 max_seg;
	__u32 exp_nents;
	__u32 reserved2;
	__u64 exp_max_seg;
};

#define PEERSIM_IOC_INFO	_IOR(PEERSIM_IOC_MAGIC, 0x00, struct peersim_info)
#define PEERSIM_IOC_REG_MR	_IOWR(PEERSIM_IOC_MAGIC, 0x01, struct peersim_reg_mr)
#define PEERSIM_IOC_DEREG_MR	_IOW(PEERSIM_IOC_MAGIC, 0x02, struct peersim_mr_handle)
#define PEERSIM_IOC_MR_INFO	_IOWR(PEERSIM_IOC_MAGIC, 0x03, struct peersim_mr_info)
#define PEERSIM_IOC_DMA_WRITE	_IOW(PEERSIM_IOC_MAGIC, 0x04, struct peersim_dma)
#define PEERSIM_IOC_DMA_READ	_IOW(PEERSIM_IOC_MAGIC, 0x05, struct peersim_dma)
#define PEERSIM_IOC_MR_SEGS	_IOWR(PEERSIM_IOC_MAGIC, 0x06, struct peersim_mr_segs)
#define PEERSIM_IOC_CLIENTS	_IOWR(PEERSIM_IOC_MAGIC, 0x07, struct peersim_clients)
#define PEERSIM_IOC_REG_DMABUF_MR _IOWR(PEERSIM_IOC_MAGIC, 0x08, struct peersim_reg_dmabuf_mr)

#endif /* _UAPI_SP_PEERSIM_H */
