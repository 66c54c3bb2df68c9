/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * strixpeer kernel/user ABI: ioctls on /dev/strixpeer.
 *
 * Every ioctl takes one struct. The struct size is encoded in the ioctl
 * number; the module accepts an older (smaller) struct down to the size
 * of the struct's first ABI version and a newer (larger) struct whose
 * bytes past what the module knows are all zero (otherwise -E2BIG).
 * Reserved fields and unknown flag bits must be zero (otherwise -EINVAL).
 *
 * Errors worth knowing:
 *   EINVAL  bad flags, reserved field, zero size, NUMA node not online
 *   EFBIG   size above the module's max_buf_size parameter
 *   EDQUOT  the user's pinned memory would exceed the caller's
 *           RLIMIT_MEMLOCK (see "Pinned memory" below)
 *   ENOSPC  the node-wide max_pinned_bytes would be exceeded
 *   EMFILE  no free handle on this fd
 *   ENOMEM  the pages could not be had (e.g. 2 MiB pages required), or
 *           the caller's memory cgroup is at its limit
 *   ENOENT  no buffer with that handle on this fd
 *   EACCES  fd used from an address space other than the one that opened
 *           it (a child after fork, a process the fd was passed to, the
 *           new image after execve); threads and vfork() children share
 *           the opener's address space and may use it. Checked before
 *           anything else about the call (only ENOTTY comes first).
 *   ENOTTY  unknown ioctl
 *   EBADF   IMPORT: dmabuf_fd is not an open dma-buf file descriptor
 *   EEXIST  IMPORT: the range overlaps one of this process's imports
 *   ERANGE  IMPORT: offset + length lies beyond the end of the dma-buf
 *   EMFILE  IMPORT: the user already holds max_imports imports (module
 *           parameter, all processes of the uid together; default 65536)
 *   EMFILE  BUF_EXPORT: the process has no free file descriptor
 *   E2BIG   a struct larger than the module's with a non-zero tail, also
 *           for VERSION, whose struct is only written
 *
 * Pinned memory: a buffer's pages are charged, from allocation until the
 * buffer is freed (its last handle, mapping and dma-buf gone):
 *   - to the allocating user's locked_vm, the per-uid count io_uring,
 *     perf and XDP charge too, against the caller's RLIMIT_MEMLOCK; a
 *     caller with CAP_IPC_LOCK is not charged. The charge stays with the
 *     buffer: a child after fork, an image after execve or the receiver
 *     of a dma-buf fd holding the buffer keep it charged to the user, so
 *     none of them lets a user pin more than the limit;
 *   - not to the allocating process's pinned_vm (VmPin in
 *     /proc/PID/status): ibv_reg_mr() charges the pages it registers
 *     there, against the same RLIMIT_MEMLOCK, so all of a buffer can be
 *     registered;
 *   - to the caller's memory cgroup (the pages and the module's objects,
 *     as kernel memory): a job cannot pin past its cgroup's memory.max;
 *   - to the node-wide max_pinned_bytes (0: unlimited; config-set, needs
 *     CAP_SYS_ADMIN).
 * PeerDirect pins of GPU dma-bufs (registrations the module's client
 * claims) are outside max_pinned_bytes: they are charged to locked_vm as
 * above and bounded per user by the module parameter
 * max_peer_pinned_per_user, which alone bounds a CAP_IPC_LOCK caller's.
 */
#ifndef _UAPI_STRIXPEER_H
#define _UAPI_STRIXPEER_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define STRIXPEER_DEVICE_PATH		"/dev/strixpeer"

/*
 * ABI version: the major number changes on incompatible changes, the minor
 * number when ioctls or fields are added.
 */
#define STRIXPEER_ABI_MAJOR		1
#define STRIXPEER_ABI_MINOR		3

/* strixpeer_version.features, and the netlink info's features */
#define STRIXPEER_FEAT_BUFFERS		(1ULL << 0) /* BUF_ALLOC/FREE/INFO, mmap */
#define STRIXPEER_FEAT_NUMA		(1ULL << 1) /* buffers placed on a chosen node */
#define STRIXPEER_FEAT_PEERDIRECT	(1ULL << 2) /* peer-memory client active */
#define STRIXPEER_FEAT_DMABUF_EXPORT	(1ULL << 3) /* buffers exported as dma-buf */
#define STRIXPEER_FEAT_DMABUF_IMPORT	(1ULL << 4) /* dma-bufs imported */
#define STRIXPEER_FEAT_GEM_DMABUF	(1ULL << 5) /* GEM_DMABUF (kernels with DRM) */

