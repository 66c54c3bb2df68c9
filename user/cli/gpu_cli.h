/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl gpu's files: gpu.c (the commands and their options) and
 * gpu_proof.c (gpu proof's run and report).
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
	struct sp_gp_opts o;
};

/* gpu_proof.c: runs the matrix with @rt and prints it; the exit status. */
int gpu_proof_run(const struct sp_hiprt *rt, const struct gpu_args *a);

#endif
