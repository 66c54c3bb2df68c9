// SPDX-License-Identifier: MIT
/*
 * strixpeerctl's benchmark, its driver: the options, a run (sp_bench_run(),
 * sp_bench_free()), the CPU-side figures (allocation, registration,
 * memcpy) and what a kind's mapping looks like to an HCA. The memory kinds
 * are mem.c's table, the RDMA figures bench_rdma.c's (which runs the
 * CPU-side figures it is handed), the report (JSON, text, gnuplot SVG)
 * report.c's, the failure message, clock and result series util.c's.
 *
 * Every figure is measured for every kind inside one repetition, the
 * kinds' order rotated from one repetition to the next, so that drift
 * (other load, a warming cache) spreads over all kinds alike.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "strixpeer.h"
#include "bench_int.h"

#define MiB		((uint64_t)1024 * 1024)
#define HUGE_SZ		(2 * MiB)
#define COPY_CHUNK	(64 * MiB)

void sp_bench_opts_init(struct sp_bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->size = 256 * MiB;
	o->repeat = 5;
	o->kinds = (1U << SP_BENCH_NR_KINDS) - 1;
	o->ops = SP_BENCH_OP_WRITE | SP_BENCH_OP_READ | SP_BENCH_OP_SEND | SP_BENCH_OP_HOST;
	o->min_msg = 2;
	o->max_msg = 8 * MiB;
	o->iters = 1000;
	o->max_bytes = 1024 * MiB;
	o->lat_iters = 1000;
	o->depth = 128;
	o->port = "18515";
}

/* --- what a mapping looks like ------------------------------------------ */

/*
 * The physical runs of a mapping and the largest page size an HCA's MTT
 * could use for it, the way ib_umem picks one: a page size fits when every
 * run starts and (but for the last) ends on a boundary of it both in VA
 * and in physical address, and it is no larger than needed to cover the
 * VA range. Candidate sizes: 4 KiB to 1 GiB (mlx5's range).
 */
static void sp_phys_layout(const uint8_t *p, size_t len, struct sp_bench_map_info *mi)
{
	const size_t pages = len / 4096;
	uint64_t *pm = malloc(pages * sizeof(*pm));
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t mask = 0, prev = 0, segs = 0, va_end, span;
	unsigned int bits;

	mi->phys_known = false;
	if (!pm || fd < 0 ||
	    pread(fd, pm, pages * sizeof(*pm), (off_t)((uintptr_t)p / 4096 * 8)) !=
	    (ssize_t)(pages * sizeof(*pm)))
		goto out;
	for (size_t i = 0; i < pages; i++) {
		uint64_t pfn = pm[i] & ((1ULL << 55) - 1);
		uint64_t va = (uintptr_t)p + i * 4096, pa = pfn * 4096;

		if (!(pm[i] & (1ULL << 63)) || !pfn)
			goto out;	/* not present, or no CAP_SYS_ADMIN */
		if (!i || pfn != prev + 1) {
			segs++;
			if (i)
				mask |= va;	/* a run ends and one starts here */
		}
		mask |= pa ^ va;
		prev = pfn;
	}
	va_end = (uintptr_t)p + len;
	span = (va_end - 1) ^ (uintptr_t)p;
	for (bits = 0; bits < 63 && (span >> bits); bits++)
		;
	mask |= 1ULL << bits;
	mask |= 1ULL << 30;	/* 1 GiB: the largest candidate */
	mi->mtt_page = 1ULL << __builtin_ctzll(mask);
	if (mi->mtt_page < 4096)
		mi->mtt_page = 4096;
	mi->segments = segs;
	mi->phys_known = true;
out:
	if (fd >= 0)
		close(fd);
	free(pm);
}

static void sp_map_info(const struct sp_bench_mem *m, struct sp_bench_map_info *mi)
{
	mi->huge_bytes = sp_bench_mem_huge_bytes(m);
	sp_phys_layout(m->addr, m->size, mi);
	mi->valid = true;
}

/* --- CPU-side figures ----------------------------------------------------- */

/*
 * memcpy of @len bytes into (or out of) the memory, COPY_CHUNK at a time
 * from (to) a scratch buffer: one untimed pass, then the timed one.
 */
