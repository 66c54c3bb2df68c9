// SPDX-License-Identifier: MIT
/*
 * A strixpeer buffer that the GPU reaches the way amdgpu does and an RDMA
 * NIC registers with a plain ibv_reg_mr(), data checked at both ends.
 *
 * The GPU is sp_kfdsim (tests/kmod/kfdsim.c, kfdsim_dmabuf.c): it reaches
 * the buffer as a KFD userptr (hipHostRegister(): interval notifier +
 * hmm_range_fault()) or by importing the buffer's dma-buf as amdgpu
 * imports a foreign one (hipImportExternalMemory(), RADV's
 * VK_EXT_external_memory_dma_buf: a dynamic attachment mapped under the
 * reservation lock at validation, with move_notify; or a static one). The
 * NIC is the target node of tests/lib/rdma_pair.h (Soft-RoCE, plain
 * ibv_reg_mr() of the buffer). For 4 KiB, 2 MiB and 64 MiB + 4 KiB
 * (SP_RDMA_MAX on debug kernels): the GPU fills the buffer and the other
 * node RDMA READs it, every byte compared; the other node RDMA WRITEs it and
 * the GPU checks every byte. For the import also: an eviction (as TTM's
 * of a GTT BO) unmaps and the next GPU use maps again; freeing the buffer,
 * closing the dma-buf and exiting while the GPU side holds the import free
 * nothing under it (its bytes are intact after) and leave nothing once it
 * lets go. strixpeer never moves a buffer, so no move_notify may arrive.
 * The import runs on 6.1 too: 6.1's KFD (HIP) refuses a dma-buf it did
 * not export, but its amdgpu's PRIME import (RADV) is this one.
 *
 * The kfdsim file is opened before the pair forks: the target process makes
 * the userptr (in its own mm) or the import, the initiator process drives
 * the GPU through the same file.
 */
#include "sp_test.h"

#include "kfdsim.h"
#include "rdma_pair.h"

#define NO_BAD (~0ULL)
#define U(x) ((unsigned long long)(x))
#define CHUNK (16 * MiB)

enum way { WAY_USERPTR, WAY_IMPORT, WAY_IMPORT_STATIC };

static const char *const way_name[] = { "userptr (hmm)", "dma-buf import (dynamic)",
					"dma-buf import (static)" };

/* What the target sets up (fork copies these into it). */
static struct {
	int kfd;
	enum way way;
	uint64_t size;
	struct sp_buf *buf;	/* the target's */
} g;

static unsigned long gpu_cmd(bool fill)
{
	if (g.way == WAY_USERPTR)
		return fill ? SP_KFDSIM_IOC_FILL : SP_KFDSIM_IOC_CHECK;
	return fill ? SP_KFDSIM_IOC_IMPORT_FILL : SP_KFDSIM_IOC_IMPORT_CHECK;
}

static struct sp_kfdsim_import_status import_status(int fd)
{
	struct sp_kfdsim_import_status st;

	CHECK(ioctl(fd, SP_KFDSIM_IOC_IMPORT_STATUS, &st) == 0, "IMPORT_STATUS: %s",
	      strerror(errno));
	return st;
}

static void gpu_fill(int fd, uint64_t len, uint32_t seed)
{
	struct sp_kfdsim_gpu gp = { .length = len, .seed = seed };

	CHECK(ioctl(fd, gpu_cmd(true), &gp) == 0, "GPU fill (%s): %s", way_name[g.way],
	      strerror(errno));
}

static void gpu_check(int fd, uint64_t len, uint32_t seed)
{
	struct sp_kfdsim_gpu gp = { .length = len, .seed = seed };

	CHECK(ioctl(fd, gpu_cmd(false), &gp) == 0, "GPU check (%s): %s", way_name[g.way],
	      strerror(errno));
	CHECK(gp.bad == NO_BAD, "the GPU read a wrong byte at %llu of %" PRIu64 " (%s)",
	      U(gp.bad), len, way_name[g.way]);
}

