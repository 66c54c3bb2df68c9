// SPDX-License-Identifier: MIT
/*
 * Hostile local users: what a user in group rdma (every job on a shared
 * cluster) can and cannot do with /dev/strixpeer and the netlink family.
 *
 * - pinning stays within the user's RLIMIT_MEMLOCK across execve, fork and
 *   dma-buf fd passing (the charge is per uid and lives with the buffer);
 * - a memory cgroup's memory.max bounds what a job pins;
 * - imports are bounded per user (max_imports), and one whose range is
 *   unmapped while it is made does not block the range afterwards;
 * - only CAP_SYS_ADMIN joins the events group and changes the config;
 * - ownership is checked before arguments, VERSION refuses a non-zero
 *   tail, refused allocations leave peak_pinned_bytes alone;
 * - a forked child never gets to use its parent's fd, under stress;
 * - two importers mapping one buffer leave the DMA-API debug checks quiet.
 *
 * Unprivileged parts run as nobody in a group that may open the device
 * (the packaged root:rdma 0660, with a test group standing in for rdma).
 */
/* The cases, a file per section, are in tests/guest/hostile/; here the table and main. */
#include "hostile/hostile.h"

char *self_exe;

/* Debug kernels (kmemleak, KASAN, lockdep) run the loops 10x slower. */
int scale(int n)
{
	return access("/sys/kernel/debug/kmemleak", F_OK) ? n : n / 4;
}

static const struct tap_case cases[] = {
	TAP_CASE(exec_loop_stays_within_memlock),
	TAP_CASE(fd_passing_stays_within_memlock),
	TAP_CASE(fork_keeps_the_charge),
	TAP_CASE(memcg_limit_bounds_pinning),
	TAP_CASE_T(imports_bounded_per_user, 300),
	TAP_CASE_T(import_racing_munmap_leaves_no_dead_import, 300),
	TAP_CASE(unprivileged_subscriber_gets_no_events),
	TAP_CASE(config_set_needs_cap_sys_admin),
	TAP_CASE(child_gets_eacces_before_argument_errors),
	TAP_CASE(version_rejects_nonzero_tail),
	TAP_CASE(peak_ignores_refused_allocations),
	TAP_CASE_T(fork_stress_never_shares_the_fd, 300),
	TAP_CASE(two_importers_dma_api_clean),
};

int main(int argc, char **argv)
{
	self_exe = realpath("/proc/self/exe", NULL);
	if (argc == 4 && !strcmp(argv[1], "--exec-step"))
		return exec_step(atoi(argv[2]), atoi(argv[3]));
	struct stat st;
	int ret, have = !stat(STRIXPEER_DEVICE_PATH, &st);

	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = tap_run(cases, sizeof(cases) / sizeof(cases[0]));
	if (have && (chown(STRIXPEER_DEVICE_PATH, st.st_uid, st.st_gid) ||
		     chmod(STRIXPEER_DEVICE_PATH, st.st_mode & 07777)))
		printf("# could not restore %s: %s\n", STRIXPEER_DEVICE_PATH, strerror(errno));
	return ret;
}
