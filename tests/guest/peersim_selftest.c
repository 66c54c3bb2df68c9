// SPDX-License-Identifier: MIT
/*
 * Self-test of sp_peersim.ko, the simulated PeerDirect core + HCA
 * (tests/kmod/), on its own: everything here needs no peer-memory client.
 * Malformed requests first, then registrations through the GUP path with
 * "DMA" checked against what the CPU sees, then lifetime and privileges,
 * then dma-buf MRs of vgem (and udmabuf where the kernel has it) checked
 * against the exporter's CPU mapping.
 *
 * Expects the module loaded (skips otherwise); loads nothing itself. Some
 * cases read max_seg_size to check segmenting; load the module with e.g.
 * max_seg_size=65536 to make coalescing limits visible.
 */
#include "sp_test.h"
#include "dmabuf_util.h"
#include "peersim.h"

#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define PSIM_IOC_SIZED(dir, nr, size) _IOC(dir, PEERSIM_IOC_MAGIC, nr, size)

static long page_size(void)
{
	return sysconf(_SC_PAGESIZE);
}

/* An anonymous private mapping, populated. */
static void *map_anon(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	CHECK(p != MAP_FAILED, "mmap %zu: %s", len, strerror(errno));
	return p;
}

/* The module's max_seg_size as the device reports it. */
static uint64_t max_seg(int fd)
{
	struct peersim_info info;

	CHECK_OK(peersim_info(fd, &info));
	return info.max_seg_size;
}

/* --- malformed requests ---------------------------------------------------- */

static void info_reports_abi(void)
{
	int fd = peersim_test_open();
	struct peersim_info info;
	char sem[32];

	memset(&info, 0xa5, sizeof(info));
	CHECK_OK(ioctl(fd, PEERSIM_IOC_INFO, &info));
	CHECK(info.abi_version == PEERSIM_ABI_VERSION, "abi_version %u", info.abi_version);
	CHECK(info.semantics == PEERSIM_SEM_MODERN || info.semantics == PEERSIM_SEM_LEGACY,
	      "semantics %u", info.semantics);
	CHECK(info.page_size == (uint64_t)page_size(), "page_size %" PRIu64,
	      (uint64_t)info.page_size);
	CHECK(info.max_seg_size >= (uint64_t)page_size(), "max_seg_size %" PRIu64,
	      (uint64_t)info.max_seg_size);
	CHECK(peersim_param_get("semantics", sem, sizeof(sem)) == 0, "semantics parameter");
	CHECK(!strcmp(sem, info.semantics == PEERSIM_SEM_LEGACY ? "legacy" : "modern"),
	      "parameter says %s", sem);
	tap_diag("%s semantics, max_seg_size %" PRIu64 ", %u clients, %" PRIu64 " live MRs",
		 sem, (uint64_t)info.max_seg_size, info.nclients, (uint64_t)info.live_mrs);
	close(fd);
}

static void unknown_ioctls_enotty(void)
{
	int fd = peersim_test_open();
	char buf[256] = { 0 };

	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x09, 16), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0xff, 8), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOWR('x', 0x01, struct peersim_reg_mr), buf), ENOTTY);
	/* right number, wrong direction */
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_WRITE, 0x00, sizeof(struct peersim_info)), buf),
		  ENOTTY);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ, 0x02, sizeof(struct peersim_mr_handle)),
			buf), ENOTTY);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_NONE, 0x01, 0), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, FIONREAD, buf), ENOTTY);
	close(fd);
}

static void ioctl_sizes(void)
{
	int fd = peersim_test_open();
	char buf[512];
	struct peersim_info *info = (void *)buf;
	uint64_t before = peersim_live_mrs(fd);

	/* smaller than the first version */
	memset(buf, 0, sizeof(buf));
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ, 0x00, sizeof(struct peersim_info) - 8), buf),
		  EINVAL);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, 8), buf), EINVAL);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_WRITE, 0x02, 4), buf), EINVAL);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_WRITE, 0x04, 0), buf), EINVAL);

	/* a newer, larger out-struct: the tail is cleared */
	memset(buf, 0x5a, sizeof(buf));
	CHECK_OK(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ, 0x00, sizeof(struct peersim_info) + 64), buf));
	CHECK(info->abi_version == PEERSIM_ABI_VERSION, "abi_version %u", info->abi_version);
	for (size_t i = sizeof(struct peersim_info); i < sizeof(struct peersim_info) + 64; i++)
		CHECK(buf[i] == 0, "tail byte %zu not cleared", i);

	/* a newer in-struct with a non-zero tail: E2BIG, zero tail: fine */
	{
		char *mem = map_anon(page_size(), PROT_READ | PROT_WRITE);
		struct peersim_reg_mr *r = (void *)buf;
		size_t big = sizeof(*r) + 16;

		memset(buf, 0, sizeof(buf));
		r->addr = (uintptr_t)mem;
		r->length = page_size();
		r->access = PEERSIM_ACCESS_WRITE;
		buf[sizeof(*r) + 3] = 1;
		CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, big), buf), E2BIG);
		CHECK(peersim_live_mrs(fd) == before, "E2BIG registered an MR");
		buf[sizeof(*r) + 3] = 0;
		CHECK_OK(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, big), buf));
		CHECK(r->handle > 0 && r->path == PEERSIM_PATH_GUP, "handle %u path %u",
		      r->handle, r->path);
		CHECK_OK(peersim_dereg_mr(fd, r->handle));
		munmap(mem, page_size());
	}
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	close(fd);
}

