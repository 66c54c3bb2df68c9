// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - the generic netlink family "strixpeer", as described in
 * docs/netlink/strixpeer.yaml: info, buffers, counters, configuration and
 * the "events" multicast group.
 *
 * Request policies are named strixpeer_<op>_nl_policy; tests/host/spec-check.py
 * compares them (and the uapi enums) with the spec.
 *
 * Locking: the family is parallel_ops. Buffers are looked up with
 * sp_buf_get_next() (sp_all_bufs' xa_lock, then a reference); config-set
 * checks CAP_SYS_ADMIN, then parses and validates the whole request, then
 * holds sp_config_lock while it applies and announces a change, so
 * announcements come in the order the changes were made.
 * Events are built and sent with GFP_KERNEL from process context only.
 */
#include <linux/cred.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/nodemask.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#include "events.h"
#include "strixpeer.h"

enum sp_nl_mcgrp {
	SP_NL_MCGRP_EVENTS,
};

/*
 * Events name other users' processes, sizes and devices: only
 * CAP_SYS_ADMIN (in the initial user namespace) may join the group. The
 * flag came with 6.7 and stable backports (Debian's 6.1 has it); a kernel
 * without it gets no events group at all rather than a world-readable one.
 */
#ifdef STRIXPEER_HAVE_GENL_MCAST_CAP_SYS_ADMIN
static const struct genl_multicast_group sp_nl_mcgrps[] = {
	[SP_NL_MCGRP_EVENTS] = {
		.name = STRIXPEER_MCGRP_EVENTS,
		.flags = GENL_MCAST_CAP_SYS_ADMIN,
	},
};

#define SP_NL_N_MCGRPS	ARRAY_SIZE(sp_nl_mcgrps)
#else
#define sp_nl_mcgrps	NULL
#define SP_NL_N_MCGRPS	0
#endif

/* buf-get: do takes id, dump takes pid (genl_ops share one policy). */
static const struct nla_policy strixpeer_buf_get_nl_policy[STRIXPEER_A_BUF_PID + 1] = {
	[STRIXPEER_A_BUF_ID] = NLA_POLICY_MIN(NLA_U32, 1),
	[STRIXPEER_A_BUF_PID] = { .type = NLA_U32 },
};

static const struct nla_policy strixpeer_config_set_nl_policy[STRIXPEER_A_CONFIG_REQUIRE_HUGE + 1] = {
	[STRIXPEER_A_CONFIG_MAX_BUF_SIZE] = NLA_POLICY_MIN(NLA_U64, 4096),
	[STRIXPEER_A_CONFIG_MAX_PINNED_BYTES] = { .type = NLA_U64 },
	[STRIXPEER_A_CONFIG_DEFAULT_NODE] = NLA_POLICY_RANGE(NLA_S32, STRIXPEER_NODE_CALLER, 1023),
	[STRIXPEER_A_CONFIG_REQUIRE_HUGE] = NLA_POLICY_MAX(NLA_U8, 1),
};

/*
 * What genetlink parses config-set with before the handler runs: the
 * known attributes with any bytes, so no type or range error comes before
 * the CAP_SYS_ADMIN check (an unknown attribute type still does: new ops
 * may not ask for liberal parsing). An op without a policy would have
 * every attribute rejected (genl_policy_reject_all). The handler then
 * parses strictly with strixpeer_config_set_nl_policy.
 */
static const struct nla_policy sp_config_set_loose_policy[STRIXPEER_A_CONFIG_REQUIRE_HUGE + 1] = {
	[STRIXPEER_A_CONFIG_MAX_BUF_SIZE] = { .type = NLA_BINARY },
	[STRIXPEER_A_CONFIG_MAX_PINNED_BYTES] = { .type = NLA_BINARY },
	[STRIXPEER_A_CONFIG_DEFAULT_NODE] = { .type = NLA_BINARY },
	[STRIXPEER_A_CONFIG_REQUIRE_HUGE] = { .type = NLA_BINARY },
};

static struct genl_family sp_nl_family;

/* Serialises config-set's apply-and-announce. */
static DEFINE_MUTEX(sp_config_lock);

/* What events and dumps both show of a buffer. */
static int sp_nl_put_buf_snap(struct sk_buff *skb, const struct sp_event_buf *eb)
{
	if (nla_put_u32(skb, STRIXPEER_A_BUF_ID, eb->id) ||
	    nla_put_u32(skb, STRIXPEER_A_BUF_PID, eb->pid) ||
	    nla_put_u64_64bit(skb, STRIXPEER_A_BUF_SIZE, eb->size,
			      STRIXPEER_A_BUF_PAD) ||
	    nla_put_u32(skb, STRIXPEER_A_BUF_NODE, eb->node) ||
	    nla_put_u64_64bit(skb, STRIXPEER_A_BUF_PAGE_SIZE,
			      eb->page_size, STRIXPEER_A_BUF_PAD) ||
	    nla_put_u32(skb, STRIXPEER_A_BUF_CHUNKS, eb->nr_chunks) ||
	    nla_put_u32(skb, STRIXPEER_A_BUF_MAP_COUNT, eb->map_count) ||
	    nla_put_u8(skb, STRIXPEER_A_BUF_EXPORTED, eb->exports > 0) ||
	    nla_put_u32(skb, STRIXPEER_A_BUF_EXPORTS, eb->exports) ||
	    nla_put_u32(skb, STRIXPEER_A_BUF_ATTACHMENTS, eb->attachments))
		return -EMSGSIZE;
	return 0;
}

/*
 * What lets user space name a buffer's holders (strixpeerctl buf show):
 * the allocator's comm, the handle on its file (fdinfo of the file lists
 * it) and the inode number of each live dma-buf (stat() of an fd of it,
 * /proc/PID/maps). At most SP_MAX_REPORTED_INOS inodes, so that one
 * buffer always fits a dump's message; "exports" says how many there are.
 */
static int sp_nl_put_buf_holders(struct sk_buff *skb, struct sp_buf *buf)
{
	u64 inos[SP_MAX_REPORTED_INOS];
	unsigned int i, n;

	if (nla_put_string(skb, STRIXPEER_A_BUF_COMM, buf->comm) ||
	    nla_put_u32(skb, STRIXPEER_A_BUF_HANDLE, READ_ONCE(buf->handle)))
		return -EMSGSIZE;
	n = sp_export_inos(buf, inos, ARRAY_SIZE(inos));
	for (i = 0; i < n; i++)
		if (nla_put_u64_64bit(skb, STRIXPEER_A_BUF_DMABUF_INO, inos[i],
				      STRIXPEER_A_BUF_PAD))
			return -EMSGSIZE;
	return 0;
}

/*
 * buf-get replies and dumps add "pinned", which walks the buffer's pages
 * (sp_buf_pinned()): asked for, not pushed with every event.
 */
static int sp_nl_put_buf(struct sk_buff *skb, struct sp_buf *buf)
{
	struct sp_event_buf eb;

	sp_buf_snapshot(&eb, buf);
	if (sp_nl_put_buf_snap(skb, &eb) ||
	    nla_put_u8(skb, STRIXPEER_A_BUF_PINNED, sp_buf_pinned(buf)) ||
	    sp_nl_put_buf_holders(skb, buf))
		return -EMSGSIZE;
	return 0;
}

/* The requester sees a buffer when it is root-like or runs as its uid. */
static bool sp_nl_may_see(struct sk_buff *req, struct sp_buf *buf)
{
	return netlink_capable(req, CAP_SYS_ADMIN) ||
	       uid_eq(buf->uid, NETLINK_CB(req).creds.uid);
}

static int sp_nl_put_config(struct sk_buff *skb)
{
	if (nla_put_u64_64bit(skb, STRIXPEER_A_CONFIG_MAX_BUF_SIZE,
			      READ_ONCE(sp_max_buf_size),
			      STRIXPEER_A_CONFIG_PAD) ||
	    nla_put_u64_64bit(skb, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES,
			      READ_ONCE(sp_max_pinned_bytes),
			      STRIXPEER_A_CONFIG_PAD) ||
	    nla_put_s32(skb, STRIXPEER_A_CONFIG_DEFAULT_NODE,
			READ_ONCE(sp_default_node)) ||
	    nla_put_u8(skb, STRIXPEER_A_CONFIG_REQUIRE_HUGE,
		       READ_ONCE(sp_require_huge)) ||
	    nla_put_u64_64bit(skb, STRIXPEER_A_CONFIG_MAX_PEER_PINNED_PER_USER,
			      READ_ONCE(sp_max_peer_pinned_per_user),
			      STRIXPEER_A_CONFIG_PAD))
		return -EMSGSIZE;
	return 0;
}

static int sp_nl_put_node(struct sk_buff *skb, int nid)
{
	pg_data_t *pgdat = NODE_DATA(nid);
	u64 free_pages = 0, free_huge = 0;
	struct nlattr *nest;
	int z, o;

	for (z = 0; z < MAX_NR_ZONES; z++) {
		struct zone *zone = &pgdat->node_zones[z];

		if (!populated_zone(zone))
			continue;
		free_pages += zone_page_state(zone, NR_FREE_PAGES);
		/* like /proc/buddyinfo: a racy but harmless snapshot */
		for (o = SP_HUGE_ORDER; o < ARRAY_SIZE(zone->free_area); o++)
			free_huge += READ_ONCE(zone->free_area[o].nr_free) <<
				     (o - SP_HUGE_ORDER);
	}

	nest = nla_nest_start(skb, STRIXPEER_A_INFO_NODE);
	if (!nest ||
	    nla_put_u32(skb, STRIXPEER_A_NODE_ID, nid) ||
	    nla_put_u64_64bit(skb, STRIXPEER_A_NODE_FREE_BYTES,
			      free_pages << PAGE_SHIFT, STRIXPEER_A_NODE_PAD) ||
	    nla_put_u64_64bit(skb, STRIXPEER_A_NODE_FREE_HUGE, free_huge,
			      STRIXPEER_A_NODE_PAD))
		return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

static int sp_nl_info_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;
	int nid;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &sp_nl_family, 0, STRIXPEER_CMD_INFO);
	if (!hdr)
		goto out_free;
	if (nla_put_string(msg, STRIXPEER_A_INFO_VERSION, SP_VERSION_STR) ||
	    nla_put_u32(msg, STRIXPEER_A_INFO_ABI_MAJOR, STRIXPEER_ABI_MAJOR) ||
	    nla_put_u32(msg, STRIXPEER_A_INFO_ABI_MINOR, STRIXPEER_ABI_MINOR) ||
	    nla_put_u64_64bit(msg, STRIXPEER_A_INFO_FEATURES, SP_FEATURES |
			      (sp_peer_active() ? STRIXPEER_FEAT_PEERDIRECT : 0),
			      STRIXPEER_A_INFO_PAD) ||
	    nla_put_u64_64bit(msg, STRIXPEER_A_INFO_PAGE_SIZES, SP_PAGE_SIZES,
			      STRIXPEER_A_INFO_PAD) ||
	    (!sp_peer_active() &&
	     nla_put_string(msg, STRIXPEER_A_INFO_PEERDIRECT_REASON,
			    sp_peer_reason())))
		goto out_free;
	for_each_node_state(nid, N_MEMORY)
		if (sp_nl_put_node(msg, nid))
			goto out_free;
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);

