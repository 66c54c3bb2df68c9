// SPDX-License-Identifier: MIT
/*
 * Zero-change PeerDirect as ROCm maps GPU memory. libhsakmt's
 * fmm_allocate_device() reserves a PROT_NONE aperture, maps each BO with
 * mmap(MAP_SHARED | MAP_FIXED) of the render node at the BO's DRM fake
 * offset, and madvise(MADV_DONTFORK)s it; ROCr sub-allocates several
 * hipMalloc pointers from one BO; hipFree puts the range back to PROT_NONE;
 * UCX's registration cache registers merged, overlapping ranges. Here vgem
 * and sp_gpusim (an amdgpu/TTM-like driver, tests/kmod/gpusim.c) stand in
 * for amdgpu, and the simulated PeerDirect core + HCA (sp_peersim) plays
 * ib_core + a NIC: every ibv_reg_mr() below is PEERSIM_IOC_REG_MR, every
 * NIC write a PEERSIM_IOC_DMA_WRITE, checked through the CPU mapping.
 */
#include "peer_util.h"
#include "gpusim.h"

#include <sys/wait.h>

#define KiB 1024ULL
#define GiB (1024ULL * MiB)

/* A BO mapped ROCm-style at @va. */
struct rbo {
	bool gpusim;
	struct sp_vgem_bo v;
	int gfd;
	uint32_t handle;
	uint64_t mmap_offset;
	int map_fd;
	size_t len;
	uint8_t *va;
};

static void rbo_new(struct rbo *b, bool gpusim, size_t len, uint8_t *va)
{
	memset(b, 0, sizeof(*b));
	b->gpusim = gpusim;
	b->len = len;
	b->va = va;
	b->gfd = -1;
	if (gpusim) {
		b->gfd = gpusim_open();
		b->handle = gpusim_create(b->gfd, len, SP_GPUSIM_DOMAIN_VRAM, 0, &b->mmap_offset);
		b->map_fd = b->gfd;
	} else {
		sp_vgem_bo_new(len, &b->v);
		b->handle = b->v.handle;
		b->mmap_offset = b->v.mmap_offset;
		b->map_fd = b->v.node;
	}
	sp_rocm_map(va, len, b->map_fd, b->mmap_offset);
	memset(va, 0, len);
}

static void rbo_free(struct rbo *b)
{
	sp_rocm_free(b->va, b->len);
	if (b->gpusim)
		close(b->gfd);
	else
		sp_vgem_bo_free(&b->v);
}

/* A zero-change registration; must be claimed by strixpeer. */
static uint32_t reg_claimed(int sim, const void *addr, uint64_t len)
{
	struct peersim_reg_mr r;
	int ret = sim_reg(sim, addr, len, &r);

	CHECK(ret == 0, "registration of %p+%" PRIu64 ": %s", addr, len, strerror(-ret));
	CHECK(r.path == PEERSIM_PATH_PEER && !strcmp(r.client, "strixpeer"),
	      "%p+%" PRIu64 ": path %u client \"%s\"", addr, len, r.path, r.client);
	return r.handle;
}

/* NIC writes the MR, the CPU sees it at @va; the CPU writes, the NIC reads it. */
static void dma_check(int sim, uint32_t h, uint8_t *va, uint64_t len, uint32_t seed)
{
	uint8_t *tmp = malloc(len);
	int64_t bad;

	CHECK(tmp, "malloc");
	sim_write_seen(sim, h, va, len, seed);
	sp_fill(va, len, 0, seed + 1);
	memset(tmp, 0, len);
	CHECK_OK(sim_dma(sim, PEERSIM_IOC_DMA_READ, h, 0, tmp, len));
	bad = sp_verify(tmp, len, 0, seed + 1);
	CHECK(bad < 0, "NIC read differs at byte %lld of %p+%" PRIu64, (long long)bad,
	      (void *)va, len);
	free(tmp);
}

static void wait_invalidated(int sim, uint32_t h)
{
	for (int i = 0; i < 250 && sim_mr(sim, h).state != PEERSIM_MR_INVALIDATED; i++)
		usleep(20000);
	CHECK(sim_mr(sim, h).state == PEERSIM_MR_INVALIDATED, "MR %u still active", h);
}

/*
 * The VMA carries the BO's fake offset in vm_pgoff (the file offset in
 * /proc/self/maps), also after its head was unmapped; a registration in
 * what is left lands at the right place.
 */
