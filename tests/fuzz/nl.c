// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: generic netlink, raw (no libnl): a socket, building and
 * sending a message, reading the answers of one sequence number, the
 * "strixpeer" family and its "events" group resolved, and the supervisor's
 * stats-get, config-get and config-set.
 */
#include "fuzz.h"

/* ---- generic netlink, raw --------------------------------------------- */

uint16_t sp_family;		/* 0: not found */
uint32_t sp_events_group;
static uint32_t nl_seq = 1;

/* A generic netlink socket whose receives give up after @ms. */
int nl_socket_t(int ms)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	int one = 1, fd;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	return fd;
}

static int nl_socket(void)
{
	return nl_socket_t(2000);
}

void nl_begin(struct nlmsg *m, uint16_t type, uint16_t flags, uint8_t cmd, uint8_t ver)
{
	struct genlmsghdr *g;

	memset(m->b, 0, NLMSG_HDRLEN + GENL_HDRLEN);
	m->h.nlmsg_type = type;
	m->h.nlmsg_flags = flags;
	m->h.nlmsg_seq = nl_seq++;
	g = (struct genlmsghdr *)(m->b + NLMSG_HDRLEN);
	g->cmd = cmd;
	g->version = ver;
	m->len = NLMSG_HDRLEN + GENL_HDRLEN;
}

/* Appends an attribute; nla_len is what is claimed, len what is copied. */
void nl_put_raw(struct nlmsg *m, uint16_t type, uint16_t nla_len, const void *data, size_t len)
{
	struct nlattr *a;

	if (m->len + NLA_HDRLEN + NLA_ALIGN(len) > sizeof(m->b))
		return;
	a = (struct nlattr *)(m->b + m->len);
	a->nla_type = type;
	a->nla_len = nla_len;
	if (len)
		memcpy(m->b + m->len + NLA_HDRLEN, data, len);
	memset(m->b + m->len + NLA_HDRLEN + len, 0, NLA_ALIGN(len) - len);
	m->len += NLA_HDRLEN + NLA_ALIGN(len);
}

void nl_put(struct nlmsg *m, uint16_t type, const void *data, size_t len)
{
	nl_put_raw(m, type, (uint16_t)(NLA_HDRLEN + len), data, len);
}

int nl_send(int fd, struct nlmsg *m)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	m->h.nlmsg_len = (uint32_t)m->len;
	return (int)sendto(fd, m->b, m->len, 0, (struct sockaddr *)&sa, sizeof(sa));
}

/*
 * Reads the answers to sequence @seq until DONE or an error message;
 * returns 0 or -errno of the NLMSG_ERROR, -ETIMEDOUT/-errno of recv.
 * @max_msgs > 0 stops after that many datagrams (a dump left unread).
 */
int nl_recv(int fd, uint32_t seq, nl_cb cb, void *arg, int max_msgs)
{
	static char buf[65536];
	int n_msgs = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				return e->error;
			}
			if (cb)
				cb(h, arg);
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				return 0;
		}
		if (max_msgs > 0 && ++n_msgs >= max_msgs)
			return 1;
	}
}

static const struct nlattr *nl_attrs(const struct nlmsghdr *h, int *rem)
{
	*rem = (int)h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
	return (const struct nlattr *)((const char *)h + NLMSG_HDRLEN + GENL_HDRLEN);
}

#define NLA_OK_(a, rem) ((rem) >= (int)sizeof(struct nlattr) && (a)->nla_len >= sizeof(struct nlattr) && \
			 (a)->nla_len <= (rem))
#define NLA_NEXT_(a, rem) ((rem) -= NLA_ALIGN((a)->nla_len), \
			   (const struct nlattr *)((const char *)(a) + NLA_ALIGN((a)->nla_len)))
#define NLA_DATA_(a) ((const void *)((const char *)(a) + NLA_HDRLEN))

static void family_cb(const struct nlmsghdr *h, void *arg)
{
	int rem;
	const struct nlattr *a = nl_attrs(h, &rem);

	(void)arg;
	for (; NLA_OK_(a, rem); a = NLA_NEXT_(a, rem)) {
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
			memcpy(&sp_family, NLA_DATA_(a), 2);
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_MCAST_GROUPS) {
			int r1 = a->nla_len - NLA_HDRLEN;
			const struct nlattr *g = NLA_DATA_(a);

			for (; NLA_OK_(g, r1); g = NLA_NEXT_(g, r1)) {
				int r2 = g->nla_len - NLA_HDRLEN;
				const struct nlattr *x = NLA_DATA_(g);
				uint32_t id = 0;
				bool events = false;

				for (; NLA_OK_(x, r2); x = NLA_NEXT_(x, r2)) {
					if (x->nla_type == CTRL_ATTR_MCAST_GRP_ID)
						memcpy(&id, NLA_DATA_(x), 4);
					if (x->nla_type == CTRL_ATTR_MCAST_GRP_NAME &&
					    !strcmp(NLA_DATA_(x), STRIXPEER_MCGRP_EVENTS))
						events = true;
				}
				if (events)
					sp_events_group = id;
			}
		}
	}
}

