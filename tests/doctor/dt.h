/* SPDX-License-Identifier: MIT */
/*
 * doctor-test's helpers: a context run on a fixture tree, the expectations
 * on its results, private copies of fixtures. Included once, by
 * doctor-test.c, with its case files (dt-gpudirect.h, dt-cli.h): one
 * program, split along its sections to stay readable.
 */
#ifndef SP_DOCTOR_TEST_DT_H
#define SP_DOCTOR_TEST_DT_H

#include "tap.h"

#include <limits.h>
#include <sys/stat.h>

#include "doctor.h"

static char fx[PATH_MAX] = "build/doctor-fixtures";
static const char *ctl = "build/strixpeerctl";
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void no_wait(void *arg)
{
	(void)arg;
}

static struct dr_ctx *run_hook(const char *fixture, void (*hook)(void *), void *arg)
{
	struct dr_ctx *c = calloc(1, sizeof(*c));
	char root[PATH_MAX];
	int ret;

	CHECK(c, "calloc");
	dr_ctx_init(c);
	if (strchr(fixture, '/'))
		snprintf(root, sizeof(root), "%s", fixture);
	else
		dr_fmt(root, sizeof(root), "%s/%s", fx, fixture);
	ret = dr_ctx_set_sysroot(c, root);
	CHECK(ret == 0, "sysroot %s: %s", root, strerror(-ret));
	CHECK(!c->live, "a fixture must not count as the live system");
	c->between_samples = hook;
	c->hook_arg = arg;
	dr_run(c);
	return c;
}

static struct dr_ctx *run(const char *fixture)
{
	return run_hook(fixture, no_wait, NULL);
}

static const struct dr_result *find(const struct dr_ctx *c, const char *id, const char *subj)
{
	for (size_t i = 0; i < c->nres; i++)
		if (!strcmp(c->res[i].id, id) && (!subj || !strcmp(c->res[i].subject, subj)))
			return &c->res[i];
	tap_fail(__FILE__, __LINE__, "find", "no result %s%s%s", id, subj ? " for " : "",
		 subj ? subj : "");
}

/* The result must have @st, and its advice (or summary) must contain @text. */
static const struct dr_result *expect(const struct dr_ctx *c, const char *id, const char *subj,
				      enum dr_status st, const char *advice)
{
	const struct dr_result *r = find(c, id, subj);

	CHECK(r->status == st, "%s %s: status %s, expected %s (%s)", id, r->subject,
	      dr_status_name(r->status), dr_status_name(st), r->summary);
	if (advice)
		CHECK(r->advice && strstr(r->advice, advice),
		      "%s %s: advice does not name \"%s\": %s", id, r->subject, advice,
		      r->advice ? r->advice : "(none)");
	if (st >= DR_WARN)
		CHECK(r->advice && r->advice[0], "%s %s is %s without advice", id, r->subject,
		      dr_status_name(st));
	return r;
}

static void summary_has(const struct dr_result *r, const char *text)
{
	CHECK(strstr(r->summary, text), "%s %s: summary lacks \"%s\": %s", r->id, r->subject,
	      text, r->summary);
}

static int64_t obs_int(const struct dr_result *r, const char *key)
{
	const struct dr_val *v = dr_get(r, key);

	CHECK(v && v->type == DR_V_INT, "%s %s: no integer \"%s\" observed", r->id, r->subject, key);
	return v->i;
}

static const char *obs_str(const struct dr_result *r, const char *key)
{
	const struct dr_val *v = dr_get(r, key);

	CHECK(v && v->type == DR_V_STR, "%s %s: no string \"%s\" observed", r->id, r->subject, key);
	return v->s;
}

static bool obs_bool(const struct dr_result *r, const char *key)
{
	const struct dr_val *v = dr_get(r, key);

	CHECK(v && v->type == DR_V_BOOL, "%s %s: no boolean \"%s\" observed", r->id, r->subject, key);
	return v->i;
}

static void no_warn_or_fail(const struct dr_ctx *c)
{
	for (size_t i = 0; i < c->nres; i++)
		CHECK(c->res[i].status < DR_WARN, "%s %s is %s: %s", c->res[i].id, c->res[i].subject,
		      dr_status_name(c->res[i].status), c->res[i].summary);
}



struct ctr_change {
	const char *root;
	const char *file;	/* below the root */
	const char *value;
};

static void write_file(const char *root, const char *file, const char *value)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, file);
	f = fopen(path, "w");
	CHECK(f, "%s: %s", path, strerror(errno));
	fprintf(f, "%s\n", value);
	fclose(f);
}

static void change(void *arg)
{
	const struct ctr_change *ch = arg;

	write_file(ch->root, ch->file, ch->value);
}

/* A private copy of a fixture (the cases run in parallel forks' order). */
static void copy_fixture(const char *name, char *out, size_t len)
{
	char cmd[PATH_MAX * 2 + 64];

	dr_fmt(out, len, "%s/.copy-%s-%d", fx, name, getpid());
	dr_fmt(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s/%s' '%s'", out, fx, name, out);
	CHECK(system(cmd) == 0, "%s", cmd);
}

static void remove_copy(const char *dir)
{
	char cmd[PATH_MAX + 16];

	dr_fmt(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "%s", cmd);
}

/* A copy of @fixture whose /etc/os-release is @osrel ("" for none). */
static struct dr_ctx *run_on_os(const char *fixture, const char *osrel, char *root, size_t len)
{
	char dir[PATH_MAX + 8];
	struct dr_ctx *c;

	copy_fixture(fixture, root, len);
	if (osrel[0]) {
		dr_fmt(dir, sizeof(dir), "%s/etc", root);
		CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "%s: %s", dir, strerror(errno));
		write_file(root, "etc/os-release", osrel);
	}
	c = run(root);
	return c;
}


#endif /* SP_DOCTOR_TEST_DT_H */
