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
/* The cases, a file per section, are in tests/guest/rdma_dmabuf/; here the table and main. */
#include "rdma_dmabuf/rdma_dmabuf.h"

/*
 * dma-bufs of 4 MiB + 64 KiB (a multiple of vgem's 16 KiB): the MR starts
 * at an unaligned offset and crosses the 2 and 4 MiB boundaries. Where the
 * suite keeps transfers small (SP_RDMA_MAX, the debug kernel's 2 MiB + 4097),
 * 2 MiB + 64 KiB: the MR crosses the 2 MiB boundary only.
 */
uint64_t xlen(void)
{
	const char *max = getenv("SP_RDMA_MAX");

	if (max && *max && strtoull(max, NULL, 0) < 4 * MiB + 64 * 1024)
		return 2 * MiB + 64 * 1024;
	return 4 * MiB + 64 * 1024;
}

void two_open(struct two *t)
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
struct ibv_mr *reg_dmabuf(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
			  int fd, int access)
{
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, off, len, iova, fd, access);

	if (!mr && (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT))
		SKIP("ibv_reg_dmabuf_mr: %s: this rxe (or its provider) has no dma-buf MRs (tests/vm/rxe-dmabuf.sh loads the test patch's)",
		     strerror(errno));
	return mr;
}

/* One RDMA op from rxe0; returns the completion without judging it. */
struct ibv_wc rdma_op(struct two *t, enum ibv_wr_opcode op, uint64_t local_off,
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

void rdma_ok(struct two *t, enum ibv_wr_opcode op, uint64_t local_off, uint64_t raddr,
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
void check_mr(struct two *t, struct ibv_mr *mr, uint64_t iova, uint8_t *cpu,
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
void dmabuf_roundtrip(int fd, uint8_t *map, uint32_t seed)
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

void exporter_roundtrip(enum sp_exporter kind, uint32_t seed)
{
	struct sp_xbuf x;

	sp_xbuf_new(kind, XLEN, 0, &x);
	dmabuf_roundtrip(x.fd, x.map, seed);
	sp_xbuf_free(&x);
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
