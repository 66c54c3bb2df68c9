// SPDX-License-Identifier: MIT
/*
 * strixpeerctl's benchmark, what all its files share: the calling
 * thread's failure message (sp_bench_fail(), sp_bench_lib(),
 * sp_bench_errmsg()), the clock, CPU pinning, progress messages and the
 * result series of a run. It calls none of the bench's other files.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strixpeer.h"
#include "bench_int.h"

static __thread char sp_bench_msg[512];

int sp_bench_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sp_bench_msg, sizeof(sp_bench_msg), fmt, ap);
	va_end(ap);
	return -err;
}

int sp_bench_lib(int ret)
{
	if (ret < 0)
		sp_bench_fail(-ret, "%s", sp_errmsg());
	return ret;
}

const char *sp_bench_errmsg(void)
{
	return sp_bench_msg;
}

double sp_bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sp_bench_pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

void sp_bench_progress(const struct sp_bench *b, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!b->o.progress)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	b->o.progress(msg, b->o.progress_arg);
}

/* --- results ------------------------------------------------------------- */

struct sp_bench_series *sp_bench_series_get(struct sp_bench *b, const char *figure,
					    uint64_t msg_size, const char *unit,
					    bool higher_better)
{
	struct sp_bench_series *s;

	for (size_t i = 0; i < b->nr_series; i++)
		if (!strcmp(b->series[i].figure, figure) && b->series[i].msg_size == msg_size)
			return &b->series[i];
	if (b->nr_series == b->cap_series) {
		size_t cap = b->cap_series ? 2 * b->cap_series : 64;
		struct sp_bench_series *n = realloc(b->series, cap * sizeof(*n));

		if (!n)
			return NULL;
		b->series = n;
		b->cap_series = cap;
	}
	s = &b->series[b->nr_series++];
	memset(s, 0, sizeof(*s));
	sp_bench_copy(s->figure, sizeof(s->figure), figure);
	s->msg_size = msg_size;
	s->unit = unit;
	s->higher_better = higher_better;
	return s;
}

void sp_bench_add(struct sp_bench_series *s, enum sp_bench_kind kind, double v)
{
	if (s && s->n[kind] < SP_BENCH_MAX_REPEAT)
		s->v[kind][s->n[kind]++] = v;
}
