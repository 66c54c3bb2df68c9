// SPDX-License-Identifier: MIT
/*
 * The control plane: malformed netlink requests are refused with an
 * extack message and change nothing; permissions; a 10,000-buffer dump
 * that stays consistent while buffers are freed; events in order; config
 * changes that take effect at once.
 */
#include "sp_test.h"

#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <linux/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

#define NOBODY 65534

static struct sp_ctl *ctl_open(void)
{
	struct sp_ctl *ctl;
	int ret = sp_ctl_open(&ctl);

	if (ret == -ENOENT)
		SKIP("%s", sp_errmsg());
	CHECK(ret == 0, "%s", sp_errmsg());
	return ctl;
}

static struct sp_config config_now(void)
{
	struct sp_ctl *ctl = ctl_open();
	struct sp_config cfg = { .size = sizeof(cfg) };

	CHECK(sp_ctl_config_get(ctl, &cfg) == 0, "%s", sp_errmsg());
	sp_ctl_close(ctl);
	return cfg;
}

static bool config_equal(const struct sp_config *a, const struct sp_config *b)
{
	return a->max_buf_size == b->max_buf_size && a->max_pinned_bytes == b->max_pinned_bytes &&
	       a->default_node == b->default_node && a->require_huge == b->require_huge;
}

/* --- raw requests, to send what the library never would --------------- */

struct raw_reply {
	int done;
	int err;
	char ext[200];
};

static int raw_on_error(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
	struct raw_reply *r = arg;
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)((const char *)e - NLMSG_HDRLEN);
	const char *p = (const char *)(e + 1), *end = (const char *)nlh + nlh->nlmsg_len;

	(void)who;
	r->err = -e->error;
	r->done = 1;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		p += e->msg.nlmsg_len - NLMSG_HDRLEN;
	while ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) && p + sizeof(struct nlattr) <= end) {
		const struct nlattr *a = (const struct nlattr *)p;

		if (a->nla_len < sizeof(*a))
			break;
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG)
			snprintf(r->ext, sizeof(r->ext), "%s", (const char *)(a + 1));
		p += NLA_ALIGN(a->nla_len);
	}
	return NL_STOP;
}

static int raw_on_ack(struct nl_msg *msg, void *arg)
{
	struct raw_reply *r = arg;

	(void)msg;
	r->done = 1;
	return NL_STOP;
}

/* Sends @cmd with one attribute @type of @len bytes; returns the errno. */
static struct raw_reply raw_request(uint8_t cmd, int type, const void *data, int len)
{
	struct raw_reply r = { 0 };
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	struct nl_msg *msg = nlmsg_alloc();
	int one = 1, family;

	CHECK(sk && cb && msg && genl_connect(sk) == 0, "netlink socket");
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	family = genl_ctrl_resolve(sk, STRIXPEER_GENL_NAME);
	if (family < 0)
		SKIP("no strixpeer netlink family");
	CHECK(genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, 0, cmd, 1), "put");
	if (type > 0)
		CHECK(nla_put(msg, type, len, data) == 0, "nla_put");
	nl_cb_err(cb, NL_CB_CUSTOM, raw_on_error, &r);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, raw_on_ack, &r);
	CHECK(nl_send_auto(sk, msg) >= 0, "send");
	while (!r.done)
		CHECK(nl_recvmsgs(sk, cb) >= 0 || r.done, "recv");
	nlmsg_free(msg);
	nl_cb_put(cb);
	nl_socket_free(sk);
	return r;
}

#define CHECK_REFUSED(r, e)						\
	do {								\
		CHECK((r).err == (e), "errno %d (%s), wanted %d", (r).err, \
		      strerror((r).err), (e));				\
		CHECK((r).ext[0], "no extack message");			\
		tap_diag("refused: %s", (r).ext);			\
	} while (0)

