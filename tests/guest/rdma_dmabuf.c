// SPDX-License-Identifier: MIT
/*
 * dma-buf MRs end to end, between the two Soft-RoCE nodes, on the rxe of
 * tests/kmod/rxe-dmabuf/ (tests/vm/rxe-dmabuf.sh loads it and its
 * provider; Debian's rxe has no dma-buf MRs and every case skips, saying
 * so). rxe1 registers the dma-buf (the target), rxe0 drives RDMA WRITE
 * and READ into it from host memory; the bytes are checked through the
 * exporter's own CPU mapping, every byte of the MR, then unaligned pieces
 * across the dma-buf's 2 MiB boundaries.
 *
 * - ibv_reg_dmabuf_mr() on udmabuf, vgem, the system heap, a strixpeer
 *   export (sp_buf_export()) and an sp_gpusim BO;
 * - an iova other than the mapping's address; the errors (iova and offset
 *   differing in a page, a range past the dma-buf, an fd that is no
 *   dma-buf); an unprivileged process registering a dma-buf it was handed;
 * - sp_reg_mr() on an import (sp_import_dmabuf()) and on a strixpeer
 *   buffer with SP_REG_NO_PLAIN: the dma-buf path, the data, the cache;
 * - sp_reg_mr() on GPU memory with no import at all (a vgem BO mapped as
 *   libhsakmt maps hipMalloc's, a gpusim BO): the module's GEM_DMABUF,
 *   every byte over RDMA, the cache noticing another BO at the address,
 *   a read-only mapping, the gpusim BO pinned then moved with no stale
 *   write;
 * - run again under LD_PRELOAD=libstrixpeer-preload.so: plain ibv_reg_mr(),
 *   ibv_reg_mr_iova() and ibv_reg_mr_iova2() on GPU memory, every byte
 *   over RDMA; host memory, unmapped and read-only ranges as without it;
 *   the preload's cost on host registrations (a ratio);
 * - sp_gpusim: the BO cannot move while the (pinned) MR lives; after
 *   ibv_dereg_mr() it moves, the old rkey is refused and no write reaches
 *   the moved-away backing (gpusim's poison check).
 */
#include "rdma_pair.h"
#include "gpusim.h"

#include <dlfcn.h>
#include <grp.h>
#include <sys/resource.h>
#include <time.h>

#define ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
/*
 * dma-bufs of 4 MiB + 64 KiB (a multiple of vgem's 16 KiB): the MR starts
 * at an unaligned offset and crosses the 2 and 4 MiB boundaries. Where the
 * suite keeps transfers small (SP_RDMA_MAX, the debug kernel's 2 MiB + 4097),
 * 2 MiB + 64 KiB: the MR crosses the 2 MiB boundary only.
 */
static uint64_t xlen(void)
{
	const char *max = getenv("SP_RDMA_MAX");

	if (max && *max && strtoull(max, NULL, 0) < 4 * MiB + 64 * 1024)
		return 2 * MiB + 64 * 1024;
	return 4 * MiB + 64 * 1024;
}

#define XLEN	xlen()
#define MR_OFF	(5 * 4096 + 123)
#define MR_LEN	(XLEN - MR_OFF - 77)

/* rxe0 (initiator, host memory) and rxe1 (target, the dma-buf MR). */
struct two {
	struct sp_rc a, b;
	uint8_t *host;
};

static void two_open(struct two *t)
{
	struct conn_info ia, ib;

	memset(t, 0, sizeof(*t));
	node_open(&t->a, dev_name("SP_RDMA_INITIATOR", "rxe0"));
	node_open(&t->b, dev_name("SP_RDMA_TARGET", "rxe1"));
	t->host = aligned_alloc(4096, XLEN);
	CHECK(t->host, "host buffer");
	memset(t->host, 0, XLEN);
	t->a.buf = t->host;
	t->a.len = XLEN;
	t->a.mr = ibv_reg_mr(t->a.pd, t->host, XLEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(t->a.mr, "ibv_reg_mr on host memory: %s", strerror(errno));
	ia = node_info(&t->a);
	ib = node_info(&t->b);
	node_connect(&t->a, &ia, &ib);
	node_connect(&t->b, &ib, &ia);
}

/* The target's device must register dma-bufs: skip (saying why) if not. */
static struct ibv_mr *reg_dmabuf(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
				 int fd, int access)
{
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, off, len, iova, fd, access);

	if (!mr && (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT))
		SKIP("ibv_reg_dmabuf_mr: %s: this rxe (or its provider) has no dma-buf MRs (tests/vm/rxe-dmabuf.sh loads the test patch's)",
		     strerror(errno));
	return mr;
}

