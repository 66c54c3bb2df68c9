// SPDX-License-Identifier: MIT
/* rdma_churn: the churn loop: buffers, queue pairs, reports; churn_strixpeer, churn_mmap */
#include "rdma_churn.h"

/* The sizes of the node-1 buffer and of the WRITE into it (4-8 KiB). */
static const uint32_t small_sizes[] = { 4096, 8192, 4097, 6000, 8191, 5120 };
#define NSMALL (sizeof(small_sizes) / sizeof(small_sizes[0]))

unsigned int env_uint(const char *name, unsigned int def)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned int)strtoul(v, NULL, 0) : def;
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int node_count(void)
{
	int n = 0;
	char path[64];

	for (;; n++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", n);
		if (access(path, F_OK))
			return n;
	}
}

void mem_alloc(struct churn *c, struct mem *m, enum kind kind, size_t len, int node)
{
	memset(m, 0, sizeof(*m));
	m->kind = kind;
	m->len = len;
	if (kind == K_STRIXPEER) {
		CHECK(sp_buf_alloc(c->dev, len, node, 0, &m->buf) == 0, "sp_buf_alloc %zu on node %d: %s",
		      len, node, sp_errmsg());
		m->addr = sp_buf_addr(m->buf);
		m->maplen = sp_buf_size(m->buf);
	} else {
		unsigned long mask = 1UL << node;

		m->maplen = (len + 4095) & ~(size_t)4095;
		m->addr = mmap(NULL, m->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		CHECK(m->addr != MAP_FAILED, "mmap: %s", strerror(errno));
		CHECK(syscall(SYS_mbind, m->addr, m->maplen, MPOL_BIND, &mask, 8 * sizeof(mask),
			      MPOL_MF_STRICT) == 0, "mbind node %d: %s", node, strerror(errno));
		/* not touched: the registration (GUP) faults the pages in */
	}
}

void mem_free(struct mem *m)
{
	if (m->kind == K_STRIXPEER)
		CHECK(sp_buf_free(m->buf) == 0, "sp_buf_free: %s", sp_errmsg());
	else
		CHECK_OK(munmap(m->addr, m->maplen));
	m->addr = NULL;
}

/* The node the page at @p sits on, as the kernel says (-1: not mapped). */
int page_node(void *p)
{
	int node = -1;

	if (syscall(SYS_get_mempolicy, &node, NULL, 0, p, MPOL_F_NODE | MPOL_F_ADDR))
		return -1;
	return node;
}

/*
 * Wait until @n's QP reaches @want, at most c->wait_ms. rxe's completer
 * posts the error completion before it moves the QP to ERR (rxe_comp.c:
 * do_complete() then rxe_qp_error()), so the requester's state may still
 * read RTS just after its error completion; the responder moves when the
 * NAK is sent. Returns the last state read.
 */
enum ibv_qp_state wait_qp_state(struct churn *c, struct sp_rc *n, enum ibv_qp_state want)
{
	uint64_t deadline = now_ms() + c->wait_ms;
	enum ibv_qp_state s;

	while ((s = sp_rc_qp_state(n)) != want && now_ms() < deadline)
		usleep(1000);
	return s;
}

static void dump_qp(struct sp_rc *n)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_SQ_PSN |
			 IBV_QP_RQ_PSN | IBV_QP_DEST_QPN | IBV_QP_ACCESS_FLAGS | IBV_QP_TIMEOUT |
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_PATH_MTU, &ia)) {
		tap_diag("  %s qp %u: ibv_query_qp: %s", n->name, n->qp->qp_num, strerror(errno));
		return;
	}
	tap_diag("  %s qp %u: state %s (cur %s) sq_psn %u rq_psn %u dest_qp %u access 0x%x "
		 "mtu %d timeout %u retry %u rnr_retry %u sq_draining %u", n->name, n->qp->qp_num,
		 sp_rc_qp_state_str(a.qp_state), sp_rc_qp_state_str(a.cur_qp_state), a.sq_psn, a.rq_psn,
		 a.dest_qp_num, a.qp_access_flags, a.path_mtu, a.timeout, a.retry_cnt,
		 a.rnr_retry, a.sq_draining);
}

