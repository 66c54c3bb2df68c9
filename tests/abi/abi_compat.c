// SPDX-License-Identifier: MIT
/*
 * A program built against the 1.0 <strixpeer.h> (tests/abi/1.0/, the header
 * before its control-plane structs had a size first) and linked against the
 * 1.0 library (a stub made from its version script), run against the
 * current libstrixpeer.so.1: every control-plane call that changed reaches
 * compat.c's name@STRIXPEER_1.0, fills the 1.0 layout with the values the
 * module's sysfs counters and the device show, and writes nothing past it.
 *
 * In the guest (the module loaded): abi_compat. On the host, without the
 * module: abi_compat --host checks only what needs none (the versioned
 * symbols resolve, sp_ctl_open() says the module is absent).
 */
#include "tap.h"
#include <poll.h>
#include <stdint.h>

#include <strixpeer.h>

#define MiB (1024ULL * 1024)
#define CANARY 0x5a

/* A struct with canary bytes after it: what the library wrote past it. */
#define GUARDED(type) struct { type v; unsigned char guard[512]; }

static void guard_check(const unsigned char *g, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(g[i] == CANARY, "%s: byte %zu past the 1.0 struct written", what, i);
}

static struct sp_ctl *ctl_open(void)
{
	struct sp_ctl *ctl;

	CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
	return ctl;
}

static void info_1_0(void)
{
	GUARDED(struct sp_info) g;
	struct sp_version ver;
	struct sp_dev *dev;
	struct sp_ctl *ctl = ctl_open();

	memset(&g, CANARY, sizeof(g));
	CHECK(sp_ctl_info(ctl, &g.v) == 0, "%s", sp_errmsg());
	guard_check(g.guard, sizeof(g.guard), "sp_ctl_info");
	CHECK(sp_dev_open(NULL, &dev) == 0, "%s", sp_errmsg());
	CHECK(sp_dev_version(dev, &ver) == 0, "version");
	CHECK(g.v.abi_major == ver.abi_major && g.v.abi_minor == ver.abi_minor,
	      "abi %u.%u, device says %u.%u", g.v.abi_major, g.v.abi_minor, ver.abi_major,
	      ver.abi_minor);
	CHECK(g.v.features == ver.features, "features %#llx, device says %#llx",
	      (unsigned long long)g.v.features, (unsigned long long)ver.features);
	CHECK(g.v.version[0] >= '0' && g.v.version[0] <= '9' &&
	      memchr(g.v.version, '\0', sizeof(g.v.version)), "version \"%.32s\"", g.v.version);
	CHECK(g.v.nr_nodes >= 1 && g.v.nr_nodes <= SP_MAX_NODES && g.v.nodes[0].free_bytes,
	      "%u nodes, node 0 free %llu", g.v.nr_nodes,
	      (unsigned long long)g.v.nodes[0].free_bytes);
	sp_dev_close(dev);
	sp_ctl_close(ctl);
}

static void stats_1_0(void)
{
	GUARDED(struct sp_counters) g;
	struct sp_stats st;
	struct sp_dev *dev;
	struct sp_buf *buf;
	struct sp_ctl *ctl = ctl_open();

	CHECK(sp_dev_open(NULL, &dev) == 0, "%s", sp_errmsg());
	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, SP_ALLOC_ALLOW_SMALL, &buf) == 0,
	      "%s", sp_errmsg());
	memset(&g, CANARY, sizeof(g));
	CHECK(sp_ctl_stats(ctl, &g.v) == 0, "%s", sp_errmsg());
	guard_check(g.guard, sizeof(g.guard), "sp_ctl_stats");
	CHECK(sp_stats_read(&st) == 0, "%s", sp_errmsg());
	/* nothing else allocates meanwhile: the suite runs one program at a time */
	CHECK(g.v.buffers == st.buffers && g.v.pinned_bytes == st.pinned_bytes &&
	      g.v.allocs == st.allocs && g.v.frees == st.frees && g.v.mmaps == st.mmaps &&
	      g.v.fail_nomem == st.fail_nomem && g.v.fail_memlock == st.fail_memlock,
	      "netlink buffers %llu pinned %llu allocs %llu frees %llu, sysfs %llu %llu %llu %llu",
	      (unsigned long long)g.v.buffers, (unsigned long long)g.v.pinned_bytes,
	      (unsigned long long)g.v.allocs, (unsigned long long)g.v.frees,
	      (unsigned long long)st.buffers, (unsigned long long)st.pinned_bytes,
	      (unsigned long long)st.allocs, (unsigned long long)st.frees);
	CHECK(g.v.buffers >= 1 && g.v.pinned_bytes >= 2 * MiB, "buffers %llu pinned %llu",
	      (unsigned long long)g.v.buffers, (unsigned long long)g.v.pinned_bytes);
	sp_buf_free(buf);
	sp_dev_close(dev);
	sp_ctl_close(ctl);
}

