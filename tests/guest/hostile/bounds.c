// SPDX-License-Identifier: MIT
/* hostile: memory cgroups and the bound on imports */
#include "hostile.h"

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

void memcg_limit_bounds_pinning(void)
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
uint64_t live_attachments(void)
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

void import_racing_munmap_leaves_no_dead_import(void)
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

void imports_bounded_per_user(void)
{
	FILE *f = fopen("/sys/module/strixpeer/parameters/max_imports", "re");
	unsigned int def = 0;

	CHECK(f && fscanf(f, "%u", &def) == 1, "max_imports parameter");
	fclose(f);
	CHECK(def == 65536, "max_imports is %u (default 65536)", def);
	with_param("max_imports", scale(4096) == 4096 ? "4096" : "1024", imports_bounded_case);
}