/* The buffer's dma-buf imported into the GPU side, as the target does. */
static void import_buf(int kfd, struct sp_buf *b, uint32_t flags)
{
	struct sp_kfdsim_import imp = { .flags = flags };
	int dfd;

	CHECK(sp_buf_export(b, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &dfd) == 0, "export: %s",
	      sp_errmsg());
	imp.fd = dfd;
	CHECK(ioctl(kfd, SP_KFDSIM_IOC_IMPORT, &imp) == 0, "IMPORT: %s", strerror(errno));
	close(dfd);	/* the GPU side holds its own reference */
}

static void target_setup(struct sp_rc *n, struct sp_dev *dev)
{
	CHECK(sp_buf_alloc(dev, g.size, SP_NODE_DEFAULT, 0, &g.buf) == 0, "alloc %" PRIu64 ": %s",
	      g.size, sp_errmsg());
	n->buf = sp_buf_addr(g.buf);
	n->len = sp_buf_size(g.buf);
	n->mr = ibv_reg_mr(n->pd, n->buf, n->len, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(n->mr, "ibv_reg_mr on a strixpeer buffer: %s", strerror(errno));
	if (g.way == WAY_USERPTR) {
		struct sp_kfdsim_userptr u = { .addr = (uintptr_t)n->buf, .length = n->len };

		CHECK(ioctl(g.kfd, SP_KFDSIM_IOC_USERPTR, &u) == 0, "USERPTR: %s",
		      strerror(errno));
	} else {
		import_buf(g.kfd, g.buf, g.way == WAY_IMPORT_STATIC ? SP_KFDSIM_IMPORT_STATIC : 0);
	}
}

static void target_teardown(struct sp_rc *n)
{
	CHECK(ioctl(g.kfd, g.way == WAY_USERPTR ? SP_KFDSIM_IOC_DESTROY :
		    SP_KFDSIM_IOC_DESTROY_IMPORT) == 0, "DESTROY: %s", strerror(errno));
	CHECK_OK(ibv_dereg_mr(n->mr));
	CHECK(sp_buf_free(g.buf) == 0, "free: %s", sp_errmsg());
}

static const struct target_ops kfd_target = {
	.setup = target_setup,
	.teardown = target_teardown,
};

/* RDMA READ or WRITE of [0, len) of the target buffer, CHUNK at a time. */
static void rdma_all(struct pair *p, enum ibv_wr_opcode op, uint64_t len)
{
	for (uint64_t off = 0; off < len; off += CHUNK)
		post_rdma(p, op, off, off, len - off < CHUNK ? len - off : CHUNK);
}

static uint64_t largest(void)
{
	const char *cap = getenv("SP_RDMA_MAX");
	uint64_t big = 64 * MiB + 4096;

	if (cap && strtoull(cap, NULL, 0) && strtoull(cap, NULL, 0) < big)
		big = (strtoull(cap, NULL, 0) + 4095) & ~4095ULL;
	return big;
}

static void gpu_and_nic(enum way way)
{
	const uint64_t sizes[] = { 4096, 2 * MiB, largest() };

	pair_target_ops = &kfd_target;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t seed = 0x4b0 + (uint32_t)i * 16 + (uint32_t)way;
		struct pair p;
		int64_t bad;

		g.kfd = sp_kfdsim_open();
		g.way = way;
		g.size = sizes[i];
		pair_open(&p, sizes[i]);
		if (way != WAY_USERPTR) {
			struct sp_kfdsim_import_status st = import_status(g.kfd);

			CHECK(st.size == sizes[i] && st.mapped && st.maps == 1 &&
			      st.dynamic == (way == WAY_IMPORT), "import: %llu bytes, mapped %u, "
			      "%llu maps, dynamic %u", U(st.size), st.mapped, U(st.maps), st.dynamic);
			tap_diag("%s, %" PRIu64 " bytes: %llu DMA segment(s)", way_name[way],
				 sizes[i], U(st.dma_segments));
		}
		/* the GPU writes, the other node RDMA READs every byte */
		gpu_fill(g.kfd, sizes[i], seed);
		memset(p.host, 0, sizes[i]);
		rdma_all(&p, IBV_WR_RDMA_READ, sizes[i]);
		bad = sp_verify(p.host, sizes[i], 0, seed);
		CHECK(bad < 0, "RDMA READ of what the GPU wrote (%s): wrong byte at %" PRId64
		      " of %" PRIu64, way_name[way], bad, sizes[i]);
		/* the other node RDMA WRITEs, the GPU reads every byte */
		sp_fill(p.host, sizes[i], 0, seed + 1);
		rdma_all(&p, IBV_WR_RDMA_WRITE, sizes[i]);
		if (way == WAY_IMPORT)	/* TTM evicts the GTT BO: the next use maps again */
			CHECK(ioctl(g.kfd, SP_KFDSIM_IOC_EVICT_IMPORT) == 0, "EVICT: %s",
			      strerror(errno));
		gpu_check(g.kfd, sizes[i], seed + 1);
		if (way != WAY_USERPTR) {
			struct sp_kfdsim_import_status st = import_status(g.kfd);
			uint64_t again = way == WAY_IMPORT;

			CHECK(st.mapped && st.evictions == again && st.revalidations == again &&
			      st.maps == 1 + again && !st.move_notifies,
			      "after the use: mapped %u, %llu evictions, %llu revalidations, "
			      "%llu maps, %llu move_notifies", st.mapped, U(st.evictions),
			      U(st.revalidations), U(st.maps), U(st.move_notifies));
		} else {
			struct sp_kfdsim_status st;

			CHECK(ioctl(g.kfd, SP_KFDSIM_IOC_STATUS, &st) == 0, "STATUS: %s",
			      strerror(errno));
			CHECK(st.valid && !st.invalidations, "userptr: valid %u, %llu "
			      "invalidations (the NIC's pin and DMA must not invalidate it)",
			      st.valid, U(st.invalidations));
		}
		pair_close(&p);		/* the target destroys what it made, frees */
		close(g.kfd);
	}
	pair_target_ops = NULL;
}

