// SPDX-License-Identifier: MIT
/*
 * sp_reg_mr() on Soft-RoCE: the path it takes for strixpeer buffers, host
 * memory and imports (rxe has no dma-buf MRs, so that path must fail
 * cleanly and the helper fall back), the reasons it gives when nothing
 * works, the registration cache, fork and fd passing, and an RDMA WRITE
 * from one node into a buffer the other node exported, had imported by
 * vgem and registered through the helper.
 */
#include "dmabuf_util.h"
#include "rdma_pair.h"

#include <grp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#define ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct verbs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
};

static struct verbs verbs_open(void)
{
	const char *name = dev_name("SP_RDMA_TARGET", "rxe1");
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct verbs v = { 0 };

	CHECK(list, "ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			v.ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!v.ctx)
		SKIP("verbs device %s not present (Soft-RoCE not set up)", name);
	v.pd = ibv_alloc_pd(v.ctx);
	CHECK(v.pd, "ibv_alloc_pd: %s", strerror(errno));
	return v;
}

static void verbs_close(struct verbs *v)
{
	CHECK_OK(ibv_dealloc_pd(v->pd));
	CHECK_OK(ibv_close_device(v->ctx));
}

static struct sp_reg_stats reg_stats(struct sp_dev *dev)
{
	struct sp_reg_stats st;