/* One RDMA op from rxe0; returns the completion without judging it. */
static struct ibv_wc rdma_op(struct two *t, enum ibv_wr_opcode op, uint64_t local_off,
			     uint64_t raddr, uint32_t rkey, uint64_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(t->host + local_off), .length = (uint32_t)len,
		.lkey = t->a.mr->lkey,
	};
	struct ibv_send_wr wr = { 0 }, *bad;

	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK_OK(ibv_post_send(t->a.qp, &wr, &bad));
	return node_wait_any(&t->a);
}

static void rdma_ok(struct two *t, enum ibv_wr_opcode op, uint64_t local_off, uint64_t raddr,
		    uint32_t rkey, uint64_t len)
{
	struct ibv_wc wc = rdma_op(t, op, local_off, raddr, rkey, len);

	CHECK(wc.status == IBV_WC_SUCCESS, "RDMA %s of %" PRIu64 " bytes at %#" PRIx64 ": %s",
	      op == IBV_WR_RDMA_WRITE ? "WRITE" : "READ", len, raddr,
	      ibv_wc_status_str(wc.status));
}

/*
 * (@iova: the MR's, as registered; rdma-core's ibv_reg_dmabuf_mr() sets
 * mr->addr to the dma-buf offset, not to the iova.)
 * Every byte of the MR written from rxe0 and checked through @cpu (the
 * exporter's mapping of the MR's first byte), every byte read back after
 * the CPU rewrote it; then pieces of 6007 bytes from unaligned host
 * offsets across each 2 MiB boundary of the dma-buf (@dmabuf_off: the
 * MR's offset in it), their neighbours untouched.
 */
static void check_mr(struct two *t, struct ibv_mr *mr, uint64_t iova, uint8_t *cpu,
		     uint64_t dmabuf_off, uint32_t seed)
{
	uint64_t len = mr->length;
	int64_t bad;

	CHECK(len <= XLEN, "MR of %" PRIu64 " bytes", len);
	sp_fill(t->host, len, 0, seed);
	rdma_ok(t, IBV_WR_RDMA_WRITE, 0, iova, mr->rkey, len);
	bad = sp_verify(cpu, len, 0, seed);
	CHECK(bad < 0, "RDMA WRITE of %" PRIu64 " bytes: byte %" PRId64 " (dma-buf offset %#" PRIx64
	      ") wrong through the exporter's mapping", len, bad, dmabuf_off + (uint64_t)bad);

	sp_fill(cpu, len, 0, seed + 1);
	memset(t->host, 0, len);
	rdma_ok(t, IBV_WR_RDMA_READ, 0, iova, mr->rkey, len);
	bad = sp_verify(t->host, len, 0, seed + 1);
	CHECK(bad < 0, "RDMA READ of %" PRIu64 " bytes: byte %" PRId64 " wrong", len, bad);

	for (uint64_t edge = 2 * MiB; edge < dmabuf_off + len; edge += 2 * MiB) {
		uint64_t n = 6007, o;

		if (edge < dmabuf_off + 3001 || edge + 3006 > dmabuf_off + len)
			continue;
		o = edge - dmabuf_off - 3001;	/* the piece's offset in the MR */
		sp_fill(t->host + 777, n, o, seed + 2);
		rdma_ok(t, IBV_WR_RDMA_WRITE, 777, iova + o, mr->rkey, n);
		bad = sp_verify(cpu + o, n, o, seed + 2);
		CHECK(bad < 0, "WRITE across dma-buf offset %#" PRIx64 ": byte %" PRId64 " wrong",
		      edge, bad);
		CHECK(sp_verify(cpu + o - 1, 1, o - 1, seed + 1) < 0 &&
		      sp_verify(cpu + o + n, 1, o + n, seed + 1) < 0,
		      "WRITE across %#" PRIx64 " changed a neighbouring byte", edge);
		memset(t->host, 0, n + 5);
		rdma_ok(t, IBV_WR_RDMA_READ, 5, iova + o, mr->rkey, n);
		bad = sp_verify(t->host + 5, n, o, seed + 2);
		CHECK(bad < 0, "READ across dma-buf offset %#" PRIx64 ": byte %" PRId64 " wrong",
		      edge, bad);
	}
}