static void userptr_gpu_and_rdma(void)
{
	gpu_and_nic(WAY_USERPTR);
}

static void import_gpu_and_rdma(void)
{
	gpu_and_nic(WAY_IMPORT);
}

static void static_import_gpu_and_rdma(void)
{
	gpu_and_nic(WAY_IMPORT_STATIC);
}

/*
 * The module lets a buffer go when the last dma-buf reference does, which
 * an exiting process may leave to a worker (delayed fput): wait, bounded.
 */
static void wait_nothing_pinned(void)
{
	struct sp_stats s = sp_test_stats();

	for (int i = 0; i < 500 && (s.buffers || s.pinned_bytes); i++) {
		usleep(10000);
		s = sp_test_stats();
	}
	CHECK(s.buffers == 0 && s.pinned_bytes == 0, "5 s after the last reference went, the "
	      "module still holds %" PRIu64 " buffers, %" PRIu64 " bytes", s.buffers,
	      s.pinned_bytes);
}

/*
 * The process that made the import frees the buffer, closes its dma-buf and
 * exits while the GPU side holds the import: nothing is freed under the
 * GPU (its bytes are intact), no move_notify comes (strixpeer never moves
 * a buffer), and all goes once the GPU side lets go - by DESTROY_IMPORT,
 * or with the kfdsim file of an exiting process.
 */
