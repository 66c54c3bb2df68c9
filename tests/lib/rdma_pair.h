/* SPDX-License-Identifier: MIT */
/*
 * Two Soft-RoCE "nodes" for tests and the demo: the target process owns a
 * strixpeer buffer registered with a plain ibv_reg_mr(); the initiator
 * process owns host memory and drives RDMA WRITE / READ / SEND into the
 * target's buffer. The two talk over a socketpair (struct msg) so the
 * target checks the bytes it received itself.
 *
 * Environment: SP_RDMA_TARGET / SP_RDMA_INITIATOR name the verbs devices
 * (default rxe1 / rxe0); tests/vm/rxe-setup.sh creates both.
 */
#ifndef SP_RDMA_PAIR_H
#define SP_RDMA_PAIR_H

#include "sp_test.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

#define TARGET_BUF	(80 * MiB)
#define WAIT_MS		120000

struct conn_info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
	union ibv_gid gid;
};

struct node {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	int gid_index;
	uint8_t *buf;
	uint64_t len;
};

/* Control messages between the two processes. */
enum { CMD_FILL = 1, CMD_VERIFY, CMD_POST_RECV, CMD_WAIT_RECV, CMD_INFO, CMD_QUIT };

struct msg {
	uint32_t cmd;
	uint32_t seed;
	uint64_t off;
	uint64_t len;
	int64_t result;
	/* CMD_INFO: the target buffer as strixpeer reports it */
	uint64_t page_size;
	uint32_t nr_chunks;
	int32_t node;
};

static void pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static const char *dev_name(const char *env, const char *def)
{
	const char *v = getenv(env);

	return v && *v ? v : def;
}

/* The RoCE v2 GID carrying the device's IPv4 address. */
static int find_gid(struct node *n)
{
	struct ibv_gid_entry ents[32];
	ssize_t cnt = ibv_query_gid_table(n->ctx, ents, 32, 0);

	CHECK(cnt > 0, "%s: no GIDs", n->name);
	for (ssize_t i = 0; i < cnt; i++) {
		const uint8_t *r = ents[i].gid.raw;
		static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

		if (ents[i].gid_type == IBV_GID_TYPE_ROCE_V2 && memcmp(r, v4, 12) == 0)
			return (int)ents[i].gid_index;
	}
	tap_fail(__FILE__, __LINE__, "find_gid", "%s: no RoCE v2 IPv4 GID (is the netdev up with an address?)",
		 n->name);
}

static void node_open(struct node *n, const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { 0 };

	CHECK(list, "ibv_get_device_list: %s", strerror(errno));
	n->name = name;
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			n->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!n->ctx)
		SKIP("verbs device %s not present (Soft-RoCE not set up)", name);
	n->pd = ibv_alloc_pd(n->ctx);
	n->ch = ibv_create_comp_channel(n->ctx);
	CHECK(n->pd && n->ch, "pd/channel");
	n->cq = ibv_create_cq(n->ctx, 64, NULL, n->ch, 0);
	CHECK(n->cq, "cq: %s", strerror(errno));
	qa.send_cq = n->cq;
	qa.recv_cq = n->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	n->qp = ibv_create_qp(n->pd, &qa);
	CHECK(n->qp, "qp: %s", strerror(errno));
	n->gid_index = find_gid(n);
}

static struct conn_info node_info(struct node *n)
{
	struct conn_info ci = { 0 };

	ci.qpn = n->qp->qp_num;
	ci.psn = (uint32_t)(getpid() * 7919) & 0xffffff;
	ci.rkey = n->mr ? n->mr->rkey : 0;
	ci.addr = (uintptr_t)n->buf;
	CHECK_OK(ibv_query_gid(n->ctx, 1, n->gid_index, &ci.gid));
	return ci;
}

/*
 * RESET -> RTS. @timeout is the local ACK timeout (4.096 us << timeout;
 * rdma_pair uses 14, 67 ms), @retry_cnt the requester's transport retry
 * count: 7 is what rdma_pair's own tests use, and rxe's completer never
 * counts it down (a WRITE whose NAK is lost is retried forever:
 * rxe_comp.c); 0-6 make such a WRITE fail with IBV_WC_RETRY_EXC_ERR after
 * retry_cnt + 1 timeouts.
 */
