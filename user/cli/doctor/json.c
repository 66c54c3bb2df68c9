// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: a small strict JSON reader for doctor compare (RFC 8259:
 * objects, arrays, strings with escapes, numbers, true/false/null).
 * Errors name the line and column; nesting is limited.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

#define MAX_DEPTH 64

struct jp {
	const char *s, *end, *p;
	char *err;
	size_t errlen;
	bool failed;
};

static void jerr(struct jp *j, const char *what)
{
	int line = 1, col = 1;

	if (j->failed)
		return;
	j->failed = true;
	for (const char *q = j->s; q < j->p && q < j->end; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	snprintf(j->err, j->errlen, "line %d, column %d: %s", line, col, what);
}

static void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static bool lit(struct jp *j, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(j->end - j->p) < n || strncmp(j->p, word, n))
		return false;
	j->p += n;
	return true;
}

static void put_utf8(char *out, size_t *o, unsigned int cp)
{
	if (cp < 0x80) {
		out[(*o)++] = (char)cp;
	} else if (cp < 0x800) {
		out[(*o)++] = (char)(0xc0 | cp >> 6);
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		out[(*o)++] = (char)(0xe0 | cp >> 12);
		out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		out[(*o)++] = (char)(0xf0 | cp >> 18);
		out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
		out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	}
}

static int hex4(struct jp *j, unsigned int *cp)
{
	char buf[5];
	char *end;

	if (j->end - j->p < 4)
		return -1;
	memcpy(buf, j->p, 4);
	buf[4] = '\0';
	for (int i = 0; i < 4; i++)
		if (!isxdigit((unsigned char)buf[i]))
			return -1;
	*cp = (unsigned int)strtoul(buf, &end, 16);
	j->p += 4;
	return 0;
}

static char *jstring(struct jp *j)
{
	const char *start = ++j->p;	/* after the quote */
	char *out;
	size_t o = 0;

	/* the decoded string is never longer than the source */
	while (j->p < j->end && *j->p != '"') {
		if (*j->p == '\\')
			j->p++;
		j->p++;
	}
	if (j->p >= j->end) {
		jerr(j, "unterminated string");
		return NULL;
	}
	out = dr_alloc((size_t)(j->p - start) + 4);
	j->p = start;
	while (*j->p != '"') {
		unsigned char ch = (unsigned char)*j->p++;
		unsigned int cp, lo;

		if (ch < 0x20) {
			jerr(j, "control character in a string");
			free(out);
			return NULL;
		}
		if (ch != '\\') {
			out[o++] = (char)ch;
			continue;
		}
		switch (*j->p++) {
		case '"': out[o++] = '"'; break;
		case '\\': out[o++] = '\\'; break;
		case '/': out[o++] = '/'; break;
		case 'b': out[o++] = '\b'; break;
		case 'f': out[o++] = '\f'; break;
		case 'n': out[o++] = '\n'; break;
		case 'r': out[o++] = '\r'; break;
		case 't': out[o++] = '\t'; break;
		case 'u':
			if (hex4(j, &cp)) {
				jerr(j, "bad \\u escape");
				free(out);
				return NULL;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && j->end - j->p >= 6 && j->p[0] == '\\' &&
			    j->p[1] == 'u') {
				j->p += 2;
				if (hex4(j, &lo) || lo < 0xdc00 || lo > 0xdfff) {
					jerr(j, "bad surrogate pair");
					free(out);
					return NULL;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (cp == 0)
				cp = '?';	/* no NULs inside C strings */
			put_utf8(out, &o, cp);
			break;
		default:
			jerr(j, "bad escape");
			free(out);
			return NULL;
		}
	}
	j->p++;
	out[o] = '\0';
	return out;
}

static bool jvalue(struct jp *j, struct dr_json *v, int depth);

static bool jitems(struct jp *j, struct dr_json *v, int depth, bool obj)
{
	size_t cap = 0;
	char close = obj ? '}' : ']';

	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return true;
	}
	for (;;) {
		struct dr_json item = { 0 };
		char *key = NULL;

		ws(j);
		if (obj) {
			if (j->p >= j->end || *j->p != '"') {
				jerr(j, "expected a member name");
				return false;
			}
			key = jstring(j);
			if (!key)
				return false;
			ws(j);
			if (j->p >= j->end || *j->p != ':') {
				free(key);
				jerr(j, "expected ':'");
				return false;
			}
			j->p++;
		}
		if (!jvalue(j, &item, depth + 1)) {
			free(key);
			dr_json_free_kids(&item);
			return false;
		}
		item.key = key;
		if (v->nkids == cap) {
			struct dr_json *k;

			cap = cap ? cap * 2 : 8;
			k = realloc(v->kids, cap * sizeof(*k));
			if (!k) {
				free(key);
				dr_json_free_kids(&item);
				jerr(j, "out of memory");
				return false;
			}
			v->kids = k;
		}
		v->kids[v->nkids++] = item;
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return true;
		}
		jerr(j, obj ? "expected ',' or '}'" : "expected ',' or ']'");
		return false;
	}
}