/* ibv_reg_dmabuf_mr() on [MR_OFF, MR_OFF + MR_LEN) of @fd, mapped at @map. */
static void dmabuf_roundtrip(int fd, uint8_t *map, uint32_t seed)
{
	struct ibv_mr *mr;
	struct two t;

	two_open(&t);
	mr = reg_dmabuf(t.b.pd, MR_OFF, MR_LEN, (uintptr_t)map + MR_OFF, fd, ACCESS);
	CHECK(mr, "ibv_reg_dmabuf_mr(offset %#llx, %llu bytes): %s", (unsigned long long)MR_OFF,
	      (unsigned long long)MR_LEN, strerror(errno));
	check_mr(&t, mr, (uintptr_t)map + MR_OFF, map + MR_OFF, MR_OFF, seed);
	CHECK_OK(ibv_dereg_mr(mr));
}

static void exporter_roundtrip(enum sp_exporter kind, uint32_t seed)
{
	struct sp_xbuf x;

	sp_xbuf_new(kind, XLEN, 0, &x);
	dmabuf_roundtrip(x.fd, x.map, seed);
	sp_xbuf_free(&x);
}

static void test_dmabuf_mr_udmabuf(void)
{
	exporter_roundtrip(SP_EXP_UDMABUF, 11);
}

static void test_dmabuf_mr_vgem(void)
{
	exporter_roundtrip(SP_EXP_VGEM, 12);
}

static void test_dmabuf_mr_system_heap(void)
{
	exporter_roundtrip(SP_EXP_HEAP, 13);
}

static void test_dmabuf_mr_strixpeer_export(void)
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
static void test_dmabuf_mr_iova_and_errors(void)
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
static void test_dmabuf_mr_unprivileged_handed_fd(void)
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

static struct sp_reg_stats reg_stats(struct sp_dev *dev)
{
	struct sp_reg_stats st;

	CHECK_OK(sp_reg_cache_stats(dev, &st));
	return st;
}

/* sp_reg_mr() of [addr, addr + MR_LEN): the dma-buf path, a cache hit. */
static void sp_reg_dmabuf_checked(struct sp_dev *dev, struct two *t, uint8_t *addr,
				  uint64_t dmabuf_off, unsigned int flags, uint32_t seed)
{
	struct sp_reg_stats st;
	struct sp_mr *m, *again;
	int ret;

	ret = sp_reg_mr(dev, t->b.pd, addr, MR_LEN, ACCESS, flags, &m);
	if (ret < 0 && strstr(sp_errmsg(), "this device cannot register dma-bufs"))
		SKIP("%s", sp_errmsg());
	CHECK(ret == 0, "sp_reg_mr: %s", sp_errmsg());
	CHECK(sp_mr_path(m) == SP_REG_DMABUF, "path %s, not dmabuf",
	      sp_reg_path_name(sp_mr_path(m)));
	/* the address, as on the other paths (not the dma-buf offset) */
	CHECK((uintptr_t)sp_mr_ibv(m)->addr == (uintptr_t)addr, "MR at %p, asked %p",
	      sp_mr_ibv(m)->addr, (void *)addr);
	check_mr(t, sp_mr_ibv(m), (uintptr_t)addr, addr, dmabuf_off, seed);
	st = reg_stats(dev);
	ret = sp_reg_mr(dev, t->b.pd, addr, MR_LEN, ACCESS, flags, &again);
	CHECK(ret == 1 && again == m, "the same key again: %d (%s), %s MR", ret,
	      ret < 0 ? sp_errmsg() : "", again == m ? "the same" : "another");
	CHECK(reg_stats(dev).hits == st.hits + 1, "hits %" PRIu64 " -> %" PRIu64, st.hits,
	      reg_stats(dev).hits);
	CHECK_OK(sp_dereg_mr(again));
	CHECK_OK(sp_dereg_mr(m));
}

