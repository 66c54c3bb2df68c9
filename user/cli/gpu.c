// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu runtime: load ROCm's HIP and HSA runtime at run time
 * (user/gpu/hiprt.c's table) and say what was found: the files, HIP's
 * version, the GPUs. The GPU commands that prove each memory route build
 * on the same table (issue 47).
 *
 * Exit status: 0 found, with a GPU; 1 the runtime loaded but has no
 * usable GPU; 2 usage error; 4 ROCm's runtime is not installed (no
 * library loads); 5 it is too old (a symbol is missing, named).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpu/hiprt.h"
#include "print.h"
#include "util.h"

#define GPU_EXIT_ABSENT		4
#define GPU_EXIT_TOO_OLD	5

const char gpu_usage[] =
	"strixpeerctl [-j] gpu runtime [--hip-lib FILE] [--hsa-lib FILE]\n"
	"\n"
	"  runtime          load ROCm's HIP and HSA runtime (dlopen), show its version\n"
	"                   and GPUs\n"
	"  --hip-lib FILE   the HIP library to load ($STRIXPEER_HIP_LIB; else\n"
	"                   libamdhip64.so, .so.7, .so.6)\n"
	"  --hsa-lib FILE   the HSA library ($STRIXPEER_HSA_LIB; else libhsa-runtime64.so, .so.1)\n"
	"exit status: 0 found, 1 no usable GPU, 2 usage error, 4 ROCm's runtime\n"
	"not installed, 5 runtime too old (the missing symbol is named)\n";

/* --hip-lib, --hsa-lib; 0, or the usage error's status. */
static int gpu_lib_opts(const char *cmd, int argc, char **argv, const char **hip,
			const char **hsa)
{
	static const struct option opts[] = {
		{ "hip-lib", required_argument, NULL, 'H' },
		{ "hsa-lib", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*hip = *hsa = NULL;
	optind = 0;
	opterr = 0;
	/* getopt_long() wants argv[0]: the command's word is there. */
	while ((c = getopt_long(argc + 1, argv - 1, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			if (!optarg[0])
				return bad_usage("gpu", "%s: --hip-lib needs a file name", cmd);
			*hip = optarg;
			break;
		case 'S':
			if (!optarg[0])
				return bad_usage("gpu", "%s: --hsa-lib needs a file name", cmd);
			*hsa = optarg;
			break;
		default:
			return bad_usage("gpu", "%s: unknown option \"%s\", or it lacks its argument",
					 cmd, argv[optind - 2]);
		}
	}
	if (optind - 1 < argc)
		return bad_usage("gpu", "unexpected argument \"%s\"", argv[optind - 1]);
	return 0;
}

/* Load the table; on failure the message on stderr and the exit status. */
static int gpu_open(struct sp_hiprt *rt, const char *hip, const char *hsa)
{
	char err[768];
	int ret = sp_hiprt_open(rt, hip, hsa, err, sizeof(err));

	if (!ret)
		return 0;
	fprintf(stderr, "strixpeerctl: %s\n", err);
	return ret == SP_HIPRT_TOO_OLD ? GPU_EXIT_TOO_OLD : GPU_EXIT_ABSENT;
}

static int cmd_gpu_runtime(int argc, char **argv)
{
	const char *hip, *hsa;
	struct sp_hiprt rt;
	char ver[32], name[256];
	int ret, v = 0, n = 0, e, i;

	ret = gpu_lib_opts("runtime", argc, argv, &hip, &hsa);
	if (ret)
		return ret;
	ret = gpu_open(&rt, hip, hsa);
	if (ret)
		return ret;
	e = rt.RuntimeGetVersion(&v);
	if (e) {
		fprintf(stderr, "strixpeerctl: hipRuntimeGetVersion: %s\n",
			sp_hiprt_strerror(&rt, e));
		sp_hiprt_close(&rt);
		return 1;
	}
	pr_obj_open(NULL);
	pr_str("hip_library", "HIP library", rt.hip_path);
	pr_str("hsa_library", "HSA library", rt.hsa_path);
	pr_str("hip_version", "HIP runtime version", sp_hiprt_version(v, ver, sizeof(ver)));
	pr_s64("hip_version_number", "HIP version number", v);
	e = rt.GetDeviceCount(&n);
	if (e)
		n = 0;
	pr_arr_open("gpus", NULL);
	for (i = 0; i < n; i++) {
		pr_obj_open(NULL);
		pr_s64("index", "index", i);
		if (rt.DeviceGetName(name, sizeof(name), i))
			snprintf(name, sizeof(name), "(unknown)");
		name[sizeof(name) - 1] = '\0';
		pr_str("name", "name", name);
		pr_obj_close();
	}
	pr_arr_close();
	pr_obj_close();
	pr_done();
	if (!n)
		fprintf(stderr, "strixpeerctl: no GPU: hipGetDeviceCount: %s\n",
			e ? sp_hiprt_strerror(&rt, e) : "0 devices");
	sp_hiprt_close(&rt);
	return n ? 0 : 1;
}

static const struct cmd gpu_cmds[] = {
	{ "runtime", cmd_gpu_runtime, NULL, NULL },
	{ NULL, NULL, NULL, NULL },
};

int cmd_gpu(int argc, char **argv)
{
	return dispatch(gpu_cmds, "gpu", gpu_usage, argc, argv);
}
