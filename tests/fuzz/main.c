// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: a seeded, bounded, reproducible fuzzer of strixpeer's
 * user-facing surface, with a consistency oracle. Runs as root inside a
 * test VM (tests/vm/fuzz.sh, or the "fuzz" case of tests/vm/guest-suite.sh).
 *
 *   fuzz [--seed N] [--seconds N] [--phases LIST] [--ops N] [--no-faults]
 *        [--no-kmemleak] [--memlock BYTES] [--uid N]
 *
 * A run is a sequence of phases (default "root,user,fault-root,fault-user";
 * the fault phases only where /sys/kernel/debug/failslab exists). Each phase
 * is one worker process (its own process group) that makes random calls for
 * its share of --seconds, from a PRNG seeded with (seed, phase name) only:
 * a phase replays on its own with --phases. The calls:
 *
 *   ioctl    every STRIXPEER_IOC_* with sane, edge and random fields; struct
 *            sizes smaller than, equal to and larger than the header's (tails
 *            zero or not), wrong directions, unknown numbers and magics,
 *            arguments NULL, unmapped, read-only or straddling a hole;
 *            handles live, freed, of another fd, random.
 *   mmap     the buffer cookie (handle << 40) with random offsets, lengths,
 *            protections and flags, at fixed places in a reserved arena;
 *            partial munmap, mprotect, madvise (DONTNEED, DONTFORK,
 *            WIPEONFORK, FREE, REMOVE, PAGEOUT, POPULATE_*, ...), mremap
 *            (grow, shrink, move); pages touched under a SIGSEGV/SIGBUS guard.
 *   dmabuf   BUF_EXPORT (flags random), mmap of the export, DMA_BUF_IOCTL_SYNC
 *            (valid and invalid flags), udmabuf from a sealed memfd, the
 *            system dma-heap, vgem dumb buffers (when loaded), IMPORT of
 *            those and of the module's own exports at random VAs, offsets
 *            and lengths, UNIMPORT, IMPORT_INFO, closing fds under imports;
 *            vgem importing exports (a device attaching and mapping them,
 *            DMA-API debug watching) and letting go.
 *   netlink  the "strixpeer" generic netlink family: every command, do and
 *            dump, with valid, wrong-typed, short, long, unknown, nested and
 *            truncated attributes, lying header lengths, config-set attempts
 *            (as root sane and random values, the start's configuration
 *            restored often and at the end of the phase; as nobody
 *            anything), joining the "events" group, dumps left unread or
 *            abandoned halfway.
 *   proc/fd  fork (children use inherited fds and mappings), kill -9 at a
 *            random moment of an alloc/map/export/import loop, execve chains
 *            carrying non-CLOEXEC device and dma-buf fds (the escape of
 *            issue 16), fds passed with SCM_RIGHTS, threads sharing one fd
 *            (frees, infos, exports, maps and a close racing each other),
 *            device fds closed with mappings and exports alive.
 *
 * The "user" phases run as uid/gid nobody (no groups, no capabilities) with
 * RLIMIT_MEMLOCK of 8 MiB (--memlock); /dev/strixpeer is made 0666 for the
 * phase (as if nobody were in group rdma) and restored after; udmabuf, the
 * dma-heap and vgem are opened before privileges are dropped (a GPU job).
 * The "fault-" phases set /proc/self/make-it-fail in the worker (inherited by
 * its children) with failslab and fail_page_alloc restricted by task-filter,
 * so only the fuzzer's own processes see injected failures; how many were
 * injected is read back from the attributes' "times" counters.
 *
 * Oracle, each finding a "report" with the seed, phase and a replay command:
 *  - after every phase, once every process of it was reaped (the supervisor
 *    is a child subreaper): stats-get's buffers, pinned-bytes, imports,
 *    dmabuf-exports, dmabuf-attachments and peer-registrations, and sysfs's
 *    buffers and pinned_bytes, all back to zero (polled for up to 10 s:
 *    dma-buf releases may be deferred to delayed fput and workqueues);
 *  - during "user" phases, sampled every 50 ms: the module's pinned-bytes
 *    never above the user's RLIMIT_MEMLOCK (pinning is charged per user);
 *  - config-get identical before and after each "user" phase;
 *  - no kernel report in the log (/dev/kmsg from the start of the run):
 *    BUG:, WARNING:, Oops, KASAN, UBSAN, lockdep's possible circular or
 *    recursive locking, DMA-API, refcount_t, general protection, Call Trace;
 *    in fault phases an allocation-failure warning (warn_alloc) and the
 *    trace after it are counted as injected, not reported;
 *  - kmemleak (debug kernel; --no-kmemleak leaves it to the suite's own scan
 *    at its end, as tests/fuzz/guest.sh does: each scan takes 30-50 s under
 *    TCG): a scan at the start and at the end; objects new in the end scan
 *    are reported (kmemleak cannot say when an object leaked);
 *  - a worker that crashed (a signal other than our SIGKILL), hung past
 *    its deadline, or a process that cannot be reaped after SIGKILL.
 * Errnos are not judged: the module's refusals change (see issue 16); a
 * call refused with ENOMEM in a fault phase is an injected failure, any
 * later inconsistency it leaves (a leak, a report) is a bug.
 *
 * What it does not cover: PeerDirect registrations (no ibv_reg_mr, no
 * sp_peersim MRs: peer_registrations is only checked to stay 0), RDMA
 * traffic, importers other than vgem (sp_peersim's dynamic importer, move
 * notifications, sp_gpusim's moving buffers), the 32-bit compat ioctl path,
 * data integrity (bytes are written and read, never compared), fail_function
 * (the module marks no function ALLOW_ERROR_INJECTION; reported as unused),
 * rmmod/insmod while busy, memory cgroups, module parameters written through
 * sysfs, CPU hotplug and real memory pressure. Reproducibility: the choices
 * depend only on the seed and on the kernel's answers, but timing (deadlines,
 * kill -9 moments, thread interleavings) varies, so a replay follows the
 * same sequence only as far as those answers and timings agree.
 */