/* A GPU-like BO (vgem, mapped through its card) declared as an import. */
static void test_sp_reg_mr_import_takes_dmabuf_path(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_import *imp;
	struct sp_xbuf x;
	struct two t;

	sp_xbuf_new(SP_EXP_VGEM, XLEN, 1, &x);
	CHECK(sp_import_dmabuf(dev, x.fd, 0, XLEN, x.map, &imp) == 0, "sp_import_dmabuf: %s",
	      sp_errmsg());
	two_open(&t);
	sp_reg_dmabuf_checked(dev, &t, x.map + MR_OFF, MR_OFF, 0, 41);
	CHECK_OK(sp_import_free(imp));
	CHECK(reg_stats(dev).entries == 0, "a registration outlived its import");
	sp_dev_close(dev);
	sp_xbuf_free(&x);
}

static void test_sp_reg_mr_buffer_no_plain_takes_dmabuf_path(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *buf;
	struct two t;

	CHECK(sp_buf_alloc(dev, XLEN, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	two_open(&t);
	sp_reg_dmabuf_checked(dev, &t, (uint8_t *)sp_buf_addr(buf) + MR_OFF, MR_OFF,
			      SP_REG_NO_PLAIN, 42);
	CHECK_OK(sp_buf_free(buf));
	CHECK(reg_stats(dev).entries == 0, "a registration outlived its buffer");
	sp_dev_close(dev);
}

/*
 * A gpusim BO whose (pinned) MR was just released, after a WRITE of
 * pattern @last through @rkey: nothing pins or maps it any more, it moves,
 * a WRITE through the old rkey is refused and lands nowhere (gpusim's
 * poison check), and the moved BO holds what the last WRITE left.
 */
static void released_bo_moves(struct two *t, int g, uint32_t h, uint8_t *cpu, uint64_t iova,
			      uint32_t rkey, uint64_t stale0, uint32_t last)
{
	struct sp_gpusim_info info = gpusim_info(g, h);
	uint32_t moved = 0;
	struct ibv_wc wc;
	int64_t bad;

	CHECK(info.pin_count == 0 && info.mappings == 0 && info.attachments == 0,
	      "after the MR went: pins %u, mappings %u, attachments %u", info.pin_count,
	      info.mappings, info.attachments);
	CHECK(gpusim_move(g, h, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT, &moved) == 0 &&
	      moved == 1, "the released BO does not move: %s (moved %u)", strerror(errno), moved);
	sp_fill(t->host, MR_LEN, 0, last + 1);
	wc = rdma_op(t, IBV_WR_RDMA_WRITE, 0, iova, rkey, MR_LEN);
	CHECK(wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE through the deregistered rkey: %s",
	      ibv_wc_status_str(wc.status));
	gpusim_check_no_stale(g, stale0);
	bad = sp_verify(cpu + MR_OFF, MR_LEN, 0, last);
	CHECK(bad < 0, "byte %" PRId64 " of the moved BO is not what the last WRITE left", bad);
}

/*
 * sp_gpusim, the moving exporter: the MR pins the BO, which then refuses
 * to move; after ibv_dereg_mr() it moves, rxe refuses the old rkey, and
 * no write reached the moved-away backing.
 */
static void test_dmabuf_mr_gpusim_pinned_then_moves(void)
{
	const uint64_t size = 6 * MiB;
	struct sp_gpusim_info info;
	uint64_t mmo, stale0;
	struct ibv_mr *mr;
	uint32_t h, moved = 0, rkey;
	uint8_t *cpu;
	uint64_t iova;
	struct two t;
	int g, fd;

	g = gpusim_open();
	h = gpusim_create(g, size, SP_GPUSIM_DOMAIN_GTT, 0, &mmo);
	cpu = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, g, (off_t)mmo);
	CHECK(cpu != MAP_FAILED, "BO mmap: %s", strerror(errno));
	fd = sp_prime_export(g, h);
	stale0 = gpusim_stats(g, 0).stale_writes;
	two_open(&t);
	mr = reg_dmabuf(t.b.pd, MR_OFF, MR_LEN, (uintptr_t)cpu + MR_OFF, fd, ACCESS);
	CHECK(mr, "ibv_reg_dmabuf_mr on a gpusim BO: %s", strerror(errno));
	/* pinned by the umem; the dma-buf core pins again on map when the
	 * kernel lacks CONFIG_DMABUF_MOVE_NOTIFY (Debian's) */
	info = gpusim_info(g, h);
	CHECK(info.pin_count >= 1 && info.mappings == 1, "pins %u, mappings %u with the MR",
	      info.pin_count, info.mappings);
	errno = 0;
	CHECK(gpusim_move(g, h, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT, &moved) == -1 &&
	      errno == EBUSY, "a move of the pinned BO: %s (moved %u)", strerror(errno), moved);
	iova = (uintptr_t)cpu + MR_OFF;
	check_mr(&t, mr, iova, cpu + MR_OFF, MR_OFF, 51);
	/* the last contents before the MR goes */
	sp_fill(t.host, MR_LEN, 0, 55);
	rdma_ok(&t, IBV_WR_RDMA_WRITE, 0, iova, mr->rkey, MR_LEN);
	rkey = mr->rkey;
	CHECK_OK(ibv_dereg_mr(mr));
	released_bo_moves(&t, g, h, cpu, iova, rkey, stale0, 55);
	munmap(cpu, size);
	close(fd);
	close(g);
}

/*
 * GPU memory with no import, as hipMalloc() leaves it: a vgem BO mapped
 * libhsakmt's way (render node, MAP_FIXED into an aperture). sp_reg_mr()
 * finds its dma-buf through the module (GEM_DMABUF) and registers that;
 * every byte over RDMA, a cache hit; then another BO mapped at the same
 * address: the cache sees the other dma-buf and registers anew, and the
 * bytes reach the new BO.
 */
static void test_sp_reg_mr_gpu_range_takes_dmabuf_path(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_vgem_bo a, b;
	struct sp_reg_stats st;
	struct sp_mr *m, *m2;
	uint8_t *ap;
	struct two t;
	int ret;

	sp_vgem_bo_new(XLEN, &a);
	sp_vgem_bo_new(XLEN, &b);
	ap = sp_aperture(XLEN, 2 * MiB);
	sp_rocm_map(ap, XLEN, a.node, a.mmap_offset);
	two_open(&t);
	sp_reg_dmabuf_checked(dev, &t, ap + MR_OFF, MR_OFF, 0, 43);
	CHECK(reg_stats(dev).entries == 0, "a GPU range's registration outlived its users");
	/* held while the address gets another BO */
	CHECK(sp_reg_mr(dev, t.b.pd, ap + MR_OFF, MR_LEN, ACCESS, 0, &m) == 0, "%s",
	      sp_errmsg());
	sp_rocm_map(ap, XLEN, b.node, b.mmap_offset);
	st = reg_stats(dev);
	ret = sp_reg_mr(dev, t.b.pd, ap + MR_OFF, MR_LEN, ACCESS, 0, &m2);
	CHECK(ret == 0 && m2 != m, "another BO at the address: %d (%s), %s MR", ret,
	      ret < 0 ? sp_errmsg() : "", m2 == m ? "the old" : "a new");
	CHECK(reg_stats(dev).dropped == st.dropped + 1, "dropped %" PRIu64 " -> %" PRIu64,
	      st.dropped, reg_stats(dev).dropped);
	check_mr(&t, sp_mr_ibv(m2), (uintptr_t)ap + MR_OFF, ap + MR_OFF, MR_OFF, 44);
	CHECK_OK(sp_dereg_mr(m2));
	CHECK_OK(sp_dereg_mr(m));
	CHECK(reg_stats(dev).entries == 0, "entries %" PRIu64 " left", reg_stats(dev).entries);
	sp_rocm_free(ap, XLEN);
	munmap(ap, XLEN);
	sp_dev_close(dev);
	sp_vgem_bo_free(&a);
	sp_vgem_bo_free(&b);
}

/*
 * A read-only GPU mapping: a writable registration is refused (as GUP's
 * would be), a remote-read one is made and RDMA READ returns the bytes.
 */
static void test_sp_reg_mr_gpu_range_read_only(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_vgem_bo a;
	uint8_t *rw, *ro;
	struct sp_mr *m;
	struct two t;
	int ret;

	sp_vgem_bo_new(XLEN, &a);
	rw = mmap(NULL, XLEN, PROT_READ | PROT_WRITE, MAP_SHARED, a.node, (off_t)a.mmap_offset);
	ro = mmap(NULL, XLEN, PROT_READ, MAP_SHARED, a.node, (off_t)a.mmap_offset);
	CHECK(rw != MAP_FAILED && ro != MAP_FAILED, "BO mmap: %s", strerror(errno));
	sp_fill(rw, XLEN, 0, 61);
	two_open(&t);
	ret = sp_reg_mr(dev, t.b.pd, ro + MR_OFF, MR_LEN, ACCESS, 0, &m);
	CHECK(ret == -EACCES && strstr(sp_errmsg(), "mapped read-only"),
	      "writable registration of a read-only mapping: %d (%s)", ret,
	      ret < 0 ? sp_errmsg() : "made");
	ret = sp_reg_mr(dev, t.b.pd, ro + MR_OFF, MR_LEN, IBV_ACCESS_REMOTE_READ, 0, &m);
	if (ret < 0 && strstr(sp_errmsg(), "this device cannot register dma-bufs"))
		SKIP("%s", sp_errmsg());
	CHECK(ret == 0 && sp_mr_path(m) == SP_REG_DMABUF, "read-only registration: %d (%s)",
	      ret, ret < 0 ? sp_errmsg() : sp_reg_path_name(sp_mr_path(m)));
	memset(t.host, 0, MR_LEN);
	rdma_ok(&t, IBV_WR_RDMA_READ, 0, (uintptr_t)ro + MR_OFF, sp_mr_ibv(m)->rkey, MR_LEN);
	CHECK(sp_verify(t.host, MR_LEN, MR_OFF, 61) < 0, "RDMA READ of the read-only range");
	CHECK_OK(sp_dereg_mr(m));
	munmap(ro, XLEN);
	munmap(rw, XLEN);
	sp_dev_close(dev);
	sp_vgem_bo_free(&a);
}

/* The loaded module's claim_gem_drivers, for messages. */
static const char *gem_drivers(void)
{
	static char v[160] = "unreadable";
	FILE *f = fopen("/sys/module/strixpeer/parameters/claim_gem_drivers", "re");

	if (f) {
		if (!fgets(v, sizeof(v), f))
			v[0] = 0;
		v[strcspn(v, "\n")] = 0;
		fclose(f);
	}
	return v;
}

/*
 * sp_gpusim's moving BO, registered by sp_reg_mr() through its mapping
 * alone (no import, no PRIME export by the test): pinned while the MR
 * lives, moves after sp_dereg_mr(), the old rkey refused, no stale write.
 */
static void test_sp_reg_mr_gpusim_range_pinned_then_moves(void)
{
	const uint64_t size = 6 * MiB;
	struct sp_dev *dev = sp_test_dev();
	struct sp_gpusim_info info;
	uint64_t mmo, stale0, iova;
	uint32_t h, moved = 0, rkey;
	struct sp_mr *m;
	uint8_t *cpu;
	struct two t;
	int g, ret;

	g = gpusim_open();
	h = gpusim_create(g, size, SP_GPUSIM_DOMAIN_GTT, 0, &mmo);
	cpu = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, g, (off_t)mmo);
	CHECK(cpu != MAP_FAILED, "BO mmap: %s", strerror(errno));
	stale0 = gpusim_stats(g, 0).stale_writes;
	two_open(&t);
	iova = (uintptr_t)cpu + MR_OFF;
	ret = sp_reg_mr(dev, t.b.pd, cpu + MR_OFF, MR_LEN, ACCESS, 0, &m);
	if (ret < 0 && strstr(sp_errmsg(), "this device cannot register dma-bufs"))
		SKIP("%s", sp_errmsg());
	CHECK(ret == 0 && sp_mr_path(m) == SP_REG_DMABUF,
	      "sp_reg_mr on a gpusim BO: %d (%s; module's claim_gem_drivers: %s)", ret,
	      ret < 0 ? sp_errmsg() : sp_reg_path_name(sp_mr_path(m)), gem_drivers());
	info = gpusim_info(g, h);
	CHECK(info.pin_count >= 1 && info.mappings == 1, "pins %u, mappings %u with the MR",
	      info.pin_count, info.mappings);
	errno = 0;
	CHECK(gpusim_move(g, h, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT, &moved) == -1 &&
	      errno == EBUSY, "a move of the registered BO: %s (moved %u)", strerror(errno),
	      moved);
	check_mr(&t, sp_mr_ibv(m), iova, cpu + MR_OFF, MR_OFF, 52);
	sp_fill(t.host, MR_LEN, 0, 57);
	rkey = sp_mr_ibv(m)->rkey;
	rdma_ok(&t, IBV_WR_RDMA_WRITE, 0, iova, rkey, MR_LEN);
	CHECK_OK(sp_dereg_mr(m));
	CHECK(reg_stats(dev).entries == 0, "the registration stayed cached");
	released_bo_moves(&t, g, h, cpu, iova, rkey, stale0, 57);
	sp_dev_close(dev);
	munmap(cpu, size);
	close(g);
}

