// SPDX-License-Identifier: MIT
/*
 * strixpeerctl's benchmark, its RDMA connection (bench_conn.h): control
 * messages and the data queue pair (both rdma/link.h's), completions, the
 * latency ping-pongs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "strixpeer.h"
#include "bench_conn.h"

int sp_bench_send_msg(struct sp_conn *c, const struct sp_link_msg *m)
{
	char why[320] = "";
	int ret = sp_link_send(&c->link, m, why, sizeof(why));

	return ret ? sp_bench_fail(-ret, "%s", why) : 0;
}

int sp_bench_recv_msg(struct sp_conn *c, struct sp_link_msg *m, unsigned int want)
{
	char why[320] = "";
	int ret = sp_link_recv(&c->link, m, want, why, sizeof(why));

	return ret ? sp_bench_fail(-ret, "%s", why) : 0;
}

int sp_bench_call(struct sp_conn *c, struct sp_link_msg *m, unsigned int want)
{
	char why[320] = "";
	int ret = sp_link_call(&c->link, m, want, why, sizeof(why));

	return ret ? sp_bench_fail(-ret, "%s", why) : 0;
}

/* --- queue pair ------------------------------------------------------------ */

void sp_bench_data_qp(const struct sp_bench_opts *o, bool server, struct sp_link_qp *qp)
{
	memset(qp, 0, sizeof(*qp));
	qp->cap.max_send_wr = o->depth + 8;
	qp->cap.max_recv_wr = SP_RECV_DEPTH + 8;
	qp->cap.max_send_sge = 1;
	qp->cap.max_recv_sge = 1;
	qp->cqe = (int)(o->depth + SP_RECV_DEPTH + 16);
	/* the server learns the client's choice from its hello: it always has one */
	qp->flags = (o->flags & SP_BENCH_EVENTS) || server ? 0 : SP_RC_POLLED;
	qp->rd_atomic = SP_RD_DEPTH;
}

void sp_bench_conn_close(struct sp_conn *c)
{
	sp_link_ep_close(&c->data);
	if (c->linked)
		sp_link_close(&c->link);
	c->linked = false;
}

static int sp_check_wc(struct sp_conn *c, struct ibv_wc *wc, int n)
{
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS)
			return sp_bench_fail(EIO, "completion error: %s (opcode %d)",
				       ibv_wc_status_str(wc[i].status), wc[i].opcode);
		if (wc[i].opcode & IBV_WC_RECV)
			c->recvs++;
		else
			c->sends++;
	}
	return n;
}

/* Sleep until the CQ has a completion (events mode); -ETIMEDOUT after SP_WAIT_S. */
static int sp_cq_event(struct sp_conn *c, struct ibv_wc *wc, int max)
{
	struct pollfd pfd = { .fd = c->data.rc.ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *ctx;
	int n;

	if (ibv_req_notify_cq(c->data.rc.cq, 0))
		return sp_bench_fail(EIO, "ibv_req_notify_cq failed");
	n = ibv_poll_cq(c->data.rc.cq, max, wc);	/* what arrived before the request */
	if (n)
		return n;
	n = poll(&pfd, 1, (int)(SP_WAIT_S * 1000));
	if (n == 0)
		return sp_bench_fail(ETIMEDOUT, "no completion for %.0f s", SP_WAIT_S);
	if (n < 0 || ibv_get_cq_event(c->data.rc.ch, &cq, &ctx))
		return sp_bench_fail(EIO, "waiting for a completion event: %s", strerror(errno));
	ibv_ack_cq_events(cq, 1);
	return 0;
}

/*
 * Poll up to @max completions (counted in c->sends / c->recvs); busy, or
 * sleeping on the completion channel in events mode; -ETIMEDOUT after
 * SP_WAIT_S without any.
 */
int sp_bench_poll(struct sp_conn *c, struct ibv_wc *wc, int max)
{
	double deadline = 0;

	for (unsigned long spin = 0;; spin++) {
		int n = ibv_poll_cq(c->data.rc.cq, max, wc);

		if (n == 0 && c->events)
			n = sp_cq_event(c, wc, max);
		if (n < 0)
			return n == -1 ? sp_bench_fail(EIO, "ibv_poll_cq failed") : n;
		if (n > 0)
			return sp_check_wc(c, wc, n);
		if (!c->events && !(spin & 1023)) {
			double now = sp_bench_now();

			if (!deadline)
				deadline = now + SP_WAIT_S;
			else if (now > deadline)
				return sp_bench_fail(ETIMEDOUT, "no completion for %.0f s", SP_WAIT_S);
		}
	}
}

int sp_bench_post(struct sp_conn *c, enum ibv_wr_opcode op, struct sp_bench_mem *m,
		   size_t off, size_t len, uint64_t raddr, uint32_t rkey, uint64_t wr_id,
		   bool signaled)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(m->addr + off), .length = (uint32_t)len,
		.lkey = sp_bench_mem_lkey(m),
	};
	char why[160];
	int ret = sp_rc_post(&c->data.rc, op, &sge, raddr, rkey, wr_id,
			     signaled ? IBV_SEND_SIGNALED : 0, why, sizeof(why));

	return ret ? sp_bench_fail(-ret, "%s", why) : 0;
}

