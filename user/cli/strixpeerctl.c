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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "doctor/doctor.h"
#include "bench.h"
#include "holders.h"
#include "print.h"
#include "strixpeer.h"

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static bool json;
static bool timestamps;		/* -t: monitor prints when each event came */

/*
 * Each object's usage, for "strixpeerctl OBJECT help" (and "OBJECT COMMAND
 * help"). Objects not listed here handle "help" themselves.
 */
static const struct {
	const char *object, *usage;
} usages[] = {
	{ "status", "strixpeerctl [-j] status\n" },
	{ "version", "strixpeerctl [-j] version\n" },
	{ "buf", "strixpeerctl [-j] buf show [pid PID]\n" },
	{ "stats", "strixpeerctl [-j] stats\n"
		   "strixpeerctl stats -f prometheus\n" },
	{ "config", "strixpeerctl [-j] config show\n"
		    "strixpeerctl config set KEY VALUE      (needs CAP_SYS_ADMIN)\n"
		    "\n"
		    "keys (exact, or a unique prefix):\n"
		    "  max_buf_size BYTES       largest buffer\n"
		    "  max_pinned_bytes BYTES   all buffers together; 0 or unlimited: no limit\n"
		    "  default_node N           NUMA node; -1: the caller's\n"
		    "  require_huge BOOL        2 MiB pages or fail\n"
		    "BYTES: decimal, with an optional K, M, G or T suffix (powers of 1024)\n"
		    "BOOL: y, yes, true, on, 1 / n, no, false, off, 0\n" },
	{ "monitor", "strixpeerctl [-j] [-t] monitor [-t]\n" },
	{ "help", "strixpeerctl help [OBJECT]\n" },
};

static bool is_help(const char *word)
{
	return !strcmp(word, "help") || !strcmp(word, "-h") || !strcmp(word, "--help");
}

/* "OBJECT help": its usage on stdout (help is text: -j is refused). */
static int usage(const char *object)
{
	for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++) {
		const char *u = usages[i].usage, *nl;

		if (strcmp(usages[i].object, object))
			continue;
		if (json) {
			fprintf(stderr, "strixpeerctl: help has no JSON form (-j)\n");
			return 2;
		}
		for (bool first = true; *u; u = nl + 1, first = false) {
			nl = strchr(u, '\n');	/* every line ends with one */
			if (!strncmp(u, "strixpeerctl", 12))
				fputs(first ? "usage: " : "       ", stdout);
			fwrite(u, 1, (size_t)(nl - u) + 1, stdout);
		}
		return 0;
	}
	return -1;
}

/* A usage error: what is wrong, and where help is. Exit status 2. */
static int bad_usage(const char *object, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int bad_usage(const char *object, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "strixpeerctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see \"strixpeerctl %s%shelp\"\n", object ? object : "",
		object ? " " : "");
	return 2;
}

/* No arguments beyond the first @max are allowed. */
static int extra_args(const char *object, int argc, char **argv, int max)
{
	if (argc <= max)
		return 0;
	return bad_usage(object, "unexpected argument \"%s\"", argv[max]);
}

/*
 * The entry of @table (an array of structs whose first member is the name,
 * ended by a NULL name) that @word names: its exact name, else the only
 * name it begins. NULL, with a message saying why, when none or several do.
 */
static const void *find_word(const char *what, const char *object, const char *word,
			     const void *table, size_t stride)
{
	const char *p, *hit = NULL;
	size_t len = strlen(word);
	int n = 0;

	for (p = table; *(const char *const *)p; p += stride) {
		const char *name = *(const char *const *)p;

		if (!strcmp(word, name))
			return p;
		if (len && !strncmp(word, name, len)) {
			hit = p;
			n++;
		}
	}
	if (n == 1)
		return hit;
	if (n == 0) {
		fprintf(stderr, "strixpeerctl: unknown %s \"%s\"; see \"strixpeerctl %s%shelp\"\n",
			what, word, object ? object : "", object ? " " : "");
		return NULL;
	}
	fprintf(stderr, "strixpeerctl: ambiguous %s \"%s\": could be ", what, word);
	for (p = table; *(const char *const *)p; p += stride)
		if (!strncmp(word, *(const char *const *)p, len))
			fprintf(stderr, "%s%s", *(const char *const *)p, --n == 0 ? "\n" :
				n == 1 ? " or " : ", ");
	return NULL;
}

