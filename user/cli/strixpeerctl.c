// SPDX-License-Identifier: MIT
/*
 * strixpeerctl - show, tune and watch strixpeer on a node.
 *
 *   strixpeerctl [-j] [-p] OBJECT [COMMAND] [args]
 *
 * Words are matched by prefix ("st" for "status"). Every command prints
 * through print.c, so each has a table and a JSON (-j) form.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "print.h"
#include "strixpeer.h"

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static bool json;

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

static int fail(const char *what)
{
	fprintf(stderr, "strixpeerctl: %s: %s\n", what, sp_errmsg());
	return 1;
}

static int open_ctl(struct sp_ctl **ctl)
{
	if (sp_ctl_open(ctl) < 0) {
		fail("netlink");
		return -1;
	}
	return 0;
}

static void print_features(uint64_t features)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} names[] = {
		{ SP_FEAT_BUFFERS, "buffers" },
		{ SP_FEAT_NUMA, "numa" },
		{ SP_FEAT_PEERDIRECT, "peerdirect" },
		{ SP_FEAT_DMABUF_EXPORT, "dmabuf-export" },
		{ SP_FEAT_DMABUF_IMPORT, "dmabuf-import" },
	};
	size_t i;

	pr_arr_open("features", "features");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (features & names[i].bit)
			pr_str(NULL, "feature", names[i].name);
	pr_arr_close();
}

static void print_page_sizes(uint64_t sizes)
{
	pr_arr_open("page_sizes", "page sizes");
	for (int n = 0; n < 64; n++)
		if (sizes & (1ULL << n))
			pr_bytes(NULL, "page size", 1ULL << n);
	pr_arr_close();
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

static void print_config(const struct sp_config *cfg)
{
	pr_bytes("max_buf_size", "max buffer size", cfg->max_buf_size);
	if (cfg->max_pinned_bytes)
		pr_bytes("max_pinned_bytes", "max pinned (node)", cfg->max_pinned_bytes);
	else if (json)
		pr_u64("max_pinned_bytes", "max pinned (node)", 0);
	else
		pr_str("max_pinned_bytes", "max pinned (node)", "unlimited");
	pr_s64("default_node", "default node", cfg->default_node);
	pr_bool("require_huge", "2 MiB pages required", cfg->require_huge);
}

static void print_counters(const struct sp_counters *c, bool all)
{
	pr_u64("buffers", "buffers", c->buffers);
	pr_bytes("pinned_bytes", "pinned now", c->pinned_bytes);
	pr_bytes("peak_pinned_bytes", "pinned peak", c->peak_pinned_bytes);
	pr_u64("allocs", "allocations", c->allocs);
	pr_u64("frees", "frees", c->frees);
	pr_u64("mmaps", "mappings made", c->mmaps);
	pr_u64("fail_nomem", "failed: no memory", c->fail_nomem);
	pr_u64("fail_memlock", "failed: memlock", c->fail_memlock);
	pr_u64("fail_max_buf_size", "failed: max buf size", c->fail_max_buf_size);
	pr_u64("fail_max_pinned", "failed: max pinned", c->fail_max_pinned);
	if (!all)
		return;
	pr_u64("peer_acquires", "peer acquires", c->peer_acquires);
	pr_u64("peer_claims", "peer claims", c->peer_claims);
	pr_u64("peer_invalidations", "peer invalidations", c->peer_invalidations);
	pr_u64("dmabuf_exports", "dma-buf exports", c->dmabuf_exports);
	pr_u64("dmabuf_attachments", "dma-buf attachments", c->dmabuf_attachments);
}

/* Buffers exported and buffers pinned by a driver, for status. */
struct buf_tally {
	uint64_t exported, pinned;
};

static int tally_buf(const struct sp_buf_entry *e, void *arg)
{
	struct buf_tally *t = arg;

	t->exported += e->exports > 0;
	t->pinned += e->pinned != 0;
	return 0;
}

