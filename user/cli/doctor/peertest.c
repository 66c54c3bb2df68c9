// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor serve and doctor peer HOST: the data-path test between
 * two nodes. The client connects with librdmacm to "doctor serve" on
 * HOST, RDMA-WRITEs into a strixpeer buffer there and lets the server
 * verify every byte (rtutil.c has the shared pieces, rdmatest.h declares
 * them). Every wait is bounded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "doctor.h"
#include "../print.h"
#include "strixpeer.h"
#include "rdmatest.h"

/* --- between nodes: --serve and --peer, connected with librdmacm -------- */

struct rt_hello {	/* client -> server, in the connect's private data */
	uint32_t magic;
	uint32_t pad;
	uint64_t size;
};

struct rt_target {	/* server -> client, in the accept's private data */
	uint32_t magic;
	uint32_t rkey;
	uint64_t addr;
	uint64_t size;
	int32_t status;	/* 0, or -errno: no buffer */
	uint32_t pad;
};

struct rt_msg {		/* SEND both ways: "verify" and its answer */
	uint32_t magic;
	uint32_t seed;
	uint64_t len;
	int64_t bad;	/* answer: -1 all right, else the first wrong offset */
};

/*
 * The next event on @ch, which must be @want. A connection request that
 * arrives meanwhile (another client) is rejected: one client at a time.
 */
static int cm_wait(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
		   struct rdma_cm_event **evp, int timeout_ms, char *why, size_t len)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int n;

	for (;;) {
		n = poll(&pfd, 1, timeout_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, len, "no %s within %d s", rdma_event_str(want), timeout_ms / 1000);
			return -1;
		}
		if (rdma_get_cm_event(ch, &ev)) {
			snprintf(why, len, "rdma_get_cm_event: %s", strerror(errno));
			return -1;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && want != ev->event) {
			struct rdma_cm_id *other = ev->id;

			rdma_reject(other, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(other);
			continue;
		}
		break;
	}
	if (ev->event != want) {
		snprintf(why, len, "expected %s, got %s (status %d)", rdma_event_str(want),
			 rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (evp)
		*evp = ev;
	else
		rdma_ack_cm_event(ev);
	return 0;
}

struct cm_conn {
	struct rdma_cm_id *id;
	struct sp_rc rc;	/* rdma/rc.h's PD, channel, CQ and QP on @id */
	struct ibv_mr *msg_mr;
	struct rt_msg msg[2];	/* [0] send, [1] receive */
	bool got_recv;		/* the receive completed while we waited for a send */
};

static int conn_setup(struct cm_conn *k, char *why, size_t len)
{
	const struct ibv_qp_cap cap = {
		.max_send_wr = 32, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1,
	};

	if (sp_rc_cm_setup(&k->rc, k->id, 16, &cap, 0, why, len))
		return -1;
	k->msg_mr = ibv_reg_mr(k->rc.pd, k->msg, sizeof(k->msg), IBV_ACCESS_LOCAL_WRITE);
	if (!k->msg_mr) {
		snprintf(why, len, "registering the message buffer on %s: %s", k->rc.name,
			 strerror(errno));
		return -1;
	}
	return 0;
}

static void conn_free(struct cm_conn *k)
{
	if (k->msg_mr)
		ibv_dereg_mr(k->msg_mr);
	k->msg_mr = NULL;
	sp_rc_close(&k->rc);
}

static int post_recv(struct cm_conn *k)
{
	struct ibv_sge sge = { (uintptr_t)&k->msg[1], sizeof(k->msg[1]), k->msg_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(k->rc.qp, &wr, &bad);
}

static int send_msg(struct cm_conn *k, char *why, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)&k->msg[0], sizeof(k->msg[0]), k->msg_mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;

	wr.wr_id = 3;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(k->rc.qp, &wr, &bad))
		goto fail;
	/*
	 * The peer's answer may complete before our send's completion is
	 * seen (its packet can overtake the ACK of ours): keep it for
	 * wait_recv().
	 */
	for (;;) {
		if (sp_rc_wait(&k->rc, &wc, WAIT_MS, why, len))
			return -1;
		if (wc.opcode == IBV_WC_RECV && wc.status == IBV_WC_SUCCESS) {
			k->got_recv = true;
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS)
			goto fail;
		if (wc.wr_id == 3)
			return 0;
	}
fail:
	snprintf(why, len, "sending the verify message failed");
	return -1;
}

