// SPDX-License-Identifier: MIT
/*
 * user/rdma/link.h, the connection strixpeerctl doctor and bench share,
 * over real Soft-RoCE: the two ends of the veth pair (tests/vm/rxe-setup.sh)
 * act as two nodes, the server a forked process. The wire format first (no
 * device needed), then what a peer can do wrong: say nothing after
 * connecting, be of another tool, not be there at all; each is refused or
 * reported within its bound, in words. Finally a session of both kinds of
 * connection, its messages checked field by field.
 *
 * SP_LINK_SERVER / SP_LINK_CLIENT: the two addresses (198.18.0.2, .1).
 */
#include <poll.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "tap.h"
#include "rdma/link.h"

#define SILENT_MS	3000	/* what the silent cases' waiting side allows */

static const char *srv_addr(void)
{
	const char *a = getenv("SP_LINK_SERVER");

	return a && *a ? a : "198.18.0.2";
}

static const char *cli_addr(void)
{
	const char *a = getenv("SP_LINK_CLIENT");

	return a && *a ? a : "198.18.0.1";
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void need_rdma_cm(void)
{
	struct ibv_device **l;
	int n = 0;

	/* as tests/doctor/guest.sh does: librdmacm's device comes with rdma_ucm */
	if (access("/dev/infiniband/rdma_cm", R_OK | W_OK) && geteuid() == 0 &&
	    access("/sys/module/rdma_rxe", F_OK) == 0 && system("modprobe -q rdma_ucm") != 0)
		tap_diag("modprobe rdma_ucm failed");
	if (access("/dev/infiniband/rdma_cm", R_OK | W_OK))
		SKIP("no /dev/infiniband/rdma_cm (rdma_ucm not loaded)");
	l = ibv_get_device_list(&n);
	if (l)
		ibv_free_device_list(l);
	if (n < 1)
		SKIP("no RDMA device (tests/vm/rxe-setup.sh makes rxe0 and rxe1)");
}

/* --- the wire format ------------------------------------------------------- */

static void wire_roundtrip_little_endian(void)
{
	struct sp_link_msg m = { .type = SP_MSG_TARGET, .status = -5, .kind = 7,
				 .rkey = 0x11223344, .seed = 9, .size = 0x0102030405060708ull,
				 .addr = 1ull << 40, .iters = 3, .value = -1 }, g;
	uint8_t w[SP_LINK_MSG_LEN];
	char why[200];

	snprintf(m.text, sizeof(m.text), "%s", "device rxe1");
	sp_link_msg_put(w, SP_LINK_TEST, &m);
	CHECK(!memcmp(w, "SPLK", 4), "magic bytes %02x%02x%02x%02x", w[0], w[1], w[2], w[3]);
	CHECK(w[4] == SP_LINK_VERSION && w[5] == 0 && w[6] == SP_LINK_TEST, "version/tool bytes");
	CHECK(w[32] == 0x08 && w[39] == 0x01, "size little-endian: %02x .. %02x", w[32], w[39]);
	CHECK(w[20] == 0x44 && w[23] == 0x11, "rkey little-endian");
	CHECK(sp_link_msg_get(w, SP_LINK_TEST, &g, why, sizeof(why)) == 0, "%s", why);
	CHECK(g.type == m.type && g.status == -5 && g.kind == 7 && g.rkey == m.rkey &&
	      g.seed == 9 && g.size == m.size && g.addr == m.addr && g.iters == 3 &&
	      g.value == -1 && !strcmp(g.text, "device rxe1"), "fields differ after the round trip");
}

static void wire_bad_messages_named(void)
{
	struct sp_link_msg m = { .type = SP_MSG_DONE }, g;
	struct sp_link_hello h = { .version = SP_LINK_VERSION, .tool = SP_LINK_BENCH,
				   .role = SP_LINK_CTRL, .token = 42 }, hg;
	uint8_t w[SP_LINK_MSG_LEN], hw[SP_LINK_HELLO_LEN];
	char why[200];

	sp_link_msg_put(w, SP_LINK_BENCH, &m);
	CHECK(sp_link_msg_get(w, SP_LINK_DOCTOR, &g, why, sizeof(why)) == -EPROTO &&
	      strstr(why, "strixpeerctl bench") && strstr(why, "expected strixpeerctl doctor"),
	      "another tool's message: %s", why);
	w[4] = SP_LINK_VERSION + 1;
	CHECK(sp_link_msg_get(w, SP_LINK_BENCH, &g, why, sizeof(why)) == -EPROTO &&
	      strstr(why, "protocol version"), "another version: %s", why);
	w[4] = SP_LINK_VERSION;
	w[8] = SP_MSG_MAX_;
	CHECK(sp_link_msg_get(w, SP_LINK_BENCH, &g, why, sizeof(why)) == -EPROTO &&
	      strstr(why, "unknown type"), "unknown type: %s", why);
	w[0] = 'X';
	CHECK(sp_link_msg_get(w, SP_LINK_BENCH, &g, why, sizeof(why)) == -EPROTO &&
	      strstr(why, "magic"), "no magic: %s", why);

	sp_link_hello_put(hw, &h);
	CHECK(sp_link_hello_get(hw, sizeof(hw), &hg, why, sizeof(why)) == 0 && hg.token == 42 &&
	      hg.tool == SP_LINK_BENCH && hg.role == SP_LINK_CTRL, "hello round trip: %s", why);
	CHECK(sp_link_hello_get(hw, 8, &hg, why, sizeof(why)) == -EPROTO, "a short hello accepted");
	CHECK(sp_link_hello_get(NULL, 0, &hg, why, sizeof(why)) == -EPROTO &&
	      strstr(why, "no strixpeer hello"), "no private data: %s", why);
	CHECK(sp_link_port_ok("0", why, sizeof(why)) == -EINVAL &&
	      sp_link_port_ok("65536", why, sizeof(why)) == -EINVAL &&
	      sp_link_port_ok("18x", why, sizeof(why)) == -EINVAL &&
	      sp_link_port_ok(SP_LINK_PORT_DOCTOR, why, sizeof(why)) == 0 &&
	      strcmp(SP_LINK_PORT_DOCTOR, SP_LINK_PORT_BENCH), "ports");
}

/* --- a server in a child ----------------------------------------------------- */

enum srv_mode { SRV_SILENT_CLIENT, SRV_SAYS_NOTHING, SRV_SESSION };

struct srv_report {
	int ret;
	double secs;
	char why[320];
};

struct srv {
	pid_t pid;
	int rfd;	/* the report */
};

static void srv_child(enum sp_link_tool tool, const char *port, enum srv_mode mode, int ready,
		      int report)
{
	struct srv_report r = { 0 };
	struct sp_link_srv s;
	struct sp_link l;
	struct sp_link_msg m;
	struct sp_link_ep d = { 0 };
	double t0;

	r.ret = sp_link_listen(&s, tool, srv_addr(), port, r.why, sizeof(r.why));
	if (r.ret)
		goto out;
	if (write(ready, "r", 1) != 1)
		_exit(3);
	r.ret = sp_link_accept(&s, &l, NULL, 60000, r.why, sizeof(r.why));
	if (r.ret)
		goto out;
	t0 = now_s();
	switch (mode) {
	case SRV_SILENT_CLIENT:	/* the client says nothing: our bound ends it */
		l.timeout_ms = SILENT_MS;
		r.ret = sp_link_recv(&l, &m, 0, r.why, sizeof(r.why));
		break;
	case SRV_SAYS_NOTHING:	/* we say nothing until the client gives up */
		l.timeout_ms = 60000;
		r.ret = sp_link_recv(&l, &m, 0, r.why, sizeof(r.why));
		break;
	case SRV_SESSION:
		r.ret = sp_link_data_accept(&l, NULL, &d, r.why, sizeof(r.why));
		if (!r.ret)
			r.ret = sp_link_recv(&l, &m, SP_MSG_BUFFER, r.why, sizeof(r.why));
		if (!r.ret) {
			m.type = SP_MSG_TARGET;
			m.addr = m.size + 1;
			m.rkey = 0xabcdef01;
			m.value = -1;
			snprintf(m.text, sizeof(m.text), "served by %s",
				 ibv_get_device_name(d.rc.ctx->device));
			r.ret = sp_link_send(&l, &m, r.why, sizeof(r.why));
		}
		if (!r.ret)	/* until the client closes */
			r.ret = sp_link_recv(&l, &m, 0, r.why, sizeof(r.why)) == -ECONNRESET ? 0 : -EPROTO;
		sp_link_ep_close(&d);
		break;
	}
	r.secs = now_s() - t0;
	sp_link_close(&l);
out:
	if (write(report, &r, sizeof(r)) != sizeof(r))
		_exit(3);
	_exit(0);
}

static struct srv srv_start(enum sp_link_tool tool, const char *port, enum srv_mode mode)
{
	int ready[2], report[2];
	struct pollfd p;
	struct srv s;
	char c;

	CHECK(pipe(ready) == 0 && pipe(report) == 0, "pipe");
	s.pid = fork();
	CHECK(s.pid >= 0, "fork");
	if (s.pid == 0) {
		close(ready[0]);
		close(report[0]);
		srv_child(tool, port, mode, ready[1], report[1]);
	}
	close(ready[1]);
	close(report[1]);
	s.rfd = report[0];
	p.fd = ready[0];
	p.events = POLLIN;
	if (poll(&p, 1, 60000) != 1 || read(ready[0], &c, 1) != 1) {
		struct srv_report r = { 0 };

		if (read(s.rfd, &r, sizeof(r)) == sizeof(r))
			tap_fail(__FILE__, __LINE__, "listening", "the server did not listen: %s", r.why);
		tap_fail(__FILE__, __LINE__, "listening", "the server did not listen within 60 s");
	}
	close(ready[0]);
	return s;
}

static struct srv_report srv_end(struct srv *s)
{
	struct srv_report r = { .ret = -EIO };
	struct pollfd p = { .fd = s->rfd, .events = POLLIN };

	if (poll(&p, 1, 120000) != 1 || read(s->rfd, &r, sizeof(r)) != sizeof(r))
		snprintf(r.why, sizeof(r.why), "no report from the server within 120 s");
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	close(s->rfd);
	return r;
}

/* --- what a peer can do wrong ---------------------------------------------- */

/* A client connects and says nothing: the server gives up at its bound, says so. */
static void silent_client_bounded(void)
{
	struct sp_link l;
	struct sp_link_msg m;
	struct srv s;
	struct srv_report r;
	char why[320];
	int ret;

	need_rdma_cm();
	s = srv_start(SP_LINK_TEST, "18591", SRV_SILENT_CLIENT);
	ret = sp_link_connect(&l, SP_LINK_TEST, srv_addr(), "18591", cli_addr(), NULL, 0, why,
			      sizeof(why));
	CHECK(ret == 0, "connect: %s", why);
	/* silent; the server's giving up closes the connection, which we see */
	l.timeout_ms = 90000;
	ret = sp_link_recv(&l, &m, 0, why, sizeof(why));
	tap_diag("client: %s", why);
	CHECK(ret == -ECONNRESET && strstr(why, "closed the connection"), "client: %d %s", ret, why);
	sp_link_close(&l);
	r = srv_end(&s);
	tap_diag("server after %.1f s: %s", r.secs, r.why);
	CHECK(r.ret == -ETIMEDOUT && strstr(r.why, "nothing came") && strstr(r.why, cli_addr()),
	      "server: %d %s", r.ret, r.why);
	CHECK(r.secs >= SILENT_MS / 1000.0 - 0.1, "gave up after %.1f s, before its bound", r.secs);
}

/* The server accepts and says nothing: the client's wait ends at its bound. */
static void silent_server_bounded(void)
{
	struct sp_link l;
	struct sp_link_msg m;
	struct srv s;
	struct srv_report r;
	char why[320];
	double t0;
	int ret;

	need_rdma_cm();
	s = srv_start(SP_LINK_TEST, "18592", SRV_SAYS_NOTHING);
	ret = sp_link_connect(&l, SP_LINK_TEST, srv_addr(), "18592", cli_addr(), NULL, 0, why,
			      sizeof(why));
	CHECK(ret == 0, "connect: %s", why);
	l.timeout_ms = SILENT_MS;
	t0 = now_s();
	ret = sp_link_recv(&l, &m, SP_MSG_TARGET, why, sizeof(why));
	tap_diag("client after %.1f s: %s", now_s() - t0, why);
	CHECK(ret == -ETIMEDOUT && strstr(why, "TARGET") && strstr(why, "nothing came") &&
	      strstr(why, srv_addr()), "client: %d %s", ret, why);
	sp_link_close(&l);
	r = srv_end(&s);
	CHECK(r.ret == -ECONNRESET, "the server did not see the client go: %d %s", r.ret, r.why);
}

/* A doctor client at a bench server: both sides say which is which. */
static void other_tool_refused(void)
{
	struct sp_link l;
	struct srv s;
	struct srv_report r;
	char why[320];
	int ret;

	need_rdma_cm();
	s = srv_start(SP_LINK_BENCH, "18593", SRV_SESSION);
	ret = sp_link_connect(&l, SP_LINK_DOCTOR, srv_addr(), "18593", cli_addr(), NULL, 0, why,
			      sizeof(why));
	tap_diag("client: %s", why);
	CHECK(ret == -EPROTO && strstr(why, "it is 'strixpeerctl bench --serve', not 'strixpeerctl doctor serve'"),
	      "client: %d %s", ret, why);
	r = srv_end(&s);
	tap_diag("server: %s", r.why);
	CHECK(r.ret == -EPROTO && strstr(r.why, "a strixpeerctl doctor client") &&
	      strstr(r.why, "refused"), "server: %d %s", r.ret, r.why);
}

/* Nobody listens on the port: the client says it cannot reach a server there. */
static void nobody_listening(void)
{
	struct sp_link l;
	char why[320];
	double t0 = now_s();
	int ret;

	need_rdma_cm();
	ret = sp_link_connect(&l, SP_LINK_BENCH, srv_addr(), "18594", cli_addr(), NULL, 0, why,
			      sizeof(why));
	tap_diag("after %.1f s: %s", now_s() - t0, why);
	CHECK(ret < 0 && strstr(why, "cannot reach the bench server at") &&
	      strstr(why, "'strixpeerctl bench --serve'"), "%d %s", ret, why);
}

/* A session: control and data connections, messages checked field by field. */
static void session_messages(void)
{
	struct sp_link_msg m = { .type = SP_MSG_BUFFER, .size = 1ull << 33 };
	struct sp_link_ep d;
	struct sp_link l;
	struct srv s;
	struct srv_report r;
	char why[320];
	int ret;

	need_rdma_cm();
	s = srv_start(SP_LINK_TEST, "18595", SRV_SESSION);
	ret = sp_link_connect(&l, SP_LINK_TEST, srv_addr(), "18595", cli_addr(), NULL, 0x5a, why,
			      sizeof(why));
	CHECK(ret == 0, "connect: %s", why);
	ret = sp_link_data_connect(&l, srv_addr(), "18595", cli_addr(), NULL, &d, why, sizeof(why));
	CHECK(ret == 0, "data connection: %s", why);
	CHECK(sp_rc_qp_state(&d.rc) == IBV_QPS_RTS, "data QP %s",
	      sp_rc_qp_state_str(sp_rc_qp_state(&d.rc)));
	ret = sp_link_call(&l, &m, SP_MSG_TARGET, why, sizeof(why));
	CHECK(ret == 0, "call: %s", why);
	CHECK(m.addr == (1ull << 33) + 1 && m.rkey == 0xabcdef01 && m.value == -1 &&
	      !strncmp(m.text, "served by rxe", 13), "answer: addr %llx rkey %x value %lld text %s",
	      (unsigned long long)m.addr, m.rkey, (long long)m.value, m.text);
	sp_link_ep_close(&d);
	sp_link_close(&l);
	r = srv_end(&s);
	CHECK(r.ret == 0, "server: %d %s", r.ret, r.why);
}

__attribute__((constructor)) static void verbs_preload(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (list)
		ibv_free_device_list(list);
}

static const struct tap_case cases[] = {
	TAP_CASE(wire_roundtrip_little_endian),
	TAP_CASE(wire_bad_messages_named),
	TAP_CASE_T(silent_client_bounded, 180),
	TAP_CASE_T(silent_server_bounded, 180),
	TAP_CASE_T(other_tool_refused, 180),
	TAP_CASE_T(nobody_listening, 180),
	TAP_CASE_T(session_messages, 180),
};

TAP_MAIN(cases)
