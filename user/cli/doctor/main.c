// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: options.
 *
 *   doctor [-j | -p] [--sysroot DIR] [--only CHECK,...]
 *          [--rdma-test [--device DEV] [--size BYTES]]
 *   doctor peer HOST [--port PORT] [--device DEV] [--size BYTES] [...]
 *   doctor serve [--bind ADDR] [--port PORT] [--size BYTES] [--once]
 *   doctor [-j] compare A.json B.json ...
 *
 * --peer HOST, --serve and --compare are the older spellings of the three
 * commands, kept as aliases for one release (0.1.x).
 *
 * Exit status: 0 nothing to fix, 1 a WARN, 2 a FAIL, 3 doctor could not
 * run (bad option, --sysroot not usable, a report that is not one).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "../util.h"
#include "rdma/link.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: strixpeerctl doctor [-j | -p] [--sysroot DIR] [--only CHECK,...]\n"
		"                           [--rdma-test [--device DEV] [--size BYTES]]\n"
		"       strixpeerctl doctor peer HOST [--port PORT] [--device DEV] [--size BYTES]\n"
		"       strixpeerctl doctor serve [--bind ADDR] [--port PORT] [--size BYTES] [--once]\n"
		"       strixpeerctl doctor [-j] compare A.json B.json ...\n"
		"       [--accept ID[=SUBJECT]]... (also /etc/strixpeer/doctor.conf: accept ID[=SUBJECT])\n"
		"  --peer HOST, --serve, --compare: the same three, kept for one release\n"
		"  -j JSON, -p indented JSON (both also before \"doctor\")\n"
		"  --only takes checks or check ids as printed (pcie, pcie.link)\n"
		"checks:");
	for (int i = 0; i < DR_NCHECKS; i++)
		fprintf(f, " %s", dr_check_names[i]);
	fprintf(f, "\nexit status: 0 nothing to fix, 1 a WARN, 2 a FAIL, 3 doctor could not run\n");
}

/* --size: strixpeerctl's BYTES (util.c), 1 byte to 1 GiB. */
static int parse_size(const char *s, size_t *out)
{
	uint64_t v;

	if (parse_bytes(s, &v) || !v || v > (1ULL << 30))
		return -1;
	*out = (size_t)v;
	return 0;
}

