/* SPDX-License-Identifier: MIT */
/* What the files of tests/guest/hostile.c's program share (tests/guest/hostile/). */
#ifndef SP_GUEST_HOSTILE_H
#define SP_GUEST_HOSTILE_H

#include "sp_test.h"
#include "dmabuf_util.h"

#include <grp.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#define NOBODY 65534

#define DEV_GID 4242		/* stands in for group rdma */

#define LIMIT (8 * MiB)

extern char *self_exe;

/* hostile.c */
int scale(int n);

/* hostile/memlock.c: the memlock charge across exec, fd passing and fork */
void device_for_group(void);
void become_nobody(uint64_t limit);
int wait_child(pid_t pid);
int raw_export(int fd, uint32_t handle, uint32_t flags);
int exec_step(int n, int out);
void exec_loop_stays_within_memlock(void);
void fd_passing_stays_within_memlock(void);
void fork_keeps_the_charge(void);

/* hostile/bounds.c: memory cgroups and the bound on imports */
void memcg_limit_bounds_pinning(void);
uint64_t live_attachments(void);
void import_racing_munmap_leaves_no_dead_import(void);
void imports_bounded_per_user(void);

/* hostile/privileges.c: events, capabilities, the version ioctl, peaks, fork stress, DMA-API */
void unprivileged_subscriber_gets_no_events(void);
void config_set_needs_cap_sys_admin(void);
void child_gets_eacces_before_argument_errors(void);
void version_rejects_nonzero_tail(void);
void peak_ignores_refused_allocations(void);
void fork_stress_never_shares_the_fd(void);
void two_importers_dma_api_clean(void);

#endif /* SP_GUEST_HOSTILE_H */
