// SPDX-License-Identifier: MIT
/*
 * strixpeerctl - show and check a node's strixpeer state.
 *
 *   strixpeerctl [-j] [-p] OBJECT [COMMAND] [args]
 *
 * Words are matched by prefix ("stat" for "status"). Every command prints
 * through print.c, so each has a table and a JSON (-j) form.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "print.h"
#include "strixpeer.h"

#define SP_PARAMS_DIR "/sys/module/strixpeer/parameters"

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static bool matches(const char *word, const char *name)
{
	size_t n = strlen(word);

	return n > 0 && strncmp(word, name, n) == 0;
}

static int dispatch(const struct cmd *cmds, const char *what, int argc,
		    char **argv)
{
	const struct cmd *c;

	if (argc < 1)
		return cmds[0].fn(argc, argv);	/* the first is the default */
	for (c = cmds; c->name; c++)
		if (matches(argv[0], c->name))
			return c->fn(argc - 1, argv + 1);
	fprintf(stderr, "strixpeerctl: unknown %s \"%s\"; try \"strixpeerctl help\"\n",
		what, argv[0]);
	return 2;
}

static void print_features(uint64_t features)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} names[] = {
		{ SP_FEAT_BUFFERS, "buffers" },
		{ SP_FEAT_NUMA, "numa" },
	};
	size_t i;

	pr_arr_open("features");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (features & names[i].bit)
			pr_str(NULL, "feature", names[i].name);
	pr_arr_close();
}

static void print_page_sizes(uint64_t sizes)
{
	pr_arr_open("page_sizes");
	for (int n = 0; n < 64; n++)
		if (sizes & (1ULL << n))
			pr_bytes(NULL, "page size", 1ULL << n);
	pr_arr_close();
}

/* Reads one module parameter; returns false when the module is absent. */
static bool read_param(const char *name, char *out, size_t len)
{
	char path[128];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", SP_PARAMS_DIR, name);
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fgets(out, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		out[strcspn(out, "\n")] = '\0';
	return ok;
}

static int cmd_version(int argc, char **argv)
{
	struct sp_dev *dev;
	struct sp_version v;
	char mod[32];
	int ret;

	(void)argc;
	(void)argv;
	ret = sp_dev_open(NULL, &dev);
	pr_obj_open(NULL);
	pr_str("library", "library", sp_lib_version());
	if (ret == 0) {
		sp_dev_version(dev, &v);
		snprintf(mod, sizeof(mod), "%u.%u.%u", v.module_major,
			 v.module_minor, v.module_patch);
		pr_str("module", "module", mod);
		snprintf(mod, sizeof(mod), "%u.%u", v.abi_major, v.abi_minor);
		pr_str("abi", "abi", mod);
		sp_dev_close(dev);
	} else {
		pr_str("module", "module", NULL);
		pr_str("error", "error", sp_errmsg());
	}
	pr_obj_close();
	pr_done();
	return ret ? 1 : 0;
}

static void print_limits(void)
{
	struct rlimit rl;
	char val[64];

	pr_obj_open("limits");
	if (read_param("max_buf_size", val, sizeof(val)))
		pr_bytes("max_buf_size", "max buffer size",
			 strtoull(val, NULL, 10));
	if (read_param("default_node", val, sizeof(val)))
		pr_s64("default_node", "default node", strtoll(val, NULL, 10));
	if (read_param("require_huge", val, sizeof(val)))
		pr_bool("require_huge", "2 MiB pages required", val[0] == 'Y');
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			pr_str("memlock", "RLIMIT_MEMLOCK (mine)", "unlimited");
		else
			pr_bytes("memlock", "RLIMIT_MEMLOCK (mine)", rl.rlim_cur);
	}
	pr_obj_close();
}

static int cmd_status(int argc, char **argv)
{
	struct sp_stats st;
	struct sp_version v;
	struct sp_dev *dev;
	char text[32];
	int ret;

	(void)argc;
	(void)argv;
	ret = sp_dev_open(NULL, &dev);
	pr_obj_open(NULL);

	pr_obj_open("module");
	pr_bool("loaded", "loaded", ret != -ENOENT);
	if (ret == 0) {
		sp_dev_version(dev, &v);
		snprintf(text, sizeof(text), "%u.%u.%u", v.module_major,
			 v.module_minor, v.module_patch);
		pr_str("version", "version", text);
		snprintf(text, sizeof(text), "%u.%u", v.abi_major, v.abi_minor);
		pr_str("abi", "abi", text);
		pr_str("library", "library", sp_lib_version());
		print_features(v.features);
		print_page_sizes(v.page_sizes);
		sp_dev_close(dev);
	} else {
		pr_str("library", "library", sp_lib_version());
		pr_str("error", "error", sp_errmsg());
	}
	pr_obj_close();

	pr_obj_open("peerdirect");
	pr_bool("available", "available", false);
	pr_str("reason", "reason",
	       "not implemented in this strixpeer release");
	pr_obj_close();

	if (sp_stats_read(&st) == 0) {
		pr_obj_open("memory");
		pr_u64("buffers", "buffers", st.buffers);
		pr_bytes("pinned_bytes", "pinned now", st.pinned_bytes);
		pr_bytes("peak_pinned_bytes", "pinned peak",
			 st.peak_pinned_bytes);
		pr_u64("allocs", "allocations", st.allocs);
		pr_u64("frees", "frees", st.frees);
		pr_u64("fail_nomem", "failed: no memory", st.fail_nomem);
		pr_u64("fail_memlock", "failed: memlock limit",
		       st.fail_memlock);
		pr_u64("mmaps", "mappings made", st.mmaps);
		pr_obj_close();
	}
	print_limits();
	pr_obj_close();
	pr_done();
	return ret ? 1 : 0;
}

static int cmd_help(int argc, char **argv);

static const struct cmd top_cmds[] = {
	{ "status", cmd_status, "module, PeerDirect, memory and limits" },
	{ "version", cmd_version, "library, module and ABI versions" },
	{ "help", cmd_help, "this text" },
	{ NULL, NULL, NULL },
};

static int cmd_help(int argc, char **argv)
{
	const struct cmd *c;

	(void)argc;
	(void)argv;
	printf("usage: strixpeerctl [-j] [-p] OBJECT [COMMAND]\n\n"
	       "  -j, --json     JSON output\n"
	       "  -p, --pretty   indented JSON (with -j)\n"
	       "  -V, --version  print the library version\n\nobjects:\n");
	for (c = top_cmds; c->name; c++)
		printf("  %-10s %s\n", c->name, c->help);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, pretty = false;
	int c;

	while ((c = getopt_long(argc, argv, "+jpVh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'p':
			pretty = true;
			break;
		case 'V':
			printf("strixpeerctl %s\n", sp_lib_version());
			return 0;
		case 'h':
			return cmd_help(0, NULL);
		default:
			return 2;
		}
	}
	pr_init(json, pretty);
	return dispatch(top_cmds, "object", argc - optind, argv + optind);
}