static void vma_fake_offset(bool gpusim)
{
	int sim = sim_open();
	uint8_t *ap = sp_aperture(64 * MiB, 2 * MiB);
	struct rbo b;
	uint32_t h;

	rbo_new(&b, gpusim, 4 * MiB, ap);
	CHECK(sp_maps_offset(b.va) == (int64_t)b.mmap_offset,
	      "maps offset %#llx, fake offset %#llx", (long long)sp_maps_offset(b.va),
	      (unsigned long long)b.mmap_offset);
	sp_rocm_free(b.va, 64 * KiB);	/* the head goes */
	CHECK(sp_maps_offset(b.va + 64 * KiB) == (int64_t)(b.mmap_offset + 64 * KiB),
	      "tail's maps offset %#llx", (long long)sp_maps_offset(b.va + 64 * KiB));
	h = reg_claimed(sim, b.va + 1 * MiB + 3, 256 * KiB);
	dma_check(sim, h, b.va + 1 * MiB + 3, 256 * KiB, 1);
	CHECK(b.va[1 * MiB + 2] == 0 && b.va[1 * MiB + 3 + 256 * KiB] == 0,
	      "DMA outside the registered range");
	sim_dereg(sim, h);
	rbo_free(&b);
	munmap(ap, 64 * MiB);
	close(sim);
	check_all_released();
}

static void vma_fake_offset_vgem(void) { vma_fake_offset(false); }
static void vma_fake_offset_gpusim(void) { vma_fake_offset(true); }

/*
 * Sub-allocations of one 4 MiB BO, all registered at once: disjoint,
 * nested, overlapping, a growing sequence 4 KiB .. 4 MiB, the same range
 * twice. Each is claimed and the NIC's writes land where the CPU sees them.
 */
static void suballoc(bool gpusim)
{
	static const struct { uint64_t off, len; } ranges[] = {
		{ 0, 64 * KiB }, { 128 * KiB, 128 * KiB }, { 1 * MiB, 1 * MiB },	/* disjoint */
		{ 0, 4 * MiB }, { 1 * MiB + 4 * KiB, 64 * KiB },			/* nested */
		{ 512 * KiB, 2 * MiB }, { 1536 * KiB, 2 * MiB },			/* overlapping */
		{ 3 * MiB, 512 * KiB }, { 3 * MiB, 512 * KiB },				/* twice */
	};
	enum { NR = sizeof(ranges) / sizeof(ranges[0]), NG = 11 };
	int sim = sim_open();
	uint8_t *ap = sp_aperture(64 * MiB, 2 * MiB);
	uint32_t h[NR + NG];
	struct sp_peer_counters c;
	struct rbo b;
	unsigned int n = 0;

	rbo_new(&b, gpusim, 4 * MiB, ap + 8 * MiB);
	for (unsigned int i = 0; i < NR; i++)
		h[n++] = reg_claimed(sim, b.va + ranges[i].off, ranges[i].len);
	for (unsigned int i = 0; i < NG; i++)		/* growing: 4 KiB .. 4 MiB */
		h[n++] = reg_claimed(sim, b.va, 4 * KiB << i);
	c = peer_stats();
	CHECK(c.registrations == n && c.imports == n,
	      "%llu registrations, %llu imports for %u claims",
	      (unsigned long long)c.registrations, (unsigned long long)c.imports, n);
	for (unsigned int i = 0; i < NR; i++)
		dma_check(sim, h[i], b.va + ranges[i].off, ranges[i].len, 10 + i);
	for (unsigned int i = 0; i < NG; i++)
		dma_check(sim, h[NR + i], b.va, 4 * KiB << i, 40 + i);
	if (gpusim) {
		struct sp_gpusim_info gi = gpusim_info(b.gfd, b.handle);

		/* one pinned mapping for the NIC serves all of them */
		CHECK(gi.exported && gi.attachments == 1 && gi.mappings == 1 && gi.pin_count >= 1,
		      "exported %u attachments %u mappings %u pins %u for %u registrations",
		      gi.exported, gi.attachments, gi.mappings, gi.pin_count, n);
		tap_diag("%u registrations of one BO: %u attachment, %u mapping", n,
			 gi.attachments, gi.mappings);
	}
	for (unsigned int i = 0; i < n; i++)
		sim_dereg(sim, h[i]);
	rbo_free(&b);
	munmap(ap, 64 * MiB);
	close(sim);
	check_all_released();
}

static void suballoc_vgem(void) { suballoc(false); }
static void suballoc_gpusim(void) { suballoc(true); }

