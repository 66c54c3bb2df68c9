// SPDX-License-Identifier: MIT
/*
 * libstrixpeer control plane: the generic netlink family "strixpeer"
 * (docs/netlink/strixpeer.yaml) through libnl-genl-3. Error replies carry
 * the module's extended-ack message, which becomes sp_errmsg().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "strixpeer.h"
#include "uapi/strixpeer.h"
#include "internal.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* The first sizes of the extensible structs are fixed (ABI). */
_Static_assert(sizeof(struct sp_info) >= SP_INFO_SIZE_VER0, "sp_info shrank");
_Static_assert(sizeof(struct sp_buf_entry) >= SP_BUF_ENTRY_SIZE_VER0, "sp_buf_entry shrank");
_Static_assert(sizeof(struct sp_counters) >= SP_COUNTERS_SIZE_VER0, "sp_counters shrank");
_Static_assert(sizeof(struct sp_config) >= SP_CONFIG_SIZE_VER0, "sp_config shrank");
_Static_assert(sizeof(struct sp_event) >= SP_EVENT_SIZE_VER0, "sp_event shrank");

struct sp_ctl {
	struct nl_sock *sk;
	int family;
};

/* One request's state, shared by the libnl callbacks. */
struct sp_req {
	int done;		/* 1 while waiting; 0 done; < 0 errno */
	char ext[160];		/* the kernel's extack message, if any */
	int (*parse)(struct nlattr **tb, void *arg);
	int maxattr;
	void *arg;
	int stop;		/* parse's non-zero return */
	uint32_t bad_off;	/* extack: offset of the offending attribute */
};

/* The extack TLVs of an error: message and offending attribute's offset. */
static void sp_ext_ack(const struct nlmsgerr *e, struct sp_req *r)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)((const char *)e - NLMSG_HDRLEN);
	const char *p = (const char *)(e + 1), *end = (const char *)nlh + nlh->nlmsg_len;

	r->ext[0] = '\0';
	r->bad_off = 0;
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		p += e->msg.nlmsg_len - NLMSG_HDRLEN;
	while (p + sizeof(struct nlattr) <= end) {
		const struct nlattr *a = (const struct nlattr *)p;

		if (a->nla_len < sizeof(*a) || p + a->nla_len > end)
			break;
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
			snprintf(r->ext, sizeof(r->ext), "%.*s", (int)(a->nla_len - sizeof(*a)),
				 (const char *)(a + 1));
			r->ext[strcspn(r->ext, "\n")] = '\0';
		} else if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_OFFS &&
			   a->nla_len >= sizeof(*a) + sizeof(uint32_t)) {
			memcpy(&r->bad_off, a + 1, sizeof(uint32_t));
		}
		p += NLA_ALIGN(a->nla_len);
	}
}

/* Names (as in the netlink spec) of the attributes requests carry. */
static const char *sp_attr_name(uint8_t cmd, int type)
{
	static const char *const buf[] = {
		[STRIXPEER_A_BUF_ID] = "id", [STRIXPEER_A_BUF_PID] = "pid",
	};
	static const char *const config[] = {
		[STRIXPEER_A_CONFIG_MAX_BUF_SIZE] = "max-buf-size",
		[STRIXPEER_A_CONFIG_MAX_PINNED_BYTES] = "max-pinned-bytes",
		[STRIXPEER_A_CONFIG_DEFAULT_NODE] = "default-node",
		[STRIXPEER_A_CONFIG_REQUIRE_HUGE] = "require-huge",
	};

	if (cmd == STRIXPEER_CMD_BUF_GET && type > 0 && type < (int)(sizeof(buf) / sizeof(buf[0])))
		return buf[type];
	if (cmd == STRIXPEER_CMD_CONFIG_SET && type > 0 &&
	    type < (int)(sizeof(config) / sizeof(config[0])))
		return config[type];
	return "unknown";
}