/**
 * struct strixpeer_version - STRIXPEER_IOC_VERSION (out only)
 * @abi_major: STRIXPEER_ABI_MAJOR of the module
 * @abi_minor: STRIXPEER_ABI_MINOR of the module
 * @module_version: module release, (major << 16) | (minor << 8) | patch
 * @reserved: zero
 * @features: STRIXPEER_FEAT_* bits
 * @page_sizes: bit n set when 2^n-byte pages can back a buffer
 */
struct strixpeer_version {
	__u32 abi_major;
	__u32 abi_minor;
	__u32 module_version;
	__u32 reserved;
	__u64 features;
	__u64 page_sizes;
};

/* Node value: the module's default_node parameter (itself -1 = caller's node). */
#define STRIXPEER_NODE_DEFAULT		0xffffffffU

/* strixpeer_buf_alloc.flags; neither HUGE flag: the module's require_huge. */
#define STRIXPEER_ALLOC_HUGE_ONLY	(1U << 0) /* 2 MiB pages or ENOMEM */
#define STRIXPEER_ALLOC_ALLOW_SMALL	(1U << 1) /* fall back to smaller pages */
#define STRIXPEER_ALLOC_FLAGS		(STRIXPEER_ALLOC_HUGE_ONLY | \
					 STRIXPEER_ALLOC_ALLOW_SMALL)

/**
 * struct strixpeer_buf_alloc - STRIXPEER_IOC_BUF_ALLOC
 * @size: in: bytes wanted; out: bytes allocated (rounded up to the page
 *	size, to 2 MiB with STRIXPEER_ALLOC_HUGE_ONLY)
 * @node: in: NUMA node, or STRIXPEER_NODE_DEFAULT; all pages come from
 *	that one node
 * @flags: in: STRIXPEER_ALLOC_*
 * @handle: out: buffer handle, valid on this fd only
 * @reserved: zero
 * @mmap_offset: out: pass to mmap(2) on the same fd (MAP_SHARED)
 */
struct strixpeer_buf_alloc {
	__u64 size;
	__u32 node;
	__u32 flags;
	__u32 handle;
	__u32 reserved;
	__u64 mmap_offset;
};

/**
 * struct strixpeer_buf_free - STRIXPEER_IOC_BUF_FREE
 * @handle: buffer to free; its memory goes back once no mapping remains
 * @flags: zero
 */
struct strixpeer_buf_free {
	__u32 handle;
	__u32 flags;
};

/**
 * struct strixpeer_buf_info - STRIXPEER_IOC_BUF_INFO
 * @handle: in: buffer
 * @flags: in: zero
 * @size: out: bytes
 * @mmap_offset: out: as returned by BUF_ALLOC
 * @page_size: out: the page size backing every byte of the buffer, one
 *	of the version's page_sizes: 2 MiB when every page is a 2 MiB page,
 *	else 4 KiB (smaller runs may still be physically contiguous: see
 *	@nr_chunks)
 * @node: out: NUMA node of every page
 * @nr_chunks: out: number of physically contiguous runs
 * @map_count: out: live mappings of the buffer
 * @reserved: zero
 */
struct strixpeer_buf_info {
	__u32 handle;
	__u32 flags;
	__u64 size;
	__u64 mmap_offset;
	__u64 page_size;
	__u32 node;
	__u32 nr_chunks;
	__u32 map_count;
	__u32 reserved;
};

/**
 * struct strixpeer_import - STRIXPEER_IOC_IMPORT (since ABI 1.1)
 * @dmabuf_fd: in: a dma-buf (an amdgpu BO exported with
 *	hsa_amd_portable_export_dmabuf or DRM PRIME, a udmabuf, a dma-heap
 *	buffer, ...). strixpeer keeps its own reference; the fd may be closed.
 * @flags: in: zero
 * @offset: in: byte offset into the dma-buf, page aligned
 * @length: in: bytes, page aligned, not zero
 * @va: in: page-aligned address where these bytes are mapped in the
 *	caller's address space
 * @handle: out: import handle, valid on this fd only
 * @id: out: node-wide import id (netlink, events)
 *
 * Declares that [va, va + length) of the caller holds bytes
 * [offset, offset + length) of the dma-buf, so that the PeerDirect client
 * can claim registrations of that range (ibv_reg_mr) and map the dma-buf
 * for the NIC. Imports of one process may not overlap. An import ends with
 * UNIMPORT, when this fd is closed, when the process exits, or when any
 * part of the range is unmapped; registrations using it are invalidated
 * first.
 */
