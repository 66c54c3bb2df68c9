// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the netlink op. Every command of the "strixpeer" family,
 * do and dump, with valid and garbage attributes and lying lengths,
 * config-set attempts, joining "events", dumps left unread or abandoned.
 */
#include "fuzz.h"

/* ---- netlink ----------------------------------------------------------------- */

static void add_random_attrs(struct wstate *w, struct nlmsg *m, int depth)
{
	int n = (int)below(&w->r, 6);

	for (int i = 0; i < n; i++) {
		uint16_t type = (uint16_t)(one_in(&w->r, 3) ? rnd(&w->r) : below(&w->r, 24));
		char data[64];
		size_t len = (size_t)below(&w->r, sizeof(data));

		for (size_t k = 0; k < len; k++)
			data[k] = (char)rnd(&w->r);
		if (one_in(&w->r, 8))
			type |= NLA_F_NESTED;
		switch (below(&w->r, 8)) {
		case 0:	/* nested garbage */
			if (depth < 3) {
				size_t start = m->len;
				struct nlattr *a;

				nl_put(m, type | NLA_F_NESTED, NULL, 0);
				add_random_attrs(w, m, depth + 1);
				a = (struct nlattr *)(m->b + start);
				a->nla_len = (uint16_t)(m->len - start);
				if (one_in(&w->r, 4))
					a->nla_len = (uint16_t)(a->nla_len + below(&w->r, 64));
			}
			break;
		case 1:	/* a length that lies */
			nl_put_raw(m, type, (uint16_t)below(&w->r, 200), data, len);
			break;
		case 2:	/* a well-formed value of each common width */
		case 3: {
			static const size_t widths[] = { 0, 1, 2, 4, 8, 3, 16 };

			nl_put(m, (uint16_t)below(&w->r, 24), data, widths[below(&w->r, 7)]);
			break;
		}
		default:
			nl_put(m, type, data, len);
			break;
		}
	}
}

