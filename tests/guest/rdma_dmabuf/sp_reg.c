// SPDX-License-Identifier: MIT
/* rdma_dmabuf: sp_reg_mr() taking the dma-buf path */
#include "rdma_dmabuf.h"

struct sp_reg_stats reg_stats(struct sp_dev *dev)
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
void test_sp_reg_mr_import_takes_dmabuf_path(void)
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

void test_sp_reg_mr_buffer_no_plain_takes_dmabuf_path(void)
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
void released_bo_moves(struct two *t, int g, uint32_t h, uint8_t *cpu, uint64_t iova,
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
void test_dmabuf_mr_gpusim_pinned_then_moves(void)
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
void test_sp_reg_mr_gpu_range_takes_dmabuf_path(void)
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
void test_sp_reg_mr_gpu_range_read_only(void)
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