static int sp_on_error(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
	struct sp_req *r = arg;

	(void)who;
	sp_ext_ack(e, r);
	r->done = e->error ? e->error : 0;
	return NL_STOP;
}

static int sp_on_done(struct nl_msg *msg, void *arg)
{
	struct sp_req *r = arg;

	(void)msg;
	if (r->done > 0)
		r->done = 0;
	return NL_STOP;
}

static int sp_on_valid(struct nl_msg *msg, void *arg)
{
	struct sp_req *r = arg;
	struct nlattr *tb[64];

	if (!r->parse || r->stop)
		return NL_OK;
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, r->maxattr, NULL) < 0)
		return NL_OK;
	r->stop = r->parse(tb, r->arg);
	return NL_OK;
}

/*
 * Sends @msg (consumed) and processes replies until the ack, the end of
 * the dump or an error; @valid handles each reply (NULL: sp_on_valid).
 */
static int sp_transact(struct sp_ctl *ctl, struct nl_msg *msg, struct sp_req *r,
		       const char *what, nl_recvmsg_msg_cb_t valid)
{
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	int ret;

	if (!cb) {
		nlmsg_free(msg);
		return sp_fail(ENOMEM, "out of memory");
	}
	r->done = 1;
	r->ext[0] = '\0';
	nl_cb_err(cb, NL_CB_CUSTOM, sp_on_error, r);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, sp_on_done, r);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, sp_on_done, r);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, valid ? valid : sp_on_valid, r);

	ret = nl_send_auto(ctl->sk, msg);
	if (ret < 0) {
		nlmsg_free(msg);
		nl_cb_put(cb);
		return sp_fail(EIO, "%s: sending the request failed: %s", what, nl_geterror(ret));
	}
	while (r->done > 0) {
		ret = nl_recvmsgs(ctl->sk, cb);
		if (ret < 0 && r->done > 0) {
			nlmsg_free(msg);
			nl_cb_put(cb);
			return sp_fail(EIO, "%s: %s", what, nl_geterror(ret));
		}
	}
	nl_cb_put(cb);
	if (r->done < 0) {
		struct nlmsghdr *req = nlmsg_hdr(msg);
		struct genlmsghdr *gh = nlmsg_data(req);
		int err = -r->done;
		char attr[48] = "";

		/* name the attribute the module pointed at (extack offset) */
		if (r->bad_off >= NLMSG_HDRLEN + GENL_HDRLEN &&
		    r->bad_off + sizeof(struct nlattr) <= req->nlmsg_len)
			snprintf(attr, sizeof(attr), " (attribute %s)",
				 sp_attr_name(gh->cmd, nla_type((struct nlattr *)((char *)req +
										  r->bad_off))));
		nlmsg_free(msg);
		if (err == EPERM)
			return sp_fail(err, "%s: not permitted (needs CAP_SYS_ADMIN)", what);
		if (r->ext[0])
			return sp_fail(err, "%s: %s%s", what, r->ext, attr);
		return sp_fail(err, "%s: %s", what, strerror(err));
	}
	nlmsg_free(msg);
	return r->stop;
}

/* A generic netlink request of @cmd to strixpeer's family (not a message text). */
static struct nl_msg *sp_genl_msg(struct sp_ctl *ctl, uint8_t cmd, int flags)
{
	struct nl_msg *msg = nlmsg_alloc();

	if (msg && !genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, ctl->family, 0,
				flags, cmd, STRIXPEER_GENL_VERSION)) {
		nlmsg_free(msg);
		msg = NULL;
	}
	return msg;
}

