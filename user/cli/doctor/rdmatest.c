// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor --rdma-test / --serve / --peer: the data path, end to
 * end. A strixpeer buffer registered with a plain ibv_reg_mr() is the
 * target of an RDMA WRITE through an RC queue pair: in loopback on each
 * ACTIVE port, between two ports, or from another node (--peer HOST
 * against "doctor serve" there, connected with librdmacm: peertest.c).
 * Every byte is verified; bytes, bandwidth and latency are reported, never
 * judged. This file: the tests on this node (rtutil.c has the pieces both
 * share).
 *
 * The queue pairs are rdma/rc.h's; completions are waited for through
 * completion channels (no busy polling), each wait bounded.
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

/* One endpoint: rdma/rc.h's queue pair on @dev/@port. */
static int ep_open(struct sp_rc *e, const char *dev, unsigned int port, char *why, size_t len)
{
	const struct ibv_qp_cap cap = {
		.max_send_wr = 32, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1,
	};

	return sp_rc_open(e, dev, port, 64, &cap, 0, why, len);
}

/* Moves @e's QP to RTS, connected to @peer's QP. */
static int ep_connect(struct sp_rc *e, const struct sp_rc *peer, enum ibv_mtu mtu, char *why,
		      size_t len)
{
	struct sp_rc_path path = SP_RC_PATH_DEFAULT;
	struct sp_rc_addr to;

	path.mtu = mtu;
	sp_rc_local_addr(peer, 0x1234, &to);
	return sp_rc_connect(e, 0x1234, &to, &path, why, len);
}

/* Writes into a strixpeer buffer registered on @dst from host memory on @src. */
static void run_pair(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_port *src,
		     const struct dr_port *dst, size_t size)
{
	char subj[200], why[256] = "", bw[32], sz[32];
	struct sp_rc a, b;
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
	sp_rc_fill(host, size, 0, seed);
	lmr = ibv_reg_mr(a.pd, host, size, IBV_ACCESS_LOCAL_WRITE);
	if (!lmr) {
		snprintf(why, sizeof(why), "ibv_reg_mr of host memory on %s: %s", a.name, strerror(errno));
		goto fail;
	}
	mtu = a.mtu < b.mtu ? a.mtu : b.mtu;
	if (ep_connect(&a, &b, mtu, why, sizeof(why)) || ep_connect(&b, &a, mtu, why, sizeof(why)))
		goto fail;
	t0 = dr_rt_now_ns();
	if (dr_rt_write(&a, lmr, (uintptr_t)sp_buf_addr(buf), tmr->rkey, size, why, sizeof(why)))
		goto fail;
	t_write = dr_rt_now_ns() - t0;
	bad = sp_rc_verify(sp_buf_addr(buf), size, 0, seed);
	if (bad >= 0) {
		snprintf(why, sizeof(why), "the data arrived wrong: byte %" PRId64 " of the strixpeer buffer is 0x%02x, expected 0x%02x",
			 bad, ((uint8_t *)sp_buf_addr(buf))[bad], sp_rc_pattern((uint64_t)bad, seed));
		goto fail;
	}
	/* latency: small writes, one at a time */
	t0 = dr_rt_now_ns();
	for (int i = 0; i < LAT_ITERS; i++)
		if (dr_rt_write(&a, lmr, (uintptr_t)sp_buf_addr(buf), tmr->rkey, 8, why, sizeof(why)))
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
	sp_rc_close(&a);
	sp_rc_close(&b);
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