struct strixpeer_import {
	__s32 dmabuf_fd;
	__u32 flags;
	__u64 offset;
	__u64 length;
	__u64 va;
	__u32 handle;
	__u32 id;
};

/**
 * struct strixpeer_unimport - STRIXPEER_IOC_UNIMPORT (since ABI 1.1)
 * @handle: import to end; registrations using it are invalidated before
 *	this returns, and strixpeer's reference on the dma-buf is dropped
 *	before it returns too unless a registration still holds the import
 *	(then with that registration's deregistration)
 * @flags: zero
 */
struct strixpeer_unimport {
	__u32 handle;
	__u32 flags;
};

/**
 * struct strixpeer_import_info - STRIXPEER_IOC_IMPORT_INFO (since ABI 1.1)
 * @handle: in: import
 * @flags: in: zero
 * @va: out: start of the range
 * @length: out: bytes
 * @offset: out: offset into the dma-buf
 * @dmabuf_size: out: size of the whole dma-buf
 * @id: out: node-wide import id
 * @state: out: STRIXPEER_IMPORT_*
 * @registrations: out: live PeerDirect registrations using the import
 * @reserved: zero
 */
struct strixpeer_import_info {
	__u32 handle;
	__u32 flags;
	__u64 va;
	__u64 length;
	__u64 offset;
	__u64 dmabuf_size;
	__u32 id;
	__u32 state;
	__u32 registrations;
	__u32 reserved;
};

/* strixpeer_buf_export.flags */
#define STRIXPEER_EXPORT_CLOEXEC	(1U << 0) /* the new fd is close-on-exec */
#define STRIXPEER_EXPORT_RDWR		(1U << 1) /* read-write file (else read-only) */
#define STRIXPEER_EXPORT_FLAGS		(STRIXPEER_EXPORT_CLOEXEC | \
					 STRIXPEER_EXPORT_RDWR)

/**
 * struct strixpeer_buf_export - STRIXPEER_IOC_BUF_EXPORT (since ABI 1.2)
 * @handle: in: buffer
 * @flags: in: STRIXPEER_EXPORT_*
 * @fd: out: a new dma-buf file descriptor of the whole buffer
 * @reserved: zero
 *
 * Each call makes a new dma-buf. It holds the buffer: the memory stays
 * until the handle is freed, every mapping is gone and every reference to
 * every dma-buf of it (fds, importers such as a GPU or a NIC) is dropped.
 * Importers get the buffer's pages, physically contiguous runs merged into
 * one scatterlist entry each, split at their device's maximum segment
 * size. The pages never move: pinning is free and no move notification is
 * ever sent. Without STRIXPEER_EXPORT_RDWR the file is read-only (its
 * mmap(2) is read-only; importers are not restricted).
 */
struct strixpeer_buf_export {
	__u32 handle;
	__u32 flags;
	__s32 fd;
	__u32 reserved;
};

/* strixpeer_gem_dmabuf.flags */
#define STRIXPEER_GEM_DMABUF_CLOEXEC	(1U << 0) /* the new fd is close-on-exec */
#define STRIXPEER_GEM_DMABUF_NO_FD	(1U << 1) /* only say which dma-buf: no fd */
#define STRIXPEER_GEM_DMABUF_FLAGS	(STRIXPEER_GEM_DMABUF_CLOEXEC | \
					 STRIXPEER_GEM_DMABUF_NO_FD)
/* strixpeer_gem_dmabuf.out_flags */
#define STRIXPEER_GEM_DMABUF_READ_ONLY	(1U << 0) /* a mapping of the range is read-only */