int sp_ctl_open(struct sp_ctl **ctlp)
{
	struct sp_ctl *ctl = calloc(1, sizeof(*ctl));
	int one = 1;

	if (!ctl)
		return sp_fail(ENOMEM, "out of memory");
	ctl->sk = nl_socket_alloc();
	if (!ctl->sk) {
		free(ctl);
		return sp_fail(ENOMEM, "out of memory");
	}
	if (genl_connect(ctl->sk) < 0) {
		nl_socket_free(ctl->sk);
		free(ctl);
		return sp_fail(EIO, "cannot open a generic netlink socket");
	}
	setsockopt(nl_socket_get_fd(ctl->sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	setsockopt(nl_socket_get_fd(ctl->sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	ctl->family = genl_ctrl_resolve(ctl->sk, STRIXPEER_GENL_NAME);
	if (ctl->family < 0) {
		nl_socket_free(ctl->sk);
		free(ctl);
		return sp_fail(ENOENT, "no \"%s\" netlink family: is the strixpeer module loaded? (modprobe strixpeer)",
			       STRIXPEER_GENL_NAME);
	}
	*ctlp = ctl;
	return 0;
}

void sp_ctl_close(struct sp_ctl *ctl)
{
	if (!ctl)
		return;
	nl_socket_free(ctl->sk);
	free(ctl);
}

static uint64_t get_u64(struct nlattr *a)
{
	return a ? nla_get_u64(a) : 0;
}

static uint32_t get_u32(struct nlattr *a)
{
	return a ? nla_get_u32(a) : 0;
}

static void get_str(struct nlattr *a, char *out, size_t len)
{
	if (a)
		snprintf(out, len, "%s", nla_get_string(a));
}

/*
 * The bytes of a caller's extensible struct the library fills: its size,
 * taken as @ver0 when below (0: a zeroed struct), at most @mine.
 */
static size_t sp_out_size(uint32_t size, size_t ver0, size_t mine)
{
	if (size < ver0)
		size = (uint32_t)ver0;
	return size < mine ? size : mine;
}

/* Copies the first sp_out_size() bytes of @full to @out; sets @out's size. */
#define SP_COPY_OUT(out, full, ver0) do {					\
	size_t n_ = sp_out_size((out)->size, (ver0), sizeof(*(full)));		\
										\
	memcpy((out), (full), n_);						\
	(out)->size = (uint32_t)n_;						\
} while (0)

static int parse_info(struct nlattr **tb, void *arg)
{
	struct sp_info *info = arg;

	get_str(tb[STRIXPEER_A_INFO_VERSION], info->version, sizeof(info->version));
	info->abi_major = get_u32(tb[STRIXPEER_A_INFO_ABI_MAJOR]);
	info->abi_minor = get_u32(tb[STRIXPEER_A_INFO_ABI_MINOR]);
	info->features = get_u64(tb[STRIXPEER_A_INFO_FEATURES]);
	info->page_sizes = get_u64(tb[STRIXPEER_A_INFO_PAGE_SIZES]);
	get_str(tb[STRIXPEER_A_INFO_PEERDIRECT_REASON], info->peerdirect_reason,
		sizeof(info->peerdirect_reason));
	return 0;
}

/* info repeats the node nest, which genlmsg_parse would keep only once. */
static int sp_on_info(struct nl_msg *msg, void *arg)
{
	struct sp_req *r = arg;
	struct sp_info *info = r->arg;
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *a;
	int rem;

	nla_for_each_attr(a, genlmsg_attrdata(gh, 0), genlmsg_attrlen(gh, 0), rem) {
		struct nlattr *nb[STRIXPEER_A_NODE_MAX + 1];
		struct sp_node_info *n;

		if (nla_type(a) != STRIXPEER_A_INFO_NODE || info->nr_nodes >= SP_MAX_NODES)
			continue;
		if (nla_parse_nested(nb, STRIXPEER_A_NODE_MAX, a, NULL) < 0)
			continue;
		n = &info->nodes[info->nr_nodes++];
		n->id = (int)get_u32(nb[STRIXPEER_A_NODE_ID]);
		n->free_bytes = get_u64(nb[STRIXPEER_A_NODE_FREE_BYTES]);
		n->free_huge = get_u64(nb[STRIXPEER_A_NODE_FREE_HUGE]);
	}
	return sp_on_valid(msg, arg);
}

int sp_ctl_info(struct sp_ctl *ctl, struct sp_info *info)
{
	struct sp_info full = { .size = sizeof(full) };
	struct sp_req r = { .parse = parse_info, .maxattr = STRIXPEER_A_INFO_MAX, .arg = &full };
	struct nl_msg *msg = sp_genl_msg(ctl, STRIXPEER_CMD_INFO, 0);
	int ret;

	if (!msg)
		return sp_fail(ENOMEM, "out of memory");
	ret = sp_transact(ctl, msg, &r, "info", sp_on_info);
	if (ret == 0)
		SP_COPY_OUT(info, &full, SP_INFO_SIZE_VER0);
	return ret;
}

static void parse_buf_attrs(struct nlattr **tb, struct sp_buf_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->size = sizeof(*e);
	e->id = get_u32(tb[STRIXPEER_A_BUF_ID]);
	e->pid = get_u32(tb[STRIXPEER_A_BUF_PID]);
	e->bytes = get_u64(tb[STRIXPEER_A_BUF_SIZE]);
	e->node = get_u32(tb[STRIXPEER_A_BUF_NODE]);
	e->page_size = get_u64(tb[STRIXPEER_A_BUF_PAGE_SIZE]);
	e->chunks = get_u32(tb[STRIXPEER_A_BUF_CHUNKS]);
	e->map_count = get_u32(tb[STRIXPEER_A_BUF_MAP_COUNT]);
	e->pinned = tb[STRIXPEER_A_BUF_PINNED] ? nla_get_u8(tb[STRIXPEER_A_BUF_PINNED]) : 0;
	e->exported = tb[STRIXPEER_A_BUF_EXPORTED] ? nla_get_u8(tb[STRIXPEER_A_BUF_EXPORTED]) : 0;
	e->exports = tb[STRIXPEER_A_BUF_EXPORTS] ? nla_get_u32(tb[STRIXPEER_A_BUF_EXPORTS]) : 0;
	e->attachments = tb[STRIXPEER_A_BUF_ATTACHMENTS] ?
		nla_get_u32(tb[STRIXPEER_A_BUF_ATTACHMENTS]) : 0;
	if (tb[STRIXPEER_A_BUF_COMM])
		snprintf(e->comm, sizeof(e->comm), "%s",
			 nla_get_string(tb[STRIXPEER_A_BUF_COMM]));
	e->handle = get_u32(tb[STRIXPEER_A_BUF_HANDLE]);
}

/* DMABUF_INO repeats (one per live dma-buf): parse_buf_attrs() keeps one. */
static void parse_buf_inos(struct nlmsghdr *nlh, struct sp_buf_entry *e)
{
	struct nlattr *a;
	int rem;

	nla_for_each_attr(a, genlmsg_attrdata(nlmsg_data(nlh), 0),
			  genlmsg_attrlen(nlmsg_data(nlh), 0), rem) {
		if (nla_type(a) != STRIXPEER_A_BUF_DMABUF_INO ||
		    e->nr_dmabuf_inos == sizeof(e->dmabuf_inos) / sizeof(e->dmabuf_inos[0]) ||
		    nla_len(a) != sizeof(uint64_t))
			continue;
		e->dmabuf_inos[e->nr_dmabuf_inos++] = nla_get_u64(a);
	}
}

struct sp_buf_walk {
	int (*cb)(const struct sp_buf_entry *e, void *arg);
	void *arg;
};

static int parse_buf(struct nlattr **tb, void *arg)
{
	struct sp_buf_walk *w = arg;
	struct sp_buf_entry e;

	parse_buf_attrs(tb, &e);
	return w->cb(&e, w->arg);
}

/* Like sp_on_valid() with parse_buf(), plus the repeated DMABUF_INO. */
static int sp_on_buf(struct nl_msg *msg, void *arg)
{
	struct sp_req *r = arg;
	struct sp_buf_walk *w = r->arg;
	struct nlattr *tb[STRIXPEER_A_BUF_MAX + 1];
	struct sp_buf_entry e;

	if (r->stop)
		return NL_OK;
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, STRIXPEER_A_BUF_MAX, NULL) < 0)
		return NL_OK;
	parse_buf_attrs(tb, &e);
	parse_buf_inos(nlmsg_hdr(msg), &e);
	r->stop = w->cb(&e, w->arg);
	return NL_OK;
}

int sp_ctl_bufs(struct sp_ctl *ctl, uint32_t pid,
		int (*cb)(const struct sp_buf_entry *e, void *arg), void *arg)
{
	struct sp_buf_walk w = { .cb = cb, .arg = arg };
	struct sp_req r = { .parse = parse_buf, .maxattr = STRIXPEER_A_BUF_MAX, .arg = &w };
	struct nl_msg *msg = sp_genl_msg(ctl, STRIXPEER_CMD_BUF_GET, NLM_F_DUMP);

	if (!msg)
		return sp_fail(ENOMEM, "out of memory");
	if (pid && nla_put_u32(msg, STRIXPEER_A_BUF_PID, pid) < 0) {
		nlmsg_free(msg);
		return sp_fail(ENOMEM, "out of memory");
	}
	return sp_transact(ctl, msg, &r, "buffer list", sp_on_buf);
}

static int copy_buf(const struct sp_buf_entry *e, void *arg)
{
	*(struct sp_buf_entry *)arg = *e;
	return 0;
}

/* sp_ctl_buf_get() into the library's own struct sp_buf_entry. */
static int sp_ctl_buf_get_full(struct sp_ctl *ctl, uint32_t id, struct sp_buf_entry *e)
{
	struct sp_buf_walk w = { .cb = copy_buf, .arg = e };
	struct sp_req r = { .parse = parse_buf, .maxattr = STRIXPEER_A_BUF_MAX, .arg = &w };
	struct nl_msg *msg = sp_genl_msg(ctl, STRIXPEER_CMD_BUF_GET, 0);

	if (!msg)
		return sp_fail(ENOMEM, "out of memory");
	if (nla_put_u32(msg, STRIXPEER_A_BUF_ID, id) < 0) {
		nlmsg_free(msg);
		return sp_fail(ENOMEM, "out of memory");
	}
	return sp_transact(ctl, msg, &r, "buffer", sp_on_buf);
}

int sp_ctl_buf_get(struct sp_ctl *ctl, uint32_t id, struct sp_buf_entry *e)
{
	struct sp_buf_entry full = { .size = sizeof(full) };
	int ret = sp_ctl_buf_get_full(ctl, id, &full);

	if (ret == 0)
		SP_COPY_OUT(e, &full, SP_BUF_ENTRY_SIZE_VER0);
	return ret;
}

/*
 * struct sp_counters from the stats-get reply: one line per attribute of the
 * netlink spec's stats set, mirroring kmod/stats.c's sp_stat_table (plus the
 * per-uid attribute netlink.c adds); tests/host/spec-check.py checks both.
 */
#define SP_CTR(attr, field) { STRIXPEER_A_STATS_##attr, offsetof(struct sp_counters, field) }
static const struct {
	int attr;
	size_t off;
} sp_counter_table[] = {
	SP_CTR(BUFFERS, buffers),
	SP_CTR(PINNED_BYTES, pinned_bytes),
	SP_CTR(PEAK_PINNED_BYTES, peak_pinned_bytes),
	SP_CTR(ALLOCS, allocs),
	SP_CTR(FREES, frees),
	SP_CTR(FAIL_NOMEM, fail_nomem),
	SP_CTR(FAIL_MEMLOCK, fail_memlock),
	SP_CTR(FAIL_MAX_BUF_SIZE, fail_max_buf_size),
	SP_CTR(FAIL_MAX_PINNED, fail_max_pinned),
	SP_CTR(MMAPS, mmaps),
	SP_CTR(PEER_ACQUIRES, peer_acquires),
	SP_CTR(PEER_CLAIMS, peer_claims),
	SP_CTR(PEER_INVALIDATIONS, peer_invalidations),
	SP_CTR(DMABUF_EXPORTS, dmabuf_exports),
	SP_CTR(DMABUF_ATTACHMENTS, dmabuf_attachments),
	SP_CTR(PEER_MAPS, peer_maps),
	SP_CTR(IMPORTS, imports),
	SP_CTR(PEER_REGISTRATIONS, peer_registrations),
	SP_CTR(PEER_PINNED_BYTES, peer_pinned_bytes),
	SP_CTR(PEER_FAIL_LIMIT, peer_fail_limit),
	SP_CTR(PEER_PINNED_BYTES_USER, peer_pinned_bytes_user),
};
#undef SP_CTR

static int parse_stats(struct nlattr **tb, void *arg)
{
	size_t i;

	for (i = 0; i < sizeof(sp_counter_table) / sizeof(sp_counter_table[0]); i++) {
		struct nlattr *a = tb[sp_counter_table[i].attr];

		if (a && nla_len(a) == sizeof(uint64_t))
			*(uint64_t *)((char *)arg + sp_counter_table[i].off) = nla_get_u64(a);
	}
	return 0;
}

int sp_ctl_stats(struct sp_ctl *ctl, struct sp_counters *c)
{
	struct sp_counters full = { .size = sizeof(full) };
	struct sp_req r = { .parse = parse_stats, .maxattr = STRIXPEER_A_STATS_MAX, .arg = &full };
	struct nl_msg *msg = sp_genl_msg(ctl, STRIXPEER_CMD_STATS_GET, 0);
	int ret;

	if (!msg)
		return sp_fail(ENOMEM, "out of memory");
	ret = sp_transact(ctl, msg, &r, "stats", NULL);
	if (ret == 0)
		SP_COPY_OUT(c, &full, SP_COUNTERS_SIZE_VER0);
	return ret;
}

static void parse_config_attrs(struct nlattr **tb, struct sp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->max_buf_size = get_u64(tb[STRIXPEER_A_CONFIG_MAX_BUF_SIZE]);
	cfg->max_pinned_bytes = get_u64(tb[STRIXPEER_A_CONFIG_MAX_PINNED_BYTES]);
	cfg->default_node = tb[STRIXPEER_A_CONFIG_DEFAULT_NODE] ?
		(int)nla_get_s32(tb[STRIXPEER_A_CONFIG_DEFAULT_NODE]) : -1;
	cfg->require_huge = tb[STRIXPEER_A_CONFIG_REQUIRE_HUGE] ?
		nla_get_u8(tb[STRIXPEER_A_CONFIG_REQUIRE_HUGE]) : 0;
	cfg->max_peer_pinned_per_user = get_u64(tb[STRIXPEER_A_CONFIG_MAX_PEER_PINNED_PER_USER]);
}

static int parse_config(struct nlattr **tb, void *arg)
{
	parse_config_attrs(tb, arg);
	return 0;
}

int sp_ctl_config_get(struct sp_ctl *ctl, struct sp_config *cfg)
{
	struct sp_config full = { .size = sizeof(full) };
	struct sp_req r = { .parse = parse_config, .maxattr = STRIXPEER_A_CONFIG_MAX, .arg = &full };
	struct nl_msg *msg = sp_genl_msg(ctl, STRIXPEER_CMD_CONFIG_GET, 0);
	int ret;

	if (!msg)
		return sp_fail(ENOMEM, "out of memory");
	ret = sp_transact(ctl, msg, &r, "config", NULL);
	if (ret == 0)
		SP_COPY_OUT(cfg, &full, SP_CONFIG_SIZE_VER0);
	return ret;
}

int sp_ctl_config_set(struct sp_ctl *ctl, const struct sp_config *cfg, unsigned int mask)
{
	struct sp_req r = { 0 };
	struct nl_msg *msg;
	int bad = 0;

	if (!mask || (mask & ~(SP_CONFIG_MAX_BUF_SIZE | SP_CONFIG_MAX_PINNED_BYTES |
			       SP_CONFIG_DEFAULT_NODE | SP_CONFIG_REQUIRE_HUGE)))
		return sp_fail(EINVAL, "config set: invalid mask 0x%x", mask);
	msg = sp_genl_msg(ctl, STRIXPEER_CMD_CONFIG_SET, 0);
	if (!msg)
		return sp_fail(ENOMEM, "out of memory");
	if (mask & SP_CONFIG_MAX_BUF_SIZE)
		bad |= nla_put_u64(msg, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, cfg->max_buf_size);
	if (mask & SP_CONFIG_MAX_PINNED_BYTES)
		bad |= nla_put_u64(msg, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES, cfg->max_pinned_bytes);
	if (mask & SP_CONFIG_DEFAULT_NODE)
		bad |= nla_put_s32(msg, STRIXPEER_A_CONFIG_DEFAULT_NODE, cfg->default_node);
	if (mask & SP_CONFIG_REQUIRE_HUGE)
		bad |= nla_put_u8(msg, STRIXPEER_A_CONFIG_REQUIRE_HUGE, cfg->require_huge ? 1 : 0);
	if (bad) {
		nlmsg_free(msg);
		return sp_fail(ENOMEM, "out of memory");
	}
	return sp_transact(ctl, msg, &r, "config set", NULL);
}

struct sp_monitor {
	int (*cb)(const struct sp_event *ev, void *arg);
	void *arg;
	unsigned int flags;
	int stop;
};

static int sp_on_event(struct nl_msg *msg, void *arg)
{
	struct sp_monitor *m = arg;
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[STRIXPEER_A_EVENT_MAX + 1];
	struct sp_buf_entry buf;
	struct sp_config cfg;
	struct sp_event ev;

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, STRIXPEER_A_EVENT_MAX, NULL) < 0)
		return NL_SKIP;
	memset(&ev, 0, sizeof(ev));
	ev.size = sizeof(ev);
	switch (gh->cmd) {
	case STRIXPEER_CMD_BUF_CREATED_NTF:
	case STRIXPEER_CMD_BUF_FREED_NTF: {
		struct nlattr *bt[STRIXPEER_A_BUF_MAX + 1];

		ev.type = gh->cmd == STRIXPEER_CMD_BUF_CREATED_NTF ?
			SP_EVENT_BUF_CREATED : SP_EVENT_BUF_FREED;
		if (!tb[STRIXPEER_A_EVENT_BUF] ||
		    nla_parse_nested(bt, STRIXPEER_A_BUF_MAX, tb[STRIXPEER_A_EVENT_BUF], NULL) < 0)
			return NL_SKIP;
		parse_buf_attrs(bt, &buf);
		ev.buf = &buf;
		break;
	}
	case STRIXPEER_CMD_LIMIT_NTF:
		/* enum sp_limit is the netlink enum, value for value */
		_Static_assert((int)SP_LIMIT_MAX_PEER_PINNED_PER_USER ==
			       (int)STRIXPEER_LIMIT_MAX_PEER_PINNED_PER_USER, "sp_limit");
		ev.type = SP_EVENT_LIMIT;
		ev.limit = (enum sp_limit)get_u32(tb[STRIXPEER_A_EVENT_LIMIT]);
		ev.bytes = get_u64(tb[STRIXPEER_A_EVENT_SIZE]);
		break;
	case STRIXPEER_CMD_CONFIG_NTF: {
		struct nlattr *ct[STRIXPEER_A_CONFIG_MAX + 1];

		ev.type = SP_EVENT_CONFIG;
		if (!tb[STRIXPEER_A_EVENT_CONFIG] ||
		    nla_parse_nested(ct, STRIXPEER_A_CONFIG_MAX, tb[STRIXPEER_A_EVENT_CONFIG], NULL) < 0)
			return NL_SKIP;
		parse_config_attrs(ct, &cfg);
		ev.config = &cfg;
		break;
	}
	case STRIXPEER_CMD_PEER_NTF:
		/* only for callers that asked (sp_ctl_monitor_ex()) */
		if (!(m->flags & SP_MONITOR_PEER))
			return NL_SKIP;
		ev.type = SP_EVENT_PEER;
		ev.peer = (enum sp_peer_event)get_u32(tb[STRIXPEER_A_EVENT_PEER]);
		ev.import_id = get_u32(tb[STRIXPEER_A_EVENT_IMPORT]);
		ev.reason = (enum sp_inval_reason)get_u32(tb[STRIXPEER_A_EVENT_REASON]);
		ev.bytes = get_u64(tb[STRIXPEER_A_EVENT_SIZE]);
		break;
	case STRIXPEER_CMD_EXPORT_NTF: {
		struct nlattr *bt[STRIXPEER_A_BUF_MAX + 1];

		/* only for callers that asked (sp_ctl_monitor_ex()) */
		if (!(m->flags & SP_MONITOR_EXPORT))
			return NL_SKIP;
		ev.type = SP_EVENT_EXPORT;
		ev.export_event = (enum sp_export_event)get_u32(tb[STRIXPEER_A_EVENT_EXPORT]);
		if (!tb[STRIXPEER_A_EVENT_BUF] ||
		    nla_parse_nested(bt, STRIXPEER_A_BUF_MAX, tb[STRIXPEER_A_EVENT_BUF], NULL) < 0)
			return NL_SKIP;
		parse_buf_attrs(bt, &buf);
		ev.buf = &buf;
		if (tb[STRIXPEER_A_EVENT_DEVICE])
			snprintf(ev.device, sizeof(ev.device), "%s",
				 nla_get_string(tb[STRIXPEER_A_EVENT_DEVICE]));
		break;
	}
	default:
		return NL_SKIP;
	}
	ev.pid = get_u32(tb[STRIXPEER_A_EVENT_PID]);
	m->stop = m->cb(&ev, m->arg);
	return m->stop ? NL_STOP : NL_OK;
}

