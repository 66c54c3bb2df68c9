// SPDX-License-Identifier: MIT
/*
 * strixpeerctl's printer: table or JSON from the same calls.
 *
 * JSON is written as it comes. A table is held back until its widths are
 * known, so that no value ever runs into the next column: the "label value"
 * lines of a section are aligned on their longest label when the section
 * ends (or a nested one starts), and the rows of a column table are printed
 * when the table ends, each column as wide as its widest cell.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "print.h"

#define PR_MAX_DEPTH 16

/* Table: one pending "label value" line of a section. */
struct pr_line {
	int indent;
	char *label;
	char *value;
};

/* Table: the rows of a column table; the first row names the columns. */
struct pr_row {
	char **cells;
	size_t n;
};

struct pr_rows {
	char **labels;
	size_t ncols;
	struct pr_row *rows;
	size_t nrows, cap;
};

static struct {
	bool json;
	bool pretty;
	int depth;
	bool need_comma[PR_MAX_DEPTH];
	bool in_array[PR_MAX_DEPTH];
	bool rows[PR_MAX_DEPTH];	/* table: array of objects (rows) */
	bool row;			/* table: collecting a row */
	struct pr_line *lines;		/* table: the section's pending lines */
	size_t nlines, lines_cap;
	struct pr_line *inline_arr;	/* table: "label a, b, c" being filled */
	struct pr_rows table;
} pr;