/* One screen: module, PeerDirect, memory, sharing, limits, NUMA nodes. */
static int cmd_status(int argc, char **argv)
{
	struct sp_peer_counters pc;
	struct sp_counters c;
	struct sp_config cfg;
	struct sp_info info;
	struct sp_ctl *ctl = NULL;
	struct rlimit rl;
	char text[32];
	int ret;

	(void)argc;
	(void)argv;
	ret = sp_ctl_open(&ctl);
	if (ret == 0)
		ret = sp_ctl_info(ctl, &info);
	if (ret == 0)
		ret = sp_ctl_stats(ctl, &c);
	if (ret == 0)
		ret = sp_ctl_config_get(ctl, &cfg);

	pr_obj_open(NULL);
	pr_obj_open("module");
	pr_bool("loaded", "loaded", ret != -ENOENT);
	pr_str("library", "library", sp_lib_version());
	if (ret) {
		pr_str("error", "error", sp_errmsg());
		pr_obj_close();
		pr_obj_close();
		pr_done();
		sp_ctl_close(ctl);
		return 1;
	}
	pr_str("version", "version", info.version);
	snprintf(text, sizeof(text), "%u.%u", info.abi_major, info.abi_minor);
	pr_str("abi", "abi", text);
	print_features(info.features);
	print_page_sizes(info.page_sizes);
	pr_obj_close();

	pr_obj_open("peerdirect");
	pr_bool("available", "available", info.features & SP_FEAT_PEERDIRECT);
	if (!(info.features & SP_FEAT_PEERDIRECT))
		pr_str("reason", "reason", info.peerdirect_reason);
	if (sp_ctl_peer_stats(ctl, &pc) == 0) {
		pr_u64("imports", "imports", pc.imports);
		pr_u64("registrations", "registrations", pc.registrations);
		pr_u64("claims", "claims", pc.claims);
		pr_u64("invalidations", "invalidations", pc.invalidations);
	}
	pr_obj_close();

	pr_obj_open("memory");
	print_counters(&c, false);
	pr_obj_close();

	/* What importers and NICs hold of the buffers (this uid's, or all). */
	{
		struct buf_tally t = { 0 };

		sp_ctl_bufs(ctl, 0, tally_buf, &t);
		pr_obj_open("sharing");
		pr_u64("dmabufs", "dma-bufs alive", c.dmabuf_exports);
		pr_u64("attachments", "devices attached", c.dmabuf_attachments);
		pr_u64("exported_buffers", "buffers exported", t.exported);
		pr_u64("registered_buffers", "buffers pinned by a driver (MR)", t.pinned);
		pr_obj_close();
	}

	pr_obj_open("limits");
	print_config(&cfg);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			pr_str("memlock", "RLIMIT_MEMLOCK (mine)", "unlimited");
		else
			pr_bytes("memlock", "RLIMIT_MEMLOCK (mine)", rl.rlim_cur);
	}
	pr_obj_close();

	pr_arr_open("nodes", NULL);
	for (unsigned int i = 0; i < info.nr_nodes; i++) {
		pr_obj_open(NULL);
		pr_u64("id", "NODE", (uint64_t)info.nodes[i].id);
		pr_bytes("free_bytes", "FREE", info.nodes[i].free_bytes);
		pr_u64("free_huge", "FREE_2MIB_BLOCKS", info.nodes[i].free_huge);
		pr_obj_close();
	}
	pr_arr_close();
	pr_obj_close();
	pr_done();
	sp_ctl_close(ctl);
	return 0;
}

struct buf_list {
	bool any;
};

static int print_buf(const struct sp_buf_entry *e, void *arg)
{
	struct buf_list *l = arg;

	l->any = true;
	pr_obj_open(NULL);
	pr_u64("id", "ID", e->id);
	pr_u64("pid", "PID", e->pid);
	pr_bytes("size", "SIZE", e->size);
	pr_u64("node", "NODE", e->node);
	pr_bytes("page_size", "PAGE", e->page_size);
	pr_u64("chunks", "CHUNKS", e->chunks);
	pr_u64("map_count", "MAPS", e->map_count);
	pr_bool("pinned", "PINNED", e->pinned);
	pr_bool("exported", "EXPORTED", e->exported);
	pr_u64("dmabufs", "DMABUFS", e->exports);
	pr_u64("attachments", "ATTACHED", e->attachments);
	pr_obj_close();
	return 0;
}

