/* SPDX-License-Identifier: MIT */
/* What link.c and link_io.c share (not part of link.h's interface). */
#ifndef SP_RDMA_LINK_INT_H
#define SP_RDMA_LINK_INT_H

#include <stdint.h>

#include "link.h"

struct rdma_cm_event;

int64_t sp_link_now_ms(void);		/* CLOCK_MONOTONIC */
int sp_link_left_ms(int64_t deadline);	/* 0 once passed */
/*
 * An event that is not the one being waited for: the control id's
 * disconnect marks @l gone; a server's other connect requests are refused
 * (busy), except the session's data connection, kept in l->held. Acks @ev.
 */
void sp_link_other_event(struct sp_link *l, struct rdma_cm_event *ev);
/* (Re)posts control receive @slot. */
int sp_link_post_recv(struct sp_link *l, unsigned int slot, char *why, size_t len);

#endif
