// SPDX-License-Identifier: MIT
/*
 * strixpeerctl's benchmark, the RDMA part: RDMA WRITE, READ and SEND
 * bandwidth and latency between a client and a server, each side using
 * memory of the kind being measured, as perftest does.
 *
 * Client and server connect through rdma/link.h (librdmacm, perftest's
 * -R) on one port: a control connection carries the requests (allocate
 * memory of a kind, take part in a latency test), a data connection of the
 * same session the measured traffic.
 * On one node ("local" mode) the server is a forked child serving on the
 * second RDMA device, the client uses the first; across nodes the server
 * is sp_bench_serve() on the other node. sp_bench_rdma_run() also runs
 * the CPU-side figures, which bench.c hands it, once it knows the PD.
 *
 * Definitions (perftest's): bandwidth = bytes / time from the first post
 * to the last completion, in MiB/s (2^20), after an untimed warm-up of a
 * tenth of the iterations; latency = median over the iterations, of half
 * a round trip for WRITE (each side polls the last byte of its buffer for
 * the other's write) and SEND (ping-pong), of a whole RDMA READ. Every
 * sample is one repetition's value.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "strixpeer.h"
#include "bench_conn.h"

/* --- server -------------------------------------------------------------------- */

/* One request of a connected client, answered in @r; @q's type is QUIT: stop. */
static int sp_serve_request(struct sp_conn *c, struct sp_dev *dev, struct sp_bench_mem *m,
			    const struct sp_link_msg *q, struct sp_link_msg *r, size_t *half,
			    uint64_t *peer_addr, uint32_t *peer_rkey)
{
	int ret = 0;

	memset(r, 0, sizeof(*r));
	r->type = SP_MSG_DONE;
	switch (q->type) {
	case SP_MSG_OPEN:
		sp_bench_copy(r->text, sizeof(r->text), ibv_get_device_name(c->data.rc.ctx->device));
		break;
	case SP_MSG_ALLOC:
		sp_bench_mem_free(m);
		*half = q->size / 2;
		*peer_addr = q->addr;
		*peer_rkey = q->rkey;
		r->status = q->kind < SP_BENCH_NR_KINDS ?
			    sp_bench_mem_alloc(dev, (enum sp_bench_kind)q->kind, q->size, m) :
			    sp_bench_fail(EINVAL, "unknown memory kind %u", q->kind);
		if (!r->status) {
			sp_bench_mem_touch(m);
			r->status = sp_bench_mem_reg(dev, c->data.rc.pd, m, IBV_ACCESS_LOCAL_WRITE |
						     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		}
		if (r->status) {
			r->status = r->status < 0 ? r->status : -EIO;
			sp_bench_copy(r->text, sizeof(r->text), sp_bench_errmsg());
			sp_bench_mem_free(m);
		} else {
			r->addr = (uintptr_t)m->addr;
			r->rkey = sp_bench_mem_rkey(m);
		}
		break;
	case SP_MSG_FREE:
		sp_bench_mem_free(m);
		break;
	case SP_MSG_WRITE_LAT:
	case SP_MSG_SEND_LAT:
		if (!m->addr || q->size > *half)
			return sp_bench_fail(EPROTO, "%s of %llu bytes without memory for it",
					     sp_link_type_name(q->type), (unsigned long long)q->size);
		if (q->type == SP_MSG_SEND_LAT)
			ret = sp_bench_post_recv(c, m, *half, q->size);
		r->type = SP_MSG_READY;
		if (!ret)
			ret = sp_bench_send_msg(c, r);
		if (!ret)
			ret = q->type == SP_MSG_WRITE_LAT ?
			      sp_bench_write_pingpong(c, m, *half, q->size, *peer_addr, *peer_rkey,
						      q->iters, false, NULL) :
			      sp_bench_send_pingpong(c, m, *half, q->size, q->iters, false, NULL);
		r->type = SP_MSG_DONE;
		break;
	case SP_MSG_SEND_BW:
		if (!m->addr || q->size > *half)
			return sp_bench_fail(EPROTO, "SEND_BW of %llu bytes without memory for it",
					     (unsigned long long)q->size);
		ret = sp_bench_send_sink(c, m, *half, q->size, q->iters);
		break;
	case SP_MSG_QUIT:
		break;
	default:
		r->status = -EPROTO;
		snprintf(r->text, sizeof(r->text), "unexpected request %s",
			 sp_link_type_name(q->type));
	}
	return ret;
}

/* A connected client's requests, until QUIT or an error. */
static int sp_serve_client(struct sp_conn *c, const struct sp_bench_opts *o, struct sp_dev *dev,
			   bool *started)
{
	struct sp_bench_mem m = { .dmabuf_fd = -1, .card = -1 };
	struct sp_link_qp qp;
	uint64_t peer_addr = 0;
	uint32_t peer_rkey = 0;
	size_t half = 0;
	char why[320] = "";
	int ret;

	sp_bench_data_qp(o, true, &qp);
	ret = sp_link_data_accept(&c->link, &qp, &c->data, why, sizeof(why));
	if (ret)
		return sp_bench_fail(-ret, "%s", why);
	c->events = (c->link.peer_flags & SP_BENCH_EVENTS) != 0;
	for (bool first = true;; first = false) {
		struct sp_link_msg q, r;

		/* the first request within the usual bound; later ones may take the client a while */
		c->link.timeout_ms = first ? SP_LINK_WAIT_MS : SP_BENCH_IDLE_MS;
		ret = sp_bench_recv_msg(c, &q, first ? SP_MSG_OPEN : 0);
		c->link.timeout_ms = (int)(SP_WAIT_S * 1000);
		if (!ret) {
			*started = true;
			ret = sp_serve_request(c, dev, &m, &q, &r, &half, &peer_addr, &peer_rkey);
		}
		if (!ret)
			ret = sp_bench_send_msg(c, &r);
		if (ret || q.type == SP_MSG_QUIT)
			break;
	}
	sp_bench_mem_free(&m);
	return ret;
}

/*
 * Serve one client on @o's address and port; @ready_fd (if >= 0) gets a
 * byte once listening. Clients refused (another tool or version) or gone
 * before their first request are reported and the next one awaited.
 */
int sp_bench_rdma_serve(const struct sp_bench_opts *o, struct sp_dev *dev, int ready_fd)
{
	struct sp_link_srv srv;
	char why[320] = "";
	int ret;

	ret = sp_link_listen(&srv, SP_LINK_BENCH, o->serve_addr, o->port, why, sizeof(why));
	if (ready_fd >= 0) {
		if (!ret && write(ready_fd, "r", 1) != 1)
			ret = -EIO;
		close(ready_fd);
	}
	if (ret)
		return sp_bench_fail(-ret, "%s", why);
	if (ready_fd < 0) {
		fprintf(stderr, "bench: listening on %s, serving one client\n", srv.where);
		fflush(stderr);
	}
	for (;;) {
		struct sp_conn c = { .child = -1 };
		bool started = false;

		ret = sp_link_accept(&srv, &c.link, NULL, 1000, why, sizeof(why));
		if (ret == -ETIMEDOUT)
			continue;
		if (ret) {
			fprintf(stderr, "bench: %s\n", why);
			continue;
		}
		c.linked = true;
		c.link.timeout_ms = (int)(SP_WAIT_S * 1000);
		ret = sp_serve_client(&c, o, dev, &started);
		sp_bench_conn_close(&c);
		if (ret && !started) {
			/* connected and said nothing: not a session, wait for the next */
			fprintf(stderr, "bench: %s\n", sp_bench_errmsg());
			continue;
		}
		break;
	}
	sp_link_srv_close(&srv);
	return ret;
}

int sp_bench_serve(const struct sp_bench_opts *o)
{
	struct sp_bench_opts d;
	struct sp_dev *dev = NULL;
	int ret;

	d = *o;
	if (!d.port)
		d.port = SP_LINK_PORT_BENCH;
	if (!d.depth)
		d.depth = 128;
	if (sp_dev_open(NULL, &dev) < 0)
		dev = NULL;	/* strixpeer kinds are refused with the reason */
	ret = sp_bench_rdma_serve(&d, dev, -1);
	if (dev)
		sp_dev_close(dev);
	return ret;
}

/* --- client -------------------------------------------------------------------- */

/* The first two RDMA devices with an IPv4 RoCE GID: names and addresses. */
static int sp_ipv4_devices(char names[2][64], char addrs[2][64])
{
	int n = 0, found = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	for (int i = 0; list && i < n && found < 2; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_gid_entry ents[32];
		ssize_t cnt;

		if (!ctx)
			continue;
		cnt = ibv_query_gid_table(ctx, ents, 32, 0);
		for (ssize_t g = 0; g < cnt; g++) {
			static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
			const uint8_t *r = ents[g].gid.raw;

			if (ents[g].gid_type != IBV_GID_TYPE_ROCE_V2 || memcmp(r, v4, 12))
				continue;
			snprintf(names[found], 64, "%s", ibv_get_device_name(list[i]));
			snprintf(addrs[found], 64, "%u.%u.%u.%u", r[12], r[13], r[14], r[15]);
			found++;
			break;
		}
		ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
	return found;
}

static int sp_client_connect(struct sp_bench *b, struct sp_conn *c)
{
	const struct sp_bench_opts *o = &b->o;
	const char *src = b->client_addr[0] ? b->client_addr : NULL;
	struct sp_link_qp qp;
	struct sp_link_msg m;
	char why[320] = "";
	int ret;

	ret = sp_link_connect(&c->link, SP_LINK_BENCH, b->server_addr, o->port, src, NULL,
			      o->flags & SP_BENCH_EVENTS, why, sizeof(why));
	if (ret)
		return sp_bench_fail(-ret, "%s", why);
	c->linked = true;
	c->link.timeout_ms = (int)(SP_WAIT_S * 1000);
	sp_bench_data_qp(o, false, &qp);
	ret = sp_link_data_connect(&c->link, b->server_addr, o->port, src, &qp, &c->data, why,
				   sizeof(why));
	if (ret)
		return sp_bench_fail(-ret, "%s", why);
	c->events = (o->flags & SP_BENCH_EVENTS) != 0;
	sp_bench_copy(b->client_dev, sizeof(b->client_dev),
		      ibv_get_device_name(c->data.rc.ctx->device));
	memset(&m, 0, sizeof(m));
	m.type = SP_MSG_OPEN;
	ret = sp_bench_call(c, &m, SP_MSG_DONE);
	if (!ret)
		snprintf(b->server_dev, sizeof(b->server_dev), "%.63s", m.text);
	return ret;
}

static uint64_t sp_bw_iters(const struct sp_bench_opts *o, size_t size)
{
	uint64_t it = o->iters;

	if (it * size > o->max_bytes)
		it = o->max_bytes / size;
	return it < 8 ? 8 : it;
}

int sp_bench_bw_run(struct sp_conn *c, enum ibv_wr_opcode op, struct sp_bench_mem *m,
		    size_t size, uint64_t raddr, uint32_t rkey, uint64_t n, unsigned int depth,
		    double *secs)
{
	unsigned int every = depth / 2 ? (depth / 2 < 64 ? depth / 2 : 64) : 1;
	uint64_t posted = 0, done = 0;
	struct ibv_wc wc[32];
	double t0 = sp_bench_now();

	while (done < n) {
		int k;

		while (posted < n && posted - done < depth) {
			bool sig = (posted + 1) % every == 0 || posted + 1 == n;
			int ret = sp_bench_post(c, op, m, 0, size, raddr, rkey, posted + 1, sig);

			if (ret)
				return ret;
			posted++;
		}
		k = sp_bench_poll(c, wc, 32);
		if (k < 0)
			return k;
		for (int i = 0; i < k; i++)
			if (!(wc[i].opcode & IBV_WC_RECV) && wc[i].wr_id > done)
				done = wc[i].wr_id;
	}
	*secs = sp_bench_now() - t0;
	c->sends = 0;	/* all waited for here */
	return 0;
}

double sp_bench_median(double *v, uint64_t n)
{
	for (uint64_t i = 1; i < n; i++) {	/* insertion sort: n is small */
		double x = v[i];
		uint64_t j = i;

		while (j && v[j - 1] > x) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
	}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One message size of one op for one kind: bandwidth and latency samples. */
static int sp_measure(struct sp_bench *b, struct sp_conn *c, unsigned int op, size_t size,
		      struct sp_bench_mem *m, size_t half, uint64_t raddr, uint32_t rkey,
		      enum sp_bench_kind k)
{
	static const char *const bw_name[] = { "write_bw", "read_bw", "send_bw" };
	static const char *const lat_name[] = { "write_lat", "read_lat", "send_lat" };
	const struct sp_bench_opts *o = &b->o;
	enum ibv_wr_opcode opc = op == 0 ? IBV_WR_RDMA_WRITE :
				 op == 1 ? IBV_WR_RDMA_READ : IBV_WR_SEND;
	unsigned int depth = op == 1 && o->depth > SP_RD_DEPTH ? SP_RD_DEPTH : o->depth;
	uint64_t n = sp_bw_iters(o, size), warm = n / 10 + 1;
	uint64_t ln = o->lat_iters, lwarm;
	struct sp_bench_series *s;
	struct sp_link_msg q;
	double secs = 0, *lat;
	int ret;

	/* bandwidth */
	memset(&q, 0, sizeof(q));
	if (op == 2) {
		q.type = SP_MSG_SEND_BW;
		q.size = size;
		q.iters = warm + n;
		ret = sp_bench_call(c, &q, SP_MSG_READY);
		if (ret)
			return ret;
	}
	ret = sp_bench_bw_run(c, opc, m, size, raddr, rkey, warm, depth, &secs);
	if (!ret)
		ret = sp_bench_bw_run(c, opc, m, size, raddr, rkey, n, depth, &secs);
	if (!ret && op == 2)
		ret = sp_bench_recv_msg(c, &q, SP_MSG_DONE);
	if (ret)
		return ret;
	s = sp_bench_series_get(b, bw_name[op], size, "MiB/s", true);
	if (!s)
		return sp_bench_fail(ENOMEM, "out of memory");
	s->iters = n;
	sp_bench_add(s, k, (double)size * (double)n / secs / (1024.0 * 1024.0));

	/* latency: at most max_bytes per sample too, at least 5 iterations */
	if (ln * size > o->max_bytes)
		ln = o->max_bytes / size < 5 ? 5 : o->max_bytes / size;
	lwarm = ln / 10 + 1;
	lat = calloc(lwarm + ln, sizeof(*lat));
	if (!lat)
		return sp_bench_fail(ENOMEM, "out of memory");
	if (op == 1) {
		for (uint64_t i = 0; i < lwarm + ln && !ret; i++) {
			double t0 = sp_bench_now();

			ret = sp_bench_post(c, IBV_WR_RDMA_READ, m, half, size, raddr, rkey, i, true);
			if (!ret)
				ret = sp_bench_wait_one(c, false);
			lat[i] = (sp_bench_now() - t0) * 1e6;
		}
	} else {
		memset(&q, 0, sizeof(q));
		q.type = op == 0 ? SP_MSG_WRITE_LAT : SP_MSG_SEND_LAT;
		q.size = size;
		q.iters = lwarm + ln;
		if (op == 2)
			ret = sp_bench_post_recv(c, m, half, size);
		if (!ret)
			ret = sp_bench_call(c, &q, SP_MSG_READY);
		if (!ret)
			ret = op == 0 ? sp_bench_write_pingpong(c, m, half, size, raddr, rkey, lwarm + ln,
							  true, lat) :
			      sp_bench_send_pingpong(c, m, half, size, lwarm + ln, true, lat);
		if (!ret)
			ret = sp_bench_recv_msg(c, &q, SP_MSG_DONE);
	}
	if (!ret) {
		s = sp_bench_series_get(b, lat_name[op], size, "us", false);
		if (!s)
			ret = sp_bench_fail(ENOMEM, "out of memory");
		else {
			s->iters = ln;
			sp_bench_add(s, k, sp_bench_median(lat + lwarm, ln));
		}
	}
	free(lat);
	return ret;
}

static int sp_rdma_figures(struct sp_bench *b, struct sp_dev *dev, struct sp_conn *c)
{
	const struct sp_bench_opts *o = &b->o;
	const size_t half = o->max_msg;
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ;

	for (unsigned int r = 0; r < o->repeat; r++) {
		for (unsigned int op = 0; op < 3; op++) {
			if (!(o->ops & (1U << op)))
				continue;
			for (int i = 0; i < SP_BENCH_NR_KINDS; i++) {
				enum sp_bench_kind k = (enum sp_bench_kind)((i + r) % SP_BENCH_NR_KINDS);
				struct sp_bench_mem m;
				struct sp_link_msg q;
				int ret;

				if (!(o->kinds & (1U << k)) || !b->available[k])
					continue;
				sp_bench_progress(b, "RDMA %s: repetition %u/%u, %s",
						  op == 0 ? "WRITE" : op == 1 ? "READ" : "SEND",
						  r + 1, o->repeat, sp_bench_kind_name(k));
				ret = sp_bench_mem_alloc(dev, k, 2 * half, &m);
				if (!ret) {
					sp_bench_mem_touch(&m);
					ret = sp_bench_mem_reg(dev, c->data.rc.pd, &m, access);
				}
				if (ret) {
					b->available[k] = false;
					snprintf(b->reason[k], sizeof(b->reason[k]), "RDMA memory: %s",
						 sp_bench_errmsg());
					sp_bench_mem_free(&m);
					continue;
				}
				memset(&q, 0, sizeof(q));
				q.type = SP_MSG_ALLOC;
				q.kind = k;
				q.size = 2 * half;
				q.addr = (uintptr_t)m.addr;
				q.rkey = sp_bench_mem_rkey(&m);
				ret = sp_bench_call(c, &q, SP_MSG_DONE);
				if (ret) {
					if (c->linked && !strncmp(sp_bench_errmsg(), "server:", 7)) {
						b->available[k] = false;
						sp_bench_copy(b->reason[k], sizeof(b->reason[k]), sp_bench_errmsg());
						sp_bench_mem_free(&m);
						continue;
					}
					sp_bench_mem_free(&m);
					return ret;
				}
				for (size_t sz = o->min_msg; sz <= o->max_msg && !ret; sz *= 2)
					ret = sp_measure(b, c, op, sz, &m, half, q.addr, q.rkey, k);
				if (!ret) {
					memset(&q, 0, sizeof(q));
					q.type = SP_MSG_FREE;
					ret = sp_bench_call(c, &q, SP_MSG_DONE);
				}
				sp_bench_mem_free(&m);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

/* Local mode: fork the server on the second device; returns its pid. */
static pid_t sp_fork_server(struct sp_bench *b)
{
	struct sp_bench_opts so = b->o;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct pollfd pfd;
	int pfds[2];
	pid_t pid;
	char c;

	if (pipe2(pfds, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(pfds[0]);
		close(pfds[1]);
		return -1;
	}
	if (pid == 0) {
		struct sp_dev *dev = NULL;

		close(pfds[0]);
		if (ncpu > 1)
			sp_bench_pin_cpu((int)ncpu - 1);
		so.serve_addr = b->server_addr;
		if (sp_dev_open(NULL, &dev) < 0)
			dev = NULL;
		sp_bench_rdma_serve(&so, dev, pfds[1]);
		if (dev)
			sp_dev_close(dev);
		_exit(0);
	}
	close(pfds[1]);
	pfd.fd = pfds[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 30000) != 1 || read(pfds[0], &c, 1) != 1) {
		close(pfds[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		errno = ECONNREFUSED;
		return -1;
	}
	close(pfds[0]);
	if (ncpu > 1)
		sp_bench_pin_cpu(0);
	return pid;
}

int sp_bench_rdma_run(struct sp_bench *b, struct sp_dev *dev, sp_bench_host_fn *host_part)
{
	const struct sp_bench_opts *o = &b->o;
	struct sp_conn c = { .child = -1 };
	char names[2][64] = { "", "" }, addrs[2][64] = { "", "" };
	int ret = 0;

	if (!(o->ops & (SP_BENCH_OP_WRITE | SP_BENCH_OP_READ | SP_BENCH_OP_SEND))) {
		snprintf(b->mode, sizeof(b->mode), "host-only");
		return host_part(b, dev, NULL, NULL);
	}
	if (o->server) {
		snprintf(b->mode, sizeof(b->mode), "remote");
		sp_bench_copy(b->server_addr, sizeof(b->server_addr), o->server);
		if (o->local_addr)
			sp_bench_copy(b->client_addr, sizeof(b->client_addr), o->local_addr);
	} else {
		int found = sp_ipv4_devices(names, addrs);

		snprintf(b->mode, sizeof(b->mode), "local");
		sp_bench_copy(b->client_addr, sizeof(b->client_addr), o->local_addr ? o->local_addr : addrs[0]);
		sp_bench_copy(b->server_addr, sizeof(b->server_addr), o->serve_addr ? o->serve_addr : addrs[1]);
		if ((!o->local_addr || !o->serve_addr) && found < 2) {
			snprintf(b->rdma_reason, sizeof(b->rdma_reason),
				 "one node needs two RDMA devices with IPv4 addresses (found %d); or run 'bench --serve' on another node and 'bench HOST' here",
				 found);
			return host_part(b, dev, NULL, b->rdma_reason);
		}
		c.child = sp_fork_server(b);
		if (c.child < 0) {
			snprintf(b->rdma_reason, sizeof(b->rdma_reason),
				 "the local bench server on %s did not start", b->server_addr);
			return host_part(b, dev, NULL, b->rdma_reason);
		}
	}
	ret = sp_client_connect(b, &c);
	if (ret) {
		sp_bench_copy(b->rdma_reason, sizeof(b->rdma_reason), sp_bench_errmsg());
		sp_bench_conn_close(&c);
		ret = host_part(b, dev, NULL, NULL);
		goto out;
	}
	ret = host_part(b, dev, c.data.rc.pd, NULL);
	if (!ret && sp_rdma_figures(b, dev, &c)) {
		snprintf(b->rdma_reason, sizeof(b->rdma_reason), "stopped: %s", sp_bench_errmsg());
		sp_bench_progress(b, "RDMA figures stopped: %s", sp_bench_errmsg());
	}
	if (c.linked) {
		struct sp_link_msg q = { .type = SP_MSG_QUIT };

		sp_bench_send_msg(&c, &q);
		sp_bench_recv_msg(&c, &q, SP_MSG_DONE);
	}
	sp_bench_conn_close(&c);
out:
	if (c.child > 0) {
		int st;

		for (int i = 0; i < 100 && waitpid(c.child, &st, WNOHANG) == 0; i++)
			usleep(100000);
		if (waitpid(c.child, &st, WNOHANG) == 0) {
			kill(c.child, SIGKILL);
			waitpid(c.child, &st, 0);
		}
	}
	return ret;
}
