// SPDX-License-Identifier: MIT
/*
 * link.h's connections: librdmacm ids on one event channel, the hello in
 * the connect/accept/reject private data, control messages as SENDs on
 * the control connection's queue pair. Every wait has a deadline and says
 * what it waited for, and from whom, when it passes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "link.h"
#include "link_int.h"

int64_t sp_link_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *short_name(unsigned int tool)
{
	return tool == SP_LINK_DOCTOR ? "doctor" : tool == SP_LINK_BENCH ? "bench" :
	       tool == SP_LINK_GPU ? "gpu proof" : "test";
}

int sp_link_left_ms(int64_t deadline)
{
	int64_t d = deadline - sp_link_now_ms();

	return d < 0 ? 0 : d > 3600000 ? 3600000 : (int)d;
}

/* The next event on @ch within @ms: 0, -ETIMEDOUT or -errno. */
static int next_event(struct rdma_event_channel *ch, int ms, struct rdma_cm_event **ev)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	int64_t deadline = sp_link_now_ms() + ms;
	int n;

	for (;;) {
		n = poll(&pfd, 1, sp_link_left_ms(deadline));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		return rdma_get_cm_event(ch, ev) ? -(errno ? errno : EIO) : 0;
	}
}

static void hello_init(struct sp_link_hello *h, enum sp_link_tool tool, enum sp_link_role role,
		       uint32_t token, uint32_t flags)
{
	memset(h, 0, sizeof(*h));
	h->magic = SP_LINK_MAGIC;
	h->version = SP_LINK_VERSION;
	h->tool = (uint8_t)tool;
	h->role = (uint8_t)role;
	h->token = token;
	h->flags = flags;
}

/* Refuse the request on @id with our hello saying why. */
static void refuse(struct rdma_cm_id *id, enum sp_link_tool tool, enum sp_link_reason reason)
{
	struct sp_link_hello h;
	uint8_t pd[SP_LINK_HELLO_LEN];

	hello_init(&h, tool, SP_LINK_REJECT, 0, 0);
	h.reason = reason;
	sp_link_hello_put(pd, &h);
	rdma_reject(id, pd, sizeof(pd));
}

static void peer_name(struct rdma_cm_id *id, char *out, size_t len)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char a[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, a, sizeof(a));
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, a, sizeof(a));
	snprintf(out, len, "%s", a);
}

/* A connect request to a @tool server: SP_LINK_R_NONE, or why to refuse it. */
static enum sp_link_reason judge(enum sp_link_tool tool, const struct rdma_cm_event *ev,
				 struct sp_link_hello *h, const char *who, char *why, size_t len)
{
	char e[160];

	if (sp_link_hello_get(ev->param.conn.private_data, ev->param.conn.private_data_len, h, e,
			      sizeof(e))) {
		snprintf(why, len, "%s: not a strixpeer client (%s): refused", who, e);
		return SP_LINK_R_TOOL;
	}
	if (h->version != SP_LINK_VERSION) {
		snprintf(why, len, "%s: a client of protocol version %u (this is %u): refused; use the same strixpeerctl on both nodes",
			 who, h->version, SP_LINK_VERSION);
		return SP_LINK_R_VERSION;
	}
	if (h->tool != tool) {
		snprintf(why, len, "%s: a %s client, this is %s: refused", who,
			 sp_link_tool_name(h->tool), sp_link_tool_server(tool));
		return SP_LINK_R_TOOL;
	}
	return SP_LINK_R_NONE;
}

/*
 * An event that is not the one being waited for: the control id's
 * disconnect marks the link gone; a server's other connect requests are
 * refused (busy), except this session's data connection, kept for
 * sp_link_data_accept().
 */
void sp_link_other_event(struct sp_link *l, struct rdma_cm_event *ev)
{
	struct sp_link_hello h;
	char why[256];

	if (ev->id == l->ctl.id && (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
				    ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL))
		l->gone = true;
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct rdma_cm_id *id = ev->id;
		enum sp_link_reason r = judge(l->tool, ev, &h, "client", why, sizeof(why));

		if (!r && h.role == SP_LINK_DATA && h.token == l->token && !l->held) {
			l->held = id;
			rdma_ack_cm_event(ev);
			return;
		}
		refuse(id, l->tool, r ? r : SP_LINK_R_BUSY);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id);
		return;
	}
	rdma_ack_cm_event(ev);
}