int sp_bench_post_recv(struct sp_conn *c, struct sp_bench_mem *m, size_t off, size_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(m->addr + off), .length = (uint32_t)len,
		.lkey = sp_bench_mem_lkey(m),
	};
	struct ibv_recv_wr wr, *bad;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ret = ibv_post_recv(c->data.rc.qp, &wr, &bad);
	return ret ? sp_bench_fail(ret, "ibv_post_recv: %s", strerror(ret)) : 0;
}

/*
 * Wait for one completion of a send (or a receive, @want_recv); the other
 * kind's completions seen meanwhile are counted for their own waiter.
 */
int sp_bench_wait_one(struct sp_conn *c, bool want_recv)
{
	unsigned int *have = want_recv ? &c->recvs : &c->sends;
	struct ibv_wc wc[8];

	while (!*have) {
		int n = sp_bench_poll(c, wc, 8);

		if (n < 0)
			return n;
	}
	(*have)--;
	return 0;
}

static uint8_t sp_mark(uint64_t i)
{
	return (uint8_t)(i % 255 + 1);
}

/* Spin until *@p == @v (the other side's RDMA WRITE arrived). */
static int sp_wait_byte(const uint8_t *p, uint8_t v)
{
	double deadline = 0;

	for (unsigned long spin = 0; __atomic_load_n(p, __ATOMIC_ACQUIRE) != v; spin++) {
		if (!(spin & 4095)) {
			double now = sp_bench_now();

			if (!deadline)
				deadline = now + SP_WAIT_S;
			else if (now > deadline)
				return sp_bench_fail(ETIMEDOUT, "the other side's RDMA WRITE did not arrive for %.0f s",
					       SP_WAIT_S);
		}
	}
	return 0;
}

/*
 * Server and client halves of the ping-pong tests. The buffer's first half
 * is the source of what this side sends, the second half receives.
 */
int sp_bench_write_pingpong(struct sp_conn *c, struct sp_bench_mem *m, size_t half,
			     size_t size, uint64_t raddr, uint32_t rkey, uint64_t n,
			     bool client, double *lat)
{
	uint8_t *src = m->addr + size - 1, *dst = m->addr + half + size - 1;

	/*
	 * As perftest: the side polls memory, not the CQ; its own write's
	 * completion is reaped after the answer arrived (it has, by then).
	 */
	for (uint64_t i = 0; i < n; i++) {
		double t0 = sp_bench_now();
		int ret = 0;

		if (!client) {
			ret = sp_wait_byte(dst, sp_mark(i));
			if (!ret && i)
				ret = sp_bench_wait_one(c, false);
		}
		*src = sp_mark(i);
		if (!ret)
			ret = sp_bench_post(c, IBV_WR_RDMA_WRITE, m, 0, size, raddr + half, rkey, i, true);
		if (!ret && client) {
			ret = sp_wait_byte(dst, sp_mark(i));
			if (lat)
				lat[i] = (sp_bench_now() - t0) * 1e6 / 2;
			if (!ret)
				ret = sp_bench_wait_one(c, false);
		}
		if (ret)
			return ret;
	}
	return client ? 0 : sp_bench_wait_one(c, false);
}

int sp_bench_send_pingpong(struct sp_conn *c, struct sp_bench_mem *m, size_t half,
			    size_t size, uint64_t n, bool client, double *lat)
{
	for (uint64_t i = 0; i < n; i++) {
		double t0 = sp_bench_now();
		int ret = 0;

		if (!client)
			ret = sp_bench_wait_one(c, true);
		/* one receive posted at a time: none is left over afterwards */
		if (!ret && !client && i + 1 < n)
			ret = sp_bench_post_recv(c, m, half, size);
		if (!ret)
			ret = sp_bench_post(c, IBV_WR_SEND, m, 0, size, 0, 0, i, true);
		if (!ret)
			ret = sp_bench_wait_one(c, false);
		if (!ret && client)
			ret = sp_bench_wait_one(c, true);
		if (!ret && client && i + 1 < n)
			ret = sp_bench_post_recv(c, m, half, size);
		if (ret)
			return ret;
		if (lat)
			lat[i] = (sp_bench_now() - t0) * 1e6 / 2;
	}
	return 0;
}

/* Server side of SEND bandwidth: exactly @n receives, @depth at a time. */
int sp_bench_send_sink(struct sp_conn *c, struct sp_bench_mem *m, size_t half,
			size_t size, uint64_t n)
{
	struct ibv_wc wc[32];
	uint64_t posted = 0, got = 0;
	int ret;

	while (posted < n && posted < SP_RECV_DEPTH) {
		ret = sp_bench_post_recv(c, m, half, size);
		if (ret)
			return ret;
		posted++;
	}
	{
		struct sp_link_msg r = { .type = SP_MSG_READY };

		ret = sp_bench_send_msg(c, &r);
		if (ret)
			return ret;
	}
	while (got < n) {
		int k = sp_bench_poll(c, wc, 32);

		if (k < 0)
			return k;
		for (int i = 0; i < k; i++) {
			if (!(wc[i].opcode & IBV_WC_RECV))
				continue;
			got++;
			c->recvs--;
			if (posted < n) {
				ret = sp_bench_post_recv(c, m, half, size);
				if (ret)
					return ret;
				posted++;
			}
		}
	}
	return 0;
}
