// SPDX-License-Identifier: MIT
/*
 * strixpeerctl stats [-f prometheus]: the module's counters as a table,
 * JSON or Prometheus text, and the counter printer status uses too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

#include "cli.h"
#include "print.h"
#include "strixpeer.h"
#include "util.h"

const char stats_usage[] = "strixpeerctl [-j] stats\n"
			   "strixpeerctl stats -f prometheus\n";

/* GPU bytes PeerDirect registrations pin (each the whole dma-buf). */
void print_peer_pins(const struct sp_counters *c)
{
	pr_bytes("peer_pinned_bytes", "GPU bytes pinned by PeerDirect (node-wide)",
		 c->peer_pinned_bytes);
	pr_bytes("peer_pinned_bytes_user", "GPU bytes pinned by PeerDirect (your uid)",
		 c->peer_pinned_bytes_user);
	pr_u64("peer_fail_limit", "peer registrations refused: pin limit", c->peer_fail_limit);
}

void print_counters(const struct sp_counters *c, bool all)
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

/* Prometheus text exposition format, for node_exporter's textfile collector. */
static void print_prometheus(const struct sp_counters *c, const struct sp_config *cfg)
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
	       c->peer_maps, c->peer_registrations, c->imports);
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
int cmd_stats(int argc, char **argv)
{
	bool prom = false;
	struct sp_counters c = { .size = sizeof(c) };
	struct sp_config cfg = { .size = sizeof(cfg) };
	struct sp_info info = { .size = sizeof(info) };
	struct sp_ctl *ctl;

	static const struct {
		const char *name;
	} formats[] = { { "prometheus" }, { NULL } };

	if (argc >= 1 && !strcmp(argv[0], "-f")) {
		if (argc < 2)
			return bad_usage("stats", "-f needs a format (prometheus)");
		if (!find_word("format", "stats", argv[1], formats, sizeof(*formats)))
			return 2;
		if (cli_json) {
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
		    sp_ctl_config_get(ctl, &cfg) < 0) {
			fprintf(stderr, "strixpeerctl: %s (strixpeer_up 0)\n", sp_errmsg());
			sp_ctl_close(ctl);
			print_prometheus_up(NULL);
			return 0;
		}
		sp_ctl_close(ctl);
		print_prometheus_up(&info);
		print_prometheus(&c, &cfg);
		return 0;
	}
	if (open_ctl(&ctl))
		return 1;
	/* one stats-get request: every counter */
	if (sp_ctl_stats(ctl, &c) < 0) {
		sp_ctl_close(ctl);
		return fail();
	}
	sp_ctl_close(ctl);
	/* the names are the netlink attributes' and the Prometheus metrics' */
	pr_obj_open(NULL);
	print_counters(&c, true);
	pr_u64("peer_maps", "peer maps", c.peer_maps);
	pr_u64("peer_registrations", "peer registrations", c.peer_registrations);
	pr_u64("imports", "imports", c.imports);
	print_peer_pins(&c);
	pr_obj_close();
	pr_done();
	return 0;
}