/*
 * Run under LD_PRELOAD=libstrixpeer-preload.so (the suite's
 * rdma_dmabuf-preload): the program's plain ibv_reg_mr() reaches the
 * preload, not libibverbs. libibverbs' own functions, for comparison.
 */
static void *verbs_own(const char *name, const char *version)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *f;

	CHECK(h, "libibverbs.so.1 not loaded: %s", dlerror());
	f = dlvsym(h, name, version);
	dlclose(h);
	CHECK(f, "%s@%s: %s", name, version, dlerror());
	return f;
}

static void need_preload(void)
{
	if (dlsym(RTLD_DEFAULT, "ibv_reg_mr") == verbs_own("ibv_reg_mr", "IBVERBS_1.1"))
		SKIP("not run under LD_PRELOAD=libstrixpeer-preload.so (the suite's rdma_dmabuf-preload run is)");
}

/*
 * Unmodified code: ibv_reg_mr(), ibv_reg_mr_iova() and ibv_reg_mr_iova2()
 * (with IBV_ACCESS_RELAXED_ORDERING, as RCCL and UCX ask) on a GPU range
 * mapped as libhsakmt maps hipMalloc's; every byte over RDMA through each.
 */
static void test_preload_plain_verbs_on_gpu_memory(void)
{
	struct sp_vgem_bo a;
	struct ibv_mr *mr;
	uint8_t *ap;
	struct two t;

	need_preload();
	sp_vgem_bo_new(XLEN, &a);
	ap = sp_aperture(XLEN, 2 * MiB);
	sp_rocm_map(ap, XLEN, a.node, a.mmap_offset);
	two_open(&t);
	mr = ibv_reg_mr(t.b.pd, ap + MR_OFF, MR_LEN, ACCESS);
	if (!mr && errno == EFAULT)
		SKIP("ibv_reg_mr under the preload: EFAULT (does this rxe have dma-buf MRs? STRIXPEER_PRELOAD_DEBUG=1 says)");
	CHECK(mr, "ibv_reg_mr on GPU memory under the preload: %s", strerror(errno));
	CHECK(mr->addr == ap + MR_OFF && mr->length == MR_LEN, "MR at %p+%zu", mr->addr,
	      mr->length);
	check_mr(&t, mr, (uintptr_t)ap + MR_OFF, ap + MR_OFF, MR_OFF, 71);
	CHECK_OK(ibv_dereg_mr(mr));
	/* another iova: RDMA addresses it, the bytes land at the range */
	mr = ibv_reg_mr_iova(t.b.pd, ap + MR_OFF, MR_LEN, 0x10000 + (MR_OFF & 4095), ACCESS);
	CHECK(mr, "ibv_reg_mr_iova: %s", strerror(errno));
	check_mr(&t, mr, 0x10000 + (MR_OFF & 4095), ap + MR_OFF, MR_OFF, 72);
	CHECK_OK(ibv_dereg_mr(mr));
	mr = ibv_reg_mr_iova2(t.b.pd, ap + MR_OFF, MR_LEN, (uintptr_t)ap + MR_OFF,
			      ACCESS | IBV_ACCESS_RELAXED_ORDERING);
	CHECK(mr, "ibv_reg_mr_iova2 with relaxed ordering: %s", strerror(errno));
	check_mr(&t, mr, (uintptr_t)ap + MR_OFF, ap + MR_OFF, MR_OFF, 73);
	CHECK_OK(ibv_dereg_mr(mr));
	sp_rocm_free(ap, XLEN);
	munmap(ap, XLEN);
	sp_vgem_bo_free(&a);
}

