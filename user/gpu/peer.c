// SPDX-License-Identifier: MIT
/*
 * gpu proof on two nodes: the peer is 'strixpeerctl gpu proof --serve' on
 * the other node, reached through user/rdma/link.h (librdmacm, one port,
 * SP_LINK_PORT_GPU by default, a hello naming the tool and its version).
 *
 * The client opens the control connection and a data connection; the
 * memory under test is registered on the data connection's PD, and the
 * server's queue pair of that connection is the peer that reads and
 * writes it. The server owns a plain host buffer (malloc'ed, registered
 * on its NIC), the source of its WRITEs and the sink of its READs.
 *
 * Messages (all answered, every wait bounded):
 *   OPEN    kind: GP_PROTO, size: the largest operation. DONE: status,
 *           text "DEVICE\nKERNEL\nFIRMWARE" (the server's NIC, uname -r,
 *           the NIC's firmware); another protocol is refused with a
 *           sentence.
 *   TARGET  kind: GP_OP_WRITE (fill the buffer with the pattern of seed,
 *           RDMA WRITE size bytes to addr/rkey) or GP_OP_READ (RDMA READ
 *           them, compare every byte with the pattern of seed).
 *           VERIFIED: status, value the first wrong byte or -1.
 *   QUIT    DONE; the server waits for its next client.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <infiniband/verbs.h>

#include "gpu/proof_int.h"
#include "rdma/link.h"

#define GP_PROTO	1		/* bumped when a message changes meaning */
#define GP_OP_WRITE	1
#define GP_OP_READ	2
#define GP_MAX_BUF	(1ULL << 30)	/* the largest --size */
#define GP_IDLE_MS	600000		/* the server: a client's next request */
#define GP_QUIT_MS	5000		/* the client: QUIT's answer */

struct gp_remote {
	struct sp_link link;
	bool linked;
	struct sp_link_ep data;
};

/* Both sides' data queue pair: the server's READs and WRITEs, one at a time. */
static void gp_data_qp(struct sp_link_qp *qp)
{
	memset(qp, 0, sizeof(*qp));
	qp->cap.max_send_wr = 4;
	qp->cap.max_recv_wr = 1;
	qp->cap.max_send_sge = 1;
	qp->cap.max_recv_sge = 1;
	qp->rd_atomic = 16;
}

/* --- client ---------------------------------------------------------------- */

/* The next line of @*s (split at '\n') into @out. */
static void gp_field(const char **s, char *out, size_t len)
{
	const char *nl = strchr(*s, '\n');
	size_t n = nl ? (size_t)(nl - *s) : strlen(*s);

	snprintf(out, len, "%.*s", (int)n, *s);
	*s += n + (nl ? 1 : 0);
}

int gp_remote_open(struct gp_ctx *c, struct sp_gp_facts *f, char *why, size_t wl)
{
	const struct sp_gp_opts *o = c->o;
	const char *port = o->port ? o->port : SP_LINK_PORT_GPU;
	struct gp_remote *r = calloc(1, sizeof(*r));
	struct sp_link_msg m;
	struct sp_link_qp qp;
	const char *t;
	int ret;

	if (!r) {
		snprintf(why, wl, "out of memory");
		return -ENOMEM;
	}
	c->remote = r;
	snprintf(f->mode, sizeof(f->mode), "two-node");
	ret = sp_link_connect(&r->link, SP_LINK_GPU, o->server, port, o->bind, NULL, 0, why, wl);
	if (ret)
		return ret;
	r->linked = true;
	/* a request's answer waits for the server's RDMA operation */
	r->link.timeout_ms = GP_WAIT_MS + SP_LINK_WAIT_MS;
	snprintf(f->server, sizeof(f->server), "%s", r->link.peer);
	gp_data_qp(&qp);
	ret = sp_link_data_connect(&r->link, o->server, port, o->bind, &qp, &r->data, why, wl);
	if (ret)
		return ret;
	c->local = r->data.rc;	/* borrowed: closed through @r */
	snprintf(f->local_dev, sizeof(f->local_dev), "%s",
		 ibv_get_device_name(c->local.ctx->device));
	memset(&m, 0, sizeof(m));
	m.type = SP_MSG_OPEN;
	m.kind = GP_PROTO;
	m.size = c->bufsz;
	ret = sp_link_call(&r->link, &m, SP_MSG_DONE, why, wl);
	if (ret)
		return ret;
	t = m.text;
	gp_field(&t, f->peer_dev, sizeof(f->peer_dev));
	gp_field(&t, f->server_kernel, sizeof(f->server_kernel));
	gp_field(&t, f->peer_fw, sizeof(f->peer_fw));
	return 0;
}

