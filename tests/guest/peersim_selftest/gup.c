// SPDX-License-Identifier: MIT
/* peersim_selftest: registrations through the GUP path */
#include "peersim_selftest.h"

/* --- GUP path ------------------------------------------------------------------ */

/* Registers [p, p + len), checks the GUP result and the MR's info. */
uint32_t reg_gup(int fd, void *p, uint64_t len, uint32_t access)
{
	struct peersim_reg_mr r;
	struct peersim_mr_info mi;
	uint64_t off = (uintptr_t)p % page_size();
	uint64_t npages = (off + len + page_size() - 1) / page_size();

	CHECK_OK(peersim_reg_mr(fd, p, len, access, &r));
	CHECK(r.path == PEERSIM_PATH_GUP, "path %u (client %s)", r.path, r.client);
	CHECK(r.client[0] == '\0', "client name \"%.64s\" for GUP", r.client);
	CHECK(r.page_size == (uint64_t)page_size(), "page_size %" PRIu64,
	      (uint64_t)r.page_size);
	CHECK(r.nents >= 1 && r.nents <= npages, "nents %u for %" PRIu64 " pages", r.nents,
	      npages);

	CHECK_OK(peersim_mr_info(fd, r.handle, &mi));
	CHECK(mi.state == PEERSIM_MR_ACTIVE, "state %u", mi.state);
	CHECK(mi.path == PEERSIM_PATH_GUP && mi.nents == r.nents, "path %u nents %u",
	      mi.path, mi.nents);
	CHECK(mi.addr == (uintptr_t)p && mi.length == len, "addr/length");
	CHECK(mi.access == access, "access %u", mi.access);
	CHECK(mi.invalidated_at_ns == 0 && mi.free_callbacks == 0, "invalidation on a GUP MR");
	CHECK(mi.core_context == PEERSIM_NO_CORE_CONTEXT, "core_context %" PRIu64,
	      (uint64_t)mi.core_context);
	CHECK(mi.core_state == PEERSIM_CORE_UNMAPPED, "core_state %u", mi.core_state);
	CHECK(mi.first_offset == off, "first_offset %" PRIu64 " for offset %" PRIu64,
	      (uint64_t)mi.first_offset, off);
	CHECK(mi.dma_bytes == npages * page_size(), "dma_bytes %" PRIu64 " for %" PRIu64 " pages",
	      (uint64_t)mi.dma_bytes, npages);
	return r.handle;
}

/* DMA writes show up in memory, CPU writes come back through DMA reads. */
void dma_roundtrip(int fd, uint32_t mr, uint8_t *p, uint64_t len, uint32_t seed)
{
	uint8_t *buf = malloc(len);
	int64_t bad;

	CHECK(buf, "malloc");
	/* device -> memory */
	sp_fill(buf, len, 0, seed);
	memset(p, 0, len);
	CHECK_OK(peersim_dma_write(fd, mr, 0, buf, len));
	bad = sp_verify(p, len, 0, seed);
	CHECK(bad < 0, "CPU sees wrong byte at %" PRId64 " after DMA write", bad);

	/* memory -> device */
	sp_fill(p, len, 0, seed + 1);
	memset(buf, 0, len);
	CHECK_OK(peersim_dma_read(fd, mr, 0, buf, len));
	bad = sp_verify(buf, len, 0, seed + 1);
	CHECK(bad < 0, "DMA read returned a wrong byte at %" PRId64, bad);

	/* pieces at odd offsets, across page and segment boundaries */
	for (uint64_t off = 1; off < len; off = off * 3 + 4091) {
		uint64_t n = len - off < 10007 ? len - off : 10007;

		sp_fill(buf, n, off, seed + 2);
		CHECK_OK(peersim_dma_write(fd, mr, off, buf, n));
		bad = sp_verify(p + off, n, off, seed + 2);
		CHECK(bad < 0, "piece at %" PRIu64 ": wrong byte %" PRId64, off, bad);
		memset(buf, 0, n);
		CHECK_OK(peersim_dma_read(fd, mr, off, buf, n));
		bad = sp_verify(buf, n, off, seed + 2);
		CHECK(bad < 0, "piece at %" PRIu64 " read back: wrong byte %" PRId64, off, bad);
	}
	free(buf);
}

