// SPDX-License-Identifier: MIT
/*
 * Events at the edges (issue 45): what the "events" group says when a
 * limit or an allocation failure ends something part-way.
 *
 *   limit_event_on_peer_bound      a PeerDirect registration refused by
 *                                  max_peer_pinned_per_user sends a limit
 *                                  event of that kind (as an RLIMIT_MEMLOCK
 *                                  refusal sends "memlock"); needs the
 *                                  simulated core (peer stage)
 *   created_freed_pair_on_handle_failure
 *                                  a BUF_ALLOC whose handle allocation fails
 *                                  (fault injection: failslab on the xarray
 *                                  node cache, this task only) announces
 *                                  the buffer's BUF_CREATED before its
 *                                  BUF_FREED, never a FREED alone; needs
 *                                  CONFIG_FAILSLAB (the debug kernel)
 *
 * A monitor (sp_ctl_monitor() in a child) writes one line per event to a
 * pipe; the window of each case is bracketed by marker buffers of sizes no
 * case allocates, so events of other processes or earlier pings do not
 * count. Every wait is bounded and prints what it saw.
 */
#include "peer_util.h"

#include <inttypes.h>
#include <poll.h>

#define PAGE 4096ULL
#define MARK_GO (9 * PAGE)	/* the window opens after its FREED */
#define MARK_END (5 * PAGE)	/* and closes at its CREATED */
#define WAIT_MS 60000		/* TCG and the debug kernel are slow */

struct mon {
	pid_t pid;
	int fd;
	char buf[8192];
	size_t len;
	char seen[2048];	/* the lines read, for a timeout's message */
};

static int event_line(const struct sp_event *ev, void *arg)
{
	int fd = *(int *)arg;
	char line[96];
	int n;

	switch (ev->type) {
	case SP_EVENT_BUF_CREATED:
	case SP_EVENT_BUF_FREED:
		n = snprintf(line, sizeof(line), "%s %u %" PRIu64 "\n",
			     ev->type == SP_EVENT_BUF_CREATED ? "created" : "freed",
			     ev->buf->id, ev->buf->bytes);
		break;
	case SP_EVENT_LIMIT:
		n = snprintf(line, sizeof(line), "limit %d %" PRIu64 "\n", (int)ev->limit,
			     ev->bytes);
		break;
	default:
		n = snprintf(line, sizeof(line), "other %d\n", (int)ev->type);
	}
	return write(fd, line, (size_t)n) == n ? 0 : 1;
}

/* Allocate and free a buffer of @bytes through a raw fd: two events. */
static void ping(uint64_t bytes)
{
	struct strixpeer_buf_alloc a;
	int fd = sp_test_open();

	CHECK_OK(sp_raw_alloc(fd, bytes, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_ALLOW_SMALL, &a));
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
}

/* The next line, waiting at most WAIT_MS; fails with what was seen. */
static const char *mon_line(struct mon *m, char *out, size_t len)
{
	for (;;) {
		char *nl = memchr(m->buf, '\n', m->len);
		struct pollfd p = { .fd = m->fd, .events = POLLIN };
		ssize_t r;

		if (nl) {
			size_t n = (size_t)(nl - m->buf);

			snprintf(out, len, "%.*s", (int)n, m->buf);
			memmove(m->buf, nl + 1, m->len - n - 1);
			m->len -= n + 1;
			if (strlen(m->seen) + strlen(out) + 3 < sizeof(m->seen)) {
				strcat(m->seen, out);
				strcat(m->seen, "; ");
			}
			return out;
		}
		CHECK(poll(&p, 1, WAIT_MS) == 1, "no event for %d s; seen: %s", WAIT_MS / 1000,
		      m->seen[0] ? m->seen : "nothing");
		r = read(m->fd, m->buf + m->len, sizeof(m->buf) - m->len);
		CHECK(r > 0, "monitor stopped (%s); seen: %s", r ? strerror(errno) : "EOF",
		      m->seen);
		m->len += (size_t)r;
	}
}

/*
 * Start the monitor and open the window: pings until it hears one, then
 * the GO marker, whose FREED is the last line before the window.
 */
