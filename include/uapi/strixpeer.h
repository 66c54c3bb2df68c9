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
 *   EDQUOT  the caller's RLIMIT_MEMLOCK would be exceeded
 *   ENOSPC  the node-wide max_pinned_bytes would be exceeded
 *   EMFILE  no free handle on this fd
 *   ENOMEM  the pages could not be had (e.g. 2 MiB pages required)
 *   ENOENT  no buffer with that handle on this fd
 *   EACCES  fd used by a process other than the one that opened it
 *   ENOTTY  unknown ioctl
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
#define STRIXPEER_ABI_MINOR		0

/* strixpeer_version.features, and the netlink info's features */
#define STRIXPEER_FEAT_BUFFERS		(1ULL << 0) /* BUF_ALLOC/FREE/INFO, mmap */
#define STRIXPEER_FEAT_NUMA		(1ULL << 1) /* buffers placed on a chosen node */
#define STRIXPEER_FEAT_PEERDIRECT	(1ULL << 2) /* peer-memory client active */
#define STRIXPEER_FEAT_DMABUF_EXPORT	(1ULL << 3) /* buffers exported as dma-buf */
#define STRIXPEER_FEAT_DMABUF_IMPORT	(1ULL << 4) /* dma-bufs imported */

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
 * @page_size: out: smallest physically contiguous, naturally aligned
 *	page backing the buffer (2 MiB when every page is a 2 MiB page)
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

#define STRIXPEER_IOC_MAGIC		0xB5

#define STRIXPEER_IOC_VERSION	_IOR(STRIXPEER_IOC_MAGIC, 0x00, struct strixpeer_version)
#define STRIXPEER_IOC_BUF_ALLOC	_IOWR(STRIXPEER_IOC_MAGIC, 0x01, struct strixpeer_buf_alloc)
#define STRIXPEER_IOC_BUF_FREE	_IOW(STRIXPEER_IOC_MAGIC, 0x02, struct strixpeer_buf_free)
#define STRIXPEER_IOC_BUF_INFO	_IOWR(STRIXPEER_IOC_MAGIC, 0x03, struct strixpeer_buf_info)

/*
 * Generic netlink family "strixpeer": the control plane. Described in
 * docs/netlink/strixpeer.yaml; the enums below follow it (checked by
 * tests/spec-check.py). u64 attributes are 64-bit aligned with the
 * set's PAD attribute.
 */
#define STRIXPEER_GENL_NAME		"strixpeer"
#define STRIXPEER_GENL_VERSION		1
#define STRIXPEER_MCGRP_EVENTS		"events"

enum strixpeer_limit {
	STRIXPEER_LIMIT_MAX_BUF_SIZE = 1,
	STRIXPEER_LIMIT_MAX_PINNED_BYTES,
	STRIXPEER_LIMIT_MEMLOCK,
	STRIXPEER_LIMIT_NO_MEMORY,
};

enum {
	STRIXPEER_A_NODE_ID = 1,
	STRIXPEER_A_NODE_FREE_BYTES,
	STRIXPEER_A_NODE_FREE_HUGE,
	STRIXPEER_A_NODE_PAD,

	__STRIXPEER_A_NODE_MAX,
	STRIXPEER_A_NODE_MAX = (__STRIXPEER_A_NODE_MAX - 1)
};

enum {
	STRIXPEER_A_INFO_VERSION = 1,
	STRIXPEER_A_INFO_ABI_MAJOR,
	STRIXPEER_A_INFO_ABI_MINOR,
	STRIXPEER_A_INFO_FEATURES,
	STRIXPEER_A_INFO_PAGE_SIZES,
	STRIXPEER_A_INFO_PEERDIRECT_REASON,
	STRIXPEER_A_INFO_NODE,
	STRIXPEER_A_INFO_PAD,

	__STRIXPEER_A_INFO_MAX,
	STRIXPEER_A_INFO_MAX = (__STRIXPEER_A_INFO_MAX - 1)
};