	CHECK_OK(sp_reg_cache_stats(dev, &st));
	return st;
}

static void test_regmr_buffer_and_malloc_plain(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_mr *a, *b;
	struct sp_buf *buf;
	void *host;

	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	CHECK(sp_reg_mr(dev, v.pd, sp_buf_addr(buf), 4 * MiB, ACCESS, 0, &a) == 0, "%s",
	      sp_errmsg());
	CHECK(sp_mr_path(a) == SP_REG_PLAIN, "strixpeer buffer took path %s",
	      sp_reg_path_name(sp_mr_path(a)));
	CHECK(sp_mr_ibv(a)->lkey && sp_mr_ibv(a)->length == 4 * MiB, "MR");
	host = aligned_alloc(4096, MiB);
	CHECK(host, "malloc");
	CHECK(sp_reg_mr(dev, v.pd, host, MiB, ACCESS, 0, &b) == 0, "%s", sp_errmsg());
	CHECK(sp_mr_path(b) == SP_REG_PLAIN, "host memory took path %s",
	      sp_reg_path_name(sp_mr_path(b)));
	CHECK(!strcmp(sp_reg_path_name(SP_REG_DMABUF), "dmabuf") &&
	      !strcmp(sp_reg_path_name(SP_REG_PEERDIRECT), "peerdirect"), "path names");
	CHECK_OK(sp_dereg_mr(b));
	CHECK_OK(sp_dereg_mr(a));
	CHECK(sp_reg_mr(dev, v.pd, host, 0, ACCESS, 0, &a) == -EINVAL, "zero length");
	CHECK(sp_reg_mr(dev, v.pd, host, MiB, ACCESS, 1U << 20, &a) == -EINVAL, "flags");
	free(host);
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/*
 * A buffer's pages are charged once against RLIMIT_MEMLOCK (the user's
 * locked_vm), not also to the process's pinned_vm: ibv_reg_mr() charges
 * that itself, so a process may register all it allocated. As nobody
 * with Debian's 8 MiB limit: a 6 MiB buffer registers whole, by plain
 * ibv_reg_mr() (what RCCL and UCX call) and by sp_reg_mr().
 */
static void test_regmr_unprivileged_whole_buffer(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct rlimit rl = { .rlim_cur = 8 * MiB, .rlim_max = 8 * MiB };
	struct ibv_mr *m;
	struct sp_buf *buf, *more;
	struct sp_mr *mr;

	CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
	CHECK_OK(setgroups(0, NULL));
	CHECK_OK(setresgid(65534, 65534, 65534));
	CHECK_OK(setresuid(65534, 65534, 65534));
	CHECK(sp_buf_alloc(dev, 6 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	m = ibv_reg_mr(v.pd, sp_buf_addr(buf), 6 * MiB, ACCESS);
	CHECK(m, "ibv_reg_mr of all of a 6 MiB buffer with RLIMIT_MEMLOCK 8 MiB: %s",
	      strerror(errno));
	CHECK_OK(ibv_dereg_mr(m));
	CHECK(sp_reg_mr(dev, v.pd, sp_buf_addr(buf), 6 * MiB, ACCESS, 0, &mr) == 0,
	      "sp_reg_mr of all of a 6 MiB buffer with RLIMIT_MEMLOCK 8 MiB: %s", sp_errmsg());
	CHECK_OK(sp_dereg_mr(mr));
	/* the limit itself still holds: 6 + 4 MiB of buffers is past it */
	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &more) == -EDQUOT, "%s", sp_errmsg());
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

static void test_regmr_cache(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_mr *a, *b, *c, *d;
	struct sp_reg_stats st;
	struct sp_buf *buf;
	uint8_t *p;
	void *host;

	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	p = sp_buf_addr(buf);
	CHECK(sp_reg_mr(dev, v.pd, p, 2 * MiB, ACCESS, 0, &a) == 0, "%s", sp_errmsg());
	CHECK(sp_reg_mr(dev, v.pd, p, 2 * MiB, ACCESS, 0, &b) == 1, "no cache hit: %s",
	      sp_errmsg());
	CHECK(a == b && sp_mr_ibv(a) == sp_mr_ibv(b), "hit returned another MR");
	/* other access or range: another registration */
	CHECK(sp_reg_mr(dev, v.pd, p, 2 * MiB, IBV_ACCESS_LOCAL_WRITE, 0, &c) == 0, "%s",
	      sp_errmsg());
	CHECK(c != a, "different access shared an MR");
	CHECK(sp_reg_mr(dev, v.pd, p, 2 * MiB, ACCESS, SP_REG_NO_CACHE, &d) == 0, "%s",
	      sp_errmsg());
	CHECK(d != a, "SP_REG_NO_CACHE shared an MR");
	CHECK_OK(sp_dereg_mr(d));
	st = reg_stats(dev);
	CHECK(st.hits == 1 && st.misses == 3 && st.entries == 2, "hits %llu misses %llu entries %llu",
	      (unsigned long long)st.hits, (unsigned long long)st.misses,
	      (unsigned long long)st.entries);
	/* a strixpeer buffer's registration stays cached without users */
	CHECK_OK(sp_dereg_mr(b));
	CHECK_OK(sp_dereg_mr(a));
	st = reg_stats(dev);
	CHECK(st.entries == 2 && st.idle == 1, "entries %llu idle %llu",
	      (unsigned long long)st.entries, (unsigned long long)st.idle);
	CHECK(sp_reg_mr(dev, v.pd, p, 2 * MiB, ACCESS, 0, &b) == 1 && b == a,
	      "idle registration not reused");
	CHECK_OK(sp_dereg_mr(b));
	CHECK(sp_dereg_mr(b) == -EINVAL, "dereg without a reference accepted");
	CHECK_OK(sp_dereg_mr(c));
	CHECK(sp_reg_cache_flush(dev) == 2, "flush");
	CHECK(reg_stats(dev).entries == 0, "entries after flush");
	/* host memory goes with its last reference (free() is invisible) */
	host = aligned_alloc(4096, MiB);
	CHECK(host, "malloc");
	CHECK(sp_reg_mr(dev, v.pd, host, MiB, ACCESS, 0, &a) == 0, "%s", sp_errmsg());
	CHECK_OK(sp_dereg_mr(a));
	CHECK(reg_stats(dev).entries == 0, "host memory registration kept");
	free(host);
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/* Freeing a buffer drops its entries: a new buffer at the same address
 * gets a new MR, never the old one. */
static void test_regmr_free_drops_cache(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_mr *a, *held, *b;
	struct sp_buf *buf, *buf2;
	uint32_t old_lkey;
	void *p;

	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	p = sp_buf_addr(buf);
	CHECK(sp_reg_mr(dev, v.pd, p, 2 * MiB, ACCESS, 0, &a) == 0, "%s", sp_errmsg());
	CHECK(sp_reg_mr(dev, v.pd, p, MiB, ACCESS, 0, &held) == 0, "%s", sp_errmsg());
	old_lkey = sp_mr_ibv(held)->lkey;
	CHECK_OK(sp_dereg_mr(a));	/* idle, cached */
	CHECK_OK(sp_buf_free(buf));
	CHECK(reg_stats(dev).dropped == 2 && reg_stats(dev).entries == 0,
	      "dropped %llu entries %llu", (unsigned long long)reg_stats(dev).dropped,
	      (unsigned long long)reg_stats(dev).entries);
	/* the held one still works (its pages stay pinned) until dereg */
	CHECK(sp_mr_ibv(held)->lkey == old_lkey, "held MR changed");
	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &buf2) == 0, "%s", sp_errmsg());
	CHECK(sp_reg_mr(dev, v.pd, sp_buf_addr(buf2), MiB, ACCESS, 0, &b) == 0,
	      "stale registration reused for a new buffer%s",
	      sp_buf_addr(buf2) == p ? " at the same address" : "");
	CHECK(b != held, "same MR");
	tap_diag("new buffer %s the old address", sp_buf_addr(buf2) == p ? "reuses" : "does not reuse");
	CHECK_OK(sp_dereg_mr(held));
	CHECK_OK(sp_dereg_mr(b));
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/* rxe cannot register dma-bufs: forced onto that path, the helper says so. */
static void test_regmr_dmabuf_unsupported_reported(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *buf;
	struct sp_mr *a;
	int ret;

	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	ret = sp_reg_mr(dev, v.pd, sp_buf_addr(buf), 2 * MiB, ACCESS, SP_REG_NO_PLAIN, &a);
	if (ret >= 0) {
		CHECK(sp_mr_path(a) == SP_REG_DMABUF, "path %s", sp_reg_path_name(sp_mr_path(a)));
		SKIP("this verbs device registers dma-bufs (not Soft-RoCE?)");
	}
	tap_diag("%s", sp_errmsg());
	CHECK(strstr(sp_errmsg(), "plain: excluded by SP_REG_NO_PLAIN") &&
	      strstr(sp_errmsg(), "dma-buf: ibv_reg_dmabuf_mr: ") &&
	      strstr(sp_errmsg(), "PeerDirect: no import"), "message: %s", sp_errmsg());
	/* without the restriction the same range registers, plainly */
	CHECK(sp_reg_mr(dev, v.pd, sp_buf_addr(buf), 2 * MiB, ACCESS, 0, &a) == 0, "%s",
	      sp_errmsg());
	CHECK(sp_mr_path(a) == SP_REG_PLAIN, "path");
	CHECK_OK(sp_dereg_mr(a));
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/* A GPU-like mapping (vgem's own, a PFN mapping) with no import. */
static void test_regmr_unregistrable_names_reasons(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_xbuf x;
	struct sp_mr *a;
	int ret;

	sp_xbuf_new(SP_EXP_VGEM, MiB, 1, &x);
	ret = sp_reg_mr(dev, v.pd, x.map, MiB, ACCESS, 0, &a);
	CHECK(ret < 0, "a PFN mapping registered (path %s)",
	      ret >= 0 ? sp_reg_path_name(sp_mr_path(a)) : "");
	tap_diag("%s", sp_errmsg());
	/* rxe asks no peer and has no dma-buf MRs: GPU memory has no route */
	CHECK(strstr(sp_errmsg(), "plain: GPU memory (a GEM mapping): the kernel cannot pin") &&
	      strstr(sp_errmsg(), "dma-buf: ibv_reg_dmabuf_mr: ") &&
	      strstr(sp_errmsg(), "this device cannot register dma-bufs") &&
	      strstr(sp_errmsg(), "PeerDirect: ") &&
	      strstr(sp_errmsg(), "GPU memory registers through a NIC whose driver takes dma-buf MRs"),
	      "message: %s", sp_errmsg());
	sp_xbuf_free(&x);
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/* An import of a strixpeer export: dma-buf first, then the fallback. */
static void test_regmr_import_falls_back(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_import *imp;
	struct sp_buf *buf;
	struct sp_mr *a;
	uint8_t *m;
	int fd;

	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	CHECK(sp_buf_export(buf, SP_EXPORT_RDWR, &fd) == 0, "%s", sp_errmsg());
	m = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(sp_import_dmabuf(dev, fd, 0, 2 * MiB, m, &imp) == 0, "%s", sp_errmsg());
	close(fd);
	CHECK(sp_reg_mr(dev, v.pd, m, 2 * MiB, ACCESS, 0, &a) == 0, "%s", sp_errmsg());
	CHECK(sp_mr_path(a) == SP_REG_PLAIN, "path %s", sp_reg_path_name(sp_mr_path(a)));
	tap_diag("import of a strixpeer export on %s: path %s", ibv_get_device_name(v.ctx->device),
		 sp_reg_path_name(sp_mr_path(a)));
	/* only the dma-buf path: rxe cannot, and the message says so */
	CHECK(sp_reg_mr(dev, v.pd, m, MiB, ACCESS, SP_REG_NO_PLAIN | SP_REG_NO_PEERDIRECT, &a) < 0,
	      "dma-buf MR on rxe");
	CHECK(strstr(sp_errmsg(), "dma-buf: ibv_reg_dmabuf_mr"), "message: %s", sp_errmsg());
	/* the import going drops its registrations from the cache */
	CHECK_OK(sp_dereg_mr(a));
	CHECK(reg_stats(dev).entries == 1, "entries");
	CHECK(sp_import_free(imp) == 0, "%s", sp_errmsg());
	CHECK(reg_stats(dev).entries == 0, "import's registration kept");
	munmap(m, 2 * MiB);
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/* After fork() the child may not use its parent's device or cache. */
static void test_regmr_fork(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *buf;
	struct sp_mr *a;
	int status;
	pid_t pid;

	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	CHECK(sp_reg_mr(dev, v.pd, sp_buf_addr(buf), 2 * MiB, ACCESS, 0, &a) == 0, "%s",
	      sp_errmsg());
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct sp_mr *b;
		struct sp_dev *d2;
		struct sp_buf *b2;
		struct verbs v2;

		if (sp_reg_mr(dev, v.pd, sp_buf_addr(buf), 2 * MiB, ACCESS, 0, &b) != -EACCES ||
		    !strstr(sp_errmsg(), "after fork()"))
			_exit(2);
		if (sp_dereg_mr(a) != -EACCES)
			_exit(3);
		v2 = verbs_open();
		if (sp_dev_open(NULL, &d2) || sp_buf_alloc(d2, MiB, SP_NODE_DEFAULT, 0, &b2))
			_exit(4);
		if (sp_reg_mr(d2, v2.pd, sp_buf_addr(b2), MiB, ACCESS, 0, &b) != 0 ||
		    sp_mr_path(b) != SP_REG_PLAIN)
			_exit(5);
		sp_dereg_mr(b);
		sp_dev_close(d2);
		/* closing the inherited device must leave the parent's MR */
		sp_dev_close(dev);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "child died");
	CHECK(WEXITSTATUS(status) == 0, "child failed at step %d", WEXITSTATUS(status));
	/* the parent's registration is untouched */
	CHECK(sp_reg_mr(dev, v.pd, sp_buf_addr(buf), 2 * MiB, ACCESS, 0, &a) == 1, "%s",
	      sp_errmsg());
	CHECK_OK(sp_dereg_mr(a));
	CHECK_OK(sp_dereg_mr(a));
	/* still registered: ibv_dereg_mr() succeeds here, once */
	CHECK(sp_reg_cache_flush(dev) == 1, "flush: %s", sp_errmsg());
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/*
 * An export passed to another process: it maps and registers the bytes
 * with its own verbs context, writes them, and keeps them after the owner
 * freed the buffer and closed everything.
 */
static void test_regmr_fd_passing(void)
{
	uint64_t buffers0 = sp_test_stats().buffers;
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *buf;
	int sv[2], fd, status;
	char c;
	pid_t pid;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct verbs v2 = verbs_open();
		struct sp_dev *d2;
		struct sp_mr *b;
		uint8_t *m;
		int xfd;

		close(sv[0]);
		xfd = sp_recv_fd(sv[1]);	/* fails the case itself */
		m = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, xfd, 0);
		if (m == MAP_FAILED || sp_verify(m, 2 * MiB, 0, 5) >= 0)
			_exit(3);
		if (sp_dev_open(NULL, &d2))
			_exit(4);
		/* not a buffer of this process's device: host memory to it */
		if (sp_reg_mr(d2, v2.pd, m, 2 * MiB, ACCESS, 0, &b) != 0 ||
		    sp_mr_path(b) != SP_REG_PLAIN)
			_exit(5);
		sp_fill(m, 2 * MiB, 0, 6);
		if (write(sv[1], "w", 1) != 1 || read(sv[1], &c, 1) != 1)
			_exit(6);
		/* the owner freed everything: the bytes are still here */
		close(xfd);
		if (sp_verify(m, 2 * MiB, 0, 6) >= 0)
			_exit(7);
		sp_fill(m, 2 * MiB, 0, 7);
		if (sp_verify(m, 2 * MiB, 0, 7) >= 0)
			_exit(8);
		sp_dereg_mr(b);
		sp_dev_close(d2);
		munmap(m, 2 * MiB);
		_exit(0);
	}
	close(sv[1]);
	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	sp_fill(sp_buf_addr(buf), 2 * MiB, 0, 5);
	CHECK(sp_buf_export(buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &fd) == 0, "%s",
	      sp_errmsg());
	sp_send_fd(sv[0], fd);
	CHECK(read(sv[0], &c, 1) == 1, "child failed before writing");
	CHECK(sp_verify(sp_buf_addr(buf), 2 * MiB, 0, 6) < 0, "child's bytes not in the buffer");
	CHECK_OK(sp_buf_free(buf));
	close(fd);
	sp_dev_close(dev);
	CHECK(sp_test_stats().buffers == buffers0 + 1, "buffer went while the child holds it");
	CHECK(write(sv[0], "g", 1) == 1, "go");
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "child died");
	CHECK(WEXITSTATUS(status) == 0, "child failed at step %d", WEXITSTATUS(status));
	close(sv[0]);
	CHECK_NOTHING_PINNED();
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Measured, not asserted: what the cache saves on a 64 MiB buffer. */
static void test_regmr_cached_vs_uncached_64m(void)
{
	struct verbs v = verbs_open();
	struct sp_dev *dev = sp_test_dev();
	struct sp_mr *a, *b, *c;
	struct sp_buf *buf;
	double t0, t1, t2, t3;
	void *p;

	CHECK(sp_buf_alloc(dev, 64 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	p = sp_buf_addr(buf);
	t0 = now_us();
	CHECK(sp_reg_mr(dev, v.pd, p, 64 * MiB, ACCESS, 0, &a) == 0, "%s", sp_errmsg());
	t1 = now_us();
	CHECK(sp_reg_mr(dev, v.pd, p, 64 * MiB, ACCESS, 0, &b) == 1, "%s", sp_errmsg());
	t2 = now_us();
	CHECK(sp_reg_mr(dev, v.pd, p, 64 * MiB, ACCESS, SP_REG_NO_CACHE, &c) == 0, "%s",
	      sp_errmsg());
	t3 = now_us();
	CHECK(a == b, "hit");
	tap_diag("reg_64m uncached_us %.0f cached_us %.2f uncached_again_us %.0f (ratio %.0fx)",
		 t1 - t0, t2 - t1, t3 - t2, (t1 - t0) / (t2 - t1 > 0.01 ? t2 - t1 : 0.01));
	CHECK_OK(sp_dereg_mr(c));
	CHECK_OK(sp_dereg_mr(b));
	CHECK_OK(sp_dereg_mr(a));
	sp_dev_close(dev);
	verbs_close(&v);
	CHECK_NOTHING_PINNED();
}

/*
 * RDMA end to end: the target node allocates a buffer, exports it, has
 * vgem import it, maps the dma-buf vgem hands back, declares that mapping
 * as an import and registers it with sp_reg_mr(); the initiator writes
 * into it; the target reads the bytes back through vgem's dma-buf.
 */
struct vgem_target {
	struct sp_buf *buf;
	struct sp_import *imp;
	struct sp_mr *mr;
	int card;
	uint32_t gem;
	uint8_t *view;
};

static struct vgem_target vt;

#define E2E_LEN	(8 * MiB)

static void vgem_setup(struct sp_rc *n, struct sp_dev *dev)
{
	struct sp_drm_prime_handle back = { .flags = O_RDWR | O_CLOEXEC };
	int fd;

	vt.card = sp_vgem_card();
	CHECK(vt.card >= 0, "no vgem card");
	CHECK(sp_buf_alloc(dev, E2E_LEN, SP_NODE_DEFAULT, 0, &vt.buf) == 0, "%s", sp_errmsg());
	memset(sp_buf_addr(vt.buf), 0, E2E_LEN);
	CHECK(sp_buf_export(vt.buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &fd) == 0, "%s",
	      sp_errmsg());
	vt.gem = sp_vgem_import(vt.card, fd);
	close(fd);
	back.handle = vt.gem;
	CHECK_OK(ioctl(vt.card, SP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &back));
	vt.view = mmap(NULL, E2E_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, back.fd, 0);
	CHECK(vt.view != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(sp_import_dmabuf(dev, back.fd, 0, E2E_LEN, vt.view, &vt.imp) == 0, "%s",
	      sp_errmsg());
	close(back.fd);
	CHECK(sp_reg_mr(dev, n->pd, vt.view, E2E_LEN, ACCESS, 0, &vt.mr) == 0, "%s",
	      sp_errmsg());
	n->buf = vt.view;
	n->len = E2E_LEN;
	n->mr = sp_mr_ibv(vt.mr);
	fprintf(stderr, "# target: registered vgem's view of the export through path %s\n",
		sp_reg_path_name(sp_mr_path(vt.mr)));
}

static void vgem_teardown(struct sp_rc *n)
{
	(void)n;
	CHECK_OK(sp_dereg_mr(vt.mr));
	CHECK_OK(sp_import_free(vt.imp));
	munmap(vt.view, E2E_LEN);
	sp_vgem_close(vt.card, vt.gem);
	close(vt.card);
	CHECK_OK(sp_buf_free(vt.buf));
}

static const struct target_ops vgem_ops = {
	.setup = vgem_setup,
	.teardown = vgem_teardown,
};

static void test_rdma_write_into_vgem_import(void)
{
	struct msg m = { 0 };
	struct pair p;
	int card = sp_vgem_card();
	size_t len = E2E_LEN;

	if (card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	close(card);
	/* 2 MiB on a debug kernel: rxe's per-packet work is what costs there */
	if (tap_debug_kernel())
		len = 2 * MiB;
	pair_target_ops = &vgem_ops;
	pair_open(&p, E2E_LEN);
	sp_fill(p.host, len, 0, 99);
	post_rdma(&p, IBV_WR_RDMA_WRITE, 0, 0, len);
	m.cmd = CMD_VERIFY;
	m.off = 0;
	m.len = len;
	m.seed = 99;
	xfer(p.sock, &m);
	CHECK(m.result < 0, "byte %lld read through vgem's dma-buf is wrong", (long long)m.result);
	pair_close(&p);
}

static const struct tap_case cases[] = {
	TAP_CASE(test_regmr_buffer_and_malloc_plain),
	TAP_CASE(test_regmr_unprivileged_whole_buffer),
	TAP_CASE(test_regmr_cache),
	TAP_CASE(test_regmr_free_drops_cache),
	TAP_CASE(test_regmr_dmabuf_unsupported_reported),
	TAP_CASE(test_regmr_unregistrable_names_reasons),
	TAP_CASE(test_regmr_import_falls_back),
	TAP_CASE(test_regmr_fork),
	TAP_CASE(test_regmr_fd_passing),
	TAP_CASE_T(test_regmr_cached_vs_uncached_64m, 300),
	TAP_CASE_T(test_rdma_write_into_vgem_import, 300),
};

TAP_MAIN(cases)