/*
 * hipFree of one sub-allocation: PROT_NONE over [64K, 256K) of the BO
 * invalidates exactly the registrations touching it; the others work on.
 */
static void hipfree(bool gpusim)
{
	int sim = sim_open();
	uint8_t *ap = sp_aperture(64 * MiB, 2 * MiB);
	uint32_t keep1, keep2, gone1, gone2, gone3;
	uint8_t byte = 0x77;
	struct rbo b;

	rbo_new(&b, gpusim, 2 * MiB, ap);
	keep1 = reg_claimed(sim, b.va, 64 * KiB);
	gone1 = reg_claimed(sim, b.va + 64 * KiB, 64 * KiB);
	gone2 = reg_claimed(sim, b.va + 32 * KiB, 64 * KiB);		/* straddles the edge */
	gone3 = reg_claimed(sim, b.va, 2 * MiB);			/* the whole BO */
	keep2 = reg_claimed(sim, b.va + 1 * MiB, 512 * KiB);
	sp_rocm_free(b.va + 64 * KiB, 192 * KiB);
	wait_invalidated(sim, gone1);
	wait_invalidated(sim, gone2);
	wait_invalidated(sim, gone3);
	CHECK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, gone1, 0, &byte, 1) == -ENOLINK,
	      "DMA into a freed sub-allocation was not refused");
	CHECK(sim_mr(sim, keep1).state == PEERSIM_MR_ACTIVE &&
	      sim_mr(sim, keep2).state == PEERSIM_MR_ACTIVE, "an untouched registration died");
	dma_check(sim, keep1, b.va, 64 * KiB, 3);
	dma_check(sim, keep2, b.va + 1 * MiB, 512 * KiB, 4);
	sim_dereg(sim, keep1);
	sim_dereg(sim, keep2);
	sim_dereg(sim, gone1);
	sim_dereg(sim, gone2);
	sim_dereg(sim, gone3);
	rbo_free(&b);
	munmap(ap, 64 * MiB);
	close(sim);
	check_all_released();
}

static void hipfree_vgem(void) { hipfree(false); }
static void hipfree_gpusim(void) { hipfree(true); }