/*
 * Wait for @id's next event until @deadline. It is @want: 0 (the event acked,
 * or in @keep). Another one for @id: 1 with it in @keep, else -ECONNABORTED.
 * Other ids' events go to sp_link_other_event().
 */
static int wait_event_until(struct sp_link *l, struct rdma_cm_id *id,
			    enum rdma_cm_event_type want, struct rdma_cm_event **keep,
			    const char *what, int64_t deadline, char *why, size_t len)
{
	struct rdma_cm_event *ev;

	for (;;) {
		int ret = next_event(l->ch, sp_link_left_ms(deadline), &ev);

		if (ret == -ETIMEDOUT) {
			snprintf(why, len, "no %s from %s within %d s", what, l->peer,
				 l->timeout_ms / 1000);
			return ret;
		}
		if (ret) {
			snprintf(why, len, "reading librdmacm's events: %s", strerror(-ret));
			return ret;
		}
		if (ev->id != id) {
			sp_link_other_event(l, ev);
			continue;
		}
		if (keep) {
			*keep = ev;
			return ev->event == want ? 0 : 1;
		}
		if (ev->event == want) {
			rdma_ack_cm_event(ev);
			return 0;
		}
		snprintf(why, len, "%s: expected %s, got %s (status %d)", l->peer, what,
			 rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -ECONNABORTED;
	}
}

/* wait_event_until() bounded by l->timeout_ms from now */
static int wait_event(struct sp_link *l, struct rdma_cm_id *id, enum rdma_cm_event_type want,
		      struct rdma_cm_event **keep, const char *what, char *why, size_t len)
{
	return wait_event_until(l, id, want, keep, what, sp_link_now_ms() + l->timeout_ms,
				why, len);
}

int sp_link_post_recv(struct sp_link *l, unsigned int slot, char *why, size_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)l->wire[slot], .length = SP_LINK_MSG_LEN, .lkey = l->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	int ret = ibv_post_recv(l->ctl.rc.qp, &wr, &bad);

	if (ret)
		snprintf(why, len, "%s: posting a control receive: %s", l->ctl.rc.name, strerror(ret));
	return -ret;
}

/* The queue pair of one connection on @id, sized for @qp plus @extra. */
static int ep_setup(struct sp_link_ep *d, struct rdma_cm_id *id, const struct sp_link_qp *qp,
		    bool ctl, char *why, size_t len)
{
	struct ibv_qp_cap cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
				  .max_recv_sge = 1 };
	int cqe;

	if (qp)
		cap = qp->cap;
	if (ctl) {
		cap.max_send_wr += 2;
		cap.max_recv_wr += SP_LINK_NRECV;
		cap.max_send_sge = cap.max_send_sge ? cap.max_send_sge : 1;
		cap.max_recv_sge = cap.max_recv_sge ? cap.max_recv_sge : 1;
	}
	cqe = qp && qp->cqe ? qp->cqe : (int)(cap.max_send_wr + cap.max_recv_wr);
	d->id = id;
	return sp_rc_cm_setup(&d->rc, id, cqe, &cap, ctl || !qp ? 0 : qp->flags, why, len);
}

static int ctl_setup(struct sp_link *l, struct rdma_cm_id *id, const struct sp_link_qp *qp,
		     char *why, size_t len)
{
	int ret = ep_setup(&l->ctl, id, qp, true, why, len);

	if (ret)
		return ret;
	l->mr = ibv_reg_mr(l->ctl.rc.pd, l->wire, sizeof(l->wire), IBV_ACCESS_LOCAL_WRITE);
	if (!l->mr) {
		ret = -(errno ? errno : ENOMEM);
		snprintf(why, len, "%s: registering the control messages: %s", l->ctl.rc.name,
			 strerror(-ret));
		return ret;
	}
	for (unsigned int i = 0; i < SP_LINK_NRECV && !ret; i++)
		ret = sp_link_post_recv(l, i, why, len);
	return ret;
}

