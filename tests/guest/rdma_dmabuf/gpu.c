// SPDX-License-Identifier: MIT
/* rdma_dmabuf: GPU buffers that move (sp_gpusim) and the preload */
#include "rdma_dmabuf.h"

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
void test_sp_reg_mr_gpusim_range_pinned_then_moves(void)
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
void test_preload_plain_verbs_on_gpu_memory(void)
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
void test_preload_leaves_the_rest_alone(void)
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
