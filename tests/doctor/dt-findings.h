/* SPDX-License-Identifier: MIT */
/*
 * doctor-test's catalogue case: the finding ids doctor emits on every
 * fixture and in doctor compare, findings.c's catalogue and the ids
 * strixpeerctl-doctor(8) documents are one set. Included once, by
 * doctor-test.c, after dt.h.
 */
#ifndef SP_DOCTOR_TEST_DT_FINDINGS_H
#define SP_DOCTOR_TEST_DT_FINDINGS_H

#include <ctype.h>
#include <dirent.h>

#define DT_MAN "docs/man/strixpeerctl-doctor.8"

/* Each result of @c catalogued at no worse a status; marks it in @seen. */
static void dt_catalogued(const struct dr_ctx *c, const char *where, bool *seen)
{
	for (size_t i = 0; i < c->nres; i++) {
		const struct dr_result *r = &c->res[i];
		const struct dr_finding *f = dr_finding(r->id);

		CHECK(f, "%s: %s (%s) is not in findings.c's catalogue", where, r->id, r->subject);
		CHECK(r->status <= f->worst, "%s: %s %s is %s, the catalogue says at worst %s",
		      where, r->id, r->subject, dr_status_name(r->status), dr_status_name(f->worst));
		seen[f - dr_findings] = true;
	}
}

/*
 * The ids the man page names: <check>.<what> with a check's (or compare's,
 * rdmatest's) name, not inside a path (after '/') and not a module file
 * (strixpeer.ko). With @id: 0 when the page names @id, else -1. Without:
 * 0 when every id it names is catalogued, else -1 and the first that is
 * not in @bad.
 */
static int dt_man_ids(const char *text, const char *id, char *bad, size_t len)
{
	const char *p;

	for (p = text; *p; p++) {
		const char *q;
		size_t n;
		int k;

		if (p > text && (isalnum((unsigned char)p[-1]) || strchr("_/.-", p[-1])))
			continue;
		for (k = 0; k <= DR_C_RDMATEST; k++) {
			n = strlen(dr_check_names[k]);
			if (!strncmp(p, dr_check_names[k], n) && p[n] == '.' &&
			    (islower((unsigned char)p[n + 1]) || p[n + 1] == '_'))
				break;
		}
		if (k > DR_C_RDMATEST)
			continue;
		for (q = p + n + 1; islower((unsigned char)*q) || isdigit((unsigned char)*q) ||
				    *q == '_'; q++)
			;
		if (q - (p + n + 1) == 2 && !strncmp(p + n + 1, "ko", 2))
			continue;
		if (id) {
			if (strlen(id) == (size_t)(q - p) && !strncmp(p, id, (size_t)(q - p)))
				return 0;
		} else {
			char one[96];

			snprintf(one, sizeof(one), "%.*s", (int)(q - p), p);
			if (!dr_finding(one)) {
				snprintf(bad, len, "%s", one);
				return -1;
			}
		}
		p = q - 1;
	}
	return id ? -1 : 0;
}

static void findings_catalogued_emitted_documented(void)
{
	static const char *const cmp[] = { "healthy", "mtu-1500", "strix-6.12", "oculink-cx3" };
	bool *seen = calloc(dr_nfindings, sizeof(*seen));
	char dir[PATH_MAX], *files[4], bad[96] = "", *man;
	struct dr_ctx *c;
	struct dirent *e;
	size_t len = 0;
	int nfix = 0;
	FILE *f;
	DIR *d;

	CHECK(seen, "calloc");
	/* the catalogue: ids unique, each "<check>.<what>" of a known check */
	for (size_t i = 0; i < dr_nfindings; i++) {
		const char *id = dr_findings[i].id, *dot = strchr(id, '.');
		int k;

		CHECK(dot && dot[1] && dr_findings[i].meaning[0], "catalogue entry %s", id);
		for (k = 0; k <= DR_C_RDMATEST; k++)
			if (strlen(dr_check_names[k]) == (size_t)(dot - id) &&
			    !strncmp(id, dr_check_names[k], (size_t)(dot - id)))
				break;
		CHECK(k <= DR_C_RDMATEST, "%s: no check is named %.*s", id, (int)(dot - id), id);
		CHECK(dr_finding(id) == &dr_findings[i], "%s catalogued twice", id);
	}

	/* every fixture: whatever doctor emits is catalogued */
	d = opendir(fx);
	CHECK(d, "%s: %s", fx, strerror(errno));
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || e->d_type != DT_DIR)
			continue;
		c = run(e->d_name);
		dt_catalogued(c, e->d_name, seen);
		dr_ctx_free(c);
		free(c);
		nfix++;
	}
	closedir(d);
	CHECK(nfix >= 40, "only %d fixtures in %s", nfix, fx);

	/* doctor compare of four fixtures' reports */
	dr_fmt(dir, sizeof(dir), "%s/.findings-%d", fx, getpid());
	CHECK(mkdir(dir, 0755) == 0, "%s: %s", dir, strerror(errno));
	for (int i = 0; i < 4; i++) {
		files[i] = dr_asprintf("%s/%s.json", dir, cmp[i]);
		sh("%s -j doctor --sysroot %s/%s > %s", ctl, fx, cmp[i], files[i]);
	}
	c = calloc(1, sizeof(*c));
	CHECK(c, "calloc");
	dr_ctx_init(c);
	CHECK(dr_compare(c, 4, files) == 0, "compare of %s ...", files[0]);
	dt_catalogued(c, "compare", seen);
	dr_ctx_free(c);
	free(c);
	for (int i = 0; i < 4; i++)
		free(files[i]);
	remove_copy(dir);

	/* what a fixture or a compare can reach, one of them reached */
	for (size_t i = 0; i < dr_nfindings; i++)
		CHECK(seen[i] || dr_findings[i].reach == DR_REACH_LIVE,
		      "%s (catalogued as reached %s) is emitted by no fixture: add one",
		      dr_findings[i].id,
		      dr_findings[i].reach == DR_REACH_COMPARE ? "by doctor compare" : "on a fixture");
	free(seen);

	/* the man page documents exactly the catalogue */
	f = fopen(DT_MAN, "r");
	CHECK(f, "%s: %s", DT_MAN, strerror(errno));
	man = NULL;
	CHECK(getdelim(&man, &len, '\0', f) > 0, "%s: empty", DT_MAN);
	fclose(f);
	for (size_t i = 0; i < dr_nfindings; i++)
		CHECK(dt_man_ids(man, dr_findings[i].id, NULL, 0) == 0,
		      "%s is catalogued but strixpeerctl-doctor(8) does not document it",
		      dr_findings[i].id);
	CHECK(dt_man_ids(man, NULL, bad, sizeof(bad)) == 0,
	      "strixpeerctl-doctor(8) documents %s, which is not catalogued", bad);
	free(man);
}

#endif /* SP_DOCTOR_TEST_DT_FINDINGS_H */
