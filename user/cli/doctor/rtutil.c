// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor's data-path test: the pieces both halves share,
 * rdmatest.c (on this node) and peertest.c (--serve/--peer). The clock, the
 * test pattern's fill and verify, a bounded wait for one completion, one
 * signalled RDMA WRITE, the message size and the rate as printed. It adds
 * no results and calls no other doctor file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
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

/* The test pattern: position- and seed-dependent, so misplaced bytes show. */
uint8_t dr_rt_pattern(uint32_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)seed << 17);

	return (uint8_t)(x >> 56 ^ x >> 11 ^ i);
}

void dr_rt_fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = dr_rt_pattern(seed, i);
}

/* Offset of the first wrong byte, or -1 when all are right. */
int64_t dr_rt_verify(const uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != dr_rt_pattern(seed, i))
			return (int64_t)i;
	return -1;
}

/* One completion on @cq (through @ch); its status, or -ETIMEDOUT/-EIO. */
int dr_rt_wait_wc(struct ibv_comp_channel *ch, struct ibv_cq *cq, struct ibv_wc *wc)
{
	int waited = 0;

	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int n;

		if (ibv_req_notify_cq(cq, 0))
			return -EIO;
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -EIO;
		if (n == 1)
			return 0;
		n = poll(&pfd, 1, 200);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0) {
			waited += 200;
			if (waited >= WAIT_MS)
				return -ETIMEDOUT;
			continue;
		}
		if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0)
			ibv_ack_cq_events(ev_cq, 1);
	}
}

/* One RDMA WRITE of @len bytes from @lmr into @raddr/@rkey; waits for it. */
int dr_rt_write(struct ibv_qp *qp, struct ibv_comp_channel *ch, struct ibv_cq *cq,
		      struct ibv_mr *lmr, uint64_t raddr, uint32_t rkey, size_t len,
		      char *why, size_t wlen)
{
	struct ibv_sge sge = { (uintptr_t)lmr->addr, (uint32_t)len, lmr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	int ret;

	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad)) {
		snprintf(why, wlen, "ibv_post_send: %s", strerror(errno));
		return -1;
	}
	ret = dr_rt_wait_wc(ch, cq, &wc);
	if (ret) {
		snprintf(why, wlen, "no completion for the RDMA WRITE: %s", strerror(-ret));
		return -1;
	}
	if (wc.status != IBV_WC_SUCCESS) {
		snprintf(why, wlen, "the RDMA WRITE completed with %s", ibv_wc_status_str(wc.status));
		return -1;
	}
	return 0;
}

size_t dr_rt_max_msg(size_t size)
{
	return size > (1U << 30) ? (1U << 30) : size;	/* one WR: < 2 GiB */
}

void dr_rt_fmt_rate(char *out, size_t len, size_t bytes, uint64_t ns)
{
	snprintf(out, len, "%.1f MB/s", ns ? (double)bytes * 1000.0 / (double)ns : 0.0);
}