static double sp_copy_gibs(uint8_t *dst, const uint8_t *src, size_t len, bool into)
{
	double t0 = 0;

	for (int pass = 0; pass < 2; pass++) {
		t0 = sp_bench_now();
		for (size_t off = 0; off < len; off += COPY_CHUNK) {
			size_t n = len - off < COPY_CHUNK ? len - off : COPY_CHUNK;

			if (into)
				memcpy(dst + off, src, n);
			else
				memcpy(dst, src + off, n);
		}
	}
	return (double)len / (sp_bench_now() - t0) / (1024.0 * MiB);
}

static int sp_host_figures(struct sp_bench *b, struct sp_dev *dev, struct ibv_pd *pd,
			   const char *pd_reason)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ;
	struct sp_bench_series *alloc, *reg, *dereg, *cto, *cfrom, *fr;
	size_t chunk = b->o.size < COPY_CHUNK ? b->o.size : COPY_CHUNK;
	uint8_t *scratch = aligned_alloc(HUGE_SZ, chunk);

	alloc = sp_bench_series_get(b, "alloc", 0, "ms", false);
	reg = sp_bench_series_get(b, "reg", 0, "ms", false);
	dereg = sp_bench_series_get(b, "dereg", 0, "ms", false);
	cto = sp_bench_series_get(b, "memcpy_to", 0, "GiB/s", true);
	cfrom = sp_bench_series_get(b, "memcpy_from", 0, "GiB/s", true);
	fr = sp_bench_series_get(b, "free", 0, "ms", false);
	if (!scratch || !alloc || !reg || !dereg || !cto || !cfrom || !fr) {
		free(scratch);
		return sp_bench_fail(ENOMEM, "out of memory");
	}
	memset(scratch, 0x5a, chunk);

	for (unsigned int r = 0; r < b->o.repeat; r++) {
		for (int i = 0; i < SP_BENCH_NR_KINDS; i++) {
			enum sp_bench_kind k = (enum sp_bench_kind)((i + r) % SP_BENCH_NR_KINDS);
			struct sp_bench_mem m;
			double t0;

			if (!(b->o.kinds & (1U << k)) || !b->available[k])
				continue;
			sp_bench_progress(b, "host figures: repetition %u/%u, %s", r + 1,
					  b->o.repeat, sp_bench_kind_name(k));
			t0 = sp_bench_now();
			if (sp_bench_mem_alloc(dev, k, b->o.size, &m)) {
				b->available[k] = false;
				sp_bench_copy(b->reason[k], sizeof(b->reason[k]), sp_bench_errmsg());
				continue;
			}
			sp_bench_mem_touch(&m);
			sp_bench_add(alloc, k, (sp_bench_now() - t0) * 1e3);
			if (!b->map[k].valid)
				sp_map_info(&m, &b->map[k]);

			if (pd) {
				t0 = sp_bench_now();
				if (sp_bench_mem_reg(dev, pd, &m, access) == 0) {
					sp_bench_add(reg, k, (sp_bench_now() - t0) * 1e3);
					sp_bench_copy(b->map[k].reg_path, sizeof(b->map[k].reg_path), m.smr ? sp_reg_path_name(sp_mr_path(m.smr)) : "plain");
					t0 = sp_bench_now();
					sp_bench_mem_dereg(&m);
					sp_bench_add(dereg, k, (sp_bench_now() - t0) * 1e3);
				} else {
					snprintf(b->map[k].reg_path, sizeof(b->map[k].reg_path),
						 "failed");
					snprintf(b->reason[k], sizeof(b->reason[k]),
						 "registration: %.145s", sp_bench_errmsg());
				}
			} else if (!b->map[k].reg_path[0]) {
				snprintf(b->map[k].reg_path, sizeof(b->map[k].reg_path), "none");
				sp_bench_copy(b->reason[k], sizeof(b->reason[k]), pd_reason);
			}
			sp_bench_add(cto, k, sp_copy_gibs(m.addr, scratch, m.size, true));
			sp_bench_add(cfrom, k, sp_copy_gibs(scratch, m.addr, m.size, false));
			t0 = sp_bench_now();
			sp_bench_mem_free(&m);
			sp_bench_add(fr, k, (sp_bench_now() - t0) * 1e3);
		}
	}
	free(scratch);
	return 0;
}

/* The first verbs device, for registration figures without RDMA figures. */
static struct ibv_context *sp_first_device(char *why, size_t len)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && i < n && !ctx; i++)
		ctx = ibv_open_device(list[i]);
	if (!ctx)
		snprintf(why, len, "no RDMA device (ibv_devices lists none)");
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

