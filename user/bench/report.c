// SPDX-License-Identifier: MIT
/*
 * strixpeerctl bench's report of a run (struct sp_bench): the statistics
 * of each series (median, min, max, ratios to malloc and THP), JSON, the
 * text table, and the SVG plot's panels (plot.c draws them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strixpeer.h"
#include "bench_int.h"
#include "plot.h"

#define MiB		((uint64_t)1024 * 1024)

static int sp_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct sp_stat {
	unsigned int n;
	double min, median, max;
};

static struct sp_stat sp_stats_of(const struct sp_bench_series *s, int kind)
{
	struct sp_stat st = { 0, NAN, NAN, NAN };
	double v[SP_BENCH_MAX_REPEAT];
	unsigned int n = s->n[kind];

	if (!n)
		return st;
	memcpy(v, s->v[kind], n * sizeof(v[0]));
	qsort(v, n, sizeof(v[0]), sp_cmp_double);
	st.n = n;
	st.min = v[0];
	st.max = v[n - 1];
	st.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return st;
}

/* The kind's median over the reference kind's (NAN when either is missing). */
static double sp_ratio(const struct sp_bench_series *s, int kind, int ref)
{
	struct sp_stat a = sp_stats_of(s, kind), r = sp_stats_of(s, ref);

	if (!a.n || !r.n || r.median == 0)
		return NAN;
	return a.median / r.median;
}

/* --- output ---------------------------------------------------------------- */

static void sp_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void sp_json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.6g", v);
}

static const char *const sp_rdma_figs[] = {
	"write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat",
};

static bool sp_is_rdma(const struct sp_bench_series *s)
{
	return s->msg_size != 0;
}

static void sp_json_series(FILE *f, const struct sp_bench_series *s)
{
	fprintf(f, "{\"figure\":\"%s\",\"unit\":\"%s\",\"higher_is_better\":%s", s->figure,
		s->unit, s->higher_better ? "true" : "false");
	if (sp_is_rdma(s))
		fprintf(f, ",\"msg_size\":%" PRIu64 ",\"iters\":%" PRIu64, s->msg_size, s->iters);
	fputs(",\"kinds\":{", f);
	for (int k = 0, first = 1; k < SP_BENCH_NR_KINDS; k++) {
		struct sp_stat st = sp_stats_of(s, k);

		if (!st.n)
			continue;
		fprintf(f, "%s\"%s\":{\"min\":", first ? "" : ",", sp_bench_kind_name(k));
		sp_json_num(f, st.min);
		fputs(",\"median\":", f);
		sp_json_num(f, st.median);
		fputs(",\"max\":", f);
		sp_json_num(f, st.max);
		fputs(",\"samples\":[", f);
		for (unsigned int i = 0; i < s->n[k]; i++) {
			if (i)
				fputc(',', f);
			sp_json_num(f, s->v[k][i]);
		}
		fputs("],\"vs_malloc\":", f);
		sp_json_num(f, sp_ratio(s, k, SP_BENCH_MALLOC));
		fputs(",\"vs_thp\":", f);
		sp_json_num(f, sp_ratio(s, k, SP_BENCH_THP));
		fputc('}', f);
		first = 0;
	}
	fputs("}}", f);
}

