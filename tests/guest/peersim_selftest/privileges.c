// SPDX-License-Identifier: MIT
/* peersim_selftest: privileges and limits, and the clients list */
#include "peersim_selftest.h"

/* --- privileges and limits --------------------------------------------------- */

static void drop_to_nobody(void)
{
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		_exit(10);
}

void unprivileged_open_refused(void)
{
	int status;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to drop to nobody");
	if (access(PEERSIM_DEVICE_PATH, F_OK))
		SKIP("%s not present: sp_peersim.ko not loaded", PEERSIM_DEVICE_PATH);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		drop_to_nobody();
		if (open(PEERSIM_DEVICE_PATH, O_RDWR) >= 0)
			_exit(2);
		_exit(errno == EACCES ? 0 : 3);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/*
 * Without CAP_IPC_LOCK, pinned memory counts against RLIMIT_MEMLOCK as
 * ib_umem_get() counts it (ENOMEM beyond), and deregistration gives it back.
 */
void memlock_limit(void)
{
	int fd = peersim_test_open();
	int status;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to drop to nobody");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct rlimit rl = { 16 * 4096, 16 * 4096 };
		uint8_t *q = mmap(NULL, MiB, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		struct peersim_reg_mr r1, r2;

		if (q == MAP_FAILED || setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(2);
		drop_to_nobody();
		if (!peersim_reg_mr(fd, q, MiB, PEERSIM_ACCESS_WRITE, NULL) || errno != ENOMEM)
			_exit(3);
		if (peersim_reg_mr(fd, q, 10 * 4096, PEERSIM_ACCESS_WRITE, &r1))
			_exit(4);
		/* 10 + 8 pages > 16 */
		if (!peersim_reg_mr(fd, q + MiB / 2, 8 * 4096, 0, NULL) || errno != ENOMEM)
			_exit(5);
		/* an unaligned 2-byte range spanning two pages counts 2 */
		if (peersim_reg_mr(fd, q + MiB / 2 + 4095, 2, 0, &r2))
			_exit(6);
		if (peersim_dereg_mr(fd, r1.handle))
			_exit(7);
		if (peersim_reg_mr(fd, q, 14 * 4096, 0, NULL))
			_exit(8);
		rl.rlim_cur = rl.rlim_max = 0;
		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(9);
		/* no memlock at all: can_do_mlock() fails first */
		if (!peersim_reg_mr(fd, q, 4096, 0, NULL) || errno != EPERM)
			_exit(11);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(fd);
}

/* --- clients (none needed) --------------------------------------------------- */

void clients_match_sysfs(void)
{
	int fd = peersim_test_open();
	struct peersim_client list[16];
	struct peersim_info info;
	uint32_t n = 16, n0 = 0;
	unsigned int dirs = 0;
	int sysfs;
	DIR *d;

	CHECK_OK(peersim_info(fd, &info));
	CHECK_OK(peersim_clients(fd, NULL, &n0));
	CHECK(n0 == info.nclients, "CLIENTS count %u, INFO %u", n0, info.nclients);
	memset(list, 0, sizeof(list));
	CHECK_OK(peersim_clients(fd, list, &n));
	CHECK(n == n0, "count %u then %u", n0, n);
	sysfs = peersim_has_sysfs();
	CHECK(sysfs == 0 || sysfs == 1, "memory_peers_sysfs reads %d", sysfs);
	d = opendir(PEERSIM_SYSFS_PEERS);
	if (!sysfs) {
		/* a core built where mm_kobj is not exported (6.12, 7.x) */
		CHECK(!d && errno == ENOENT, "%s exists without sysfs (%s)", PEERSIM_SYSFS_PEERS,
		      d ? "opened" : strerror(errno));
		tap_diag("%u clients, no %s (as OFED's core on this kernel)", n,
			 PEERSIM_SYSFS_PEERS);
	} else if (!d) {
		CHECK(n == 0, "%u clients but no %s", n, PEERSIM_SYSFS_PEERS);
		tap_diag("no clients registered, %s absent", PEERSIM_SYSFS_PEERS);
	} else {
		struct dirent *e;

		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				dirs++;
		closedir(d);
		CHECK(dirs == n, "%u sysfs entries, %u clients", dirs, n);
	}
	for (uint32_t i = 0; i < n && i < 16; i++) {
		char vpath[192], ver[32] = "-";
		FILE *f;

		CHECK(memchr(list[i].name, 0, sizeof(list[i].name)), "name not terminated");
		if (sysfs) {
			snprintf(vpath, sizeof(vpath), "%s/%.64s/version", PEERSIM_SYSFS_PEERS,
				 list[i].name);
			f = fopen(vpath, "re");
			CHECK(f && fgets(ver, sizeof(ver), f), "%s", vpath);
			fclose(f);
			ver[strcspn(ver, "\n")] = '\0';
			CHECK(peersim_peer_stat(list[i].name, "num_alloc_mrs") >= 0,
			      "num_alloc_mrs");
		}
		tap_diag("client %u: %s version %.16s flags %#x, %u MRs, %" PRIu64 "/%" PRIu64
			 " claims", i, list[i].name, ver, list[i].flags, list[i].live_mrs,
			 (uint64_t)list[i].claims, (uint64_t)list[i].acquire_calls);
	}
	close(fd);
}
