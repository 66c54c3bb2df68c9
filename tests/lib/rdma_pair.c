// SPDX-License-Identifier: MIT
/* tests/lib/rdma_pair.h's functions: the suite's library (build/tests/libsptest.a). */
#include "rdma_pair.h"

const struct target_ops *pair_target_ops;

void pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

const char *dev_name(const char *env, const char *def)
{
	const char *v = getenv(env);

	return v && *v ? v : def;
}

void node_open(struct sp_rc *n, const char *name)
{
	const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1,
	};
	char why[256];
	int r = sp_rc_open(n, name, 1, 64, &cap, 0, why, sizeof(why));

	if (r == -ENODEV)
		SKIP("verbs device %s not present (Soft-RoCE not set up)", name);
	CHECK(r == 0, "%s", why);
	CHECK(n->gid_v4, "%s: no RoCE v2 IPv4 GID (is the netdev up with an address?)", n->name);
}

struct conn_info node_info(struct sp_rc *n)
{
	struct conn_info ci = { 0 };
	struct sp_rc_addr a;

	sp_rc_local_addr(n, (uint32_t)(getpid() * 7919), &a);
	ci.qpn = a.qpn;
	ci.psn = a.psn;
	ci.rkey = n->mr ? n->mr->rkey : 0;
	ci.addr = (uintptr_t)n->buf;
	ci.gid = a.gid;
	return ci;
}

void node_connect_opts(struct sp_rc *n, const struct conn_info *me,
		       const struct conn_info *peer, uint8_t timeout, uint8_t retry_cnt)
{
	const struct sp_rc_path path = {
		.mtu = IBV_MTU_1024, .timeout = timeout, .retry_cnt = retry_cnt, .rnr_retry = 7,
		.rd_atomic = 4, .hop_limit = 1,
	};
	struct sp_rc_addr to = { .qpn = peer->qpn, .psn = peer->psn, .gid = peer->gid };
	char why[256];

	CHECK(sp_rc_connect(n, me->psn, &to, &path, why, sizeof(why)) == 0, "%s", why);
}

void node_connect(struct sp_rc *n, const struct conn_info *me, const struct conn_info *peer)
{
	node_connect_opts(n, me, peer, 14, 7);
}

struct ibv_wc node_wait_any(struct sp_rc *n)
{
	struct ibv_wc wc;
	char why[256];

	CHECK(sp_rc_wait(n, &wc, WAIT_MS, why, sizeof(why)) == 0, "%s", why);
	return wc;
}

struct ibv_wc node_wait(struct sp_rc *n)
{
	struct ibv_wc wc = node_wait_any(n);

	CHECK(wc.status == IBV_WC_SUCCESS, "%s: completion %s (opcode %d)", n->name,
	      ibv_wc_status_str(wc.status), wc.opcode);
	return wc;
}

void xfer(int sock, struct msg *m)
{
	CHECK(write(sock, m, sizeof(*m)) == sizeof(*m), "control write");
	CHECK(read(sock, m, sizeof(*m)) == sizeof(*m), "control read (peer died?)");
}

void target_main(int sock)
{
	struct sp_dev *dev = sp_test_dev();
	struct conn_info me, peer;
	struct sp_buf_info info;
	struct sp_buf *buf;
	struct sp_rc n = { 0 };
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

void pair_open(struct pair *p, uint64_t host_len)
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

void pair_close(struct pair *p)
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

void post_rdma(struct pair *p, enum ibv_wr_opcode op, uint64_t local_off,
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
