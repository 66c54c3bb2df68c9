/* SPDX-License-Identifier: MIT */
/* What the files of tests/guest/fragment.c's program share (tests/guest/fragment/). */
#ifndef SP_GUEST_FRAGMENT_H
#define SP_GUEST_FRAGMENT_H

#include "sp_test.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096ULL
#define PER_HUGE 512ULL
#define MPOL_BIND_MODE 2

/* Says what went wrong and exits 1; the holder, if any, dies with us. */
#define die(...)							\
	do {								\
		fprintf(stderr, "fragment: ");				\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
		exit(1);						\
	} while (0)

extern int node;		/* the node fragmented and measured (-n) */
extern uint64_t margin;		/* MemFree the holder leaves (-m) */

uint64_t mib(uint64_t bytes);
uint64_t node_free(void);
uint64_t free_huge_bytes(void);
void read_pfns(const void *p, uint64_t n, uint64_t *pfns);
void touch(uint8_t *p, uint64_t size);

/*
 * Forks the holder of @variant (movable, pinned, unmovable) and returns its
 * pid once the node is fragmented; release() kills it, which frees all.
 */
pid_t fragment(const char *variant);
void release(pid_t pid);

#endif /* SP_GUEST_FRAGMENT_H */
