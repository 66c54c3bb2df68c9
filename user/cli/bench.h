/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl bench (bench.c) and what it shares with strixpeerctl.c.
 */
#ifndef SP_CLI_BENCH_H
#define SP_CLI_BENCH_H

#include <stdbool.h>
#include <stdint.h>

/* strixpeerctl bench [HOST] [options]; @json: -j was given. */
int cmd_bench(int argc, char **argv, bool json);
/* Bytes with an optional K/M/G/T suffix (strixpeerctl.c). */
int parse_bytes(const char *s, uint64_t *out);

#endif
