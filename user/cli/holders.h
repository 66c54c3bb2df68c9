/* SPDX-License-Identifier: MIT */
/*
 * Who holds strixpeer's buffers and the module: a scan of /proc
 * (holders.c says how).
 */
#ifndef SP_HOLDERS_H
#define SP_HOLDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <strixpeer.h>

enum sp_hold_kind {
	SP_HOLD_FD,		/* a /dev/strixpeer fd (buf_id 0: the file itself) */
	SP_HOLD_MAP,		/* a mapping of /dev/strixpeer (buf_id 0: unknown) */
	SP_HOLD_DMABUF_FD,	/* an fd of a dma-buf (ino) */
	SP_HOLD_DMABUF_MAP,	/* a mapping of a dma-buf (ino) */
};

struct sp_hold {
	enum sp_hold_kind kind;
	int pid;
	int fd;			/* -1 for mappings */
	char comm[32];
	uint32_t handle;
	uint32_t buf_id;
	uint64_t ino;
};

struct sp_holders {
	struct sp_hold *v;
	size_t n, cap;
	unsigned int unreadable;	/* processes whose fds we may not read */
	unsigned int dev_fds;		/* open /dev/strixpeer fds seen */
};

int sp_holders_scan(struct sp_holders *h);
void sp_holders_free(struct sp_holders *h);
bool sp_hold_matches(const struct sp_hold *x, const struct sp_buf_entry *e);
bool sp_dmabuf_held(const struct sp_holders *h, uint64_t ino);
const char *sp_hold_kind_name(enum sp_hold_kind k);
void pr_hold(const struct sp_hold *x);

#endif