int doctor_main(int argc, char **argv, bool json)
{
	enum { O_SYSROOT = 256, O_ONLY, O_RDMA, O_DEVICE, O_SIZE, O_PEER, O_PORT, O_SERVE,
	       O_BIND, O_ONCE, O_COMPARE, O_ACCEPT };
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "sysroot", required_argument, NULL, O_SYSROOT },
		{ "only", required_argument, NULL, O_ONLY },
		{ "rdma-test", no_argument, NULL, O_RDMA },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "size", required_argument, NULL, O_SIZE },
		{ "peer", required_argument, NULL, O_PEER },
		{ "port", required_argument, NULL, O_PORT },
		{ "serve", no_argument, NULL, O_SERVE },
		{ "bind", required_argument, NULL, O_BIND },
		{ "once", no_argument, NULL, O_ONCE },
		{ "compare", no_argument, NULL, O_COMPARE },
		{ "accept", required_argument, NULL, O_ACCEPT },
		{ NULL, 0, NULL, 0 },
	};
	struct dr_rt_opts rt = { .port = SP_LINK_PORT_DOCTOR, .size = 8 << 20 };
	bool pretty = false, rdma = false, serve = false, compare = false, own_json = false;
	const char *sysroot = "/", *only = NULL, *cmd = NULL;
	struct dr_ctx c;
	int opt, ret;

	dr_ctx_init(&c);

	/* "doctor help", like every other object */
	if (argc >= 1 && (!strcmp(argv[0], "help") || !strcmp(argv[0], "-h") ||
			  !strcmp(argv[0], "--help"))) {
		if (argc > 1) {
			fprintf(stderr, "strixpeerctl doctor: unexpected argument \"%s\"\n", argv[1]);
			return DR_EXIT_USAGE;
		}
		usage(stdout);
		return 0;
	}
	/* argv[-1] is "doctor" in strixpeerctl's argv: getopt skips it */
	argc++;
	argv--;
	optind = 0;	/* 0: GNU getopt starts over (permuting again, not strixpeerctl's "+") */
	while ((opt = getopt_long(argc, argv, "jph", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = own_json = true;
			break;
		case 'p':	/* as before "doctor": indented JSON */
			json = own_json = pretty = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case O_SYSROOT:
			sysroot = optarg;
			break;
		case O_ONLY:
			only = optarg;
			break;
		case O_RDMA:
			rdma = true;
			break;
		case O_DEVICE:
			rt.device = optarg;
			break;
		case O_SIZE:
			if (parse_size(optarg, &rt.size)) {
				fprintf(stderr, "strixpeerctl doctor: bad --size \"%s\" (1 byte to 1G; K, M or G suffix)\n",
					optarg);
				return DR_EXIT_USAGE;
			}
			break;
		case O_PEER:
			rt.peer = optarg;
			rdma = true;
			break;
		case O_PORT: {
			char why[80];

			if (sp_link_port_ok(optarg, why, sizeof(why))) {
				fprintf(stderr, "strixpeerctl doctor: --port: %s\n", why);
				return DR_EXIT_USAGE;
			}
			rt.port = optarg;
			break;
		}
		case O_SERVE:
			serve = true;
			break;
		case O_BIND:
			rt.bind = optarg;
			break;
		case O_ONCE:
			rt.once = true;
			break;
		case O_COMPARE:
			compare = true;
			break;
		case O_ACCEPT:
			dr_accept_add(&c, optarg);
			break;
		default:
			usage(stderr);
			return DR_EXIT_USAGE;
		}
	}
	/* doctor peer|serve|compare: the first word after the options */
	if (optind < argc && (!strcmp(argv[optind], "peer") || !strcmp(argv[optind], "serve") ||
			      !strcmp(argv[optind], "compare"))) {
		cmd = argv[optind++];
		if (serve || compare || rt.peer) {
			fprintf(stderr, "strixpeerctl doctor %s: --peer, --serve and --compare are the older spellings of doctor peer, serve and compare: use one\n",
				cmd);
			return DR_EXIT_USAGE;
		}
		serve = cmd[0] == 's';
		compare = cmd[0] == 'c';
		rdma = rdma || cmd[0] == 'p';
	}
	if (serve + compare + rdma > 1) {
		fprintf(stderr, "strixpeerctl doctor: serve, compare and peer/--rdma-test exclude each other\n");
		return DR_EXIT_USAGE;
	}
	if (cmd && cmd[0] == 'p') {	/* doctor peer HOST */
		if (optind >= argc) {
			fprintf(stderr, "strixpeerctl doctor peer: which HOST?\n");
			return DR_EXIT_USAGE;
		}
		rt.peer = argv[optind++];
	}
	if (cmd && compare && optind >= argc) {
		fprintf(stderr, "strixpeerctl doctor compare: no reports (A.json B.json ...)\n");
		return DR_EXIT_USAGE;
	}
	if (!compare && optind < argc) {
		fprintf(stderr, "strixpeerctl doctor: unexpected argument \"%s\"\n", argv[optind]);
		fprintf(stderr, "see \"strixpeerctl doctor help\"\n");
		return DR_EXIT_USAGE;
	}
	if (serve) {
		dr_ctx_free(&c);
		return dr_serve(&rt);
	}

	if (compare) {
		if (dr_compare(&c, argc - optind, argv + optind)) {
			dr_ctx_free(&c);
			return DR_EXIT_USAGE;
		}
		goto print;
	}
	ret = dr_ctx_set_sysroot(&c, sysroot);
	if (ret) {
		fprintf(stderr, "strixpeerctl doctor: --sysroot %s: %s\n", sysroot, strerror(-ret));
		dr_ctx_free(&c);
		return DR_EXIT_USAGE;
	}
	if (only && dr_parse_only_ids(&c, only)) {
		fprintf(stderr, "strixpeerctl doctor: bad --only \"%s\"\n", only);
		usage(stderr);
		dr_ctx_free(&c);
		return DR_EXIT_USAGE;
	}
	ret = dr_accept_file(&c, "/etc/strixpeer/doctor.conf");
	if (ret) {
		fprintf(stderr, "strixpeerctl doctor: %s/etc/strixpeer/doctor.conf: %s\n", c.sysroot,
			strerror(-ret));
		dr_ctx_free(&c);
		return DR_EXIT_USAGE;
	}
	dr_run(&c);
	if (rdma)
		dr_rdma_test(&c, &rt);
	dr_filter_only(&c);
	dr_apply_accepted(&c);
print:
	/* "strixpeerctl -j -p doctor": the printer is set up already */
	dr_print(&c, json, json && !own_json && !pretty ? -1 : pretty);
	ret = dr_exit_status(&c);
	dr_ctx_free(&c);
	return ret;
}
