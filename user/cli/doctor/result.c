// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the results and their values, as the checks build
 * them (dr_add, dr_advise, dr_str, ...), the check and status names, and
 * the allocation helpers every doctor file uses. It calls no other doctor
 * file: the checks, io.c, json.c and core.c call down into it.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

#define DR_CHECK_NAME(up, name) [DR_C_##up] = #name,
const char *const dr_check_names[DR_C_RDMATEST + 1] = {
	DR_CHECKS(DR_CHECK_NAME)
	[DR_C_COMPARE] = "compare",
	[DR_C_RDMATEST] = "rdmatest",
};
#undef DR_CHECK_NAME

static const char *const status_names[DR_NSTATUS] = {
	[DR_PASS] = "PASS", [DR_INFO] = "INFO", [DR_SKIP] = "SKIP",
	[DR_WARN] = "WARN", [DR_FAIL] = "FAIL",
};

void *dr_alloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p) {
		fputs("strixpeerctl doctor: out of memory\n", stderr);
		exit(DR_EXIT_USAGE);
	}
	return p;
}

char *dr_strdup(const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *p = dr_alloc(n);

	memcpy(p, s ? s : "", n);
	return p;
}

static char *dr_vasprintf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0) {
		fputs("strixpeerctl doctor: out of memory\n", stderr);
		exit(DR_EXIT_USAGE);
	}
	return s;
}

char *dr_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = dr_vasprintf(fmt, ap);
	va_end(ap);
	return s;
}

void dr_result_free(struct dr_result *r)
{
	for (size_t i = 0; i < r->nvals; i++) {
		free(r->vals[i].key);
		free(r->vals[i].s);
	}
	free(r->vals);
	free(r->id);
	free(r->subject);
	free(r->summary);
	free(r->advice);
}

struct dr_result *dr_add(struct dr_ctx *c, enum dr_check check, const char *what,
			 const char *subject, enum dr_status st, const char *fmt, ...)
{
	struct dr_result *r;
	va_list ap;

	if (c->nres == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct dr_result *n = realloc(c->res, cap * sizeof(*n));

		if (!n) {
			fputs("strixpeerctl doctor: out of memory\n", stderr);
			exit(DR_EXIT_USAGE);
		}
		c->res = n;
		c->cap = cap;
	}
	r = &c->res[c->nres++];
	memset(r, 0, sizeof(*r));
	r->check = dr_check_names[check];
	r->id = dr_asprintf("%s.%s", r->check, what);
	r->subject = dr_strdup(subject ? subject : "");
	r->status = st;
	va_start(ap, fmt);
	r->summary = dr_vasprintf(fmt, ap);
	va_end(ap);
	return r;
}

/* Replaces the summary; the format may use the old one. */
void dr_set_summary(struct dr_result *r, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = dr_vasprintf(fmt, ap);
	va_end(ap);
	free(r->summary);
	r->summary = s;
}

/* Advice accumulates: a second call appends after "; ". */
void dr_advise(struct dr_result *r, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = dr_vasprintf(fmt, ap);
	va_end(ap);
	if (r->advice) {
		char *both = dr_asprintf("%s; %s", r->advice, s);

		free(r->advice);
		free(s);
		s = both;
	}
	r->advice = s;
}

void dr_raise(struct dr_result *r, enum dr_status st)
{
	if (st > r->status)
		r->status = st;
}

static struct dr_val *val_new(struct dr_result *r, const char *key, enum dr_vtype t)
{
	struct dr_val *v;

	/* a key set again replaces its value */
	for (size_t i = 0; i < r->nvals; i++) {
		if (!strcmp(r->vals[i].key, key)) {
			v = &r->vals[i];
			free(v->s);
			v->s = NULL;
			v->type = t;
			return v;
		}
	}
	v = realloc(r->vals, (r->nvals + 1) * sizeof(*v));
	if (!v) {
		fputs("strixpeerctl doctor: out of memory\n", stderr);
		exit(DR_EXIT_USAGE);
	}
	r->vals = v;
	v = &r->vals[r->nvals++];
	memset(v, 0, sizeof(*v));
	v->key = dr_strdup(key);
	v->type = t;
	return v;
}

void dr_str(struct dr_result *r, const char *key, const char *val)
{
	val_new(r, key, DR_V_STR)->s = dr_strdup(val);
}

void dr_int(struct dr_result *r, const char *key, int64_t v)
{
	val_new(r, key, DR_V_INT)->i = v;
}

void dr_bool(struct dr_result *r, const char *key, bool v)
{
	val_new(r, key, DR_V_BOOL)->i = v;
}

void dr_null(struct dr_result *r, const char *key)
{
	val_new(r, key, DR_V_NULL);
}

/* @n strings (none when @n <= 0): a JSON array. */
void dr_strs(struct dr_result *r, const char *key, char **v, int n)
{
	size_t len = 1;
	char *s;

	for (int i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	s = dr_alloc(len);
	for (int i = 0; i < n; i++) {
		strcat(s, v[i]);
		strcat(s, "\n");
	}
	val_new(r, key, DR_V_STRS)->s = s;
}

const struct dr_val *dr_get(const struct dr_result *r, const char *key)
{
	for (size_t i = 0; i < r->nvals; i++)
		if (!strcmp(r->vals[i].key, key))
			return &r->vals[i];
	return NULL;
}

const char *dr_status_name(enum dr_status st)
{
	return st < DR_NSTATUS ? status_names[st] : "?";
}

int dr_status_from_name(const char *name)
{
	for (int i = 0; i < DR_NSTATUS; i++)
		if (name && !strcmp(name, status_names[i]))
			return i;
	return -1;
}

/* 0 nothing to fix, 1 a WARN, 2 a FAIL. */
int dr_exit_status(const struct dr_ctx *c)
{
	int ret = 0;

	for (size_t i = 0; i < c->nres; i++) {
		if (c->res[i].status == DR_FAIL)
			return 2;
		if (c->res[i].status == DR_WARN)
			ret = 1;
	}
	return ret;
}