/*
 * What the preload leaves alone: host memory registers as it always did,
 * an unmapped range still fails with EFAULT, a writable registration of a
 * read-only GPU mapping too. And its cost where libibverbs succeeds:
 * 4 KiB host registrations through the preload and through libibverbs'
 * own function, alternated in one run, each first in half the rounds (a
 * ratio; not asserted).
 */
static void test_preload_leaves_the_rest_alone(void)
{
	struct ibv_mr *(*own)(struct ibv_pd *, void *, size_t, int) =
		(struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, int))
		verbs_own("ibv_reg_mr", "IBVERBS_1.1");
	struct timespec t0, t1;
	double ns[2] = { 0, 0 };
	struct sp_vgem_bo a;
	uint8_t *host, *hole, *ro;
	struct ibv_mr *mr;
	struct two t;

	need_preload();
	two_open(&t);
	host = aligned_alloc(4096, 65536);
	CHECK(host, "host memory");
	memset(host, 0, 65536);
	mr = ibv_reg_mr(t.b.pd, host, 65536, ACCESS);
	CHECK(mr && mr->addr == host, "host memory: %s", mr ? "wrong addr" : strerror(errno));
	CHECK_OK(ibv_dereg_mr(mr));
	hole = mmap(NULL, 65536, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(hole != MAP_FAILED, "mmap");
	munmap(hole, 65536);
	errno = 0;
	CHECK(!ibv_reg_mr(t.b.pd, hole, 65536, ACCESS) && errno == EFAULT,
	      "an unmapped range: %s", strerror(errno));
	sp_vgem_bo_new(XLEN, &a);
	ro = mmap(NULL, XLEN, PROT_READ, MAP_SHARED, a.node, (off_t)a.mmap_offset);
	CHECK(ro != MAP_FAILED, "BO mmap: %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_reg_mr(t.b.pd, ro, XLEN, ACCESS) && errno == EFAULT,
	      "a writable registration of a read-only GPU mapping: %s", strerror(errno));
	munmap(ro, XLEN);
	sp_vgem_bo_free(&a);
	for (int round = 0; round < 20; round++) {
		for (int k = 0; k < 2; k++) {
			int via = k ^ (round & 1);	/* each goes first half the time */

			clock_gettime(CLOCK_MONOTONIC, &t0);
			for (int i = 0; i < 50; i++) {
				mr = via ? own(t.b.pd, host, 4096, ACCESS) :
					   ibv_reg_mr(t.b.pd, host, 4096, ACCESS);
				CHECK(mr, "4 KiB host registration: %s", strerror(errno));
				ibv_dereg_mr(mr);
			}
			clock_gettime(CLOCK_MONOTONIC, &t1);
			ns[via] += (double)(t1.tv_sec - t0.tv_sec) * 1e9 +
				   (double)(t1.tv_nsec - t0.tv_nsec);
		}
	}
	tap_diag("host 4 KiB ibv_reg_mr+ibv_dereg_mr, 1000 each: through the preload %.1f us, libibverbs' own %.1f us per pair (ratio %.3f)",
		 ns[0] / 1000 / 1000, ns[1] / 1000 / 1000, ns[0] / ns[1]);
	free(host);
}

