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

static char *self_exe;

/* Debug kernels (kmemleak, KASAN, lockdep) run the loops 10x slower. */
static int scale(int n)
{
	return access("/sys/kernel/debug/kmemleak", F_OK) ? n : n / 4;
}

/*
 * The device as packaged: root:DEV_GID 0660 (main() puts the owner and
 * mode back once every case ran).
 */
static void device_for_group(void)
{
	CHECK_OK(chown(STRIXPEER_DEVICE_PATH, 0, DEV_GID));
	CHECK_OK(chmod(STRIXPEER_DEVICE_PATH, 0660));
}

/* nobody, in the device's group, no capabilities, RLIMIT_MEMLOCK @limit. */
static void become_nobody(uint64_t limit)
{
	struct rlimit rl = { .rlim_cur = limit, .rlim_max = limit };
	gid_t g = DEV_GID;

	CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
	CHECK_OK(setgroups(1, &g));
	CHECK_OK(setresgid(NOBODY, NOBODY, NOBODY));
	CHECK_OK(setresuid(NOBODY, NOBODY, NOBODY));
}

static int wait_child(pid_t pid)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int raw_export(int fd, uint32_t handle, uint32_t flags)
{
	struct strixpeer_buf_export e = { .handle = handle, .flags = flags };

	if (ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e) < 0)
		return -errno;
	return e.fd;
}

/*
 * One step of the exec chain (argv: --exec-step N RESULT_FD): allocate
 * 8 MiB, export it without O_CLOEXEC (the dma-buf outlives this image),
 * report "N rc" and exec the next step. The last step reports "end" and
 * waits for its parent to look, holding every fd the chain left open.
 */
static int exec_step(int n, int out)
{
	struct strixpeer_buf_alloc a;
	char line[64], arg[16], outs[16];
	int fd = open(STRIXPEER_DEVICE_PATH, O_RDWR);	/* inherited on purpose */
	int rc = -1;

	if (fd >= 0) {
		rc = sp_raw_alloc(fd, LIMIT, STRIXPEER_NODE_DEFAULT, 0, &a) ? -errno : 0;
		if (!rc && raw_export(fd, a.handle, 0) < 0)
			rc = -1000;
	} else {
		rc = -2000 - errno;
	}
	snprintf(line, sizeof(line), "%d %d\n", n, rc);
	if (write(out, line, strlen(line)) < 0)
		return 1;
	if (n == 9) {
		if (write(out, "end\n", 4) < 0)
			return 1;
		pause();
		return 0;
	}
	snprintf(arg, sizeof(arg), "%d", n + 1);
	snprintf(outs, sizeof(outs), "%d", out);
	execl(self_exe, self_exe, "--exec-step", arg, outs, (char *)NULL);
	return 1;
}

static void exec_loop_stays_within_memlock(void)
{
	struct sp_stats st;
	char line[64];
	int pfd[2], got = 0, ok = 0, edquot = 0;
	FILE *f;
	pid_t pid;

	CHECK_NOTHING_PINNED();
	device_for_group();
	CHECK_OK(pipe(pfd));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close(pfd[0]);
		become_nobody(LIMIT);
		_exit(exec_step(0, pfd[1]));
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	while (fgets(line, sizeof(line), f) && strcmp(line, "end\n")) {
		int n, rc;

		CHECK(sscanf(line, "%d %d", &n, &rc) == 2, "step said: %s", line);
		got++;
		if (rc == 0)
			ok++;
		else if (rc == -EDQUOT)
			edquot++;
		else
			tap_diag("step %d: %d", n, rc);
	}
	st = sp_test_stats();
	kill(pid, SIGKILL);
	wait_child(pid);
	fclose(f);
	CHECK(got == 10, "%d steps reported", got);
	CHECK(ok == 1 && edquot == 9, "%d allocations succeeded, %d refused with EDQUOT (want 1, 9)",
	      ok, edquot);
	CHECK(st.pinned_bytes <= LIMIT, "the chain pinned %" PRIu64 " bytes with an 8 MiB limit",
	      st.pinned_bytes);
	CHECK_NOTHING_PINNED();
}