/* The receive posted by post_recv(); other completions (sends) are skipped. */
static int wait_recv(struct cm_conn *k, char *why, size_t len)
{
	struct ibv_wc wc;

	if (k->got_recv)
		return k->msg[1].magic == RT_MAGIC ? 0 : -1;
	for (int i = 0; i < 64; i++) {
		if (sp_rc_wait(&k->rc, &wc, WAIT_MS, why, len)) {
			snprintf(why + strlen(why), len - strlen(why), ": no message from the peer");
			return -1;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			snprintf(why, len, "receive completed with %s", ibv_wc_status_str(wc.status));
			return -1;
		}
		if (wc.opcode == IBV_WC_RECV)
			return k->msg[1].magic == RT_MAGIC ? 0 : -1;
	}
	return -1;
}

static volatile sig_atomic_t serve_stop;

static void on_signal(int sig)
{
	(void)sig;
	serve_stop = 1;
}

/* One client: a strixpeer buffer for it, then verify what it wrote. */
static int serve_one(struct rdma_event_channel *ch, struct rdma_cm_event *req,
		     const struct dr_rt_opts *o, struct sp_dev *spdev)
{
	struct rt_hello hello = { 0 };
	struct rt_target tgt = { RT_MAGIC, 0, 0, 0, 0, 0 };
	struct rdma_conn_param cp = { 0 };
	struct cm_conn k = { .id = req->id };
	struct sp_buf *buf = NULL;
	struct ibv_mr *mr = NULL;
	char why[256] = "", peer[64] = "?";
	struct sockaddr *sa = rdma_get_peer_addr(k.id);
	int ok = -1;

	(void)o;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, peer, sizeof(peer));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, peer, sizeof(peer));
	if (req->param.conn.private_data_len >= sizeof(hello))
		memcpy(&hello, req->param.conn.private_data, sizeof(hello));
	rdma_ack_cm_event(req);
	if (hello.magic != RT_MAGIC || !hello.size || hello.size > (1ULL << 30)) {
		fprintf(stderr, "doctor serve: %s: not a doctor client (or size out of range): rejected\n", peer);
		rdma_reject(k.id, NULL, 0);
		rdma_destroy_id(k.id);
		return -1;
	}
	if (conn_setup(&k, why, sizeof(why)))
		goto reject;
	if (sp_buf_alloc(spdev, hello.size, SP_NODE_DEFAULT, 0, &buf) < 0) {
		snprintf(why, sizeof(why), "strixpeer buffer of %llu bytes: %s",
			 (unsigned long long)hello.size, sp_errmsg());
		tgt.status = -ENOMEM;
	} else {
		memset(sp_buf_addr(buf), 0, sp_buf_size(buf));
		mr = ibv_reg_mr(k.rc.pd, sp_buf_addr(buf), hello.size,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr) {
			snprintf(why, sizeof(why), "ibv_reg_mr of the strixpeer buffer: %s", strerror(errno));
			tgt.status = -errno;
		} else {
			tgt.addr = (uintptr_t)sp_buf_addr(buf);
			tgt.rkey = mr->rkey;
			tgt.size = hello.size;
		}
	}
	if (post_recv(&k)) {
		snprintf(why, sizeof(why), "ibv_post_recv: %s", strerror(errno));
		goto reject;
	}
	cp.private_data = &tgt;
	cp.private_data_len = sizeof(tgt);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	if (rdma_accept(k.id, &cp)) {
		snprintf(why, sizeof(why), "rdma_accept: %s", strerror(errno));
		goto out;
	}
	if (cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED, NULL, WAIT_MS, why, sizeof(why)))
		goto out;
	if (tgt.status)
		goto out;
	if (wait_recv(&k, why, sizeof(why)))
		goto out;
	k.msg[0] = k.msg[1];
	k.msg[0].bad = k.msg[1].len > tgt.size ? 0 :
		       sp_rc_verify(sp_buf_addr(buf), k.msg[1].len, 0, k.msg[1].seed);
	if (send_msg(&k, why, sizeof(why)))
		goto out;
	ok = k.msg[0].bad < 0 ? 0 : -1;
	if (ok)
		snprintf(why, sizeof(why), "byte %lld arrived wrong", (long long)k.msg[0].bad);
	cm_wait(ch, RDMA_CM_EVENT_DISCONNECTED, NULL, WAIT_MS, why, sizeof(why));
	goto out;