static void node_connect_opts(struct node *n, const struct conn_info *me,
			      const struct conn_info *peer, uint8_t timeout, uint8_t retry_cnt)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	CHECK_OK(ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			       IBV_QP_ACCESS_FLAGS));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)n->gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	CHECK_OK(ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			       IBV_QP_MIN_RNR_TIMER));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 4;
	CHECK_OK(ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

static void node_connect(struct node *n, const struct conn_info *me, const struct conn_info *peer)
{
	node_connect_opts(n, me, peer, 14, 7);
}

/* Waits for one completion (event driven: no busy polling under TCG). */
static struct ibv_wc node_wait(struct node *n)
{
	struct ibv_wc wc;
	int waited = 0;

	for (;;) {
		struct pollfd pfd = { .fd = n->ch->fd, .events = POLLIN };
		struct ibv_cq *cq;
		void *cq_ctx;
		int r;

		CHECK_OK(ibv_req_notify_cq(n->cq, 0));
		r = ibv_poll_cq(n->cq, 1, &wc);
		CHECK(r >= 0, "poll_cq");
		if (r == 1)
			break;
		r = poll(&pfd, 1, 1000);
		if (r == 0) {
			struct ibv_qp_attr a = { 0 };
			struct ibv_qp_init_attr ia;

			waited += 1000;
			if (waited < WAIT_MS)
				continue;
			/*
			 * QP in RTS: the peer's QP went to ERR without a NAK
			 * reaching us, or rxe lost it (issue 22); rxe
			 * retries retry_cnt 7 forever (tests/guest/rdma_churn.c).
			 */
			ibv_query_qp(n->qp, &a, IBV_QP_STATE, &ia);
			CHECK(0, "%s: no completion in %d ms (QP state %d)", n->name, WAIT_MS,
			      (int)a.qp_state);
		}
		CHECK_OK(ibv_get_cq_event(n->ch, &cq, &cq_ctx));
		ibv_ack_cq_events(cq, 1);
	}
	CHECK(wc.status == IBV_WC_SUCCESS, "%s: completion %s (opcode %d)", n->name,
	      ibv_wc_status_str(wc.status), wc.opcode);
	return wc;
}

static void xfer(int sock, struct msg *m)
{
	CHECK(write(sock, m, sizeof(*m)) == sizeof(*m), "control write");
	CHECK(read(sock, m, sizeof(*m)) == sizeof(*m), "control read (peer died?)");
}

/*
 * How the target makes its memory and MR, when a test wants something else
 * than the default (a strixpeer buffer registered with plain ibv_reg_mr):
 * setup() sets n->buf, n->len and n->mr; verify() (optional) checks bytes
 * through another view; teardown() undoes setup().
 */
struct target_ops {
	void (*setup)(struct node *n, struct sp_dev *dev);
	int64_t (*verify)(struct node *n, uint64_t off, uint64_t len, uint32_t seed);
	void (*teardown)(struct node *n);
};

static const struct target_ops *pair_target_ops;

/*
 * The target node: a strixpeer buffer registered with plain ibv_reg_mr
 * (or pair_target_ops), then serving the initiator's requests until
 * CMD_QUIT.
 */
static void target_main(int sock)
{
	struct sp_dev *dev = sp_test_dev();
	struct conn_info me, peer;
	struct sp_buf_info info;
	struct sp_buf *buf;
	struct node n = { 0 };
	struct msg m;

	pin_cpu(1);
	node_open(&n, dev_name("SP_RDMA_TARGET", "rxe1"));
	if (pair_target_ops) {
		buf = NULL;
		pair_target_ops->setup(&n, dev);
	} else {
		CHECK(sp_buf_alloc(dev, TARGET_BUF, SP_NODE_DEFAULT, 0, &buf) == 0, "%s",
		      sp_errmsg());
		n.buf = sp_buf_addr(buf);
		n.len = sp_buf_size(buf);
		n.mr = ibv_reg_mr(n.pd, n.buf, n.len, IBV_ACCESS_LOCAL_WRITE |
				  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		CHECK(n.mr, "ibv_reg_mr on a strixpeer buffer: %s", strerror(errno));
	}
	me = node_info(&n);
	CHECK(write(sock, &me, sizeof(me)) == sizeof(me), "send info");
	CHECK(read(sock, &peer, sizeof(peer)) == sizeof(peer), "recv info");
	node_connect(&n, &me, &peer);
	CHECK(write(sock, &me, 1) == 1, "ready");

	while (read(sock, &m, sizeof(m)) == sizeof(m)) {
		m.result = 0;
		switch (m.cmd) {
		case CMD_FILL:
			sp_fill(n.buf + m.off, m.len, m.off, m.seed);
			break;
		case CMD_VERIFY:
			m.result = sp_verify(n.buf + m.off, m.len, m.off, m.seed);
			if (m.result < 0 && pair_target_ops && pair_target_ops->verify)
				m.result = pair_target_ops->verify(&n, m.off, m.len, m.seed);
			break;
		case CMD_POST_RECV: {
			struct ibv_sge sge = {
				.addr = (uintptr_t)(n.buf + m.off),
				.length = (uint32_t)m.len, .lkey = n.mr->lkey,
			};
			struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;

			m.result = ibv_post_recv(n.qp, &wr, &bad);
			break;
		}
		case CMD_WAIT_RECV: {
			struct ibv_wc wc = node_wait(&n);

			CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == m.len,
			      "recv opcode %d len %u", wc.opcode, wc.byte_len);
			m.result = sp_verify(n.buf + m.off, m.len, m.off, m.seed);
			break;
		}
		case CMD_INFO:
			CHECK(buf, "CMD_INFO needs the default target");
			CHECK(sp_buf_query(buf, &info) == 0, "%s", sp_errmsg());
			m.len = info.size;
			m.page_size = info.page_size;
			m.nr_chunks = info.nr_chunks;
			m.node = info.node;
			break;
		case CMD_QUIT:
			if (pair_target_ops)
				pair_target_ops->teardown(&n);
			else
				CHECK_OK(ibv_dereg_mr(n.mr));
			CHECK(write(sock, &m, sizeof(m)) == sizeof(m), "reply");
			sp_dev_close(dev);
			_exit(0);
		}
		CHECK(write(sock, &m, sizeof(m)) == sizeof(m), "reply");
	}
	_exit(1);
}

struct pair {
	struct node n;
	struct conn_info peer;
	uint8_t *host;
	uint64_t host_len;
	int sock;
	pid_t target;
};

static void pair_open(struct pair *p, uint64_t host_len)
{
	struct conn_info me;
	int sv[2];
	char c;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	p->target = fork();
	CHECK(p->target >= 0, "fork");
	if (p->target == 0) {
		close(sv[0]);
		target_main(sv[1]);
	}
	close(sv[1]);
	p->sock = sv[0];
	pin_cpu(0);
	memset(&p->n, 0, sizeof(p->n));
	node_open(&p->n, dev_name("SP_RDMA_INITIATOR", "rxe0"));
	p->host_len = host_len;
	p->host = aligned_alloc(4096, host_len);
	CHECK(p->host, "host buffer");
	memset(p->host, 0, host_len);
	p->n.buf = p->host;
	p->n.mr = ibv_reg_mr(p->n.pd, p->host, host_len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(p->n.mr, "ibv_reg_mr on host memory: %s", strerror(errno));
	me = node_info(&p->n);
	CHECK(read(p->sock, &p->peer, sizeof(p->peer)) == sizeof(p->peer), "target info (target failed?)");
	CHECK(write(p->sock, &me, sizeof(me)) == sizeof(me), "send info");
	node_connect(&p->n, &me, &p->peer);
	CHECK(read(p->sock, &c, 1) == 1, "target ready");
}

static void pair_close(struct pair *p)
{
	struct msg m = { .cmd = CMD_QUIT };
	int status;

	xfer(p->sock, &m);
	CHECK(waitpid(p->target, &status, 0) == p->target && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "target failed");
	ibv_dereg_mr(p->n.mr);
	free(p->host);
	CHECK_NOTHING_PINNED();
}

static void post_rdma(struct pair *p, enum ibv_wr_opcode op, uint64_t local_off,
		      uint64_t remote_off, uint64_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->host + local_off), .length = (uint32_t)len,
		.lkey = p->n.mr->lkey,
	};
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;

	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = p->peer.addr + remote_off;
		wr.wr.rdma.rkey = p->peer.rkey;
	}
	CHECK_OK(ibv_post_send(p->n.qp, &wr, &bad));
	wc = node_wait(&p->n);
	CHECK(wc.wr_id == 1, "wr_id");
}

#endif /* SP_RDMA_PAIR_H */