/* buf show [pid N] */
static int cmd_buf_show(int argc, char **argv)
{
	struct buf_list l = { false };
	struct sp_ctl *ctl;
	uint32_t pid = 0;
	int ret;

	if (argc >= 2 && matches(argv[0], "pid")) {
		char *end;
		unsigned long v = strtoul(argv[1], &end, 10);

		if (*end || !v || v > UINT32_MAX) {
			fprintf(stderr, "strixpeerctl: bad pid \"%s\"\n", argv[1]);
			return 2;
		}
		pid = (uint32_t)v;
	} else if (argc) {
		fprintf(stderr, "strixpeerctl: usage: buf show [pid N]\n");
		return 2;
	}
	if (open_ctl(&ctl))
		return 1;
	pr_arr_open(NULL, NULL);
	ret = sp_ctl_bufs(ctl, pid, print_buf, &l);
	pr_arr_close();
	if (!json && !l.any && ret == 0)
		printf("no buffers\n");
	pr_done();
	sp_ctl_close(ctl);
	return ret < 0 ? fail("buf show") : 0;
}

static const struct cmd buf_cmds[] = {
	{ "show", cmd_buf_show, "list buffers [pid N]" },
	{ NULL, NULL, NULL },
};

static int cmd_buf(int argc, char **argv)
{
	return dispatch(buf_cmds, "buf command", argc, argv);
}

/* Prometheus text exposition format, for node_exporter's textfile collector. */
static void print_prometheus(const struct sp_counters *c, const struct sp_peer_counters *pc,
			     const struct sp_config *cfg)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} m[] = {
#define SP_M(n, t, h) { #n, t, h, offsetof(struct sp_counters, n) }
		SP_M(buffers, "gauge", "strixpeer buffers alive"),
		SP_M(pinned_bytes, "gauge", "bytes pinned by strixpeer buffers"),
		SP_M(peak_pinned_bytes, "gauge", "highest pinned_bytes since load"),
		SP_M(allocs, "counter", "buffers allocated"),
		SP_M(frees, "counter", "buffers freed"),
		SP_M(mmaps, "counter", "buffer mappings created"),
		SP_M(peer_acquires, "counter", "PeerDirect acquire calls"),
		SP_M(peer_claims, "counter", "PeerDirect ranges claimed"),
		SP_M(peer_invalidations, "counter", "PeerDirect invalidations"),
		SP_M(dmabuf_exports, "gauge", "dma-bufs of strixpeer buffers alive"),
		SP_M(dmabuf_attachments, "gauge", "devices attached to those dma-bufs"),
#undef SP_M
	};
	static const struct {
		const char *reason;
		size_t off;
	} f[] = {
		{ "no_memory", offsetof(struct sp_counters, fail_nomem) },
		{ "memlock", offsetof(struct sp_counters, fail_memlock) },
		{ "max_buf_size", offsetof(struct sp_counters, fail_max_buf_size) },
		{ "max_pinned_bytes", offsetof(struct sp_counters, fail_max_pinned) },
	};
	size_t i;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		uint64_t v = *(const uint64_t *)((const char *)c + m[i].off);
		const char *suffix = strcmp(m[i].type, "counter") ? "" : "_total";

		printf("# HELP strixpeer_%s%s %s\n# TYPE strixpeer_%s%s %s\nstrixpeer_%s%s %" PRIu64 "\n",
		       m[i].name, suffix, m[i].help, m[i].name, suffix, m[i].type,
		       m[i].name, suffix, v);
	}
	printf("# HELP strixpeer_alloc_failures_total buffer allocations refused, by reason\n"
	       "# TYPE strixpeer_alloc_failures_total counter\n");
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		printf("strixpeer_alloc_failures_total{reason=\"%s\"} %" PRIu64 "\n", f[i].reason,
		       *(const uint64_t *)((const char *)c + f[i].off));
	printf("# HELP strixpeer_max_buf_size_bytes largest buffer allowed\n"
	       "# TYPE strixpeer_max_buf_size_bytes gauge\nstrixpeer_max_buf_size_bytes %" PRIu64 "\n",
	       cfg->max_buf_size);
	printf("# HELP strixpeer_max_pinned_bytes node-wide pin limit (0: none)\n"
	       "# TYPE strixpeer_max_pinned_bytes gauge\nstrixpeer_max_pinned_bytes %" PRIu64 "\n",
	       cfg->max_pinned_bytes);
	printf("# HELP strixpeer_peer_maps_total PeerDirect mappings made for a device\n"
	       "# TYPE strixpeer_peer_maps_total counter\nstrixpeer_peer_maps_total %" PRIu64 "\n"
	       "# HELP strixpeer_peer_registrations PeerDirect registrations alive\n"
	       "# TYPE strixpeer_peer_registrations gauge\nstrixpeer_peer_registrations %" PRIu64 "\n"
	       "# HELP strixpeer_imports dma-buf imports alive\n"
	       "# TYPE strixpeer_imports gauge\nstrixpeer_imports %" PRIu64 "\n",
	       pc->maps, pc->registrations, pc->imports);
}