static void mon_start(struct mon *m)
{
	char line[128], want[64];
	int pfd[2];

	memset(m, 0, sizeof(*m));
	CHECK_OK(pipe(pfd));
	m->pid = fork();
	CHECK(m->pid >= 0, "fork: %s", strerror(errno));
	if (m->pid == 0) {
		struct sp_ctl *ctl;
		char err[256];
		int n;

		close(pfd[0]);
		if (sp_ctl_open(&ctl) || sp_ctl_monitor(ctl, event_line, &pfd[1])) {
			n = snprintf(err, sizeof(err), "error %s\n", sp_errmsg());
			if (write(pfd[1], err, (size_t)n) != n)
				_exit(2);
		}
		_exit(0);
	}
	close(pfd[1]);
	m->fd = pfd[0];
	for (int i = 0;; i++) {
		struct pollfd p = { .fd = m->fd, .events = POLLIN };

		CHECK(i < 200, "the monitor heard none of %d pings", i);
		ping(PAGE);
		if (poll(&p, 1, 300) == 1)
			break;
	}
	mon_line(m, line, sizeof(line));
	if (!strncmp(line, "error ", 6))
		SKIP("no events: %s", line + 6);
	ping(MARK_GO);
	snprintf(want, sizeof(want), " %llu", MARK_GO);
	do {
		mon_line(m, line, sizeof(line));
	} while (strncmp(line, "freed ", 6) || strcmp(strrchr(line, ' '), want));
	m->seen[0] = '\0';
}

/* Close the window: the END marker; *@n lines before its CREATED. */
static void mon_window(struct mon *m, char lines[][64], int max, int *n)
{
	char line[128], want[64];

	ping(MARK_END);
	snprintf(want, sizeof(want), " %llu", MARK_END);
	*n = 0;
	for (;;) {
		mon_line(m, line, sizeof(line));
		if (!strncmp(line, "created ", 8) && !strcmp(strrchr(line, ' '), want))
			break;
		CHECK(*n < max, "more than %d events in the window: %s", max, m->seen);
		snprintf(lines[(*n)++], 64, "%.63s", line);
	}
	kill(m->pid, SIGKILL);
	waitpid(m->pid, NULL, 0);
	close(m->fd);
}

static void set_peer_bound(uint64_t bytes)
{
	char v[32];

	snprintf(v, sizeof(v), "%llu", (unsigned long long)bytes);
	write_param("/sys/module/strixpeer/parameters/max_peer_pinned_per_user", v);
}

/* root (CAP_IPC_LOCK): only the parameter can refuse the pin */
static void limit_event_on_peer_bound(void)
{
	int sim = sim_open(), fd = sp_test_open();
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	char lines[32][64], want[64];
	struct sp_xbuf x;
	struct mon m;
	bool found = false;
	int n, ret;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, 1 * MiB, x.map, &im));
	mon_start(&m);
	set_peer_bound(PAGE);
	ret = sim_reg(sim, x.map, PAGE, &r);
	set_peer_bound(0);
	if (ret == 0)
		sim_dereg(sim, r.handle);
	CHECK(ret == -EDQUOT, "registration pinning 1 MiB past a 4 KiB max_peer_pinned_per_user: %s, want EDQUOT",
	      ret ? strerror(-ret) : "succeeded");
	mon_window(&m, lines, 32, &n);
	snprintf(want, sizeof(want), "limit %d %llu", SP_LIMIT_MAX_PEER_PINNED_PER_USER, MiB);
	for (int i = 0; i < n; i++)
		found |= !strcmp(lines[i], want);
	tap_diag("%d events in the window%s%s", n, n ? ", first: " : "", n ? lines[0] : "");
	CHECK(found, "no \"%s\" event for the refusal (max-peer-pinned-per-user) among %d", want, n);
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	sp_xbuf_free(&x);
	close(fd);
	close(sim);
	check_all_released();
}

#define FS "/sys/kernel/debug/failslab/"
#define XA_CACHE "/sys/kernel/slab/radix_tree_node/failslab"