int sp_ctl_monitor(struct sp_ctl *ctl, int (*cb)(const struct sp_event *ev, void *arg), void *arg)
{
	return sp_ctl_monitor_ex(ctl, 0, cb, arg);
}

int sp_ctl_monitor_ex(struct sp_ctl *ctl, unsigned int flags,
		      int (*cb)(const struct sp_event *ev, void *arg), void *arg)
{
	struct sp_monitor m = { .cb = cb, .arg = arg, .flags = flags };
	int grp, ret;

	const unsigned int known = SP_MONITOR_PEER | SP_MONITOR_EXPORT;

	if (flags & ~known)
		return sp_fail(EINVAL, "unknown monitor flags %#x", flags & ~known);

	grp = genl_ctrl_resolve_grp(ctl->sk, STRIXPEER_GENL_NAME, STRIXPEER_MCGRP_EVENTS);
	if (grp < 0)
		return sp_fail(ENOENT, "no \"%s\" multicast group: module too old, or built for a kernel that cannot restrict who joins it (before 6.7 without the stable backport)",
			       STRIXPEER_MCGRP_EVENTS);
	nl_socket_disable_seq_check(ctl->sk);
	ret = nl_socket_add_membership(ctl->sk, grp);
	if (ret == -NLE_PERM)
		return sp_fail(EPERM, "events: not permitted (needs CAP_SYS_ADMIN: events show every user's buffers)");
	if (ret < 0)
		return sp_fail(EIO, "joining the events group: %s", nl_geterror(ret));
	nl_socket_modify_cb(ctl->sk, NL_CB_VALID, NL_CB_CUSTOM, sp_on_event, &m);
	while (!m.stop) {
		ret = nl_recvmsgs_default(ctl->sk);
		if (ret < 0 && !m.stop) {
			if (ret == -NLE_INTR)
				continue;
			return sp_fail(EIO, "receiving events: %s", nl_geterror(ret));
		}
	}
	return m.stop;
}
