// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor --rdma-test / --serve / --peer: the data path, end to
 * end. A strixpeer buffer registered with a plain ibv_reg_mr() is the
 * target of an RDMA WRITE through an RC queue pair: in loopback on each
 * ACTIVE port, between two ports, or from another node (--peer HOST
 * against "doctor --serve" there, connected with librdmacm). Every byte is
 * verified; bytes, bandwidth and latency are reported, never judged.
 *
 * Completions are waited for through completion channels (no busy
 * polling), each wait bounded.
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

#define WAIT_MS		30000
#define LAT_ITERS	20
#define RT_MAGIC	0x53504454u	/* "SPDT" */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The test pattern: position- and seed-dependent, so misplaced bytes show. */
static uint8_t pattern(uint32_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)seed << 17);

	return (uint8_t)(x >> 56 ^ x >> 11 ^ i);
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(seed, i);
}

/* Offset of the first wrong byte, or -1 when all are right. */
static int64_t verify(const uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(seed, i))
			return (int64_t)i;
	return -1;
}

/* One completion on @cq (through @ch); its status, or -ETIMEDOUT/-EIO. */
static int wait_wc(struct ibv_comp_channel *ch, struct ibv_cq *cq, struct ibv_wc *wc)
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

/* --- loopback and port-to-port, on this node ------------------------------ */

struct ep {
	char name[96];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t port;
	bool ib;
	uint16_t lid;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static void ep_close(struct ep *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->ch)
		ibv_destroy_comp_channel(e->ch);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	memset(e, 0, sizeof(*e));
}

/* The GID to address this port by: RoCE v2 IPv4, then RoCE v2, then any. */
static int pick_gid(struct ep *e)
{
	struct ibv_gid_entry ents[64];
	ssize_t n = ibv_query_gid_table(e->ctx, ents, 64, 0);
	int best = -1, score = -1;

	for (ssize_t i = 0; i < n; i++) {
		static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		const uint8_t *raw = ents[i].gid.raw;
		int s;

		if (ents[i].port_num != e->port)
			continue;
		if (ents[i].gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(raw, v4, 12))
			s = 3;
		else if (ents[i].gid_type == IBV_GID_TYPE_ROCE_V2 && raw[0] != 0xfe)
			s = 2;
		else
			s = 1;
		if (s > score) {
			score = s;
			best = (int)ents[i].gid_index;
			e->gid = ents[i].gid;
		}
	}
	e->gid_index = best;
	return best < 0 ? -ENOENT : 0;
}

