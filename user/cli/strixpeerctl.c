// SPDX-License-Identifier: MIT
/*
 * strixpeerctl - show, tune and watch strixpeer on a node.
 *
 *   strixpeerctl [-j] [-p] [-t] OBJECT [COMMAND] [args]
 *
 * Words are matched exactly or by a unique prefix ("conf sh"; "st" is
 * ambiguous: status, stats). "help" (or -h) works at every level; extra
 * arguments are errors. Every command prints through print.c, so each has a
 * table and a JSON (-j) form. Exit status: 0 success, 1 the module is
 * missing or refused, 2 usage error.
 *
 * This file is the dispatcher only, as iproute2's rdma.c: one file per
 * object (status.c, buf.c, stats.c, config.c, monitor.c, bench.c,
 * gpu.c, doctor/), util.c for what they share, print.c for the output.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"
#include "cli.h"
#include "print.h"
#include "strixpeer.h"
#include "util.h"

/* doctor: what is wrong with this RDMA node (user/cli/doctor/) */
static int cmd_doctor(int argc, char **argv)
{
	return doctor_main(argc, argv, cli_json);
}

static int cmd_help(int argc, char **argv);

static const char help_usage[] = "strixpeerctl help [OBJECT]\n";

/* doctor and bench explain themselves ("help" is theirs to parse). */
static const struct cmd top_cmds[] = {
	{ "status", cmd_status, "module, PeerDirect, memory, limits, NUMA nodes", status_usage },
	{ "version", cmd_version, "library, module and ABI versions", version_usage },
	{ "buf", cmd_buf, "show [pid N]: the node's buffers", buf_usage },
	{ "stats", cmd_stats, "[-f prometheus]: counters", stats_usage },
	{ "config", cmd_config, "show | set KEY VALUE", config_usage },
	{ "monitor", cmd_monitor, "print events as they happen (needs CAP_SYS_ADMIN)",
	  monitor_usage },
	{ "doctor", cmd_doctor, "what is wrong with this RDMA node [--rdma-test]", NULL },
	{ "bench", cmd_bench, "[HOST] [--serve]: speed vs malloc, THP, hugetlb (--help)", NULL },
	{ "gpu", cmd_gpu, "runtime | proof: ROCm's runtime; which fence each GPU route needs",
	  gpu_usage },
	{ "help", cmd_help, "this text", help_usage },
	{ NULL, NULL, NULL, NULL },
};

static int cmd_help(int argc, char **argv)
{
	const struct cmd *c;

	if (argc >= 1) {	/* help OBJECT */
		c = find_word("object", NULL, argv[0], top_cmds, sizeof(*top_cmds));
		if (!c)
			return 2;
		if (extra_args("help", argc, argv, 1))
			return 2;
		if (c->usage)
			return print_usage(c->usage);
		char *help[] = { (char *)"help", NULL };

		return c->fn(1, help);	/* objects that explain themselves */
	}
	if (cli_json) {
		fprintf(stderr, "strixpeerctl: help has no JSON form (-j)\n");
		return 2;
	}
	printf("usage: strixpeerctl [OPTIONS] OBJECT [COMMAND] [ARGS]\n"
	       "       strixpeerctl OBJECT help\n\n"
	       "  -j, --json           JSON output (every object; not with stats -f prometheus)\n"
	       "  -p, --pretty     indented JSON (implies -j)\n"
	       "  -t, --timestamp  monitor: the time of each event\n"
	       "  -V, --version    print the library version\n"
	       "  -h, --help       this text\n\n"
	       "Words may be shortened to a unique prefix. Without an object: status.\n\n"
	       "objects:\n");
	for (c = top_cmds; c->name; c++)
		printf("  %-10s %s\n", c->name, c->help);
	return 0;
}

/*
 * A usage error exits 2, except on a doctor command line, where 2 means a
 * FAIL: there every usage error exits 3 (doctor could not run), also one
 * in the options before the word "doctor" (strixpeerctl(8), EXIT STATUS).
 * The global options take no argument: the first other word is the object.
 */
static int usage_status(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-' && argv[i][1])
			continue;
		return argv[i][0] && !strncmp("doctor", argv[i], strlen(argv[i])) ? 3 : 2;
	}
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "timestamp", no_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd *obj;
	bool pretty = false, version = false, help = false;
	int c, usage_rc = usage_status(argc, argv);

	while ((c = getopt_long(argc, argv, "+jptVh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			cli_json = true;
			break;
		case 'p':
			cli_json = pretty = true;
			break;
		case 't':
			cli_timestamps = true;
			break;
		case 'V':
			version = true;
			break;
		case 'h':
			help = true;
			break;
		default:
			fprintf(stderr, "strixpeerctl: see \"strixpeerctl help\"\n");
			return usage_rc;
		}
	}
	argc -= optind;
	argv += optind;
	pr_init(cli_json, pretty);
	if (help)
		return cmd_help(argc, argv);
	if (version) {
		if (extra_args(NULL, argc, argv, 0))
			return usage_rc;
		if (!cli_json) {
			printf("strixpeerctl %s\n", sp_lib_version());
			return 0;
		}
		pr_obj_open(NULL);
		pr_str("library", "library", sp_lib_version());
		pr_obj_close();
		pr_done();
		return 0;
	}
	if (argc < 1) {
		obj = &top_cmds[0];	/* the first is the default */
	} else {
		obj = find_word("object", NULL, argv[0], top_cmds, sizeof(*top_cmds));
		if (!obj)
			return usage_rc;
	}
	if (cli_timestamps && strcmp(obj->name, "monitor")) {
		fprintf(stderr, "strixpeerctl: -t is for monitor only\n");
		return usage_rc;
	}
	if (argc > 1 && is_help(argv[1]) && obj->usage)
		return print_usage(obj->usage);
	return obj->fn(argc > 0 ? argc - 1 : 0, argv + (argc > 0));
}
