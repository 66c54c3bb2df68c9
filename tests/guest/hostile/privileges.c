// SPDX-License-Identifier: MIT
/* hostile: events, capabilities, the version ioctl, peaks, fork stress, DMA-API */
#include "hostile.h"

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

void unprivileged_subscriber_gets_no_events(void)
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

void config_set_needs_cap_sys_admin(void)
{
	CHECK(config_set_with(CAP_NET_ADMIN) == 1, "CAP_NET_ADMIN alone changed the config");
	CHECK(config_set_with(CAP_SYS_RESOURCE) == 1, "CAP_SYS_RESOURCE alone changed the config");
	CHECK(config_set_with(CAP_SYS_ADMIN) == 0, "CAP_SYS_ADMIN could not change the config");
}

void child_gets_eacces_before_argument_errors(void)
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

void version_rejects_nonzero_tail(void)
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

void peak_ignores_refused_allocations(void)
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

void fork_stress_never_shares_the_fd(void)
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

void two_importers_dma_api_clean(void)
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
