/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl gpu's files: gpu.c (the commands and their options),
 * gpu_proof.c (gpu proof's run, report and --out files) and gpu_numbers.c
 * (the figures of --numbers: their report and SVG plot).
 */
#ifndef SP_GPU_CLI_H
#define SP_GPU_CLI_H

#include <stdbool.h>

#include "gpu/hiprt.h"
#include "gpu/proof.h"

#define GPU_EXIT_ABSENT		4
#define GPU_EXIT_TOO_OLD	5

struct gpu_args {
	const char *hip, *hsa;
	bool quiet;
	bool msg_given;		/* --min-msg, --max-msg or --iters */
	const char *out;	/* --out DIR, or NULL */
	bool serve;		/* --serve */
	const char *matrix_opt;	/* the first option that makes no sense with --serve */
	struct sp_gp_opts o;
};

/* gpu_proof.c: --out's directory made (if need be) and writable; 0 or 1. */
int gpu_out_dir(const char *dir);

/* gpu_proof.c: gpu proof --serve until SIGINT/SIGTERM; the exit status. */
int gpu_proof_serve(const struct gpu_args *a);

/* gpu_proof.c: runs the matrix with @rt and prints it; the exit status. */
int gpu_proof_run(const struct sp_hiprt *rt, const struct gpu_args *a);

/* gpu_numbers.c: the figures' part of the report, through print.c. */
void gpu_print_numbers(const struct sp_gp_result *res, bool json);
/* gpu_numbers.c: bandwidth vs message size per kind and route; 0, or -errno. */
int gpu_plot_numbers(const struct sp_gp_result *res, const char *svg);

#endif
