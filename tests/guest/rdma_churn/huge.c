// SPDX-License-Identifier: MIT
/* rdma_churn: a WRITE beyond a 4097-byte MR on a 2 MiB page (issue 22) */
#include "rdma_churn.h"

/*
 * Issue 22's sequence, on rxe0 -> rxe1 with the responder's buffers on
 * node 1: a 6 MiB buffer allocated, registered, written into (64 KiB,
 * verified) and freed; then a 4097-byte buffer allocated with
 * SP_ALLOC_HUGE_ONLY | SP_ALLOC_UNMAPPED (one 2 MiB page), mapped with
 * sp_buf_map(), every 4 KiB page touched (on 6.15+ the first touch
 * PMD-maps the folio), checked physically (512 consecutive frames from a
 * 2 MiB-aligned one, on node 1) and registered; then 2,097,151 bytes are
 * RDMA-written into it. The MR's length takes turns:
 *
 *  - sp_buf_size() (2 MiB): the WRITE lies inside the MR; it completes,
 *    every byte arrives, both QPs stay in RTS;
 *  - the 4097 bytes asked for: a 4097-byte WRITE completes, and the
 *    2,097,151-byte one is a remote access error (rxe_resp.c check_rkey():
 *    mr_check_range() of the whole RETH length on the first packet); the
 *    responder NAKs it and goes to ERR, the requester completes it with
 *    IBV_WC_REM_ACCESS_ERR and goes to ERR too.
 *
 * Issue 22's symptom - requester RTS with no completion, responder ERR,
 * nothing in dmesg - is the second case when rxe loses the NAK. rxe drops
 * it (6.12 and 7.2 alike): when the retry timer (timeout 14: 67 ms) fires
 * before the NAK is in, req_retry() (rxe_req.c) puts the WRITE's WQE back
 * to wqe_state_posted, and when the requester is then held back by
 * RXE_INFLIGHT_SKBS_PER_QP_HIGH (64 of its skbs not yet received: a busy
 * guest) the WQE stays "posted"; a NAK handled by the completer meanwhile
 * is freed unread (rxe_comp.c get_wqe(): "no WQE or requester has not
 * started it yet" -> COMPST_DONE). The responder, in ERR, drops every
 * retransmission; retry_cnt 7 is never counted down (rxe_comp.c
 * "if (qp->comp.retry_cnt != 7)"), so the WRITE never completes. Only an
 * error NAK matters: a lost ACK is recovered by the retransmission.
 * SP_HUGE_SHAPE=1 (a diagnostic, not in the suite) makes this certain with
 * tc (huge_shape()): the WRITE beyond the MR then ends with
 * IBV_WC_RETRY_EXC_ERR (retry_cnt 6) or never (7), rxe1 having sent one
 * packet (the NAK) and rxe0 having received it; SP_HUGE_SHAPE=nak delays
 * only the NAK, the requester is not held back, and the NAK is honoured.
 *
 * So the requester here connects with retry_cnt 6, not rdma_pair's 7: when
 * rxe loses the NAK, the WRITE ends as IBV_WC_RETRY_EXC_ERR within seconds.
 * That outcome is accepted (and counted: "NAKs lost by rxe") only when the
 * counters show the NAK went out of rxe1 and into rxe0 during the WRITE;
 * anything else - success, another status, no completion, a QP not in ERR
 * - fails with both QPs, CQs, counters and packet counts shown. strixpeer
 * plays no part: inside the MR every byte arrives through the PMD-mapped
 * page. SP_HUGE_ITERS=N runs N iterations (default 4, 2 on debug kernels;
 * each of the two MR lengths half of them); SP_HUGE_RETRY_CNT=7 connects
 * as the report did, SP_HUGE_TIMEOUT sets the ACK timeout (14).
 */
#define HUGE_WRITE	2097151U	/* 2 MiB - 1 */
#define HUGE_ASKED	4097
#define HUGE_RETRY_CNT	6

/* Post one signaled WRITE. */
static void write_post(struct churn *c, struct ibv_mr *lmr, uint64_t id, void *raddr,
		       uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)lmr->addr, .length = len, .lkey = lmr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;

	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK_OK(ibv_post_send(c->ini.qp, &wr, &bad));
}

/* Post one signaled WRITE and wait for its completion (0: none in time). */
static int write_wait(struct churn *c, struct ibv_mr *lmr, uint64_t id, void *raddr, uint32_t rkey,
		      uint32_t len, struct ibv_wc *wc)
{
	write_post(c, lmr, id, raddr, rkey, len);
	return wait_wc(c, &c->ini, wc);
}

