// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu proof: runs user/gpu/proof.c's visibility matrix and
 * prints its report through print.c: the node's facts, then one row per
 * cell (kind, route, direction, the weakest fence that was always enough,
 * and per fence the trials that were right), then with --numbers the
 * figures (gpu_numbers.c), as a table or JSON (-j); with --out DIR the
 * same report into DIR/proof.json and DIR/proof.txt, and the figures'
 * plot into DIR/proof.svg.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "gpu_cli.h"
#include "print.h"
#include "util.h"
#include "bench/bench.h"

static void gpu_progress(const char *msg)
{
	fprintf(stderr, "%s\n", msg);
}

static void gpu_print_facts(const struct sp_gp_facts *f)
{
	bool two = f->server[0] != '\0';

	pr_obj_open_label("node", "node");
	pr_str("mode", "mode", two ? "two-node" : "loopback");
	if (two) {
		pr_str("server", "server (gpu proof --serve)", f->server);
		pr_str("server_kernel", "its kernel", f->server_kernel);
	} else {
		pr_null("server", "server (gpu proof --serve)", "none");
		pr_null("server_kernel", "its kernel", "none");
	}
	pr_str("kernel", "kernel", f->kernel);
	pr_str("rdma_device", "RDMA device (memory)", f->local_dev[0] ? f->local_dev : "none");
	pr_str("rdma_firmware", "its firmware", f->local_fw);
	pr_str("peer_device", two ? "RDMA device (peer, the server's)" : "RDMA device (peer)",
	       f->peer_dev[0] ? f->peer_dev : "none");
	pr_str("peer_firmware", "its firmware", f->peer_fw);
	pr_str("iommu", "IOMMU", f->iommu);
	pr_str("perfopt", "PerfOpt bypass", f->perfopt);
	if (f->gtt_bytes >= 0)
		pr_bytes("gtt_bytes", "GTT size", (uint64_t)f->gtt_bytes);
	else
		pr_null("gtt_bytes", "GTT size", "unknown (no amdgpu mem_info_gtt_total)");
	pr_str("hip_version", "HIP runtime version", f->hip_version);
	pr_str("hip_library", "HIP library", f->hip_library);
	pr_str("gpu", "GPU", f->gpu);
	pr_obj_close();
}

static void gpu_print_cell(const struct sp_gp_cell *c, bool json)
{
	char text[64];

	pr_obj_open(NULL);
	pr_str("kind", "kind", sp_gp_kind_names[c->kind]);
	pr_str("route", "route", sp_gp_route_names[c->route]);
	pr_str("direction", "direction", sp_gp_dir_names[c->dir]);
	if (!c->available && !c->runs[0])
		pr_str("verdict", "weakest fence", "unavailable");
	else if (c->weakest < 0)
		pr_str("verdict", "weakest fence", "never");
	else
		pr_str("verdict", "weakest fence", sp_gp_fence_names[c->weakest]);
	if (json) {
		pr_bool("available", NULL, c->available);
		if (c->reason[0])
			pr_str("reason", NULL, c->reason);
		else
			pr_null("reason", NULL, "");
		pr_str("registration", NULL, c->reg_path);
		pr_bool("inconsistent", NULL, c->inconsistent);
		pr_arr_open("fences", NULL);
		for (int f = 0; f < SP_GP_NR_FENCES; f++) {
			pr_obj_open(NULL);
			pr_str("fence", NULL, sp_gp_fence_names[f]);
			pr_u64("right", NULL, c->ok[f]);
			pr_u64("trials", NULL, c->runs[f]);
			pr_s64("first_bad_byte", NULL, c->first_bad[f]);
			pr_obj_close();
		}
		pr_arr_close();
	} else {
		for (int f = 0; f < SP_GP_NR_FENCES; f++) {
			snprintf(text, sizeof(text), "%u/%u", c->ok[f], c->runs[f]);
			pr_str(sp_gp_fence_names[f], sp_gp_fence_names[f], text);
		}
		pr_str("registration", "registered by", c->reg_path[0] ? c->reg_path : "-");
		pr_str("reason", "note", c->reason[0] ? c->reason :
		       c->inconsistent ? "a weaker fence was right where a stronger was not" : "");
	}
	pr_obj_close();
}

/* The report's version: bumped when a field changes meaning or goes away. */
#define GPU_REPORT_VERSION	2