enum {
	STRIXPEER_A_BUF_ID = 1,
	STRIXPEER_A_BUF_PID,
	STRIXPEER_A_BUF_SIZE,
	STRIXPEER_A_BUF_NODE,
	STRIXPEER_A_BUF_PAGE_SIZE,
	STRIXPEER_A_BUF_CHUNKS,
	STRIXPEER_A_BUF_MAP_COUNT,
	STRIXPEER_A_BUF_PINNED,
	STRIXPEER_A_BUF_EXPORTED,
	STRIXPEER_A_BUF_PAD,

	__STRIXPEER_A_BUF_MAX,
	STRIXPEER_A_BUF_MAX = (__STRIXPEER_A_BUF_MAX - 1)
};

enum {
	STRIXPEER_A_STATS_BUFFERS = 1,
	STRIXPEER_A_STATS_PINNED_BYTES,
	STRIXPEER_A_STATS_PEAK_PINNED_BYTES,
	STRIXPEER_A_STATS_ALLOCS,
	STRIXPEER_A_STATS_FREES,
	STRIXPEER_A_STATS_FAIL_NOMEM,
	STRIXPEER_A_STATS_FAIL_MEMLOCK,
	STRIXPEER_A_STATS_FAIL_MAX_BUF_SIZE,
	STRIXPEER_A_STATS_FAIL_MAX_PINNED,
	STRIXPEER_A_STATS_MMAPS,
	STRIXPEER_A_STATS_PEER_ACQUIRES,
	STRIXPEER_A_STATS_PEER_CLAIMS,
	STRIXPEER_A_STATS_PEER_INVALIDATIONS,
	STRIXPEER_A_STATS_DMABUF_EXPORTS,
	STRIXPEER_A_STATS_DMABUF_ATTACHMENTS,
	STRIXPEER_A_STATS_PAD,

	__STRIXPEER_A_STATS_MAX,
	STRIXPEER_A_STATS_MAX = (__STRIXPEER_A_STATS_MAX - 1)
};

enum {
	STRIXPEER_A_CONFIG_MAX_BUF_SIZE = 1,
	STRIXPEER_A_CONFIG_MAX_PINNED_BYTES,
	STRIXPEER_A_CONFIG_DEFAULT_NODE,
	STRIXPEER_A_CONFIG_REQUIRE_HUGE,
	STRIXPEER_A_CONFIG_PAD,

	__STRIXPEER_A_CONFIG_MAX,
	STRIXPEER_A_CONFIG_MAX = (__STRIXPEER_A_CONFIG_MAX - 1)
};

enum {
	STRIXPEER_A_EVENT_BUF = 1,
	STRIXPEER_A_EVENT_LIMIT,
	STRIXPEER_A_EVENT_PID,
	STRIXPEER_A_EVENT_SIZE,
	STRIXPEER_A_EVENT_CONFIG,
	STRIXPEER_A_EVENT_PAD,

	__STRIXPEER_A_EVENT_MAX,
	STRIXPEER_A_EVENT_MAX = (__STRIXPEER_A_EVENT_MAX - 1)
};

enum {
	STRIXPEER_CMD_INFO = 1,
	STRIXPEER_CMD_BUF_GET,
	STRIXPEER_CMD_STATS_GET,
	STRIXPEER_CMD_CONFIG_GET,
	STRIXPEER_CMD_CONFIG_SET,
	STRIXPEER_CMD_BUF_CREATED_NTF,
	STRIXPEER_CMD_BUF_FREED_NTF,
	STRIXPEER_CMD_LIMIT_NTF,
	STRIXPEER_CMD_CONFIG_NTF,

	__STRIXPEER_CMD_MAX,
	STRIXPEER_CMD_MAX = (__STRIXPEER_CMD_MAX - 1)
};

#endif /* _UAPI_STRIXPEER_H */