out_free:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

static int sp_nl_buf_get_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	struct sp_buf *buf;
	unsigned long id;
	u32 want;
	void *hdr;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, STRIXPEER_A_BUF_ID)) {
		NL_SET_ERR_MSG(info->extack, "buffer id attribute is required");
		return -EINVAL;
	}
	want = nla_get_u32(info->attrs[STRIXPEER_A_BUF_ID]);
	id = want;
	buf = sp_buf_get_next(&id);
	if (buf && (id != want || !sp_nl_may_see(skb, buf))) {
		sp_buf_put(buf);
		buf = NULL;
	}
	if (!buf) {
		NL_SET_ERR_MSG_ATTR(info->extack, info->attrs[STRIXPEER_A_BUF_ID],
				    "no buffer with this id visible to the caller");
		return -ENOENT;
	}

	ret = -ENOMEM;
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		goto out_put;
	ret = -EMSGSIZE;
	hdr = genlmsg_put_reply(msg, info, &sp_nl_family, 0, STRIXPEER_CMD_BUF_GET);
	if (!hdr || sp_nl_put_buf(msg, buf))
		goto out_free;
	genlmsg_end(msg, hdr);
	sp_buf_put(buf);
	return genlmsg_reply(msg, info);

out_free:
	nlmsg_free(msg);
