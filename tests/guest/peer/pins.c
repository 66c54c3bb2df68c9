// SPDX-License-Identifier: MIT
/* peer: the per-user bound on peer pins */
#include "peer.h"

#define NOBODY 65534
#define PIN_BO (2 * MiB)
#define PIN_BOS 8

struct pin_result {
	int ok;			/* registrations that succeeded, in order */
	int err;		/* errno of the first that failed, 0 if none */
	uint64_t user_bytes;	/* the uid's PeerDirect pins after the last */
	uint64_t shared_bytes;	/* ... after a 2nd registration of BO 0 */
	uint64_t fail_limit;	/* peer_fail_limit grew by */
};

/*
 * In a child: RLIMIT_MEMLOCK @memlock, as nobody (no groups, so not in the
 * device group; the render node and the verbs device opened before, as a
 * user who may open them) unless @root; PIN_BOS BOs of PIN_BO bytes, 4 KiB
 * registered from each until one fails. The child exits with its MRs
 * registered: exit must release them, their pins and their charge.
 */
static struct pin_result pin_run(uint64_t memlock, bool root)
{
	struct pin_result res = { 0 };
	int pfd[2], st;
	pid_t pid;

	CHECK_OK(pipe(pfd));
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int sim = sim_open(), gfd = gpusim_open();
		struct rlimit rl = { .rlim_cur = memlock, .rlim_max = memlock };
		uint64_t fails0 = peer_pins().fail_limit;
		struct peersim_reg_mr r;
		uint8_t *va[PIN_BOS];

		close(pfd[0]);
		CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
		if (!root) {
			CHECK_OK(setgroups(0, NULL));
			CHECK_OK(setresgid(NOBODY, NOBODY, NOBODY));
			CHECK_OK(setresuid(NOBODY, NOBODY, NOBODY));
		}
		CHECK(peer_pins().user_pinned_bytes == 0, "uid %u starts with %llu bytes pinned",
		      getuid(), (unsigned long long)peer_pins().user_pinned_bytes);
		for (int i = 0; i < PIN_BOS; i++) {
			uint64_t off;

			gpusim_create(gfd, PIN_BO, SP_GPUSIM_DOMAIN_GTT, 0, &off);
			va[i] = sp_aperture(PIN_BO, 2 * MiB);
			sp_rocm_map(va[i], PIN_BO, gfd, off);
			st = sim_reg(sim, va[i], 4096, &r);
			if (st) {
				res.err = -st;
				break;
			}
			CHECK(r.path == PEERSIM_PATH_PEER, "BO %d registered on path %u", i, r.path);
			res.ok++;
			res.user_bytes = peer_pins().user_pinned_bytes;
			CHECK(res.user_bytes <= (uint64_t)res.ok * PIN_BO,
			      "%d registrations of 4 KiB charge %llu bytes", res.ok,
			      (unsigned long long)res.user_bytes);
		}
		/* another registration of a pinned BO pins nothing new */
		if (res.ok) {
			st = sim_reg(sim, va[0] + 8192, 4096, &r);
			CHECK(st == 0, "2nd registration of a pinned BO: %s", strerror(-st));
			res.shared_bytes = peer_pins().user_pinned_bytes;
		}
		res.fail_limit = peer_pins().fail_limit - fails0;
		CHECK(write(pfd[1], &res, sizeof(res)) == sizeof(res), "write: %s",
		      strerror(errno));
		_exit(0);	/* MRs, BOs and fds still held */
	}
	close(pfd[1]);
	st = (int)read(pfd[0], &res, sizeof(res));
	close(pfd[0]);
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 4)
		SKIP("no sp_gpusim or sp_peersim (see the child's reason above)");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pinning child failed (status %#x, FAIL line above)",
	      st);
	tap_diag("memlock %llu KiB%s: %d of %d registrations, then %s; uid pinned %llu KiB",
		 (unsigned long long)memlock >> 10, root ? " (root)" : " (nobody)", res.ok, PIN_BOS,
		 res.err ? strerrorname_np(res.err) : "none failed",
		 (unsigned long long)res.user_bytes >> 10);
	return res;
}

