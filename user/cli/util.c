// SPDX-License-Identifier: MIT
/*
 * What every strixpeerctl object shares: the global options, word matching
 * and dispatch, usage and usage errors, the library's errors, and the one
 * parser of sizes, booleans and NUMA nodes (doctor and bench use it too).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "strixpeer.h"
#include "util.h"

bool cli_json;
bool cli_timestamps;

bool is_help(const char *word)
{
	return !strcmp(word, "help") || !strcmp(word, "-h") || !strcmp(word, "--help");
}


/* An object's usage on stdout (help is text: -j is refused). */
int print_usage(const char *usage)
{
	const char *u = usage, *nl;

	if (cli_json) {
		fprintf(stderr, "strixpeerctl: help has no JSON form (-j)\n");
		return 2;
	}
	for (bool first = true; *u; u = nl + 1, first = false) {
		nl = strchr(u, '\n');	/* every line ends with one */
		if (!strncmp(u, "strixpeerctl", 12))
			fputs(first ? "usage: " : "       ", stdout);
		fwrite(u, 1, (size_t)(nl - u) + 1, stdout);
	}
	return 0;
}

/* A usage error: what is wrong, and where help is. Exit status 2. */
int bad_usage(const char *object, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "strixpeerctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see \"strixpeerctl %s%shelp\"\n", object ? object : "",
		object ? " " : "");
	return 2;
}

/* No arguments beyond the first @max are allowed. */
int extra_args(const char *object, int argc, char **argv, int max)
{
	if (argc <= max)
		return 0;
	return bad_usage(object, "unexpected argument \"%s\"", argv[max]);
}

/*
 * The entry of @table (an array of structs whose first member is the name,
 * ended by a NULL name) that @word names: its exact name, else the only
 * name it begins. NULL, with a message saying why, when none or several do.
 */
const void *find_word(const char *what, const char *object, const char *word,
			     const void *table, size_t stride)
{
	const char *p, *hit = NULL;
	size_t len = strlen(word);
	int n = 0;

	for (p = table; *(const char *const *)p; p += stride) {
		const char *name = *(const char *const *)p;

		if (!strcmp(word, name))
			return p;
		if (len && !strncmp(word, name, len)) {
			hit = p;
			n++;
		}
	}
	if (n == 1)
		return hit;
	if (n == 0) {
		fprintf(stderr, "strixpeerctl: unknown %s \"%s\"; see \"strixpeerctl %s%shelp\"\n",
			what, word, object ? object : "", object ? " " : "");
		return NULL;
	}
	fprintf(stderr, "strixpeerctl: ambiguous %s \"%s\": could be ", what, word);
	for (p = table; *(const char *const *)p; p += stride)
		if (!strncmp(word, *(const char *const *)p, len))
			fprintf(stderr, "%s%s", *(const char *const *)p, --n == 0 ? "\n" :
				n == 1 ? " or " : ", ");
	return NULL;
}

/* OBJECT COMMAND [args]: the command, "help", or the default (the first). */
int dispatch(const struct cmd *cmds, const char *object, const char *usage, int argc,
	     char **argv)
{
	const struct cmd *c;

	if (argc < 1)
		return cmds[0].fn(argc, argv);
	if (is_help(argv[0]))
		return print_usage(usage);
	c = find_word("command", object, argv[0], cmds, sizeof(*cmds));
	if (!c)
		return 2;
	if (argc > 1 && is_help(argv[1]))
		return print_usage(usage);
	return c->fn(argc - 1, argv + 1);
}

/* The library's message names the operation and, where known, the fix. */
int fail(void)
{
	fprintf(stderr, "strixpeerctl: %s\n", sp_errmsg());
	return 1;
}

/* Whether the module will show this process every buffer (netlink_capable). */
bool has_cap(unsigned int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d))
		return false;
	return d[cap / 32].effective & (1U << (cap % 32));
}

int open_ctl(struct sp_ctl **ctl)
{
	if (sp_ctl_open(ctl) < 0) {
		fail();
		return -1;
	}
	return 0;
}

/*
 * BYTES: decimal digits (no sign, no octal or hex: "010G" is 10 GiB) and an
 * optional K, M, G or T suffix (powers of 1024; also KiB/KB, ...).
 */
int parse_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	const char *u;
	uint64_t v = 0;
	unsigned int shift = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	u = *s ? strchr(units, *s & ~0x20) : NULL;
	if (u) {
		shift = 10 * (unsigned int)(u - units + 1);
		s++;
		if (*s == 'i')
			s++;
		if (*s == 'B' || *s == 'b')
			s++;
	} else if (*s == 'B') {
		s++;
	}
	if (*s || v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

/* BOOL: y/yes/true/on/1 or n/no/false/off/0, any case. */
int parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "y", "yes", "true", "on", "1" };
	static const char *const no[] = { "n", "no", "false", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i]))
			return *out = 1, 0;
		if (!strcasecmp(s, no[i]))
			return *out = 0, 0;
	}
	return -1;
}

/* N: a decimal NUMA node, or -1. */
int parse_node(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < -1 || v > 1023 || (s[0] == '0' && s[1]))
		return -1;
	*out = (int)v;
	return 0;
}