/* Every number of our magic, every direction, odd sizes: never a crash. */
static void ioctl_sweep(void)
{
	int fd = peersim_test_open();
	static char buf[16384];
	const unsigned int sizes[] = { 0, 1, 7, 8, 15, 33, 100, 4095 };
	uint64_t before = peersim_live_mrs(fd);

	for (unsigned int nr = 0; nr < 256; nr++)
		for (unsigned int d = 0; d < 4; d++)
			for (unsigned int s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
				long r;

				memset(buf, 0, sizes[s]);	/* INFO writes into it */
				r = ioctl(fd, PSIM_IOC_SIZED(d, nr, sizes[s]), buf);

				/* zeroed: only INFO and CLIENTS (count 0) can succeed */
				if (r == 0)
					CHECK((nr == 0 && d == _IOC_READ) ||
					      (nr == 7 && d == (_IOC_READ | _IOC_WRITE)),
					      "nr %u dir %u size %u accepted", nr, d, sizes[s]);
			}
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	close(fd);
}

static void bad_flags_and_reserved(void)
{
	int fd = peersim_test_open();
	char *mem = map_anon(page_size(), PROT_READ | PROT_WRITE);
	struct peersim_reg_mr r = { .addr = (uintptr_t)mem, .length = page_size() };
	struct peersim_mr_handle h = { .handle = 1, .reserved = 1 };
	struct peersim_mr_info mi = { .handle = 1, .reserved = 1 };
	struct peersim_clients cl = { .reserved = 1 };
	struct peersim_reg_mr ok;
	struct peersim_dma d;
	uint64_t before = peersim_live_mrs(fd);

	r.access = 1U << 1;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_MR, &r), EINVAL);
	r.access = 1U << 31;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_MR, &r), EINVAL);
	r.access = PEERSIM_ACCESS_WRITE;
	r.reserved = 1;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_MR, &r), EINVAL);
	CHECK(peersim_live_mrs(fd) == before, "refused request registered an MR");

	CHECK_OK(peersim_reg_mr(fd, mem, page_size(), PEERSIM_ACCESS_WRITE, &ok));
	h.handle = ok.handle;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DEREG_MR, &h), EINVAL);
	mi.handle = ok.handle;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_MR_INFO, &mi), EINVAL);
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_CLIENTS, &cl), EINVAL);
	d = (struct peersim_dma){ .handle = ok.handle, .flags = 1, .length = 1,
				  .buf = (uintptr_t)mem };
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DMA_WRITE, &d), EINVAL);
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DMA_READ, &d), EINVAL);
	d.flags = 1U << 5;	/* unknown; (1: VMAP is for dma-buf MRs only) */
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DMA_WRITE, &d), EINVAL);
	CHECK_OK(peersim_dereg_mr(fd, ok.handle));
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	munmap(mem, page_size());
	close(fd);
}