/* nobody allocates @size, exports it and sends the dma-buf to @sock. */
static int alloc_export_send(int sock, uint64_t size)
{
	struct strixpeer_buf_alloc a;
	int fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int dfd;

	if (fd < 0)
		return 10;
	if (sp_raw_alloc(fd, size, STRIXPEER_NODE_DEFAULT, 0, &a))
		return errno == EDQUOT ? 11 : 12;
	dfd = raw_export(fd, a.handle, STRIXPEER_EXPORT_CLOEXEC);
	if (dfd < 0)
		return 13;
	sp_send_fd(sock, dfd);
	return 0;	/* exit closes the device and the dma-buf fd */
}

static void fd_passing_stays_within_memlock(void)
{
	int sv[2], held;
	pid_t pid;

	CHECK_NOTHING_PINNED();
	device_for_group();
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	if (pid == 0) {
		become_nobody(LIMIT);
		_exit(alloc_export_send(sv[1], LIMIT));
	}
	held = sp_recv_fd(sv[0]);
	CHECK(wait_child(pid) == 0, "first allocation");
	CHECK(sp_test_stats().pinned_bytes == LIMIT, "the dma-buf keeps the buffer");

	/* root holds nobody's buffer: it is still nobody's pinned memory */
	pid = fork();
	if (pid == 0) {
		become_nobody(LIMIT);
		_exit(alloc_export_send(sv[1], 4096));
	}
	CHECK(wait_child(pid) == 11, "nobody pinned past its limit while its buffer was passed away");

	close(held);
	CHECK_NOTHING_PINNED();
	pid = fork();
	if (pid == 0) {
		become_nobody(LIMIT);
		_exit(alloc_export_send(sv[1], LIMIT));
	}
	held = sp_recv_fd(sv[0]);
	CHECK(wait_child(pid) == 0, "the charge was not given back with the buffer");
	close(held);
	close(sv[0]);
	close(sv[1]);
	CHECK_NOTHING_PINNED();
}

static void fork_keeps_the_charge(void)
{
	int go[2], ready[2];
	pid_t pid, holder;
	char c;

	CHECK_NOTHING_PINNED();
	device_for_group();
	CHECK_OK(pipe(go));
	CHECK_OK(pipe(ready));
	holder = fork();
	if (holder == 0) {
		struct strixpeer_buf_alloc a;
		int fd;

		become_nobody(LIMIT);
		fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (fd < 0 || sp_raw_alloc(fd, LIMIT, STRIXPEER_NODE_DEFAULT, 0, &a))
			_exit(10);
		sp_raw_map(fd, &a);
		if (fork() == 0) {	/* the child inherits the mapping */
			close(fd);
			if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) < 0)
				_exit(1);
			_exit(0);
		}
		_exit(0);	/* the parent leaves: handle and mapping go */
	}
	CHECK(wait_child(holder) == 0, "allocation");
	CHECK(read(ready[0], &c, 1) == 1, "the child");
	CHECK(sp_test_stats().pinned_bytes == LIMIT, "the child's mapping keeps the buffer");
	pid = fork();
	if (pid == 0) {
		int sv[2];

		become_nobody(LIMIT);
		CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
		_exit(alloc_export_send(sv[1], 4096));
	}
	CHECK(wait_child(pid) == 11, "nobody pinned past its limit while a child held its buffer");
	CHECK(write(go[1], "g", 1) == 1, "release the child");
	close(go[1]);
	for (int i = 0; i < 600 && sp_test_stats().buffers; i++)
		usleep(100000);	/* the orphan exits on its own */
	CHECK_NOTHING_PINNED();
}

/* cgroup v2 with the memory controller at /sys/fs/cgroup, or skip. */
static void cgroup2_memory(const char *cg)
{
	char path[256];
	FILE *f;

	if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) &&
	    mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, NULL))
		SKIP("no cgroup v2 at /sys/fs/cgroup and mounting it failed: %s", strerror(errno));
	f = fopen("/sys/fs/cgroup/cgroup.controllers", "re");
	CHECK(f && fgets(path, sizeof(path), f), "cgroup.controllers");
	fclose(f);
	path[strcspn(path, "\n")] = '\0';
	if (!strstr(path, "memory"))
		SKIP("no memory controller in cgroup.controllers (kernel without CONFIG_MEMCG): %s", path);
	f = fopen("/sys/fs/cgroup/cgroup.subtree_control", "we");
	if (!f || fputs("+memory", f) < 0 || fclose(f))
		SKIP("cannot enable the memory controller: %s", strerror(errno));
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", cg);
	if (mkdir(path, 0755) && errno != EEXIST)
		CHECK(0, "mkdir %s: %s", path, strerror(errno));
}

