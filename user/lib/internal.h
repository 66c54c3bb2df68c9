/* SPDX-License-Identifier: MIT */
/*
 * libstrixpeer internals shared by its source files (not exported: the
 * version script keeps every sp_* name below local).
 */
#ifndef SP_LIB_INTERNAL_H
#define SP_LIB_INTERNAL_H

/* Records a message for sp_errmsg() and returns -err. */
int sp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