static void reg_bad_ranges(void)
{
	int fd = peersim_test_open();
	char *mem = map_anon(page_size(), PROT_READ | PROT_WRITE);
	uint64_t before = peersim_live_mrs(fd);

	CHECK_ERR(peersim_reg_mr(fd, mem, 0, PEERSIM_ACCESS_WRITE, NULL), EINVAL);
	CHECK_ERR(peersim_reg_mr(fd, (void *)(uintptr_t)-4096, 8192, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_mr(fd, (void *)(uintptr_t)-100, 50, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_mr(fd, mem, UINT64_MAX, 0, NULL), EINVAL);
	CHECK(peersim_live_mrs(fd) == before, "refused request registered an MR");
	munmap(mem, page_size());
	close(fd);
}

/* --- GUP path ------------------------------------------------------------------ */

/* Registers [p, p + len), checks the GUP result and the MR's info. */
static uint32_t reg_gup(int fd, void *p, uint64_t len, uint32_t access)
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
static void dma_roundtrip(int fd, uint32_t mr, uint8_t *p, uint64_t len, uint32_t seed)
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

static void gup_4k(void)
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

static void gup_1m_unaligned(void)
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
static void gup_segments(void)
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

static void read_only_mr(void)
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

static void unmapped_and_prot_none_refused(void)
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
static void pfn_mapping_refused(void)
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

/* --- lifetime ------------------------------------------------------------------- */

static void dereg_then_use(void)
{
	int fd = peersim_test_open();
	uint8_t *p = map_anon(page_size(), PROT_READ | PROT_WRITE);
	struct peersim_mr_info mi;
	uint32_t mr, n = 0;

	mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	CHECK_ERR(peersim_dereg_mr(fd, mr), ENOENT);
	CHECK_ERR(peersim_dma_write(fd, mr, 0, p, 1), ENOENT);
	CHECK_ERR(peersim_dma_read(fd, mr, 0, p, 1), ENOENT);
	CHECK_ERR(peersim_mr_info(fd, mr, &mi), ENOENT);
	CHECK_ERR(peersim_mr_segs(fd, mr, NULL, &n), ENOENT);
	CHECK_ERR(peersim_dereg_mr(fd, 0), ENOENT);
	CHECK_ERR(peersim_dereg_mr(fd, 0x7fffffff), ENOENT);
	munmap(p, page_size());
	close(fd);
}

static void dma_bounds(void)
{
	int fd = peersim_test_open();
	uint64_t len = 3 * page_size();
	uint8_t *p = map_anon(len, PROT_READ | PROT_WRITE);
	uint8_t buf[16] = { 0 };
	uint32_t mr = reg_gup(fd, p + 8, len - 16, PEERSIM_ACCESS_WRITE);

	CHECK_ERR(peersim_dma_write(fd, mr, len - 16, buf, 1), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, len - 20, buf, 5), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, len, buf, 0), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, 1, buf, UINT64_MAX), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, UINT64_MAX, buf, 2), EINVAL);
	CHECK_OK(peersim_dma_read(fd, mr, len - 16, buf, 0));
	CHECK_OK(peersim_dma_read(fd, mr, len - 20, buf, 4));
	/* bad user pointers */
	CHECK_ERR(peersim_dma_write(fd, mr, 0, (void *)8, 4), EFAULT);
	CHECK_ERR(peersim_dma_read(fd, mr, 0, (void *)8, 4), EFAULT);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	munmap(p, len);
	close(fd);
}

static void handles_per_fd(void)
{
	int fd = peersim_test_open(), fd2 = peersim_test_open();
	uint8_t *p = map_anon(page_size(), PROT_READ | PROT_WRITE);
	struct peersim_mr_info mi;
	uint32_t mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);

	CHECK_ERR(peersim_mr_info(fd2, mr, &mi), ENOENT);
	CHECK_ERR(peersim_dma_read(fd2, mr, 0, p, 1), ENOENT);
	CHECK_ERR(peersim_dereg_mr(fd2, mr), ENOENT);
	CHECK_OK(peersim_mr_info(fd, mr, &mi));
	close(fd2);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	munmap(p, page_size());
	close(fd);
}

