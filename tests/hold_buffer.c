// SPDX-License-Identifier: MIT
/*
 * Test helper (not a TAP program): allocates one strixpeer buffer of
 * argv[1] MiB, prints "ready <pid>" and holds it until killed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "strixpeer.h"

int main(int argc, char **argv)
{
	struct sp_dev *dev;
	struct sp_buf *buf;

	if (argc != 2) {
		fprintf(stderr, "usage: hold_buffer MIB\n");
		return 2;
	}
	if (sp_dev_open(NULL, &dev) < 0 ||
	    sp_buf_alloc(dev, strtoull(argv[1], NULL, 10) << 20, SP_NODE_DEFAULT, 0, &buf) < 0) {
		fprintf(stderr, "hold_buffer: %s\n", sp_errmsg());
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
