/* SPDX-License-Identifier: MIT */
/*
 * One printer for every strixpeerctl command: the same calls produce an
 * indented "label  value" table or JSON (-j, pretty with -p), so JSON is
 * never an afterthought and never pasted together by hand. Tables are
 * aligned on their widest label or cell: values never overflow a column.
 */
#ifndef SP_PRINT_H
#define SP_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void pr_init(bool json, bool pretty);
/*
 * Objects and arrays; @key is the JSON key (NULL inside arrays / at top).
 * In a table an array of scalars is one line: "label  a, b, c"; an array
 * opened with a NULL label holds objects, printed as rows under a header.
 */
void pr_obj_open(const char *key);
/* An object whose table heading is @label ("memory (node-wide)"), not @key. */
void pr_obj_open_label(const char *key, const char *label);
void pr_obj_close(void);
void pr_arr_open(const char *key, const char *label);
void pr_arr_close(void);
/* Scalars: @key in JSON, @label in the table. */
void pr_str(const char *key, const char *label, const char *val);
void pr_u64(const char *key, const char *label, uint64_t val);
void pr_s64(const char *key, const char *label, int64_t val);
void pr_bool(const char *key, const char *label, bool val);
/* A number already formatted (e.g. "1764570046.123456"), unquoted in JSON. */
void pr_number(const char *key, const char *label, const char *text);
/* JSON null, @text in the table (e.g. "unlimited"). */
void pr_null(const char *key, const char *label, const char *text);
/* Bytes: a number in JSON, "64 MiB" (or "1.5 GiB") in the table. */
void pr_bytes(const char *key, const char *label, uint64_t val);
/*
 * "64 MiB", "1.5 GiB", "512 B": as pr_bytes() writes it in tables and
 * doctor in its findings (strixpeerctl's one byte formatter).
 */
void pr_format_bytes(char *text, size_t size, uint64_t val);
/* Ends the document (a newline after JSON). */
void pr_done(void);

#endif
