// SPDX-License-Identifier: MIT
/*
 * strixpeerctl bench: measure strixpeer buffers against malloc, THP,
 * hugetlb and a dma-buf import, on this node (two RDMA devices) or
 * between two nodes (bench --serve on one, bench HOST on the other).
 * The measuring is user/bench/'s (sp_bench_*); this file parses options
 * and writes the report: the ratio table, or JSON with -j, and with
 * --out DIR bench.json, bench.txt and bench.svg (gnuplot) there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "rdma/link.h"
#include "cli.h"
#include "util.h"
#include "strixpeer.h"

static void bench_usage(FILE *f)
{
	fputs("usage: strixpeerctl [-j] bench [HOST] [options]\n"
	      "       strixpeerctl bench --serve [--bind ADDR] [--port N]\n\n"
	      "  HOST              measure against 'bench --serve' on HOST (else: this node,\n"
	      "                    its first two RDMA devices with IPv4 addresses)\n"
	      "  --local ADDR      IPv4 address of the client's RDMA device\n"
	      "  --peer ADDR       this node only: the serving device's IPv4 address\n"
	      "  --port N          the server's librdmacm port, the only one (18515)\n"
	      "  --size BYTES      allocation/registration/memcpy size (256M)\n"
	      "  --repeat N        repetitions, kinds interleaved in each (5)\n"
	      "  --kinds LIST      strixpeer,malloc,thp,hugetlb,dmabuf,gpu-dmabuf,\n"
	      "                    gpu-peerdirect (all)\n"
	      "  --ops LIST        write,read,send,host (all)\n"
	      "  --min-msg BYTES   smallest RDMA message (2)\n"
	      "  --max-msg BYTES   largest RDMA message (8M)\n"
	      "  --iters N         bandwidth iterations (1000) ...\n"
	      "  --max-bytes BYTES ... at most this many bytes per sample (1G)\n"
	      "  --lat-iters N     latency iterations (1000)\n"
	      "  --depth N         outstanding work requests (128)\n"
	      "  --events          sleep for completions (perftest -e) instead of polling\n"
	      "  --out DIR         also write DIR/bench.json, bench.txt, bench.svg\n"
	      "  --quiet           no progress on stderr\n"
	      "exit status: 0 measured, 1 a part asked for (RDMA) could not run\n"
	      "(the JSON's rdma_unavailable says why), 2 usage error\n", f);
}

/*
 * Whether the RDMA figures were measured: the report's rdma_unavailable is
 * null. The bench says why they were not only in its reports, so read
 * the JSON one (written to memory, never to a file).
 */
static bool bench_rdma_ran(const struct sp_bench *b)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	bool ran = false;

	if (!f)
		return false;
	int wrote = sp_bench_write_json(b, f);

	if (fclose(f) == 0 && wrote == 0)
		ran = buf && strstr(buf, "\"rdma_unavailable\":null");
	free(buf);
	return ran;
}

static int bench_list(const char *arg, const char *const *names, unsigned int n,
		      unsigned int *mask)
{
	char *copy = strdup(arg), *save = NULL, *w;
	int ret = 0;

	*mask = 0;
	if (!copy)
		return -1;
	for (w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		unsigned int i;

		for (i = 0; i < n && strcmp(w, names[i]); i++)
			;
		if (i == n) {
			fprintf(stderr, "strixpeerctl: bench: unknown \"%s\"\n", w);
			ret = -1;
			break;
		}
		*mask |= 1U << i;
	}
	free(copy);
	return ret;
}

static void bench_progress(const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "bench: %s\n", msg);
}

static int bench_number(const char *opt, const char *arg, uint64_t max, uint64_t *v)
{
	if (parse_bytes(arg, v) || *v > max) {
		fprintf(stderr, "strixpeerctl: bench: bad value for --%s: %s\n", opt, arg);
		return -1;
	}
	return 0;
}

/* Write the report files into @dir. */
static int bench_out(const struct sp_bench *b, const char *dir)
{
	char path[4096];
	FILE *f;
	int ret = 0, c;

	if (mkdir(dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "strixpeerctl: bench: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/bench.%s", dir, i ? "txt" : "json");
		f = fopen(path, "we");
		if (!f || (i ? sp_bench_write_table(b, f) : sp_bench_write_json(b, f)) ||
		    fclose(f)) {
			fprintf(stderr, "strixpeerctl: bench: %s: %s\n", path,
				f ? sp_bench_errmsg() : strerror(errno));
			ret = 1;
		}
	}
	snprintf(path, sizeof(path), "%s/bench.svg", dir);
	c = sp_bench_write_plot(b, path);
	if (c == -ENODATA || c == -ENOENT) {	/* no RDMA figures; no gnuplot */
		fprintf(stderr, "bench: no plot: %s\n", sp_bench_errmsg());
	} else if (c < 0) {
		fprintf(stderr, "strixpeerctl: bench: plot: %s\n", sp_bench_errmsg());
		ret = 1;
	}
	return ret;
}