/**
 * struct strixpeer_gem_dmabuf - STRIXPEER_IOC_GEM_DMABUF (since ABI 1.3)
 * @addr: in: first byte of a range of the caller's own address space
 * @size: in: its length in bytes, not zero
 * @flags: in: STRIXPEER_GEM_DMABUF_*
 * @fd: out: a new file descriptor of the dma-buf (-1 with ..._NO_FD)
 * @offset: out: the byte offset of @addr in that dma-buf
 * @ino: out: the dma-buf's inode number (fstat(2)'s st_ino of @fd): the
 *	same number while the same dma-buf lives, another for another one
 * @out_flags: out: STRIXPEER_GEM_DMABUF_READ_ONLY
 * @reserved: zero
 *
 * The range must lie in GEM mappings (mmap(2) of a DRM card or render
 * node at an object's fake offset) of one buffer object of a driver named
 * in the claim_gem_drivers parameter (amdgpu's hipMalloc/libhsakmt
 * mappings, vgem's), at consecutive offsets of it, and the DRM file each
 * mapping was made through must still be allowed to map the object (DRM's
 * mmap permission, drm_vma_node_is_allowed(): each GEM handle of the
 * object in that file grants it, and KFD grants it to the process's
 * render node for every BO it allocates, whose handle KFD keeps in a
 * file of its own): a process reaches only objects it may map itself.
 * The fd is the object's
 * PRIME export (the dma-buf DRM_IOCTL_PRIME_HANDLE_TO_FD returns: made
 * read-write as DRM makes it when there is none yet; for an object the
 * driver imported, the dma-buf it was imported from); give it to
 * ibv_reg_dmabuf_mr(pd, offset, size, addr, fd, access) and close it.
 * Errors: EINVAL (unknown flags, reserved not zero, an empty or wrapping
 * range), ENOENT (a hole, or a page that is no such mapping: host memory,
 * another driver, a dma-buf's own mmap),
 * EXDEV (two objects, or other offsets of one), EACCES (the mapping's
 * file may no longer map the object: its handles there are gone; or the
 * device was opened by another process), EMFILE, EOPNOTSUPP (a kernel
 * without DRM).
 */
struct strixpeer_gem_dmabuf {
	__u64 addr;
	__u64 size;
	__u32 flags;
	__s32 fd;
	__u64 offset;
	__u64 ino;
	__u32 out_flags;
	__u32 reserved;
};

/* strixpeer_import_info.state */
#define STRIXPEER_IMPORT_ACTIVE		0 /* claimable */
#define STRIXPEER_IMPORT_UNMAPPED	1 /* part of the range was unmapped */

#define STRIXPEER_IOC_MAGIC		0xB5

#define STRIXPEER_IOC_VERSION	_IOR(STRIXPEER_IOC_MAGIC, 0x00, struct strixpeer_version)
#define STRIXPEER_IOC_BUF_ALLOC	_IOWR(STRIXPEER_IOC_MAGIC, 0x01, struct strixpeer_buf_alloc)
#define STRIXPEER_IOC_BUF_FREE	_IOW(STRIXPEER_IOC_MAGIC, 0x02, struct strixpeer_buf_free)
#define STRIXPEER_IOC_BUF_INFO	_IOWR(STRIXPEER_IOC_MAGIC, 0x03, struct strixpeer_buf_info)
#define STRIXPEER_IOC_IMPORT	_IOWR(STRIXPEER_IOC_MAGIC, 0x04, struct strixpeer_import)
#define STRIXPEER_IOC_UNIMPORT	_IOW(STRIXPEER_IOC_MAGIC, 0x05, struct strixpeer_unimport)
#define STRIXPEER_IOC_IMPORT_INFO _IOWR(STRIXPEER_IOC_MAGIC, 0x06, struct strixpeer_import_info)
#define STRIXPEER_IOC_BUF_EXPORT _IOWR(STRIXPEER_IOC_MAGIC, 0x07, struct strixpeer_buf_export)
#define STRIXPEER_IOC_GEM_DMABUF _IOWR(STRIXPEER_IOC_MAGIC, 0x08, struct strixpeer_gem_dmabuf)

/*
 * Generic netlink family "strixpeer": the control plane. Its commands,
 * attributes, enums and group are in strixpeer_nl.h, generated by the
 * kernel's YNL generator from docs/netlink/strixpeer.yaml (make netlink-gen;
 * the suite regenerates and compares it). u64 attributes are 64-bit aligned
 * with the set's PAD attribute. Joining the events group needs CAP_SYS_ADMIN:
 * events show every user's buffers.
 */
#include "strixpeer_nl.h"

/* The family's names as this header has always spelled them. */
#define STRIXPEER_GENL_NAME		STRIXPEER_FAMILY_NAME
#define STRIXPEER_GENL_VERSION		STRIXPEER_FAMILY_VERSION

#endif /* _UAPI_STRIXPEER_H */