static void conn_param(struct rdma_conn_param *cp, const struct sp_link_qp *qp, const void *pd,
		       uint8_t pdlen)
{
	uint8_t rd = qp && qp->rd_atomic ? qp->rd_atomic : 1;

	memset(cp, 0, sizeof(*cp));
	cp->private_data = pd;
	cp->private_data_len = pdlen;
	cp->responder_resources = rd;
	cp->initiator_depth = rd;
	cp->retry_count = 7;
	cp->rnr_retry_count = 7;
}

int sp_link_listen(struct sp_link_srv *s, enum sp_link_tool tool, const char *addr,
		   const char *port, char *why, size_t len)
{
	struct rdma_addrinfo hints = { 0 }, *res = NULL;
	int ret;

	memset(s, 0, sizeof(*s));
	s->tool = tool;
	snprintf(s->where, sizeof(s->where), "%s port %s", addr ? addr : "*", port ? port : "");
	ret = sp_link_port_ok(port, why, len);
	if (ret)
		return ret;
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo(addr, port, &hints, &res)) {
		ret = -(errno ? errno : EADDRNOTAVAIL);
		snprintf(why, len, "address %s: %s", s->where, strerror(-ret));
		return ret;
	}
	s->ch = rdma_create_event_channel();
	if (!s->ch || rdma_create_id(s->ch, &s->listen, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(s->listen, res->ai_src_addr) || rdma_listen(s->listen, 4)) {
		ret = -(errno ? errno : EIO);
		snprintf(why, len, "listening on %s: %s (is rdma_ucm loaded?%s)", s->where,
			 strerror(-ret), ret == -EADDRINUSE ? " is another server on this port?" : "");
		rdma_freeaddrinfo(res);
		sp_link_srv_close(s);
		return ret;
	}
	rdma_freeaddrinfo(res);
	return 0;
}

void sp_link_srv_close(struct sp_link_srv *s)
{
	if (s->listen)
		rdma_destroy_id(s->listen);
	if (s->ch)
		rdma_destroy_event_channel(s->ch);
	s->listen = NULL;
	s->ch = NULL;
}

int sp_link_accept(struct sp_link_srv *s, struct sp_link *l, const struct sp_link_qp *qp,
		   int wait_ms, char *why, size_t len)
{
	int64_t deadline = sp_link_now_ms() + wait_ms;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct sp_link_hello h;
	uint8_t pd[SP_LINK_HELLO_LEN];
	enum sp_link_reason r;
	int ret;

	memset(l, 0, sizeof(*l));
	l->tool = s->tool;
	l->timeout_ms = SP_LINK_WAIT_MS;
	l->ch = s->ch;
	l->srv = s;
	for (;;) {
		ret = next_event(s->ch, sp_link_left_ms(deadline), &ev);
		if (ret == -ETIMEDOUT)
			return ret;
		if (ret) {
			snprintf(why, len, "reading librdmacm's events: %s", strerror(-ret));
			return ret;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->listen_id == s->listen)
			break;
		rdma_ack_cm_event(ev);	/* a former client's, or the device's */
	}
	l->ctl.id = ev->id;
	peer_name(ev->id, l->peer, sizeof(l->peer));
	r = judge(s->tool, ev, &h, l->peer, why, len);
	if (!r && h.role != SP_LINK_CTRL) {
		snprintf(why, len, "%s: a data connection without its control one: refused", l->peer);
		r = SP_LINK_R_ROLE;
	}
	if (r) {
		refuse(ev->id, s->tool, r);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(l->ctl.id);
		l->ctl.id = NULL;
		return -EPROTO;
	}
	rdma_ack_cm_event(ev);
	l->token = h.token;
	l->peer_flags = h.flags;
	ret = ctl_setup(l, l->ctl.id, qp, why, len);
	if (ret) {
		refuse(l->ctl.id, s->tool, SP_LINK_R_SETUP);
		goto fail;
	}
	hello_init(&h, s->tool, SP_LINK_ACCEPT, l->token, 0);
	sp_link_hello_put(pd, &h);
	conn_param(&cp, qp, pd, sizeof(pd));
	if (rdma_accept(l->ctl.id, &cp)) {
		ret = -(errno ? errno : EIO);
		snprintf(why, len, "%s: rdma_accept: %s", l->peer, strerror(-ret));
		goto fail;
	}
	ret = wait_event(l, l->ctl.id, RDMA_CM_EVENT_ESTABLISHED, NULL, "the connection's establishment",
			 why, len);
	if (ret)
		goto fail;
	return 0;
fail:
	sp_link_close(l);
	return ret == -ETIMEDOUT ? -ECONNABORTED : ret;
}

