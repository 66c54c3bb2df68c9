// SPDX-License-Identifier: MIT
/*
 * libstrixpeer's STRIXPEER_1.0 control-plane calls, for programs built
 * against the header before its structs became extensible (size first).
 * Each is bound to its old symbol version (sp_ctl_info@STRIXPEER_1.0, ...)
 * and converts between the 1.0 layout, declared here, and the current one;
 * programs linked now get the STRIXPEER_1.6 symbols of ctl.c. The static
 * library has no symbol versions and keeps none of these.
 * tests/host/abi-compat.sh builds a program against the 1.0 header and
 * runs it against this library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strixpeer.h"
#include "internal.h"

#define SP_COMPAT(name, impl) __attribute__((symver(#name "@STRIXPEER_1.0"))) impl

struct sp_info_1_0 {
	char version[32];
	unsigned int abi_major, abi_minor;
	uint64_t features, page_sizes;
	char peerdirect_reason[160];
	unsigned int nr_nodes;
	struct sp_node_info nodes[SP_MAX_NODES];
};

struct sp_buf_entry_1_0 {
	uint32_t id, pid;
	uint64_t size;
	uint32_t node;
	uint64_t page_size;
	uint32_t chunks, map_count;
	int pinned, exported;
	uint32_t exports, attachments;
	char comm[16];
	uint32_t handle, nr_dmabuf_inos;
	uint64_t dmabuf_inos[32];
};

struct sp_counters_1_0 {
	uint64_t buffers, pinned_bytes, peak_pinned_bytes;
	uint64_t allocs, frees, mmaps;
	uint64_t fail_nomem, fail_memlock, fail_max_buf_size, fail_max_pinned;
	uint64_t peer_acquires, peer_claims, peer_invalidations;
	uint64_t dmabuf_exports, dmabuf_attachments;
};

struct sp_config_1_0 {
	uint64_t max_buf_size, max_pinned_bytes;
	int default_node, require_huge;
};

struct sp_event_1_0 {
	enum sp_event_type type;
	struct sp_buf_entry_1_0 buf;
	enum sp_limit limit;
	uint32_t pid;
	uint64_t size;
	struct sp_config_1_0 config;
	enum sp_peer_event peer;
	uint32_t import_id;
	enum sp_inval_reason reason;
	enum sp_export_event export_event;
	char device[64];
};

static void buf_to_1_0(const struct sp_buf_entry *e, struct sp_buf_entry_1_0 *o)
{
	memset(o, 0, sizeof(*o));
	o->id = e->id;
	o->pid = e->pid;
	o->size = e->bytes;
	o->node = e->node;
	o->page_size = e->page_size;
	o->chunks = e->chunks;
	o->map_count = e->map_count;
	o->pinned = e->pinned;
	o->exported = e->exported;
	o->exports = e->exports;
	o->attachments = e->attachments;
	memcpy(o->comm, e->comm, sizeof(o->comm));
	o->handle = e->handle;
	o->nr_dmabuf_inos = e->nr_dmabuf_inos;
	memcpy(o->dmabuf_inos, e->dmabuf_inos, sizeof(o->dmabuf_inos));
}

static void config_to_1_0(const struct sp_config *c, struct sp_config_1_0 *o)
{
	o->max_buf_size = c->max_buf_size;
	o->max_pinned_bytes = c->max_pinned_bytes;
	o->default_node = c->default_node;
	o->require_huge = c->require_huge;
}

SP_COMPAT(sp_ctl_info, int sp_ctl_info_1_0(struct sp_ctl *ctl, struct sp_info_1_0 *o));
int sp_ctl_info_1_0(struct sp_ctl *ctl, struct sp_info_1_0 *o)
{
	struct sp_info i = { .size = sizeof(i) };
	int ret = sp_ctl_info(ctl, &i);

	memset(o, 0, sizeof(*o));
	if (ret)
		return ret;
	memcpy(o->version, i.version, sizeof(o->version));
	o->abi_major = i.abi_major;
	o->abi_minor = i.abi_minor;
	o->features = i.features;
	o->page_sizes = i.page_sizes;
	memcpy(o->peerdirect_reason, i.peerdirect_reason, sizeof(o->peerdirect_reason));
	o->nr_nodes = i.nr_nodes;
	memcpy(o->nodes, i.nodes, sizeof(o->nodes));
	return 0;
}

struct bufs_1_0 {
	int (*cb)(const struct sp_buf_entry_1_0 *e, void *arg);
	void *arg;
};

static int bufs_cb_1_0(const struct sp_buf_entry *e, void *arg)
{
	struct bufs_1_0 *w = arg;
	struct sp_buf_entry_1_0 o;

	buf_to_1_0(e, &o);
	return w->cb(&o, w->arg);
}

SP_COMPAT(sp_ctl_bufs, int sp_ctl_bufs_1_0(struct sp_ctl *ctl, uint32_t pid,
		int (*cb)(const struct sp_buf_entry_1_0 *e, void *arg), void *arg));
int sp_ctl_bufs_1_0(struct sp_ctl *ctl, uint32_t pid,
		    int (*cb)(const struct sp_buf_entry_1_0 *e, void *arg), void *arg)
{
	struct bufs_1_0 w = { .cb = cb, .arg = arg };

	return sp_ctl_bufs(ctl, pid, bufs_cb_1_0, &w);
}

SP_COMPAT(sp_ctl_buf_get, int sp_ctl_buf_get_1_0(struct sp_ctl *ctl, uint32_t id,
						 struct sp_buf_entry_1_0 *o));
int sp_ctl_buf_get_1_0(struct sp_ctl *ctl, uint32_t id, struct sp_buf_entry_1_0 *o)
{
	struct sp_buf_entry e = { .size = sizeof(e) };
	int ret = sp_ctl_buf_get(ctl, id, &e);

	if (ret == 0)
		buf_to_1_0(&e, o);
	return ret;
}

SP_COMPAT(sp_ctl_stats, int sp_ctl_stats_1_0(struct sp_ctl *ctl, struct sp_counters_1_0 *o));
int sp_ctl_stats_1_0(struct sp_ctl *ctl, struct sp_counters_1_0 *o)
{
	struct sp_counters c = { .size = sizeof(c) };
	int ret = sp_ctl_stats(ctl, &c);

	memset(o, 0, sizeof(*o));
	if (ret)
		return ret;
	o->buffers = c.buffers;
	o->pinned_bytes = c.pinned_bytes;
	o->peak_pinned_bytes = c.peak_pinned_bytes;
	o->allocs = c.allocs;
	o->frees = c.frees;
	o->mmaps = c.mmaps;
	o->fail_nomem = c.fail_nomem;
	o->fail_memlock = c.fail_memlock;
	o->fail_max_buf_size = c.fail_max_buf_size;
	o->fail_max_pinned = c.fail_max_pinned;
	o->peer_acquires = c.peer_acquires;
	o->peer_claims = c.peer_claims;
	o->peer_invalidations = c.peer_invalidations;
	o->dmabuf_exports = c.dmabuf_exports;
	o->dmabuf_attachments = c.dmabuf_attachments;
	return 0;
}

SP_COMPAT(sp_ctl_config_get, int sp_ctl_config_get_1_0(struct sp_ctl *ctl,
							struct sp_config_1_0 *o));
int sp_ctl_config_get_1_0(struct sp_ctl *ctl, struct sp_config_1_0 *o)
{
	struct sp_config c = { .size = sizeof(c) };
	int ret = sp_ctl_config_get(ctl, &c);

	if (ret == 0)
		config_to_1_0(&c, o);
	return ret;
}

SP_COMPAT(sp_ctl_config_set, int sp_ctl_config_set_1_0(struct sp_ctl *ctl,
		const struct sp_config_1_0 *o, unsigned int mask));
int sp_ctl_config_set_1_0(struct sp_ctl *ctl, const struct sp_config_1_0 *o, unsigned int mask)
{
	struct sp_config c = {
		.size = sizeof(c),
		.max_buf_size = o->max_buf_size,
		.max_pinned_bytes = o->max_pinned_bytes,
		.default_node = o->default_node,
		.require_huge = o->require_huge,
	};

	return sp_ctl_config_set(ctl, &c, mask);
}

struct monitor_1_0 {
	int (*cb)(const struct sp_event_1_0 *ev, void *arg);
	void *arg;
};

static int monitor_cb_1_0(const struct sp_event *ev, void *arg)
{
	struct monitor_1_0 *m = arg;
	struct sp_event_1_0 o;

	memset(&o, 0, sizeof(o));
	o.type = ev->type;
	if (ev->buf)
		buf_to_1_0(ev->buf, &o.buf);
	o.limit = ev->limit;
	o.pid = ev->pid;
	o.size = ev->bytes;
	if (ev->config)
		config_to_1_0(ev->config, &o.config);
	o.peer = ev->peer;
	o.import_id = ev->import_id;
	o.reason = ev->reason;
	o.export_event = ev->export_event;
	memcpy(o.device, ev->device, sizeof(o.device));
	return m->cb(&o, m->arg);
}

SP_COMPAT(sp_ctl_monitor_ex, int sp_ctl_monitor_ex_1_0(struct sp_ctl *ctl, unsigned int flags,
		int (*cb)(const struct sp_event_1_0 *ev, void *arg), void *arg));
int sp_ctl_monitor_ex_1_0(struct sp_ctl *ctl, unsigned int flags,
			  int (*cb)(const struct sp_event_1_0 *ev, void *arg), void *arg)
{
	struct monitor_1_0 m = { .cb = cb, .arg = arg };

	return sp_ctl_monitor_ex(ctl, flags, monitor_cb_1_0, &m);
}

SP_COMPAT(sp_ctl_monitor, int sp_ctl_monitor_1_0(struct sp_ctl *ctl,
		int (*cb)(const struct sp_event_1_0 *ev, void *arg), void *arg));
int sp_ctl_monitor_1_0(struct sp_ctl *ctl, int (*cb)(const struct sp_event_1_0 *ev, void *arg),
		       void *arg)
{
	return sp_ctl_monitor_ex_1_0(ctl, 0, cb, arg);
}

/* Superseded, unchanged: same symbol, still declared in the header. */
int sp_ctl_peer_stats(struct sp_ctl *ctl, struct sp_peer_counters *p)
{
	struct sp_counters c = { .size = sizeof(c) };
	int ret = sp_ctl_stats(ctl, &c);

	memset(p, 0, sizeof(*p));
	if (ret)
		return ret;
	p->acquires = c.peer_acquires;
	p->claims = c.peer_claims;
	p->maps = c.peer_maps;
	p->invalidations = c.peer_invalidations;
	p->registrations = c.peer_registrations;
	p->imports = c.imports;
	return 0;
}

int sp_ctl_peer_pins(struct sp_ctl *ctl, struct sp_peer_pins *p)
{
	struct sp_counters c = { .size = sizeof(c) };
	struct sp_config cfg = { .size = sizeof(cfg) };
	int ret;

	memset(p, 0, sizeof(*p));
	ret = sp_ctl_stats(ctl, &c);
	if (ret == 0)
		ret = sp_ctl_config_get(ctl, &cfg);
	if (ret)
		return ret;
	p->pinned_bytes = c.peer_pinned_bytes;
	p->user_pinned_bytes = c.peer_pinned_bytes_user;
	p->fail_limit = c.peer_fail_limit;
	p->max_per_user = cfg.max_peer_pinned_per_user;
	return 0;
}