static void cg_write(const char *cg, const char *file, const char *val)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/%s", cg, file);
	f = fopen(path, "we");
	CHECK(f && fputs(val, f) >= 0 && fclose(f) == 0, "write %s: %s", path, strerror(errno));
}

static uint64_t cg_read(const char *cg, const char *file)
{
	char path[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/%s", cg, file);
	f = fopen(path, "re");
	CHECK(f && fscanf(f, "%llu", &v) == 1, "read %s", path);
	fclose(f);
	return v;
}

static void memcg_limit_bounds_pinning(void)
{
	const char *cg = "sp-hostile";
	char pidbuf[32];
	pid_t pid;

	CHECK_NOTHING_PINNED();
	cgroup2_memory(cg);
	cg_write(cg, "memory.max", "48M");
	pid = fork();
	if (pid == 0) {
		struct strixpeer_buf_alloc a, b;
		uint64_t before;
		int fd;

		snprintf(pidbuf, sizeof(pidbuf), "%d", getpid());
		cg_write(cg, "cgroup.procs", pidbuf);
		fd = sp_test_open();
		before = cg_read(cg, "memory.current");
		/* root, CAP_IPC_LOCK: no memlock limit; the cgroup is the bound */
		CHECK(sp_raw_alloc(fd, 64 * MiB, STRIXPEER_NODE_DEFAULT,
				   STRIXPEER_ALLOC_ALLOW_SMALL, &a) < 0 && errno == ENOMEM,
		      "64 MiB in a 48 MiB cgroup: %s", strerror(errno));
		CHECK(sp_test_stats().buffers == 0, "the refused buffer stayed");
		CHECK_OK(sp_raw_alloc(fd, 16 * MiB, STRIXPEER_NODE_DEFAULT,
				      STRIXPEER_ALLOC_ALLOW_SMALL, &b));
		/* the buffer, give or take what the process itself gave back */
		CHECK(cg_read(cg, "memory.current") >= before + 15 * MiB,
		      "16 MiB buffer not charged: memory.current %" PRIu64 " -> %" PRIu64,
		      before, cg_read(cg, "memory.current"));
		CHECK_OK(sp_raw_free(fd, b.handle));
		close(fd);
		_exit(0);
	}
	CHECK(wait_child(pid) == 0, "child");
	CHECK_NOTHING_PINNED();
	CHECK(cg_read(cg, "memory.current") < 8 * MiB, "the charge was not given back: %" PRIu64,
	      cg_read(cg, "memory.current"));
	rmdir("/sys/fs/cgroup/sp-hostile");
}

/* Live imports on the node (netlink stats). */
static uint64_t live_imports(void)
{
	struct sp_peer_counters c;
	struct sp_ctl *ctl;

	CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_peer_stats(ctl, &c) == 0, "%s", sp_errmsg());
	sp_ctl_close(ctl);
	return c.imports;
}

/* Live device attachments of exported buffers (netlink stats). */
static uint64_t live_attachments(void)
{
	struct sp_counters c = { .size = sizeof(c) };
	struct sp_ctl *ctl;

	CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_stats(ctl, &c) == 0, "%s", sp_errmsg());
	sp_ctl_close(ctl);
	return c.dmabuf_attachments;
}

/* A 4 KiB dma-buf of a strixpeer buffer of @fd (every kernel has those). */
static int own_dmabuf(int fd)
{
	struct strixpeer_buf_alloc a;
	int dfd;

	CHECK_OK(sp_raw_alloc(fd, 4096, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_ALLOW_SMALL, &a));
	dfd = raw_export(fd, a.handle, STRIXPEER_EXPORT_CLOEXEC);
	CHECK(dfd >= 0, "export: %d", dfd);
	CHECK_OK(sp_raw_free(fd, a.handle));	/* the dma-buf keeps it */
	return dfd;
}