reject:
	rdma_reject(k.id, NULL, 0);
out:
	if (ok)
		printf("doctor serve: %s: failed: %s\n", peer, why);
	else
		printf("doctor serve: %s: %llu bytes RDMA-written into a strixpeer buffer, every byte verified\n",
		       peer, (unsigned long long)k.msg[1].len);
	fflush(stdout);
	if (mr)
		ibv_dereg_mr(mr);
	if (buf)
		sp_buf_free(buf);
	rdma_disconnect(k.id);
	conn_free(&k);
	rdma_destroy_id(k.id);
	return ok;
}

int dr_serve(const struct dr_rt_opts *o)
{
	struct rdma_addrinfo hints = { 0 }, *res = NULL;
	struct rdma_event_channel *ch = NULL;
	struct rdma_cm_id *listen_id = NULL;
	struct sp_dev *spdev = NULL;
	struct sigaction sa = { 0 };
	int ret = 1, served = 0, failed = 0;

	if (sp_dev_open(NULL, &spdev) < 0) {
		fprintf(stderr, "strixpeerctl doctor serve: %s\n", sp_errmsg());
		return 2;
	}
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo(o->bind, o->port, &hints, &res)) {
		fprintf(stderr, "strixpeerctl doctor serve: address %s port %s: %s\n",
			o->bind ? o->bind : "(any)", o->port, strerror(errno));
		goto out;
	}
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, res->ai_src_addr) || rdma_listen(listen_id, 4)) {
		fprintf(stderr, "strixpeerctl doctor serve: listening on %s port %s: %s (is rdma_ucm loaded?)\n",
			o->bind ? o->bind : "(any)", o->port, strerror(errno));
		goto out;
	}
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("doctor serve: listening on %s port %s%s\n", o->bind ? o->bind : "*", o->port,
	       o->once ? " for one client" : "");
	fflush(stdout);
	while (!serve_stop) {
		struct rdma_cm_event *ev;
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int n = poll(&pfd, 1, 500);

		if (n <= 0)
			continue;
		if (rdma_get_cm_event(ch, &ev))
			break;
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		served++;
		failed += serve_one(ch, ev, o, spdev) != 0;
		if (o->once)
			break;
	}
	ret = failed ? 1 : 0;
out:
	if (listen_id)
		rdma_destroy_id(listen_id);
	if (ch)
		rdma_destroy_event_channel(ch);
	if (res)
		rdma_freeaddrinfo(res);
	sp_dev_close(spdev);
	(void)served;
	return ret;
}