/* A WRITE that must succeed: 0 when it did and every byte arrived. */
static int write_ok(struct churn *c, unsigned int it, struct ibv_mr *lmr, void *raddr,
		    uint32_t rkey, uint32_t len, uint32_t seed, const char *what)
{
	struct ibv_wc wc;
	char why[256];
	int64_t wrong;

	sp_fill(lmr->addr, len, 0, seed);
	if (!write_wait(c, lmr, it, raddr, rkey, len, &wc))
		snprintf(why, sizeof(why), "%s: WRITE of %u bytes not complete after %u ms", what,
			 len, c->wait_ms);
	else if (wc.status != IBV_WC_SUCCESS)
		snprintf(why, sizeof(why), "%s: WRITE of %u bytes: completion %s", what, len,
			 ibv_wc_status_str(wc.status));
	else if ((wrong = sp_verify(raddr, len, 0, seed)) >= 0)
		snprintf(why, sizeof(why), "%s: WRITE of %u bytes completed, byte %lld wrong", what,
			 len, (long long)wrong);
	else if (sp_rc_qp_state(&c->ini) != IBV_QPS_RTS || sp_rc_qp_state(&c->tgt) != IBV_QPS_RTS)
		snprintf(why, sizeof(why), "%s: after the WRITE: QPs %s/%s", what,
			 sp_rc_qp_state_str(sp_rc_qp_state(&c->ini)), sp_rc_qp_state_str(sp_rc_qp_state(&c->tgt)));
	else
		return 0;
	report(c, it, why);
	return -1;
}

/* 2 MiB of @addr: 512 consecutive frames from a 2 MiB-aligned one? */
static int one_folio(const uint8_t *addr, char *why, size_t whylen)
{
	uint64_t pfn0 = sp_pfn(addr);

	if (!pfn0 || pfn0 % (HUGE_SZ / 4096)) {
		snprintf(why, whylen, "first frame 0x%llx: not a 2 MiB page", (unsigned long long)pfn0);
		return 0;
	}
	for (uint64_t i = 1; i < HUGE_SZ / 4096; i++)
		if (sp_pfn(addr + i * 4096) != pfn0 + i) {
			snprintf(why, whylen, "page %llu at frame 0x%llx, not 0x%llx",
				 (unsigned long long)i, (unsigned long long)sp_pfn(addr + i * 4096),
				 (unsigned long long)(pfn0 + i));
			return 0;
		}
	return 1;
}

/* One of rxe's hw_counters (0 when absent). */
static uint64_t rxe_counter(const struct sp_rc *n, const char *name)
{
	char path[160];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
		 n->ctx->device->name, name);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* What both devices sent and received during one WRITE. */
struct wire {
	uint64_t ini_sent, ini_rcvd, ini_retry, tgt_sent, tgt_rcvd;
};

static struct wire wire_now(struct churn *c)
{
	return (struct wire){
		.ini_sent = rxe_counter(&c->ini, "sent_pkts"),
		.ini_rcvd = rxe_counter(&c->ini, "rcvd_pkts"),
		.ini_retry = rxe_counter(&c->ini, "completer_retry_err"),
		.tgt_sent = rxe_counter(&c->tgt, "sent_pkts"),
		.tgt_rcvd = rxe_counter(&c->tgt, "rcvd_pkts"),
	};
}

static void wire_diag(struct churn *c, const struct wire *w0)
{
	struct wire w = wire_now(c);

	tap_diag("  during the WRITE: %s sent %llu packets, received %llu (retries %llu); "
		 "%s received %llu, sent %llu", c->ini.name,
		 (unsigned long long)(w.ini_sent - w0->ini_sent),
		 (unsigned long long)(w.ini_rcvd - w0->ini_rcvd),
		 (unsigned long long)(w.ini_retry - w0->ini_retry), c->tgt.name,
		 (unsigned long long)(w.tgt_rcvd - w0->tgt_rcvd),
		 (unsigned long long)(w.tgt_sent - w0->tgt_sent));
}

/*
 * SP_HUGE_SHAPE=1 (a diagnostic, not in the suite): during the WRITE beyond
 * the MR, rxe0's packets leave veth0 through a 1-packet-per-second tbf (the
 * first passes at once: the responder NAKs it; the rest stay queued, so
 * rxe0's QP has 65 skbs out and its requester stops) and rxe1's NAK is
 * delayed 200 ms by netem on veth1, so that the requester's 67 ms retry
 * timer fires first. SP_HUGE_SHAPE=nak: the netem delay only.
 */
