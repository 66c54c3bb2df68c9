/* SPDX-License-Identifier: MIT */
/*
 * What every strixpeerctl object shares (util.c): the global options, word
 * matching and dispatch, usage errors, the library's errors, and the one
 * parser of sizes (BYTES), booleans and NUMA nodes.
 */
#ifndef SP_CLI_UTIL_H
#define SP_CLI_UTIL_H

#include <stdbool.h>
#include <stdint.h>

struct sp_ctl;

/* A word of the command line: OBJECT or COMMAND. */
struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
	const char *usage;	/* objects: "OBJECT help" (NULL: it parses "help"); commands: NULL */
};

extern bool cli_json;		/* -j or -p */
extern bool cli_timestamps;	/* -t: monitor prints when each event came */

/* "help", "-h" or "--help". */
bool is_help(const char *word);
/* @usage on stdout, "usage: " before its first line; 2 under -j. */
int print_usage(const char *usage);
/* A usage error: what is wrong, and where help is. Returns 2 (the exit status). */
int bad_usage(const char *object, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* No arguments beyond the first @max: 0, else a usage error (2). */
int extra_args(const char *object, int argc, char **argv, int max);
/*
 * The entry of @table (structs whose first member is the name, ended by a
 * NULL name) that @word names exactly or by a unique prefix; NULL, with a
 * message naming @what, when none or several do.
 */
const void *find_word(const char *what, const char *object, const char *word,
		      const void *table, size_t stride);
/* OBJECT COMMAND [args]: the command, "help" (@usage), or the first command. */
int dispatch(const struct cmd *cmds, const char *object, const char *usage, int argc,
	     char **argv);
/* The library's last error on stderr; returns 1 (the exit status). */
int fail(void);
/* Whether the effective capability set has @cap. */
bool has_cap(unsigned int cap);
/* sp_ctl_open(), or fail()'s message and -1. */
int open_ctl(struct sp_ctl **ctl);

/*
 * BYTES: decimal digits (no sign, no octal or hex: "010G" is 10 GiB) and an
 * optional K, M, G or T suffix (powers of 1024; also KiB/KB, ...). 0 or -1.
 */
int parse_bytes(const char *s, uint64_t *out);
/* BOOL: y/yes/true/on/1 or n/no/false/off/0, any case. */
int parse_bool(const char *s, int *out);
/* N: a decimal NUMA node, or -1. */
int parse_node(const char *s, int *out);

#endif
