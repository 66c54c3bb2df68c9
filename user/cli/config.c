// SPDX-License-Identifier: MIT
/*
 * strixpeerctl config show | set KEY VALUE: the module's limits, and the
 * printer of them that status and monitor use too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "print.h"
#include "strixpeer.h"
#include "util.h"

const char config_usage[] =
	"strixpeerctl [-j] config show\n"
	"strixpeerctl config set KEY VALUE      (needs CAP_SYS_ADMIN)\n"
	"\n"
	"keys (exact, or a unique prefix):\n"
	"  max_buf_size BYTES       largest buffer\n"
	"  max_pinned_bytes BYTES   all buffers together; 0 or unlimited: no limit\n"
	"  default_node N           NUMA node; -1: the caller's\n"
	"  require_huge BOOL        2 MiB pages or fail\n"
	"BYTES: decimal, with an optional K, M, G or T suffix (powers of 1024)\n"
	"BOOL: y, yes, true, on, 1 / n, no, false, off, 0\n";

/*
 * max_pinned_bytes 0 means no limit: JSON keeps the module's 0 (what
 * config set and the module parameter take), the table says "unlimited".
 */
void print_config(const struct sp_config *cfg)
{
	pr_bytes("max_buf_size", "max buffer size", cfg->max_buf_size);
	if (cfg->max_pinned_bytes || cli_json)
		pr_bytes("max_pinned_bytes", "max pinned (node-wide)", cfg->max_pinned_bytes);
	else
		pr_str("max_pinned_bytes", "max pinned (node-wide)", "unlimited");
	pr_s64("default_node", "default node", cfg->default_node);
	pr_bool("require_huge", "2 MiB pages required", cfg->require_huge);
}

/* max_peer_pinned_per_user: 0 is "memlock only", as max_pinned_bytes above. */
void print_peer_limit(const struct sp_config *cfg)
{
	if (cfg->max_peer_pinned_per_user || cli_json)
		pr_bytes("max_peer_pinned_per_user", "max GPU pinned by PeerDirect (per user)",
			 cfg->max_peer_pinned_per_user);
	else
		pr_str("max_peer_pinned_per_user", "max GPU pinned by PeerDirect (per user)",
		       "RLIMIT_MEMLOCK only");
}

static int cmd_config_show(int argc, char **argv)
{
	struct sp_config cfg = { .size = sizeof(cfg) };
	struct sp_ctl *ctl;

	if (extra_args("config", argc, argv, 0))
		return 2;
	if (open_ctl(&ctl))
		return 1;
	if (sp_ctl_config_get(ctl, &cfg) < 0) {
		sp_ctl_close(ctl);
		return fail();
	}
	pr_obj_open(NULL);
	print_config(&cfg);
	print_peer_limit(&cfg);
	sp_ctl_close(ctl);
	pr_obj_close();
	pr_done();
	return 0;
}

static const struct config_key {
	const char *name;
	unsigned int mask;
	const char *value;	/* what the value must be, for messages */
} config_keys[] = {
	{ "max_buf_size", SP_CONFIG_MAX_BUF_SIZE,
	  "a size in bytes: decimal, with an optional K, M, G or T suffix" },
	{ "max_pinned_bytes", SP_CONFIG_MAX_PINNED_BYTES,
	  "a size in bytes (decimal, optional K, M, G or T suffix), or 0 or unlimited" },
	{ "default_node", SP_CONFIG_DEFAULT_NODE, "a NUMA node number, or -1" },
	{ "require_huge", SP_CONFIG_REQUIRE_HUGE,
	  "y, yes, true, on, 1, n, no, false, off or 0" },
	{ NULL, 0, NULL },
};

/*
 * A limit below what buffers already pin stops new allocations, and frees
 * nothing: say so (the change is still made).
 */
static void warn_below_pinned(struct sp_ctl *ctl, const struct sp_config *cfg,
			      unsigned int mask)
{
	char want[32], have[32];
	struct sp_counters c = { .size = sizeof(c) };

	if (!(mask & SP_CONFIG_MAX_PINNED_BYTES) || !cfg->max_pinned_bytes ||
	    sp_ctl_stats(ctl, &c) < 0 || c.pinned_bytes <= cfg->max_pinned_bytes)
		return;
	pr_format_bytes(want, sizeof(want), cfg->max_pinned_bytes);
	pr_format_bytes(have, sizeof(have), c.pinned_bytes);
	fprintf(stderr, "strixpeerctl: warning: max_pinned_bytes %s is below the %s that "
		"buffers pin now: they stay, and new buffers fail (ENOSPC) until enough "
		"are freed\n", want, have);
}

/* config set KEY VALUE */
static int cmd_config_set(int argc, char **argv)
{
	const struct config_key *k;
	struct sp_config cfg = { .size = sizeof(cfg) };
	struct sp_ctl *ctl;
	const char *val;
	int ret;

	if (argc < 2)
		return bad_usage("config", "config set needs KEY VALUE");
	if (extra_args("config", argc, argv, 2))
		return 2;
	k = find_word("config key", "config", argv[0], config_keys, sizeof(*config_keys));
	if (!k)
		return 2;
	val = argv[1];
	switch (k->mask) {
	case SP_CONFIG_MAX_BUF_SIZE:
		ret = parse_bytes(val, &cfg.max_buf_size);
		break;
	case SP_CONFIG_MAX_PINNED_BYTES:
		ret = strcmp(val, "unlimited") ? parse_bytes(val, &cfg.max_pinned_bytes) : 0;
		break;
	case SP_CONFIG_DEFAULT_NODE:
		ret = parse_node(val, &cfg.default_node);
		break;
	default:
		ret = parse_bool(val, &cfg.require_huge);
		break;
	}
	if (ret) {
		fprintf(stderr, "strixpeerctl: bad value \"%s\" for %s: %s\n", val, k->name,
			k->value);
		return 2;
	}
	if (open_ctl(&ctl))
		return 1;
	ret = sp_ctl_config_set(ctl, &cfg, k->mask);
	if (ret == 0)
		warn_below_pinned(ctl, &cfg, k->mask);
	sp_ctl_close(ctl);
	return ret < 0 ? fail() : 0;
}

static const struct cmd config_cmds[] = {
	{ "show", cmd_config_show, "current configuration", NULL },
	{ "set", cmd_config_set, "KEY VALUE (needs CAP_SYS_ADMIN)", NULL },
	{ NULL, NULL, NULL, NULL },
};

int cmd_config(int argc, char **argv)
{
	return dispatch(config_cmds, "config", config_usage, argc, argv);
}
