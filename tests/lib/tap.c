// SPDX-License-Identifier: MIT
/* tests/lib/tap.h's functions: the suite's library (build/tests/libsptest.a). */
#include "tap.h"

int tap_skip_fd = -1;

void tap_diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

void tap_fail(const char *file, int line, const char *what, const char *fmt, ...)
{
	va_list ap;

	printf("# FAIL %s:%d: %s: ", file, line, what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	_exit(1);
}

void tap_skip(const char *fmt, ...)
{
	char reason[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (tap_skip_fd >= 0 && write(tap_skip_fd, reason, strlen(reason)) < 0)
		perror("write");
	fflush(stdout);
	_exit(4);
}

int tap_debug_kernel(void)
{
	return access("/sys/kernel/debug/kmemleak", F_OK) == 0;
}

int tap_listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += len)
		if ((p == list || p[-1] == ' ') && (p[len] == '\0' || p[len] == ' '))
			return 1;
	return 0;
}

int tap_reap(pid_t pid, unsigned int tenths)
{
	int status;

	for (unsigned int i = 0; i < tenths; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return 1;
		usleep(100000);
	}
	return 0;
}

void tap_stuck(pid_t pid)
{
	char path[64], line[256];
	FILE *f;

	printf("# the case's process %d does not die: stuck in the kernel\n", (int)pid);
	for (int tid = pid; tid < pid + 64; tid++) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stack", (int)pid, tid);
		f = fopen(path, "re");
		if (!f)
			continue;
		printf("# thread %d:\n", tid);
		while (fgets(line, sizeof(line), f))
			printf("#   %s", line);
		fclose(f);
	}
	fflush(stdout);
}

int tap_run(const struct tap_case *cases, size_t n)
{
	unsigned int failed = 0, skipped = 0;
	size_t i;

	printf("TAP version 13\n1..%zu\n", n);
	fflush(stdout);
	for (i = 0; i < n; i++) {
		unsigned int timeout = cases[i].timeout ? cases[i].timeout : 60;
		const char *only = getenv("SP_CASES");

		/* SP_CASES="a b": run only those cases (debugging aid) */
		if (only && *only && !tap_listed(only, cases[i].name)) {
			printf("ok %zu %s # SKIP not in SP_CASES\n", i + 1, cases[i].name);
			skipped++;
			continue;
		}
		char reason[256] = "";
		int pfd[2], status = 0;
		unsigned int waited = 0;
		struct timespec t0, t1;
		double took;
		pid_t pid, w;
		ssize_t len;

		clock_gettime(CLOCK_MONOTONIC, &t0);

		if (pipe(pfd) < 0) {
			perror("pipe");
			return 1;
		}
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			close(pfd[0]);
			tap_skip_fd = pfd[1];
			setpgid(0, 0);	/* the case's own children die with it */
			cases[i].fn();
			fflush(stdout);
			_exit(0);
		}
		close(pfd[1]);
		/* wait with a timeout, in 100 ms steps */
		for (;;) {
			w = waitpid(pid, &status, WNOHANG);
			if (w == pid)
				break;
			if (waited >= timeout * 10) {
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
				printf("# TIMEOUT after %u s\n", timeout);
				if (!tap_reap(pid, 300))
					tap_stuck(pid);
				status = -1;
				break;
			}
			usleep(100000);
			waited++;
		}
		kill(-pid, SIGKILL);	/* leftovers of the case */
		/* a case stuck in the kernel still holds the pipe: never block */
		fcntl(pfd[0], F_SETFL, O_NONBLOCK);
		len = read(pfd[0], reason, sizeof(reason) - 1);
		reason[len > 0 ? len : 0] = '\0';
		close(pfd[0]);
		/* where a run's time goes: cases that took a while say so */
		clock_gettime(CLOCK_MONOTONIC, &t1);
		took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (took >= 2)
			printf("# %s took %.1f s\n", cases[i].name, took);

		if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("ok %zu %s\n", i + 1, cases[i].name);
		} else if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 4) {
			printf("ok %zu %s # SKIP %s\n", i + 1, cases[i].name,
			       reason[0] ? reason : "no reason given");
			skipped++;
		} else {
			if (status != -1 && WIFSIGNALED(status))
				printf("# killed by signal %d\n", WTERMSIG(status));
			printf("not ok %zu %s\n", i + 1, cases[i].name);
			failed++;
		}
		fflush(stdout);
	}
	printf("# %zu cases: %zu passed, %u failed, %u skipped\n", n,
	       n - failed - skipped, failed, skipped);
	if (failed)
		return 1;
	return skipped == n ? 4 : 0;
}