static void close_frees_all(void)
{
	int ctl = peersim_test_open(), fd = peersim_test_open();
	uint64_t before = peersim_live_mrs(ctl);
	uint8_t *p = map_anon(16 * page_size(), PROT_READ | PROT_WRITE);
	int status;
	pid_t pid;

	for (int i = 0; i < 8; i++)
		reg_gup(fd, p + i * 2 * page_size(), page_size() + (i ? 17 : 0),
			i & 1 ? 0 : PEERSIM_ACCESS_WRITE);
	CHECK(peersim_live_mrs(ctl) == before + 8, "live_mrs %" PRIu64 ", before %" PRIu64,
	      peersim_live_mrs(ctl), before);
	close(fd);
	CHECK(peersim_live_mrs(ctl) == before, "close left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);

	/* a process that exits with MRs registered */
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int cfd = open(PEERSIM_DEVICE_PATH, O_RDWR);
		uint8_t *q = mmap(NULL, MiB, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

		if (cfd < 0 || q == MAP_FAILED)
			_exit(2);
		/* disjoint: DMA-API debug flags overlapping mappings */
		for (int i = 0; i < 4; i++)
			if (peersim_reg_mr(cfd, q + i * (MiB / 4) + 100, MiB / 4 - 4096,
					   PEERSIM_ACCESS_WRITE, NULL))
				_exit(3);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(peersim_live_mrs(ctl) == before, "exit left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);

	/* an MR outlives munmap of its range (the pages stay pinned) */
	fd = peersim_test_open();
	{
		uint32_t mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);
		uint8_t b = 0x77, c = 0;

		CHECK_OK(munmap(p, 16 * page_size()));
		CHECK_OK(peersim_dma_write(fd, mr, 5, &b, 1));
		CHECK_OK(peersim_dma_read(fd, mr, 5, &c, 1));
		CHECK(c == 0x77, "pinned page read back %#x", c);
	}
	close(fd);
	CHECK(peersim_live_mrs(ctl) == before, "MRs left behind");
	close(ctl);
}

/* An fd passed over a unix socket keeps its MRs usable by the receiver. */
static void fd_passing(void)
{
	int fd = peersim_test_open(), sv[2];
	uint8_t *p = map_anon(page_size(), PROT_READ | PROT_WRITE);
	uint32_t mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);
	int status;
	pid_t pid;

	memset(p, 0x42, page_size());
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		char cbuf[CMSG_SPACE(sizeof(int))], dummy;
		struct iovec iov = { .iov_base = &dummy, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		uint8_t b = 0;
		int rfd;

		close(fd);
		if (recvmsg(sv[1], &msg, 0) != 1 || !CMSG_FIRSTHDR(&msg))
			_exit(2);
		memcpy(&rfd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
		if (peersim_dma_read(rfd, mr, 9, &b, 1) || b != 0x42)
			_exit(3);
		b = 0x43;
		if (peersim_dma_write(rfd, mr, 10, &b, 1))
			_exit(4);
		_exit(0);
	}
	{
		char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, dummy = 'x';
		struct iovec iov = { .iov_base = &dummy, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
		CHECK(sendmsg(sv[0], &msg, 0) == 1, "sendmsg: %s", strerror(errno));
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(p[10] == 0x43, "receiver's DMA write not seen: %#x", p[10]);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	close(sv[0]);
	close(sv[1]);
	munmap(p, page_size());
	close(fd);
}

struct dma_race {
	int fd;
	uint32_t mr;
	uint8_t *buf;
	uint64_t len;
	int err;
	unsigned long rounds;
};

static void *dma_race_thread(void *arg)
{
	struct dma_race *r = arg;

	for (;;) {
		int ret = (r->rounds & 1) ?
			  peersim_dma_write(r->fd, r->mr, 0, r->buf, r->len) :
			  peersim_dma_read(r->fd, r->mr, 0, r->buf, r->len);

		if (ret) {
			r->err = errno;
			break;
		}
		r->rounds++;
	}
	return NULL;
}

/* DMA in flight while the MR is deregistered: it ends with ENOENT. */
static void dereg_during_dma(void)
{
	int fd = peersim_test_open();
	uint64_t len = 2 * MiB;
	uint8_t *p = map_anon(len, PROT_READ | PROT_WRITE);
	struct dma_race r = { .fd = fd, .len = len };
	pthread_t t[2];

	r.buf = malloc(len);
	CHECK(r.buf, "malloc");
	memset(r.buf, 0, len);
	for (int round = 0; round < 5; round++) {
		struct dma_race rr[2];

		r.mr = reg_gup(fd, p, len, PEERSIM_ACCESS_WRITE);
		for (int i = 0; i < 2; i++) {
			rr[i] = r;
			rr[i].rounds = i;
			CHECK(pthread_create(&t[i], NULL, dma_race_thread, &rr[i]) == 0, "thread");
		}
		usleep(20000 + round * 10000);
		CHECK_OK(peersim_dereg_mr(fd, r.mr));
		for (int i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			CHECK(rr[i].err == ENOENT, "DMA ended with %s", strerror(rr[i].err));
		}
	}
	free(r.buf);
	munmap(p, len);
	close(fd);
}

/* --- dma-buf MRs (ibv_reg_dmabuf_mr) ---------------------------------------- */

/* The dma-buf MR ioctl exists (skips on an older sp_peersim.ko). */
static void need_dmabuf_mr(int fd)
{
	struct peersim_reg_dmabuf_mr r = { .fd = -1 };

	if (ioctl(fd, PEERSIM_IOC_REG_DMABUF_MR, &r) && errno == ENOTTY)
		SKIP("sp_peersim.ko has no PEERSIM_IOC_REG_DMABUF_MR");
}

/*
 * Registers a whole buffer of an exporter, then: DMA writes are seen through
 * the exporter's CPU mapping, CPU writes come back through DMA reads.
 */
static void dmabuf_roundtrip(enum sp_exporter kind, uint32_t flags)
{
	int fd = peersim_test_open();
	uint64_t before = peersim_live_mrs(fd), len = MiB;
	struct peersim_mr_info mi;
	struct sp_xbuf x;
	uint32_t mr;

	need_dmabuf_mr(fd);
	sp_xbuf_new(kind, len, 0, &x);
	mr = peersim_reg_dmabuf(fd, x.fd, 0, len, PEERSIM_ACCESS_WRITE, flags);
	CHECK(peersim_live_mrs(fd) == before + 1, "live_mrs not counted");
	dma_roundtrip(fd, mr, x.map, len, 21 + flags);
	CHECK_OK(peersim_mr_info(fd, mr, &mi));
	CHECK(mi.free_callbacks == 0 && mi.invalidated_at_ns == 0,
	      "%u move_notify calls from %s", mi.free_callbacks, sp_exporter_name[kind]);
	tap_diag("%s, %s: %u segments", sp_exporter_name[kind],
		 flags & PEERSIM_DMABUF_PINNED ? "pinned" : "dynamic", mi.nents);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	CHECK(peersim_live_mrs(fd) == before, "live_mrs not decremented");
	sp_xbuf_free(&x);
	close(fd);
}

static void dmabuf_vgem_dynamic(void)
{
	dmabuf_roundtrip(SP_EXP_VGEM, 0);
}

static void dmabuf_vgem_pinned(void)
{
	dmabuf_roundtrip(SP_EXP_VGEM, PEERSIM_DMABUF_PINNED);
}

static void dmabuf_udmabuf_dynamic(void)
{
	dmabuf_roundtrip(SP_EXP_UDMABUF, 0);
}

static void dmabuf_udmabuf_pinned(void)
{
	dmabuf_roundtrip(SP_EXP_UDMABUF, PEERSIM_DMABUF_PINNED);
}

/* Offset and length need no alignment; DMA stays inside the range. */
static void dmabuf_unaligned(void)
{
	int fd = peersim_test_open();
	uint64_t len = 256 * 1024, off = 4096 + 123, n = 70001;
	uint8_t ones[2] = { 0xee, 0xee }, buf[16];
	struct sp_xbuf x;
	uint32_t mr, pmr;

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	memset(x.map, 0x11, len);
	for (int pinned = 0; pinned < 2; pinned++) {
		mr = peersim_reg_dmabuf(fd, x.fd, off, n, PEERSIM_ACCESS_WRITE,
					pinned ? PEERSIM_DMABUF_PINNED : 0);
		dma_roundtrip(fd, mr, x.map + off, n, 31 + pinned);
		x.map[off - 1] = 0x22;
		x.map[off + n] = 0x33;
		CHECK_OK(peersim_dma_write(fd, mr, 0, ones, 1));
		CHECK_OK(peersim_dma_write(fd, mr, n - 1, ones, 1));
		CHECK(x.map[off] == 0xee && x.map[off + n - 1] == 0xee, "ends not written");
		CHECK(x.map[off - 1] == 0x22 && x.map[off + n] == 0x33,
		      "DMA wrote outside the MR");
		CHECK_ERR(peersim_dma_write(fd, mr, n, ones, 1), EINVAL);
		CHECK_ERR(peersim_dma_read(fd, mr, n - 8, buf, 16), EINVAL);
		CHECK_OK(peersim_dereg_mr(fd, mr));
	}
	/* the last byte of the buffer, and a tail not ending on a page */
	mr = peersim_reg_dmabuf(fd, x.fd, len - 1, 1, PEERSIM_ACCESS_WRITE, 0);
	pmr = peersim_reg_dmabuf(fd, x.fd, 5, len - 10, 0, PEERSIM_DMABUF_PINNED);
	CHECK_OK(peersim_dma_write(fd, mr, 0, ones, 1));
	CHECK(x.map[len - 1] == 0xee, "last byte %#x", x.map[len - 1]);
	memset(buf, 0, sizeof(buf));
	CHECK_OK(peersim_dma_read(fd, pmr, len - 10 - 1, buf, 1));
	CHECK(buf[0] == x.map[len - 6], "read %#x, CPU sees %#x", buf[0], x.map[len - 6]);
	/* read-only MR: no DMA writes */
	CHECK_ERR(peersim_dma_write(fd, pmr, 0, ones, 1), EACCES);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	CHECK_OK(peersim_dereg_mr(fd, pmr));
	sp_xbuf_free(&x);
	close(fd);
}

static void dmabuf_bad_requests(void)
{
	int fd = peersim_test_open(), pfd[2];
	uint64_t len = 64 * 1024, before;
	struct peersim_reg_dmabuf_mr r;
	struct sp_xbuf x;

	need_dmabuf_mr(fd);
	before = peersim_live_mrs(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);

	/* beyond the dma-buf's size, empty, overflowing */
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, len + 1, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, len - 10, 11, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, len, 1, 0, PEERSIM_DMABUF_PINNED, NULL),
		  EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 0, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, UINT64_MAX - 10, 100, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 4096, UINT64_MAX, 0, 0, NULL), EINVAL);

	/* not a dma-buf, not open */
	CHECK_OK(pipe(pfd));
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, pfd[0], 0, 4096, 0, 0, NULL), EBADF);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, fd, 0, 4096, 0, 0, NULL), EBADF);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, -1, 0, 4096, 0, 0, NULL), EBADF);
	close(pfd[1]);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, pfd[1], 0, 4096, 0, 0, NULL), EBADF);
	close(pfd[0]);

	/* flags, access bits, reserved */
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 4096, 0, 1U << 1, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 4096, 0, 1U << 31, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 4096, 1U << 1, 0, NULL), EINVAL);
	r = (struct peersim_reg_dmabuf_mr){ .fd = x.fd, .length = 4096, .reserved = 1 };
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_DMABUF_MR, &r), EINVAL);
	/* an older, smaller struct is refused */
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x08, 16), &r), EINVAL);
	CHECK(peersim_live_mrs(fd) == before, "a refused request registered an MR");

	/* a bad output pointer: the registration is undone */
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_DMABUF_MR, (void *)8), EFAULT);
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	sp_xbuf_free(&x);
	close(fd);
}

