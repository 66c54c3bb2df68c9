// SPDX-License-Identifier: MIT
/*
 * One RC queue pair's bring-up, waits and data pattern (rc.h): verbs only,
 * no librdmacm (rc_cm.c has the librdmacm part).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rc.h"

static int neg(int err)
{
	return err > 0 ? -err : -EIO;
}

/* The GID to address @e's port by: RoCE v2 IPv4, then RoCE v2, then any. */
static int pick_gid(struct sp_rc *e)
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct ibv_gid_entry ents[64];
	ssize_t n = ibv_query_gid_table(e->ctx, ents, 64, 0);
	int score = -1;

	e->gid_index = -1;
	for (ssize_t i = 0; i < n; i++) {
		const uint8_t *raw = ents[i].gid.raw;
		bool v2 = ents[i].gid_type == IBV_GID_TYPE_ROCE_V2;
		int s;

		if (ents[i].port_num != e->port)
			continue;
		if (v2 && !memcmp(raw, v4, 12))
			s = 3;
		else if (v2 && raw[0] != 0xfe)
			s = 2;
		else
			s = 1;
		if (s > score) {
			score = s;
			e->gid_index = (int)ents[i].gid_index;
			e->gid = ents[i].gid;
			e->gid_v4 = s == 3;
		}
	}
	return e->gid_index < 0 ? -ENOENT : 0;
}

int sp_rc_open(struct sp_rc *e, const char *dev, unsigned int port, int cqe,
	       const struct ibv_qp_cap *cap, unsigned int flags, char *why, size_t len)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int err;

	memset(e, 0, sizeof(*e));
	errno = 0;
	list = ibv_get_device_list(NULL);
	snprintf(e->name, sizeof(e->name), "%s/%u", dev, port);
	e->port = (uint8_t)port;
	e->cap = *cap;
	for (int i = 0; list && list[i] && !e->ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			e->ctx = ibv_open_device(list[i]);
	err = errno;
	if (list)
		ibv_free_device_list(list);
	if (!e->ctx) {
		snprintf(why, len, "cannot open %s through libibverbs (%s; is its rdma-core provider installed?)",
			 dev, strerror(err ? err : ENODEV));
		return -ENODEV;
	}
	if (ibv_query_port(e->ctx, e->port, &pa)) {
		err = neg(errno);
		snprintf(why, len, "ibv_query_port %s: %s", e->name, strerror(-err));
		goto out;
	}
	e->ib = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
	e->lid = pa.lid;
	e->mtu = pa.active_mtu;
	if (!e->ib && pick_gid(e)) {
		err = -ENOENT;
		snprintf(why, len, "%s has no GID to address it by (does its netdev have an IP address?)",
			 e->name);
		goto out;
	}
	err = sp_rc_pd_cq(e, cqe, flags, why, len);
	if (err)
		goto out;
	if (flags & SP_RC_NO_QP)
		return 0;
	err = sp_rc_qp_create(e, why, len);
	if (!err)
		return 0;
out:
	sp_rc_close(e);
	return err;
}

int sp_rc_pd_cq(struct sp_rc *e, int cqe, unsigned int flags, char *why, size_t len)
{
	e->pd = ibv_alloc_pd(e->ctx);
	if (e->pd && !(flags & SP_RC_POLLED))
		e->ch = ibv_create_comp_channel(e->ctx);
	if (e->pd && (e->ch || (flags & SP_RC_POLLED)))
		e->cq = ibv_create_cq(e->ctx, cqe, NULL, e->ch, 0);
	if (!e->cq) {
		int err = neg(errno);

		snprintf(why, len, "%s: creating PD/CQ: %s", e->name, strerror(-err));
		return err;
	}
	return 0;
}

int sp_rc_qp_create(struct sp_rc *e, char *why, size_t len)
{
	struct ibv_qp_init_attr qa;

	if (e->qp && ibv_destroy_qp(e->qp)) {
		snprintf(why, len, "%s: destroying its QP: %s", e->name, strerror(errno));
		return neg(errno);
	}
	e->qp = NULL;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = e->cq;
	qa.recv_cq = e->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap = e->cap;
	e->qp = ibv_create_qp(e->pd, &qa);
	if (!e->qp) {
		int err = neg(errno);

		snprintf(why, len, "%s: creating an RC QP: %s", e->name, strerror(-err));
		return err;
	}
	return 0;
}

void sp_rc_close(struct sp_rc *e)
{
	if (e->qp_destroy)
		e->qp_destroy(e);
	else if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->ch)
		ibv_destroy_comp_channel(e->ch);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx && !e->cm_id)
		ibv_close_device(e->ctx);
	memset(e, 0, sizeof(*e));
}

void sp_rc_local_addr(const struct sp_rc *e, uint32_t psn, struct sp_rc_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->qpn = e->qp->qp_num;
	a->psn = psn & 0xffffff;
	a->lid = e->lid;
	a->gid = e->gid;
}