static void *pr_alloc(void *p, size_t n, size_t size)
{
	p = reallocarray(p, n, size);
	if (!p) {
		fputs("strixpeerctl: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static char *pr_strdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(pr_alloc(NULL, n, 1), s, n);
}

static void pr_table_reset(void)
{
	for (size_t i = 0; i < pr.table.ncols; i++)
		free(pr.table.labels[i]);
	for (size_t r = 0; r < pr.table.nrows; r++) {
		for (size_t i = 0; i < pr.table.rows[r].n; i++)
			free(pr.table.rows[r].cells[i]);
		free(pr.table.rows[r].cells);
	}
	free(pr.table.labels);
	free(pr.table.rows);
	memset(&pr.table, 0, sizeof(pr.table));
}

static void pr_lines_reset(void)
{
	for (size_t i = 0; i < pr.nlines; i++) {
		free(pr.lines[i].label);
		free(pr.lines[i].value);
	}
	pr.nlines = 0;
	pr.inline_arr = NULL;
}

void pr_init(bool json, bool pretty)
{
	pr_lines_reset();
	free(pr.lines);
	pr_table_reset();
	memset(&pr, 0, sizeof(pr));
	pr.json = json;
	pr.pretty = pretty;
}

static void pr_indent(int depth)
{
	for (int i = 0; i < depth; i++)
		fputs(pr.json ? "  " : "    ", stdout);
}

/*
 * Table: print the pending lines, values aligned one column after the
 * longest label (labels never overflow: the column is as wide as they are).
 */
static void pr_flush_lines(void)
{
	size_t w = 0;

	for (size_t i = 0; i < pr.nlines; i++)
		if (strlen(pr.lines[i].label) > w)
			w = strlen(pr.lines[i].label);
	for (size_t i = 0; i < pr.nlines; i++) {
		pr_indent(pr.lines[i].indent);
		printf("%-*s  %s\n", (int)w, pr.lines[i].label, pr.lines[i].value);
	}
	pr_lines_reset();
}

static struct pr_line *pr_add_line(const char *label, const char *value)
{
	struct pr_line *l;

	if (pr.nlines == pr.lines_cap) {
		pr.lines_cap = pr.lines_cap ? 2 * pr.lines_cap : 16;
		pr.lines = pr_alloc(pr.lines, pr.lines_cap, sizeof(*pr.lines));
	}
	l = &pr.lines[pr.nlines++];
	l->indent = pr.depth > 0 ? pr.depth - 1 : 0;
	l->label = pr_strdup(label ? label : "");
	l->value = pr_strdup(value);
	return l;
}

/* Table: print the collected rows, each column as wide as its widest cell. */
static const char *pr_cell_text(size_t r, size_t c)
{
	if (r == 0)
		return pr.table.labels[c];
	if (c < pr.table.rows[r - 1].n)
		return pr.table.rows[r - 1].cells[c];
	return "-";
}

static void pr_flush_table(void)
{
	struct pr_rows *t = &pr.table;
	size_t *w = pr_alloc(NULL, t->ncols ? t->ncols : 1, sizeof(*w));

	for (size_t c = 0; c < t->ncols; c++) {
		w[c] = 0;
		for (size_t r = 0; r <= t->nrows; r++)
			if (strlen(pr_cell_text(r, c)) > w[c])
				w[c] = strlen(pr_cell_text(r, c));
	}
	for (size_t r = 0; t->ncols && t->nrows && r <= t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++)
			if (c + 1 < t->ncols)
				printf("%-*s  ", (int)w[c], pr_cell_text(r, c));
			else
				printf("%s\n", pr_cell_text(r, c));
	free(w);
	pr_table_reset();
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

static void pr_open(const char *key, const char *label, bool array)
{
	if (pr.json) {
		pr_json_key(key);
		putchar(array ? '[' : '{');
	} else if (array) {
		if (label) {
			/* an array of scalars is one "label  a, b, c" line... */
			pr.inline_arr = pr_add_line(label, "");
		} else {
			/* ...an array without label holds rows */
			pr_flush_lines();
			pr_table_reset();
		}
	} else if (pr.depth > 0 && pr.in_array[pr.depth]) {
		pr.row = true;		/* an object in an array: a row */
		if (pr.table.nrows == pr.table.cap) {
			pr.table.cap = pr.table.cap ? 2 * pr.table.cap : 64;
			pr.table.rows = pr_alloc(pr.table.rows, pr.table.cap,
						 sizeof(*pr.table.rows));
		}
		pr.table.rows[pr.table.nrows++] = (struct pr_row){ NULL, 0 };
	} else if (key && pr.depth > 0) {
		pr_flush_lines();
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
		if (rows)
			pr_flush_table();
		pr.inline_arr = NULL;
	} else if (pr.row) {
		pr.row = false;
	} else if (pr.depth == 1) {
		pr_flush_lines();
		putchar('\n');		/* blank line after a section */
	} else {
		pr_flush_lines();
	}
}

/* Table: one cell of the current row; the first row names the columns. */
static bool pr_cell(const char *label, const char *text)
{
	struct pr_rows *t = &pr.table;
	struct pr_row *row;

	if (!pr.row)
		return false;
	row = &t->rows[t->nrows - 1];
	if (t->nrows == 1) {
		t->labels = pr_alloc(t->labels, t->ncols + 1, sizeof(*t->labels));
		t->labels[t->ncols++] = pr_strdup(label);
	}
	row->cells = pr_alloc(row->cells, row->n + 1, sizeof(*row->cells));
	row->cells[row->n++] = pr_strdup(text);
	return true;
}

void pr_obj_open(const char *key)
{
	pr_open(key, key, false);
}

void pr_obj_open_label(const char *key, const char *label)
{
	pr_open(key, label ? label : key, false);
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

/* Table: a scalar's "label value" line, or the next item of an array. */
static void pr_text(const char *label, const char *text)
{
	if (pr_cell(label, text))
		return;
	if (pr.inline_arr && pr.depth > 0 && pr.in_array[pr.depth]) {
		struct pr_line *l = pr.inline_arr;
		size_t n = strlen(l->value);

		l->value = pr_alloc(l->value, n + strlen(text) + 3, 1);
		sprintf(l->value + n, "%s%s", n ? ", " : "", text);
		return;
	}
	pr_add_line(label, text);
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
	pr_text(label, val ? val : "-");
}

void pr_null(const char *key, const char *label, const char *text)
{
	if (pr.json) {
		pr_json_key(key);
		fputs("null", stdout);
		return;
	}
	pr_text(label, text);
}

void pr_number(const char *key, const char *label, const char *text)
{
	if (pr.json) {
		pr_json_key(key);
		fputs(text, stdout);
		return;
	}
	pr_text(label, text);
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
	pr_text(label, text);
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
	pr_text(label, text);
}

void pr_bool(const char *key, const char *label, bool val)
{
	if (pr.json) {
		pr_json_key(key);
		fputs(val ? "true" : "false", stdout);
		return;
	}
	pr_text(label, val ? "yes" : "no");
}

void pr_format_bytes(char *text, size_t size, uint64_t val)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)val;
	unsigned int u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(text, size, "%" PRIu64 " B", val);
	else if (v == (double)(uint64_t)v)
		snprintf(text, size, "%.0f %s", v, units[u]);
	else
		snprintf(text, size, "%.1f %s", v, units[u]);
}

void pr_bytes(const char *key, const char *label, uint64_t val)
{
	char text[32];

	if (pr.json) {
		pr_u64(key, label, val);
		return;
	}
	pr_format_bytes(text, sizeof(text), val);
	pr_text(label, text);
}

void pr_done(void)
{
	if (pr.json) {
		putchar('\n');
	} else {
		if (pr.table.nrows)
			pr_flush_table();
		pr_flush_lines();
	}
	fflush(stdout);
}