void nl_resolve(void)
{
	struct nlmsg m;
	int fd = nl_socket();

	if (fd < 0)
		return;
	nl_begin(&m, GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK, CTRL_CMD_GETFAMILY, 1);
	nl_put(&m, CTRL_ATTR_FAMILY_NAME, STRIXPEER_GENL_NAME, sizeof(STRIXPEER_GENL_NAME));
	if (nl_send(fd, &m) > 0)
		nl_recv(fd, m.h.nlmsg_seq, family_cb, NULL, 0);
	close(fd);
}

/* The counters the oracle wants back at zero, from stats-get. */
const char *const stat_name[S_N] = {
	"buffers", "pinned-bytes", "imports", "dmabuf-exports", "dmabuf-attachments",
	"peer-registrations"
};
static const int stat_attr[S_N] = {
	STRIXPEER_A_STATS_BUFFERS, STRIXPEER_A_STATS_PINNED_BYTES, STRIXPEER_A_STATS_IMPORTS,
	STRIXPEER_A_STATS_DMABUF_EXPORTS, STRIXPEER_A_STATS_DMABUF_ATTACHMENTS,
	STRIXPEER_A_STATS_PEER_REGISTRATIONS
};

static void stats_cb(const struct nlmsghdr *h, void *arg)
{
	int64_t *v = arg;
	int rem;
	const struct nlattr *a = nl_attrs(h, &rem);

	for (; NLA_OK_(a, rem); a = NLA_NEXT_(a, rem))
		for (int i = 0; i < S_N; i++)
			if (a->nla_type == stat_attr[i] && a->nla_len == NLA_HDRLEN + 8)
				memcpy(&v[i], NLA_DATA_(a), 8);
}

int stats_get(int64_t v[S_N])
{
	struct nlmsg m;
	int fd = nl_socket(), ret;

	for (int i = 0; i < S_N; i++)
		v[i] = -1;
	if (fd < 0)
		return -errno;
	nl_begin(&m, sp_family, NLM_F_REQUEST, STRIXPEER_CMD_STATS_GET, STRIXPEER_GENL_VERSION);
	ret = nl_send(fd, &m) < 0 ? -errno : nl_recv(fd, m.h.nlmsg_seq, stats_cb, v, 0);
	close(fd);
	return ret;
}

static void config_cb(const struct nlmsghdr *h, void *arg)
{
	struct config *c = arg;
	int rem;
	const struct nlattr *a = nl_attrs(h, &rem);

	c->len = rem > 0 && (size_t)rem <= sizeof(c->raw) ? (size_t)rem : 0;
	memcpy(c->raw, a, c->len);
	for (; NLA_OK_(a, rem); a = NLA_NEXT_(a, rem)) {
		switch (a->nla_type) {
		case STRIXPEER_A_CONFIG_MAX_BUF_SIZE: memcpy(&c->max_buf_size, NLA_DATA_(a), 8); break;
		case STRIXPEER_A_CONFIG_MAX_PINNED_BYTES: memcpy(&c->max_pinned, NLA_DATA_(a), 8); break;
		case STRIXPEER_A_CONFIG_DEFAULT_NODE: memcpy(&c->default_node, NLA_DATA_(a), 4); break;
		case STRIXPEER_A_CONFIG_REQUIRE_HUGE: memcpy(&c->require_huge, NLA_DATA_(a), 1); break;
		}
	}
}

int config_get(struct config *c)
{
	struct nlmsg m;
	int fd = nl_socket(), ret;

	memset(c, 0, sizeof(*c));
	if (fd < 0)
		return -errno;
	nl_begin(&m, sp_family, NLM_F_REQUEST, STRIXPEER_CMD_CONFIG_GET, STRIXPEER_GENL_VERSION);
	ret = nl_send(fd, &m) < 0 ? -errno : nl_recv(fd, m.h.nlmsg_seq, config_cb, c, 0);
	close(fd);
	return ret;
}

int config_set(const struct config *c)
{
	struct nlmsg m;
	int fd = nl_socket(), ret;
	uint32_t node = (uint32_t)c->default_node;

	if (fd < 0)
		return -errno;
	nl_begin(&m, sp_family, NLM_F_REQUEST | NLM_F_ACK, STRIXPEER_CMD_CONFIG_SET,
		 STRIXPEER_GENL_VERSION);
	nl_put(&m, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &c->max_buf_size, 8);
	nl_put(&m, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES, &c->max_pinned, 8);
	nl_put(&m, STRIXPEER_A_CONFIG_DEFAULT_NODE, &node, 4);
	nl_put(&m, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &c->require_huge, 1);
	ret = nl_send(fd, &m) < 0 ? -errno : nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 0);
	close(fd);
	return ret;
}