static void dump_cq(struct sp_rc *n)
{
	struct ibv_wc wc[8];
	int r, total = 0;

	while ((r = ibv_poll_cq(n->cq, 8, wc)) > 0) {
		for (int i = 0; i < r; i++)
			tap_diag("  %s cq: wr_id %llu status %s opcode %d vendor_err 0x%x byte_len %u",
				 n->name, (unsigned long long)wc[i].wr_id,
				 ibv_wc_status_str(wc[i].status), wc[i].opcode, wc[i].vendor_err,
				 wc[i].byte_len);
		total += r;
	}
	if (r < 0)
		tap_diag("  %s cq: ibv_poll_cq: %d", n->name, r);
	else if (!total)
		tap_diag("  %s cq: empty", n->name);
}

static void run_show(const char *what, const char *cmd);

/* rxe's hw_counters of a device, the non-zero ones on one line. */
void dump_counters(const char *dev)
{
	char cmd[256], what[64];

	snprintf(cmd, sizeof(cmd),
		 "cd /sys/class/infiniband/%s/ports/1/hw_counters 2>/dev/null && "
		 "for f in *; do v=$(cat $f); [ \"$v\" = 0 ] || printf '%%s=%%s ' $f $v; done; echo", dev);
	snprintf(what, sizeof(what), "%s counters", dev);
	run_show(what, cmd);
}

static void run_show(const char *what, const char *cmd)
{
	char line[512];
	FILE *f = popen(cmd, "r");

	tap_diag("  %s:", what);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		tap_diag("    %s", line);
	}
	pclose(f);
}

void report(struct churn *c, unsigned int it, const char *why)
{
	c->failures++;
	tap_diag("iteration %u (%s): %s", it, c->variant ? c->variant : "-", why);
	if (++c->reports > MAX_REPORTS) {
		if (c->reports == MAX_REPORTS + 1)
			tap_diag("(further failures counted, not shown)");
		return;
	}
	dump_qp(&c->ini);
	dump_qp(&c->tgt);
	dump_cq(&c->ini);
	dump_cq(&c->tgt);
	dump_counters(c->ini.ctx->device->name);
	dump_counters(c->tgt.ctx->device->name);
	run_show("rdma res show qp", "rdma res show qp 2>&1");
	run_show("dmesg (last 20 lines)", "dmesg 2>&1 | tail -n 20");
}

/*
 * The first completion on @n's CQ, waiting at most c->wait_ms (events, no
 * busy polling). Returns 1 with *wc filled, 0 on timeout.
 */
int wait_wc(struct churn *c, struct sp_rc *n, struct ibv_wc *wc)
{
	char why[256];
	int r = sp_rc_wait(n, wc, (int)c->wait_ms, why, sizeof(why));

	CHECK(r == 0 || r == -ETIMEDOUT, "%s", why);
	return r == 0;
}

