// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor serve and doctor peer HOST: the data-path test between
 * two nodes. The client connects to "doctor serve" on HOST through
 * rdma/link.h (the connection bench uses too, on doctor's own port),
 * asks for a strixpeer buffer there, RDMA-WRITEs into it on the control
 * connection's queue pair and lets the server verify every byte (rtutil.c
 * has the shared pieces, rdmatest.h declares them). Every wait is bounded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor.h"
#include "../print.h"
#include "strixpeer.h"
#include "rdmatest.h"
#include "rdma/link.h"

/* The control queue pair also carries the client's RDMA WRITEs. */
static const struct sp_link_qp rt_qp = {
	.cap = { .max_send_wr = 32, .max_recv_wr = 0, .max_send_sge = 1, .max_recv_sge = 1 },
	.rd_atomic = 1,
};

static volatile sig_atomic_t serve_stop;

static void on_signal(int sig)
{
	(void)sig;
	serve_stop = 1;
}

/* One client, connected: a strixpeer buffer for it, then verify what it wrote. */
static int serve_one(struct sp_link *l, struct sp_dev *spdev, char *why, size_t len,
		     uint64_t *bytes)
{
	struct sp_link_msg q, a;
	struct sp_buf *buf = NULL;
	struct ibv_mr *mr = NULL;
	int ret;

	ret = sp_link_recv(l, &q, SP_MSG_BUFFER, why, len);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.type = SP_MSG_TARGET;
	if (!q.size || q.size > (1ULL << 30)) {
		a.status = -EINVAL;
		snprintf(a.text, sizeof(a.text), "a buffer of %llu bytes: 1 byte .. 1 GiB",
			 (unsigned long long)q.size);
	} else if (sp_buf_alloc(spdev, q.size, SP_NODE_DEFAULT, 0, &buf) < 0) {
		a.status = -ENOMEM;
		snprintf(a.text, sizeof(a.text), "strixpeer buffer of %llu bytes: %s",
			 (unsigned long long)q.size, sp_errmsg());
	} else {
		memset(sp_buf_addr(buf), 0, sp_buf_size(buf));
		mr = ibv_reg_mr(l->ctl.rc.pd, sp_buf_addr(buf), q.size,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr) {
			a.status = -(errno ? errno : EIO);
			snprintf(a.text, sizeof(a.text), "ibv_reg_mr of the strixpeer buffer: %s",
				 strerror(errno));
		} else {
			a.addr = (uintptr_t)sp_buf_addr(buf);
			a.rkey = mr->rkey;
			a.size = q.size;
		}
	}
	ret = sp_link_send(l, &a, why, len);
	if (!ret && a.status) {
		snprintf(why, len, "%s", a.text);
		ret = a.status;
	}
	if (!ret)
		ret = sp_link_recv(l, &q, SP_MSG_VERIFY, why, len);
	if (!ret) {
		a.type = SP_MSG_VERIFIED;
		a.value = q.size > a.size ? 0 : sp_rc_verify(sp_buf_addr(buf), q.size, 0, q.seed);
		ret = sp_link_send(l, &a, why, len);
		*bytes = q.size;
	}
	if (!ret && a.value >= 0) {
		snprintf(why, len, "byte %lld arrived wrong", (long long)a.value);
		ret = -EIO;
	}
	if (mr)
		ibv_dereg_mr(mr);
	if (buf)
		sp_buf_free(buf);
	return ret;
}

int dr_serve(const struct dr_rt_opts *o)
{
	struct sigaction sa = { 0 };
	struct sp_link_srv srv;
	struct sp_dev *spdev = NULL;
	char why[320] = "";
	int failed = 0;

	if (sp_dev_open(NULL, &spdev) < 0) {
		fprintf(stderr, "strixpeerctl doctor serve: %s\n", sp_errmsg());
		return 2;
	}
	if (sp_link_listen(&srv, SP_LINK_DOCTOR, o->bind, o->port, why, sizeof(why))) {
		fprintf(stderr, "strixpeerctl doctor serve: %s\n", why);
		sp_dev_close(spdev);
		return 1;
	}
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("doctor serve: listening on %s port %s%s\n", o->bind ? o->bind : "*", o->port,
	       o->once ? " for one client" : "");
	fflush(stdout);
	while (!serve_stop) {
		struct sp_link l;
		uint64_t bytes = 0;
		int ret = sp_link_accept(&srv, &l, &rt_qp, 500, why, sizeof(why));

		if (ret == -ETIMEDOUT)
			continue;
		if (ret) {
			/* refused (another tool or version) or gone: not our client */
			printf("doctor serve: %s\n", why);
			fflush(stdout);
			continue;
		}
		ret = serve_one(&l, spdev, why, sizeof(why), &bytes);
		if (ret)
			printf("doctor serve: %s: failed: %s\n", l.peer, why);
		else
			printf("doctor serve: %s: %llu bytes RDMA-written into a strixpeer buffer, every byte verified\n",
			       l.peer, (unsigned long long)bytes);
		fflush(stdout);
		failed += ret != 0;
		sp_link_close(&l);
		if (o->once)
			break;
	}
	sp_link_srv_close(&srv);
	sp_dev_close(spdev);
	return failed ? 1 : 0;
}