void gup_4k(void)
{
	int fd = peersim_test_open();
	uint8_t *p = aligned_alloc(page_size(), page_size());
	uint64_t before = peersim_live_mrs(fd);
	struct peersim_seg seg;
	uint32_t mr, n = 1;
	uint64_t pfn;

	CHECK(p, "aligned_alloc");
	memset(p, 0, page_size());
	mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);
	CHECK(peersim_live_mrs(fd) == before + 1, "live_mrs not counted");
	dma_roundtrip(fd, mr, p, page_size(), 1);

	/* no IOMMU: the DMA address is the page's physical address */
	CHECK_OK(peersim_mr_segs(fd, mr, &seg, &n));
	CHECK(n == 1 && seg.len == (uint64_t)page_size(), "%u segments, first %" PRIu64 " bytes",
	      n, (uint64_t)seg.len);
	pfn = sp_pfn(p);
	if (pfn)
		CHECK(seg.dma_addr == pfn * page_size(), "dma_addr %#" PRIx64 " pfn %#" PRIx64,
		      (uint64_t)seg.dma_addr, pfn);

	CHECK_OK(peersim_dereg_mr(fd, mr));
	CHECK(peersim_live_mrs(fd) == before, "live_mrs not decremented");
	free(p);
	close(fd);
}

void gup_1m_unaligned(void)
{
	int fd = peersim_test_open();
	uint64_t len = MiB;
	uint8_t *base = malloc(len + 2 * page_size());
	uint8_t *p = base + 123;
	uint32_t mr;

	CHECK(base, "malloc");
	memset(base, 0, len + 2 * page_size());
	mr = reg_gup(fd, p, len, PEERSIM_ACCESS_WRITE);
	dma_roundtrip(fd, mr, p, len, 7);
	/* the bytes around the MR are not touched by DMA to its ends */
	base[122] = 0x11;
	p[len] = 0x22;
	{
		uint8_t ones[2] = { 0xee, 0xee };

		CHECK_OK(peersim_dma_write(fd, mr, 0, ones, 1));
		CHECK_OK(peersim_dma_write(fd, mr, len - 1, ones, 1));
		CHECK(p[0] == 0xee && p[len - 1] == 0xee, "ends not written");
		CHECK(base[122] == 0x11 && p[len] == 0x22, "DMA wrote outside the MR");
	}
	CHECK_OK(peersim_dereg_mr(fd, mr));
	free(base);
	close(fd);
}