/*
 * A new id in *@idp, its address resolved from @src to @dst within
 * l->timeout_ms. ib_core's resolution misses a neighbour's reply that comes
 * before its request is queued, and then sleeps its whole timeout before it
 * looks again (drivers/infiniband/core/addr.c: rdma_resolve_ip() queues its
 * request after neigh_event_send()): the first connection to a fresh
 * neighbour on the suite's veth pair hit that. So the kernel is given
 * SP_LINK_ADDR_TRY_MS per try, and a try that ran out is made again on a new
 * id until l->timeout_ms. -ENOTCONN (errno kept) when librdmacm refused it.
 */
static int resolve_addr(struct sp_link *l, struct rdma_cm_id **idp, struct sockaddr *src,
			struct sockaddr *dst, char *why, size_t len)
{
	int64_t deadline = sp_link_now_ms() + l->timeout_ms;
	struct rdma_cm_event *ev;
	int ret, left;

	for (;;) {
		left = sp_link_left_ms(deadline);
		if (rdma_create_id(l->ch, idp, l, RDMA_PS_TCP) ||
		    rdma_resolve_addr(*idp, src, dst, left < SP_LINK_ADDR_TRY_MS ?
				      (left > 0 ? left : 1) : SP_LINK_ADDR_TRY_MS)) {
			if (!errno)
				errno = EIO;
			return -ENOTCONN;
		}
		ret = wait_event_until(l, *idp, RDMA_CM_EVENT_ADDR_RESOLVED, &ev,
				       "address resolution", deadline, why, len);
		if (ret <= 0) {
			if (!ret)
				rdma_ack_cm_event(ev);
			return ret;
		}
		if (ev->event != RDMA_CM_EVENT_ADDR_ERROR || ev->status != -ETIMEDOUT ||
		    sp_link_left_ms(deadline) <= 0) {
			ret = ev->status == -ETIMEDOUT ? -ETIMEDOUT : -ECONNABORTED;
			if (ret == -ETIMEDOUT)
				snprintf(why, len, "no address resolution from %s within %d s",
					 l->peer, l->timeout_ms / 1000);
			else
				snprintf(why, len, "%s: expected address resolution, got %s (%s)",
					 l->peer, rdma_event_str(ev->event),
					 strerror(ev->status < 0 ? -ev->status : EIO));
			rdma_ack_cm_event(ev);
			return ret;
		}
		rdma_ack_cm_event(ev);
		rdma_destroy_id(*idp);
		*idp = NULL;
	}
}

/* A new id on @l's channel, its address and route resolved to @host @port. */
static int resolve(struct sp_link *l, struct rdma_cm_id **idp, const char *host,
		   const char *port, const char *src, char *why, size_t len)
{
	struct rdma_addrinfo hints = { 0 }, *res = NULL;
	struct sockaddr_in sin;
	struct sockaddr *sa = NULL;
	int ret;

	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo(host, port, &hints, &res)) {
		ret = -(errno ? errno : EHOSTUNREACH);
		snprintf(why, len, "cannot reach the %s server at %s: resolving it: %s",
			 short_name(l->tool), l->peer, strerror(-ret));
		return ret;
	}
	if (src) {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		if (inet_pton(AF_INET, src, &sin.sin_addr) != 1) {
			rdma_freeaddrinfo(res);
			snprintf(why, len, "local address %s is not IPv4", src);
			return -EINVAL;
		}
		sa = (struct sockaddr *)&sin;
	}
	ret = resolve_addr(l, idp, sa ? sa : res->ai_src_addr, res->ai_dst_addr, why, len);
	if (ret == -ENOTCONN) {
		ret = -errno;
		rdma_freeaddrinfo(res);
		snprintf(why, len, "cannot reach the %s server at %s: no route from %s: %s (is rdma_ucm loaded?)",
			 short_name(l->tool), l->peer, src ? src : "any address", strerror(-ret));
		return ret;
	}
	rdma_freeaddrinfo(res);
	if (!ret && rdma_resolve_route(*idp, l->timeout_ms)) {
		ret = -(errno ? errno : EIO);
		snprintf(why, len, "no route: rdma_resolve_route: %s", strerror(-ret));
	}
	if (!ret)
		ret = wait_event(l, *idp, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, "route resolution",
				 why, len);
	if (ret) {
		char e[256];

		snprintf(e, sizeof(e), "%s", why);
		snprintf(why, len, "cannot reach the %s server at %s: %s", short_name(l->tool),
			 l->peer, e);
	}
	return ret;
}