static int huge_shape(int on)
{
	static const char *const cmd[] = {
		"tc qdisc del dev veth0 root 2>/dev/null; tc qdisc del dev veth1 root",
		"tc qdisc add dev veth0 root tbf rate 8kbit burst 1600 limit 200000 && "
		"tc qdisc add dev veth1 root netem delay 200ms",
		"tc qdisc add dev veth1 root netem delay 200ms",
	};
	const char *v = getenv("SP_HUGE_SHAPE");
	int i;

	if (!v)
		return 0;
	i = on ? (strcmp(v, "nak") ? 1 : 2) : 0;
	CHECK(system(cmd[i]) == 0 || !on, "%s", cmd[i]);
	return 1;
}

/*
 * The WRITE of 2,097,151 bytes into the 4097-byte MR at @addr: 0 when it
 * ended as a remote access error and both QPs reached ERR.
 */
static int write_beyond(struct churn *c, unsigned int it, struct ibv_mr *lmr, void *addr,
			uint32_t rkey, const char *where)
{
	struct wire w, w0 = wire_now(c);
	enum ibv_qp_state si, st;
	struct ibv_wc wc;
	char why[256];
	int done;

	if (huge_shape(1)) {
		/*
		 * Until the NAK is in and the completer has had 1 s for it;
		 * then the requester is let go (its skbs dropped with the
		 * tbf), to complete the WRITE after its retries.
		 */
		uint64_t deadline = now_ms() + c->wait_ms;
		unsigned int wait_ms = c->wait_ms;

		write_post(c, lmr, it, addr, rkey, HUGE_WRITE);
		while (rxe_counter(&c->ini, "rcvd_pkts") == w0.ini_rcvd && now_ms() < deadline)
			usleep(1000);
		c->wait_ms = 1000;
		done = wait_wc(c, &c->ini, &wc);
		c->wait_ms = wait_ms;
		tap_diag("iteration %u: the NAK %s rxe0, %s a completion 1 s later", it,
			 rxe_counter(&c->ini, "rcvd_pkts") > w0.ini_rcvd ? "reached" : "did not reach",
			 done ? "with" : "without");
		huge_shape(0);
		if (!done)
			done = wait_wc(c, &c->ini, &wc);
	} else {
		done = write_wait(c, lmr, it, addr, rkey, HUGE_WRITE, &wc);
	}
	w = wire_now(c);
	if (done && wc.status == IBV_WC_RETRY_EXC_ERR && w.tgt_sent > w0.tgt_sent &&
	    w.ini_rcvd > w0.ini_rcvd) {
		/* rxe's lost NAK (above): it went out and came in, unread */
		c->naks_lost++;
		tap_diag("iteration %u: %s: rxe lost the NAK (%s sent %llu packets, %s received "
			 "%llu), the WRITE ended as %s", it, where, c->tgt.name,
			 (unsigned long long)(w.tgt_sent - w0.tgt_sent), c->ini.name,
			 (unsigned long long)(w.ini_rcvd - w0.ini_rcvd),
			 ibv_wc_status_str(wc.status));
	} else if (!done || wc.status != IBV_WC_REM_ACCESS_ERR) {
		if (!done)
			snprintf(why, sizeof(why), "%s: WRITE of %u bytes beyond it: no completion "
				 "after %u ms", where, HUGE_WRITE, c->wait_ms);
		else
			snprintf(why, sizeof(why), "%s: WRITE of %u bytes beyond it: completion %s, "
				 "not %s", where, HUGE_WRITE, ibv_wc_status_str(wc.status),
				 ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
		report(c, it, why);
		wire_diag(c, &w0);
		return -1;
	}
	si = wait_qp_state(c, &c->ini, IBV_QPS_ERR);
	st = wait_qp_state(c, &c->tgt, IBV_QPS_ERR);
	if (si == IBV_QPS_ERR && st == IBV_QPS_ERR)
		return 0;
	snprintf(why, sizeof(why), "%s: after the access error: QPs %s/%s", where,
		 sp_rc_qp_state_str(si), sp_rc_qp_state_str(st));
	report(c, it, why);
	return -1;
}

static int huge_one(struct churn *c, unsigned int it, struct ibv_mr *lmr, int asked_len)
{
	const uint32_t seed = 0x2200 + it;
	struct sp_buf *big, *small;
	struct ibv_mr *mr;
	char why[256], where[128];
	uint8_t *addr;
	size_t mr_len;
	int ok = 1;

	/* 6 MiB on node 1: allocate, register, use, free */
	CHECK(sp_buf_alloc(c->dev, BIG, 1, 0, &big) == 0, "sp_buf_alloc 6 MiB: %s", sp_errmsg());
	mr = ibv_reg_mr(c->tgt.pd, sp_buf_addr(big), BIG, ACCESS);
	CHECK(mr, "ibv_reg_mr 6 MiB: %s", strerror(errno));
	if (write_ok(c, it, lmr, (uint8_t *)sp_buf_addr(big) + MiB, mr->rkey, 64 * 1024, seed,
		     "6 MiB buffer"))
		ok = 0;
	CHECK_OK(ibv_dereg_mr(mr));
	CHECK(sp_buf_free(big) == 0, "sp_buf_free: %s", sp_errmsg());

	/* 4097 bytes, HUGE_ONLY | UNMAPPED on node 1, mapped afterwards */
	CHECK(sp_buf_alloc(c->dev, HUGE_ASKED, 1, SP_ALLOC_HUGE_ONLY | SP_ALLOC_UNMAPPED,
			   &small) == 0, "sp_buf_alloc %u HUGE_ONLY|UNMAPPED: %s", HUGE_ASKED,
	      sp_errmsg());
	CHECK(sp_buf_size(small) == HUGE_SZ && !sp_buf_addr(small), "%zu bytes, mapped at %p",
	      sp_buf_size(small), sp_buf_addr(small));
	CHECK(sp_buf_map(small) == 0, "sp_buf_map: %s", sp_errmsg());
	addr = sp_buf_addr(small);
	for (size_t off = 0; off < HUGE_SZ; off += 4096)
		addr[off] = 0;
	CHECK(one_folio(addr, why, sizeof(why)), "after the touch: %s", why);
	CHECK(page_node(addr) == 1, "2 MiB page on node %d, not 1", page_node(addr));
	mr_len = asked_len ? HUGE_ASKED : sp_buf_size(small);
	mr = ibv_reg_mr(c->tgt.pd, addr, mr_len, ACCESS);
	CHECK(mr, "ibv_reg_mr %zu bytes: %s", mr_len, strerror(errno));
	/* and the mapping still shows that 2 MiB page after the registration */
	CHECK(one_folio(addr, why, sizeof(why)), "after ibv_reg_mr: %s", why);

	snprintf(where, sizeof(where), "%zu-byte MR on the 2 MiB page", mr_len);
	if (!asked_len) {
		if (write_ok(c, it, lmr, addr, mr->rkey, HUGE_WRITE, seed + 1, where))
			ok = 0;
	} else if (write_ok(c, it, lmr, addr, mr->rkey, HUGE_ASKED, seed + 1, where)) {
		ok = 0;
	} else if (write_beyond(c, it, lmr, addr, mr->rkey, where)) {
		ok = 0;
	}
	CHECK_OK(ibv_dereg_mr(mr));
	CHECK(sp_buf_free(small) == 0, "sp_buf_free: %s", sp_errmsg());
	if (asked_len || !ok)
		qps_reset(c);
	return ok ? 0 : -1;
}

void huge_unmapped_write(void)
{
	unsigned int it, iters, failed[2] = { 0 };
	struct ibv_mr *lmr;
	struct churn c;
	uint8_t *host;
	uint64_t t0;

	churn_open(&c);
	c.retry_cnt = (uint8_t)env_uint("SP_HUGE_RETRY_CNT", HUGE_RETRY_CNT);
	c.timeout = (uint8_t)env_uint("SP_HUGE_TIMEOUT", 14);
	qps_reset(&c);
	iters = env_uint("SP_HUGE_ITERS", access("/sys/kernel/debug/kmemleak", F_OK) ? 4 : 2);
	host = aligned_alloc(4096, HUGE_SZ);
	CHECK(host, "host buffer");
	lmr = ibv_reg_mr(c.ini.pd, host, HUGE_SZ, IBV_ACCESS_LOCAL_WRITE);
	CHECK(lmr, "ibv_reg_mr host 2 MiB: %s", strerror(errno));
	t0 = now_ms();
	for (it = 0; it < iters && c.failures < MAX_FAILURES; it++)
		if (huge_one(&c, it, lmr, it % 2))
			failed[it % 2]++;
	tap_diag("%u iterations in %llu ms; failed: %u (2 MiB MR, WRITE inside), %u (4097-byte MR, "
		 "WRITE beyond: IBV_WC_REM_ACCESS_ERR expected); NAKs lost by rxe: %u", it,
		 (unsigned long long)(now_ms() - t0), failed[0], failed[1], c.naks_lost);
	dump_counters(c.ini.ctx->device->name);
	dump_counters(c.tgt.ctx->device->name);
	CHECK(c.failures == 0, "%u of %u iterations failed (details above)", c.failures, it);
	CHECK_OK(ibv_dereg_mr(lmr));
	free(host);
	churn_close(&c);
}