static void info_reports_module(void)
{
	struct sp_ctl *ctl = ctl_open();
	struct sp_info info = { .size = sizeof(info) };
	char version[32] = "";
	FILE *f = fopen("VERSION", "re");

	CHECK(f && fgets(version, sizeof(version), f), "VERSION file");
	fclose(f);
	version[strcspn(version, "\n")] = '\0';
	CHECK(sp_ctl_info(ctl, &info) == 0, "%s", sp_errmsg());
	CHECK(!strcmp(info.version, version), "version %s, VERSION %s", info.version, version);
	CHECK(info.abi_major == STRIXPEER_ABI_MAJOR, "abi");
	CHECK(info.features & SP_FEAT_BUFFERS, "features");
	CHECK(info.page_sizes & (1ULL << 21), "2 MiB pages");
	CHECK(info.nr_nodes >= 1, "no NUMA node reported");
	if (info.features & SP_FEAT_PEERDIRECT)
		CHECK(!info.peerdirect_reason[0], "PeerDirect active, yet a reason: %s",
		      info.peerdirect_reason);
	else
		CHECK(info.peerdirect_reason[0], "PeerDirect unavailable without a reason");
	for (unsigned int i = 0; i < info.nr_nodes; i++)
		tap_diag("node %d: %llu MiB free, %llu free 2 MiB blocks", info.nodes[i].id,
			 (unsigned long long)(info.nodes[i].free_bytes >> 20),
			 (unsigned long long)info.nodes[i].free_huge);
	sp_ctl_close(ctl);
}

static void malformed_wrong_type(void)
{
	struct sp_config before = config_now(), after;
	uint32_t small = 1 << 20;
	uint16_t tiny = 1;
	struct raw_reply r;

	/* a u64 attribute sent as 4 bytes, a u8 one as 2 */
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &small, 4);
	CHECK_REFUSED(r, EINVAL);
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &tiny, 2);
	CHECK_REFUSED(r, EINVAL);
	r = raw_request(STRIXPEER_CMD_BUF_GET, STRIXPEER_A_BUF_ID, &tiny, 2);
	CHECK_REFUSED(r, EINVAL);
	after = config_now();
	CHECK(config_equal(&before, &after), "config changed");
}

static void malformed_out_of_range(void)
{
	struct sp_config before = config_now(), after;
	uint64_t small = 100, huge = (1ULL << 40) + 4096;
	int32_t node = 5000, bad_node = -2;
	uint8_t two = 2;
	uint32_t zero = 0;
	struct raw_reply r;

	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &small, 8);
	CHECK_REFUSED(r, ERANGE);
	/* past a buffer's 1 TiB mmap window: offsets would reach the next handle */
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &huge, 8);
	CHECK_REFUSED(r, ERANGE);
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_DEFAULT_NODE, &node, 4);
	CHECK_REFUSED(r, ERANGE);
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_DEFAULT_NODE, &bad_node, 4);
	CHECK_REFUSED(r, ERANGE);
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &two, 1);
	CHECK_REFUSED(r, ERANGE);
	r = raw_request(STRIXPEER_CMD_BUF_GET, STRIXPEER_A_BUF_ID, &zero, 4);
	CHECK_REFUSED(r, ERANGE);
	/* in range for the policy, but a node that does not exist */
	node = 1000;
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_DEFAULT_NODE, &node, 4);
	CHECK_REFUSED(r, EINVAL);
	after = config_now();
	CHECK(config_equal(&before, &after), "config changed");
}

static void malformed_missing_attribute(void)
{
	struct raw_reply r;

	r = raw_request(STRIXPEER_CMD_BUF_GET, 0, NULL, 0);
	CHECK_REFUSED(r, EINVAL);
	r = raw_request(STRIXPEER_CMD_CONFIG_SET, 0, NULL, 0);
	CHECK_REFUSED(r, EINVAL);
}

static void malformed_unknown_attribute(void)
{
	struct sp_config before = config_now(), after;
	uint32_t v = 1;
	struct raw_reply r;

	r = raw_request(STRIXPEER_CMD_CONFIG_SET, 50, &v, 4);
	CHECK_REFUSED(r, EINVAL);
	r = raw_request(STRIXPEER_CMD_BUF_GET, STRIXPEER_A_BUF_MAX + 1, &v, 4);
	CHECK_REFUSED(r, EINVAL);
	/* operations without attributes take none */
	r = raw_request(STRIXPEER_CMD_INFO, 1, &v, 4);
	CHECK(r.err == EINVAL, "info with an attribute: errno %d", r.err);
	r = raw_request(STRIXPEER_CMD_MAX + 1, 0, NULL, 0);
	CHECK(r.err == EOPNOTSUPP, "unknown command: errno %d", r.err);
	after = config_now();
	CHECK(config_equal(&before, &after), "config changed");
}