/* Connect @id (queue pair set up) with @role's hello; the answer checked. */
static int establish(struct sp_link *l, struct rdma_cm_id *id, enum sp_link_role role,
		     const struct sp_link_qp *qp, uint32_t flags, char *why, size_t len)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev = NULL;
	struct sp_link_hello h;
	uint8_t pd[SP_LINK_HELLO_LEN];
	char e[200];
	int ret;

	hello_init(&h, l->tool, role, l->token, flags);
	sp_link_hello_put(pd, &h);
	conn_param(&cp, qp, pd, sizeof(pd));
	if (rdma_connect(id, &cp)) {
		ret = -(errno ? errno : EIO);
		snprintf(why, len, "cannot reach the %s server at %s: rdma_connect: %s",
			 short_name(l->tool), l->peer, strerror(-ret));
		return ret;
	}
	ret = wait_event(l, id, RDMA_CM_EVENT_ESTABLISHED, &ev, "an answer to the connection", e,
			 sizeof(e));
	if (ret < 0) {
		snprintf(why, len, "cannot reach the %s server at %s (is %s running there?): %s",
			 short_name(l->tool), l->peer, sp_link_tool_server(l->tool), e);
		return ret;
	}
	ret = sp_link_hello_get(ev->param.conn.private_data, ev->param.conn.private_data_len, &h,
				e, sizeof(e));
	if (ev->event == RDMA_CM_EVENT_REJECTED && !ret && h.role == SP_LINK_REJECT) {
		sp_link_reject_str(&h, l->tool, e, sizeof(e));
		snprintf(why, len, "the server at %s refused the connection: %s", l->peer, e);
		ret = h.reason == SP_LINK_R_BUSY || h.reason == SP_LINK_R_SETUP ? -ECONNREFUSED
										  : -EPROTO;
	} else if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		snprintf(why, len, "cannot reach the %s server at %s (is %s running there?): %s (status %d)",
			 short_name(l->tool), l->peer, sp_link_tool_server(l->tool),
			 rdma_event_str(ev->event), ev->status);
		ret = -ECONNREFUSED;
	} else if (ret || h.role != SP_LINK_ACCEPT) {
		snprintf(why, len, "the server at %s answered without a strixpeer hello (%s): an older strixpeerctl? use the same one on both nodes",
			 l->peer, ret ? e : "not an acceptance");
		ret = -EPROTO;
	} else if (h.version != SP_LINK_VERSION || h.tool != l->tool) {
		snprintf(why, len, "the server at %s is %s of protocol version %u, not %s of %u",
			 l->peer, sp_link_tool_server(h.tool), h.version,
			 sp_link_tool_server(l->tool), SP_LINK_VERSION);
		ret = -EPROTO;
	} else {
		l->peer_flags = h.flags;
		ret = 0;
	}
	rdma_ack_cm_event(ev);
	return ret;
}

