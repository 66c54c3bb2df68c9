// SPDX-License-Identifier: MIT
/*
 * One process's imports must not slow another's registrations (issue 45):
 * process A makes 65,536 explicit imports (4 KiB each, over a 256 MiB
 * anonymous PROT_NONE range, IMPORT ioctl); process B (the test, another
 * mm) times, at the same VAs,
 *
 *   reg     a registration through the simulated core that the client is
 *           asked about and declines (B's range is not a GEM mapping, so
 *           GUP fails, the core asks, strixpeer looks for B's imports
 *           there and tries zero-change mode: the lookup every PeerDirect
 *           registration makes)
 *   import  an IMPORT of a 256 MiB dma-buf there (then UNIMPORT)
 *
 * before A's imports exist, while they do, and after they are gone, each
 * time also at addresses A never imported (interleaved with the others).
 * TCG's speed varies with the host's load (2-4 times between phases seen
 * on the debug kernel), so nothing absolute is asserted: with A's imports
 * B's median at A's addresses must stay within 4 times its median
 * elsewhere in the same moments, plus 1 ms, and within 20 times the
 * larger of its medians before and after, plus 5 ms. With one tree for
 * the node (B walks A's imports) 65,536 imports made B's registration
 * 30 us -> 33 ms and its IMPORT 9 us -> 25 ms (6.12); with a tree per mm
 * B's cost does not change. On a debug kernel the timings are only
 * printed, with 8,192 imports (lockdep, KASAN and kmemleak on the
 * per-mm trees). SP_IMPORT_SCALE_N sets the number of A's imports
 * (default 65536).
 */
#include "peer_util.h"

#include <inttypes.h>
#include <poll.h>

#define PAGE 4096UL
#define REPS 15
#define RATIO 4		/* at A's addresses vs. elsewhere, interleaved */
#define SLACK_US 1000.0
#define PHASE_RATIO 20	/* with A's imports vs. before and after them */
#define PHASE_SLACK_US 5000.0

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

struct cost {
	double reg, import;	/* medians, us: at A's addresses */
	double reg_y, import_y;	/* ... and at addresses A never imported */
};

/* B's registration and IMPORT (undone) at @va; times in us. */
static void once(int sim, int fd, int dmabuf, void *va, size_t span, double *reg, double *imp)
{
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	double t = now_us();
	int ret = sim_reg(sim, va, span, &r);

	*reg = now_us() - t;
	if (ret == 0)
		sim_dereg(sim, r.handle);
	CHECK(ret == -EFAULT, "registration of a PROT_NONE range: %s, want EFAULT",
	      ret ? strerror(-ret) : "succeeded");
	t = now_us();
	ret = sp_import_raw(fd, dmabuf, 0, span, va, &im);
	*imp = now_us() - t;
	CHECK(ret == 0, "B's IMPORT: %s", strerror(errno));
	CHECK_OK(sp_unimport_raw(fd, im.handle));
}

/*
 * B's two operations at @x and at @y, REPS times each, interleaved (the
 * host's load changes both alike), in alternating order.
 */
static struct cost measure(int sim, int fd, int dmabuf, void *x, void *y, size_t span)
{
	double reg[REPS], imp[REPS], reg_y[REPS], imp_y[REPS];
	struct sp_peer_counters c0 = peer_stats(), c1;
	struct cost c;

	for (int i = 0; i < REPS; i++) {
		if (i & 1) {
			once(sim, fd, dmabuf, y, span, &reg_y[i], &imp_y[i]);
			once(sim, fd, dmabuf, x, span, &reg[i], &imp[i]);
		} else {
			once(sim, fd, dmabuf, x, span, &reg[i], &imp[i]);
			once(sim, fd, dmabuf, y, span, &reg_y[i], &imp_y[i]);
		}
	}
	c1 = peer_stats();
	CHECK(c1.acquires - c0.acquires >= 2 * REPS && c1.claims == c0.claims,
	      "the client was asked %llu times and claimed %llu (want %d, 0)",
	      (unsigned long long)(c1.acquires - c0.acquires),
	      (unsigned long long)(c1.claims - c0.claims), 2 * REPS);
	c.reg = median(reg, REPS);
	c.import = median(imp, REPS);
	c.reg_y = median(reg_y, REPS);
	c.import_y = median(imp_y, REPS);
	return c;
}

/* Read one status byte from A within @secs; 0 on success. */
static int from_a(int rfd, int secs)
{
	struct pollfd p = { .fd = rfd, .events = POLLIN };
	char st = 0;

	CHECK(poll(&p, 1, secs * 1000) == 1, "process A said nothing for %d s", secs);
	CHECK(read(rfd, &st, 1) == 1, "process A died");
	return st;
}

static void set_param(const char *name, unsigned long v)
{
	char path[128], val[32];

	snprintf(path, sizeof(path), "/sys/module/strixpeer/parameters/%s", name);
	snprintf(val, sizeof(val), "%lu", v);
	write_param(path, val);
}

