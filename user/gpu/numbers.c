// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu proof --numbers: the figures of issue 47 (proof.h says
 * which and how each is measured), taken after a kind's cells, through the
 * loopback pair's peer queue pair with user/bench's bandwidth loop and
 * median. A figure is measured only for a route and direction whose cell
 * has a verdict (a fence): never for "never" or "unavailable".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/proof_int.h"
#include "bench/bench_conn.h"

#define GP_MIB		(1024.0 * 1024.0)
#define GP_GIB		(1024.0 * 1024.0 * 1024.0)
#define GP_MAX_SAMPLE	(256ULL << 20)	/* bytes per figure at most ... */
#define GP_MIN_ITERS	4		/* ... but at least this many operations */
#define GP_WRITE_DEPTH	32		/* outstanding WRITEs (the QP has 64) */
#define GP_READ_DEPTH	16		/* outstanding READs (proof.c's rd_atomic) */
#define GP_REG_REPEAT	3

const char *const sp_gp_op_names[SP_GP_NR_OPS] = { "write", "read" };

/* The peer's queue pair and buffer, as user/bench's loop takes them. */
struct gp_fig {
	struct gp_ctx *c;
	const struct sp_gp_numbers *nb;
	struct sp_conn conn;
	struct sp_bench_mem pm;
};

static uint64_t gp_iters(const struct sp_gp_opts *o, size_t size)
{
	uint64_t n = o->iters;

	if (n * size > GP_MAX_SAMPLE)
		n = GP_MAX_SAMPLE / size;
	return n < GP_MIN_ITERS ? GP_MIN_ITERS : n;
}

void gp_numbers_init(const struct sp_gp_opts *o, struct sp_gp_result *res)
{
	struct sp_gp_numbers *nb = &res->numbers;

	if (!o->numbers)
		return;
	nb->run = true;
	nb->iters = o->iters;
	nb->bytes = o->max_msg;
	for (uint64_t s = o->min_msg; s && s <= o->max_msg && nb->nsizes < SP_GP_MAX_SIZES; s *= 2)
		nb->sizes[nb->nsizes++] = s;
	nb->stand_in = !strncmp(res->facts.gpu, "sp_gpusim", 9);
	if (nb->stand_in)
		snprintf(nb->source, sizeof(nb->source), "%s",
			 "stand-in: the suite's stand-in HIP runtime on sp_gpusim, not a GPU; these figures measure the stand-in and say nothing about any hardware");
	else
		snprintf(nb->source, sizeof(nb->source),
			 "this node: the GPU \"%.120s\" through the runtime it loaded", res->facts.gpu);
}

static const struct sp_gp_cell *gp_find(const struct sp_gp_result *res, enum sp_gp_kind k,
					enum sp_gp_route r, enum sp_gp_dir d)
{
	for (unsigned int i = 0; i < res->ncells; i++) {
		const struct sp_gp_cell *cell = &res->cells[i];

		if (cell->kind == k && cell->route == r && cell->dir == d)
			return cell;
	}
	return NULL;
}

/* Whether @cell lets figures be measured; if not, @why says so. */
static bool gp_gate(const struct sp_gp_cell *cell, char *why, size_t wl)
{
	if (!cell) {
		snprintf(why, wl, "its cell was not run (--routes, --directions)");
		return false;
	}
	if (!cell->available && !cell->runs[0]) {
		snprintf(why, wl, "its cell is unavailable: no figures");
		return false;
	}
	if (cell->weakest < 0 || !cell->available) {
		snprintf(why, wl, "its cell's verdict is never: no figures");
		return false;
	}
	return true;
}

/* @n hipMemcpy()s of @size between the memory and the staging buffer. */
static int gp_copies(struct gp_ctx *c, struct gp_mem *m, bool into_mem, size_t size, uint64_t n,
		     char *why, size_t wl)
{
	for (uint64_t i = 0; i < n; i++) {
		sp_hip_err e = into_mem ?
			c->rt->Memcpy(m->p, c->stage, size, SP_HIP_MEMCPY_DEFAULT) :
			c->rt->Memcpy(c->stage, m->p, size, SP_HIP_MEMCPY_DEFAULT);

		if (e) {
			gp_msg(why, wl, into_mem ? "hipMemcpy from the staging buffer" :
			       "hipMemcpy into the staging buffer", c->rt, e);
			return -EIO;
		}
	}
	return 0;
}