static int raw_import(int fd, int dfd, uint64_t va, uint32_t *handle)
{
	struct strixpeer_import im = { .dmabuf_fd = dfd, .length = 4096, .va = va };

	if (ioctl(fd, STRIXPEER_IOC_IMPORT, &im) < 0)
		return -errno;
	if (handle)
		*handle = im.handle;
	return 0;
}

static void imports_bounded_case(void)
{
	uint64_t va = 0x100000000000ULL;
	int fd = sp_test_open(), fd2 = sp_test_open(), ret = 0, dfd = own_dmabuf(fd);
	long i, max = scale(4096);
	uint32_t h;

	/* 1,000,000 tries: refused at max_imports, long before */
	for (i = 0; i < 1000000; i++) {
		ret = raw_import(fd, dfd, va + (uint64_t)i * 4096, NULL);
		if (ret)
			break;
	}
	CHECK(i == max && ret == -EMFILE, "import %ld refused with %d (want %ld, EMFILE)", i, ret, max);
	CHECK(live_imports() == (uint64_t)max, "%" PRIu64 " imports live", live_imports());
	/* per user: another fd of the same user is refused too */
	CHECK(raw_import(fd2, dfd, va - 4096, NULL) == -EMFILE, "a second fd escaped the bound");
	close(fd);
	/* the first fd's imports are gone: room again */
	CHECK(raw_import(fd2, dfd, va, &h) == 0, "import after the others were closed");
	close(fd2);
	close(dfd);
	CHECK(live_imports() == 0, "%" PRIu64 " imports left", live_imports());
}

/*
 * Finding 8: an IMPORT whose range is unmapped while it is being made
 * (between its notifier's insertion and its publication) must not stay
 * in the tree as a dead import that refuses the range to later IMPORTs.
 */
static volatile int race_stop;
static volatile unsigned long race_gen;
static uint8_t *race_va;