/*
 * main.c: argument parsing and main() (the run's set-up, its phases, the
 * kmemleak scans around them, the summary and the exit code). The rest:
 * fuzz.h (shared types, the worker's state, prototypes), util.c, nl.c,
 * state.c, ops_ioctl.c, ops_mem.c, ops_nl.c, ops_proc.c, worker.c, oracle.c.
 */
#include "fuzz.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: fuzz [--seed N] [--seconds N] [--phases root,user,fault-root,fault-user]\n"
		"            [--ops N] [--memlock BYTES] [--uid N] [--no-faults] [--no-kmemleak]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char *phases[8];
	int nphases = 0;
	long long faults_total = 0;
	char *leaks_before = NULL;
	bool have_faults, seed_given = false;
	double t_start = now();

	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

	self_exe[n > 0 ? n : 0] = 0;
	if (argc == 4 && !strcmp(argv[1], "--exec-child"))
		return exec_child(strtoull(argv[2], NULL, 0), atoi(argv[3]));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--seed") && v) {
			opt_seed = strtoull(v, NULL, 0);
			seed_given = true;
			i++;
		} else if (!strcmp(a, "--seconds") && v) {
			opt_seconds = strtod(v, NULL);
			i++;
		} else if (!strcmp(a, "--phases") && v) {
			snprintf(opt_phases, sizeof(opt_phases), "%s", v);
			i++;
		} else if (!strcmp(a, "--ops") && v) {
			opt_ops = strtoul(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--memlock") && v) {
			opt_memlock = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--uid") && v) {
			opt_uid = (unsigned int)strtoul(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--no-faults")) {
			opt_faults = false;
		} else if (!strcmp(a, "--no-kmemleak")) {
			opt_kmemleak = false;
		} else {
			usage();
		}
	}
	if (!seed_given) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		opt_seed = mix((uint64_t)ts.tv_nsec, (uint64_t)ts.tv_sec ^ (uint64_t)getpid()) & 0xffffffffULL;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		fprintf(stderr, "fuzz: must run as root (inside the test VM)\n");
		return 4;
	}
	if (getenv("SP_FUZZ_DRY")) {
		dry = true;
		dev_path = "/dev/null";
	}
	if (access(dev_path, F_OK)) {
		printf("fuzz: %s absent: strixpeer not loaded\n", dev_path);
		return 4;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 3;
	memset(sh, 0, sizeof(*sh));
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	nl_resolve();
	if (!sp_family)
		printf("fuzz: generic netlink family %s not found: netlink calls and stats-get skipped\n",
		       STRIXPEER_GENL_NAME);
	have_cfg = config_get(&base_cfg) == 0 && base_cfg.len > 0;
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);
	have_faults = access("/sys/kernel/debug/failslab/probability", W_OK) == 0 &&
		      access("/sys/kernel/debug/fail_page_alloc/probability", W_OK) == 0;
	opt_kmemleak = opt_kmemleak && access("/sys/kernel/debug/kmemleak", W_OK) == 0;

	for (char *save = NULL, *p = strtok_r(opt_phases, ",", &save); p && nphases < 8;
	     p = strtok_r(NULL, ",", &save)) {
		if (strcmp(p, "root") && strcmp(p, "user") && strcmp(p, "fault-root") &&
		    strcmp(p, "fault-user"))
			usage();
		if (!strncmp(p, "fault-", 6) && (!opt_faults || !have_faults)) {
			printf("fuzz: phase %s left out: %s\n", p, opt_faults ?
			       "no failslab/fail_page_alloc in /sys/kernel/debug (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC)" :
			       "--no-faults");
			continue;
		}
		phases[nphases++] = p;
	}
	if (!nphases)
		usage();
	printf("fuzz: seed %#" PRIx64 ", %g s, phases", opt_seed, opt_seconds);
	for (int i = 0; i < nphases; i++)
		printf(" %s", phases[i]);
	{
		struct utsname u;

		printf(", RLIMIT_MEMLOCK of uid %u: %" PRIu64 " bytes, kernel %s\n", opt_uid, opt_memlock,
		       uname(&u) ? "?" : u.release);
	}
	if (have_faults && opt_faults) {
		char inj[4096] = "";

		read_file("/sys/kernel/debug/fail_function/injectable", inj, sizeof(inj));
		if (!strstr(inj, "[strixpeer]"))
			printf("fuzz: fail_function not used: the module marks no function injectable\n");
	}
	if (opt_kmemleak) {
		double t = now();

		leaks_before = kmemleak_list(true);
		printf("fuzz: kmemleak scan before the run: %.0f s\n", now() - t);
	}
	check_kmsg(false);
	for (int i = 0; i < nphases; i++) {
		int fi = run_phase(phases[i], opt_seconds / nphases);

		if (fi > 0)
			faults_total += fi;
	}
	cur_phase = "end";
	cur_seed = opt_seed;
	if (opt_kmemleak) {
		double t = now();
		char *after = kmemleak_list(true);

		printf("fuzz: kmemleak scan after the run: %.0f s\n", now() - t);
		if (after)
			kmemleak_compare(leaks_before, after);
		free(after);
		free(leaks_before);
	}
	check_kmsg(false);

	printf("fuzz: summary: seed %#" PRIx64 ", %g s asked, %.0f s taken\n", opt_seed, opt_seconds,
	       now() - t_start);
	printf("fuzz: calls:");
	for (int i = 0; i < C_NCAT; i++)
		printf(" %s %lu,", cat_name[i], sh->calls[i]);
	printf(" faults injected %lld\n", faults_total);
	printf("fuzz: seconds spent:");
	for (int i = 0; i < C_NCAT; i++)
		printf(" %s %.1f%s", cat_name[i], sh->usec[i] / 1e6, i + 1 < C_NCAT ? "," : "\n");
	printf("fuzz: seconds spent in process/fd:");
	for (int i = 0; i < 9; i++)
		if (i == 8 || strcmp(proc_kind_name[i], proc_kind_name[i + 1]))
			printf(" %s %.1f%s", proc_kind_name[i],
			       (sh->proc_usec[i] + (i && !strcmp(proc_kind_name[i], proc_kind_name[i - 1]) ?
						    sh->proc_usec[i - 1] : 0)) / 1e6, i < 8 ? "," : "\n");
	printf("fuzz: succeeded:");
	for (int i = 0; i < 6; i++)
		printf(" %s %lu%s", ok_name[i], sh->ok[i], i < 5 ? "," : "\n");
	printf("fuzz: ioctls answered ENOMEM: %lu in fault phases (injected), %lu in the others\n",
	       sh->enomem[1], sh->enomem[0]);
	if (injected_kills)
		printf("fuzz: %lu workers killed by the kernel's force_sigsegv under injection (not reports)\n",
		       injected_kills);
	if (injected_warnings)
		printf("fuzz: %lu allocation-failure warnings under injection (expected, not reports)\n",
		       injected_warnings);
	if (sh->events_joined || sh->events_refused)
		printf("fuzz: unprivileged joins of \"events\": %lu accepted, %lu refused\n",
		       sh->events_joined, sh->events_refused);
	if (sh->events_joined)
		report("an unprivileged process joined the events group %lu times",
		       sh->events_joined);
	if (sh->cfgset_accepted)
		report("an unprivileged config-set was accepted %lu times", sh->cfgset_accepted);
	printf("fuzz: reports: %d\n", nreports);
	for (int i = 0; i < nreports && i < MAX_REPORTS; i++) {
		struct report *r = &reports[i];

		printf("fuzz: report %d: [phase %s, phase seed %#" PRIx64 ", op %lu] %s\n", i + 1,
		       r->phase, r->seed, r->op, r->msg);
		if (strcmp(r->phase, "end") && strcmp(r->phase, "setup"))
			printf("fuzz:   replay: make fuzz FUZZ_SEED=%#" PRIx64 " FUZZ_SECONDS=%g FUZZ_PHASES=%s"
			       "   (in a VM: fuzz --seed %#" PRIx64 " --seconds %g --phases %s)\n",
			       opt_seed, opt_seconds / nphases, r->phase, opt_seed,
			       opt_seconds / nphases, r->phase);
		else
			printf("fuzz:   replay: make fuzz FUZZ_SEED=%#" PRIx64 " FUZZ_SECONDS=%g\n",
			       opt_seed, opt_seconds);
	}
	return nreports ? 1 : 0;
}