static void drop_privileges(void)
{
	CHECK_OK(setgroups(0, NULL));
	CHECK_OK(setresgid(NOBODY, NOBODY, NOBODY));
	CHECK_OK(setresuid(NOBODY, NOBODY, NOBODY));
}

static void config_set_needs_privilege(void)
{
	struct sp_config before = config_now(), cfg = before, after;
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct sp_ctl *ctl;

		drop_privileges();
		ctl = ctl_open();
		cfg.max_buf_size = 8 * MiB;
		CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_MAX_BUF_SIZE) == -EPERM, "nobody set config");
		CHECK(strstr(sp_errmsg(), "CAP_SYS_ADMIN"), "message: %s", sp_errmsg());
		/* out of the policy's ranges: still EPERM, privilege comes first */
		cfg.max_buf_size = 1;
		CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_MAX_BUF_SIZE) == -EPERM,
		      "nobody, max_buf_size 1: %s", sp_errmsg());
		CHECK(strstr(sp_errmsg(), "CAP_SYS_ADMIN"), "message: %s", sp_errmsg());
		cfg.default_node = 5000;
		CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_DEFAULT_NODE) == -EPERM,
		      "nobody, default_node 5000: %s", sp_errmsg());
		cfg.default_node = 1000;	/* in range, but no such node */
		CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_DEFAULT_NODE) == -EPERM,
		      "nobody, default_node 1000: %s", sp_errmsg());
		/* raw: wrong length, out of range, none at all: all EPERM */
		{
			uint64_t small = 100;
			uint32_t four = 1 << 20;
			uint8_t two = 2;
			struct raw_reply r;

			r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &small, 8);
			CHECK_REFUSED(r, EPERM);
			r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &four, 4);
			CHECK_REFUSED(r, EPERM);
			r = raw_request(STRIXPEER_CMD_CONFIG_SET, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &two, 1);
			CHECK_REFUSED(r, EPERM);
			r = raw_request(STRIXPEER_CMD_CONFIG_SET, 0, NULL, 0);
			CHECK_REFUSED(r, EPERM);
		}
		/* reading is fine */
		CHECK(sp_ctl_config_get(ctl, &cfg) == 0, "%s", sp_errmsg());
		sp_ctl_close(ctl);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status), "child");
	after = config_now();
	CHECK(config_equal(&before, &after), "config changed");
}

static void config_takes_effect(void)
{
	struct sp_config before = config_now(), cfg = before, now;
	struct sp_ctl *ctl = ctl_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *b;
	char val[64];
	FILE *f;
	int ret;

	cfg.max_buf_size = 8 * MiB;
	CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_MAX_BUF_SIZE) == 0, "%s", sp_errmsg());
	ret = sp_buf_alloc(dev, 16 * MiB, SP_NODE_DEFAULT, 0, &b);
	now = config_now();
	f = fopen("/sys/module/strixpeer/parameters/max_buf_size", "re");
	CHECK(f && fgets(val, sizeof(val), f), "param");
	fclose(f);
	CHECK_OK(sp_ctl_config_set(ctl, &before, SP_CONFIG_MAX_BUF_SIZE));
	CHECK(ret == -EFBIG, "16 MiB allocation under an 8 MiB maximum: %d", ret);
	CHECK(strstr(sp_errmsg(), "max_buf_size"), "message: %s", sp_errmsg());
	CHECK(now.max_buf_size == 8 * MiB, "config-get shows %llu", (unsigned long long)now.max_buf_size);
	CHECK(strtoull(val, NULL, 10) == 8 * MiB, "parameter shows %s", val);
	CHECK(sp_buf_alloc(dev, 16 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "after restore: %s", sp_errmsg());
	sp_dev_close(dev);
	sp_ctl_close(ctl);
	CHECK_NOTHING_PINNED();
}