static int ep_open(struct ep *e, const char *dev, unsigned int port, char *why, size_t len)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_port_attr pa;

	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s/%u", dev, port);
	e->port = (uint8_t)port;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			e->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!e->ctx) {
		snprintf(why, len, "cannot open %s through libibverbs (%s; is its rdma-core provider installed?)",
			 dev, strerror(errno ? errno : ENODEV));
		return -1;
	}
	if (ibv_query_port(e->ctx, e->port, &pa)) {
		snprintf(why, len, "ibv_query_port %s: %s", e->name, strerror(errno));
		return -1;
	}
	e->ib = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
	e->lid = pa.lid;
	e->mtu = pa.active_mtu;
	if (!e->ib && pick_gid(e)) {
		snprintf(why, len, "%s has no GID to address it by (does its netdev have an IP address?)",
			 e->name);
		return -1;
	}
	e->pd = ibv_alloc_pd(e->ctx);
	e->ch = e->pd ? ibv_create_comp_channel(e->ctx) : NULL;
	e->cq = e->ch ? ibv_create_cq(e->ctx, 64, NULL, e->ch, 0) : NULL;
	if (!e->cq) {
		snprintf(why, len, "%s: creating PD/CQ: %s", e->name, strerror(errno));
		return -1;
	}
	qa.send_cq = e->cq;
	qa.recv_cq = e->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 32;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	e->qp = ibv_create_qp(e->pd, &qa);
	if (!e->qp) {
		snprintf(why, len, "%s: creating an RC QP: %s", e->name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Moves @e's QP to RTS, connected to @peer's QP. */
static int ep_connect(struct ep *e, const struct ep *peer, enum ibv_mtu mtu, char *why,
		      size_t len)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = e->port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0x1234;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = e->port;
	if (e->ib) {
		a.ah_attr.dlid = peer->lid;
	} else {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.sgid_index = (uint8_t)e->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x1234;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		goto fail;
	return 0;
fail:
	snprintf(why, len, "%s: connecting its QP to %s: %s", e->name, peer->name, strerror(errno));
	return -1;
}

/* One RDMA WRITE of @len bytes from @lmr into @raddr/@rkey; waits for it. */
static int rdma_write(struct ibv_qp *qp, struct ibv_comp_channel *ch, struct ibv_cq *cq,
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
	ret = wait_wc(ch, cq, &wc);
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

static size_t max_msg(size_t size)
{
	return size > (1U << 30) ? (1U << 30) : size;	/* one WR: < 2 GiB */
}

static void fmt_rate(char *out, size_t len, size_t bytes, uint64_t ns)
{
	snprintf(out, len, "%.1f MB/s", ns ? (double)bytes * 1000.0 / (double)ns : 0.0);
}

/* Writes into a strixpeer buffer registered on @dst from host memory on @src. */
static void run_pair(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_port *src,
		     const struct dr_port *dst, size_t size)
{
	char subj[200], why[256] = "", bw[32], sz[32];
	struct ep a, b;
	bool same = src == dst;
	struct ibv_mr *tmr = NULL, *lmr = NULL;
	struct sp_buf *buf = NULL;
	uint8_t *host = NULL;
	struct dr_result *r;
	uint64_t t0, t_write, t_lat = 0;
	int64_t bad;
	uint32_t seed = (uint32_t)now_ns();
	enum ibv_mtu mtu;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (same)
		snprintf(subj, sizeof(subj), "%s/%u loopback", src->dev, src->port);
	else
		snprintf(subj, sizeof(subj), "%s/%u->%s/%u", src->dev, src->port, dst->dev, dst->port);
	size = max_msg(size);
	if (ep_open(&a, src->dev, src->port, why, sizeof(why)) ||
	    ep_open(&b, dst->dev, dst->port, why, sizeof(why)))
		goto fail;
	if (sp_buf_alloc(spdev, size, SP_NODE_DEFAULT, 0, &buf) < 0) {
		snprintf(why, sizeof(why), "allocating a %zu-byte strixpeer buffer: %s", size, sp_errmsg());
		goto fail;
	}
	memset(sp_buf_addr(buf), 0, size);
	tmr = ibv_reg_mr(b.pd, sp_buf_addr(buf), size, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!tmr) {
		snprintf(why, sizeof(why), "ibv_reg_mr of the strixpeer buffer on %s: %s", b.name,
			 strerror(errno));
		goto fail;
	}
	host = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!host) {
		snprintf(why, sizeof(why), "no memory for the %zu-byte source buffer", size);
		goto fail;
	}
	fill(host, size, seed);
	lmr = ibv_reg_mr(a.pd, host, size, IBV_ACCESS_LOCAL_WRITE);
	if (!lmr) {
		snprintf(why, sizeof(why), "ibv_reg_mr of host memory on %s: %s", a.name, strerror(errno));
		goto fail;
	}
	mtu = a.mtu < b.mtu ? a.mtu : b.mtu;
	if (ep_connect(&a, &b, mtu, why, sizeof(why)) || ep_connect(&b, &a, mtu, why, sizeof(why)))
		goto fail;
	t0 = now_ns();
	if (rdma_write(a.qp, a.ch, a.cq, lmr, (uintptr_t)sp_buf_addr(buf), tmr->rkey, size,
		       why, sizeof(why)))
		goto fail;
	t_write = now_ns() - t0;
	bad = verify(sp_buf_addr(buf), size, seed);
	if (bad >= 0) {
		snprintf(why, sizeof(why), "the data arrived wrong: byte %" PRId64 " of the strixpeer buffer is 0x%02x, expected 0x%02x",
			 bad, ((uint8_t *)sp_buf_addr(buf))[bad], pattern(seed, (uint64_t)bad));
		goto fail;
	}
	/* latency: small writes, one at a time */
	t0 = now_ns();
	for (int i = 0; i < LAT_ITERS; i++)
		if (rdma_write(a.qp, a.ch, a.cq, lmr, (uintptr_t)sp_buf_addr(buf), tmr->rkey, 8,
			       why, sizeof(why)))
			goto fail;
	t_lat = (now_ns() - t0) / LAT_ITERS;
	fmt_rate(bw, sizeof(bw), size, t_write);
	pr_format_bytes(sz, sizeof(sz), size);
	r = dr_add(c, DR_C_RDMATEST, same ? "loopback" : "ports", subj, DR_PASS,
		   "RDMA WRITE of %s into a strixpeer buffer registered with ibv_reg_mr: every byte verified; %s, %.1f us per 8-byte write (path MTU %d)",
		   sz, bw, (double)t_lat / 1000.0, 128 << mtu);
	dr_int(r, "bytes", (int64_t)size);
	dr_int(r, "write_ns", (int64_t)t_write);
	dr_int(r, "latency_ns", (int64_t)t_lat);
	dr_int(r, "path_mtu", 128 << mtu);
	goto out;
fail:
	r = dr_add(c, DR_C_RDMATEST, same ? "loopback" : "ports", subj, DR_FAIL, "%s", why);
	dr_advise(r, "fix what the rdma, mtu and strixpeer checks report for these ports first; then see dmesg for the driver's messages");
out:
	if (lmr)
		ibv_dereg_mr(lmr);
	if (tmr)
		ibv_dereg_mr(tmr);
	free(host);
	if (buf)
		sp_buf_free(buf);
	ep_close(&a);
	ep_close(&b);
}

static void peer_test(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_rt_opts *o);

void dr_rdma_test(struct dr_ctx *c, const struct dr_rt_opts *o)
{
	const struct dr_port *active[64];
	struct sp_dev *spdev = NULL;
	struct dr_result *r;
	size_t n = 0;

	dr_scan_ports(c);
	if (!c->live) {
		dr_add(c, DR_C_RDMATEST, "loopback", "", DR_SKIP, "--rdma-test needs the live system (not under --sysroot)");
		return;
	}
	for (size_t i = 0; i < c->nports && n < 64; i++) {
		const struct dr_port *p = &c->ports[i];

		if (o->device && strcmp(o->device, p->dev))
			continue;
		if (p->state == 4)
			active[n++] = p;
	}
	if (sp_dev_open(NULL, &spdev) < 0) {
		r = dr_add(c, DR_C_RDMATEST, "loopback", "", DR_FAIL,
			   "no strixpeer buffer to write into: %s", sp_errmsg());
		dr_advise(r, "load strixpeer (modprobe strixpeer) and check the strixpeer results above");
		return;
	}
	if (!n && !o->peer) {
		r = dr_add(c, DR_C_RDMATEST, "loopback", o->device ? o->device : "", DR_FAIL,
			   "no ACTIVE RDMA port%s%s to test", o->device ? " on " : "",
			   o->device ? o->device : "");
		dr_advise(r, "bring a port up first (see the rdma results)");
	}
	for (size_t i = 0; i < n; i++)
		run_pair(c, spdev, active[i], active[i], o->size);
	/* between ports: each to the next, and back from the last to the first */
	for (size_t i = 0; n > 1 && i < n; i++) {
		if (n == 2 && i == 1)
			break;
		run_pair(c, spdev, active[i], active[(i + 1) % n], o->size);
	}
	if (o->peer)
		peer_test(c, spdev, o);
	sp_dev_close(spdev);
}

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
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *msg_mr;
	struct rt_msg msg[2];	/* [0] send, [1] receive */
	bool got_recv;		/* the receive completed while we waited for a send */
};

static int conn_setup(struct cm_conn *k, char *why, size_t len)
{
	struct ibv_qp_init_attr qa = { 0 };

	k->pd = ibv_alloc_pd(k->id->verbs);
	k->ch = k->pd ? ibv_create_comp_channel(k->id->verbs) : NULL;
	k->cq = k->ch ? ibv_create_cq(k->id->verbs, 16, NULL, k->ch, 0) : NULL;
	k->msg_mr = k->cq ? ibv_reg_mr(k->pd, k->msg, sizeof(k->msg), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!k->msg_mr) {
		snprintf(why, len, "PD/CQ/MR on %s: %s", ibv_get_device_name(k->id->verbs->device),
			 strerror(errno));
		return -1;
	}
	qa.send_cq = k->cq;
	qa.recv_cq = k->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 32;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(k->id, k->pd, &qa)) {
		snprintf(why, len, "rdma_create_qp: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void conn_free(struct cm_conn *k)
{
	if (k->id && k->id->qp)
		rdma_destroy_qp(k->id);
	if (k->msg_mr)
		ibv_dereg_mr(k->msg_mr);
	if (k->cq)
		ibv_destroy_cq(k->cq);
	if (k->ch)
		ibv_destroy_comp_channel(k->ch);
	if (k->pd)
		ibv_dealloc_pd(k->pd);
	k->msg_mr = NULL;
	k->cq = NULL;
	k->ch = NULL;
	k->pd = NULL;
}

static int post_recv(struct cm_conn *k)
{
	struct ibv_sge sge = { (uintptr_t)&k->msg[1], sizeof(k->msg[1]), k->msg_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(k->id->qp, &wr, &bad);
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
	if (ibv_post_send(k->id->qp, &wr, &bad))
		goto fail;
	/*
	 * The peer's answer may complete before our send's completion is
	 * seen (its packet can overtake the ACK of ours): keep it for
	 * wait_recv().
	 */
	for (;;) {
		if (wait_wc(k->ch, k->cq, &wc))
			goto fail;
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
		if (wait_wc(k->ch, k->cq, &wc)) {
			snprintf(why, len, "no message from the peer within %d s", WAIT_MS / 1000);
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
		fprintf(stderr, "doctor --serve: %s: not a doctor client (or size out of range): rejected\n", peer);
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
		mr = ibv_reg_mr(k.pd, sp_buf_addr(buf), hello.size,
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
		       verify(sp_buf_addr(buf), k.msg[1].len, k.msg[1].seed);
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
		printf("doctor --serve: %s: failed: %s\n", peer, why);
	else
		printf("doctor --serve: %s: %llu bytes RDMA-written into a strixpeer buffer, every byte verified\n",
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
		fprintf(stderr, "strixpeerctl doctor --serve: %s\n", sp_errmsg());
		return 2;
	}
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo(o->bind, o->port, &hints, &res)) {
		fprintf(stderr, "strixpeerctl doctor --serve: address %s port %s: %s\n",
			o->bind ? o->bind : "(any)", o->port, strerror(errno));
		goto out;
	}
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, res->ai_src_addr) || rdma_listen(listen_id, 4)) {
		fprintf(stderr, "strixpeerctl doctor --serve: listening on %s port %s: %s (is rdma_ucm loaded?)\n",
			o->bind ? o->bind : "(any)", o->port, strerror(errno));
		goto out;
	}
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("doctor --serve: listening on %s port %s%s\n", o->bind ? o->bind : "*", o->port,
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

static void peer_test(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_rt_opts *o)
{
	struct rdma_addrinfo hints = { 0 }, *res = NULL;
	struct rt_hello hello = { RT_MAGIC, 0, max_msg(o->size) };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { 0 };
	struct cm_conn k = { 0 };
	struct rt_target tgt = { 0 };
	struct rdma_cm_event *ev;
	struct ibv_mr *lmr = NULL;
	char why[256] = "", bw[32], sz[32];
	uint8_t *host = NULL;
	struct dr_result *r;
	uint32_t seed = (uint32_t)now_ns();
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
	fill(host, hello.size, seed);
	lmr = ibv_reg_mr(k.pd, host, hello.size, IBV_ACCESS_LOCAL_WRITE);
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
				 ": is \"strixpeerctl doctor --serve\" running on %s?", o->peer);
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
	t0 = now_ns();
	if (rdma_write(k.id->qp, k.ch, k.cq, lmr, tgt.addr, tgt.rkey, hello.size, why, sizeof(why)))
		goto fail;
	t_write = now_ns() - t0;
	t0 = now_ns();
	for (int i = 0; i < LAT_ITERS; i++)
		if (rdma_write(k.id->qp, k.ch, k.cq, lmr, tgt.addr, tgt.rkey, 8, why, sizeof(why)))
			goto fail;
	t_lat = (now_ns() - t0) / LAT_ITERS;
	k.msg[0] = (struct rt_msg){ RT_MAGIC, seed, hello.size, 0 };
	if (send_msg(&k, why, sizeof(why)) || wait_recv(&k, why, sizeof(why)))
		goto fail;
	if (k.msg[1].bad >= 0) {
		snprintf(why, sizeof(why), "the server found byte %lld of its strixpeer buffer wrong",
			 (long long)k.msg[1].bad);
		goto fail;
	}
	fmt_rate(bw, sizeof(bw), hello.size, t_write);
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
