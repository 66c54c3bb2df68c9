// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu proof: runs user/gpu/proof.c's visibility matrix and
 * prints its report through print.c: the node's facts, then one row per
 * cell (kind, route, direction, the weakest fence that was always enough,
 * and per fence the trials that were right), as a table or JSON (-j).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_cli.h"
#include "print.h"
#include "util.h"

static void gpu_progress(const char *msg)
{
	fprintf(stderr, "%s\n", msg);
}

static void gpu_print_facts(const struct sp_gp_facts *f)
{
	pr_obj_open_label("node", "node");
	pr_str("kernel", "kernel", f->kernel);
	pr_str("rdma_device", "RDMA device (memory)", f->local_dev[0] ? f->local_dev : "none");
	pr_str("rdma_firmware", "its firmware", f->local_fw);
	pr_str("peer_device", "RDMA device (peer)", f->peer_dev[0] ? f->peer_dev : "none");
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

static void gpu_print_cell(const struct sp_gp_cell *c)
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
	if (cli_json) {
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

int gpu_proof_run(const struct sp_hiprt *rt, const struct gpu_args *a)
{
	struct sp_gp_opts o = a->o;
	struct sp_gp_result *res = calloc(1, sizeof(*res));
	char err[512];
	int ret, status = 0;

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
	pr_obj_open(NULL);
	gpu_print_facts(&res->facts);
	pr_obj_open_label("options", "options");
	pr_bytes("size", "bytes per trial", o.size);
	pr_u64("repeat", "trials per fence", o.repeat);
	pr_obj_close();
	if (res->rdma_reason[0])
		pr_str("rdma_unavailable", "RDMA unavailable", res->rdma_reason);
	else
		pr_null("rdma_unavailable", "RDMA unavailable", "no");
	pr_arr_open("cells", NULL);
	for (unsigned int i = 0; i < res->ncells; i++) {
		const struct sp_gp_cell *c = &res->cells[i];

		gpu_print_cell(c);
		if (c->runs[0] && c->weakest < 0)
			status = 1;
	}
	pr_arr_close();
	pr_obj_close();
	pr_done();
	if (res->rdma_reason[0]) {
		fprintf(stderr, "strixpeerctl: gpu proof: %s\n", res->rdma_reason);
		status = 1;
	}
	free(res);
	return status;
}