void op_netlink(struct wstate *w)
{
	struct nlmsg m;
	int fd;
	uint8_t cmd;
	uint16_t flags = NLM_F_REQUEST;

	count(C_NETLINK);
	if (!sp_family)
		return;
	if (w->nl < 0)
		w->nl = nl_socket_t(100);
	fd = w->nl;
	if (fd < 0)
		return;
	switch (below(&w->r, 12)) {
	case 0: {	/* join (or leave) "events", read what is there */
		int grp = (int)sp_events_group, ret;
		bool leave;

		if (w->nl_ev < 0)
			w->nl_ev = nl_socket_t(100);
		if (w->nl_ev < 0)
			return;
		leave = one_in(&w->r, 4);
		ret = setsockopt(w->nl_ev, SOL_NETLINK, leave ? NETLINK_DROP_MEMBERSHIP :
				 NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp));
		/* leaving needs no privilege: only joins count */
		if (!w->priv && !leave)
			__atomic_add_fetch(ret == 0 ? &sh->events_joined : &sh->events_refused, 1,
					   __ATOMIC_RELAXED);
		for (int i = 0; i < 32; i++) {
			char b[8192];

			if (recv(w->nl_ev, b, sizeof(b), MSG_DONTWAIT) <= 0)
				break;
		}
		return;
	}
	case 1: {	/* config-set: valid values as root (restored later), anything as nobody */
		struct config c;
		uint64_t v64 = pick_size(w);
		uint32_t v32 = pick_node(w);
		uint8_t v8 = (uint8_t)below(&w->r, 3);
		int ret;

		nl_begin(&m, sp_family, NLM_F_REQUEST | NLM_F_ACK, STRIXPEER_CMD_CONFIG_SET,
			 STRIXPEER_GENL_VERSION);
		if (w->priv && have_cfg && one_in(&w->r, 3)) {
			config_set(&base_cfg);	/* back to the start's */
			return;
		}
		if (w->priv && config_get(&c) == 0 && one_in(&w->r, 2)) {
			/* a sane change that keeps the phase able to work */
			switch (below(&w->r, 4)) {
			case 0: v64 = (below(&w->r, 64) + 1) * MiB; nl_put(&m, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &v64, 8); break;
			case 1: v64 = below(&w->r, 2) * (below(&w->r, 256) + 1) * MiB; nl_put(&m, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES, &v64, 8); break;
			case 2: v32 = (uint32_t)below(&w->r, 3) - 1; nl_put(&m, STRIXPEER_A_CONFIG_DEFAULT_NODE, &v32, 4); break;
			default: v8 = (uint8_t)below(&w->r, 2); nl_put(&m, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &v8, 1); break;
			}
		} else {
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &v64, one_in(&w->r, 4) ? 4 : 8);
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES, &v64, 8);
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_DEFAULT_NODE, &v32, one_in(&w->r, 4) ? 8 : 4);
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &v8, 1);
			if (one_in(&w->r, 3))
				add_random_attrs(w, &m, 0);
		}
		if (nl_send(fd, &m) < 0)
			return;
		ret = nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 0);
		if (!w->priv && ret == 0)
			__atomic_add_fetch(&sh->cfgset_accepted, 1, __ATOMIC_RELAXED);
		return;
	}
	case 2:
	case 3: {	/* a dump: read all, some, or nothing (then abandon the socket) */
		int mode = (int)below(&w->r, 3);
		uint32_t pid = one_in(&w->r, 2) ? (uint32_t)getpid() : (uint32_t)below(&w->r, 4);

		nl_begin(&m, sp_family, NLM_F_REQUEST | NLM_F_DUMP, STRIXPEER_CMD_BUF_GET,
			 STRIXPEER_GENL_VERSION);
		if (one_in(&w->r, 2))
			nl_put(&m, STRIXPEER_A_BUF_PID, &pid, 4);
		if (one_in(&w->r, 4))
			add_random_attrs(w, &m, 0);
		if (nl_send(fd, &m) < 0)
			return;
		if (mode == 0) {
			nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 0);
		} else {
			if (mode == 1)
				nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 1);
			close(fd);	/* a dump interrupted */
			w->nl = -1;
		}
		return;
	}
	default:
		break;
	}
	/* any command, do or dump, valid or garbage attributes, version, header */
	cmd = (uint8_t)(one_in(&w->r, 4) ? rnd(&w->r) : below(&w->r, STRIXPEER_CMD_MAX + 2));
	if (one_in(&w->r, 3))
		flags |= NLM_F_DUMP;
	if (one_in(&w->r, 2))
		flags |= NLM_F_ACK;
	if (one_in(&w->r, 10))
		flags = (uint16_t)rnd(&w->r) | NLM_F_REQUEST;
	nl_begin(&m, one_in(&w->r, 20) ? (uint16_t)rnd(&w->r) : sp_family, flags, cmd,
		 one_in(&w->r, 8) ? (uint8_t)rnd(&w->r) : STRIXPEER_GENL_VERSION);
	if (cmd == STRIXPEER_CMD_BUF_GET && !(flags & NLM_F_DUMP) && one_in(&w->r, 2)) {
		uint32_t id = (uint32_t)below(&w->r, 64);

		nl_put(&m, STRIXPEER_A_BUF_ID, &id, 4);
	}
	if (one_in(&w->r, 2))
		add_random_attrs(w, &m, 0);
	if (one_in(&w->r, 16)) {	/* the header lies about the length */
		m.h.nlmsg_len = (uint32_t)below(&w->r, m.len + 64);
		sendto(fd, m.b, m.len, 0, NULL, 0);
	} else if (nl_send(fd, &m) < 0) {
		return;
	}
	if (one_in(&w->r, 6)) {	/* leave the answers unread */
		close(fd);
		w->nl = -1;
		return;
	}
	nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 8);
}