int sp_rc_connect(struct sp_rc *e, uint32_t my_psn, const struct sp_rc_addr *peer,
		  const struct sp_rc_path *p, char *why, size_t len)
{
	static const struct sp_rc_path def = SP_RC_PATH_DEFAULT;
	struct ibv_qp_attr a;
	const char *step;

	if (!p)
		p = &def;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = e->port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	step = "INIT";
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = p->mtu ? p->mtu : e->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = p->rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = e->port;
	if (e->ib) {
		a.ah_attr.dlid = peer->lid;
	} else {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.sgid_index = (uint8_t)e->gid_index;
		a.ah_attr.grh.hop_limit = p->hop_limit;
	}
	step = "RTR";
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = p->timeout;
	a.retry_cnt = p->retry_cnt;
	a.rnr_retry = p->rnr_retry;
	a.sq_psn = my_psn & 0xffffff;
	a.max_rd_atomic = p->rd_atomic;
	step = "RTS";
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		goto fail;
	return 0;
fail:
	{
		int err = neg(errno);

		snprintf(why, len, "%s: moving its QP (qpn %u) to %s for qpn %u: %s", e->name,
			 e->qp->qp_num, step, peer->qpn, strerror(-err));
		return err;
	}
}

int sp_rc_reset(struct sp_rc *e)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	return ibv_modify_qp(e->qp, &a, IBV_QP_STATE) ? -errno : 0;
}

enum ibv_qp_state sp_rc_qp_state(const struct sp_rc *e)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0, sizeof(a));
	if (!e->qp || ibv_query_qp(e->qp, &a, IBV_QP_STATE, &ia))
		return IBV_QPS_UNKNOWN;
	return a.qp_state;
}

const char *sp_rc_qp_state_str(enum ibv_qp_state s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS", [IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "unknown";
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int sp_rc_wait(struct sp_rc *e, struct ibv_wc *wc, int timeout_ms, char *why, size_t len)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	for (;;) {
		struct pollfd pfd = { .fd = e->ch ? e->ch->fd : -1, .events = POLLIN };
		uint64_t now;
		int n;

		if (e->ch && ibv_req_notify_cq(e->cq, 0))
			goto cq_failed;
		n = ibv_poll_cq(e->cq, 1, wc);
		if (n < 0)
			goto cq_failed;
		if (n == 1)
			return 0;
		now = now_ms();
		if (now >= deadline) {
			enum ibv_qp_state s = sp_rc_qp_state(e);

			snprintf(why, len, "%s: no completion in %d ms (QP %u in state %s)",
				 e->name, timeout_ms, e->qp ? e->qp->qp_num : 0,
				 sp_rc_qp_state_str(s));
			return -ETIMEDOUT;
		}
		if (!e->ch)
			continue;
		n = poll(&pfd, 1, (int)(deadline - now < 200 ? deadline - now : 200));
		if (n < 0 && errno != EINTR) {
			snprintf(why, len, "%s: waiting for a completion: %s", e->name, strerror(errno));
			return -errno;
		}
		if (n > 0) {
			struct ibv_cq *ev_cq;
			void *ev_ctx;

			if (ibv_get_cq_event(e->ch, &ev_cq, &ev_ctx) == 0)
				ibv_ack_cq_events(ev_cq, 1);
		}
	}
cq_failed:
	snprintf(why, len, "%s: its completion queue failed", e->name);
	return -EIO;
}

int sp_rc_post(struct sp_rc *e, enum ibv_wr_opcode op, const struct ibv_sge *sge,
	       uint64_t raddr, uint32_t rkey, uint64_t wr_id, unsigned int send_flags,
	       char *why, size_t wlen)
{
	struct ibv_sge one = *sge;
	struct ibv_send_wr wr, *bad;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &one;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = send_flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ret = ibv_post_send(e->qp, &wr, &bad);
	if (ret) {
		snprintf(why, wlen, "%s: ibv_post_send: %s", e->name, strerror(ret));
		return -ret;
	}
	return 0;
}

static const char *op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
		return "RDMA WRITE";
	case IBV_WR_RDMA_READ:
		return "RDMA READ";
	case IBV_WR_SEND:
		return "SEND";
	default:
		return "operation";
	}
}

int sp_rc_rdma(struct sp_rc *e, enum ibv_wr_opcode op, struct ibv_mr *lmr, uint64_t loff,
	       uint64_t raddr, uint32_t rkey, uint32_t len, int timeout_ms, char *why,
	       size_t wlen)
{
	struct ibv_sge sge = { (uintptr_t)lmr->addr + loff, len, lmr->lkey };
	struct ibv_wc wc;
	int ret = sp_rc_post(e, op, &sge, raddr, rkey, 1, IBV_SEND_SIGNALED, why, wlen);

	if (!ret)
		ret = sp_rc_wait(e, &wc, timeout_ms, why, wlen);
	if (ret)
		return ret;
	if (wc.status != IBV_WC_SUCCESS) {
		snprintf(why, wlen, "the %s completed with %s", op_name(op),
			 ibv_wc_status_str(wc.status));
		return -EIO;
	}
	return 0;
}

uint8_t sp_rc_pattern(uint64_t pos, uint32_t seed)
{
	/* splitmix64's finaliser over position and seed */
	uint64_t x = (pos + 1) * 0x9E3779B97F4A7C15ULL + ((uint64_t)seed + 1) * 0xD1B54A32D192ED03ULL;

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return (uint8_t)(x ^ (x >> 31));
}

void sp_rc_fill(void *p, uint64_t len, uint64_t pos, uint32_t seed)
{
	uint8_t *b = p;

	for (uint64_t i = 0; i < len; i++)
		b[i] = sp_rc_pattern(pos + i, seed);
}

int64_t sp_rc_verify(const void *p, uint64_t len, uint64_t pos, uint32_t seed)
{
	const uint8_t *b = p;

	for (uint64_t i = 0; i < len; i++)
		if (b[i] != sp_rc_pattern(pos + i, seed))
			return (int64_t)i;
	return -1;
}