int cmd_bench(int argc, char **argv)
{
	static const char *const kinds[] = { "strixpeer", "malloc", "thp", "hugetlb", "dmabuf",
					     "gpu-dmabuf", "gpu-peerdirect" };
	static const char *const ops[] = { "write", "read", "send", "host" };
	static const struct option opts[] = {
		{ "serve", no_argument, NULL, 'S' },
		{ "bind", required_argument, NULL, 'b' },
		{ "port", required_argument, NULL, 'P' },
		{ "local", required_argument, NULL, 'l' },
		{ "peer", required_argument, NULL, 'e' },
		{ "size", required_argument, NULL, 's' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "kinds", required_argument, NULL, 'k' },
		{ "ops", required_argument, NULL, 'o' },
		{ "min-msg", required_argument, NULL, 'm' },
		{ "max-msg", required_argument, NULL, 'M' },
		{ "iters", required_argument, NULL, 'n' },
		{ "max-bytes", required_argument, NULL, 'B' },
		{ "lat-iters", required_argument, NULL, 'L' },
		{ "depth", required_argument, NULL, 'd' },
		{ "out", required_argument, NULL, 'O' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "events", no_argument, NULL, 'E' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_bench_opts o;
	struct sp_bench *b;
	const char *out = NULL;
	bool serve = false, quiet = false;
	char why[80];
	uint64_t v;
	int c, ret;

	/* "bench help": not a host called help */
	if (argc >= 1 && !strcmp(argv[0], "help")) {
		if (argc > 1) {
			fprintf(stderr, "strixpeerctl: bench: unexpected argument \"%s\"; see "
				"\"strixpeerctl bench help\"\n", argv[1]);
			return 2;
		}
		bench_usage(stdout);
		return 0;
	}
	sp_bench_opts_init(&o);
	o.progress = bench_progress;
	optind = 0;	/* argv[0] is the first word after "bench" */
	argc++;
	argv--;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'S':
			serve = true;
			break;
		case 'b':
			o.serve_addr = optarg;
			break;
		case 'e':
			o.serve_addr = optarg;
			break;
		case 'P':
			if (sp_link_port_ok(optarg, why, sizeof(why))) {
				fprintf(stderr, "strixpeerctl: bench: --port: %s\n", why);
				return 2;
			}
			o.port = optarg;
			break;
		case 'l':
			o.local_addr = optarg;
			break;
		case 'O':
			out = optarg;
			break;
		case 'q':
			quiet = true;
			break;
		case 'E':
			o.flags |= SP_BENCH_EVENTS;
			break;
		case 'k':
			if (bench_list(optarg, kinds, sizeof(kinds) / sizeof(kinds[0]), &o.kinds))
				return 2;
			break;
		case 'o':
			if (bench_list(optarg, ops, 4, &o.ops))
				return 2;
			break;
		case 's':
			if (bench_number("size", optarg, 1ULL << 40, &v))
				return 2;
			o.size = v;
			break;
		case 'r': case 'n': case 'L': case 'd':
			if (bench_number("count", optarg, 1U << 30, &v))
				return 2;
			if (c == 'r')
				o.repeat = (unsigned int)v;
			else if (c == 'n')
				o.iters = (unsigned int)v;
			else if (c == 'L')
				o.lat_iters = (unsigned int)v;
			else
				o.depth = (unsigned int)v;
			break;
		case 'm': case 'M': case 'B':
			if (bench_number("bytes", optarg, 1ULL << 40, &v))
				return 2;
			if (c == 'm')
				o.min_msg = v;
			else if (c == 'M')
				o.max_msg = v;
			else
				o.max_bytes = v;
			break;
		case 'h':
			bench_usage(stdout);
			return 0;
		default:
			fprintf(stderr, "strixpeerctl: bench: see \"strixpeerctl bench help\"\n");
			return 2;
		}
	}
	if (optind < argc)
		o.server = argv[optind++];
	if (optind < argc || (serve && o.server)) {
		fprintf(stderr, "strixpeerctl: bench: unexpected argument \"%s\"%s; see "
			"\"strixpeerctl bench help\"\n", optind < argc ? argv[optind] : o.server,
			serve ? " (--serve takes no HOST)" : "");
		return 2;
	}
	if (quiet)
		o.progress = NULL;

	if (serve) {
		if (sp_bench_serve(&o) < 0) {
			fprintf(stderr, "strixpeerctl: bench --serve: %s\n", sp_bench_errmsg());
			return 1;
		}
		return 0;
	}
	if (sp_bench_run(&o, &b) < 0) {
		fprintf(stderr, "strixpeerctl: bench: %s\n", sp_bench_errmsg());
		return 1;
	}
	ret = cli_json ? sp_bench_write_json(b, stdout) : sp_bench_write_table(b, stdout);
	if (ret)
		fprintf(stderr, "strixpeerctl: bench: %s\n", sp_bench_errmsg());
	if (out && bench_out(b, out))
		ret = 1;
	if (!ret && (o.ops & ~SP_BENCH_OP_HOST) && !bench_rdma_ran(b)) {
		fprintf(stderr, "strixpeerctl: bench: the RDMA figures could not be measured "
			"(rdma_unavailable in the report says why)\n");
		ret = 1;
	}
	sp_bench_free(b);
	return ret ? 1 : 0;
}