static bool jvalue(struct jp *j, struct dr_json *v, int depth)
{
	ws(j);
	if (depth > MAX_DEPTH) {
		jerr(j, "nested too deeply");
		return false;
	}
	if (j->p >= j->end) {
		jerr(j, "unexpected end of input");
		return false;
	}
	switch (*j->p) {
	case '{':
		v->type = DR_J_OBJ;
		return jitems(j, v, depth, true);
	case '[':
		v->type = DR_J_ARR;
		return jitems(j, v, depth, false);
	case '"':
		v->type = DR_J_STR;
		v->s = jstring(j);
		return v->s != NULL;
	case 't':
	case 'f':
	case 'n':
		if (lit(j, "true") || lit(j, "false")) {
			v->type = DR_J_BOOL;
			v->b = j->p[-1] == 'e' && j->p[-2] == 'u';
			return true;
		}
		if (lit(j, "null")) {
			v->type = DR_J_NULL;
			return true;
		}
		break;
	default: {
		char buf[64], *end;
		size_t n = 0;

		while (j->p + n < j->end && n < sizeof(buf) - 1 && strchr("+-0123456789.eE", j->p[n]))
			n++;
		if (!n)
			break;
		memcpy(buf, j->p, n);
		buf[n] = '\0';
		errno = 0;
		v->n = strtod(buf, &end);
		if (*end || errno || (buf[0] == '0' && isdigit((unsigned char)buf[1])) ||
		    buf[0] == '+' || buf[0] == '.') {
			jerr(j, "bad number");
			return false;
		}
		v->type = DR_J_NUM;
		j->p += n;
		return true;
	}
	}
	jerr(j, "unexpected character");
	return false;
}

void dr_json_free_kids(struct dr_json *v)
{
	for (size_t i = 0; i < v->nkids; i++) {
		dr_json_free_kids(&v->kids[i]);
		free(v->kids[i].key);
	}
	free(v->kids);
	free(v->s);
	v->kids = NULL;
	v->s = NULL;
	v->nkids = 0;
}

struct dr_json *dr_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct jp j = { text, text + len, text, err, errlen, false };
	struct dr_json *v = dr_alloc(sizeof(*v));

	err[0] = '\0';
	if (memchr(text, '\0', len)) {
		snprintf(err, errlen, "a NUL byte in the input: not JSON text");
		free(v);
		return NULL;
	}
	if (jvalue(&j, v, 0)) {
		ws(&j);
		if (j.p == j.end)
			return v;
		jerr(&j, "text after the JSON value");
	}
	dr_json_free(v);
	return NULL;
}

void dr_json_free(struct dr_json *j)
{
	if (!j)
		return;
	dr_json_free_kids(j);
	free(j);
}

const struct dr_json *dr_json_get(const struct dr_json *obj, const char *key)
{
	if (!obj || obj->type != DR_J_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->nkids; i++)
		if (!strcmp(obj->kids[i].key, key))
			return &obj->kids[i];
	return NULL;
}

const char *dr_json_str(const struct dr_json *obj, const char *key)
{
	const struct dr_json *v = dr_json_get(obj, key);

	return v && v->type == DR_J_STR ? v->s : NULL;
}