static void *race_unmapper(void *arg)
{
	(void)arg;
	while (!race_stop) {
		void *p = mmap(race_va, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

		if (p != MAP_FAILED) {
			*(volatile uint8_t *)p = 1;
			munmap(p, 4096);
		}
		__atomic_add_fetch(&race_gen, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void import_racing_munmap_leaves_no_dead_import(void)
{
	pthread_t t;
	int fd = sp_test_open(), i, refused = 0, dfd = own_dmabuf(fd);

	race_va = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(race_va != MAP_FAILED, "mmap");
	CHECK_OK(pthread_create(&t, NULL, race_unmapper, NULL));
	for (i = 0; i < scale(1000); i++) {
		int ret = raw_import(fd, dfd, (uint64_t)(uintptr_t)race_va, NULL);
		unsigned long g = __atomic_load_n(&race_gen, __ATOMIC_SEQ_CST);

		/* every earlier import saw a whole map + unmap: none may block */
		if (ret == -EEXIST)
			refused++;
		else
			CHECK(ret == 0, "import %d: %d", i, ret);
		while (__atomic_load_n(&race_gen, __ATOMIC_SEQ_CST) < g + 2)
			sched_yield();
	}
	race_stop = 1;
	pthread_join(t, NULL);
	CHECK(refused == 0, "%d of %d imports refused by an import whose range was unmapped",
	      refused, scale(1000));
	close(fd);
	close(dfd);
	CHECK(live_imports() == 0, "%" PRIu64 " imports left", live_imports());
	CHECK_NOTHING_PINNED();
}

static void imports_bounded_per_user(void)
{
	FILE *f = fopen("/sys/module/strixpeer/parameters/max_imports", "re");
	unsigned int def = 0;

	CHECK(f && fscanf(f, "%u", &def) == 1, "max_imports parameter");
	fclose(f);
	CHECK(def == 65536, "max_imports is %u (default 65536)", def);
	with_param("max_imports", scale(4096) == 4096 ? "4096" : "1024", imports_bounded_case);
}

/* A raw generic netlink socket joining strixpeer's events group. */
static int join_events(void)
{
	struct {
		struct nlmsghdr n;
		struct genlmsghdr g;
		char buf[1024];
	} req = { 0 }, ans;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	struct nlattr *a;
	int grp = -1, len;
	ssize_t n;

	CHECK(s >= 0, "socket");
	req.n.nlmsg_type = GENL_ID_CTRL;
	req.n.nlmsg_flags = NLM_F_REQUEST;
	req.g.cmd = CTRL_CMD_GETFAMILY;
	req.g.version = 1;
	a = (struct nlattr *)req.buf;
	a->nla_type = CTRL_ATTR_FAMILY_NAME;
	a->nla_len = NLA_HDRLEN + sizeof(STRIXPEER_GENL_NAME);
	memcpy((char *)a + NLA_HDRLEN, STRIXPEER_GENL_NAME, sizeof(STRIXPEER_GENL_NAME));
	req.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN + NLA_ALIGN(a->nla_len));
	CHECK(sendto(s, &req, req.n.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) > 0, "send");
	n = recv(s, &ans, sizeof(ans), 0);
	CHECK(n > 0 && ans.n.nlmsg_type != NLMSG_ERROR, "GETFAMILY");
	/* walk CTRL_ATTR_MCAST_GROUPS -> [ {NAME, ID} ] */
	len = (int)ans.n.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	for (a = (struct nlattr *)ans.buf; len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN;
	     len -= NLA_ALIGN(a->nla_len), a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len))) {
		struct nlattr *g, *e;
		int glen, elen;

		if ((a->nla_type & NLA_TYPE_MASK) != CTRL_ATTR_MCAST_GROUPS)
			continue;
		g = (struct nlattr *)((char *)a + NLA_HDRLEN);
		glen = a->nla_len - NLA_HDRLEN;
		for (; glen >= NLA_HDRLEN; glen -= NLA_ALIGN(g->nla_len),
		     g = (struct nlattr *)((char *)g + NLA_ALIGN(g->nla_len))) {
			int id = -1, match = 0;

			e = (struct nlattr *)((char *)g + NLA_HDRLEN);
			for (elen = g->nla_len - NLA_HDRLEN; elen >= NLA_HDRLEN;
			     elen -= NLA_ALIGN(e->nla_len),
			     e = (struct nlattr *)((char *)e + NLA_ALIGN(e->nla_len))) {
				if (e->nla_type == CTRL_ATTR_MCAST_GRP_NAME)
					match = !strcmp((char *)e + NLA_HDRLEN, STRIXPEER_MCGRP_EVENTS);
				if (e->nla_type == CTRL_ATTR_MCAST_GRP_ID)
					memcpy(&id, (char *)e + NLA_HDRLEN, sizeof(id));
			}
			if (match)
				grp = id;
		}
	}
	CHECK(grp > 0, "no events group");
	if (setsockopt(s, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp)) < 0) {
		int e = errno;

		close(s);
		return -e;
	}
	return s;
}

static int ignore_event(const struct sp_event *ev, void *arg)
{
	(void)ev;
	(void)arg;
	return 1;
}

static void unprivileged_subscriber_gets_no_events(void)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct sp_ctl *ctl;
		int s;

		become_nobody(LIMIT);
		s = join_events();
		CHECK(s == -EPERM, "nobody joined the events group: %d", s);
		CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
		CHECK(sp_ctl_monitor(ctl, ignore_event, NULL) == -EPERM, "sp_ctl_monitor as nobody");
		CHECK(strstr(sp_errmsg(), "CAP_SYS_ADMIN"), "message: %s", sp_errmsg());
		sp_ctl_close(ctl);
		_exit(0);
	}
	CHECK(wait_child(pid) == 0, "child");
	/* root may, and sees a buffer being made */
	{
		int s = join_events(), fd = sp_test_open();
		struct strixpeer_buf_alloc a;
		char buf[4096];
		struct timeval tv = { .tv_sec = 5 };

		CHECK(s >= 0, "root could not join: %d", s);
		CHECK_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
		CHECK_OK(sp_raw_alloc(fd, 4096, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_ALLOW_SMALL, &a));
		CHECK(recv(s, buf, sizeof(buf), 0) > 0, "no event for root: %s", strerror(errno));
		close(fd);
		close(s);
	}
}