void dr_rt_peer_test(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_rt_opts *o)
{
	uint64_t size = dr_rt_max_msg(o->size), t0, t_write, t_lat;
	struct sp_link l = { 0 };
	struct sp_link_msg m, tgt;
	struct ibv_mr *lmr = NULL;
	char why[320] = "", bw[32], sz[32];
	uint8_t *host = NULL;
	struct dr_result *r;
	uint32_t seed = (uint32_t)dr_rt_now_ns();
	bool connected = false;

	(void)spdev;
	if (sp_link_connect(&l, SP_LINK_DOCTOR, o->peer, o->port, NULL, &rt_qp, 0, why,
			    sizeof(why)))
		goto fail;
	connected = true;
	host = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!host) {
		snprintf(why, sizeof(why), "no memory for %llu bytes", (unsigned long long)size);
		goto fail;
	}
	sp_rc_fill(host, size, 0, seed);
	lmr = ibv_reg_mr(l.ctl.rc.pd, host, size, IBV_ACCESS_LOCAL_WRITE);
	if (!lmr) {
		snprintf(why, sizeof(why), "registering the source buffer: %s", strerror(errno));
		goto fail;
	}
	memset(&m, 0, sizeof(m));
	m.type = SP_MSG_BUFFER;
	m.size = size;
	if (sp_link_call(&l, &m, SP_MSG_TARGET, why, sizeof(why))) {
		char e[sizeof(why)];

		memcpy(e, why, sizeof(e));
		snprintf(why, sizeof(why), "the server has no strixpeer buffer for us: %.*s",
			 (int)(sizeof(why) - 48), e);
		goto fail;
	}
	tgt = m;
	if (tgt.size < size) {
		snprintf(why, sizeof(why), "the server's buffer has %llu bytes, we asked for %llu",
			 (unsigned long long)tgt.size, (unsigned long long)size);
		goto fail;
	}
	t0 = dr_rt_now_ns();
	if (dr_rt_write(&l.ctl.rc, lmr, tgt.addr, tgt.rkey, size, why, sizeof(why)))
		goto fail;
	t_write = dr_rt_now_ns() - t0;
	t0 = dr_rt_now_ns();
	for (int i = 0; i < LAT_ITERS; i++)
		if (dr_rt_write(&l.ctl.rc, lmr, tgt.addr, tgt.rkey, 8, why, sizeof(why)))
			goto fail;
	t_lat = (dr_rt_now_ns() - t0) / LAT_ITERS;
	memset(&m, 0, sizeof(m));
	m.type = SP_MSG_VERIFY;
	m.seed = seed;
	m.size = size;
	if (sp_link_call(&l, &m, SP_MSG_VERIFIED, why, sizeof(why)))
		goto fail;
	if (m.value >= 0) {
		snprintf(why, sizeof(why), "the server found byte %lld of its strixpeer buffer wrong",
			 (long long)m.value);
		goto fail;
	}
	dr_rt_fmt_rate(bw, sizeof(bw), size, t_write);
	pr_format_bytes(sz, sizeof(sz), size);
	r = dr_add(c, DR_C_RDMATEST, "peer", o->peer, DR_PASS,
		   "RDMA WRITE of %s from %s into a strixpeer buffer on %s: every byte verified there; %s, %.1f us per 8-byte write",
		   sz, ibv_get_device_name(l.ctl.rc.ctx->device), o->peer, bw, (double)t_lat / 1000.0);
	dr_int(r, "bytes", (int64_t)size);
	dr_int(r, "write_ns", (int64_t)t_write);
	dr_int(r, "latency_ns", (int64_t)t_lat);
	goto out;
fail:
	r = dr_add(c, DR_C_RDMATEST, "peer", o->peer, DR_FAIL, "%s", why);
	dr_advise(r, "run \"strixpeerctl doctor serve\" on %s (port %s), load rdma_ucm on both nodes, and check both nodes' doctor reports (MTU, ports, strixpeer)",
		  o->peer, o->port);
out:
	if (lmr)
		ibv_dereg_mr(lmr);
	free(host);
	if (connected)
		sp_link_close(&l);
}
