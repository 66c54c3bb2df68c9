// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu proof --numbers: the figures' part of the report
 * (user/gpu/numbers.c measures them) through print.c, as rows in a table
 * or nested objects in JSON, each beside host staging's (RDMA) or
 * malloc's (CPU) figure; and their SVG plot, bandwidth against message
 * size per kind and route, drawn by user/bench's plot code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_cli.h"
#include "print.h"
#include "bench/bench.h"
#include "bench/plot.h"

/* @v with @prec decimals, or null ("-") when @v is not a figure (<= 0). */
static void gpu_fig(const char *key, const char *label, int prec, double v)
{
	char text[48];

	if (!(v > 0) || isnan(v) || isinf(v)) {
		pr_null(key, label, "-");
		return;
	}
	snprintf(text, sizeof(text), "%.*f", prec, v);
	pr_number(key, label, text);
}

static double gpu_ratio(double v, double ref)
{
	return v > 0 && ref > 0 ? v / ref : -1;
}

static void gpu_rdma_point(const struct sp_gp_numbers *nb, const struct sp_gp_rdma_fig *fig,
			   const struct sp_gp_rdma_fig *st, unsigned int si)
{
	bool sm = st->measured;

	pr_bytes("size", "size", nb->sizes[si]);
	gpu_fig("bw_mib_s", "MiB/s", 1, fig->bw[si]);
	gpu_fig("bw_vs_staged", "x staged", 3, sm ? gpu_ratio(fig->bw[si], st->bw[si]) : -1);
	gpu_fig("lat_us", "latency us", 2, fig->lat[si]);
	gpu_fig("lat_vs_staged", "x staged", 3,
		sm ? gpu_ratio(fig->lat[si], st->lat[si]) : -1);
	pr_u64("iters", "ops", fig->iters[si]);
}

static void gpu_rdma(const struct sp_gp_result *res, bool json)
{
	const struct sp_gp_numbers *nb = &res->numbers;

	pr_arr_open("rdma", NULL);
	for (int k = 0; k < SP_GP_NR_KINDS; k++) {
		const struct sp_gp_kind_numbers *kn = &nb->k[k];

		if (!kn->allocated)
			continue;
		for (int r = 0; r < SP_GP_NR_ROUTES; r++) {
			for (int op = 0; op < SP_GP_NR_OPS; op++) {
				const struct sp_gp_rdma_fig *fig = &kn->rdma[r][op];
				const struct sp_gp_rdma_fig *st = &kn->rdma[SP_GP_STAGED][op];

				if (json) {
					pr_obj_open(NULL);
					pr_str("kind", NULL, sp_gp_kind_names[k]);
					pr_str("route", NULL, sp_gp_route_names[r]);
					pr_str("op", NULL, sp_gp_op_names[op]);
					pr_bool("measured", NULL, fig->measured);
					if (fig->reason[0])
						pr_str("reason", NULL, fig->reason);
					else
						pr_null("reason", NULL, "");
					pr_arr_open("points", NULL);
					for (unsigned int si = 0; fig->measured && si < nb->nsizes; si++) {
						pr_obj_open(NULL);
						gpu_rdma_point(nb, fig, st, si);
						pr_obj_close();
					}
					pr_arr_close();
					pr_obj_close();
					continue;
				}
				if (!fig->measured && !fig->reason[0])
					continue;
				for (unsigned int si = 0; si < (fig->measured ? nb->nsizes : 1); si++) {
					pr_obj_open(NULL);
					pr_str("kind", "kind", sp_gp_kind_names[k]);
					pr_str("route", "route", sp_gp_route_names[r]);
					pr_str("op", "op", sp_gp_op_names[op]);
					if (fig->measured) {
						gpu_rdma_point(nb, fig, st, si);
						pr_str("note", "note", "");
					} else {
						pr_str("size", "size", "-");
						pr_str("bw_mib_s", "MiB/s", "-");
						pr_str("bw_vs_staged", "x staged", "-");
						pr_str("lat_us", "latency us", "-");
						pr_str("lat_vs_staged", "x staged", "-");
						pr_str("iters", "ops", "-");
						pr_str("note", "note", fig->reason);
					}
					pr_obj_close();
				}
			}
		}
	}
	pr_arr_close();
}

static void gpu_reg(const struct sp_gp_numbers *nb)
{
	pr_arr_open("registration", NULL);
	for (int k = 0; k < SP_GP_NR_KINDS; k++) {
		const struct sp_gp_kind_numbers *kn = &nb->k[k];

		if (!kn->allocated)
			continue;
		for (int r = 0; r < SP_GP_STAGED; r++) {
			pr_obj_open(NULL);
			pr_str("kind", "kind", sp_gp_kind_names[k]);
			pr_str("route", "route", sp_gp_route_names[r]);
			gpu_fig("reg_ms_per_gib", "register ms/GiB", 3, kn->reg_ms_gib[r]);
			gpu_fig("dereg_ms_per_gib", "deregister ms/GiB", 3, kn->dereg_ms_gib[r]);
			if (kn->reg_ms_gib[r] > 0)
				pr_null("reason", "note", "");
			else
				pr_str("reason", "note", kn->reg_reason[r]);
			pr_obj_close();
		}
	}
	pr_arr_close();
}

