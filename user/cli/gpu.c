// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu: the commands that use the GPU, through ROCm's HIP and
 * HSA runtime loaded at run time (user/gpu/hiprt.c's table).
 *   runtime  the files loaded, HIP's version, the GPUs;
 *   proof    the visibility matrix over a loopback pair of this node's
 *            RDMA devices, or against 'gpu proof --serve' on another node
 *            (user/gpu/proof.c, peer.c; its report in gpu_proof.c).
 *
 * Exit status: 0 success; 1 no usable GPU, or (proof) a cell never right
 * or no loopback pair; 2 usage error; 4 ROCm's runtime is not installed;
 * 5 it is too old (a symbol is missing, named).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpu/hiprt.h"
#include "gpu_cli.h"
#include "print.h"
#include "util.h"
#include "rdma/link.h"

const char gpu_usage[] =
	"strixpeerctl [-j] gpu runtime [--hip-lib FILE] [--hsa-lib FILE]\n"
	"strixpeerctl [-j] gpu proof [--kinds LIST] [--routes LIST] [--directions LIST]\n"
	"                 [--size BYTES] [--repeat N] [--local DEV] [--peer DEV]\n"
	"                 [--numbers [--min-msg BYTES] [--max-msg BYTES] [--iters N]]\n"
	"                 [--out DIR] [--hip-lib FILE] [--hsa-lib FILE] [--quiet]\n"
	"strixpeerctl [-j] gpu proof HOST [--bind ADDR] [--port N] [--kinds LIST] ...\n"
	"strixpeerctl gpu proof --serve [--bind ADDR] [--port N]\n"
	"\n"
	"  runtime           load ROCm's HIP and HSA runtime (dlopen), show its version\n"
	"                    and GPUs\n"
	"  proof             the visibility matrix: for each memory kind, route and\n"
	"                    direction, the weakest fence after which the peer (RDMA) or\n"
	"                    the GPU always saw every byte; this node's first two RDMA\n"
	"                    devices are the loopback pair\n"
	"  HOST              two nodes: the peer is 'gpu proof --serve' on HOST\n"
	"  --serve           be the peer of another node's gpu proof, one client at a\n"
	"                    time, until interrupted (no GPU needed here)\n"
	"  --bind ADDR       --serve: listen on ADDR (all); HOST: connect from ADDR\n"
	"  --port N          the server's librdmacm port (18517)\n"
	"  --kinds LIST      malloc,hip-malloc,host-coherent,host-noncoherent,managed,\n"
	"                    fine-grained,uncached,sp-hostreg,sp-import (all)\n"
	"  --routes LIST     reg_mr,sp_reg_mr,staged (all; staged: hipMemcpy through a\n"
	"                    registered hipHostMalloc buffer, the host-staging baseline)\n"
	"  --directions LIST gpu-write,peer-write (both)\n"
	"  --size BYTES      bytes per trial, a multiple of 4K (1M)\n"
	"  --repeat N        trials per fence, 1-1000 (10)\n"
	"  --local DEV       the RDMA device the memory is registered on\n"
	"  --peer DEV        the device whose queue pair reads and writes it\n"
	"  --numbers         also measure, for every cell with a verdict: the peer's RDMA\n"
	"                    WRITE and READ bandwidth and latency per message size\n"
	"                    beside host staging, registration time per GiB, the CPU's\n"
	"                    read and write bandwidth of each kind\n"
	"  --min-msg BYTES   smallest message, a power of two from 4K (4K)\n"
	"  --max-msg BYTES   largest message, a power of two up to 1G (32M)\n"
	"  --iters N         operations per figure, 1-100000, fewer for big messages (32)\n"
	"                    (--numbers and its options: this node only, not with HOST)\n"
	"  --out DIR         also write DIR/proof.json, DIR/proof.txt and (with --numbers\n"
	"                    and gnuplot) DIR/proof.svg; DIR is created if need be\n"
	"  --hip-lib FILE    the HIP library to load ($STRIXPEER_HIP_LIB; else\n"
	"                    libamdhip64.so, .so.7, .so.6)\n"
	"  --hsa-lib FILE    the HSA library ($STRIXPEER_HSA_LIB; else libhsa-runtime64.so, .so.1)\n"
	"  --quiet           no progress on stderr\n"
	"exit status: 0 found, 1 no usable GPU (proof: a cell never right, or no\n"
	"loopback pair or server), 2 usage error, 4 ROCm's runtime not installed,\n"
	"5 runtime too old (the missing symbol is named)\n";

/* A comma-separated list of @names into a bit mask; 0, or the usage error's status. */
static int gpu_list(const char *cmd, const char *opt, const char *arg,
		    const char *const *names, unsigned int n, unsigned int *mask)
{
	char *copy = strdup(arg), *save = NULL, *w;
	int ret = 0;

	*mask = 0;
	if (!copy)
		return 1;
	for (w = strtok_r(copy, ",", &save); w && !ret; w = strtok_r(NULL, ",", &save)) {
		unsigned int i;

		for (i = 0; i < n && strcmp(w, names[i]); i++)
			;
		if (i == n)
			ret = bad_usage("gpu", "%s: %s: unknown name \"%s\"", cmd, opt, w);
		else
			*mask |= 1U << i;
	}
	free(copy);
	if (!ret && !*mask)
		ret = bad_usage("gpu", "%s: %s needs at least one name", cmd, opt);
	return ret;
}

static int gpu_number(const char *cmd, const char *opt, const char *arg, unsigned long min,
		      unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(arg, &end, 10);
	if (!arg[0] || *end || errno || arg[0] == '-' || *out < min || *out > max)
		return bad_usage("gpu", "%s: %s takes a number from %lu to %lu, not \"%s\"", cmd,
				 opt, min, max, arg);
	return 0;
}

/* The options of @cmd ("runtime" takes only the library ones); 0 or 2. */
static int gpu_opts(const char *cmd, int argc, char **argv, struct gpu_args *a)
{
	static const struct option opts[] = {
		{ "hip-lib", required_argument, NULL, 'H' },
		{ "hsa-lib", required_argument, NULL, 'S' },
		{ "kinds", required_argument, NULL, 'k' },
		{ "routes", required_argument, NULL, 'r' },
		{ "directions", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ "repeat", required_argument, NULL, 'n' },
		{ "local", required_argument, NULL, 'l' },
		{ "peer", required_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "numbers", no_argument, NULL, 'N' },
		{ "min-msg", required_argument, NULL, 'm' },
		{ "max-msg", required_argument, NULL, 'M' },
		{ "iters", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "serve", no_argument, NULL, 'V' },
		{ "bind", required_argument, NULL, 'b' },
		{ "port", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	bool proof = !strcmp(cmd, "proof");
	char why[64];
	unsigned long v;
	uint64_t bytes;
	int c, li = 0, ret = 0;

	optind = 0;
	opterr = 0;
	/*
	 * getopt_long() wants argv[0]: the command's word is there. It
	 * permutes: HOST may stand before or after the options.
	 */
	while (!ret && (c = getopt_long(argc + 1, argv - 1, "", opts, &li)) != -1) {
		if (c != 'H' && c != 'S' && c != '?' && !proof)
			return bad_usage("gpu", "%s: unknown option \"--%s\"", cmd, opts[li].name);
		if (c != '?' && c != 'V' && c != 'b' && c != 'P' && !a->matrix_opt)
			a->matrix_opt = opts[li].name;
		switch (c) {
		case 'H':
		case 'S':
			if (!optarg[0])
				return bad_usage("gpu", "%s: --%s needs a file name", cmd,
						 c == 'H' ? "hip-lib" : "hsa-lib");
			*(c == 'H' ? &a->hip : &a->hsa) = optarg;
			break;
		case 'k':
			ret = gpu_list(cmd, "--kinds", optarg, sp_gp_kind_names, SP_GP_NR_KINDS,
				       &a->o.kinds);
			break;
		case 'r':
			ret = gpu_list(cmd, "--routes", optarg, sp_gp_route_names, SP_GP_NR_ROUTES,
				       &a->o.routes);
			break;
		case 'd':
			ret = gpu_list(cmd, "--directions", optarg, sp_gp_dir_names, SP_GP_NR_DIRS,
				       &a->o.dirs);
			break;
		case 's':
			if (parse_bytes(optarg, &bytes) || !bytes || bytes % 4096 ||
			    bytes > (1ULL << 30))
				return bad_usage("gpu", "%s: --size takes a multiple of 4K up to 1G, not \"%s\"",
						 cmd, optarg);
			a->o.size = (size_t)bytes;
			break;
		case 'n':
			ret = gpu_number(cmd, "--repeat", optarg, 1, 1000, &v);
			a->o.repeat = (unsigned int)v;
			break;
		case 'l':
			a->o.local_dev = optarg;
			break;
		case 'p':
			a->o.peer_dev = optarg;
			break;
		case 'q':
			a->quiet = true;
			break;
		case 'N':
			a->o.numbers = true;
			break;
		case 'm':
		case 'M':
			if (parse_bytes(optarg, &bytes) || bytes < 4096 || bytes > (1ULL << 30) ||
			    (bytes & (bytes - 1)))
				return bad_usage("gpu", "%s: %s takes a power of two from 4K to 1G, not \"%s\"",
						 cmd, c == 'm' ? "--min-msg" : "--max-msg", optarg);
			*(c == 'm' ? &a->o.min_msg : &a->o.max_msg) = (size_t)bytes;
			a->msg_given = true;
			break;
		case 'i':
			ret = gpu_number(cmd, "--iters", optarg, 1, 100000, &v);
			a->o.iters = (unsigned int)v;
			a->msg_given = true;
			break;
		case 'o':
			if (!optarg[0])
				return bad_usage("gpu", "%s: --out needs a directory", cmd);
			a->out = optarg;
			break;
		case 'V':
			a->serve = true;
			break;
		case 'b':
			if (!optarg[0])
				return bad_usage("gpu", "%s: --bind needs an address", cmd);
			a->o.bind = optarg;
			break;
		case 'P':
			if (sp_link_port_ok(optarg, why, sizeof(why)))
				return bad_usage("gpu", "%s: --port: %s", cmd, why);
			a->o.port = optarg;
			break;
		default:
			return bad_usage("gpu", "%s: unknown option \"%s\", or it lacks its argument",
					 cmd, argv[optind - 2]);
		}
	}
	if (ret)
		return ret;
	if (proof && optind - 1 < argc && !a->serve)
		a->o.server = argv[optind++ - 1];
	if (optind - 1 < argc)
		return bad_usage("gpu", "unexpected argument \"%s\"%s", argv[optind - 1],
				 a->serve ? " (--serve takes no HOST)" : "");
	if (a->serve && a->matrix_opt)
		return bad_usage("gpu", "%s: --serve takes only --bind and --port, not --%s (the client chooses the matrix)",
				 cmd, a->matrix_opt);
	if (!a->serve && !a->o.server && (a->o.bind || a->o.port))
		return bad_usage("gpu", "%s: --bind and --port go with HOST or --serve", cmd);
	if (a->o.server && (a->o.local_dev || a->o.peer_dev))
		return bad_usage("gpu", "%s: with HOST the devices are the route's: --bind ADDR picks this node's, not --local/--peer",
				 cmd);
	if (a->o.server && a->o.numbers)
		return bad_usage("gpu", "%s: --numbers is measured on one node only for now: run it without HOST",
				 cmd);
	if (a->o.local_dev && a->o.peer_dev && !strcmp(a->o.local_dev, a->o.peer_dev))
		return bad_usage("gpu", "%s: --local and --peer name the same device", cmd);
	if (a->msg_given && !a->o.numbers)
		return bad_usage("gpu", "%s: --min-msg, --max-msg and --iters go with --numbers", cmd);
	if (a->o.min_msg > a->o.max_msg)
		return bad_usage("gpu", "%s: --min-msg is larger than --max-msg", cmd);
	return 0;
}

/* Load the table; on failure the message on stderr and the exit status. */
static int gpu_open(struct sp_hiprt *rt, const struct gpu_args *a)
{
	char err[768];
	int ret = sp_hiprt_open(rt, a->hip, a->hsa, err, sizeof(err));

	if (!ret)
		return 0;
	fprintf(stderr, "strixpeerctl: %s\n", err);
	return ret == SP_HIPRT_TOO_OLD ? GPU_EXIT_TOO_OLD : GPU_EXIT_ABSENT;
}

static void gpu_args_init(struct gpu_args *a)
{
	memset(a, 0, sizeof(*a));
	a->o.size = 1 << 20;
	a->o.repeat = 10;
	a->o.kinds = (1U << SP_GP_NR_KINDS) - 1;
	a->o.routes = (1U << SP_GP_NR_ROUTES) - 1;
	a->o.dirs = (1U << SP_GP_NR_DIRS) - 1;
	a->o.min_msg = 4096;
	a->o.max_msg = 32 << 20;
	a->o.iters = 32;
}

static int cmd_gpu_runtime(int argc, char **argv)
{
	struct gpu_args a;
	struct sp_hiprt rt;
	char ver[32], name[256];
	int ret, v = 0, n = 0, e, i;

	gpu_args_init(&a);
	ret = gpu_opts("runtime", argc, argv, &a);
	if (ret)
		return ret;
	ret = gpu_open(&rt, &a);
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

static int cmd_gpu_proof(int argc, char **argv)
{
	struct gpu_args a;
	struct sp_hiprt rt;
	int ret, n = 0;

	gpu_args_init(&a);
	ret = gpu_opts("proof", argc, argv, &a);
	if (ret)
		return ret;
	if (a.serve)
		return gpu_proof_serve(&a);
	if (a.out) {
		ret = gpu_out_dir(a.out);
		if (ret)
			return ret;
	}
	ret = gpu_open(&rt, &a);
	if (ret)
		return ret;
	if (rt.GetDeviceCount(&n) || n < 1) {
		fprintf(stderr, "strixpeerctl: no GPU: hipGetDeviceCount found none (%s)\n",
			rt.hip_path);
		sp_hiprt_close(&rt);
		return 1;
	}
	ret = gpu_proof_run(&rt, &a);
	sp_hiprt_close(&rt);
	return ret;
}

static const struct cmd gpu_cmds[] = {
	{ "runtime", cmd_gpu_runtime, NULL, NULL },
	{ "proof", cmd_gpu_proof, NULL, NULL },
	{ NULL, NULL, NULL, NULL },
};

int cmd_gpu(int argc, char **argv)
{
	return dispatch(gpu_cmds, "gpu", gpu_usage, argc, argv);
}