/* stats [-f prometheus] */
static int cmd_stats(int argc, char **argv)
{
	bool prom = false;
	struct sp_peer_counters pc;
	struct sp_counters c;
	struct sp_config cfg;
	struct sp_ctl *ctl;

	if (argc == 2 && !strcmp(argv[0], "-f") && matches(argv[1], "prometheus")) {
		prom = true;
	} else if (argc) {
		fprintf(stderr, "strixpeerctl: usage: stats [-f prometheus]\n");
		return 2;
	}
	if (open_ctl(&ctl))
		return 1;
	if (sp_ctl_stats(ctl, &c) < 0 || sp_ctl_config_get(ctl, &cfg) < 0 ||
	    sp_ctl_peer_stats(ctl, &pc) < 0) {
		sp_ctl_close(ctl);
		return fail("stats");
	}
	sp_ctl_close(ctl);
	if (prom) {
		print_prometheus(&c, &pc, &cfg);
		return 0;
	}
	pr_obj_open(NULL);
	print_counters(&c, true);
	pr_u64("peer_maps", "peer maps", pc.maps);
	pr_u64("peer_registrations", "peer registrations", pc.registrations);
	pr_u64("imports", "imports", pc.imports);
	pr_obj_close();
	pr_done();
	return 0;
}

static int cmd_config_show(int argc, char **argv)
{
	struct sp_config cfg;
	struct sp_ctl *ctl;

	(void)argc;
	(void)argv;
	if (open_ctl(&ctl))
		return 1;
	if (sp_ctl_config_get(ctl, &cfg) < 0) {
		sp_ctl_close(ctl);
		return fail("config show");
	}
	sp_ctl_close(ctl);
	pr_obj_open(NULL);
	print_config(&cfg);
	pr_obj_close();
	pr_done();
	return 0;
}

/* Bytes with an optional K/M/G/T suffix (powers of 1024). */
int parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (*end == 'i' && shift)
		end++;
	if (*end == 'B')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* config set KEY VALUE */
static int cmd_config_set(int argc, char **argv)
{
	struct sp_config cfg = { 0 };
	unsigned int mask;
	struct sp_ctl *ctl;
	const char *key;
	int ret;

	if (argc != 2) {
		fprintf(stderr, "strixpeerctl: usage: config set KEY VALUE\n"
			"  keys: max_buf_size BYTES, max_pinned_bytes BYTES (0: unlimited),\n"
			"        default_node N (-1: caller's node), require_huge yes|no\n");
		return 2;
	}
	key = argv[0];
	if (matches(key, "max_buf_size")) {
		mask = SP_CONFIG_MAX_BUF_SIZE;
		ret = parse_bytes(argv[1], &cfg.max_buf_size);
	} else if (matches(key, "max_pinned_bytes")) {
		mask = SP_CONFIG_MAX_PINNED_BYTES;
		ret = parse_bytes(argv[1], &cfg.max_pinned_bytes);
	} else if (matches(key, "default_node")) {
		char *end;
		long v = strtol(argv[1], &end, 10);

		mask = SP_CONFIG_DEFAULT_NODE;
		cfg.default_node = (int)v;
		ret = (*end || end == argv[1] || v < -1 || v > 1023) ? -1 : 0;
	} else if (matches(key, "require_huge")) {
		mask = SP_CONFIG_REQUIRE_HUGE;
		ret = 0;
		if (!strcmp(argv[1], "yes") || !strcmp(argv[1], "1") || !strcmp(argv[1], "on"))
			cfg.require_huge = 1;
		else if (strcmp(argv[1], "no") && strcmp(argv[1], "0") && strcmp(argv[1], "off"))
			ret = -1;
	} else {
		fprintf(stderr, "strixpeerctl: unknown config key \"%s\"\n", key);
		return 2;
	}
	if (ret) {
		fprintf(stderr, "strixpeerctl: bad value \"%s\" for %s\n", argv[1], key);
		return 2;
	}
	if (open_ctl(&ctl))
		return 1;
	ret = sp_ctl_config_set(ctl, &cfg, mask);
	sp_ctl_close(ctl);
	return ret < 0 ? fail("config set") : 0;
}