/* The DMA segments: within max_seg_size, covering the pages, in order. */
void gup_segments(void)
{
	int fd = peersim_test_open();
	uint64_t len = 4 * MiB, maxseg = max_seg(fd), sum = 0;
	uint8_t *p = mmap(NULL, len + HUGE_SZ, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct peersim_seg *segs, small[3];
	struct peersim_reg_mr r;
	uint32_t n, n2 = 2;
	unsigned int contig = 0;

	CHECK(p != MAP_FAILED, "mmap");
	/* 2 MiB aligned, THP when available: physically contiguous runs */
	p = (uint8_t *)(((uintptr_t)p + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
	madvise(p, len, MADV_HUGEPAGE);
	memset(p, 1, len);

	CHECK_OK(peersim_reg_mr(fd, p, len, PEERSIM_ACCESS_WRITE, &r));
	CHECK(r.path == PEERSIM_PATH_GUP, "path %u", r.path);
	n = r.nents;
	segs = calloc(n + 1, sizeof(*segs));
	CHECK(segs, "calloc");
	segs[n].len = 0xdead;
	CHECK_OK(peersim_mr_segs(fd, r.handle, segs, &n));
	CHECK(n == r.nents, "MR_SEGS says %u, REG_MR said %u", n, r.nents);
	CHECK(segs[n].len == 0xdead, "wrote past the given count");
	CHECK(n >= (len + maxseg - 1) / maxseg, "%u segments for %" PRIu64 " bytes, max %" PRIu64,
	      n, len, maxseg);
	for (uint32_t i = 0; i < n; i++) {
		CHECK(segs[i].len > 0 && segs[i].len <= maxseg, "segment %u: %" PRIu64 " bytes",
		      i, (uint64_t)segs[i].len);
		CHECK(segs[i].dma_addr % page_size() == 0, "segment %u unaligned", i);
		sum += segs[i].len;
		if (i && segs[i - 1].dma_addr + segs[i - 1].len == segs[i].dma_addr)
			contig++;
	}
	CHECK(sum == len, "segments hold %" PRIu64 " bytes", sum);
	tap_diag("4 MiB: %u segments (max %" PRIu64 "), %u adjacent pairs", n, maxseg, contig);

	/* a short buffer gets what fits and the full count */
	memset(small, 0xcc, sizeof(small));
	CHECK_OK(peersim_mr_segs(fd, r.handle, small, &n2));
	CHECK(n2 == n, "count %u", n2);
	CHECK(small[0].dma_addr == segs[0].dma_addr && small[2].len == 0xccccccccccccccccULL,
	      "short buffer");
	n2 = 0;
	CHECK_OK(peersim_mr_segs(fd, r.handle, NULL, &n2));
	CHECK(n2 == n, "count-only query %u", n2);
	n2 = 4;
	CHECK_ERR(peersim_mr_segs(fd, r.handle, (void *)8, &n2), EFAULT);

	dma_roundtrip(fd, r.handle, p, len, 11);
	CHECK_OK(peersim_dereg_mr(fd, r.handle));
	free(segs);
	close(fd);
}

void read_only_mr(void)
{
	int fd = peersim_test_open();
	uint8_t *p = map_anon(page_size(), PROT_READ | PROT_WRITE);
	uint8_t buf[64];
	uint32_t mr;

	memset(p, 0x3c, page_size());
	CHECK_OK(mprotect(p, page_size(), PROT_READ));
	/* read-only mapping + write access: GUP refuses, so does the core */
	CHECK_ERR(peersim_reg_mr(fd, p, page_size(), PEERSIM_ACCESS_WRITE, NULL), EFAULT);
	/* read-only MR: registers, reads, refuses DMA writes */
	mr = reg_gup(fd, p, page_size(), 0);
	CHECK_OK(peersim_dma_read(fd, mr, 100, buf, sizeof(buf)));
	for (size_t i = 0; i < sizeof(buf); i++)
		CHECK(buf[i] == 0x3c, "byte %zu = %#x", i, buf[i]);
	CHECK_ERR(peersim_dma_write(fd, mr, 0, buf, 1), EACCES);
	CHECK(p[0] == 0x3c, "refused DMA write changed memory");
	CHECK_OK(peersim_dereg_mr(fd, mr));
	munmap(p, page_size());
	close(fd);
}

void unmapped_and_prot_none_refused(void)
{
	int fd = peersim_test_open();
	uint64_t before = peersim_live_mrs(fd);
	uint8_t *p = map_anon(4 * page_size(), PROT_READ | PROT_WRITE);

	CHECK_OK(mprotect(p + page_size(), page_size(), PROT_NONE));
	CHECK_ERR(peersim_reg_mr(fd, p + page_size(), page_size(), 0, NULL), EFAULT);
	/* a range with one bad page is refused as a whole */
	CHECK_ERR(peersim_reg_mr(fd, p, 3 * page_size(), PEERSIM_ACCESS_WRITE, NULL), EFAULT);
	CHECK_OK(munmap(p + 2 * page_size(), 2 * page_size()));
	CHECK_ERR(peersim_reg_mr(fd, p + 2 * page_size(), page_size(), 0, NULL), EFAULT);
	CHECK_ERR(peersim_reg_mr(fd, NULL, page_size(), 0, NULL), EFAULT);
	CHECK(peersim_live_mrs(fd) == before, "a refused range registered");
	munmap(p, 2 * page_size());
	close(fd);
}

/*
 * A PFN mapping (no struct pages behind the PTEs, as a TTM BO's) defeats
 * GUP; with no client claiming it the GUP error is returned.
 */
void pfn_mapping_refused(void)
{
	int fd = peersim_test_open();
	uint64_t before = peersim_live_mrs(fd);
	struct dma_heap_alloc {		/* <linux/dma-heap.h> */
		uint64_t len;
		uint32_t fd;
		uint32_t fd_flags;
		uint64_t heap_flags;
	} alloc = { .len = 64 * 1024, .fd_flags = O_RDWR | O_CLOEXEC };
	int heap = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);
	const char *what;
	void *p = NULL;
	size_t len = 0;

	if (heap >= 0 && ioctl(heap, _IOWR('H', 0x0, struct dma_heap_alloc), &alloc) == 0) {
		len = alloc.len;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)alloc.fd, 0);
		CHECK(p != MAP_FAILED, "mmap dma-buf: %s", strerror(errno));
		what = "system dma-heap buffer";
		CHECK_ERR(peersim_reg_mr(fd, p, len, PEERSIM_ACCESS_WRITE, NULL), EFAULT);
		CHECK_ERR(peersim_reg_mr(fd, (char *)p + 100, 5000, 0, NULL), EFAULT);
	} else {
		/* the vDSO data page: VM_PFNMAP on x86 */
		char line[256];
		FILE *maps = fopen("/proc/self/maps", "re");
		unsigned long a = 0, b = 0;

		CHECK(maps, "maps");
		while (fgets(line, sizeof(line), maps))
			if (strstr(line, "[vvar]") && sscanf(line, "%lx-%lx", &a, &b) == 2)
				break;
		fclose(maps);
		if (!a)
			SKIP("neither /dev/dma_heap/system nor [vvar] available");
		what = "[vvar] mapping";
		CHECK_ERR(peersim_reg_mr(fd, (void *)a, page_size(), 0, NULL), EFAULT);
	}
	CHECK(peersim_live_mrs(fd) == before, "a PFN mapping registered");
	tap_diag("%s refused with EFAULT", what);
	if (p)
		munmap(p, len);
	if (heap >= 0)
		close(heap);
	close(fd);
}
