// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the supervisor. Reports, the kernel log, kmemleak, fault
 * injection (failslab, fail_page_alloc), the counters back to zero, and
 * run_phase(): one worker forked, watched, killed and reaped, then judged.
 */
#include "fuzz.h"

/* ---- the supervisor: phases, oracle, reports ------------------------------ */

struct report reports[MAX_REPORTS];
int nreports;
const char *cur_phase = "setup";
uint64_t cur_seed;

/* The configuration at the start (the supervisor's; workers inherit it). */
struct config base_cfg;
bool have_cfg;
int kmsg = -1;		/* /dev/kmsg, the supervisor's */

__attribute__((format(printf, 1, 2)))
void report(const char *fmt, ...)
{
	struct report *r;
	va_list ap;

	nreports++;
	if (nreports > MAX_REPORTS)
		return;
	r = &reports[nreports - 1];
	snprintf(r->phase, sizeof(r->phase), "%s", cur_phase);
	r->seed = cur_seed;
	r->op = sh ? sh->op : 0;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	printf("fuzz: REPORT [%s, seed %#" PRIx64 ", op %lu] %s\n", r->phase, opt_seed, r->op, r->msg);
	fflush(stdout);
}

/* Kernel log records since the last call; complaints become reports. */
unsigned long injected_warnings, injected_kills;

void check_kmsg(bool fault_phase)
{
	static const char *const bad[] = {
		"BUG:", "WARNING:", "Oops", "KASAN", "UBSAN", "possible circular locking",
		"possible recursive locking", "DMA-API", "refcount_t", "general protection",
		"Call Trace", "unreferenced object", "kernel BUG", "list_add corruption",
		"list_del corruption", "INFO: task", "watchdog: BUG",
	};
	static bool in_alloc_warning;
	char rec[2048], first[600] = "";
	int lines = 0;

	if (kmsg < 0)
		return;
	for (;;) {
		ssize_t n = read(kmsg, rec, sizeof(rec) - 1);
		char *msg;

		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on */
		if (n <= 0)
			break;
		rec[n] = 0;
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		msg[strcspn(msg, "\n")] = 0;
		/*
		 * DMA-API debug's own bookkeeping allocates (GFP_ATOMIC) inside
		 * dma_map_*(): an injected failure there makes it say
		 * "cacheline tracking ENOMEM, dma-debug disabled" and switch
		 * itself off - the fault injection's doing, not a bug.
		 */
		if (strstr(msg, "page allocation failure") || strstr(msg, "vmalloc error") ||
		    strstr(msg, "FAULT_INJECTION") ||
		    (fault_phase && strstr(msg, "cacheline tracking ENOMEM"))) {
			in_alloc_warning = fault_phase;
			if (fault_phase) {
				injected_warnings++;
				continue;
			}
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (!strstr(msg, bad[i]))
				continue;
			if (in_alloc_warning && !strcmp(bad[i], "Call Trace"))
				break;
			if (strcmp(bad[i], "Call Trace"))
				in_alloc_warning = false;
			if (!lines++)
				snprintf(first, sizeof(first), "%.400s", msg);
			break;
		}
	}
	if (lines)
		report("kernel log: %s (%d complaining lines in all: see dmesg)", first, lines);
}