/* OBJECT COMMAND [args]: the command, "help", or the default (the first). */
static int dispatch(const struct cmd *cmds, const char *object, int argc, char **argv)
{
	const struct cmd *c;

	if (argc < 1)
		return cmds[0].fn(argc, argv);
	if (is_help(argv[0]))
		return usage(object);
	c = find_word("command", object, argv[0], cmds, sizeof(*cmds));
	if (!c)
		return 2;
	if (argc > 1 && is_help(argv[1]))
		return usage(object);
	return c->fn(argc - 1, argv + 1);
}

/* The library's message names the operation and, where known, the fix. */
static int fail(void)
{
	fprintf(stderr, "strixpeerctl: %s\n", sp_errmsg());
	return 1;
}

/* Whether the module will show this process every buffer (netlink_capable). */
static bool has_cap(unsigned int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d))
		return false;
	return d[cap / 32].effective & (1U << (cap % 32));
}

static int open_ctl(struct sp_ctl **ctl)
{
	if (sp_ctl_open(ctl) < 0) {
		fail();
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
		{ SP_FEAT_GEM_DMABUF, "gem-dmabuf" },
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

	if (extra_args("version", argc, argv, 0))
		return 2;
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

/*
 * max_pinned_bytes 0 means no limit: JSON keeps the module's 0 (what
 * config set and the module parameter take), the table says "unlimited".
 */
static void print_config(const struct sp_config *cfg)
{
	pr_bytes("max_buf_size", "max buffer size", cfg->max_buf_size);
	if (cfg->max_pinned_bytes || json)
		pr_bytes("max_pinned_bytes", "max pinned (node-wide)", cfg->max_pinned_bytes);
	else
		pr_str("max_pinned_bytes", "max pinned (node-wide)", "unlimited");
	pr_s64("default_node", "default node", cfg->default_node);
	pr_bool("require_huge", "2 MiB pages required", cfg->require_huge);
}

/* GPU bytes PeerDirect registrations pin (each the whole dma-buf). */
static void print_peer_pins(struct sp_ctl *ctl)
{
	struct sp_peer_pins pp;

	if (sp_ctl_peer_pins(ctl, &pp) < 0)
		return;
	pr_bytes("peer_pinned_bytes", "GPU bytes pinned by PeerDirect (node-wide)",
		 pp.pinned_bytes);
	pr_bytes("peer_pinned_bytes_user", "GPU bytes pinned by PeerDirect (your uid)",
		 pp.user_pinned_bytes);
	pr_u64("peer_fail_limit", "peer registrations refused: pin limit", pp.fail_limit);
}

/* max_peer_pinned_per_user: 0 is "memlock only", as max_pinned_bytes above. */
static void print_peer_limit(struct sp_ctl *ctl)
{
	struct sp_peer_pins pp;

	if (sp_ctl_peer_pins(ctl, &pp) < 0)
		return;
	if (pp.max_per_user || json)
		pr_bytes("max_peer_pinned_per_user", "max GPU pinned by PeerDirect (per user)",
			 pp.max_per_user);
	else
		pr_str("max_peer_pinned_per_user", "max GPU pinned by PeerDirect (per user)",
		       "RLIMIT_MEMLOCK only");
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

/*
 * One screen: module, PeerDirect, memory, sharing, limits, NUMA nodes.
 * Counters are node-wide; the buffer tallies cover the buffers the module
 * lists to the caller (its uid's, all with CAP_SYS_ADMIN): labelled so.
 */
struct in_use_tally {
	const struct sp_holders *h;
	unsigned int unheld;		/* dma-bufs no process has open or mapped */
};

static int tally_unheld(const struct sp_buf_entry *e, void *arg)
{
	struct in_use_tally *t = arg;

	for (uint32_t i = 0; i < e->nr_dmabuf_inos; i++)
		if (!sp_dmabuf_held(t->h, e->dmabuf_inos[i]))
			t->unheld++;
	return 0;
}

/*
 * What keeps the module loaded (rmmod fails with EBUSY while its
 * refcount is above zero): every open /dev/strixpeer file (an fd, or a
 * mapping, which holds its file), every live dma-buf of a buffer, and
 * every PeerDirect registration. Named by pid from a /proc scan.
 */
static void print_in_use(struct sp_ctl *ctl, const struct sp_counters *c,
			 uint64_t registrations)
{
	struct sp_holders h;
	struct in_use_tally t = { .h = &h };
	char line[160];
	long refcnt = -1;
	FILE *f = fopen("/sys/module/strixpeer/refcnt", "re");

	if (f) {
		if (fscanf(f, "%ld", &refcnt) != 1)
			refcnt = -1;
		fclose(f);
	}
	sp_holders_scan(&h);
	sp_ctl_bufs(ctl, 0, tally_unheld, &t);
	pr_obj_open_label("in_use", "in use (what rmmod would wait for)");
	if (refcnt >= 0)
		pr_s64("refcnt", "module refcount", refcnt);
	else
		pr_null("refcnt", "module refcount", "unknown (built in?)");
	pr_bool("rmmod_would_fail", "rmmod would fail", refcnt != 0);
	pr_u64("open_fds", "open /dev/strixpeer fds (seen)", h.dev_fds);
	pr_arr_open("files", "held by");
	for (size_t i = 0; i < h.n; i++) {
		const struct sp_hold *x = &h.v[i];

		if (!((x->kind == SP_HOLD_FD && !x->buf_id) || x->kind == SP_HOLD_MAP))
			continue;
		if (json) {
			pr_obj_open(NULL);
			pr_u64("pid", NULL, (uint64_t)x->pid);
			pr_str("comm", NULL, x->comm);
			pr_str("kind", NULL, sp_hold_kind_name(x->kind));
			if (x->fd >= 0)
				pr_u64("fd", NULL, (uint64_t)x->fd);
			pr_obj_close();
		} else {
			if (x->fd >= 0)
				snprintf(line, sizeof(line), "pid %d (%s) fd %d",
					 x->pid, x->comm, x->fd);
			else
				snprintf(line, sizeof(line), "pid %d (%s) mapping of handle %u",
					 x->pid, x->comm, x->handle);
			pr_str(NULL, "holder", line);
		}
	}
	pr_arr_close();
	pr_u64("dmabufs_alive", "dma-bufs alive (each holds it)", c->dmabuf_exports);
	pr_u64("dmabufs_unheld", "dma-bufs no process has open or mapped", t.unheld);
	pr_u64("peer_registrations", "PeerDirect registrations (each holds it)", registrations);
	pr_u64("unreadable_processes", "processes not readable (root sees all)", h.unreadable);
	pr_obj_close();
	sp_holders_free(&h);
}

static int cmd_status(int argc, char **argv)
{
	bool all = has_cap(CAP_SYS_ADMIN);
	const char *scope = all ? "(all users)" : "(yours)";
	struct sp_peer_counters pc;
	struct sp_counters c;
	struct sp_config cfg;
	struct sp_info info;
	struct sp_ctl *ctl = NULL;
	struct rlimit rl;
	char text[64];
	int ret;

	if (extra_args("status", argc, argv, 0))
		return 2;
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
	{
		struct sp_peer_counters ipc;

		print_in_use(ctl, &c, sp_ctl_peer_stats(ctl, &ipc) ? 0 : ipc.registrations);
	}

	pr_obj_open("peerdirect");
	pr_bool("available", "available", info.features & SP_FEAT_PEERDIRECT);
	if (info.features & SP_FEAT_PEERDIRECT) {
		/* the name the peer-memory core knows it by (memory_peers/<name>) */
		char name[80] = "";
		FILE *f = fopen("/sys/module/strixpeer/parameters/peer_client_name", "re");

		if (f && fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = '\0';
			pr_str("client", "client", name);
		}
		if (f)
			fclose(f);
	} else {
		pr_str("reason", "reason", info.peerdirect_reason);
	}
	if (sp_ctl_peer_stats(ctl, &pc) == 0) {
		pr_u64("imports", "imports", pc.imports);
		pr_u64("peer_registrations", "registrations", pc.registrations);
		pr_u64("peer_claims", "claims", pc.claims);
		pr_u64("peer_invalidations", "invalidations", pc.invalidations);
	}
	print_peer_pins(ctl);
	pr_obj_close();

	pr_obj_open_label("memory", "memory (node-wide)");
	print_counters(&c, false);
	pr_obj_close();

	/* What importers and NICs hold of the buffers. */
	{
		struct buf_tally t = { 0 };

		sp_ctl_bufs(ctl, 0, tally_buf, &t);
		pr_obj_open("sharing");
		pr_u64("dmabuf_exports", "dma-bufs alive (node-wide)", c.dmabuf_exports);
		pr_u64("dmabuf_attachments", "devices attached (node-wide)", c.dmabuf_attachments);
		snprintf(text, sizeof(text), "buffers exported %s", scope);
		pr_u64("exported_buffers", text, t.exported);
		snprintf(text, sizeof(text), "buffers pinned by a driver (MR) %s", scope);
		pr_u64("registered_buffers", text, t.pinned);
		if (json)
			pr_str("buffers_scope", NULL, all ? "all" : "own");
		pr_obj_close();
	}

	pr_obj_open("limits");
	print_config(&cfg);
	print_peer_limit(ctl);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			pr_null("memlock", "RLIMIT_MEMLOCK (yours)", "unlimited");
		else
			pr_bytes("memlock", "RLIMIT_MEMLOCK (yours)", rl.rlim_cur);
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
	struct sp_holders h;
};

/*
 * The buffer's holders: JSON "holders" (one object each) and
 * "dmabufs_unheld" (inodes of dma-bufs no process has an fd or mapping
 * of); the table's HOLDERS cell says the same in words.
 */
static void print_holders(const struct sp_buf_entry *e, const struct sp_holders *h)
{
	char text[1024] = "";
	size_t len = 0;
	unsigned int mapped = 0;

#define HOLD_APPEND(...) do { \
		if (len < sizeof(text)) \
			len += (size_t)snprintf(text + len, sizeof(text) - len, __VA_ARGS__); \
	} while (0)
	if (json)
		pr_arr_open("holders", NULL);
	for (size_t i = 0; i < h->n; i++) {
		const struct sp_hold *x = &h->v[i];

		if (!sp_hold_matches(x, e))
			continue;
		if (x->kind == SP_HOLD_MAP)
			mapped++;
		if (json) {
			pr_obj_open(NULL);
			pr_u64("pid", NULL, (uint64_t)x->pid);
			pr_str("comm", NULL, x->comm);
			pr_str("kind", NULL, sp_hold_kind_name(x->kind));
			if (x->fd >= 0)
				pr_u64("fd", NULL, (uint64_t)x->fd);
			if (x->kind == SP_HOLD_DMABUF_FD || x->kind == SP_HOLD_DMABUF_MAP)
				pr_u64("dmabuf_ino", NULL, x->ino);
			pr_obj_close();
		} else if (x->fd >= 0) {
			HOLD_APPEND("%s%d(%s) %s %d", len ? ", " : "", x->pid,
				    x->comm, sp_hold_kind_name(x->kind), x->fd);
		} else {
			HOLD_APPEND("%s%d(%s) %s", len ? ", " : "", x->pid,
				    x->comm, sp_hold_kind_name(x->kind));
		}
	}
	if (json) {
		pr_arr_close();
		pr_arr_open("dmabufs_unheld", NULL);
	}
	for (uint32_t i = 0; i < e->nr_dmabuf_inos; i++) {
		if (sp_dmabuf_held(h, e->dmabuf_inos[i]))
			continue;
		if (json)
			pr_u64(NULL, NULL, e->dmabuf_inos[i]);
		else
			HOLD_APPEND("%sdma-buf ino %llu: no process holds an fd or mapping of it (in flight in a unix socket, or held by the kernel: an importer such as an MR)",
				    len ? ", " : "", (unsigned long long)e->dmabuf_inos[i]);
	}
	if (json) {
		pr_arr_close();
		/* holders among these are not named: only root sees all */
		pr_u64("unreadable_processes", NULL, h->unreadable);
	}
	if (e->map_count > mapped) {
		if (json)
			pr_u64("mappings_unattributed", NULL, e->map_count - mapped);
		else
			HOLD_APPEND("%s%u mapping(s) not attributed (handle freed, or a process not readable)",
				    len ? ", " : "", e->map_count - mapped);
	}
#undef HOLD_APPEND
	if (!json)
		pr_str("holders", "HOLDERS", len ? text : "-");
}

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
	pr_str("comm", "COMM", e->comm[0] ? e->comm : "?");
	pr_u64("handle", "HANDLE", e->handle);
	print_holders(e, &l->h);
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

	if (argc >= 1 && !strcmp(argv[0], "pid")) {
		char *end;
		unsigned long v;

		if (argc < 2)
			return bad_usage("buf", "\"pid\" needs a process id");
		errno = 0;
		v = strtoul(argv[1], &end, 10);
		if (errno || *end || end == argv[1] || argv[1][0] == '-' || !v || v > UINT32_MAX)
			return bad_usage("buf", "bad pid \"%s\": a process id, 1 or more", argv[1]);
		pid = (uint32_t)v;
		if (extra_args("buf", argc, argv, 2))
			return 2;
	} else if (argc) {
		return bad_usage("buf", "unexpected argument \"%s\"", argv[0]);
	}
	if (open_ctl(&ctl))
		return 1;
	sp_holders_scan(&l.h);
	pr_arr_open(NULL, NULL);
	ret = sp_ctl_bufs(ctl, pid, print_buf, &l);
	pr_arr_close();
	pr_done();
	sp_ctl_close(ctl);
	sp_holders_free(&l.h);
	if (ret < 0)
		return fail();
	if (!json && !l.any)
		printf("no buffers\n");
	if (!json && l.h.unreadable)
		printf("(%u processes' fds and maps not readable: holders among them are not named; run as root to see every holder)\n",
		       l.h.unreadable);
	if (!json && !has_cap(CAP_SYS_ADMIN))
		printf("(yours only: the module lists every user's buffers to CAP_SYS_ADMIN)\n");
	return 0;
}

static const struct cmd buf_cmds[] = {
	{ "show", cmd_buf_show, "list buffers [pid N]" },
	{ NULL, NULL, NULL },
};

static int cmd_buf(int argc, char **argv)
{
	return dispatch(buf_cmds, "buf", argc, argv);
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

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void print_label(const char *name, const char *value, bool last)
{
	printf("%s=\"", name);
	for (; *value; value++) {
		if (*value == '\\' || *value == '"')
			printf("\\%c", *value);
		else if (*value == '\n')
			fputs("\\n", stdout);
		else
			putchar(*value);
	}
	printf("\"%s", last ? "" : ",");
}

/* The peer-memory client's name (memory_peers/<name>), or "". */
static void peer_client_name(char *name, size_t len)
{
	FILE *f = fopen("/sys/module/strixpeer/parameters/peer_client_name", "re");

	name[0] = '\0';
	if (f && fgets(name, (int)len, f))
		name[strcspn(name, "\n")] = '\0';
	if (f)
		fclose(f);
}

/*
 * strixpeer_up and strixpeer_info come first and are always written, so a
 * textfile replaced while the module is absent says so (up 0) instead of
 * keeping the last values.
 */
static void print_prometheus_up(const struct sp_info *info)
{
	char client[80] = "";
	bool pd = info && (info->features & SP_FEAT_PEERDIRECT);

	if (pd)
		peer_client_name(client, sizeof(client));
	printf("# HELP strixpeer_up 1 when the strixpeer module answered, 0 when it is absent\n"
	       "# TYPE strixpeer_up gauge\nstrixpeer_up %d\n", info ? 1 : 0);
	printf("# HELP strixpeer_info the module's version, PeerDirect and its client's name\n"
	       "# TYPE strixpeer_info gauge\nstrixpeer_info{");
	print_label("version", info ? info->version : "", false);
	print_label("library", sp_lib_version(), false);
	print_label("peerdirect", pd ? "yes" : "no", false);
	print_label("client", client, true);
	printf("} 1\n");
}

/* stats [-f prometheus] */
static int cmd_stats(int argc, char **argv)
{
	bool prom = false;
	struct sp_peer_counters pc;
	struct sp_counters c;
	struct sp_config cfg;
	struct sp_info info;
	struct sp_ctl *ctl;

	static const struct {
		const char *name;
	} formats[] = { { "prometheus" }, { NULL } };

	if (argc >= 1 && !strcmp(argv[0], "-f")) {
		if (argc < 2)
			return bad_usage("stats", "-f needs a format (prometheus)");
		if (!find_word("format", "stats", argv[1], formats, sizeof(*formats)))
			return 2;
		if (json) {
			fprintf(stderr, "strixpeerctl: stats -f prometheus is not JSON: drop -j\n");
			return 2;
		}
		prom = true;
		if (extra_args("stats", argc, argv, 2))
			return 2;
	} else if (argc) {
		return bad_usage("stats", "unexpected argument \"%s\"", argv[0]);
	}
	if (prom) {
		/* module absent or refusing: strixpeer_up 0, still exit 0 */
		if (sp_ctl_open(&ctl) < 0) {
			fprintf(stderr, "strixpeerctl: %s (strixpeer_up 0)\n", sp_errmsg());
			print_prometheus_up(NULL);
			return 0;
		}
		if (sp_ctl_info(ctl, &info) < 0 || sp_ctl_stats(ctl, &c) < 0 ||
		    sp_ctl_config_get(ctl, &cfg) < 0 || sp_ctl_peer_stats(ctl, &pc) < 0) {
			fprintf(stderr, "strixpeerctl: %s (strixpeer_up 0)\n", sp_errmsg());
			sp_ctl_close(ctl);
			print_prometheus_up(NULL);
			return 0;
		}
		sp_ctl_close(ctl);
		print_prometheus_up(&info);
		print_prometheus(&c, &pc, &cfg);
		return 0;
	}
	if (open_ctl(&ctl))
		return 1;
	if (sp_ctl_stats(ctl, &c) < 0 || sp_ctl_config_get(ctl, &cfg) < 0 ||
	    sp_ctl_peer_stats(ctl, &pc) < 0) {
		sp_ctl_close(ctl);
		return fail();
	}
	/* the names are the netlink attributes' and the Prometheus metrics' */
	pr_obj_open(NULL);
	print_counters(&c, true);
	pr_u64("peer_maps", "peer maps", pc.maps);
	pr_u64("peer_registrations", "peer registrations", pc.registrations);
	pr_u64("imports", "imports", pc.imports);
	print_peer_pins(ctl);
	sp_ctl_close(ctl);
	pr_obj_close();
	pr_done();
	return 0;
}

static int cmd_config_show(int argc, char **argv)
{
	struct sp_config cfg;
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
	print_peer_limit(ctl);
	sp_ctl_close(ctl);
	pr_obj_close();
	pr_done();
	return 0;
}

/*
 * BYTES: decimal digits (no sign, no octal or hex: "010G" is 10 GiB) and an
 * optional K, M, G or T suffix (powers of 1024; also KiB/KB, ...).
 */
int parse_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	const char *u;
	uint64_t v = 0;
	unsigned int shift = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (*s && (u = strchr(units, *s & ~0x20))) {
		shift = 10 * (unsigned int)(u - units + 1);
		s++;
		if (*s == 'i')
			s++;
		if (*s == 'B' || *s == 'b')
			s++;
	} else if (*s == 'B') {
		s++;
	}
	if (*s || v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

/* BOOL: y/yes/true/on/1 or n/no/false/off/0, any case. */
static int parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "y", "yes", "true", "on", "1" };
	static const char *const no[] = { "n", "no", "false", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i]))
			return *out = 1, 0;
		if (!strcasecmp(s, no[i]))
			return *out = 0, 0;
	}
	return -1;
}