/* Keep uid 0 but hold only the capability @cap (effective and permitted). */
static void only_capability(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	d[cap / 32].effective = d[cap / 32].permitted = 1U << (cap % 32);
	CHECK_OK(syscall(SYS_capset, &h, d));
}

static int config_set_with(int cap)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct sp_config cfg = { .size = sizeof(cfg) };
		struct sp_ctl *ctl;
		int ret;

		only_capability(cap);
		CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
		CHECK(sp_ctl_config_get(ctl, &cfg) == 0, "%s", sp_errmsg());
		ret = sp_ctl_config_set(ctl, &cfg, SP_CONFIG_MAX_PINNED_BYTES);
		if (ret == -EPERM && !strstr(sp_errmsg(), "CAP_SYS_ADMIN"))
			_exit(3);
		_exit(ret == 0 ? 0 : ret == -EPERM ? 1 : 2);
	}
	return wait_child(pid);
}

static void config_set_needs_cap_sys_admin(void)
{
	CHECK(config_set_with(CAP_NET_ADMIN) == 1, "CAP_NET_ADMIN alone changed the config");
	CHECK(config_set_with(CAP_SYS_RESOURCE) == 1, "CAP_SYS_RESOURCE alone changed the config");
	CHECK(config_set_with(CAP_SYS_ADMIN) == 0, "CAP_SYS_ADMIN could not change the config");
}

static void child_gets_eacces_before_argument_errors(void)
{
	int fd = sp_test_open();
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct strixpeer_buf_alloc a = { .size = 0 };
		struct strixpeer_buf_alloc big = { .size = ~0ULL };
		struct strixpeer_buf_alloc flags = { .size = 4096, .flags = ~0U };
		struct strixpeer_buf_free fr = { .handle = 12345 };
		struct strixpeer_import im = { .dmabuf_fd = -1, .length = 4096, .va = 4096 };
		struct strixpeer_version v;

		CHECK(ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a) < 0 && errno == EACCES, "size 0: %d", errno);
		CHECK(ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &big) < 0 && errno == EACCES, "EFBIG first: %d", errno);
		CHECK(ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &flags) < 0 && errno == EACCES, "EINVAL first: %d", errno);
		CHECK(ioctl(fd, STRIXPEER_IOC_BUF_FREE, &fr) < 0 && errno == EACCES, "ENOENT first: %d", errno);
		CHECK(ioctl(fd, STRIXPEER_IOC_IMPORT, &im) < 0 && errno == EACCES, "EBADF first: %d", errno);
		CHECK(ioctl(fd, _IOC(_IOC_READ | _IOC_WRITE, STRIXPEER_IOC_MAGIC, 0x01, 8), &a) < 0 &&
		      errno == EACCES, "short struct first: %d", errno);
		CHECK(ioctl(fd, STRIXPEER_IOC_VERSION, &v) < 0 && errno == EACCES, "VERSION: %d", errno);
		CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 1ULL << 40) == MAP_FAILED &&
		      errno == EACCES, "mmap: %d", errno);
		_exit(0);
	}
	CHECK(wait_child(pid) == 0, "child");
	close(fd);
}

static void version_rejects_nonzero_tail(void)
{
	struct {
		struct strixpeer_version v;
		uint64_t tail;
	} big;
	unsigned long cmd = _IOC(_IOC_READ, STRIXPEER_IOC_MAGIC, 0x00, sizeof(big));
	int fd = sp_test_open();

	memset(&big, 0xa5, sizeof(big));
	CHECK(ioctl(fd, cmd, &big) < 0 && errno == E2BIG, "non-zero tail: %s", strerror(errno));
	big.tail = 0;
	CHECK_OK(ioctl(fd, cmd, &big));
	CHECK(big.v.abi_major == STRIXPEER_ABI_MAJOR && big.tail == 0, "answer");
	close(fd);
}

