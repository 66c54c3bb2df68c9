// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor's data-path test: the pieces both halves share,
 * rdmatest.c (on this node) and peertest.c (--serve/--peer). The clock, one
 * RDMA WRITE waited for (rdma/rc.h's, within WAIT_MS), the message size and
 * the rate as printed. It adds no results and calls no other doctor file;
 * the queue pairs, waits and the data pattern are rdma/rc.h's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rdmatest.h"

uint64_t dr_rt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One RDMA WRITE of @len bytes from @lmr into @raddr/@rkey, waited for. */
int dr_rt_write(struct sp_rc *e, struct ibv_mr *lmr, uint64_t raddr, uint32_t rkey, size_t len,
		char *why, size_t wlen)
{
	return sp_rc_rdma(e, IBV_WR_RDMA_WRITE, lmr, 0, raddr, rkey, (uint32_t)len, WAIT_MS, why,
			  wlen) ? -1 : 0;
}

size_t dr_rt_max_msg(size_t size)
{
	return size > (1U << 30) ? (1U << 30) : size;	/* one WR: < 2 GiB */
}

void dr_rt_fmt_rate(char *out, size_t len, size_t bytes, uint64_t ns)
{
	snprintf(out, len, "%.1f MB/s", ns ? (double)bytes * 1000.0 / (double)ns : 0.0);
}