int sp_bench_write_json(const struct sp_bench *b, FILE *f)
{
	const struct sp_bench_opts *o = &b->o;
	int first = 1;

	fputs("{\"strixpeer_bench\":1,\"kernel\":", f);
	sp_json_str(f, b->kernel);
	fputs(",\"thp\":", f);
	sp_json_str(f, b->thp);
	fprintf(f, ",\"config\":{\"size\":%zu,\"repeat\":%u,\"min_msg\":%zu,\"max_msg\":%zu,"
		"\"iters\":%u,\"max_bytes\":%" PRIu64 ",\"lat_iters\":%u,\"depth\":%u,"
		"\"events\":%s,\"mode\":", o->size, o->repeat, o->min_msg, o->max_msg, o->iters,
		o->max_bytes, o->lat_iters, o->depth,
		(o->flags & SP_BENCH_EVENTS) ? "true" : "false");
	sp_json_str(f, b->mode);
	fputs(",\"client\":{\"device\":", f);
	sp_json_str(f, b->client_dev);
	fputs(",\"addr\":", f);
	sp_json_str(f, b->client_addr);
	fputs("},\"server\":{\"device\":", f);
	sp_json_str(f, b->server_dev);
	fputs(",\"addr\":", f);
	sp_json_str(f, b->server_addr);
	fputs("}},\"rdma_unavailable\":", f);
	if (b->rdma_reason[0])
		sp_json_str(f, b->rdma_reason);
	else
		fputs("null", f);
	fputs(",\"kinds\":[", f);
	for (int k = 0; k < SP_BENCH_NR_KINDS; k++) {
		const struct sp_bench_map_info *mi = &b->map[k];

		fprintf(f, "%s{\"kind\":\"%s\",\"available\":%s,\"reason\":", k ? "," : "",
			sp_bench_kind_name(k), b->available[k] ? "true" : "false");
		if (b->reason[k][0])
			sp_json_str(f, b->reason[k]);
		else
			fputs("null", f);
		if (mi->valid) {
			fprintf(f, ",\"huge_mapped_bytes\":%" PRIu64, mi->huge_bytes);
			if (mi->phys_known)
				fprintf(f, ",\"dma_segments\":%" PRIu64 ",\"mtt_page_size\":%" PRIu64
					",\"mtt_entries_per_gib\":%" PRIu64, mi->segments,
					mi->mtt_page, (1024 * MiB) / mi->mtt_page);
			else
				fputs(",\"dma_segments\":null,\"mtt_page_size\":null,\"mtt_entries_per_gib\":null",
				      f);
		}
		if (mi->reg_path[0]) {
			fputs(",\"reg_path\":", f);
			sp_json_str(f, mi->reg_path);
		}
		fputc('}', f);
	}
	fputs("],\"host\":[", f);
	for (size_t i = 0; i < b->nr_series; i++) {
		if (sp_is_rdma(&b->series[i]))
			continue;
		if (!first)
			fputc(',', f);
		sp_json_series(f, &b->series[i]);
		first = 0;
	}
	fputs("],\"rdma\":[", f);
	first = 1;
	for (size_t i = 0; i < b->nr_series; i++) {
		if (!sp_is_rdma(&b->series[i]))
			continue;
		if (!first)
			fputc(',', f);
		sp_json_series(f, &b->series[i]);
		first = 0;
	}
	fputs("]}\n", f);
	return ferror(f) ? sp_bench_fail(EIO, "writing the JSON report failed") : 0;
}

static void sp_fmt(char *out, size_t len, double v)
{
	if (isnan(v))
		snprintf(out, len, "-");
	else if (v != 0 && fabs(v) < 0.1)
		snprintf(out, len, "%.4f", v);
	else
		snprintf(out, len, "%.2f", v);
}

static void sp_fmt_size(char *out, size_t len, uint64_t v)
{
	if (v >= MiB && v % MiB == 0)
		snprintf(out, len, "%" PRIu64 "M", v / MiB);
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(out, len, "%" PRIu64 "K", v / 1024);
	else
		snprintf(out, len, "%" PRIu64, v);
}

/* A per-kind column of the RDMA tables: ten wide, or the kind name's width. */
static int sp_col_width(int k)
{
	int w = (int)strlen(sp_bench_kind_name(k));

	return w > 10 ? w : 10;
}