static void others_imports_cost_nothing(void)
{
	const char *env = getenv("SP_IMPORT_SCALE_N");
	/* a debug kernel asserts no timing: 8,192 imports exercise its trees */
	unsigned long n = env ? strtoul(env, NULL, 0) : tap_debug_kernel() ? 8192 : 65536;
	unsigned long max_imports = 0;
	size_t span = n * PAGE;
	int sim = sim_open(), fd = sp_test_open(), to_a[2], from[2], st;
	struct cost b1, loaded, b2;
	double t0, made;
	struct sp_xbuf big;
	void *x, *y;
	FILE *f;
	pid_t a;

	CHECK(n >= 16 && n <= (1UL << 20), "SP_IMPORT_SCALE_N %lu", n);
	f = fopen("/sys/module/strixpeer/parameters/max_imports", "re");
	CHECK(f && fscanf(f, "%lu", &max_imports) == 1, "max_imports");
	fclose(f);
	/* B's dma-buf: vgem's pages come on first use, never here */
	sp_xbuf_new(SP_EXP_VGEM, span, 0, &big);
	x = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	y = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(x != MAP_FAILED && y != MAP_FAILED, "mmap: %s", strerror(errno));

	b1 = measure(sim, fd, big.fd, x, y, span);

	CHECK_OK(pipe(to_a));
	CHECK_OK(pipe(from));
	set_param("max_imports", n + 64);	/* A's and B's, one uid */
	a = fork();
	CHECK(a >= 0, "fork: %s", strerror(errno));
	if (a == 0) {
		int afd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		struct sp_xbuf small;
		char ok = 0, quit;

		close(to_a[1]);
		close(from[0]);
		sp_xbuf_new(SP_EXP_VGEM, 16384, 0, &small);
		for (unsigned long i = 0; afd >= 0 && i < n; i++) {
			if (sp_import_raw(afd, small.fd, 0, PAGE, (char *)x + i * PAGE, NULL)) {
				printf("# A: import %lu of %lu: %s\n", i, n, strerror(errno));
				ok = 1;
				break;
			}
		}
		if (afd < 0)
			ok = 1;
		if (write(from[1], &ok, 1) != 1 || read(to_a[0], &quit, 1) < 0)
			_exit(1);
		close(afd);	/* every import ends here, not at exit */
		ok = 0;
		_exit(write(from[1], &ok, 1) == 1 ? 0 : 1);
	}
	close(to_a[0]);
	close(from[1]);
	t0 = now_us();
	st = from_a(from[0], 900);
	made = now_us() - t0;
	if (st) {
		set_param("max_imports", max_imports);
		CHECK(0, "process A could not make its %lu imports", n);
	}
	CHECK(peer_stats().imports >= n, "%llu imports alive, want %lu",
	      (unsigned long long)peer_stats().imports, n);

	loaded = measure(sim, fd, big.fd, x, y, span);

	CHECK(write(to_a[1], "q", 1) == 1, "telling A to quit");
	CHECK(from_a(from[0], 900) == 0, "process A's close");
	CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "process A: status %#x", st);
	set_param("max_imports", max_imports);

	b2 = measure(sim, fd, big.fd, x, y, span);

	tap_diag("A made %lu imports in %.1f s", n, made / 1e6);
	tap_diag("B's declined registration, median of %d: %.0f us before A's imports, %.0f us with them (%.0f us elsewhere), %.0f us after",
		 REPS, b1.reg, loaded.reg, loaded.reg_y, b2.reg);
	tap_diag("B's IMPORT, median of %d: %.0f us before, %.0f us with A's imports (%.0f us elsewhere), %.0f us after",
		 REPS, b1.import, loaded.import, loaded.import_y, b2.import);
	/*
	 * A debug kernel's timings are not B's lookups: kmemleak scans (65,536
	 * imports to scan) and KASAN stall the guest for long stretches, and
	 * its interleaved medians were seen 4 times apart in either direction.
	 * It runs everything above (the trees under lockdep, KASAN, kmemleak).
	 */
	if (access("/sys/kernel/debug/kmemleak", F_OK) == 0) {
		tap_diag("timings not asserted: debug kernel (kmemleak, KASAN)");
		goto out;
	}
	/* the robust one: both in the same moments */
	CHECK(loaded.reg <= RATIO * loaded.reg_y + SLACK_US,
	      "A's imports cost B's registrations at their addresses: %.0f us, elsewhere %.0f us",
	      loaded.reg, loaded.reg_y);
	CHECK(loaded.import <= RATIO * loaded.import_y + SLACK_US,
	      "A's imports cost B's IMPORT at their addresses: %.0f us, elsewhere %.0f us",
	      loaded.import, loaded.import_y);
	/* phases minutes apart: only a gross growth counts */
	CHECK(loaded.reg <= PHASE_RATIO * dmax(b1.reg, b2.reg) + PHASE_SLACK_US,
	      "A's imports cost B's registrations: %.0f us, without them %.0f/%.0f us",
	      loaded.reg, b1.reg, b2.reg);
	CHECK(loaded.import <= PHASE_RATIO * dmax(b1.import, b2.import) + PHASE_SLACK_US,
	      "A's imports cost B's IMPORT: %.0f us, without them %.0f/%.0f us",
	      loaded.import, b1.import, b2.import);
out:
	munmap(y, span);
	munmap(x, span);
	sp_xbuf_free(&big);
	close(fd);
	close(sim);
	check_all_released();
}

static const struct tap_case cases[] = {
	TAP_CASE_T(others_imports_cost_nothing, 1500),
};

TAP_MAIN(cases)
