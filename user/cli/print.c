// SPDX-License-Identifier: MIT
/*
 * strixpeerctl's printer: table or JSON from the same calls.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "print.h"

#define PR_MAX_DEPTH 16

static struct {
	bool json;
	bool pretty;
	int depth;
	bool need_comma[PR_MAX_DEPTH];
	bool in_array[PR_MAX_DEPTH];
} pr;

void pr_init(bool json, bool pretty)
{
	memset(&pr, 0, sizeof(pr));
	pr.json = json;
	pr.pretty = pretty;
}

static void pr_indent(int depth)
{
	for (int i = 0; i < depth; i++)
		fputs(pr.json ? "  " : "    ", stdout);
}

static void pr_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		switch (c) {
		case '"':
			fputs("\\\"", stdout);
			break;
		case '\\':
			fputs("\\\\", stdout);
			break;
		case '\n':
			fputs("\\n", stdout);
			break;
		case '\t':
			fputs("\\t", stdout);
			break;
		default:
			if (c < 0x20)
				printf("\\u%04x", c);
			else
				putchar(c);
		}
	}
	putchar('"');
}

/* JSON: separator, newline/indent and "key": before a value. */
static void pr_json_key(const char *key)
{
	if (pr.depth > 0 && pr.need_comma[pr.depth])
		putchar(',');
	if (pr.pretty && pr.depth > 0) {
		putchar('\n');
		pr_indent(pr.depth);
	}
	if (pr.depth > 0)
		pr.need_comma[pr.depth] = true;
	if (key && !(pr.depth > 0 && pr.in_array[pr.depth])) {
		pr_json_string(key);
		fputs(pr.pretty ? ": " : ":", stdout);
	}
}

static void pr_open(const char *key, bool array)
{
	if (pr.json) {
		pr_json_key(key);
		putchar(array ? '[' : '{');
	} else if (key && pr.depth > 0) {
		pr_indent(pr.depth - 1);
		printf("%s:\n", key);
	}
	if (pr.depth + 1 < PR_MAX_DEPTH) {
		pr.depth++;
		pr.need_comma[pr.depth] = false;
		pr.in_array[pr.depth] = array;
	}
}

static void pr_close(bool array)
{
	bool had = pr.need_comma[pr.depth];

	if (pr.depth > 0)
		pr.depth--;
	if (pr.json) {
		if (pr.pretty && had) {
			putchar('\n');
			pr_indent(pr.depth);
		}
		putchar(array ? ']' : '}');
	} else if (array || pr.depth == 1) {
		putchar('\n');
	}
}

void pr_obj_open(const char *key)
{
	pr_open(key, false);
}

void pr_obj_close(void)
{
	pr_close(false);
}

void pr_arr_open(const char *key)
{
	pr_open(key, true);
}

void pr_arr_close(void)
{
	pr_close(true);
}

static void pr_label(const char *label)
{
	pr_indent(pr.depth > 0 ? pr.depth - 1 : 0);
	printf("%-22s ", label);
}

void pr_str(const char *key, const char *label, const char *val)
{
	if (pr.json) {
		pr_json_key(key);
		if (val)
			pr_json_string(val);
		else
			fputs("null", stdout);
		return;
	}
	pr_label(label);
	printf("%s\n", val ? val : "-");
}

void pr_u64(const char *key, const char *label, uint64_t val)
{
	if (pr.json) {
		pr_json_key(key);
		printf("%" PRIu64, val);
		return;
	}
	pr_label(label);
	printf("%" PRIu64 "\n", val);
}

void pr_s64(const char *key, const char *label, int64_t val)
{
	if (pr.json) {
		pr_json_key(key);
		printf("%" PRId64, val);
		return;
	}
	pr_label(label);
	printf("%" PRId64 "\n", val);
}

void pr_bool(const char *key, const char *label, bool val)
{
	if (pr.json) {
		pr_json_key(key);
		fputs(val ? "true" : "false", stdout);
		return;
	}
	pr_label(label);
	printf("%s\n", val ? "yes" : "no");
}

void pr_bytes(const char *key, const char *label, uint64_t val)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)val;
	unsigned int u = 0;

	if (pr.json) {
		pr_u64(key, label, val);
		return;
	}
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	pr_label(label);
	if (u == 0)
		printf("%" PRIu64 " B\n", val);
	else
		printf("%.1f %s\n", v, units[u]);
}

void pr_done(void)
{
	if (pr.json)
		putchar('\n');
	fflush(stdout);
}