static void set_nonblocking(struct ibv_comp_channel *ch)
{
	int fl = fcntl(ch->fd, F_GETFL);

	CHECK(fl >= 0 && fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
}

static void qps_connect(struct churn *c)
{
	c->ini_ci = node_info(&c->ini);
	c->tgt_ci = node_info(&c->tgt);
	c->tgt_ci.psn ^= 0x5a5a5;	/* one process: make the two PSNs differ */
	node_connect_opts(&c->ini, &c->ini_ci, &c->tgt_ci, c->timeout, c->retry_cnt);
	node_connect_opts(&c->tgt, &c->tgt_ci, &c->ini_ci, c->timeout, c->retry_cnt);
}

/* After a failure: both QPs back to RESET, drained, and connected again. */
void qps_reset(struct churn *c)
{
	struct ibv_wc wc;

	CHECK_OK(sp_rc_reset(&c->ini));
	CHECK_OK(sp_rc_reset(&c->tgt));
	while (ibv_poll_cq(c->ini.cq, 1, &wc) > 0 || ibv_poll_cq(c->tgt.cq, 1, &wc) > 0)
		;
	qps_connect(c);
}

/* New QPs (the first WRITE on a fresh connection). */
static void qps_recreate(struct churn *c)
{
	char why[256];

	CHECK(sp_rc_qp_create(&c->ini, why, sizeof(why)) == 0, "%s", why);
	CHECK(sp_rc_qp_create(&c->tgt, why, sizeof(why)) == 0, "%s", why);
	qps_connect(c);
}

void churn_open(struct churn *c)
{
	memset(c, 0, sizeof(*c));
	/* debug kernels (KASAN, kmemleak) run it several times slower */
	c->iters = env_uint("SP_CHURN_ITERS", access("/sys/kernel/debug/kmemleak", F_OK) ? 90 : 15);
	c->wait_ms = env_uint("SP_CHURN_WAIT_MS", 20000);
	c->timeout = 14;
	c->retry_cnt = 7;
	c->have_node1 = node_count() >= 2;
	if (!c->have_node1)
		SKIP("one NUMA node: the churn needs nodes 0 and 1");
	c->dev = sp_test_dev();
	node_open(&c->ini, dev_name("SP_RDMA_INITIATOR", "rxe0"));
	node_open(&c->tgt, dev_name("SP_RDMA_TARGET", "rxe1"));
	set_nonblocking(c->ini.ch);
	set_nonblocking(c->tgt.ch);
	c->host = aligned_alloc(4096, SMALL_MAX);
	CHECK(c->host, "host buffer");
	c->host_mr = ibv_reg_mr(c->ini.pd, c->host, SMALL_MAX, IBV_ACCESS_LOCAL_WRITE);
	CHECK(c->host_mr, "ibv_reg_mr host: %s", strerror(errno));
	qps_connect(c);
}

void churn_close(struct churn *c)
{
	struct sp_rc *ns[2] = { &c->ini, &c->tgt };

	CHECK_OK(ibv_dereg_mr(c->host_mr));
	free(c->host);
	for (int i = 0; i < 2; i++) {
		CHECK_OK(ibv_destroy_qp(ns[i]->qp));
		CHECK_OK(ibv_destroy_cq(ns[i]->cq));
		CHECK_OK(ibv_destroy_comp_channel(ns[i]->ch));
		CHECK_OK(ibv_dealloc_pd(ns[i]->pd));
		CHECK_OK(ibv_close_device(ns[i]->ctx));
	}
	sp_dev_close(c->dev);
	CHECK_NOTHING_PINNED();
}

/* One iteration; returns 0 when all was well (failures are reported). */
int churn_one(struct churn *c, unsigned int it, enum kind kind, enum order order)
{
	uint32_t len = small_sizes[it % NSMALL], seed = 0x1600 + it;
	struct ibv_mr *big_mr, *mr;
	struct mem big, small;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	enum ibv_qp_state si, st;
	char why[256];
	int64_t wrong;
	int node, ok = 1;

	/* 6 MiB on node 0: allocate, register, free */
	mem_alloc(c, &big, kind, BIG, 0);
	big_mr = ibv_reg_mr(c->tgt.pd, big.addr, BIG, ACCESS);
	CHECK(big_mr, "iteration %u: ibv_reg_mr 6 MiB: %s", it, strerror(errno));
	if (order == DEREG_THEN_FREE) {
		CHECK_OK(ibv_dereg_mr(big_mr));
		mem_free(&big);
	} else {
		mem_free(&big);	/* the MR keeps the pages until dereg */
	}

	/* 4-8 KiB on node 1: allocate, register, WRITE into it, verify */
	mem_alloc(c, &small, kind, len, 1);
	mr = ibv_reg_mr(c->tgt.pd, small.addr, len, ACCESS);
	CHECK(mr, "iteration %u: ibv_reg_mr %u bytes: %s", it, len, strerror(errno));
	if (order == FREE_THEN_DEREG)
		CHECK_OK(ibv_dereg_mr(big_mr));
	node = page_node(small.addr);
	if (node != 1) {
		snprintf(why, sizeof(why), "%u-byte buffer on node %d, not 1", len, node);
		report(c, it, why);
		ok = 0;
	}

	sp_fill(c->host, len, 0, seed);
	sge = (struct ibv_sge){ .addr = (uintptr_t)c->host, .length = len,
				.lkey = c->host_mr->lkey };
	wr.wr_id = it;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)small.addr;
	wr.wr.rdma.rkey = mr->rkey;
	CHECK_OK(ibv_post_send(c->ini.qp, &wr, &bad));
	if (!wait_wc(c, &c->ini, &wc)) {
		snprintf(why, sizeof(why), "WRITE of %u bytes (rkey 0x%x, addr %p) not complete after %u ms",
			 len, mr->rkey, (void *)small.addr, c->wait_ms);
		report(c, it, why);
		ok = 0;
	} else if (wc.status != IBV_WC_SUCCESS || wc.wr_id != it) {
		snprintf(why, sizeof(why), "WRITE of %u bytes: completion %s (wr_id %llu)", len,
			 ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
		report(c, it, why);
		ok = 0;
	} else if ((wrong = sp_verify(small.addr, len, 0, seed)) >= 0) {
		snprintf(why, sizeof(why), "WRITE of %u bytes completed but byte %lld is wrong", len,
			 (long long)wrong);
		report(c, it, why);
		ok = 0;
	}
	si = sp_rc_qp_state(&c->ini);
	st = sp_rc_qp_state(&c->tgt);
	if (ok && (si != IBV_QPS_RTS || st != IBV_QPS_RTS)) {
		snprintf(why, sizeof(why), "after the WRITE: %s qp %s, %s qp %s", c->ini.name,
			 sp_rc_qp_state_str(si), c->tgt.name, sp_rc_qp_state_str(st));
		report(c, it, why);
		ok = 0;
	}
	CHECK_OK(ibv_dereg_mr(mr));
	mem_free(&small);
	if (!ok)
		qps_reset(c);
	return ok ? 0 : -1;
}

/*
 * The loop for one kind of memory, the iterations taking turns: dereg
 * then free, free then dereg (the MR holds the freed pages until after the
 * next registration), and dereg then free on new QPs (the first WRITE of
 * a connection).
 */
void churn(enum kind kind)
{
	static const char *const variant[] = { "dereg then free", "free then dereg",
					       "dereg then free, new QPs" };
	unsigned int failed[3] = { 0 }, it, v;
	struct churn c;
	uint64_t t0;

	churn_open(&c);
	t0 = now_ms();
	for (it = 0; it < c.iters && c.failures < MAX_FAILURES; it++) {
		v = it % 3;
		c.variant = variant[v];
		if (v == 2)
			qps_recreate(&c);
		if (churn_one(&c, it, kind, v == 1 ? FREE_THEN_DEREG : DEREG_THEN_FREE))
			failed[v]++;
	}
	tap_diag("%s: %u iterations in %llu ms; failed: %u (%s), %u (%s), %u (%s)",
		 kind == K_STRIXPEER ? "strixpeer buffers" : "mmap+mbind memory", it,
		 (unsigned long long)(now_ms() - t0), failed[0], variant[0], failed[1], variant[1],
		 failed[2], variant[2]);
	CHECK(c.failures == 0, "%u of %u iterations failed (details above)", c.failures, it);
	churn_close(&c);
}

void churn_strixpeer(void)
{
	churn(K_STRIXPEER);
}

void churn_mmap(void)
{
	churn(K_MMAP);
}
