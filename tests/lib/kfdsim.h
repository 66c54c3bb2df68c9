/* SPDX-License-Identifier: MIT */
/* The guest programs' way to sp_kfdsim (tests/kmod/kfdsim.c, the KFD stand-in). */
#ifndef SP_TEST_KFDSIM_H
#define SP_TEST_KFDSIM_H

#include "sp_test.h"
#include "../kmod/kfdsim_uapi.h"

/* /dev/sp_kfdsim; the case is skipped, saying so, when the module is not loaded. */
int sp_kfdsim_open(void);

#endif /* SP_TEST_KFDSIM_H */