void gp_remote_close(struct gp_ctx *c)
{
	struct gp_remote *r = c->remote;
	struct sp_link_msg m;
	char why[256];

	if (!r)
		return;
	if (r->linked && !r->link.gone) {
		/* best effort: the server ends the session either way */
		memset(&m, 0, sizeof(m));
		m.type = SP_MSG_QUIT;
		r->link.timeout_ms = GP_QUIT_MS;
		sp_link_call(&r->link, &m, SP_MSG_DONE, why, sizeof(why));
	}
	sp_link_ep_close(&r->data);
	if (r->linked)
		sp_link_close(&r->link);
	memset(&c->local, 0, sizeof(c->local));
	free(r);
	c->remote = NULL;
}

/* One TARGET request: 0 and @m's answer, or < 0 and @why. */
static int gp_remote_op(struct gp_ctx *c, uint32_t op, uint64_t raddr, uint32_t rkey,
			size_t len, uint32_t seed, struct sp_link_msg *m, char *why, size_t wl)
{
	memset(m, 0, sizeof(*m));
	m->type = SP_MSG_TARGET;
	m->kind = op;
	m->addr = raddr;
	m->rkey = rkey;
	m->size = len;
	m->seed = seed;
	return sp_link_call(&c->remote->link, m, SP_MSG_VERIFIED, why, wl);
}

static int gp_remote_write(struct gp_ctx *c, uint64_t raddr, uint32_t rkey, size_t len,
			   uint32_t seed, char *why, size_t wl)
{
	struct sp_link_msg m;

	return gp_remote_op(c, GP_OP_WRITE, raddr, rkey, len, seed, &m, why, wl) ? -1 : 0;
}

static int64_t gp_remote_read(struct gp_ctx *c, uint64_t raddr, uint32_t rkey, size_t len,
			      uint32_t seed, char *why, size_t wl)
{
	struct sp_link_msg m;

	if (gp_remote_op(c, GP_OP_READ, raddr, rkey, len, seed, &m, why, wl))
		return -2;
	if (m.value < -1 || m.value >= (int64_t)len) {
		snprintf(why, wl, "the server answered a first wrong byte %lld of %zu",
			 (long long)m.value, len);
		return -2;
	}
	return m.value;
}

const struct gp_peer_ops gp_remote_ops = { .write = gp_remote_write, .read = gp_remote_read };

/* --- server ---------------------------------------------------------------- */

/* C requires volatile sig_atomic_t for a flag set by a signal handler */
static volatile sig_atomic_t gp_stop;

static void gp_on_signal(int sig)
{
	gp_stop = sig;
}

struct gp_srv_buf {
	uint8_t *p;
	size_t len;
	struct ibv_mr *mr;
};

/* The answer @r to the request @q; the session goes on unless @q was QUIT. */
static void gp_serve_one(struct sp_link_ep *d, struct gp_srv_buf *b, const struct sp_link_msg *q,
			 struct sp_link_msg *r)
{
	enum ibv_wr_opcode op = q->kind == GP_OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	int ret;

	memset(r, 0, sizeof(*r));
	if (q->type == SP_MSG_QUIT) {
		r->type = SP_MSG_DONE;
		return;
	}
	r->type = SP_MSG_VERIFIED;
	r->value = -1;
	if (q->type != SP_MSG_TARGET) {
		r->type = SP_MSG_DONE;
		r->status = -EPROTO;
		snprintf(r->text, sizeof(r->text), "unexpected request %s",
			 sp_link_type_name(q->type));
		return;
	}
	if ((q->kind != GP_OP_WRITE && q->kind != GP_OP_READ) || !q->size || q->size > b->len) {
		r->status = -EINVAL;
		snprintf(r->text, sizeof(r->text), "bad request: operation %u of %llu bytes (at most %zu)",
			 q->kind, (unsigned long long)q->size, b->len);
		return;
	}
	if (op == IBV_WR_RDMA_WRITE)
		sp_rc_fill(b->p, q->size, 0, q->seed);
	else
		memset(b->p, 0, q->size);
	ret = sp_rc_rdma(&d->rc, op, b->mr, 0, q->addr, q->rkey, (uint32_t)q->size, GP_WAIT_MS,
			 r->text, sizeof(r->text));
	if (ret) {
		r->status = ret;
		return;
	}
	if (op == IBV_WR_RDMA_READ)
		r->value = sp_rc_verify(b->p, q->size, 0, q->seed);
}

/* OPEN's answer: the buffer made, the server's facts; 0 or -errno. */
static int gp_serve_open(struct sp_link_ep *d, struct gp_srv_buf *b, const struct sp_link_msg *q,
			 struct sp_link_msg *r)
{
	const char *dev = ibv_get_device_name(d->rc.ctx->device);
	struct utsname u;
	char fw[64];
	void *p = NULL;