static void free_and_exit_while_imported(void)
{
	for (int own_file = 0; own_file <= 1; own_file++) {
		int kfd = own_file ? -1 : sp_kfdsim_open(), pfd[2], status;
		pid_t pid;
		char c;

		CHECK(pipe(pfd) == 0, "pipe: %s", strerror(errno));
		pid = fork();
		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			struct sp_dev *dev = sp_test_dev();
			struct sp_buf *b;

			close(pfd[0]);
			if (own_file)
				kfd = sp_kfdsim_open();
			CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &b) == 0,
			      "alloc: %s", sp_errmsg());
			import_buf(kfd, b, 0);
			g.way = WAY_IMPORT;
			gpu_fill(kfd, 4 * MiB, 21);
			CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());
			sp_dev_close(dev);
			CHECK(write(pfd[1], "r", 1) == 1, "write: %s", strerror(errno));
			_exit(0);	/* holding the kfdsim file, when its own */
		}
		close(pfd[1]);
		CHECK(read(pfd[0], &c, 1) == 1, "the child failed before importing");
		close(pfd[0]);
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
		      "child: status %#x", status);
		if (!own_file) {
			struct sp_kfdsim_import_status st;
			struct sp_stats s = sp_test_stats();

			tap_diag("after free, close and exit: the module holds %" PRIu64
				 " buffer(s)", s.buffers);
			CHECK(s.buffers == 1, "the module holds %" PRIu64 " buffers, want the "
			      "imported one", s.buffers);
			g.way = WAY_IMPORT;
			/* an eviction and a use: mapped again, same bytes */
			CHECK(ioctl(kfd, SP_KFDSIM_IOC_EVICT_IMPORT) == 0, "EVICT: %s",
			      strerror(errno));
			gpu_check(kfd, 4 * MiB, 21);
			st = import_status(kfd);
			CHECK(!st.move_notifies && st.revalidations == 1,
			      "%llu move_notifies, %llu revalidations", U(st.move_notifies),
			      U(st.revalidations));
			CHECK(ioctl(kfd, SP_KFDSIM_IOC_DESTROY_IMPORT) == 0, "DESTROY_IMPORT: %s",
			      strerror(errno));
			CHECK_ERR(ioctl(kfd, SP_KFDSIM_IOC_IMPORT_STATUS, &st), ENOENT);
			close(kfd);
		}
		wait_nothing_pinned();
	}
}

/* What is no dma-buf, and a second import, are refused. */
static void import_refusals(void)
{
	struct sp_dev *dev = sp_test_dev();
	int kfd = sp_kfdsim_open();
	struct sp_kfdsim_import imp = { .fd = kfd };
	struct sp_kfdsim_gpu gp = { .length = 4096 };
	struct sp_buf *b;

	CHECK_ERR(ioctl(kfd, SP_KFDSIM_IOC_IMPORT, &imp), EINVAL);	/* not a dma-buf */
	CHECK_ERR(ioctl(kfd, SP_KFDSIM_IOC_IMPORT_FILL, &gp), ENOENT);
	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "alloc: %s", sp_errmsg());
	import_buf(kfd, b, SP_KFDSIM_IMPORT_STATIC);
	CHECK(sp_buf_export(b, SP_EXPORT_CLOEXEC, &imp.fd) == 0, "export: %s", sp_errmsg());
	CHECK_ERR(ioctl(kfd, SP_KFDSIM_IOC_IMPORT, &imp), EBUSY);
	close(imp.fd);
	CHECK_ERR(ioctl(kfd, SP_KFDSIM_IOC_EVICT_IMPORT), EINVAL);	/* static: pinned */
	gp.offset = 2 * MiB;
	CHECK_ERR(ioctl(kfd, SP_KFDSIM_IOC_IMPORT_CHECK, &gp), EINVAL);	/* past the end */
	CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());
	close(kfd);		/* the import goes with the file */
	sp_dev_close(dev);
	wait_nothing_pinned();
}

static const struct tap_case cases[] = {
	TAP_CASE_T(userptr_gpu_and_rdma, 900),
	TAP_CASE_T(import_gpu_and_rdma, 900),
	TAP_CASE_T(static_import_gpu_and_rdma, 900),
	TAP_CASE(free_and_exit_while_imported),
	TAP_CASE(import_refusals),
};

TAP_MAIN(cases)
