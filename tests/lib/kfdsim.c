// SPDX-License-Identifier: MIT
/* tests/lib/kfdsim.h's functions: the suite's library (build/tests/libsptest.a). */
#include "kfdsim.h"

int sp_kfdsim_open(void)
{
	int fd = open(SP_KFDSIM_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		SKIP("%s not present: sp_kfdsim.ko not loaded", SP_KFDSIM_DEVICE);
	CHECK(fd >= 0, "open %s: %s", SP_KFDSIM_DEVICE, strerror(errno));
	return fd;
}
