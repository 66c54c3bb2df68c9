/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the strixpeer test programs: opening the device (the
 * "fixture"), raw ioctls, the module's counters, MemFree, data patterns.
 */
#ifndef SP_TEST_H
#define SP_TEST_H

#include "tap.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "strixpeer.h"
#include "uapi/strixpeer.h"
#include "rdma/rc.h"

#define MiB (1024ULL * 1024)
#define HUGE_SZ (2 * MiB)

/* Opens /dev/strixpeer raw; skips the case when the module is absent. */
int sp_test_open(void);

/* Opens through the library; skips the case when the module is absent. */
struct sp_dev *sp_test_dev(void);

int sp_raw_alloc(int fd, uint64_t size, uint32_t node, uint32_t flags,
		 struct strixpeer_buf_alloc *out);

int sp_raw_free(int fd, uint32_t handle);

void *sp_raw_map(int fd, const struct strixpeer_buf_alloc *a);

struct sp_stats sp_test_stats(void);

/* The module holds no buffer and no pinned byte (all cases end so). */
#define CHECK_NOTHING_PINNED()						\
	do {								\
		struct sp_stats __s = sp_test_stats();			\
		CHECK(__s.buffers == 0 && __s.pinned_bytes == 0,	\
		      "module still holds %" PRIu64 " buffers, %" PRIu64 " bytes", \
		      __s.buffers, __s.pinned_bytes);			\
	} while (0)

/* A field of /proc/meminfo (or a node's meminfo when node >= 0), bytes. */
uint64_t sp_meminfo(int node, const char *field);

/* A field (kB) of the smaps entry of this process's VMA holding @addr, bytes. */
uint64_t sp_smaps_field(const void *addr, const char *field);

/*
 * Free memory in bytes, of one node or all (node < 0): the buddy
 * allocator's free pages plus the pages parked in per-cpu lists, which
 * MemFree leaves out (freed pages often sit there for a while).
 */
uint64_t sp_free_bytes(int node);

/*
 * Position-dependent bytes: any sub-range can be checked on its own. The
 * pattern is rdma/rc.h's, the one strixpeerctl doctor's data-path tests
 * write (splitmix64's finaliser over position and seed: every bit of both
 * reaches the byte).
 */
uint8_t sp_pattern(uint64_t pos, uint32_t seed);

void sp_fill(void *p, uint64_t len, uint64_t pos, uint32_t seed);

/* Returns the index of the first wrong byte, or -1. */
int64_t sp_verify(const void *p, uint64_t len, uint64_t pos, uint32_t seed);

/* Physical frame of a mapped address (root only), 0 if not present. */
uint64_t sp_pfn(const void *addr);

/* Runs fn in a child with a module parameter set, then restores it. */
void with_param(const char *name, const char *val, void (*fn)(void));

/* Passes an fd over a UNIX socket (SCM_RIGHTS), with one byte. */
void sp_send_fd(int sock, int fd);

/* Receives an fd sent by sp_send_fd(). */
int sp_recv_fd(int sock);

/* Whether the running kernel has the symbol @sym (/proc/kallsyms). */
bool sp_kernel_has(const char *sym);

/* Write @val to the file @path (sysfs, debugfs); false when it cannot. */
bool sp_write_file(const char *path, const char *val);

#endif /* SP_TEST_H */