struct find {
	uint32_t pid, id;
	uint64_t size;
	int seen;
};

static int find_cb(const struct sp_buf_entry *e, void *arg)
{
	struct find *f = arg;

	if (e->pid == f->pid) {
		f->id = e->id;
		f->size = e->size;
		f->seen++;
	}
	return 0;
}

static void bufs_1_0(void)
{
	GUARDED(struct sp_buf_entry) g;
	struct find f = { .pid = (uint32_t)getpid() };
	struct sp_buf_info bi;
	struct sp_dev *dev;
	struct sp_buf *buf;
	struct sp_ctl *ctl = ctl_open();

	CHECK(sp_dev_open(NULL, &dev) == 0, "%s", sp_errmsg());
	CHECK(sp_buf_alloc(dev, 3 * MiB, SP_NODE_DEFAULT, SP_ALLOC_ALLOW_SMALL, &buf) == 0,
	      "%s", sp_errmsg());
	CHECK(sp_buf_query(buf, &bi) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_bufs(ctl, f.pid, find_cb, &f) == 0, "%s", sp_errmsg());
	CHECK(f.seen == 1 && f.size == bi.size, "listed %d, size %llu (buffer %llu)", f.seen,
	      (unsigned long long)f.size, (unsigned long long)bi.size);
	memset(&g, CANARY, sizeof(g));
	CHECK(sp_ctl_buf_get(ctl, f.id, &g.v) == 0, "%s", sp_errmsg());
	guard_check(g.guard, sizeof(g.guard), "sp_ctl_buf_get");
	CHECK(g.v.id == f.id && g.v.pid == f.pid && g.v.size == bi.size &&
	      g.v.node == (uint32_t)bi.node && g.v.page_size == bi.page_size &&
	      g.v.chunks == bi.nr_chunks && g.v.handle == bi.handle,
	      "id %u pid %u size %llu node %u page %llu chunks %u handle %u", g.v.id, g.v.pid,
	      (unsigned long long)g.v.size, g.v.node, (unsigned long long)g.v.page_size,
	      g.v.chunks, g.v.handle);
	sp_buf_free(buf);
	sp_dev_close(dev);
	sp_ctl_close(ctl);
}

static void config_1_0(void)
{
	GUARDED(struct sp_config) g, again;
	struct sp_ctl *ctl = ctl_open();

	memset(&g, CANARY, sizeof(g));
	CHECK(sp_ctl_config_get(ctl, &g.v) == 0, "%s", sp_errmsg());
	guard_check(g.guard, sizeof(g.guard), "sp_ctl_config_get");
	CHECK(g.v.max_buf_size >= 4096 && (g.v.require_huge == 0 || g.v.require_huge == 1) &&
	      g.v.default_node >= -1, "max_buf_size %llu require_huge %d default_node %d",
	      (unsigned long long)g.v.max_buf_size, g.v.require_huge, g.v.default_node);
	/* the same values back: applied through the 1.0 layout, nothing changes */
	CHECK(sp_ctl_config_set(ctl, &g.v, SP_CONFIG_MAX_BUF_SIZE | SP_CONFIG_REQUIRE_HUGE) == 0,
	      "%s", sp_errmsg());
	memset(&again, CANARY, sizeof(again));
	CHECK(sp_ctl_config_get(ctl, &again.v) == 0, "%s", sp_errmsg());
	CHECK(!memcmp(&again.v, &g.v, sizeof(g.v)), "config changed by setting it to itself");
	sp_ctl_close(ctl);
}

/* The monitor child's findings, through a pipe. */
struct seen {
	char what;		/* 'c' config event, 'b' our buffer's creation */
	uint64_t size;
	uint64_t max_buf_size;
};

static int pfd[2];
static pid_t parent;

static int monitor_cb(const struct sp_event *ev, void *arg)
{
	struct seen s = { 0 };

	(void)arg;
	if (ev->type == SP_EVENT_CONFIG) {
		s.what = 'c';
		s.max_buf_size = ev->config.max_buf_size;
	} else if (ev->type == SP_EVENT_BUF_CREATED && ev->buf.pid == (uint32_t)parent) {
		s.what = 'b';
		s.size = ev->buf.size;
	} else {
		return 0;
	}
	if (write(pfd[1], &s, sizeof(s)) != sizeof(s))
		return -1;
	return s.what == 'b';
}