int sp_bench_write_table(const struct sp_bench *b, FILE *f)
{
	char sz[16], a[24], c[24], d[24], e[24], g[24];
	int kw = 10;

	fprintf(f, "strixpeer bench: kernel %s, THP %s, %s", b->kernel, b->thp, b->mode);
	if (b->client_addr[0])
		fprintf(f, " %s (%s) -> %s (%s)", b->client_dev, b->client_addr, b->server_dev,
			b->server_addr);
	sp_fmt_size(sz, sizeof(sz), b->o.size);
	fprintf(f, ", %u repetitions, %s per host figure, completions %s\n", b->o.repeat, sz,
		(b->o.flags & SP_BENCH_EVENTS) ? "by events" : "polled");
	if (b->rdma_reason[0])
		fprintf(f, "RDMA figures not measured: %s\n", b->rdma_reason);

	/* The kind column is as wide as the longest kind name. */
	for (int k = 0; k < SP_BENCH_NR_KINDS; k++)
		if ((int)strlen(sp_bench_kind_name(k)) > kw)
			kw = (int)strlen(sp_bench_kind_name(k));

	fprintf(f, "\n%-*s %-5s %-12s %-9s %-9s %-8s %-7s %s\n", kw, "kind", "avail",
		"huge-mapped", "DMA-segs", "MTT-page", "MTT/GiB", "reg", "note");
	for (int k = 0; k < SP_BENCH_NR_KINDS; k++) {
		const struct sp_bench_map_info *mi = &b->map[k];
		char h[24] = "-", s[24] = "-", p[24] = "-", n[24] = "-";

		if (mi->valid) {
			sp_fmt_size(h, sizeof(h), mi->huge_bytes);
			if (mi->phys_known) {
				snprintf(s, sizeof(s), "%" PRIu64, mi->segments);
				sp_fmt_size(p, sizeof(p), mi->mtt_page);
				snprintf(n, sizeof(n), "%" PRIu64, (1024 * MiB) / mi->mtt_page);
			}
		}
		fprintf(f, "%-*s %-5s %-12s %-9s %-9s %-8s %-7s %s\n", kw, sp_bench_kind_name(k),
			b->available[k] ? "yes" : "no", h, s, p, n,
			mi->reg_path[0] ? mi->reg_path : "-", b->reason[k]);
	}

	fprintf(f, "\n%-12s %-6s %-*s %10s %10s %10s %9s %9s\n", "figure", "unit", kw, "kind",
		"median", "min", "max", "x malloc", "x THP");
	for (size_t i = 0; i < b->nr_series; i++) {
		const struct sp_bench_series *s = &b->series[i];

		if (sp_is_rdma(s))
			continue;
		for (int k = 0; k < SP_BENCH_NR_KINDS; k++) {
			struct sp_stat st = sp_stats_of(s, k);

			if (!st.n)
				continue;
			sp_fmt(a, sizeof(a), st.median);
			sp_fmt(c, sizeof(c), st.min);
			sp_fmt(d, sizeof(d), st.max);
			sp_fmt(e, sizeof(e), sp_ratio(s, k, SP_BENCH_MALLOC));
			sp_fmt(g, sizeof(g), sp_ratio(s, k, SP_BENCH_THP));
			fprintf(f, "%-12s %-6s %-*s %10s %10s %10s %9s %9s\n", s->figure, s->unit,
				kw, sp_bench_kind_name(k), a, c, d, e, g);
		}
	}

	for (size_t j = 0; j < sizeof(sp_rdma_figs) / sizeof(sp_rdma_figs[0]); j++) {
		bool head = false;

		for (size_t i = 0; i < b->nr_series; i++) {
			const struct sp_bench_series *s = &b->series[i];

			if (!sp_is_rdma(s) || strcmp(s->figure, sp_rdma_figs[j]))
				continue;
			if (!head) {
				fprintf(f, "\n%s (%s, median of %u; ratio: strixpeer / malloc, / THP)\n%-6s",
					s->figure, s->unit, b->o.repeat, "size");
				for (int k = 0; k < SP_BENCH_NR_KINDS; k++)
					fprintf(f, " %*s", sp_col_width(k), sp_bench_kind_name(k));
				fprintf(f, " %9s %9s\n", "x malloc", "x THP");
				head = true;
			}
			sp_fmt_size(sz, sizeof(sz), s->msg_size);
			fprintf(f, "%-6s", sz);
			for (int k = 0; k < SP_BENCH_NR_KINDS; k++) {
				sp_fmt(a, sizeof(a), sp_stats_of(s, k).median);
				fprintf(f, " %*s", sp_col_width(k), a);
			}
			sp_fmt(e, sizeof(e), sp_ratio(s, SP_BENCH_STRIXPEER, SP_BENCH_MALLOC));
			sp_fmt(g, sizeof(g), sp_ratio(s, SP_BENCH_STRIXPEER, SP_BENCH_THP));
			fprintf(f, " %9s %9s\n", e, g);
		}
	}
	return ferror(f) ? sp_bench_fail(EIO, "writing the report failed") : 0;
}

int sp_bench_write_plot(const struct sp_bench *b, const char *svg)
{
	static const char *const ops[] = { "write_bw", "read_bw", "send_bw" };
	const char *names[SP_BENCH_NR_KINDS];
	struct sp_plot_panel p[3];
	uint64_t *x[3] = { NULL };
	double *y[3] = { NULL };
	char title[512];
	int ret = 0;

	for (int k = 0; k < SP_BENCH_NR_KINDS; k++)
		names[k] = sp_bench_kind_name(k);
	/* a panel per figure, a row per message size, a column per kind */
	for (size_t j = 0; j < 3; j++) {
		size_t rows = 0;

		x[j] = calloc(b->nr_series + 1, sizeof(*x[j]));
		y[j] = calloc((b->nr_series + 1) * SP_BENCH_NR_KINDS, sizeof(*y[j]));
		if (!x[j] || !y[j]) {
			ret = sp_bench_fail(ENOMEM, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < b->nr_series; i++) {
			const struct sp_bench_series *s = &b->series[i];

			if (!sp_is_rdma(s) || strcmp(s->figure, ops[j]))
				continue;
			x[j][rows] = s->msg_size;
			for (int k = 0; k < SP_BENCH_NR_KINDS; k++)
				y[j][rows * SP_BENCH_NR_KINDS + k] = sp_stats_of(s, k).median;
			rows++;
		}
		p[j] = (struct sp_plot_panel){ .name = ops[j], .nrows = rows, .x = x[j],
					       .ncols = SP_BENCH_NR_KINDS, .col_names = names,
					       .y = y[j] };
	}
	snprintf(title, sizeof(title), "strixpeer bench: kernel %s, %s, median of %u",
		 b->kernel, b->mode, b->o.repeat);
	ret = sp_plot_svg(svg, title, "MiB/s", 1200, 420, p, 3);
out:
	for (size_t j = 0; j < 3; j++) {
		free(x[j]);
		free(y[j]);
	}
	return ret;
}