static const struct cmd config_cmds[] = {
	{ "show", cmd_config_show, "current configuration" },
	{ "set", cmd_config_set, "KEY VALUE (needs CAP_NET_ADMIN)" },
	{ NULL, NULL, NULL },
};

static int cmd_config(int argc, char **argv)
{
	return dispatch(config_cmds, "config command", argc, argv);
}

static const char *const limit_names[] = {
	[SP_LIMIT_MAX_BUF_SIZE] = "max_buf_size",
	[SP_LIMIT_MAX_PINNED_BYTES] = "max_pinned_bytes",
	[SP_LIMIT_MEMLOCK] = "memlock",
	[SP_LIMIT_NO_MEMORY] = "no_memory",
};

static int print_event(const struct sp_event *ev, void *arg)
{
	static const char *const types[] = {
		[SP_EVENT_BUF_CREATED] = "buf-created",
		[SP_EVENT_BUF_FREED] = "buf-freed",
		[SP_EVENT_LIMIT] = "limit",
		[SP_EVENT_CONFIG] = "config",
		[SP_EVENT_PEER] = "peer",
		[SP_EVENT_EXPORT] = "export",
	};
	static const char *const export_names[] = {
		[SP_EXPORT_CREATE] = "create",
		[SP_EXPORT_ATTACH] = "attach",
		[SP_EXPORT_DETACH] = "detach",
		[SP_EXPORT_RELEASE] = "release",
	};
	static const char *const peer_names[] = {
		[SP_PEER_CLAIM] = "claim",
		[SP_PEER_MAP] = "map",
		[SP_PEER_INVALIDATE] = "invalidate",
	};
	static const char *const reason_names[] = {
		[SP_INVAL_UNIMPORT] = "unimport",
		[SP_INVAL_CLOSE] = "close",
		[SP_INVAL_UNMAP] = "unmap",
		[SP_INVAL_EXIT] = "exit",
		[SP_INVAL_MOVE] = "move",
	};
	unsigned int lim = (unsigned int)ev->limit;
	unsigned int pe = (unsigned int)ev->peer, why = (unsigned int)ev->reason;
	const char *peer = pe < 4 && peer_names[pe] ? peer_names[pe] : "?";
	const char *reason = why < 6 && reason_names[why] ? reason_names[why] : NULL;
	unsigned int ex = (unsigned int)ev->export_event;
	const char *export = ex < 5 && export_names[ex] ? export_names[ex] : "?";

	(void)arg;
	if (!json) {
		switch (ev->type) {
		case SP_EVENT_BUF_CREATED:
		case SP_EVENT_BUF_FREED:
			printf("%s id %u pid %u size %" PRIu64 " node %u page %" PRIu64 "\n",
			       types[ev->type], ev->buf.id, ev->buf.pid, ev->buf.size,
			       ev->buf.node, ev->buf.page_size);
			break;
		case SP_EVENT_LIMIT:
			printf("limit %s pid %u size %" PRIu64 "\n",
			       lim < 5 && limit_names[lim] ? limit_names[lim] : "?", ev->pid, ev->size);
			break;
		case SP_EVENT_CONFIG:
			printf("config pid %u max_buf_size %" PRIu64 " max_pinned_bytes %" PRIu64
			       " default_node %d require_huge %s\n", ev->pid,
			       ev->config.max_buf_size, ev->config.max_pinned_bytes,
			       ev->config.default_node, ev->config.require_huge ? "yes" : "no");
			break;
		case SP_EVENT_PEER:
			printf("peer %s import %u pid %u size %" PRIu64 "%s%s\n", peer,
			       ev->import_id, ev->pid, ev->size, reason ? " reason " : "",
			       reason ? reason : "");
			break;
		case SP_EVENT_EXPORT:
			printf("export %s buf %u pid %u exports %u attachments %u%s%s\n",
			       export, ev->buf.id, ev->pid, ev->buf.exports,
			       ev->buf.attachments, ev->device[0] ? " device " : "",
			       ev->device);
			break;
		}
		fflush(stdout);
		return 0;
	}
	/* -j: one JSON object per line */
	pr_init(true, false);
	pr_obj_open(NULL);
	pr_str("event", "event", types[ev->type]);
	if (ev->type == SP_EVENT_BUF_CREATED || ev->type == SP_EVENT_BUF_FREED) {
		pr_obj_open("buf");
		pr_u64("id", "id", ev->buf.id);
		pr_u64("pid", "pid", ev->buf.pid);
		pr_u64("size", "size", ev->buf.size);
		pr_u64("node", "node", ev->buf.node);
		pr_u64("page_size", "page size", ev->buf.page_size);
		pr_obj_close();
	} else if (ev->type == SP_EVENT_LIMIT) {
		pr_str("limit", "limit", lim < 5 && limit_names[lim] ? limit_names[lim] : "?");
		pr_u64("pid", "pid", ev->pid);
		pr_u64("size", "size", ev->size);
	} else if (ev->type == SP_EVENT_PEER) {
		pr_str("peer", "peer", peer);
		pr_u64("import", "import", ev->import_id);
		pr_u64("pid", "pid", ev->pid);
		pr_u64("size", "size", ev->size);
		if (reason)
			pr_str("reason", "reason", reason);
	} else if (ev->type == SP_EVENT_EXPORT) {
		pr_str("export", "export", export);
		pr_u64("buf", "buf", ev->buf.id);
		pr_u64("pid", "pid", ev->pid);
		pr_u64("exports", "exports", ev->buf.exports);
		pr_u64("attachments", "attachments", ev->buf.attachments);
		if (ev->device[0])
			pr_str("device", "device", ev->device);
	} else {
		pr_u64("pid", "pid", ev->pid);
		pr_obj_open("config");
		print_config(&ev->config);
		pr_obj_close();
	}
	pr_obj_close();
	pr_done();
	return 0;
}

