/* SPDX-License-Identifier: MIT */
/*
 * libstrixpeer internals shared by its source files (not exported: the
 * version script keeps every sp_* name below local).
 */
#ifndef SP_LIB_INTERNAL_H
#define SP_LIB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strixpeer.h"

struct sp_mr;

struct sp_dev {
	int fd;
	pid_t pid;		/* the process that opened it */
	struct sp_version ver;
	struct sp_buf *bufs;	/* list of live buffers, for sp_dev_close() */
	struct sp_import *imports;	/* live imports, for sp_dev_close() */
	struct sp_mr *mrs;	/* sp_reg_mr()'s cache and live MRs (reg.c) */
	uint64_t reg_hits, reg_misses, reg_dropped;
	/* set by reg.c once it is used: forget MRs of a range that goes */
	void (*drop_range)(struct sp_dev *dev, uintptr_t start, size_t len);
	void (*drop_all)(struct sp_dev *dev);
};

struct sp_import {
	struct sp_dev *dev;
	struct sp_import *next;
	uint32_t handle;
	uint32_t id;
	void *addr;		/* the imported range */
	size_t length;
	uint64_t offset;	/* into the dma-buf */
	int dmabuf_fd;		/* our duplicate, for ibv_reg_dmabuf_mr() */
};

struct sp_buf {
	struct sp_dev *dev;
	struct sp_buf *next;
	uint32_t handle;
	size_t size;
	uint64_t mmap_offset;
	void *addr;
	int export_fd;		/* sp_reg_mr()'s dma-buf of it, or -1 */
};

/* Records a message for sp_errmsg() and returns -err. */
int sp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
