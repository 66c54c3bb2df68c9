// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the run. The context (sysroot, --only, accepted
 * findings) and dr_run(), which gathers the node's facts and calls every
 * wanted check in order. The checks build their results in result.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"
#include "strixpeer.h"

void dr_ctx_init(struct dr_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->live = true;
	c->interval_ms = 1000;
	c->node.check = "node";
	c->node.id = dr_strdup("node");
	c->node.subject = dr_strdup("");
}

/*
 * Every path the checks read is sysroot + an absolute path. "/" (or a path
 * that resolves to it) means the running system, and only then do the live
 * probes run.
 */
int dr_ctx_set_sysroot(struct dr_ctx *c, const char *sysroot)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(sysroot, real) || stat(real, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (access(real, R_OK | X_OK) < 0)
		return -errno;
	if (!strcmp(real, "/")) {
		c->sysroot[0] = '\0';
		c->live = true;
		c->kallsyms_read = false;
		return 0;
	}
	if (strlen(real) >= sizeof(c->sysroot) - 256)
		return -ENAMETOOLONG;
	strcpy(c->sysroot, real);
	c->live = false;
	c->kallsyms_read = false;	/* another tree's kallsyms */
	return 0;
}

void dr_ctx_free(struct dr_ctx *c)
{
	for (size_t i = 0; i < c->nres; i++)
		dr_result_free(&c->res[i]);
	dr_result_free(&c->node);
	free(c->res);
	free(c->ports);
	free(c->only_ids);
	c->only_ids = NULL;
	for (size_t i = 0; i < c->naccept; i++)
		free(c->accept[i]);
	free(c->accept);
	c->accept = NULL;
	c->naccept = 0;
	c->res = NULL;
	c->ports = NULL;
	c->nres = c->cap = c->nports = 0;
}

bool dr_want(const struct dr_ctx *c, enum dr_check check)
{
	return !c->only || (c->only & (1U << check));
}

/* "rdma,mtu": the checks' bits; -EINVAL on an unknown name. */
int dr_parse_only(const char *list, unsigned int *mask)
{
	char *copy = dr_strdup(list), *save = NULL, *w;
	int ret = 0;

	*mask = 0;
	for (w = strtok_r(copy, ", ", &save); w; w = strtok_r(NULL, ", ", &save)) {
		int i;

		for (i = 0; i < DR_NCHECKS; i++)
			if (!strcmp(w, dr_check_names[i]))
				break;
		if (i == DR_NCHECKS) {
			ret = -EINVAL;
			break;
		}
		*mask |= 1U << i;
	}
	free(copy);
	if (!ret && !*mask)
		ret = -EINVAL;
	return ret;
}

/*
 * --only with check ids as the report prints them ("pcie.link") as well as
 * whole checks ("pcie"): the checks to run, and the ids to keep of them.
 */
int dr_parse_only_ids(struct dr_ctx *c, const char *list)
{
	char *copy = dr_strdup(list), *save = NULL, *w;
	size_t len = strlen(list) + 3;
	int ret = 0;

	free(c->only_ids);
	c->only_ids = dr_alloc(len);
	strcpy(c->only_ids, ",");
	c->only = c->only_whole = 0;
	for (w = strtok_r(copy, ", ", &save); w; w = strtok_r(NULL, ", ", &save)) {
		char *dot = strchr(w, '.');
		int i;

		if (dot)
			*dot = '\0';
		for (i = 0; i < DR_NCHECKS; i++)
			if (!strcmp(w, dr_check_names[i]))
				break;
		if (i == DR_NCHECKS || (dot && !dot[1])) {
			ret = -EINVAL;
			break;
		}
		c->only |= 1U << i;
		if (!dot) {
			c->only_whole |= 1U << i;
			continue;
		}
		*dot = '.';
		strcat(c->only_ids, w);
		strcat(c->only_ids, ",");
	}
	free(copy);
	if (!ret && !c->only)
		ret = -EINVAL;
	return ret;
}

/* Drop the results of checks --only named by id that are not those ids. */
void dr_filter_only(struct dr_ctx *c)
{
	size_t i, j;

	if (!c->only_ids || !c->only_ids[1])
		return;
	for (i = j = 0; i < c->nres; i++) {
		struct dr_result *r = &c->res[i];
		char key[256];
		int k;

		for (k = 0; k < DR_NCHECKS; k++)
			if (!strcmp(r->check, dr_check_names[k]))
				break;
		snprintf(key, sizeof(key), ",%s,", r->id);
		if (k == DR_NCHECKS || (c->only_whole & (1U << k)) || strstr(c->only_ids, key))
			c->res[j++] = *r;
		else
			dr_result_free(r);
	}
	c->nres = j;
}