static const struct tap_case cases[] = {
	TAP_CASE_T(test_dmabuf_mr_udmabuf, 240),
	TAP_CASE_T(test_dmabuf_mr_vgem, 240),
	TAP_CASE_T(test_dmabuf_mr_system_heap, 240),
	TAP_CASE_T(test_dmabuf_mr_strixpeer_export, 240),
	TAP_CASE_T(test_dmabuf_mr_iova_and_errors, 240),
	TAP_CASE_T(test_dmabuf_mr_unprivileged_handed_fd, 240),
	TAP_CASE_T(test_sp_reg_mr_import_takes_dmabuf_path, 240),
	TAP_CASE_T(test_sp_reg_mr_buffer_no_plain_takes_dmabuf_path, 240),
	TAP_CASE_T(test_dmabuf_mr_gpusim_pinned_then_moves, 240),
	TAP_CASE_T(test_sp_reg_mr_gpu_range_takes_dmabuf_path, 240),
	TAP_CASE_T(test_sp_reg_mr_gpu_range_read_only, 240),
	TAP_CASE_T(test_sp_reg_mr_gpusim_range_pinned_then_moves, 240),
	TAP_CASE_T(test_preload_plain_verbs_on_gpu_memory, 240),
	TAP_CASE_T(test_preload_leaves_the_rest_alone, 240),
};

TAP_MAIN(cases)