/* The objects kmemleak lists now (after a scan when @scan). */
char *kmemleak_list(bool scan)
{
	const char *path = "/sys/kernel/debug/kmemleak";
	size_t cap = 1 << 20, len = 0;
	char *b = calloc(1, cap);
	int fd;
	ssize_t n;

	if (!b)
		return NULL;
	if (scan) {
		write_file(path, "scan");
		sleep(1);
		write_file(path, "scan");
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(b);
		return NULL;
	}
	while (len < cap - 1 && (n = read(fd, b + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	return b;
}

void kmemleak_compare(const char *before, const char *after)
{
	const char *p = after;
	int found = 0;

	while ((p = strstr(p, "unreferenced object "))) {
		char obj[64];
		const char *e = strchr(p, '(');

		snprintf(obj, sizeof(obj), "%.*s", (int)(e && e - p < 60 ? e - p : 40), p);
		if (!before || !strstr(before, obj)) {
			const char *bt = strstr(p, "backtrace:");
			char what[200] = "";

			if (bt) {
				const char *l = strchr(bt, '\n');

				if (l)
					snprintf(what, sizeof(what), "%.*s", (int)strcspn(l + 1, "\n"), l + 1);
			}
			if (found++ < 4)
				report("kmemleak: %s- first frame: %s", obj, what);
		}
		p += 20;
	}
}

/* Fault injection: configure or disable; returns the "times" left (or -1). */
#define FI_TIMES 100000000LL
static const char *const fi_dirs[] = { "/sys/kernel/debug/failslab", "/sys/kernel/debug/fail_page_alloc" };

static void faults_setup(bool on)
{
	char path[128];

	for (int i = 0; i < 2; i++) {
		const char *d = fi_dirs[i];

#define FI(attr, v) (snprintf(path, sizeof(path), "%s/" attr, d), write_file(path, v))
		if (!on) {
			FI("probability", "0");
			continue;
		}
		FI("task-filter", "Y");
		FI("verbose", "0");
		FI("interval", "1");
		FI("space", "0");
		FI("ignore-gfp-wait", "N");
		FI("ignore-gfp-highmem", "N");
		FI("min-order", "0");
		FI("cache-filter", "N");
		FI("probability", i == 0 ? "3" : "2");
		snprintf(path, sizeof(path), "%s/times", d);
		{
			char v[32];

			snprintf(v, sizeof(v), "%lld", FI_TIMES);
			write_file(path, v);
		}
#undef FI
	}
}

static long long faults_injected(void)
{
	long long n = 0;
	char path[128];

	for (int i = 0; i < 2; i++) {
		long long left;

		snprintf(path, sizeof(path), "%s/times", fi_dirs[i]);
		left = read_ll(path);
		if (left >= 0 && left <= FI_TIMES)
			n += FI_TIMES - left;
	}
	return n;
}

static long long sysfs_stat(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/misc/strixpeer/stats/%s", name);
	return read_ll(path);
}

/* Every counter back to zero, waiting up to 10 s for deferred releases. */
static void check_counters(void)
{
	int64_t v[S_N];
	long long sb = -1, sp = -1;
	double t = now() + 10;
	bool zero = false;

	do {
		int ret = stats_get(v);

		sb = sysfs_stat("buffers");
		sp = sysfs_stat("pinned_bytes");
		zero = ret == 0 && sb == 0 && sp == 0;
		for (int i = 0; i < S_N; i++)
			zero = zero && v[i] == 0;
		if (!zero)
			usleep(100000);
	} while (!zero && now() < t);
	if (!zero) {
		char b[400];
		int o = 0;

		for (int i = 0; i < S_N; i++)
			o += snprintf(b + o, sizeof(b) - (size_t)o, "%s %" PRId64 ", ", stat_name[i], v[i]);
		report("counters not back to zero 10 s after every process was reaped: %s"
		       "sysfs buffers %lld, pinned_bytes %lld", b, sb, sp);
	}
}

int run_phase(const char *phase, double seconds)
{
	uint64_t pseed = mix(opt_seed, hash_str(phase));
	bool user = strstr(phase, "user") != NULL, faults = !strncmp(phase, "fault-", 6);
	struct stat dev_st;
	long long peak = 0, faults_before = 0, fi = 0, pinned0 = 0;
	pid_t pid;
	int status = 0;
	double t0 = now(), kill_at;
	bool reaped = false;
	struct config after, before;
	bool have_before;
	int ret;

	cur_phase = phase;
	cur_seed = pseed;
	have_before = config_get(&before) == 0 && before.len > 0;
	sh->op = 0;
	sh->nreports = 0;
	sh->unguarded = 0;
	sh->fault_map[0] = 0;
	if (stat(dev_path, &dev_st)) {
		report("%s: %s", dev_path, strerror(errno));
		return -1;
	}
	if (user && !dry)
		chmod(dev_path, 0666);
	if (user) {	/* what an earlier phase left (then already reported) is not this user's */
		pinned0 = sysfs_stat("pinned_bytes");
		pinned0 = pinned0 > 0 ? pinned0 : 0;
	}
	if (faults) {
		faults_setup(true);
		faults_before = faults_injected();
	}
	printf("fuzz: phase %s: seed %#" PRIx64 ", %g s\n", phase, pseed, seconds);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		worker(phase, pseed, seconds);
	}
	if (pid < 0) {
		report("fork: %s", strerror(errno));
		return -1;
	}
	setpgid(pid, pid);
	kill_at = t0 + seconds + 20;
	/* wait, sampling pinned_bytes; then kill the whole group and reap everything */
	while (!reaped) {
		pid_t r;
		int st;

		/* orphans of the phase are ours (subreaper): reap them as they come */
		while ((r = waitpid(-1, &st, WNOHANG)) > 0)
			if (r == pid) {
				status = st;
				reaped = true;
			}
		if (reaped)
			break;
		if (user) {
			long long p = sysfs_stat("pinned_bytes");

			if (p > peak)
				peak = p;
		}
		if (now() > kill_at) {
			report("worker still running %.0f s past its deadline: killed (hang?)",
			       now() - t0 - seconds);
			kill(-pid, SIGKILL);
			kill_at = now() + 1e9;
		}
		usleep(50000);
	}
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);

		/*
		 * Under injected allocation failures the kernel itself kills
		 * with SIGSEGV when it cannot write a signal frame (or read it
		 * back in sigreturn): force_sigsegv(), si_code SI_KERNEL, no
		 * address. Either the handler does not run (the SIGSEGV being
		 * delivered was the one that failed), or it runs for the
		 * kernel's SIGSEGV once the next frame could be written. The
		 * same ops run without injection in the other phases, where
		 * such a kill is reported.
		 */
		if (faults && sig == SIGSEGV && !sh->unguarded) {
			printf("fuzz: %s: worker killed by SIGSEGV without its handler running: the kernel "
			       "could not deliver a signal (force_sigsegv) under an injected failure; not a report\n",
			       phase);
			injected_kills++;
		} else if (faults && sig == SIGSEGV && sh->fault_code == SI_KERNEL &&
			   !sh->fault_addr) {
			printf("fuzz: %s: worker killed by the kernel's SIGSEGV (si_code SI_KERNEL, no "
			       "address): a signal frame it could not write under an injected failure "
			       "(force_sigsegv); not a report\n", phase);
			injected_kills++;
		} else {
			if (sh->unguarded)
				report("worker killed by signal %d (%s) at address %#lx (si_code %d, %s; "
				       "%.160s) outside a guarded access (the fuzzer's bug, or the kernel's)",
				       sig, strsignal(sig), sh->fault_addr, sh->fault_code,
				       sh->fault_in_arena ? "in the slot arena" : "outside the slot arena",
				       sh->fault_map[0] ? sh->fault_map : "maps not read");
			else
				report("worker killed by signal %d (%s)", sig, strsignal(sig));
		}
	} else if (WEXITSTATUS(status)) {
		report("worker exited with status %d", WEXITSTATUS(status));
	}
	kill(-pid, SIGKILL);	/* whatever the worker left behind */
	{
		double t = now() + 30;

		for (;;) {
			pid_t r = waitpid(-1, NULL, WNOHANG);

			if (r < 0 && errno == ECHILD)
				break;
			if (r == 0) {
				if (user) {
					long long p = sysfs_stat("pinned_bytes");

					if (p > peak)
						peak = p;
				}
				if (now() > t) {
					report("processes of the phase not reaped 30 s after SIGKILL (stuck in the kernel?)");
					break;
				}
				kill(-pid, SIGKILL);
				usleep(20000);
			}
		}
	}
	if (faults) {
		fi = faults_injected() - faults_before;
		faults_setup(false);
	}
	if (user && !dry)
		chmod(dev_path, dev_st.st_mode & 07777);
	for (unsigned long i = 0; i < sh->nreports && i < MAX_WREPORTS; i++)
		report("in the worker at op %lu: %s", sh->rep[i].op, sh->rep[i].msg);
	if (user && peak - pinned0 > (long long)opt_memlock)
		report("pinned_bytes reached %lld (%lld at the start) with only uid %u (RLIMIT_MEMLOCK %"
		       PRIu64 ") running: pinning escapes the limit", peak, pinned0, opt_uid, opt_memlock);
	check_counters();
	if (user && have_before) {
		if (config_get(&after) || after.len != before.len ||
		    memcmp(after.raw, before.raw, after.len))
			report("configuration changed during an unprivileged phase (max_buf_size %" PRIu64
			       " -> %" PRIu64 ", max_pinned %" PRIu64 " -> %" PRIu64 ", default_node %d -> %d"
			       ", require_huge %u -> %u)",
			       before.max_buf_size, after.max_buf_size, before.max_pinned,
			       after.max_pinned, before.default_node, after.default_node,
			       before.require_huge, after.require_huge);
	}
	if (!user && have_cfg) {	/* root may have changed it on purpose: restore */
		if (config_get(&after) == 0 && (after.len != base_cfg.len ||
						 memcmp(after.raw, base_cfg.raw, after.len)))
			if ((ret = config_set(&base_cfg)))
				report("could not restore the configuration: %s", strerror(-ret));
	}
	check_kmsg(faults);
	printf("fuzz: phase %s: %lu ops in %.0f s", phase, sh->op, now() - t0);
	if (user)
		printf(", peak pinned_bytes %lld", peak);
	if (faults)
		printf(", %lld faults injected", fi);
	printf("\n");
	fflush(stdout);
	return (int)fi;
}