struct collect {
	uint32_t *ids;
	size_t n, cap;
	uint64_t bytes;
	uint32_t pid;
	bool others;
};

static int collect_buf(const struct sp_buf_entry *e, void *arg)
{
	struct collect *c = arg;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1024;
		c->ids = realloc(c->ids, c->cap * sizeof(*c->ids));
		CHECK(c->ids, "realloc");
	}
	c->ids[c->n++] = e->id;
	c->bytes += e->bytes;
	if (c->pid && e->pid != c->pid)
		c->others = true;
	return 0;
}

static void dump_unprivileged_sees_own(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *mine;
	int sv[2], status;
	pid_t pid;
	char c;

	CHECK(sp_buf_alloc(dev, MiB, SP_NODE_DEFAULT, 0, &mine) == 0, "%s", sp_errmsg());
	CHECK_OK(pipe(sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct sp_dev *d2 = sp_test_dev();
		struct collect col = { .pid = (uint32_t)getpid() };
		struct sp_buf *b;
		struct sp_ctl *ctl;
		struct sp_buf_entry e = { .size = sizeof(e) };

		drop_privileges();
		CHECK(sp_buf_alloc(d2, 2 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "%s", sp_errmsg());
		ctl = ctl_open();
		col.pid = 0;
		CHECK(sp_ctl_bufs(ctl, 0, collect_buf, &col) == 0, "%s", sp_errmsg());
		CHECK(col.n == 1 && col.bytes == 2 * MiB, "nobody sees %zu buffers, %llu bytes",
		      col.n, (unsigned long long)col.bytes);
		/* and cannot get root's buffer by id */
		CHECK(sp_ctl_buf_get(ctl, col.ids[0] - 1, &e) == -ENOENT, "root's buffer visible");
		CHECK(write(sv[1], "d", 1) == 1, "done");
		pause();	/* keep the buffer until the parent has looked */
		sp_ctl_close(ctl);
		_exit(0);
	}
	{
		struct sp_ctl *ctl = ctl_open();
		struct collect all = { 0 };

		CHECK(read(sv[0], &c, 1) == 1, "child");
		CHECK(sp_ctl_bufs(ctl, 0, collect_buf, &all) == 0, "%s", sp_errmsg());
		CHECK(all.n == 2 && all.bytes == 3 * MiB, "root sees %zu buffers", all.n);
		all.n = 0;
		all.bytes = 0;
		CHECK(sp_ctl_bufs(ctl, (uint32_t)pid, collect_buf, &all) == 0, "%s", sp_errmsg());
		CHECK(all.n == 1 && all.bytes == 2 * MiB, "pid filter: %zu buffers", all.n);
		sp_ctl_close(ctl);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		free(all.ids);
	}
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

struct freer {
	int fd;
	uint32_t first, n;
};

static void *free_evens(void *arg)
{
	struct freer *f = arg;

	for (uint32_t h = f->first; h < f->first + f->n; h += 2)
		sp_raw_free(f->fd, h);
	return NULL;
}

static bool contains(const uint32_t *ids, size_t n, uint32_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ids[mid] == id)
			return true;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static int entry_size_cb(const struct sp_buf_entry *e, void *arg)
{
	*(uint32_t *)arg = e->size;
	return 1;
}

/*
 * The extensible structs: a zeroed struct is the first layout, a bigger
 * (future) one is filled up to the library's size and no further, and one
 * stats-get request has every counter, equal to sysfs and to the superseded
 * calls'.
 */
static void structs_sized_one_request(void)
{
	struct {
		struct sp_counters c;
		uint64_t future[4];
	} big;
	struct sp_counters zero = { 0 };
	struct sp_peer_counters pc;
	struct sp_config cfg = { .size = sizeof(cfg) };
	struct sp_ctl *ctl = ctl_open();
	struct sp_stats st;
	uint32_t esize = 0;
	uint64_t param = ~0ULL;
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	FILE *f;

	CHECK_OK(sp_raw_alloc(fd, 2 << 20, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK(sp_ctl_stats(ctl, &zero) == 0, "%s", sp_errmsg());
	CHECK(zero.size == SP_COUNTERS_SIZE_VER0, "size 0 filled %u bytes", zero.size);
	memset(&big, 0xa5, sizeof(big));
	big.c.size = sizeof(big);
	CHECK(sp_ctl_stats(ctl, &big.c) == 0, "%s", sp_errmsg());
	CHECK(big.c.size == sizeof(big.c), "filled %u bytes of %zu", big.c.size, sizeof(big));
	for (size_t i = 0; i < 4; i++)
		CHECK(big.future[i] == 0xa5a5a5a5a5a5a5a5ULL, "wrote past its size: %zu", i);
	CHECK(SP_HAS(struct sp_counters, &big.c, peer_pinned_bytes_user), "SP_HAS");
	CHECK(sp_stats_read(&st) == 0, "%s", sp_errmsg());
	CHECK(big.c.buffers == st.buffers && big.c.pinned_bytes == st.pinned_bytes &&
	      big.c.allocs == st.allocs && big.c.buffers >= 1,
	      "netlink buffers %llu pinned %llu allocs %llu, sysfs %llu %llu %llu",
	      (unsigned long long)big.c.buffers, (unsigned long long)big.c.pinned_bytes,
	      (unsigned long long)big.c.allocs, (unsigned long long)st.buffers,
	      (unsigned long long)st.pinned_bytes, (unsigned long long)st.allocs);
	CHECK(sp_ctl_peer_stats(ctl, &pc) == 0, "%s", sp_errmsg());
	CHECK(pc.acquires == big.c.peer_acquires && pc.maps == big.c.peer_maps &&
	      pc.imports == big.c.imports && pc.registrations == big.c.peer_registrations,
	      "peer counters differ between sp_ctl_stats and sp_ctl_peer_stats");
	CHECK(big.c.peer_pinned_bytes_user <= big.c.peer_pinned_bytes, "user %llu > node %llu",
	      (unsigned long long)big.c.peer_pinned_bytes_user,
	      (unsigned long long)big.c.peer_pinned_bytes);
	CHECK(sp_ctl_config_get(ctl, &cfg) == 0 && cfg.size == sizeof(cfg), "%s", sp_errmsg());
	f = fopen("/sys/module/strixpeer/parameters/max_peer_pinned_per_user", "re");
	CHECK(f && fscanf(f, "%" SCNu64, &param) == 1, "max_peer_pinned_per_user parameter");
	fclose(f);
	CHECK(cfg.max_peer_pinned_per_user == param, "config %llu, parameter %llu",
	      (unsigned long long)cfg.max_peer_pinned_per_user, (unsigned long long)param);
	CHECK(sp_ctl_bufs(ctl, 0, entry_size_cb, &esize) == 1, "%s", sp_errmsg());
	CHECK(esize == sizeof(struct sp_buf_entry), "entry size %u", esize);
	close(fd);
	sp_ctl_close(ctl);
	CHECK_NOTHING_PINNED();
}

/* 10,000 buffers; 2,500 on a debug kernel (still dozens of dump messages) */
static void dump_10000_consistent(void)
{
	const uint32_t N = tap_debug_kernel() ? 2500 : 10000;
	int fd = sp_test_open();
	struct sp_ctl *ctl = ctl_open();
	struct collect all = { 0 }, during = { 0 }, after = { 0 };
	struct freer fr = { .fd = fd, .n = N };
	struct sp_counters c = { .size = sizeof(c) };
	pthread_t t;

	for (uint32_t i = 0; i < N; i++) {
		struct strixpeer_buf_alloc a;

		CHECK_OK(sp_raw_alloc(fd, 4096, STRIXPEER_NODE_DEFAULT, 0, &a));
		if (i == 0)
			fr.first = a.handle;
	}
	CHECK(sp_ctl_bufs(ctl, 0, collect_buf, &all) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_stats(ctl, &c) == 0, "%s", sp_errmsg());
	CHECK(all.n == N && c.buffers == N, "dump %zu, stats %llu, wanted %d", all.n,
	      (unsigned long long)c.buffers, N);
	CHECK(all.bytes == c.pinned_bytes, "dump bytes %llu, stats %llu",
	      (unsigned long long)all.bytes, (unsigned long long)c.pinned_bytes);
	for (size_t i = 1; i < all.n; i++)
		CHECK(all.ids[i] > all.ids[i - 1], "ids not unique/ascending at %zu", i);

	/* every other buffer freed while dumping */
	CHECK_OK(pthread_create(&t, NULL, free_evens, &fr));
	CHECK(sp_ctl_bufs(ctl, 0, collect_buf, &during) == 0, "%s", sp_errmsg());
	pthread_join(t, NULL);
	for (size_t i = 1; i < during.n; i++)
		CHECK(during.ids[i] > during.ids[i - 1], "concurrent dump: duplicate at %zu", i);
	for (size_t i = 1; i < N; i += 2)
		CHECK(contains(during.ids, during.n, all.ids[i]), "survivor %u missing", all.ids[i]);
	tap_diag("dump while freeing saw %zu of %d buffers", during.n, N);

	CHECK(sp_ctl_bufs(ctl, 0, collect_buf, &after) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_stats(ctl, &c) == 0, "%s", sp_errmsg());
	CHECK(after.n == N / 2 && c.buffers == N / 2 && after.bytes == c.pinned_bytes,
	      "after: dump %zu, stats %llu", after.n, (unsigned long long)c.buffers);
	free(all.ids);
	free(during.ids);
	free(after.ids);
	close(fd);
	sp_ctl_close(ctl);
	CHECK_NOTHING_PINNED();
}

/* The monitor child writes one line per event into a pipe. */
static int event_to_pipe(const struct sp_event *ev, void *arg)
{
	int fd = *(int *)arg;
	char line[128];
	int n;

	/* a wrong size shows as a line the reader does not expect */
	if (ev->size != sizeof(*ev) || ((ev->type == SP_EVENT_BUF_CREATED ||
	    ev->type == SP_EVENT_BUF_FREED) && (!ev->buf || ev->buf->size != sizeof(*ev->buf))) ||
	    (ev->type == SP_EVENT_CONFIG && (!ev->config || ev->config->size != sizeof(*ev->config))))
		ev = NULL;
	if (!ev)
		n = snprintf(line, sizeof(line), "bad event struct sizes\n");
	else switch (ev->type) {
	case SP_EVENT_BUF_CREATED:
	case SP_EVENT_BUF_FREED:
		n = snprintf(line, sizeof(line), "%s %u %u\n",
			     ev->type == SP_EVENT_BUF_CREATED ? "created" : "freed",
			     ev->buf->id, (unsigned int)(ev->buf->bytes >> 20));
		break;
	case SP_EVENT_LIMIT:
		n = snprintf(line, sizeof(line), "limit %d %u\n", ev->limit, (unsigned int)(ev->bytes >> 20));
		break;
	default:
		n = snprintf(line, sizeof(line), "config %llu\n",
			     (unsigned long long)ev->config->max_buf_size);
	}
	return write(fd, line, (size_t)n) == n ? 0 : 1;
}

static char *read_line(FILE *f, char *buf, size_t len)
{
	CHECK(fgets(buf, (int)len, f), "monitor stopped");
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static void events_in_order(void)
{
	struct sp_config before = config_now(), cfg = before;
	struct sp_ctl *ctl = ctl_open();
	struct sp_dev *dev = sp_test_dev();
	int pfd[2], status;
	char line[128], want[128];
	struct sp_buf *b;
	struct sp_buf_entry e = { .size = sizeof(e) };
	uint32_t id = 0;
	pid_t pid;
	FILE *in;

	CHECK_OK(pipe(pfd));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct sp_ctl *mon = ctl_open();

		close(pfd[0]);
		sp_ctl_monitor(mon, event_to_pipe, &pfd[1]);
		_exit(0);
	}
	close(pfd[1]);
	in = fdopen(pfd[0], "r");
	/* announce config changes until the monitor shows it is listening */
	for (int i = 0;; i++) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };

		CHECK(i < 100, "monitor never received an event");
		CHECK_OK(sp_ctl_config_set(ctl, &before, SP_CONFIG_MAX_BUF_SIZE));
		if (poll(&p, 1, 200) == 1)
			break;
	}
	CHECK_OK(sp_ctl_config_set(ctl, &before, SP_CONFIG_MAX_BUF_SIZE)); /* marker */

	CHECK(sp_buf_alloc(dev, 3 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_bufs(ctl, (uint32_t)getpid(), collect_buf, &(struct collect){ 0 }) == 0, "dump");
	CHECK_OK(sp_buf_free(b));
	cfg.max_buf_size = 4 * MiB;
	CHECK_OK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_MAX_BUF_SIZE));
	CHECK(sp_buf_alloc(dev, 5 * MiB, SP_NODE_DEFAULT, 0, &b) == -EFBIG, "over max_buf_size");
	cfg.max_pinned_bytes = 2 * MiB;
	CHECK_OK(sp_ctl_config_set(ctl, &before, SP_CONFIG_MAX_BUF_SIZE));
	CHECK_OK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_MAX_PINNED_BYTES));
	CHECK(sp_buf_alloc(dev, 3 * MiB, SP_NODE_DEFAULT, 0, &b) == -ENOSPC, "over max_pinned_bytes");
	CHECK(strstr(sp_errmsg(), "max_pinned_bytes"), "message: %s", sp_errmsg());
	CHECK_OK(sp_ctl_config_set(ctl, &before, SP_CONFIG_MAX_PINNED_BYTES));

	/* skip the readiness pings and the marker: all config events */
	do {
		read_line(in, line, sizeof(line));
	} while (!strncmp(line, "config", 6));
	CHECK(sscanf(line, "created %u 3", &id) == 1, "first event: \"%s\"", line);
	CHECK(sp_ctl_buf_get(ctl, id, &e) == -ENOENT, "freed buffer still visible");
	snprintf(want, sizeof(want), "freed %u 3", id);
	CHECK(!strcmp(read_line(in, line, sizeof(line)), want), "\"%s\", wanted \"%s\"", line, want);
	snprintf(want, sizeof(want), "config %llu", (unsigned long long)(4 * MiB));
	CHECK(!strcmp(read_line(in, line, sizeof(line)), want), "\"%s\", wanted \"%s\"", line, want);
	snprintf(want, sizeof(want), "limit %d 5", SP_LIMIT_MAX_BUF_SIZE);
	CHECK(!strcmp(read_line(in, line, sizeof(line)), want), "\"%s\", wanted \"%s\"", line, want);
	read_line(in, line, sizeof(line));	/* max_buf_size restored */
	CHECK(!strncmp(line, "config", 6), "\"%s\"", line);
	read_line(in, line, sizeof(line));	/* max_pinned_bytes set */
	CHECK(!strncmp(line, "config", 6), "\"%s\"", line);
	snprintf(want, sizeof(want), "limit %d 3", SP_LIMIT_MAX_PINNED_BYTES);
	CHECK(!strcmp(read_line(in, line, sizeof(line)), want), "\"%s\", wanted \"%s\"", line, want);

	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	fclose(in);
	sp_dev_close(dev);
	sp_ctl_close(ctl);
	CHECK_NOTHING_PINNED();
}

static const struct tap_case cases[] = {
	TAP_CASE(info_reports_module),
	TAP_CASE(malformed_wrong_type),
	TAP_CASE(malformed_out_of_range),
	TAP_CASE(malformed_missing_attribute),
	TAP_CASE(malformed_unknown_attribute),
	TAP_CASE(config_set_needs_privilege),
	TAP_CASE(config_takes_effect),
	TAP_CASE(dump_unprivileged_sees_own),
	TAP_CASE(structs_sized_one_request),
	TAP_CASE_T(dump_10000_consistent, 300),
	TAP_CASE(events_in_order),
};

TAP_MAIN(cases)