/* N: a decimal NUMA node, or -1. */
static int parse_node(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < -1 || v > 1023 || (s[0] == '0' && s[1]))
		return -1;
	*out = (int)v;
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
	struct sp_counters c;

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
	struct sp_config cfg = { 0 };
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
	{ "show", cmd_config_show, "current configuration" },
	{ "set", cmd_config_set, "KEY VALUE (needs CAP_SYS_ADMIN)" },
	{ NULL, NULL, NULL },
};

static int cmd_config(int argc, char **argv)
{
	return dispatch(config_cmds, "config", argc, argv);
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
	struct timespec now;

	(void)arg;
	if (timestamps)
		clock_gettime(CLOCK_REALTIME, &now);
	if (!json) {
		if (timestamps) {
			struct tm tm;
			char when[64];

			localtime_r(&now.tv_sec, &tm);
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
			printf("[%s.%06ld", when, now.tv_nsec / 1000);
			strftime(when, sizeof(when), "%z", &tm);
			printf("%.3s:%s] ", when, when + 3);
		}
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
	if (timestamps) {
		char when[32];

		/* seconds since the epoch, as a number with microseconds */
		snprintf(when, sizeof(when), "%lld.%06ld", (long long)now.tv_sec,
			 now.tv_nsec / 1000);
		pr_number("timestamp", "timestamp", when);
	}
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

/* monitor [-t] (or strixpeerctl -t monitor, as ip -t monitor) */
static int cmd_monitor(int argc, char **argv)
{
	struct sp_ctl *ctl;
	int ret;

	if (argc >= 1 && (!strcmp(argv[0], "-t") || !strcmp(argv[0], "--timestamp"))) {
		timestamps = true;
		argc--;
		argv++;
	}
	if (argc)
		return bad_usage("monitor", "unexpected argument \"%s\"", argv[0]);
	if (open_ctl(&ctl))
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = sp_ctl_monitor_ex(ctl, SP_MONITOR_PEER | SP_MONITOR_EXPORT,
				print_event, NULL);
	sp_ctl_close(ctl);
	return ret < 0 ? fail() : 0;
}

/* doctor: what is wrong with this RDMA node (user/cli/doctor/) */
static int cmd_doctor(int argc, char **argv)
{
	return doctor_main(argc, argv, json);
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
	{ "monitor", cmd_monitor, "print events as they happen (needs CAP_SYS_ADMIN)" },
	{ "doctor", cmd_doctor, "what is wrong with this RDMA node [--rdma-test]" },
	{ "bench", cmd_bench_json, "[HOST] [--serve]: speed vs malloc, THP, hugetlb (--help)" },
	{ "help", cmd_help, "this text" },
	{ NULL, NULL, NULL },
};

static int cmd_help(int argc, char **argv)
{
	const struct cmd *c;
	int ret;

	if (argc >= 1) {	/* help OBJECT */
		c = find_word("object", NULL, argv[0], top_cmds, sizeof(*top_cmds));
		if (!c)
			return 2;
		if (extra_args("help", argc, argv, 1))
			return 2;
		ret = usage(c->name);
		if (ret >= 0)
			return ret;
		char *help[] = { (char *)"help", NULL };

		return c->fn(1, help);	/* objects that explain themselves */
	}
	if (json) {
		fprintf(stderr, "strixpeerctl: help has no JSON form (-j)\n");
		return 2;
	}
	printf("usage: strixpeerctl [OPTIONS] OBJECT [COMMAND] [ARGS]\n"
	       "       strixpeerctl OBJECT help\n\n"
	       "  -j, --json       JSON output (every object; not with stats -f prometheus)\n"
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
	int c;

	while ((c = getopt_long(argc, argv, "+jptVh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'p':
			json = pretty = true;
			break;
		case 't':
			timestamps = true;
			break;
		case 'V':
			version = true;
			break;
		case 'h':
			help = true;
			break;
		default:
			fprintf(stderr, "strixpeerctl: see \"strixpeerctl help\"\n");
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	pr_init(json, pretty);
	if (help)
		return cmd_help(argc, argv);
	if (version) {
		if (extra_args(NULL, argc, argv, 0))
			return 2;
		if (!json) {
			printf("strixpeerctl %s\n", sp_lib_version());
			return 0;
		}
		pr_obj_open(NULL);
		pr_str("library", "library", sp_lib_version());
		pr_obj_close();
		pr_done();
		return 0;
	}
	if (argc < 1)
		obj = &top_cmds[0];	/* the first is the default */
	else if (!(obj = find_word("object", NULL, argv[0], top_cmds, sizeof(*top_cmds))))
		return 2;
	if (timestamps && strcmp(obj->name, "monitor")) {
		fprintf(stderr, "strixpeerctl: -t is for monitor only\n");
		return 2;
	}
	if (argc > 1 && is_help(argv[1])) {
		int ret = usage(obj->name);

		if (ret >= 0)
			return ret;
	}
	return obj->fn(argc > 0 ? argc - 1 : 0, argv + (argc > 0));
}