	memset(r, 0, sizeof(*r));
	r->type = SP_MSG_DONE;
	if (q->kind != GP_PROTO) {
		r->status = -EPROTO;
		snprintf(r->text, sizeof(r->text),
			 "gpu proof protocol %u, this server speaks %u: use the same strixpeerctl on both nodes",
			 q->kind, GP_PROTO);
	} else if (q->size < 4096 || q->size > GP_MAX_BUF) {
		r->status = -EINVAL;
		snprintf(r->text, sizeof(r->text), "bad buffer size %llu: 4 KiB to 1 GiB",
			 (unsigned long long)q->size);
	} else if (posix_memalign(&p, 4096, q->size)) {
		r->status = -ENOMEM;
		snprintf(r->text, sizeof(r->text), "out of memory for a %llu-byte buffer",
			 (unsigned long long)q->size);
	} else {
		b->p = p;
		b->len = q->size;
		b->mr = ibv_reg_mr(d->rc.pd, p, b->len, IBV_ACCESS_LOCAL_WRITE);
		if (!b->mr) {
			r->status = -errno;
			snprintf(r->text, sizeof(r->text), "ibv_reg_mr on %s: %s", dev,
				 strerror(errno));
		}
	}
	if (r->status)
		return r->status;
	gp_nic_fw(dev, fw, sizeof(fw));
	snprintf(r->text, sizeof(r->text), "%s\n%s\n%s", dev,
		 uname(&u) ? "unknown" : u.release, fw);
	return 0;
}

/* One client's session, until QUIT or an error; says how it ended. */
static void gp_serve_client(struct sp_link *l)
{
	struct gp_srv_buf b = { NULL, 0, NULL };
	struct sp_link_ep d;
	struct sp_link_qp qp;
	struct sp_link_msg q, r;
	unsigned long n = 0;
	char why[320] = "";
	int ret;

	memset(&d, 0, sizeof(d));
	gp_data_qp(&qp);
	ret = sp_link_data_accept(l, &qp, &d, why, sizeof(why));
	if (!ret)
		ret = sp_link_recv(l, &q, SP_MSG_OPEN, why, sizeof(why));
	if (!ret) {
		int oret = gp_serve_open(&d, &b, &q, &r);

		ret = sp_link_send(l, &r, why, sizeof(why));
		if (!ret && oret) {
			ret = oret;
			snprintf(why, sizeof(why), "refused %s: %s", l->peer, r.text);
		}
	}
	if (!ret)
		fprintf(stderr, "gpu proof: serving %s on %s\n", l->peer,
			ibv_get_device_name(d.rc.ctx->device));
	while (!ret) {
		l->timeout_ms = GP_IDLE_MS;
		ret = sp_link_recv(l, &q, 0, why, sizeof(why));
		if (ret)
			break;
		gp_serve_one(&d, &b, &q, &r);
		n++;
		ret = sp_link_send(l, &r, why, sizeof(why));
		if (q.type == SP_MSG_QUIT)
			break;
	}
	if (ret)
		fprintf(stderr, "gpu proof: %s\n", why);
	else
		fprintf(stderr, "gpu proof: %s done, %lu requests\n", l->peer, n);
	if (b.mr)
		ibv_dereg_mr(b.mr);
	free(b.p);
	sp_link_ep_close(&d);
}

int sp_gp_serve(const char *bind, const char *port, char *err, size_t errlen)
{
	struct sigaction sa;
	struct sp_link_srv srv;
	char why[320];
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = gp_on_signal;	/* no SA_RESTART: the waits end */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = sp_link_listen(&srv, SP_LINK_GPU, bind, port ? port : SP_LINK_PORT_GPU, err,
			     errlen);
	if (ret)
		return ret;
	fprintf(stderr, "gpu proof: listening on %s, serving one client at a time\n", srv.where);
	fflush(stderr);
	while (!gp_stop) {
		struct sp_link l;

		memset(&l, 0, sizeof(l));
		ret = sp_link_accept(&srv, &l, NULL, 1000, why, sizeof(why));
		if (ret == -ETIMEDOUT || (ret && gp_stop))
			continue;
		if (ret) {
			fprintf(stderr, "gpu proof: %s\n", why);
			continue;
		}
		l.timeout_ms = SP_LINK_WAIT_MS;
		gp_serve_client(&l);
		sp_link_close(&l);
	}
	sp_link_srv_close(&srv);
	fprintf(stderr, "gpu proof: server stopped (%s)\n", strsignal(gp_stop));
	return 0;
}