static void sp_read_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");

	out[0] = '\0';
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = '\0';
		fclose(f);
	}
}

static int sp_check_opts(const struct sp_bench_opts *o)
{
	if (!o->repeat || o->repeat > SP_BENCH_MAX_REPEAT)
		return sp_bench_fail(EINVAL, "repeat must be 1..%d", SP_BENCH_MAX_REPEAT);
	if (o->size < 4096 || o->size % 4096)
		return sp_bench_fail(EINVAL, "size must be a non-zero multiple of 4 KiB");
	if (!o->min_msg || o->min_msg > o->max_msg || o->max_msg > 1024 * MiB ||
	    (o->min_msg & (o->min_msg - 1)) || (o->max_msg & (o->max_msg - 1)))
		return sp_bench_fail(EINVAL, "message sizes must be powers of two, 1 B..1 GiB, min <= max");
	if (!o->iters || !o->lat_iters || !o->depth || o->depth > 1024)
		return sp_bench_fail(EINVAL, "iterations must be non-zero and depth 1..1024");
	if (!(o->kinds & ((1U << SP_BENCH_NR_KINDS) - 1)))
		return sp_bench_fail(EINVAL, "no memory kind chosen");
	if (o->flags & ~SP_BENCH_EVENTS)
		return sp_bench_fail(EINVAL, "unknown flags %#x", o->flags & ~SP_BENCH_EVENTS);
	for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++)
		if (o->reserved[i])
			return sp_bench_fail(EINVAL, "reserved options must be zero");
	return 0;
}

/*
 * The CPU-side figures, for sp_bench_rdma_run() to run once it knows the
 * client's PD, or that there is none (then the first verbs device's).
 */
static int sp_bench_host_part(struct sp_bench *b, struct sp_dev *dev, struct ibv_pd *pd,
			      const char *pd_reason)
{
	struct ibv_context *ctx = NULL;
	struct ibv_pd *own = NULL;
	char why[200] = "";
	int ret;

	if (!(b->o.ops & SP_BENCH_OP_HOST))
		return 0;
	if (!pd) {
		ctx = sp_first_device(why, sizeof(why));
		own = ctx ? ibv_alloc_pd(ctx) : NULL;
		pd = own;
		if (ctx && !own)
			snprintf(why, sizeof(why), "ibv_alloc_pd: %s", strerror(errno));
		if (!why[0] && pd_reason)
			sp_bench_copy(why, sizeof(why), pd_reason);
	}
	ret = sp_host_figures(b, dev, pd, why);
	if (own)
		ibv_dealloc_pd(own);
	if (ctx)
		ibv_close_device(ctx);
	return ret;
}

int sp_bench_run(const struct sp_bench_opts *o, struct sp_bench **bp)
{
	struct sp_bench *b;
	struct sp_dev *dev = NULL;
	struct utsname u;
	char dev_why[200] = "";
	int ret;

	ret = sp_check_opts(o);
	if (ret)
		return ret;
	b = calloc(1, sizeof(*b));
	if (!b)
		return sp_bench_fail(ENOMEM, "out of memory");
	b->o = *o;
	if (!b->o.port)
		b->o.port = "18515";
	if (uname(&u) == 0)
		sp_bench_copy(b->kernel, sizeof(b->kernel), u.release);
	sp_read_line("/sys/kernel/mm/transparent_hugepage/enabled", b->thp, sizeof(b->thp));
	if (sp_dev_open(NULL, &dev) < 0) {
		sp_bench_copy(dev_why, sizeof(dev_why), sp_errmsg());
		dev = NULL;
	}
	for (int k = 0; k < SP_BENCH_NR_KINDS; k++) {
		b->available[k] = (o->kinds & (1U << k)) != 0;
		if (!b->available[k])
			snprintf(b->reason[k], sizeof(b->reason[k]), "not selected");
		else if (!dev && sp_bench_mem_ops[k].needs_dev) {
			b->available[k] = false;
			sp_bench_copy(b->reason[k], sizeof(b->reason[k]), dev_why);
		}
	}

	ret = sp_bench_rdma_run(b, dev, sp_bench_host_part);
	if (dev)
		sp_dev_close(dev);
	if (ret) {
		sp_bench_free(b);
		return ret;
	}
	*bp = b;
	return 0;
}

void sp_bench_free(struct sp_bench *b)
{
	if (!b)
		return;
	free(b->series);
	free(b);
}