/* The MR holds its own reference: closing the dma-buf fd changes nothing. */
static void dmabuf_fd_closed(void)
{
	int fd = peersim_test_open();
	uint64_t len = 128 * 1024;
	uint32_t mr[2];
	struct sp_xbuf x;
	uint8_t b;

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	mr[0] = peersim_reg_dmabuf(fd, x.fd, 0, len / 2, PEERSIM_ACCESS_WRITE, 0);
	mr[1] = peersim_reg_dmabuf(fd, x.fd, len / 2, len / 2, PEERSIM_ACCESS_WRITE,
				   PEERSIM_DMABUF_PINNED);
	close(x.fd);
	x.fd = -1;
	close(x.card);	/* the GEM handle goes too; the mapping stays */
	x.card = -1;
	dma_roundtrip(fd, mr[0], x.map, len / 2, 41);
	dma_roundtrip(fd, mr[1], x.map + len / 2, len / 2, 42);
	CHECK_OK(peersim_dereg_mr(fd, mr[0]));
	/* dereg of one leaves the other working */
	b = 0x5c;
	CHECK_OK(peersim_dma_write(fd, mr[1], 7, &b, 1));
	CHECK(x.map[len / 2 + 7] == 0x5c, "byte %#x", x.map[len / 2 + 7]);
	CHECK_OK(peersim_dereg_mr(fd, mr[1]));
	sp_xbuf_free(&x);
	close(fd);
}