/* One message size: bandwidth (MiB/s) and latency (us) of @op. */
static int gp_size(struct gp_fig *g, struct gp_mem *m, bool staged, enum sp_gp_op op,
		   size_t size, uint32_t rkey, struct sp_gp_rdma_fig *fig, unsigned int si,
		   char *why, size_t wl)
{
	struct gp_ctx *c = g->c;
	enum ibv_wr_opcode opc = op == SP_GP_OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	unsigned int depth = op == SP_GP_OP_WRITE ? GP_WRITE_DEPTH : GP_READ_DEPTH;
	uint64_t raddr = (uintptr_t)(staged ? c->stage : m->cpu);
	uint64_t n = gp_iters(c->o, size), warm = n / 10 + 1;
	double secs = 0, t0, *lat;
	int ret;

	ret = sp_bench_bw_run(&g->conn, opc, &g->pm, size, raddr, rkey, warm, depth, &secs);
	t0 = sp_bench_now();
	if (!ret && staged && op == SP_GP_OP_READ)
		ret = gp_copies(c, m, false, size, n, why, wl);
	if (!ret)
		ret = sp_bench_bw_run(&g->conn, opc, &g->pm, size, raddr, rkey, n, depth, &secs);
	if (!ret && staged && op == SP_GP_OP_WRITE)
		ret = gp_copies(c, m, true, size, n, why, wl);
	if (ret)
		goto fail;
	secs = sp_bench_now() - t0;
	fig->bw[si] = (double)size * (double)n / secs / GP_MIB;
	fig->iters[si] = n;

	lat = calloc(warm + n, sizeof(*lat));
	if (!lat) {
		snprintf(why, wl, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < warm + n && !ret; i++) {
		t0 = sp_bench_now();
		if (staged && op == SP_GP_OP_READ)
			ret = gp_copies(c, m, false, size, 1, why, wl);
		if (!ret)
			ret = sp_bench_post(&g->conn, opc, &g->pm, 0, size, raddr, rkey, i, true);
		if (!ret)
			ret = sp_bench_wait_one(&g->conn, false);
		if (!ret && staged && op == SP_GP_OP_WRITE)
			ret = gp_copies(c, m, true, size, 1, why, wl);
		lat[i] = (sp_bench_now() - t0) * 1e6;
	}
	if (!ret)
		fig->lat[si] = sp_bench_median(lat + warm, n);
	free(lat);
	if (!ret)
		return 0;
fail:
	if (!why[0])
		snprintf(why, wl, "%s", sp_bench_errmsg());
	return ret;
}

static void gp_rdma(struct gp_fig *g, struct gp_mem *m, enum sp_gp_route r, enum sp_gp_op op,
		    uint32_t rkey, struct sp_gp_rdma_fig *fig)
{
	const struct sp_gp_numbers *nb = g->nb;
	char why[200] = "";

	for (unsigned int si = 0; si < nb->nsizes; si++) {
		if (gp_size(g, m, r == SP_GP_STAGED, op, nb->sizes[si], rkey, fig, si, why,
			    sizeof(why))) {
			snprintf(fig->reason, sizeof(fig->reason), "%s", why);
			return;
		}
	}
	fig->measured = true;
}

/* ms per GiB of registering @m by @r and deregistering it, the median of 3. */
static void gp_reg_fig(struct gp_ctx *c, struct gp_mem *m, enum sp_gp_route r,
		       struct sp_gp_kind_numbers *kn)
{
	double reg[GP_REG_REPEAT], dereg[GP_REG_REPEAT], per_gib = GP_GIB / (double)m->len;

	for (int i = 0; i < GP_REG_REPEAT; i++) {
		struct sp_gp_cell tmp;
		struct ibv_mr *mr = NULL;
		struct sp_mr *smr = NULL;
		double t0 = sp_bench_now(), t1;

		memset(&tmp, 0, sizeof(tmp));
		if (gp_reg(c, m, r, &mr, &smr, &tmp)) {
			snprintf(kn->reg_reason[r], sizeof(kn->reg_reason[r]), "%s", tmp.reason);
			return;
		}
		t1 = sp_bench_now();
		gp_unreg(c, mr, smr);
		reg[i] = (t1 - t0) * 1e3 * per_gib;
		dereg[i] = (sp_bench_now() - t1) * 1e3 * per_gib;
	}
	kn->reg_ms_gib[r] = sp_bench_median(reg, GP_REG_REPEAT);
	kn->dereg_ms_gib[r] = sp_bench_median(dereg, GP_REG_REPEAT);
}

static sigjmp_buf gp_jmp;

static void gp_fault(int sig)
{
	siglongjmp(gp_jmp, sig);
}

/*
 * memcpy() of @len bytes, MiB/s; 0, or the signal (SIGSEGV, SIGBUS) the
 * first touch raised: memory the CPU has no mapping of.
 */
static int gp_cpu_copy(void *dst, const void *src, size_t len, double *mibs)
{
	struct sigaction sa, old_segv, old_bus;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = gp_fault;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	sig = sigsetjmp(gp_jmp, 1);
	if (!sig) {
		double t0 = sp_bench_now();

		memcpy(dst, src, len);
		__asm__ volatile("" ::: "memory");
		*mibs = (double)len / (sp_bench_now() - t0) / GP_MIB;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return sig;
}

static void gp_cpu_fig(struct gp_ctx *c, struct gp_mem *m, struct sp_gp_kind_numbers *kn)
{
	double rd[GP_REG_REPEAT], wr[GP_REG_REPEAT];

	for (int i = 0; i < GP_REG_REPEAT; i++) {
		int sig = gp_cpu_copy(c->dst, m->cpu, m->len, &rd[i]);

		if (!sig)
			sig = gp_cpu_copy(m->cpu, c->src, m->len, &wr[i]);
		if (sig) {
			snprintf(kn->cpu_reason, sizeof(kn->cpu_reason),
				 "the CPU cannot touch this memory (%s at the first byte copied)",
				 sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
			return;
		}
	}
	kn->cpu_read = sp_bench_median(rd, GP_REG_REPEAT);
	kn->cpu_write = sp_bench_median(wr, GP_REG_REPEAT);
}

static void gp_route(struct gp_fig *g, struct gp_mem *m, enum sp_gp_kind kind,
		     enum sp_gp_route r, const struct sp_gp_result *res,
		     struct sp_gp_kind_numbers *kn)
{
	static const enum sp_gp_dir dir_of[SP_GP_NR_OPS] = { SP_GP_PEER_WRITE, SP_GP_GPU_WRITE };
	bool want[SP_GP_NR_OPS], any = false;
	struct sp_gp_cell tmp;
	struct ibv_mr *mr = NULL;
	struct sp_mr *smr = NULL;

	for (int op = 0; op < SP_GP_NR_OPS; op++) {
		struct sp_gp_rdma_fig *fig = &kn->rdma[r][op];

		want[op] = gp_gate(gp_find(res, kind, r, dir_of[op]), fig->reason,
				   sizeof(fig->reason));
		any |= want[op];
	}
	if (r == SP_GP_STAGED)
		snprintf(kn->reg_reason[r], sizeof(kn->reg_reason[r]), "%s",
			 "staged registers none of the memory (its staging buffer, once)");
	else if (!any)
		snprintf(kn->reg_reason[r], sizeof(kn->reg_reason[r]), "%s",
			 "no cell of this route has a verdict: no figures");
	if (!any)
		return;
	memset(&tmp, 0, sizeof(tmp));
	if (gp_reg(g->c, m, r, &mr, &smr, &tmp)) {
		for (int op = 0; op < SP_GP_NR_OPS; op++)
			if (want[op])
				snprintf(kn->rdma[r][op].reason, sizeof(kn->rdma[r][op].reason),
					 "%s", tmp.reason);
		return;
	}
	for (int op = 0; op < SP_GP_NR_OPS; op++)
		if (want[op])
			gp_rdma(g, m, r, op, mr->rkey, &kn->rdma[r][op]);
	gp_unreg(g->c, mr, smr);
	if (r != SP_GP_STAGED)
		gp_reg_fig(g->c, m, r, kn);
}

void gp_numbers_kind(struct gp_ctx *c, enum sp_gp_kind kind, const struct sp_gp_result *res,
		     struct sp_gp_kind_numbers *kn)
{
	struct gp_fig g;
	struct gp_mem m;
	char why[200] = "";

	for (int r = 0; r < SP_GP_NR_ROUTES; r++)
		kn->reg_ms_gib[r] = kn->dereg_ms_gib[r] = -1;
	kn->cpu_read = kn->cpu_write = -1;
	if (c->o->progress) {
		char msg[96];

		snprintf(msg, sizeof(msg), "gpu proof: %s, figures", sp_gp_kind_names[kind]);
		c->o->progress(msg);
	}
	if (gp_alloc(c, kind, c->o->max_msg, &m, why, sizeof(why))) {
		snprintf(kn->reason, sizeof(kn->reason), "%s", why);
		return;
	}
	kn->allocated = true;
	memset(&g, 0, sizeof(g));
	g.c = c;
	g.nb = &res->numbers;
	g.conn.data.rc = c->peer;	/* borrowed: never closed through @g */
	g.conn.events = c->peer.ch != NULL;
	g.pm.kind = SP_BENCH_MALLOC;
	g.pm.size = c->bufsz;
	g.pm.addr = c->peer_buf;
	g.pm.mr = c->peer_mr;
	g.pm.dmabuf_fd = -1;
	g.pm.card = -1;
	for (int r = 0; r < SP_GP_NR_ROUTES; r++)
		if (c->o->routes & (1U << r))
			gp_route(&g, &m, kind, r, res, kn);
		else
			for (int op = 0; op < SP_GP_NR_OPS; op++)
				gp_gate(NULL, kn->rdma[r][op].reason, sizeof(kn->rdma[r][op].reason));
	for (int r = 0; r < SP_GP_NR_ROUTES; r++)
		if (!(c->o->routes & (1U << r)))
			snprintf(kn->reg_reason[r], sizeof(kn->reg_reason[r]), "%s",
				 "route not run (--routes)");
	gp_cpu_fig(c, &m, kn);
	gp_free(c, &m);
}