/* MADV_DONTFORK: the child has no mapping, so nothing to register; the parent goes on. */
static void fork_dontfork(void)
{
	int sim = sim_open();
	uint8_t *ap = sp_aperture(64 * MiB, 2 * MiB);
	struct rbo b;
	uint32_t h;
	pid_t pid;
	int st;

	rbo_new(&b, false, 1 * MiB, ap);
	h = reg_claimed(sim, b.va, 1 * MiB);
	pid = fork();
	if (pid == 0) {
		struct peersim_reg_mr r;
		int s2 = open(PEERSIM_DEVICE_PATH, O_RDWR | O_CLOEXEC);

		_exit(s2 >= 0 && sim_reg(s2, b.va, 1 * MiB, &r) == -EFAULT ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the child registered the parent's MADV_DONTFORK range");
	CHECK(sim_mr(sim, h).state == PEERSIM_MR_ACTIVE, "fork invalidated the parent's MR");
	dma_check(sim, h, b.va, 1 * MiB, 5);
	sim_dereg(sim, h);
	rbo_free(&b);
	munmap(ap, 64 * MiB);
	close(sim);
	check_all_released();
}

/* UCX's rcache: A, then the merged A u B while A lives, then A goes; A u B works. */
static void ucx_rcache(void)
{
	int sim = sim_open();
	uint8_t *ap = sp_aperture(64 * MiB, 2 * MiB);
	uint32_t a, ab;
	struct rbo b;

	rbo_new(&b, true, 4 * MiB, ap);
	a = reg_claimed(sim, b.va + 100, 300 * KiB);
	dma_check(sim, a, b.va + 100, 300 * KiB, 6);
	ab = reg_claimed(sim, b.va + 100, 3 * MiB);
	sim_dereg(sim, a);
	dma_check(sim, ab, b.va + 100, 3 * MiB, 7);
	sim_dereg(sim, ab);
	rbo_free(&b);
	munmap(ap, 64 * MiB);
	close(sim);
	check_all_released();
}

static uint32_t import_regs(int fd, uint32_t handle)
{
	struct strixpeer_import_info ii = { .handle = handle };

	CHECK_OK(ioctl(fd, STRIXPEER_IOC_IMPORT_INFO, &ii));
	return ii.registrations;
}

/*
 * Explicit and implicit imports of the same memory (docs/peerdirect.md):
 * a registration inside an explicit import uses it; one that is not
 * inside an explicit import is claimed from the GEM mapping itself, even
 * where it overlaps one. Ending the explicit import invalidates only the
 * registrations made through it.
 */
static void explicit_and_implicit(void)
{
	int sim = sim_open(), fd = sp_test_open();
	uint8_t *ap = sp_aperture(64 * MiB, 2 * MiB);
	struct strixpeer_import im;
	uint32_t z, in, cross, z2;
	struct rbo b;
	int dmabuf;

	rbo_new(&b, false, 4 * MiB, ap);
	dmabuf = b.v.dmabuf >= 0 ? b.v.dmabuf : sp_prime_export(b.v.card, b.handle);

	/* implicit first, then an explicit import over part of it */
	z = reg_claimed(sim, b.va, 1 * MiB);
	CHECK_OK(sp_import_raw(fd, dmabuf, 512 * KiB, 1536 * KiB, b.va + 512 * KiB, &im));
	in = reg_claimed(sim, b.va + 600 * KiB, 100 * KiB);
	CHECK(import_regs(fd, im.handle) == 1, "inside the explicit import, not through it");
	cross = reg_claimed(sim, b.va + 256 * KiB, 512 * KiB);
	CHECK(import_regs(fd, im.handle) == 1, "a crossing range went through the import");
	dma_check(sim, in, b.va + 600 * KiB, 100 * KiB, 8);
	dma_check(sim, cross, b.va + 256 * KiB, 512 * KiB, 9);

	/* UNIMPORT ends what went through it, nothing else */
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	CHECK(sim_mr(sim, in).state == PEERSIM_MR_INVALIDATED, "not invalidated by UNIMPORT");
	CHECK(sim_mr(sim, z).state == PEERSIM_MR_ACTIVE &&
	      sim_mr(sim, cross).state == PEERSIM_MR_ACTIVE, "UNIMPORT ended implicit claims");
	dma_check(sim, z, b.va, 1 * MiB, 10);
	dma_check(sim, cross, b.va + 256 * KiB, 512 * KiB, 11);

	/* explicit first: a range inside uses it, a crossing one the mapping */
	CHECK_OK(sp_import_raw(fd, dmabuf, 0, 1 * MiB, b.va, &im));
	z2 = reg_claimed(sim, b.va + 512 * KiB, 1 * MiB);
	CHECK(import_regs(fd, im.handle) == 0, "a crossing range went through the import");
	sim_dereg(sim, in);
	in = reg_claimed(sim, b.va + 4 * KiB, 8 * KiB);
	CHECK(import_regs(fd, im.handle) == 1, "inside the explicit import, not through it");
	dma_check(sim, z2, b.va + 512 * KiB, 1 * MiB, 12);
	dma_check(sim, in, b.va + 4 * KiB, 8 * KiB, 13);

	/* munmap ends both kinds */
	sp_rocm_free(b.va, 4 * MiB);
	wait_invalidated(sim, z);
	wait_invalidated(sim, z2);
	wait_invalidated(sim, cross);
	wait_invalidated(sim, in);
	sim_dereg(sim, z);
	sim_dereg(sim, z2);
	sim_dereg(sim, cross);
	sim_dereg(sim, in);
	if (dmabuf != b.v.dmabuf)
		close(dmabuf);
	close(fd);
	sp_vgem_bo_free(&b.v);
	munmap(ap, 64 * MiB);
	close(sim);
	check_all_released();
}

/*
 * A BO mapped in pieces (mprotect splits the VMA): a registration across
 * the pieces of one BO is claimed; one across two different BOs that are
 * adjacent in the aperture is declined.
 */
static void split_vma(void)
{
	int sim = sim_open();
	uint8_t *ap = sp_aperture(64 * MiB, 2 * MiB);
	struct peersim_reg_mr r;
	struct rbo b, b2;
	uint32_t h;
	int ret;

	rbo_new(&b, true, 4 * MiB, ap);
	rbo_new(&b2, true, 2 * MiB, ap + 4 * MiB);
	/* split [1M, 2M) off and back to read-write: VMAs with a close op never merge */
	CHECK_OK(mprotect(b.va + 1 * MiB, 1 * MiB, PROT_READ));
	CHECK_OK(mprotect(b.va + 1 * MiB, 1 * MiB, PROT_READ | PROT_WRITE));
	CHECK(sp_maps_count(b.va, 4 * MiB) == 3, "BO mapped as %d VMAs, not 3",
	      sp_maps_count(b.va, 4 * MiB));
	h = reg_claimed(sim, b.va + 512 * KiB, 2 * MiB);
	dma_check(sim, h, b.va + 512 * KiB, 2 * MiB, 14);
	sim_dereg(sim, h);
	ret = sim_reg(sim, b.va + 3 * MiB, 2 * MiB, &r);
	CHECK(ret == -EFAULT, "a range across two BOs: %d, path %u", ret, r.path);
	rbo_free(&b);
	rbo_free(&b2);
	munmap(ap, 64 * MiB);
	close(sim);
	check_all_released();
}

/*
 * BOs larger than 4 GiB: the DRM fake-offset space starts at 4 GiB, so the
 * first large BO's fake offset (in pages) is below its page count, the
 * second's above. Both are claimed at their start, in the middle, at
 * 4 GiB + 64 KiB and at their end, and the NIC's writes land at those
 * offsets.
 */
static void large_bos(void)
{
	const uint64_t size = 5 * GiB;
	const uint64_t win[] = { 0, 2 * GiB + 512 * MiB, 4 * GiB + 64 * KiB, 5 * GiB - 64 * KiB };
	enum { NW = sizeof(win) / sizeof(win[0]) };
	int sim = sim_open(), gfd = gpusim_open();
	uint8_t *ap = sp_aperture(16 * GiB, 2 * MiB);
	uint64_t off[2];
	uint32_t bo[2];

	for (int i = 0; i < 2; i++) {
		bo[i] = gpusim_create(gfd, size, SP_GPUSIM_DOMAIN_VRAM, SP_GPUSIM_CREATE_SPARSE,
				      &off[i]);
		for (unsigned int w = 0; w < NW; w++)
			gpusim_populate(gfd, bo[i], win[w] & ~(2 * MiB - 1), 64 * KiB);
		sp_rocm_map(ap + (uint64_t)i * 8 * GiB, size, gfd, off[i]);
	}
	CHECK((off[0] >> 12) < (size >> 12) && (off[1] >> 12) >= (size >> 12),
	      "fake offsets (pages) %llu and %llu, BO pages %llu",
	      (unsigned long long)(off[0] >> 12), (unsigned long long)(off[1] >> 12),
	      (unsigned long long)(size >> 12));
	tap_diag("5 GiB BOs at fake-offset pages %llu (low) and %llu (high)",
		 (unsigned long long)(off[0] >> 12), (unsigned long long)(off[1] >> 12));
	for (int i = 0; i < 2; i++) {
		uint8_t *va = ap + (uint64_t)i * 8 * GiB;
		uint32_t h[NW];

		for (unsigned int w = 0; w < NW; w++)
			memset(va + win[w], 0, 64 * KiB);
		for (unsigned int w = 0; w < NW; w++)
			h[w] = reg_claimed(sim, va + win[w], 64 * KiB);
		for (unsigned int w = 0; w < NW; w++) {
			uint8_t *tmp = malloc(64 * KiB);

			CHECK(tmp, "malloc");
			sp_fill(tmp, 64 * KiB, 0, 20 + w);
			CHECK_OK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, h[w], 0, tmp, 64 * KiB));
			free(tmp);
		}
		/* each window has its own pattern: a wrong offset shows */
		for (unsigned int w = 0; w < NW; w++)
			CHECK(sp_verify(va + win[w], 64 * KiB, 0, 20 + w) < 0,
			      "BO %d: NIC write to offset %#llx not there", i,
			      (unsigned long long)win[w]);
		for (unsigned int w = 0; w < NW; w++)
			sim_dereg(sim, h[w]);
	}
	munmap(ap, 16 * GiB);
	close(gfd);
	close(sim);
	check_all_released();
}

static const struct tap_case cases[] = {
	TAP_CASE(vma_fake_offset_vgem),
	TAP_CASE(vma_fake_offset_gpusim),
	TAP_CASE_T(suballoc_vgem, 180),
	TAP_CASE_T(suballoc_gpusim, 180),
	TAP_CASE(hipfree_vgem),
	TAP_CASE(hipfree_gpusim),
	TAP_CASE(fork_dontfork),
	TAP_CASE(ucx_rcache),
	TAP_CASE_T(explicit_and_implicit, 120),
	TAP_CASE(split_vma),
	TAP_CASE_T(large_bos, 180),
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
