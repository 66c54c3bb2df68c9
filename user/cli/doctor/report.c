// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the report. JSON goes through strixpeerctl's
 * printer (print.c); the text form is one line per result with its
 * advice below, wrapped for a terminal.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "../print.h"
#include "doctor.h"

#define WRAP 100

/* @text from column @col, continuation lines indented by @indent. */
static void wrap(const char *text, int col, int indent)
{
	const char *p = text;

	while (*p) {
		size_t word = strcspn(p, " ");

		if (col > indent && col + 1 + (int)word > WRAP) {
			printf("\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			putchar(' ');
			col++;
		}
		fwrite(p, 1, word, stdout);
		col += (int)word;
		p += word;
		while (*p == ' ')
			p++;
	}
	putchar('\n');
}

static void print_vals(const struct dr_result *r)
{
	for (size_t i = 0; i < r->nvals; i++) {
		const struct dr_val *v = &r->vals[i];

		switch (v->type) {
		case DR_V_STR:
			pr_str(v->key, v->key, v->s);
			break;
		case DR_V_INT:
			pr_s64(v->key, v->key, v->i);
			break;
		case DR_V_BOOL:
			pr_bool(v->key, v->key, v->i);
			break;
		case DR_V_NULL:
			pr_null(v->key, v->key, "unlimited");
			break;
		case DR_V_STRS:
			pr_arr_open(v->key, v->key);
			for (const char *p = v->s, *nl; *p; p = nl + 1) {
				char one[256];

				nl = strchr(p, '\n');
				snprintf(one, sizeof(one), "%.*s", (int)(nl - p), p);
				pr_str(NULL, v->key, one);
			}
			pr_arr_close();
			break;
		}
	}
}

static void print_json(const struct dr_ctx *c, int pretty)
{
	unsigned int count[DR_NSTATUS] = { 0 };

	if (pretty >= 0)
		pr_init(true, pretty);
	pr_obj_open(NULL);
	pr_obj_open("node");
	print_vals(&c->node);
	pr_obj_close();
	pr_arr_open("checks", NULL);
	for (size_t i = 0; i < c->nres; i++) {
		const struct dr_result *r = &c->res[i];

		count[r->status]++;
		pr_obj_open(NULL);
		pr_str("id", "id", r->id);
		pr_str("check", "check", r->check);
		pr_str("subject", "subject", r->subject);
		pr_str("status", "status", dr_status_name(r->status));
		pr_str("summary", "summary", r->summary);
		pr_obj_open("observed");
		print_vals(r);
		pr_obj_close();
		pr_str("advice", "advice", r->advice);
		pr_obj_close();
	}
	pr_arr_close();
	pr_obj_open("summary");
	for (int s = 0; s < DR_NSTATUS; s++)
		pr_u64(dr_status_name(s), dr_status_name(s), count[s]);
	pr_u64("exit", "exit", (uint64_t)dr_exit_status(c));
	pr_obj_close();
	pr_obj_close();
	pr_done();
}

void dr_print(const struct dr_ctx *c, bool json, int pretty)
{
	unsigned int count[DR_NSTATUS] = { 0 };
	const struct dr_val *host = dr_get(&c->node, "hostname");
	const struct dr_val *kern = dr_get(&c->node, "kernel");
	int ex = dr_exit_status(c);

	if (json) {
		print_json(c, pretty);
		return;
	}
	if (dr_get(&c->node, "reports"))
		printf("strixpeerctl doctor compare: %s\n\n", dr_get(&c->node, "reports")->s);
	else
		printf("strixpeerctl doctor: %s, kernel %s%s%s\n\n", host ? host->s : "?",
		       kern ? kern->s : "?", c->sysroot[0] ? ", sysroot " : "", c->sysroot);
	for (size_t i = 0; i < c->nres; i++) {
		const struct dr_result *r = &c->res[i];
		char head[256];
		int col;

		count[r->status]++;
		col = snprintf(head, sizeof(head), "%-4s  %-20s%s%s%s", dr_status_name(r->status),
			       r->id, r->subject[0] ? " " : "", r->subject, r->subject[0] ? ":" : "");
		fputs(head, stdout);
		wrap(r->summary, col < (int)sizeof(head) ? col : (int)sizeof(head) - 1, 6);
		if (r->advice) {
			const char *tag = r->status >= DR_WARN ? "fix:" : "tip:";

			printf("      %s ", tag);
			wrap(r->advice, 11, 11);
		}
	}
	printf("\n%u PASS, %u INFO, %u WARN, %u FAIL, %u SKIP: exit %d (%s)\n", count[DR_PASS],
	       count[DR_INFO], count[DR_WARN], count[DR_FAIL], count[DR_SKIP], ex,
	       ex == 2 ? "something is broken" : ex == 1 ? "something to fix" : "nothing to fix");
	fflush(stdout);
}