static void peak_ignores_refused_allocations(void)
{
	uint64_t peak = sp_test_stats().peak_pinned_bytes;
	pid_t pid;

	CHECK_NOTHING_PINNED();
	device_for_group();
	pid = fork();
	if (pid == 0) {
		struct strixpeer_buf_alloc a;
		int fd;

		become_nobody(LIMIT);
		fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		CHECK(fd >= 0, "open: %s", strerror(errno));
		/* refused by RLIMIT_MEMLOCK, which is checked after max_pinned_bytes */
		CHECK(sp_raw_alloc(fd, peak + 64 * MiB, STRIXPEER_NODE_DEFAULT,
				   STRIXPEER_ALLOC_ALLOW_SMALL, &a) < 0 && errno == EDQUOT,
		      "%s", strerror(errno));
		_exit(0);
	}
	CHECK(wait_child(pid) == 0, "child");
	CHECK(sp_test_stats().peak_pinned_bytes == peak, "peak %" PRIu64 " -> %" PRIu64,
	      peak, sp_test_stats().peak_pinned_bytes);
}

/*
 * Forked children hammer their parent's fd while the parent's threads use
 * it and children are killed mid-call: not one call may succeed.
 */
static int stress_fd;
static volatile int stress_stop;

static void *stress_thread(void *arg)
{
	(void)arg;
	while (!stress_stop) {
		struct strixpeer_buf_alloc a;

		if (!sp_raw_alloc(stress_fd, 64 * 1024, STRIXPEER_NODE_DEFAULT,
				  STRIXPEER_ALLOC_ALLOW_SMALL, &a))
			sp_raw_free(stress_fd, a.handle);
	}
	return NULL;
}

static void fork_stress_never_shares_the_fd(void)
{
	pthread_t t[3];
	int pfd[2], i, bad = 0;

	stress_fd = sp_test_open();
	CHECK_OK(pipe(pfd));
	for (i = 0; i < 3; i++)
		CHECK_OK(pthread_create(&t[i], NULL, stress_thread, NULL));
	for (i = 0; i < scale(300); i++) {
		pid_t pid = fork();

		CHECK(pid >= 0, "fork");
		if (pid == 0) {
			for (int j = 0; j < 50; j++) {
				struct strixpeer_buf_alloc a;
				struct strixpeer_buf_info info = { .handle = (uint32_t)j };

				if (!sp_raw_alloc(stress_fd, 4096, STRIXPEER_NODE_DEFAULT,
						  STRIXPEER_ALLOC_ALLOW_SMALL, &a) ||
				    errno != EACCES ||
				    !ioctl(stress_fd, STRIXPEER_IOC_BUF_INFO, &info) || errno != EACCES) {
					if (write(pfd[1], "x", 1) < 0)
						_exit(2);
					_exit(1);
				}
			}
			_exit(0);
		}
		if (i % 3 == 0)
			kill(pid, SIGKILL);	/* mid-operation, or before */
		waitpid(pid, NULL, 0);
	}
	stress_stop = 1;
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	{
		char c;

		while (read(pfd[0], &c, 1) == 1)
			bad++;
	}
	CHECK(bad == 0, "%d forked children used their parent's fd", bad);
	close(stress_fd);
	CHECK_NOTHING_PINNED();
}

static long dma_api_errors(void)
{
	FILE *f = fopen("/sys/kernel/debug/dma-api/error_count", "re");
	long n = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

static void two_importers_dma_api_clean(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *buf;
	long before = dma_api_errors();
	int card1, card2, dfd;
	uint32_t h1, h2;

	card1 = sp_vgem_card();
	if (card1 < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	card2 = sp_vgem_card();
	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	CHECK(sp_buf_export(buf, SP_EXPORT_CLOEXEC, &dfd) == 0, "%s", sp_errmsg());
	/* two DRM files: two attachments, each mapping every page */
	h1 = sp_vgem_import(card1, dfd);
	h2 = sp_vgem_import(card2, dfd);
	CHECK(live_attachments() == 2, "%" PRIu64 " attachments", live_attachments());
	sp_vgem_close(card1, h1);
	sp_vgem_close(card2, h2);
	close(card1);
	close(card2);
	close(dfd);
	sp_buf_free(buf);
	sp_dev_close(dev);
	if (before < 0) {
		tap_diag("no /sys/kernel/debug/dma-api: kernel without CONFIG_DMA_API_DEBUG, only the imports were checked");
		return;
	}
	CHECK(dma_api_errors() == before, "DMA-API debug errors %ld -> %ld", before, dma_api_errors());
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