out_put:
	sp_buf_put(buf);
	return ret;
}

/*
 * Buffers in id order from cb->args[0]. Ids only grow (cyclic allocation),
 * so a dump never shows a buffer twice, and every buffer alive for the
 * whole dump is in it, however many are freed meanwhile.
 */
static int sp_nl_buf_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct nlattr **attrs = sp_genl_dump_attrs(cb);
	bool admin = netlink_capable(cb->skb, CAP_SYS_ADMIN);
	kuid_t uid = NETLINK_CB(cb->skb).creds.uid;
	unsigned long id = cb->args[0];
	u32 pid = 0;

	if (attrs[STRIXPEER_A_BUF_PID])
		pid = nla_get_u32(attrs[STRIXPEER_A_BUF_PID]);

	for (;; id++) {
		struct sp_buf *buf = sp_buf_get_next(&id);
		void *hdr;

		if (!buf)
			break;
		if ((pid && buf->pid != pid) ||
		    (!admin && !uid_eq(buf->uid, uid))) {
			sp_buf_put(buf);
			continue;
		}
		hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid,
				  cb->nlh->nlmsg_seq, &sp_nl_family, NLM_F_MULTI,
				  STRIXPEER_CMD_BUF_GET);
		if (!hdr || sp_nl_put_buf(skb, buf)) {
			if (hdr)
				genlmsg_cancel(skb, hdr);
			sp_buf_put(buf);
			break;	/* the skb is full; resume at this id */
		}
		genlmsg_end(skb, hdr);
		sp_buf_put(buf);
	}
	cb->args[0] = id;
	return skb->len;
}

