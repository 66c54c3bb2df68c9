/* SPDX-License-Identifier: MIT */
/* The guest programs' way to sp_kfdsim (tests/kmod/kfdsim.c, the KFD stand-in). */
#ifndef SP_TEST_KFDSIM_H
#define SP_TEST_KFDSIM_H

#include "sp_test.h"
#include "../kmod/kfdsim_uapi.h"

/* /dev/sp_kfdsim; the case is skipped, saying so, when the module is not loaded. */
static inline int sp_kfdsim_open(void)
{
	int fd = open(SP_KFDSIM_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		SKIP("%s not present: sp_kfdsim.ko not loaded", SP_KFDSIM_DEVICE);
	CHECK(fd >= 0, "open %s: %s", SP_KFDSIM_DEVICE, strerror(errno));
	return fd;
}

#endif /* SP_TEST_KFDSIM_H */