/* An accepted finding: "ID" (every one of that id) or "ID=SUBJECT". */
void dr_accept_add(struct dr_ctx *c, const char *spec)
{
	char **n = realloc(c->accept, (c->naccept + 1) * sizeof(*n));

	if (!n) {
		fputs("strixpeerctl doctor: out of memory\n", stderr);
		exit(DR_EXIT_USAGE);
	}
	c->accept = n;
	c->accept[c->naccept++] = dr_strdup(spec);
}

/*
 * The accepted-findings file (/etc/strixpeer/doctor.conf below the
 * sysroot): one "accept ID[=SUBJECT]" per line, # comments. A missing file
 * is no error (returns 0); an unreadable one or a bad line: -errno.
 */
int dr_accept_file(struct dr_ctx *c, const char *path)
{
	char full[8192], line[512];
	int lineno = 0, ret = 0;
	FILE *f;

	snprintf(full, sizeof(full), "%s%s", c->sysroot, path);
	f = fopen(full, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;

		lineno++;
		line[strcspn(line, "#\n")] = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		end = p + strlen(p);
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (!*p)
			continue;
		if (strncmp(p, "accept", 6) || (p[6] != ' ' && p[6] != '\t')) {
			fprintf(stderr, "strixpeerctl doctor: %s:%d: expected \"accept ID[=SUBJECT]\": %s\n",
				full, lineno, p);
			ret = -EINVAL;
			continue;
		}
		p += 6;
		while (*p == ' ' || *p == '\t')
			p++;
		dr_accept_add(c, p);
	}
	fclose(f);
	return ret;
}

/* Whether @word is @subject or one of its space-separated words. */
static bool subject_has(const char *subject, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = subject; p && *p; p = strchr(p, ' '), p = p ? p + 1 : NULL)
		if (!strncmp(p, word, len) && (p[len] == ' ' || !p[len]))
			return true;
	return false;
}

/* An accepted WARN becomes INFO, still printed, saying it was accepted. */
void dr_apply_accepted(struct dr_ctx *c)
{
	for (size_t i = 0; i < c->nres; i++) {
		struct dr_result *r = &c->res[i];

		if (r->status != DR_WARN)
			continue;
		for (size_t k = 0; k < c->naccept; k++) {
			const char *a = c->accept[k], *eq = strchr(a, '=');
			size_t idlen = eq ? (size_t)(eq - a) : strlen(a);

			if (strlen(r->id) != idlen || strncmp(r->id, a, idlen) ||
			    (eq && !subject_has(r->subject, eq + 1)))
				continue;
			r->status = DR_INFO;
			dr_bool(r, "accepted", true);
			dr_set_summary(r, "%s (accepted: %s)", r->summary, a);
			break;
		}
	}
}

/*
 * The node's identity: what doctor compare sets side by side, whichever checks
 * --only picks (the checks add what they find on the way: abi, memlock).
 */
static void node_facts(struct dr_ctx *c)
{
	char buf[512], **peers = NULL;
	int n;

	if (dr_read(c, buf, sizeof(buf), "/proc/sys/kernel/hostname") == 0)
		dr_str(&c->node, "hostname", buf);
	if (dr_kernel_release(c, buf, sizeof(buf)) == 0)
		dr_str(&c->node, "kernel", buf);
	dr_str(&c->node, "sysroot", c->sysroot[0] ? c->sysroot : "/");
	dr_str(&c->node, "library", sp_lib_version());
	if (dr_read(c, buf, sizeof(buf), "/sys/module/strixpeer/version") == 0)
		dr_str(&c->node, "module", buf);
	if (dr_read(c, buf, sizeof(buf), "/sys/module/strixpeer/parameters/peer_client_name") == 0)
		dr_str(&c->node, "peer_client_name", buf);
	n = dr_list(c, &peers, "/sys/kernel/mm/memory_peers");
	if (n >= 0)
		dr_strs(&c->node, "peer_clients", peers, n);
	dr_list_free(peers, n);
}

void dr_run(struct dr_ctx *c)
{
#define DR_CHECK_FN(up, name) [DR_C_##up] = dr_check_##name,
	static void (*const checks[DR_NCHECKS])(struct dr_ctx *) = {
		DR_CHECKS(DR_CHECK_FN)
	};
#undef DR_CHECK_FN

	node_facts(c);
	dr_scan_ports(c);
	for (int i = 0; i < DR_NCHECKS; i++)
		if (dr_want(c, i))
			checks[i](c);
}
