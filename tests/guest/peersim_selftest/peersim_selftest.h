/* SPDX-License-Identifier: MIT */
/* What the files of tests/guest/peersim_selftest.c's program share (tests/guest/peersim_selftest/). */
#ifndef SP_GUEST_PEERSIM_SELFTEST_H
#define SP_GUEST_PEERSIM_SELFTEST_H

#include "sp_test.h"
#include "dmabuf_util.h"
#include "peersim.h"

#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define PSIM_IOC_SIZED(dir, nr, size) _IOC(dir, PEERSIM_IOC_MAGIC, nr, size)

struct dma_race {
	int fd;
	uint32_t mr;
	uint8_t *buf;
	uint64_t len;
	int err;
	unsigned long rounds;
};

/* peersim_selftest.c */
long page_size(void);
void *map_anon(size_t len, int prot);
uint64_t max_seg(int fd);

/* peersim_selftest/malformed.c: malformed requests */
void info_reports_abi(void);
void unknown_ioctls_enotty(void);
void ioctl_sizes(void);
void ioctl_sweep(void);
void bad_flags_and_reserved(void);
void reg_bad_ranges(void);

/* peersim_selftest/gup.c: registrations through the GUP path */
uint32_t reg_gup(int fd, void *p, uint64_t len, uint32_t access);
void dma_roundtrip(int fd, uint32_t mr, uint8_t *p, uint64_t len, uint32_t seed);
void gup_4k(void);
void gup_1m_unaligned(void);
void gup_segments(void);
void read_only_mr(void);
void unmapped_and_prot_none_refused(void);
void pfn_mapping_refused(void);

/* peersim_selftest/lifetime.c: lifetime: deregistration, bounds, handles, fd passing, races */
void dereg_then_use(void);
void dma_bounds(void);
void handles_per_fd(void);
void close_frees_all(void);
void fd_passing(void);
void *dma_race_thread(void *arg);
void dereg_during_dma(void);

/* peersim_selftest/dmabuf.c: dma-buf MRs */
void dmabuf_vgem_dynamic(void);
void dmabuf_vgem_pinned(void);
void dmabuf_udmabuf_dynamic(void);
void dmabuf_udmabuf_pinned(void);
void dmabuf_unaligned(void);
void dmabuf_bad_requests(void);
void dmabuf_fd_closed(void);
void dmabuf_dereg_then_usable(void);
void dmabuf_close_releases(void);
void dmabuf_dereg_during_dma(void);

/* peersim_selftest/privileges.c: privileges and limits, and the clients list */
void unprivileged_open_refused(void);
void memlock_limit(void);
void clients_match_sysfs(void);

#endif /* SP_GUEST_PEERSIM_SELFTEST_H */
