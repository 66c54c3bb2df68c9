/* SPDX-License-Identifier: MIT */
/*
 * A small kselftest-style harness: each case runs in its own forked child
 * with a timeout, results are printed as TAP 13. Inside a case:
 *
 *   CHECK(cond, fmt, ...)      fail the case unless cond
 *   CHECK_ERR(expr, errno)     expr must return -1 with that errno
 *   SKIP(fmt, ...)             skip the case, with the reason
 *
 * The program exits 0 when nothing failed, 1 otherwise, 4 (kselftest's
 * "skip") when every case was skipped.
 */
#ifndef SP_TAP_H
#define SP_TAP_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct tap_case {
	const char *name;
	void (*fn)(void);
	unsigned int timeout;	/* seconds; 0: 60 */
};

#define TAP_CASE(f)		{ #f, f, 0 }
#define TAP_CASE_T(f, t)	{ #f, f, t }

/* the running case's pipe for its skip reason (tap_run() sets it) */
extern int tap_skip_fd;

/* a "# " diagnostic line */
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void tap_fail(const char *file, int line, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), noreturn));

void tap_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond))						\
			tap_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)

/* expr must fail with -1 and errno == e */
#define CHECK_ERR(expr, e)						\
	do {								\
		errno = 0;						\
		long __r = (long)(expr);				\
		int __e = errno;					\
		if (__r != -1 || __e != (e))				\
			tap_fail(__FILE__, __LINE__, #expr,		\
				 "expected -1/%s, got %ld/%s",		\
				 strerrorname_np(e) ? strerrorname_np(e) : "?", \
				 __r, __e ? (strerrorname_np(__e) ? strerrorname_np(__e) : "?") : "0"); \
	} while (0)

/* expr must return 0 (or >= 0 with CHECK_OK_GE) */
#define CHECK_OK(expr)							\
	do {								\
		errno = 0;						\
		long __r = (long)(expr);				\
		if (__r != 0)						\
			tap_fail(__FILE__, __LINE__, #expr,		\
				 "returned %ld (%s)", __r, strerror(errno)); \
	} while (0)

#define SKIP(...) tap_skip(__VA_ARGS__)

/*
 * A debug kernel (KASAN, kmemleak, lockdep; the suite's 6.12.117-spdebug)
 * runs every page and packet several times slower under TCG: the few
 * cases whose cost is their size use a smaller one there, and say so.
 */
int tap_debug_kernel(void);

/* Whether @name is a word of the space-separated @list. */
int tap_listed(const char *list, const char *name);

/* Waits up to @tenths * 100 ms for @pid to be reaped; 1 when it was. */
int tap_reap(pid_t pid, unsigned int tenths);

/*
 * A killed case that does not die is stuck in the kernel (a deadlock, an
 * uninterruptible wait): say where each of its threads sleeps, and go on
 * with the next case rather than hang the whole run.
 */
void tap_stuck(pid_t pid);

/* Runs the cases, each in its own child with its timeout; the exit status. */
int tap_run(const struct tap_case *cases, size_t n);

#define TAP_MAIN(cases)							\
	int main(void)							\
	{								\
		setvbuf(stdout, NULL, _IOLBF, 0);			\
		return tap_run(cases, sizeof(cases) / sizeof(cases[0])); \
	}

#endif /* SP_TAP_H */