static void failslab_off(void)
{
	sp_write_file("/proc/self/make-it-fail", "0");
	sp_write_file(FS "probability", "0");
	sp_write_file(FS "cache-filter", "N");
	sp_write_file(XA_CACHE, "0");
}

/*
 * Every xarray node allocation of this task fails during the BUF_ALLOC:
 * on a fresh file the handle (1) needs a node, so the handle allocation
 * fails after sp_buf_create() made the buffer. sp_buf_create()'s own id
 * allocation (the node-wide tree) needs a node only when the next id
 * starts one (one in 64): a buffer held just before keeps the current
 * node, and of three rounds at most one fails there instead (no event).
 */
static void created_freed_pair_on_handle_failure(void)
{
	int hold = sp_test_open(), enomem = 0, n, created = 0, freed = 0;
	char lines[64][64];
	struct mon m;

	if (access(FS "cache-filter", W_OK) || access(XA_CACHE, W_OK))
		SKIP("no failslab cache-filter or no separate radix_tree_node cache (CONFIG_FAILSLAB: the debug kernel runs this)");
	mon_start(&m);
	if (!(sp_write_file(FS "task-filter", "Y") && sp_write_file(FS "verbose", "0") &&
	      sp_write_file(FS "interval", "1") && sp_write_file(FS "space", "0") &&
	      sp_write_file(FS "ignore-gfp-wait", "N") && sp_write_file(FS "times", "-1") &&
	      sp_write_file(FS "cache-filter", "Y") && sp_write_file(XA_CACHE, "1") &&
	      sp_write_file(FS "probability", "100"))) {
		failslab_off();
		CHECK(0, "configuring failslab: %s", strerror(errno));
	}
	for (int round = 0; round < 3; round++) {
		int fd = sp_test_open(), ret, err;

		ret = sp_raw_alloc(hold, 2 * PAGE, STRIXPEER_NODE_DEFAULT,
				   STRIXPEER_ALLOC_ALLOW_SMALL, NULL);
		if (ret) {
			failslab_off();
			CHECK(0, "holding a buffer: %s", strerror(errno));
		}
		sp_write_file("/proc/self/make-it-fail", "1");
		ret = sp_raw_alloc(fd, PAGE, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_ALLOW_SMALL,
				   NULL);
		err = errno;
		sp_write_file("/proc/self/make-it-fail", "0");
		close(fd);
		if (ret == 0) {
			failslab_off();
			CHECK(0, "BUF_ALLOC on a fresh file succeeded with every xarray node allocation failing");
		}
		enomem += err == ENOMEM;
	}
	failslab_off();
	close(hold);
	mon_window(&m, lines, 64, &n);
	for (int i = 0; i < n; i++) {
		bool has_created = false;
		unsigned int id;
		uint64_t bytes;
		char kind[16];

		CHECK(sscanf(lines[i], "%15s %u %" SCNu64, kind, &id, &bytes) == 3,
		      "event \"%s\"", lines[i]);
		if (bytes != PAGE)
			continue;	/* the held buffers */
		if (!strcmp(kind, "created")) {
			created++;
			continue;
		}
		freed++;
		for (int j = 0; j < i; j++) {
			char want[64];

			snprintf(want, sizeof(want), "created %u %llu", id, PAGE);
			has_created |= !strcmp(lines[j], want);
		}
		CHECK(has_created, "BUF_FREED of buffer %u without its BUF_CREATED (window: %s)", id,
		      m.seen);
	}
	tap_diag("3 rounds, %d ENOMEM; 4 KiB buffers: %d created, %d freed", enomem, created,
		 freed);
	CHECK(enomem == 3, "%d of 3 BUF_ALLOCs failed with ENOMEM", enomem);
	CHECK(freed >= 2, "%d handle allocations failed after the buffer was made, want 2 or 3 (window: %s)",
	      freed, m.seen);
	CHECK(created == freed, "%d created, %d freed", created, freed);
	CHECK_NOTHING_PINNED();
}

static const struct tap_case cases[] = {
	TAP_CASE_T(limit_event_on_peer_bound, 180),
	TAP_CASE_T(created_freed_pair_on_handle_failure, 180),
};

TAP_MAIN(cases)