static int sp_nl_stats_get_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &sp_nl_family, 0,
				STRIXPEER_CMD_STATS_GET);
	if (!hdr || sp_stats_put(msg) ||
	    nla_put_u64_64bit(msg, STRIXPEER_A_STATS_PEER_PINNED_BYTES_USER,
			      sp_peer_pinned_by(NETLINK_CB(skb).creds.uid),
			      STRIXPEER_A_STATS_PAD)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static int sp_nl_config_get_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &sp_nl_family, 0,
				STRIXPEER_CMD_CONFIG_GET);
	if (!hdr || sp_nl_put_config(msg)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

/*
 * Events: sp_nl_event_new() starts one (NULL when nobody listens or memory
 * is short), sp_nl_event_send() finishes and multicasts it.
 */
static struct sk_buff *sp_nl_event_new(u8 cmd, void **hdr)
{
	struct sk_buff *msg;

	if (!SP_NL_N_MCGRPS ||
	    !genl_has_listeners(&sp_nl_family, &init_net, SP_NL_MCGRP_EVENTS))
		return NULL;
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return NULL;
	*hdr = genlmsg_put(msg, 0, 0, &sp_nl_family, 0, cmd);
	if (!*hdr) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

static void sp_nl_event_send(struct sk_buff *msg, void *hdr)
{
	genlmsg_end(msg, hdr);
	genlmsg_multicast(&sp_nl_family, msg, 0, SP_NL_MCGRP_EVENTS, GFP_KERNEL);
}

static void sp_nl_config_event(void)
{
	struct nlattr *nest;
	struct sk_buff *msg;
	void *hdr;

	lockdep_assert_held(&sp_config_lock);
	msg = sp_nl_event_new(STRIXPEER_CMD_CONFIG_NTF, &hdr);
	if (!msg)
		return;
	if (nla_put_u32(msg, STRIXPEER_A_EVENT_PID, task_tgid_nr(current)))
		goto out_free;
	nest = nla_nest_start(msg, STRIXPEER_A_EVENT_CONFIG);
	if (!nest || sp_nl_put_config(msg))
		goto out_free;
	nla_nest_end(msg, nest);
	sp_nl_event_send(msg, hdr);
	return;

out_free:
	nlmsg_free(msg);
}

static int sp_nl_config_set_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *attrs[ARRAY_SIZE(strixpeer_config_set_nl_policy)];
	struct nlattr *node_attr;
	int nid, ret;

	/*
	 * Node-wide limits on pinned memory: CAP_SYS_ADMIN, not the
	 * CAP_NET_ADMIN (GENL_ADMIN_PERM) that container runtimes hand to
	 * network plugins and host-network pods. Checked before anything in
	 * the request is looked at (genetlink parsed it with
	 * sp_config_set_loose_policy only): every unprivileged config-set is
	 * EPERM, whatever it asked for.
	 */
	if (!netlink_capable(skb, CAP_SYS_ADMIN)) {
		NL_SET_ERR_MSG(info->extack, "config-set needs CAP_SYS_ADMIN");
		return -EPERM;
	}
	ret = nlmsg_parse(info->nlhdr, GENL_HDRLEN, attrs,
			  ARRAY_SIZE(strixpeer_config_set_nl_policy) - 1,
			  strixpeer_config_set_nl_policy, info->extack);
	if (ret)
		return ret;
	node_attr = attrs[STRIXPEER_A_CONFIG_DEFAULT_NODE];
	if (attrs[STRIXPEER_A_CONFIG_MAX_BUF_SIZE] &&
	    nla_get_u64(attrs[STRIXPEER_A_CONFIG_MAX_BUF_SIZE]) > SP_BUF_SIZE_LIMIT) {
		NL_SET_ERR_MSG_ATTR(info->extack,
				    attrs[STRIXPEER_A_CONFIG_MAX_BUF_SIZE],
				    "max_buf_size above 1 TiB (a buffer's mmap window)");
		return -ERANGE;
	}
	if (!attrs[STRIXPEER_A_CONFIG_MAX_BUF_SIZE] &&
	    !attrs[STRIXPEER_A_CONFIG_MAX_PINNED_BYTES] && !node_attr &&
	    !attrs[STRIXPEER_A_CONFIG_REQUIRE_HUGE]) {
		NL_SET_ERR_MSG(info->extack, "no configuration attribute given");
		return -EINVAL;
	}
	if (node_attr) {
		nid = nla_get_s32(node_attr);
		if (nid != NUMA_NO_NODE &&
		    (nid >= nr_node_ids || !node_state(nid, N_MEMORY))) {
			NL_SET_ERR_MSG_ATTR(info->extack, node_attr,
					    "NUMA node is not online or has no memory");
			return -EINVAL;
		}
	}

	/* Validated as a whole above: from here on, all or nothing changes. */
	mutex_lock(&sp_config_lock);
	if (attrs[STRIXPEER_A_CONFIG_MAX_BUF_SIZE])
		WRITE_ONCE(sp_max_buf_size,
			   nla_get_u64(attrs[STRIXPEER_A_CONFIG_MAX_BUF_SIZE]));
	if (attrs[STRIXPEER_A_CONFIG_MAX_PINNED_BYTES])
		WRITE_ONCE(sp_max_pinned_bytes,
			   nla_get_u64(attrs[STRIXPEER_A_CONFIG_MAX_PINNED_BYTES]));
	if (node_attr)
		WRITE_ONCE(sp_default_node, nid);
	if (attrs[STRIXPEER_A_CONFIG_REQUIRE_HUGE])
		WRITE_ONCE(sp_require_huge,
			   nla_get_u8(attrs[STRIXPEER_A_CONFIG_REQUIRE_HUGE]));
	sp_nl_config_event();
	mutex_unlock(&sp_config_lock);
	return 0;
}

static const struct genl_ops sp_nl_ops[] = {
	{
		.cmd = STRIXPEER_CMD_INFO,
		.doit = sp_nl_info_doit,
	},
	{
		.cmd = STRIXPEER_CMD_BUF_GET,
		.doit = sp_nl_buf_get_doit,
		.dumpit = sp_nl_buf_get_dumpit,
		.policy = strixpeer_buf_get_nl_policy,
		.maxattr = ARRAY_SIZE(strixpeer_buf_get_nl_policy) - 1,
	},
	{
		.cmd = STRIXPEER_CMD_STATS_GET,
		.doit = sp_nl_stats_get_doit,
	},
	{
		.cmd = STRIXPEER_CMD_CONFIG_GET,
		.doit = sp_nl_config_get_doit,
	},
	{
		.cmd = STRIXPEER_CMD_CONFIG_SET,
		.doit = sp_nl_config_set_doit,
		/*
		 * The handler checks CAP_SYS_ADMIN, then parses with
		 * strixpeer_config_set_nl_policy (strict, as genetlink would),
		 * so privilege is decided before any type or range check.
		 */
		.policy = sp_config_set_loose_policy,
		.maxattr = ARRAY_SIZE(sp_config_set_loose_policy) - 1,
	},
};

static struct genl_family sp_nl_family __ro_after_init = {
	.name = STRIXPEER_GENL_NAME,
	.version = STRIXPEER_GENL_VERSION,
	.module = THIS_MODULE,
	.parallel_ops = true,
	.ops = sp_nl_ops,
	.n_ops = ARRAY_SIZE(sp_nl_ops),
	.mcgrps = sp_nl_mcgrps,
	.n_mcgrps = SP_NL_N_MCGRPS,
};

/*
 * The event sink (events.h): one message per event on the "events"
 * group, built only when somebody listens.
 */
static void sp_nl_event(const struct sp_event *ev)
{
	struct nlattr *nest;
	struct sk_buff *msg;
	void *hdr;

	msg = sp_nl_event_new(ev->cmd, &hdr);
	if (!msg)
		return;
	if (ev->has_buf) {
		nest = nla_nest_start(msg, STRIXPEER_A_EVENT_BUF);
		if (!nest || sp_nl_put_buf_snap(msg, &ev->buf))
			goto err;
		nla_nest_end(msg, nest);
	}
	if ((ev->pid && nla_put_u32(msg, STRIXPEER_A_EVENT_PID, ev->pid)) ||
	    (ev->size && nla_put_u64_64bit(msg, STRIXPEER_A_EVENT_SIZE,
					   ev->size, STRIXPEER_A_EVENT_PAD)))
		goto err;
	switch (ev->cmd) {
	case STRIXPEER_CMD_LIMIT_NTF:
		if (nla_put_u32(msg, STRIXPEER_A_EVENT_LIMIT, ev->limit))
			goto err;
		break;
	case STRIXPEER_CMD_PEER_NTF:
		if (nla_put_u32(msg, STRIXPEER_A_EVENT_PEER, ev->peer) ||
		    nla_put_u32(msg, STRIXPEER_A_EVENT_IMPORT, ev->import_id) ||
		    (ev->reason &&
		     nla_put_u32(msg, STRIXPEER_A_EVENT_REASON, ev->reason)))
			goto err;
		break;
	case STRIXPEER_CMD_EXPORT_NTF:
		if (nla_put_u32(msg, STRIXPEER_A_EVENT_EXPORT, ev->export) ||
		    (ev->device && nla_put_string(msg, STRIXPEER_A_EVENT_DEVICE,
						  ev->device)))
			goto err;
		break;
	}
	sp_nl_event_send(msg, hdr);
	return;
err:
	nlmsg_free(msg);
}

/**
 * sp_nl_init() - register the family
 *
 * Return: 0 or genl_register_family()'s error.
 */
int sp_nl_init(void)
{
	int ret = genl_register_family(&sp_nl_family);

	if (!ret)
		sp_events_set_sink(sp_nl_event);
	return ret;
}

/**
 * sp_nl_exit() - unregister the family
 */
void sp_nl_exit(void)
{
	sp_events_set_sink(NULL);
	genl_unregister_family(&sp_nl_family);
}
