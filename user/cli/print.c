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
	bool rows[PR_MAX_DEPTH];	/* table: array of objects (rows) */
	bool inline_first;	/* table: next array item is the line's first */
	/* table: an object inside an array is a row of a column table */
	bool row;		/* collecting a row */
	bool header_done;	/* the column header was printed */
	char hdr[512];
	char line[512];
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

static void pr_label(const char *label);

static void pr_open(const char *key, const char *label, bool array)
{
	if (pr.json) {
		pr_json_key(key);
		putchar(array ? '[' : '{');
	} else if (array) {
		/* table: an array of scalars is one "label: a, b, c" line... */
		if (label) {
			pr_label(label);
			pr.inline_first = true;
		} else {
			/* ...an array without label holds rows */
			pr.header_done = false;
		}
	} else if (pr.depth > 0 && pr.in_array[pr.depth]) {
		pr.row = true;
		pr.hdr[0] = pr.line[0] = '\0';
	} else if (key && pr.depth > 0) {
		pr_indent(pr.depth - 1);
		printf("%s:\n", label);
	}
	if (pr.depth + 1 < PR_MAX_DEPTH) {
		pr.depth++;
		pr.need_comma[pr.depth] = false;
		pr.in_array[pr.depth] = array;
		pr.rows[pr.depth] = array && !label;
	}
}

static void pr_close(bool array)
{
	bool had = pr.need_comma[pr.depth];
	bool rows = pr.rows[pr.depth];

	if (pr.depth > 0)
		pr.depth--;
	if (pr.json) {
		if (pr.pretty && had) {
			putchar('\n');
			pr_indent(pr.depth);
		}
		putchar(array ? ']' : '}');
	} else if (array) {
		if (!rows)
			putchar('\n');	/* ends the "label  a, b, c" line */
	} else if (pr.row) {
		if (!pr.header_done)
			printf("%s\n", pr.hdr);
		pr.header_done = true;
		printf("%s\n", pr.line);
		pr.row = false;
	} else if (pr.depth == 1) {
		putchar('\n');		/* blank line after a section */
	}
}

/* Table row: one column, width from the label. */
static bool pr_cell(const char *label, const char *text)
{
	size_t w = strlen(label) > 8 ? strlen(label) : 8, n;

	if (!pr.row)
		return false;
	n = strlen(pr.hdr);
	snprintf(pr.hdr + n, sizeof(pr.hdr) - n, "%-*s ", (int)w, label);
	n = strlen(pr.line);
	snprintf(pr.line + n, sizeof(pr.line) - n, "%-*s ", (int)w, text);
	return true;
}

void pr_obj_open(const char *key)
{
	pr_open(key, key, false);
}

void pr_obj_close(void)
{
	pr_close(false);
}

void pr_arr_open(const char *key, const char *label)
{
	pr_open(key, label, true);
}

void pr_arr_close(void)
{
	pr_close(true);
}

/* Table: the start of a "label  value" line, or the next item of an array. */
static void pr_label(const char *label)
{
	if (pr.depth > 0 && pr.in_array[pr.depth]) {
		if (!pr.inline_first)
			fputs(", ", stdout);
		pr.inline_first = false;
		return;
	}
	pr_indent(pr.depth > 0 ? pr.depth - 1 : 0);
	printf("%-22s ", label);
}

/* Table: end of a scalar's line (array items stay on their line). */
static void pr_eol(void)
{
	if (!(pr.depth > 0 && pr.in_array[pr.depth]))
		putchar('\n');
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
	if (pr_cell(label, val ? val : "-"))
		return;
	pr_label(label);
	fputs(val ? val : "-", stdout);
	pr_eol();
}

void pr_u64(const char *key, const char *label, uint64_t val)
{
	char text[32];

	if (pr.json) {
		pr_json_key(key);
		printf("%" PRIu64, val);
		return;
	}
	snprintf(text, sizeof(text), "%" PRIu64, val);
	if (pr_cell(label, text))
		return;
	pr_label(label);
	fputs(text, stdout);
	pr_eol();
}

void pr_s64(const char *key, const char *label, int64_t val)
{
	char text[32];

	if (pr.json) {
		pr_json_key(key);
		printf("%" PRId64, val);
		return;
	}
	snprintf(text, sizeof(text), "%" PRId64, val);
	if (pr_cell(label, text))
		return;
	pr_label(label);
	fputs(text, stdout);
	pr_eol();
}

void pr_bool(const char *key, const char *label, bool val)
{
	if (pr.json) {
		pr_json_key(key);
		fputs(val ? "true" : "false", stdout);
		return;
	}
	if (pr_cell(label, val ? "yes" : "no"))
		return;
	pr_label(label);
	fputs(val ? "yes" : "no", stdout);
	pr_eol();
}

void pr_bytes(const char *key, const char *label, uint64_t val)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)val;
	unsigned int u = 0;
	char text[32];

	if (pr.json) {
		pr_u64(key, label, val);
		return;
	}
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(text, sizeof(text), "%" PRIu64 " B", val);
	else
		snprintf(text, sizeof(text), "%.1f %s", v, units[u]);
	if (pr_cell(label, text))
		return;
	pr_label(label);
	fputs(text, stdout);
	pr_eol();
}

void pr_done(void)
{
	if (pr.json)
		putchar('\n');
	fflush(stdout);
}