static void gpu_cpu(const struct sp_gp_numbers *nb)
{
	const struct sp_gp_kind_numbers *mk = &nb->k[SP_GP_MALLOC];

	pr_arr_open("cpu", NULL);
	for (int k = 0; k < SP_GP_NR_KINDS; k++) {
		const struct sp_gp_kind_numbers *kn = &nb->k[k];

		if (!kn->allocated)
			continue;
		pr_obj_open(NULL);
		pr_str("kind", "kind", sp_gp_kind_names[k]);
		gpu_fig("read_mib_s", "CPU read MiB/s", 1, kn->cpu_read);
		gpu_fig("read_vs_malloc", "x malloc", 3,
			mk->allocated ? gpu_ratio(kn->cpu_read, mk->cpu_read) : -1);
		gpu_fig("write_mib_s", "CPU write MiB/s", 1, kn->cpu_write);
		gpu_fig("write_vs_malloc", "x malloc", 3,
			mk->allocated ? gpu_ratio(kn->cpu_write, mk->cpu_write) : -1);
		if (kn->cpu_read > 0)
			pr_null("reason", "note", "");
		else
			pr_str("reason", "note", kn->cpu_reason);
		pr_obj_close();
	}
	pr_arr_close();
}

void gpu_print_numbers(const struct sp_gp_result *res, bool json)
{
	const struct sp_gp_numbers *nb = &res->numbers;

	if (!nb->run) {
		pr_null("figures", "figures", "not measured (--numbers)");
		return;
	}
	pr_obj_open_label("figures", "figures");
	pr_str("source", "measured on", nb->source);
	pr_bool("stand_in", "stand-in", nb->stand_in);
	pr_bytes("bytes", "bytes per kind", nb->bytes);
	pr_u64("iters", "operations per figure", nb->iters);
	pr_arr_open("msg_sizes", "message sizes");
	for (unsigned int si = 0; si < nb->nsizes; si++) {
		if (json) {
			pr_u64(NULL, NULL, nb->sizes[si]);
		} else {
			char text[32];

			pr_format_bytes(text, sizeof(text), nb->sizes[si]);
			pr_str(NULL, NULL, text);
		}
	}
	pr_arr_close();
	pr_arr_open("not_measured", "not measured");
	for (int k = 0; k < SP_GP_NR_KINDS; k++) {
		char text[300];

		if (nb->k[k].allocated || !nb->k[k].reason[0])
			continue;
		snprintf(text, sizeof(text), "%s: %s", sp_gp_kind_names[k], nb->k[k].reason);
		pr_str(NULL, NULL, text);
	}
	pr_arr_close();
	pr_obj_close();
	gpu_rdma(res, json);
	gpu_reg(nb);
	gpu_cpu(nb);
}

int gpu_plot_numbers(const struct sp_gp_result *res, const char *svg)
{
	static const char *const panel[SP_GP_NR_OPS] = { "RDMA WRITE (peer-write)",
							  "RDMA READ (gpu-write)" };
	enum { NC = SP_GP_NR_KINDS * SP_GP_NR_ROUTES };
	const struct sp_gp_numbers *nb = &res->numbers;
	char names[NC][48], title[1024];
	const char *np[NC];
	struct sp_plot_panel p[SP_GP_NR_OPS];
	double *y[SP_GP_NR_OPS] = { NULL };
	int ret = 0;

	for (int op = 0; op < SP_GP_NR_OPS; op++) {
		y[op] = calloc((size_t)nb->nsizes * NC + 1, sizeof(double));
		if (!y[op]) {
			ret = -ENOMEM;
			goto out;
		}
		for (unsigned int si = 0; si < nb->nsizes; si++)
			for (int col = 0; col < NC; col++) {
				const struct sp_gp_rdma_fig *fig =
					&nb->k[col / SP_GP_NR_ROUTES].rdma[col % SP_GP_NR_ROUTES][op];

				y[op][si * NC + col] = fig->measured ? fig->bw[si] : NAN;
			}
		p[op] = (struct sp_plot_panel){ .name = panel[op], .nrows = nb->nsizes,
						.x = nb->sizes, .ncols = NC, .col_names = np,
						.y = y[op] };
	}
	for (int col = 0; col < NC; col++) {
		snprintf(names[col], sizeof(names[col]), "%s %s",
			 sp_gp_kind_names[col / SP_GP_NR_ROUTES],
			 sp_gp_route_names[col % SP_GP_NR_ROUTES]);
		np[col] = names[col];
	}
	snprintf(title, sizeof(title), "strixpeerctl gpu proof: %s%s, kernel %s, %s -> %s",
		 nb->stand_in ? "STAND-IN, NOT A GPU: " : "", res->facts.gpu, res->facts.kernel,
		 res->facts.peer_dev, res->facts.local_dev);
	ret = sp_plot_svg(svg, title, "MiB/s", 1400, 560, p, SP_GP_NR_OPS);
out:
	for (int op = 0; op < SP_GP_NR_OPS; op++)
		free(y[op]);
	return ret;
}
