/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sp_peersim's core half, between its two files: peersim_core.c (client
 * registration, sysfs, module parameters, load and unload) and
 * peersim_core_umem.c (the core's half of MR registration, the invalidate
 * callback, deregistration). What the HCA half uses too is in peersim.h;
 * the locking rules are in peersim_core.c's header comment.
 */
#ifndef PEERSIM_CORE_PRIV_H
#define PEERSIM_CORE_PRIV_H

#include <linux/types.h>

#include "peersim.h"

/* peersim_core.c: the clients */
bool psim_unmap_on_invalidate(const struct psim_client *c);
struct psim_client *psim_get_client(unsigned long addr, size_t size,
				    void **client_ctx);
void psim_put_client(struct psim_mr *mr);

/* peersim_core.c: the registration pauses its module parameters ask for */
int psim_reg_delay(void);
int psim_mtt_window(void);

/* peersim_core_umem.c: the invalidate callback handed to clients */
int psim_invalidate(void *reg_handle, u64 core_context);

#endif /* PEERSIM_CORE_PRIV_H */