/* After the child is gone: nothing registered, pinned or charged. */
static void check_no_peer_pins(void)
{
	struct sp_peer_pins p = { 0 };

	check_all_released();
	for (int i = 0; i < 600; i++) {	/* exit ends imports from a worker (60 s) */
		p = peer_pins();
		if (!p.pinned_bytes)
			break;
		usleep(100000);
	}
	CHECK(p.pinned_bytes == 0, "%llu GPU bytes still pinned after the registrant exited",
	      (unsigned long long)p.pinned_bytes);
}

static void set_peer_bound(uint64_t bytes)
{
	char v[32];

	snprintf(v, sizeof(v), "%llu", (unsigned long long)bytes);
	write_param("/sys/module/strixpeer/parameters/max_peer_pinned_per_user", v);
}

/* nobody, 8 MiB: 4 BOs of 2 MiB, the 5th refused; twice (exit uncharged). */
void pin_bound_memlock(void)
{
	struct pin_result a, b;

	/* max_peer_pinned_per_user is 0 (the cases that set it restore it) */
	a = pin_run(8 * MiB, false);
	CHECK(a.ok == 4, "nobody with an 8 MiB RLIMIT_MEMLOCK registered 4 KiB of %d 2 MiB BOs (want 4: each pins its whole BO)",
	      a.ok);
	CHECK(a.err == EDQUOT, "registration past RLIMIT_MEMLOCK failed with %s, want EDQUOT",
	      a.err ? strerrorname_np(a.err) : "nothing");
	CHECK(a.user_bytes == 8 * MiB, "uid charged %llu bytes for 4 pinned 2 MiB BOs",
	      (unsigned long long)a.user_bytes);
	CHECK(a.shared_bytes == a.user_bytes, "a 2nd registration of a pinned BO charged %llu more",
	      (unsigned long long)(a.shared_bytes - a.user_bytes));
	CHECK(a.fail_limit == 1, "peer_fail_limit grew by %llu, want 1",
	      (unsigned long long)a.fail_limit);
	check_no_peer_pins();
	/* the charge left with the pins: the same again */
	b = pin_run(8 * MiB, false);
	CHECK(b.ok == 4 && b.err == EDQUOT, "2nd run: %d registrations, then %s: the 1st run's charge stayed",
	      b.ok, b.err ? strerrorname_np(b.err) : "none failed");
	check_no_peer_pins();
}

/* max_peer_pinned_per_user bounds nobody below its RLIMIT_MEMLOCK. */
void pin_bound_param(void)
{
	struct pin_result a;
	struct sp_peer_pins p;

	set_peer_bound(4 * MiB);
	p = peer_pins();
	CHECK(p.max_per_user == 4 * MiB, "config reports max_peer_pinned_per_user %llu",
	      (unsigned long long)p.max_per_user);
	a = pin_run(8 * MiB, false);
	set_peer_bound(0);
	CHECK(a.ok == 2 && a.err == EDQUOT, "bound 4 MiB: %d registrations of 2 MiB BOs, then %s (want 2, EDQUOT)",
	      a.ok, a.err ? strerrorname_np(a.err) : "none failed");
	check_no_peer_pins();
}

/* CAP_IPC_LOCK (root): RLIMIT_MEMLOCK does not bind, the parameter does. */
void pin_bound_root(void)
{
	struct pin_result a;
	int fd = open("/sys/module/strixpeer/parameters/max_peer_pinned_per_user",
		      O_WRONLY | O_CLOEXEC);

	CHECK(fd >= 0, "max_peer_pinned_per_user: %s", strerror(errno));
	CHECK_ERR(write(fd, "100", 3), ERANGE);	/* a bound below one page */
	close(fd);
	set_peer_bound(12 * MiB);
	a = pin_run(4 * MiB, true);
	set_peer_bound(0);
	CHECK(a.ok == 6 && a.err == EDQUOT, "root, memlock 4 MiB, bound 12 MiB: %d registrations of 2 MiB BOs, then %s (want 6, EDQUOT)",
	      a.ok, a.err ? strerrorname_np(a.err) : "none failed");
	CHECK(a.user_bytes == 12 * MiB, "root charged %llu bytes", (unsigned long long)a.user_bytes);
	check_no_peer_pins();
}