/* The whole report through print.c; the exit status it calls for. */
static int gpu_report(const struct sp_gp_result *res, const struct sp_gp_opts *o, bool json)
{
	int status = 0;

	pr_obj_open(NULL);
	pr_u64("report_version", "report version", GPU_REPORT_VERSION);
	gpu_print_facts(&res->facts);
	pr_obj_open_label("options", "options");
	pr_bytes("size", "bytes per trial", o->size);
	pr_u64("repeat", "trials per fence", o->repeat);
	pr_obj_close();
	if (res->rdma_reason[0])
		pr_str("rdma_unavailable", "RDMA unavailable", res->rdma_reason);
	else
		pr_null("rdma_unavailable", "RDMA unavailable", "no");
	pr_arr_open("cells", NULL);
	for (unsigned int i = 0; i < res->ncells; i++) {
		const struct sp_gp_cell *c = &res->cells[i];

		gpu_print_cell(c, json);
		if (c->runs[0] && c->weakest < 0)
			status = 1;
	}
	pr_arr_close();
	gpu_print_numbers(res, json);
	pr_obj_close();
	pr_done();
	return status;
}

int gpu_out_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "strixpeerctl: gpu proof: --out %s: cannot create it: %s\n", dir,
			strerror(errno));
		return 1;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "strixpeerctl: gpu proof: --out %s: not a directory\n", dir);
		return 1;
	}
	if (access(dir, W_OK | X_OK)) {
		fprintf(stderr, "strixpeerctl: gpu proof: --out %s: cannot write into it: %s\n",
			dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* The report into @dir/@name, as JSON (pretty) or the table; 0 or 1. */
static int gpu_report_file(const struct sp_gp_result *res, const struct sp_gp_opts *o,
			   const char *dir, const char *name, bool json)
{
	char path[4096];
	int fd, saved, bad;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fflush(stdout);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	saved = fd < 0 ? -1 : dup(1);
	if (fd < 0 || saved < 0 || dup2(fd, 1) < 0) {
		fprintf(stderr, "strixpeerctl: gpu proof: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		if (saved >= 0)
			close(saved);
		return 1;
	}
	close(fd);
	pr_init(json, true);
	gpu_report(res, o, json);
	bad = fflush(stdout) || ferror(stdout);
	clearerr(stdout);
	dup2(saved, 1);
	close(saved);
	if (bad) {
		fprintf(stderr, "strixpeerctl: gpu proof: writing %s failed\n", path);
		return 1;
	}
	return 0;
}

/* --out: proof.json, proof.txt and the plot; 0 or 1. */
static int gpu_out(const struct sp_gp_result *res, const struct sp_gp_opts *o, const char *dir)
{
	char svg[4096];
	int ret;

	if (gpu_report_file(res, o, dir, "proof.json", true) ||
	    gpu_report_file(res, o, dir, "proof.txt", false))
		return 1;
	if (!res->numbers.run) {
		fprintf(stderr, "strixpeerctl: gpu proof: no %s/proof.svg: no figures to plot (--numbers)\n",
			dir);
		return 0;
	}
	snprintf(svg, sizeof(svg), "%s/proof.svg", dir);
	ret = gpu_plot_numbers(res, svg);
	if (ret == -ENOENT || ret == -ENODATA) {
		/* the report stands without its picture */
		fprintf(stderr, "strixpeerctl: gpu proof: no %s: %s\n", svg, sp_bench_errmsg());
		return 0;
	}
	if (ret) {
		fprintf(stderr, "strixpeerctl: gpu proof: %s: %s\n", svg,
			ret == -ENOMEM ? "out of memory" : sp_bench_errmsg());
		return 1;
	}
	return 0;
}

int gpu_proof_serve(const struct gpu_args *a)
{
	char err[320];

	if (sp_gp_serve(a->o.bind, a->o.port, err, sizeof(err))) {
		fprintf(stderr, "strixpeerctl: gpu proof --serve: %s\n", err);
		return 1;
	}
	return 0;
}

int gpu_proof_run(const struct sp_hiprt *rt, const struct gpu_args *a)
{
	struct sp_gp_opts o = a->o;
	struct sp_gp_result *res = calloc(1, sizeof(*res));
	char err[512];
	int ret, status;

	if (!res) {
		fprintf(stderr, "strixpeerctl: out of memory\n");
		return 1;
	}
	if (!a->quiet)
		o.progress = gpu_progress;
	ret = sp_gp_run(rt, &o, res, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "strixpeerctl: gpu proof: %s\n", err);
		free(res);
		return 1;
	}
	status = gpu_report(res, &o, cli_json);
	if (a->out && gpu_out(res, &o, a->out))
		status = 1;
	if (res->rdma_reason[0]) {
		fprintf(stderr, "strixpeerctl: gpu proof: %s\n", res->rdma_reason);
		status = 1;
	}
	free(res);
	return status;
}
