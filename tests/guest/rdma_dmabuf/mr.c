// SPDX-License-Identifier: MIT
/* rdma_dmabuf: ibv_reg_dmabuf_mr() of each exporter's dma-buf, its iova and errors */
#include "rdma_dmabuf.h"

void test_dmabuf_mr_udmabuf(void)
{
	exporter_roundtrip(SP_EXP_UDMABUF, 11);
}

void test_dmabuf_mr_vgem(void)
{
	exporter_roundtrip(SP_EXP_VGEM, 12);
}

void test_dmabuf_mr_system_heap(void)
{
	exporter_roundtrip(SP_EXP_HEAP, 13);
}

void test_dmabuf_mr_strixpeer_export(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *buf;
	int fd;

	CHECK(sp_buf_alloc(dev, XLEN, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	CHECK(sp_buf_size(buf) >= XLEN, "buffer of %zu bytes", sp_buf_size(buf));
	CHECK(sp_buf_export(buf, SP_EXPORT_CLOEXEC | SP_EXPORT_RDWR, &fd) == 0, "%s", sp_errmsg());
	dmabuf_roundtrip(fd, sp_buf_addr(buf), 14);
	close(fd);
	CHECK_OK(sp_buf_free(buf));
	sp_dev_close(dev);
}

/* An iova of the caller's choosing; the errors, each with its errno. */
void test_dmabuf_mr_iova_and_errors(void)
{
	uint64_t iova = 0x7e5700000000ULL + (MR_OFF & 4095);
	struct ibv_mr *mr;
	struct sp_xbuf x;
	struct two t;
	int memfd;

	sp_xbuf_new(SP_EXP_UDMABUF, XLEN, 0, &x);
	two_open(&t);
	mr = reg_dmabuf(t.b.pd, MR_OFF, MR_LEN, iova, x.fd, ACCESS);
	CHECK(mr, "ibv_reg_dmabuf_mr at iova %#" PRIx64 ": %s", iova, strerror(errno));
	check_mr(&t, mr, iova, x.map + MR_OFF, MR_OFF, 21);
	CHECK_OK(ibv_dereg_mr(mr));

	/* iova and offset differ in a page: rxe maps PAGE_SIZE pages */
	errno = 0;
	CHECK(!reg_dmabuf(t.b.pd, MR_OFF, MR_LEN, iova + 1, x.fd, ACCESS) && errno == EINVAL,
	      "iova %#" PRIx64 " with offset %#llx: %s", iova + 1, (unsigned long long)MR_OFF,
	      strerror(errno));
	/* past the dma-buf's end */
	errno = 0;
	CHECK(!reg_dmabuf(t.b.pd, 4096, XLEN, 4096, x.fd, ACCESS) && errno == EINVAL,
	      "a range past the dma-buf: %s", strerror(errno));
	/* an fd that is no dma-buf */
	memfd = memfd_create("sp-not-a-dmabuf", MFD_CLOEXEC);
	CHECK(memfd >= 0 && ftruncate(memfd, XLEN) == 0, "memfd: %s", strerror(errno));
	errno = 0;
	CHECK(!reg_dmabuf(t.b.pd, 0, 4096, 0, memfd, ACCESS) && errno == EINVAL,
	      "a memfd as a dma-buf: %s", strerror(errno));
	errno = 0;
	CHECK(!reg_dmabuf(t.b.pd, 0, 4096, 0, 1000, ACCESS) && errno == EBADF,
	      "a closed fd: %s", strerror(errno));
	close(memfd);
	sp_xbuf_free(&x);
}

/*
 * nobody registers a dma-buf made by root that it was handed (dma-bufs
 * are capabilities: holding the fd is the right), with a memlock limit
 * smaller than the MR (dma-buf MRs are not charged to it); a file that is
 * not a dma-buf gets EINVAL. The target is a child that drops to nobody
 * after connecting its QP (uverbs refuses write()s from a process whose
 * credentials changed since it opened the device; registration is an
 * ioctl); rxe0, in the parent, stays root.
 */
void test_dmabuf_mr_unprivileged_handed_fd(void)
{
	struct rlimit rl = { .rlim_cur = 64 * 1024, .rlim_max = 64 * 1024 };
	uint64_t iova, res[2];
	struct conn_info ia, ib, me, peer;
	struct sp_rc a = { 0 }, b = { 0 };
	struct ibv_mr *mr;
	struct sp_xbuf x;
	struct two t;
	int sv[2], nfd, status;
	pid_t pid;
	char c;

	sp_xbuf_new(SP_EXP_UDMABUF, XLEN, 0, &x);
	iova = (uintptr_t)x.map + MR_OFF;
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close(sv[0]);
		nfd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
		CHECK(nfd >= 0, "/etc/hostname: %s", strerror(errno));
		node_open(&b, dev_name("SP_RDMA_TARGET", "rxe1"));
		me = node_info(&b);
		CHECK(write(sv[1], &me, sizeof(me)) == sizeof(me), "send info");
		CHECK(read(sv[1], &peer, sizeof(peer)) == sizeof(peer), "recv info");
		node_connect(&b, &me, &peer);
		CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
		CHECK_OK(setgroups(0, NULL));
		CHECK_OK(setresgid(65534, 65534, 65534));
		CHECK_OK(setresuid(65534, 65534, 65534));
		mr = reg_dmabuf(b.pd, MR_OFF, MR_LEN, iova, x.fd, ACCESS);
		CHECK(mr, "nobody's ibv_reg_dmabuf_mr of root's udmabuf: %s", strerror(errno));
		errno = 0;
		CHECK(!reg_dmabuf(b.pd, 0, 4096, 0, nfd, ACCESS) && errno == EINVAL,
		      "nobody registering a regular file as a dma-buf: %s", strerror(errno));
		sp_fill(x.map + MR_OFF, MR_LEN, 0, 32);
		CHECK(write(sv[1], &mr->rkey, 4) == 4, "send rkey");
		/* the parent WRITEs seed 31 over it, then says so */
		CHECK(read(sv[1], &c, 1) == 1, "parent done");
		res[0] = (uint64_t)sp_verify(x.map + MR_OFF, MR_LEN, 0, 31);
		CHECK_OK(ibv_dereg_mr(mr));
		res[1] = 0;
		CHECK(write(sv[1], res, sizeof(res)) == sizeof(res), "send result");
		_exit(0);
	}
	close(sv[1]);
	memset(&t, 0, sizeof(t));
	node_open(&a, dev_name("SP_RDMA_INITIATOR", "rxe0"));
	t.host = aligned_alloc(4096, XLEN);
	CHECK(t.host, "host buffer");
	a.buf = t.host;
	a.mr = ibv_reg_mr(a.pd, t.host, XLEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(a.mr, "ibv_reg_mr on host memory: %s", strerror(errno));
	t.a = a;
	ia = node_info(&t.a);
	CHECK(read(sv[0], &ib, sizeof(ib)) == sizeof(ib), "target info (target failed?)");
	CHECK(write(sv[0], &ia, sizeof(ia)) == sizeof(ia), "send info");
	node_connect(&t.a, &ia, &ib);
	if (read(sv[0], &ib.rkey, 4) != 4) {
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "the target died");
		if (WEXITSTATUS(status) == 4) {	/* it skipped, and gave the reason */
			fflush(stdout);
			_exit(4);
		}
		CHECK(0, "no rkey from the unprivileged target (exit %d: its line says why)",
		      WEXITSTATUS(status));
	}
	memset(t.host, 0, MR_LEN);
	rdma_ok(&t, IBV_WR_RDMA_READ, 0, iova, ib.rkey, MR_LEN);
	CHECK(sp_verify(t.host, MR_LEN, 0, 32) < 0, "byte %" PRId64 " read from nobody's MR wrong",
	      sp_verify(t.host, MR_LEN, 0, 32));
	sp_fill(t.host, MR_LEN, 0, 31);
	rdma_ok(&t, IBV_WR_RDMA_WRITE, 0, iova, ib.rkey, MR_LEN);
	CHECK(write(sv[0], "w", 1) == 1, "tell the target");
	CHECK(read(sv[0], res, sizeof(res)) == sizeof(res), "target result");
	CHECK((int64_t)res[0] < 0, "byte %" PRId64 " written into nobody's MR wrong",
	      (int64_t)res[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "the unprivileged target failed");
	sp_xbuf_free(&x);
}
