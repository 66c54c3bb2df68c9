// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor --rdma-test / --serve / --peer: the data path, end to
 * end. A strixpeer buffer registered with a plain ibv_reg_mr() is the
 * target of an RDMA WRITE through an RC queue pair: in loopback on each
 * ACTIVE port, between two ports, or from another node (--peer HOST
 * against "doctor --serve" there, connected with librdmacm: peertest.c).
 * Every byte is verified; bytes, bandwidth and latency are reported, never
 * judged. This file: the tests on this node (rtutil.c has the pieces both
 * share).
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
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor.h"
#include "../print.h"
#include "strixpeer.h"
#include "rdmatest.h"

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
	uint32_t seed = (uint32_t)dr_rt_now_ns();
	enum ibv_mtu mtu;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (same)
		snprintf(subj, sizeof(subj), "%s/%u loopback", src->dev, src->port);
	else
		snprintf(subj, sizeof(subj), "%s/%u->%s/%u", src->dev, src->port, dst->dev, dst->port);
	size = dr_rt_max_msg(size);
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
	dr_rt_fill(host, size, seed);
	lmr = ibv_reg_mr(a.pd, host, size, IBV_ACCESS_LOCAL_WRITE);
	if (!lmr) {
		snprintf(why, sizeof(why), "ibv_reg_mr of host memory on %s: %s", a.name, strerror(errno));
		goto fail;
	}
	mtu = a.mtu < b.mtu ? a.mtu : b.mtu;
	if (ep_connect(&a, &b, mtu, why, sizeof(why)) || ep_connect(&b, &a, mtu, why, sizeof(why)))
		goto fail;
	t0 = dr_rt_now_ns();
	if (dr_rt_write(a.qp, a.ch, a.cq, lmr, (uintptr_t)sp_buf_addr(buf), tmr->rkey, size,
		       why, sizeof(why)))
		goto fail;
	t_write = dr_rt_now_ns() - t0;
	bad = dr_rt_verify(sp_buf_addr(buf), size, seed);
	if (bad >= 0) {
		snprintf(why, sizeof(why), "the data arrived wrong: byte %" PRId64 " of the strixpeer buffer is 0x%02x, expected 0x%02x",
			 bad, ((uint8_t *)sp_buf_addr(buf))[bad], dr_rt_pattern(seed, (uint64_t)bad));
		goto fail;
	}
	/* latency: small writes, one at a time */
	t0 = dr_rt_now_ns();
	for (int i = 0; i < LAT_ITERS; i++)
		if (dr_rt_write(a.qp, a.ch, a.cq, lmr, (uintptr_t)sp_buf_addr(buf), tmr->rkey, 8,
			       why, sizeof(why)))
			goto fail;
	t_lat = (dr_rt_now_ns() - t0) / LAT_ITERS;
	dr_rt_fmt_rate(bw, sizeof(bw), size, t_write);
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
		dr_rt_peer_test(c, spdev, o);
	sp_dev_close(spdev);
}