void dr_rt_peer_test(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_rt_opts *o)
{
	struct rdma_addrinfo hints = { 0 }, *res = NULL;
	struct rt_hello hello = { RT_MAGIC, 0, dr_rt_max_msg(o->size) };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { 0 };
	struct cm_conn k = { 0 };
	struct rt_target tgt = { 0 };
	struct rdma_cm_event *ev;
	struct ibv_mr *lmr = NULL;
	char why[256] = "", bw[32], sz[32];
	uint8_t *host = NULL;
	struct dr_result *r;
	uint32_t seed = (uint32_t)dr_rt_now_ns();
	uint64_t t0, t_write, t_lat;
	bool connected = false;

	(void)spdev;
	hints.ai_port_space = RDMA_PS_TCP;
	if (!ch || rdma_getaddrinfo(o->peer, o->port, &hints, &res)) {
		snprintf(why, sizeof(why), "resolving %s port %s: %s", o->peer, o->port,
			 strerror(errno));
		goto fail;
	}
	if (rdma_create_id(ch, &k.id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(k.id, res->ai_src_addr, res->ai_dst_addr, 5000)) {
		snprintf(why, sizeof(why), "rdma_resolve_addr %s: %s (is rdma_ucm loaded?)", o->peer,
			 strerror(errno));
		goto fail;
	}
	if (cm_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL, 10000, why, sizeof(why)) ||
	    rdma_resolve_route(k.id, 5000) ||
	    cm_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, 10000, why, sizeof(why)))
		goto fail;
	if (conn_setup(&k, why, sizeof(why)))
		goto fail;
	host = aligned_alloc(4096, (hello.size + 4095) & ~(size_t)4095);
	if (!host) {
		snprintf(why, sizeof(why), "no memory for %llu bytes", (unsigned long long)hello.size);
		goto fail;
	}
	sp_rc_fill(host, hello.size, 0, seed);
	lmr = ibv_reg_mr(k.rc.pd, host, hello.size, IBV_ACCESS_LOCAL_WRITE);
	if (!lmr || post_recv(&k)) {
		snprintf(why, sizeof(why), "registering the source buffer: %s", strerror(errno));
		goto fail;
	}
	cp.private_data = &hello;
	cp.private_data_len = sizeof(hello);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(k.id, &cp)) {
		snprintf(why, sizeof(why), "rdma_connect: %s", strerror(errno));
		goto fail;
	}
	if (cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED, &ev, WAIT_MS, why, sizeof(why))) {
		if (strstr(why, "REJECTED") || strstr(why, "UNREACHABLE"))
			snprintf(why + strlen(why), sizeof(why) - strlen(why),
				 ": is \"strixpeerctl doctor --serve\" of this version running on %s?", o->peer);
		goto fail;
	}
	connected = true;
	if (ev->param.conn.private_data_len >= sizeof(tgt))
		memcpy(&tgt, ev->param.conn.private_data, sizeof(tgt));
	rdma_ack_cm_event(ev);
	if (tgt.magic != RT_MAGIC || tgt.status || tgt.size < hello.size) {
		snprintf(why, sizeof(why), "the server has no strixpeer buffer for us (%s)",
			 tgt.status ? strerror(-tgt.status) : "bad answer");
		goto fail;
	}
	t0 = dr_rt_now_ns();
	if (dr_rt_write(&k.rc, lmr, tgt.addr, tgt.rkey, hello.size, why, sizeof(why)))
		goto fail;
	t_write = dr_rt_now_ns() - t0;
	t0 = dr_rt_now_ns();
	for (int i = 0; i < LAT_ITERS; i++)
		if (dr_rt_write(&k.rc, lmr, tgt.addr, tgt.rkey, 8, why, sizeof(why)))
			goto fail;
	t_lat = (dr_rt_now_ns() - t0) / LAT_ITERS;
	k.msg[0] = (struct rt_msg){ RT_MAGIC, seed, hello.size, 0 };
	if (send_msg(&k, why, sizeof(why)) || wait_recv(&k, why, sizeof(why)))
		goto fail;
	if (k.msg[1].bad >= 0) {
		snprintf(why, sizeof(why), "the server found byte %lld of its strixpeer buffer wrong",
			 (long long)k.msg[1].bad);
		goto fail;
	}
	dr_rt_fmt_rate(bw, sizeof(bw), hello.size, t_write);
	pr_format_bytes(sz, sizeof(sz), hello.size);
	r = dr_add(c, DR_C_RDMATEST, "peer", o->peer, DR_PASS,
		   "RDMA WRITE of %s from %s into a strixpeer buffer on %s: every byte verified there; %s, %.1f us per 8-byte write",
		   sz, ibv_get_device_name(k.id->verbs->device), o->peer, bw, (double)t_lat / 1000.0);
	dr_int(r, "bytes", (int64_t)hello.size);
	dr_int(r, "write_ns", (int64_t)t_write);
	dr_int(r, "latency_ns", (int64_t)t_lat);
	goto out;
fail:
	r = dr_add(c, DR_C_RDMATEST, "peer", o->peer, DR_FAIL, "%s", why);
	dr_advise(r, "run \"strixpeerctl doctor --serve\" on %s, load rdma_ucm on both nodes, and check both nodes' doctor reports (MTU, ports, strixpeer)",
		  o->peer);
out:
	if (connected) {
		rdma_disconnect(k.id);
		cm_wait(ch, RDMA_CM_EVENT_DISCONNECTED, NULL, 5000, why, sizeof(why));
	}
	if (lmr)
		ibv_dereg_mr(lmr);
	free(host);
	conn_free(&k);
	if (k.id)
		rdma_destroy_id(k.id);
	if (res)
		rdma_freeaddrinfo(res);
	if (ch)
		rdma_destroy_event_channel(ch);
}