/* After deregistration the dma-buf is the exporter's as before. */
static void dmabuf_dereg_then_usable(void)
{
	int fd = peersim_test_open();
	uint64_t len = 64 * 1024;
	struct peersim_mr_info mi;
	struct sp_xbuf x;
	uint32_t mr, n = 0;
	uint8_t b = 0;

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	for (int round = 0; round < 4; round++) {
		mr = peersim_reg_dmabuf(fd, x.fd, 0, len, PEERSIM_ACCESS_WRITE,
					round & 1 ? PEERSIM_DMABUF_PINNED : 0);
		CHECK_OK(peersim_dereg_mr(fd, mr));
		CHECK_ERR(peersim_dereg_mr(fd, mr), ENOENT);
		CHECK_ERR(peersim_dma_read(fd, mr, 0, &b, 1), ENOENT);
		CHECK_ERR(peersim_mr_info(fd, mr, &mi), ENOENT);
		CHECK_ERR(peersim_mr_segs(fd, mr, NULL, &n), ENOENT);
		/* CPU access through the exporter still works */
		memset(x.map, round, len);
		CHECK(x.map[len - 1] == round, "CPU write lost");
	}
	/* and a new registration sees the CPU's bytes */
	mr = peersim_reg_dmabuf(fd, x.fd, 0, len, 0, 0);
	CHECK_OK(peersim_dma_read(fd, mr, len - 1, &b, 1));
	CHECK(b == 3, "read %#x", b);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	sp_xbuf_free(&x);
	close(fd);
}