static int read_seen(struct seen *s, int ms)
{
	struct pollfd p = { .fd = pfd[0], .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return -1;
	return read(pfd[0], s, sizeof(*s)) == sizeof(*s) ? 0 : -1;
}

static void monitor_1_0(void)
{
	struct sp_config cfg;
	struct sp_dev *dev;
	struct sp_buf *buf;
	struct seen s = { 0 };
	struct sp_ctl *ctl = ctl_open(), *mon = ctl_open();
	int joined = 0, status = 0;
	pid_t pid;

	CHECK(pipe(pfd) == 0, "pipe");
	parent = getpid();
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0)
		_exit(sp_ctl_monitor(mon, monitor_cb, NULL) == 1 ? 0 : 1);
	sp_ctl_close(mon);
	CHECK(sp_ctl_config_get(ctl, &cfg) == 0, "%s", sp_errmsg());
	/* config events until the child shows it has joined: at most 10 s */
	for (int i = 0; i < 100 && !joined; i++) {
		CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_MAX_BUF_SIZE) == 0, "%s", sp_errmsg());
		joined = read_seen(&s, 100) == 0 && s.what == 'c';
	}
	if (!joined)
		kill(pid, SIGKILL);
	CHECK(joined, "the monitor saw no config event in 10 s");
	CHECK(s.max_buf_size == cfg.max_buf_size, "event max_buf_size %llu, config %llu",
	      (unsigned long long)s.max_buf_size, (unsigned long long)cfg.max_buf_size);
	CHECK(sp_dev_open(NULL, &dev) == 0, "%s", sp_errmsg());
	CHECK(sp_buf_alloc(dev, 5 * MiB, SP_NODE_DEFAULT, SP_ALLOC_ALLOW_SMALL, &buf) == 0,
	      "%s", sp_errmsg());
	do {
		if (read_seen(&s, 10000)) {
			kill(pid, SIGKILL);
			CHECK(0, "no buffer event in 10 s");
		}
	} while (s.what != 'b');
	CHECK(s.size == sp_buf_size(buf), "event size %llu, buffer %zu",
	      (unsigned long long)s.size, sp_buf_size(buf));
	/* the child returns from sp_ctl_monitor() after that event: 10 s */
	for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) != pid; i++)
		poll(NULL, 0, 100);
	if (kill(pid, 0) == 0) {
		kill(pid, SIGKILL);
		CHECK(0, "the monitor child did not exit 10 s after its event");
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "monitor child status %#x", status);
	sp_buf_free(buf);
	sp_dev_close(dev);
	sp_ctl_close(ctl);
	close(pfd[0]);
	close(pfd[1]);
}

/* Unchanged 1.0 calls the header still declares. */
static void peer_calls_1_0(void)
{
	struct sp_peer_counters pc;
	struct sp_peer_pins pp;
	struct sp_ctl *ctl = ctl_open();

	memset(&pc, CANARY, sizeof(pc));
	memset(&pp, CANARY, sizeof(pp));
	CHECK(sp_ctl_peer_stats(ctl, &pc) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_peer_pins(ctl, &pp) == 0, "%s", sp_errmsg());
	CHECK(pc.claims <= pc.acquires, "claims %llu > acquires %llu",
	      (unsigned long long)pc.claims, (unsigned long long)pc.acquires);
	CHECK(pp.user_pinned_bytes <= pp.pinned_bytes, "user %llu > node %llu",
	      (unsigned long long)pp.user_pinned_bytes, (unsigned long long)pp.pinned_bytes);
	sp_ctl_close(ctl);
}

static const struct tap_case cases[] = {
	TAP_CASE(info_1_0),
	TAP_CASE(stats_1_0),
	TAP_CASE(bufs_1_0),
	TAP_CASE(config_1_0),
	TAP_CASE_T(monitor_1_0, 60),
	TAP_CASE(peer_calls_1_0),
};

/* --host: no module; the symbols resolved (run with LD_BIND_NOW=1). */
static int host(void)
{
	struct sp_ctl *ctl;
	int ret = sp_ctl_open(&ctl);

	printf("TAP version 13\n1..1\n");
	if (ret == 0) {
		sp_ctl_close(ctl);
		printf("ok 1 host_no_module # SKIP the module is loaded here\n");
		return 0;
	}
	printf("%s 1 host_no_module\n", ret == -ENOENT ? "ok" : "not ok");
	if (ret != -ENOENT)
		printf("# sp_ctl_open: %d %s\n", ret, sp_errmsg());
	return ret != -ENOENT;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--host"))
		return host();
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