static int cmd_monitor(int argc, char **argv)
{
	struct sp_ctl *ctl;
	int ret;

	(void)argc;
	(void)argv;
	if (open_ctl(&ctl))
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = sp_ctl_monitor_ex(ctl, SP_MONITOR_PEER | SP_MONITOR_EXPORT,
				print_event, NULL);
	sp_ctl_close(ctl);
	return ret < 0 ? fail("monitor") : 0;
}

static int cmd_help(int argc, char **argv);

/* bench.c: its own options; the report follows -j */
static int cmd_bench_json(int argc, char **argv)
{
	return cmd_bench(argc, argv, json);
}

static const struct cmd top_cmds[] = {
	{ "status", cmd_status, "module, PeerDirect, memory, limits, NUMA nodes" },
	{ "version", cmd_version, "library, module and ABI versions" },
	{ "buf", cmd_buf, "show [pid N]: the node's buffers" },
	{ "stats", cmd_stats, "[-f prometheus]: counters" },
	{ "config", cmd_config, "show | set KEY VALUE" },
	{ "monitor", cmd_monitor, "print events as they happen" },
	{ "bench", cmd_bench_json, "[HOST] [--serve]: speed vs malloc, THP, hugetlb (--help)" },
	{ "help", cmd_help, "this text" },
	{ NULL, NULL, NULL },
};

static int cmd_help(int argc, char **argv)
{
	const struct cmd *c;

	(void)argc;
	(void)argv;
	printf("usage: strixpeerctl [-j] [-p] OBJECT [COMMAND] [args]\n\n"
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
	bool pretty = false;
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