/* Closing the peersim fd deregisters its dma-buf MRs and drops the buffers. */
static void dmabuf_close_releases(void)
{
	int ctl = peersim_test_open(), fd = peersim_test_open();
	uint64_t len = 64 * 1024, before;
	long bufs_before, bufs_after;
	struct sp_xbuf x, u;
	int have_u = 0, status;
	pid_t pid;

	need_dmabuf_mr(ctl);
	before = peersim_live_mrs(ctl);
	bufs_before = sp_dmabuf_count();
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	for (int i = 0; i < 4; i++)
		peersim_reg_dmabuf(fd, x.fd, i * 4096 + i, 4096, PEERSIM_ACCESS_WRITE,
				   i & 1 ? PEERSIM_DMABUF_PINNED : 0);
	if (access("/dev/udmabuf", F_OK) == 0) {
		sp_xbuf_new(SP_EXP_UDMABUF, len, 0, &u);
		peersim_reg_dmabuf(fd, u.fd, 100, len - 200, 0, 0);
		have_u = 1;
	}
	CHECK(peersim_live_mrs(ctl) == before + 4 + have_u, "live_mrs %" PRIu64,
	      peersim_live_mrs(ctl));
	/* the MRs hold the buffers: closing our fds keeps them alive */
	sp_xbuf_free(&x);
	if (have_u)
		sp_xbuf_free(&u);
	close(fd);
	CHECK(peersim_live_mrs(ctl) == before, "close left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);
	bufs_after = sp_dmabuf_count();
	if (bufs_before >= 0)
		CHECK(bufs_after == bufs_before, "%ld dma-bufs before, %ld after",
		      bufs_before, bufs_after);
	else
		tap_diag("debugfs dma_buf/bufinfo not readable: buffer count not checked");

	/* a process that exits with dma-buf MRs registered */
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int cfd = open(PEERSIM_DEVICE_PATH, O_RDWR);
		struct sp_xbuf y;

		sp_xbuf_new(SP_EXP_VGEM, len, 0, &y);
		if (cfd < 0 ||
		    peersim_reg_dmabuf_mr(cfd, y.fd, 0, len, PEERSIM_ACCESS_WRITE, 0, NULL) ||
		    peersim_reg_dmabuf_mr(cfd, y.fd, 0, len, 0, PEERSIM_DMABUF_PINNED, NULL))
			_exit(3);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(peersim_live_mrs(ctl) == before, "exit left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);
	if (bufs_before >= 0)
		CHECK(sp_dmabuf_count() == bufs_before, "%ld dma-bufs before, %ld after exit",
		      bufs_before, sp_dmabuf_count());
	close(ctl);
}

/* DMA in flight while a dma-buf MR is deregistered: it ends with ENOENT. */
static void dmabuf_dereg_during_dma(void)
{
	int fd = peersim_test_open();
	uint64_t len = MiB;
	struct dma_race r = { .fd = fd, .len = len };
	struct sp_xbuf x;
	pthread_t t[2];

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	r.buf = malloc(len);
	CHECK(r.buf, "malloc");
	memset(r.buf, 0, len);
	for (int round = 0; round < 4; round++) {
		struct dma_race rr[2];

		r.mr = peersim_reg_dmabuf(fd, x.fd, 0, len, PEERSIM_ACCESS_WRITE,
					  round & 1 ? PEERSIM_DMABUF_PINNED : 0);
		for (int i = 0; i < 2; i++) {
			rr[i] = r;
			rr[i].rounds = i;
			CHECK(pthread_create(&t[i], NULL, dma_race_thread, &rr[i]) == 0, "thread");
		}
		usleep(20000 + round * 10000);
		CHECK_OK(peersim_dereg_mr(fd, r.mr));
		for (int i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			CHECK(rr[i].err == ENOENT, "DMA ended with %s", strerror(rr[i].err));
		}
	}
	free(r.buf);
	sp_xbuf_free(&x);
	close(fd);
}

/* --- privileges and limits --------------------------------------------------- */

static void drop_to_nobody(void)
{
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		_exit(10);
}

static void unprivileged_open_refused(void)
{
	int status;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to drop to nobody");
	if (access(PEERSIM_DEVICE_PATH, F_OK))
		SKIP("%s not present: sp_peersim.ko not loaded", PEERSIM_DEVICE_PATH);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		drop_to_nobody();
		if (open(PEERSIM_DEVICE_PATH, O_RDWR) >= 0)
			_exit(2);
		_exit(errno == EACCES ? 0 : 3);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/*
 * Without CAP_IPC_LOCK, pinned memory counts against RLIMIT_MEMLOCK as
 * ib_umem_get() counts it (ENOMEM beyond), and deregistration gives it back.
 */
static void memlock_limit(void)
{
	int fd = peersim_test_open();
	int status;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to drop to nobody");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct rlimit rl = { 16 * 4096, 16 * 4096 };
		uint8_t *q = mmap(NULL, MiB, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		struct peersim_reg_mr r1, r2;

		if (q == MAP_FAILED || setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(2);
		drop_to_nobody();
		if (!peersim_reg_mr(fd, q, MiB, PEERSIM_ACCESS_WRITE, NULL) || errno != ENOMEM)
			_exit(3);
		if (peersim_reg_mr(fd, q, 10 * 4096, PEERSIM_ACCESS_WRITE, &r1))
			_exit(4);
		/* 10 + 8 pages > 16 */
		if (!peersim_reg_mr(fd, q + MiB / 2, 8 * 4096, 0, NULL) || errno != ENOMEM)
			_exit(5);
		/* an unaligned 2-byte range spanning two pages counts 2 */
		if (peersim_reg_mr(fd, q + MiB / 2 + 4095, 2, 0, &r2))
			_exit(6);
		if (peersim_dereg_mr(fd, r1.handle))
			_exit(7);
		if (peersim_reg_mr(fd, q, 14 * 4096, 0, NULL))
			_exit(8);
		rl.rlim_cur = rl.rlim_max = 0;
		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(9);
		/* no memlock at all: can_do_mlock() fails first */
		if (!peersim_reg_mr(fd, q, 4096, 0, NULL) || errno != EPERM)
			_exit(11);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(fd);
}

/* --- clients (none needed) --------------------------------------------------- */

static void clients_match_sysfs(void)
{
	int fd = peersim_test_open();
	struct peersim_client list[16];
	struct peersim_info info;
	uint32_t n = 16, n0 = 0;
	unsigned int dirs = 0;
	int sysfs;
	DIR *d;

	CHECK_OK(peersim_info(fd, &info));
	CHECK_OK(peersim_clients(fd, NULL, &n0));
	CHECK(n0 == info.nclients, "CLIENTS count %u, INFO %u", n0, info.nclients);
	memset(list, 0, sizeof(list));
	CHECK_OK(peersim_clients(fd, list, &n));
	CHECK(n == n0, "count %u then %u", n0, n);
	sysfs = peersim_has_sysfs();
	CHECK(sysfs == 0 || sysfs == 1, "memory_peers_sysfs reads %d", sysfs);
	d = opendir(PEERSIM_SYSFS_PEERS);
	if (!sysfs) {
		/* a core built where mm_kobj is not exported (6.12, 7.x) */
		CHECK(!d && errno == ENOENT, "%s exists without sysfs (%s)", PEERSIM_SYSFS_PEERS,
		      d ? "opened" : strerror(errno));
		tap_diag("%u clients, no %s (as OFED's core on this kernel)", n,
			 PEERSIM_SYSFS_PEERS);
	} else if (!d) {
		CHECK(n == 0, "%u clients but no %s", n, PEERSIM_SYSFS_PEERS);
		tap_diag("no clients registered, %s absent", PEERSIM_SYSFS_PEERS);
	} else {
		struct dirent *e;

		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				dirs++;
		closedir(d);
		CHECK(dirs == n, "%u sysfs entries, %u clients", dirs, n);
	}
	for (uint32_t i = 0; i < n && i < 16; i++) {
		char vpath[192], ver[32] = "-";
		FILE *f;

		CHECK(memchr(list[i].name, 0, sizeof(list[i].name)), "name not terminated");
		if (sysfs) {
			snprintf(vpath, sizeof(vpath), "%s/%.64s/version", PEERSIM_SYSFS_PEERS,
				 list[i].name);
			f = fopen(vpath, "re");
			CHECK(f && fgets(ver, sizeof(ver), f), "%s", vpath);
			fclose(f);
			ver[strcspn(ver, "\n")] = '\0';
			CHECK(peersim_peer_stat(list[i].name, "num_alloc_mrs") >= 0,
			      "num_alloc_mrs");
		}
		tap_diag("client %u: %s version %.16s flags %#x, %u MRs, %" PRIu64 "/%" PRIu64
			 " claims", i, list[i].name, ver, list[i].flags, list[i].live_mrs,
			 (uint64_t)list[i].claims, (uint64_t)list[i].acquire_calls);
	}
	close(fd);
}

static const struct tap_case cases[] = {
	TAP_CASE(info_reports_abi),
	TAP_CASE(unknown_ioctls_enotty),
	TAP_CASE(ioctl_sizes),
	TAP_CASE(ioctl_sweep),
	TAP_CASE(bad_flags_and_reserved),
	TAP_CASE(reg_bad_ranges),
	TAP_CASE(unmapped_and_prot_none_refused),
	TAP_CASE(pfn_mapping_refused),
	TAP_CASE(gup_4k),
	TAP_CASE(gup_1m_unaligned),
	TAP_CASE_T(gup_segments, 120),
	TAP_CASE(read_only_mr),
	TAP_CASE(dma_bounds),
	TAP_CASE(dereg_then_use),
	TAP_CASE(handles_per_fd),
	TAP_CASE(close_frees_all),
	TAP_CASE(fd_passing),
	TAP_CASE_T(dereg_during_dma, 120),
	TAP_CASE(unprivileged_open_refused),
	TAP_CASE(memlock_limit),
	TAP_CASE(clients_match_sysfs),
	TAP_CASE(dmabuf_vgem_dynamic),
	TAP_CASE(dmabuf_vgem_pinned),
	TAP_CASE(dmabuf_udmabuf_dynamic),
	TAP_CASE(dmabuf_udmabuf_pinned),
	TAP_CASE(dmabuf_unaligned),
	TAP_CASE(dmabuf_bad_requests),
	TAP_CASE(dmabuf_fd_closed),
	TAP_CASE(dmabuf_dereg_then_usable),
	TAP_CASE(dmabuf_close_releases),
	TAP_CASE_T(dmabuf_dereg_during_dma, 120),
};

TAP_MAIN(cases)