int sp_link_connect(struct sp_link *l, enum sp_link_tool tool, const char *host,
		    const char *port, const char *src, const struct sp_link_qp *qp,
		    uint32_t flags, char *why, size_t len)
{
	int ret;

	memset(l, 0, sizeof(*l));
	l->tool = tool;
	l->timeout_ms = SP_LINK_WAIT_MS;
	snprintf(l->peer, sizeof(l->peer), "%s port %s", host ? host : "", port ? port : "");
	ret = sp_link_port_ok(port, why, len);
	if (ret)
		return ret;
	l->token = (uint32_t)sp_link_now_ms() ^ (uint32_t)getpid() << 16;
	l->ch = rdma_create_event_channel();
	l->own_ch = true;
	if (!l->ch) {
		ret = -(errno ? errno : EIO);
		snprintf(why, len, "librdmacm: %s (is rdma_ucm loaded?)", strerror(-ret));
		return ret;
	}
	ret = resolve(l, &l->ctl.id, host, port, src, why, len);
	if (!ret)
		ret = ctl_setup(l, l->ctl.id, qp, why, len);
	if (!ret)
		ret = establish(l, l->ctl.id, SP_LINK_CTRL, qp, flags, why, len);
	if (ret)
		sp_link_close(l);
	return ret;
}

void sp_link_ep_close(struct sp_link_ep *d)
{
	if (d->id)
		rdma_disconnect(d->id);
	sp_rc_close(&d->rc);
	if (d->id)
		rdma_destroy_id(d->id);
	d->id = NULL;
}

void sp_link_close(struct sp_link *l)
{
	if (l->held) {
		refuse(l->held, l->tool, SP_LINK_R_BUSY);
		rdma_destroy_id(l->held);
		l->held = NULL;
	}
	if (l->mr)
		ibv_dereg_mr(l->mr);
	l->mr = NULL;
	sp_link_ep_close(&l->ctl);
	if (l->own_ch && l->ch)
		rdma_destroy_event_channel(l->ch);
	l->ch = NULL;
}

int sp_link_data_connect(struct sp_link *l, const char *host, const char *port,
			 const char *src, const struct sp_link_qp *qp, struct sp_link_ep *d,
			 char *why, size_t len)
{
	struct rdma_cm_id *id = NULL;
	int ret;

	memset(d, 0, sizeof(*d));
	ret = resolve(l, &id, host, port, src, why, len);
	if (ret) {
		if (id)
			rdma_destroy_id(id);
		return ret;
	}
	ret = ep_setup(d, id, qp, false, why, len);
	if (!ret)
		ret = establish(l, id, SP_LINK_DATA, qp, 0, why, len);
	if (ret) {
		d->id = id;
		sp_link_ep_close(d);
	}
	return ret;
}

int sp_link_data_accept(struct sp_link *l, const struct sp_link_qp *qp, struct sp_link_ep *d,
			char *why, size_t len)
{
	int64_t deadline = sp_link_now_ms() + l->timeout_ms;
	struct rdma_conn_param cp;
	struct sp_link_hello h;
	uint8_t pd[SP_LINK_HELLO_LEN];
	int ret;

	memset(d, 0, sizeof(*d));
	while (!l->held) {
		struct rdma_cm_event *ev;

		ret = next_event(l->ch, sp_link_left_ms(deadline), &ev);
		if (ret == -ETIMEDOUT) {
			snprintf(why, len, "no data connection from %s within %d s", l->peer,
				 l->timeout_ms / 1000);
			return ret;
		}
		if (ret) {
			snprintf(why, len, "reading librdmacm's events: %s", strerror(-ret));
			return ret;
		}
		sp_link_other_event(l, ev);
		if (l->gone) {
			snprintf(why, len, "%s closed the connection before its data connection", l->peer);
			return -ECONNRESET;
		}
	}
	d->id = l->held;
	l->held = NULL;
	ret = ep_setup(d, d->id, qp, false, why, len);
	if (ret) {
		refuse(d->id, l->tool, SP_LINK_R_SETUP);
		goto fail;
	}
	hello_init(&h, l->tool, SP_LINK_ACCEPT, l->token, 0);
	sp_link_hello_put(pd, &h);
	conn_param(&cp, qp, pd, sizeof(pd));
	if (rdma_accept(d->id, &cp)) {
		ret = -(errno ? errno : EIO);
		snprintf(why, len, "%s: rdma_accept of the data connection: %s", l->peer,
			 strerror(-ret));
		goto fail;
	}
	ret = wait_event(l, d->id, RDMA_CM_EVENT_ESTABLISHED, NULL,
			 "the data connection's establishment", why, len);
	if (!ret)
		return 0;
fail:
	sp_link_ep_close(d);
	return ret;
}
