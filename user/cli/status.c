// SPDX-License-Identifier: MIT
/*
 * strixpeerctl status and version: the module, PeerDirect, memory, sharing,
 * limits and NUMA nodes on one screen; the versions of the parts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/resource.h>

#include "cli.h"
#include "holders.h"
#include "print.h"
#include "strixpeer.h"
#include "util.h"

const char status_usage[] = "strixpeerctl [-j] status\n";
const char version_usage[] = "strixpeerctl [-j] version\n";

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

int cmd_version(int argc, char **argv)
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
		if (cli_json) {
			pr_hold(x);	/* fds and mappings of the device: no ino */
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

int cmd_status(int argc, char **argv)
{
	bool all = has_cap(CAP_SYS_ADMIN);
	const char *scope = all ? "(all users)" : "(yours)";
	struct sp_counters c = { .size = sizeof(c) };
	struct sp_config cfg = { .size = sizeof(cfg) };
	struct sp_info info = { .size = sizeof(info) };
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
	print_in_use(ctl, &c, c.peer_registrations);

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
	pr_u64("imports", "imports", c.imports);
	pr_u64("peer_registrations", "registrations", c.peer_registrations);
	pr_u64("peer_claims", "claims", c.peer_claims);
	pr_u64("peer_invalidations", "invalidations", c.peer_invalidations);
	print_peer_pins(&c);
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
		if (cli_json)
			pr_str("buffers_scope", NULL, all ? "all" : "own");
		pr_obj_close();
	}

	pr_obj_open("limits");
	print_config(&cfg);
	print_peer_limit(&cfg);
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
