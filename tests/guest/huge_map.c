// SPDX-License-Identifier: MIT
/*
 * Huge mappings: a buffer's 2 MiB pages are mapped with one PMD entry each
 * where the kernel lets a driver do that (vmf_insert_folio_pmd(), 6.15+),
 * with 4 KiB entries elsewhere; every mapping starts so that address and
 * buffer offset agree modulo 2 MiB; and the data, the module's accounting
 * and the node's free memory stay right through every way a mapping
 * changes - refault after MADV_DONTNEED, a split by partial munmap,
 * mprotect or MADV_DONTNEED, fork, GUP by ibv_reg_mr, the dma-buf's mmap.
 *
 * What to expect is decided from the kernel, not from the module: huge
 * when /proc/kallsyms has vmf_insert_folio_pmd and transparent huge pages
 * are not "never".
 */
#include "sp_test.h"

#include <infiniband/verbs.h>
#include <linux/types.h>

/* PAGEMAP_SCAN where the headers predate it */
#include "../../user/compat/pagemap_scan.h"

static bool thp_never(void)
{
	char line[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");

	if (!f)
		return true;	/* no THP in this kernel */
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	return strstr(line, "[never]") != NULL;
}

/* Should 2 MiB pages be PMD-mapped on this kernel? */
static bool expect_huge(void)
{
	return sp_kernel_has("vmf_insert_folio_pmd") && !thp_never();
}

/* Bytes of [p, p + len) that PAGEMAP_SCAN reports as huge; -1: no ioctl. */
static int64_t scan_huge(const void *p, uint64_t len)
{
	struct page_region r[64];
	struct pm_scan_arg a = {
		.size = sizeof(a), .start = (uintptr_t)p, .end = (uintptr_t)p + len,
		.vec = (uintptr_t)r, .vec_len = 64,
		.category_mask = PAGE_IS_HUGE, .return_mask = PAGE_IS_HUGE,
	};
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int64_t bytes = 0;
	long n;

	CHECK(fd >= 0, "pagemap: %s", strerror(errno));
	n = ioctl(fd, PAGEMAP_SCAN, &a);
	close(fd);
	if (n < 0 && (errno == ENOTTY || errno == EINVAL))
		return -1;
	CHECK(n >= 0, "PAGEMAP_SCAN: %s", strerror(errno));
	for (long i = 0; i < n; i++)
		bytes += (int64_t)(r[i].end - r[i].start);
	return bytes;
}

/* One write per 4 KiB page: faults every page of the range in. */
static void touch(uint8_t *p, uint64_t len)
{
	for (uint64_t off = 0; off < len; off += 4096)
		p[off] = p[off];
}

/*
 * The huge-mapped bytes of the mapping (its whole VMA for smaps, [p, p +
 * len) for PAGEMAP_SCAN) lie in [lo, hi] where the kernel PMD-maps buffers,
 * and are 0 elsewhere.
 */
static void check_pmd_range(const uint8_t *p, uint64_t len, uint64_t lo, uint64_t hi)
{
	bool huge = expect_huge();
	uint64_t got = sp_smaps_field(p, "FilePmdMapped");
	int64_t scanned = scan_huge(p, len);

	if (!huge)
		lo = hi = 0;
	CHECK(got >= lo && got <= hi, "FilePmdMapped %llu KiB, expected %llu..%llu KiB (%s)",
	      (unsigned long long)got >> 10, (unsigned long long)lo >> 10,
	      (unsigned long long)hi >> 10,
	      huge ? "kernel has vmf_insert_folio_pmd" : "4 KiB path");
	if (scanned >= 0)
		CHECK((uint64_t)scanned >= lo && (uint64_t)scanned <= hi,
		      "PAGEMAP_SCAN: %lld huge bytes, expected %llu..%llu", (long long)scanned,
		      (unsigned long long)lo, (unsigned long long)hi);
}

static void check_pmd_mapped(const uint8_t *p, uint64_t len, uint64_t huge_bytes)
{
	check_pmd_range(p, len, huge_bytes, huge_bytes);
}

/* 2 MiB slots of a mapping that are one aligned physical 2 MiB page. */
static uint64_t physically_huge(const uint8_t *p, uint64_t len)
{
	uint64_t n = 0;

	for (uint64_t off = 0; off + HUGE_SZ <= len; off += HUGE_SZ) {
		uint64_t pfn = sp_pfn(p + off);
		bool ok = pfn && pfn % 512 == 0;

		for (uint64_t i = 1; ok && i < 512; i++)
			ok = sp_pfn(p + off + i * 4096) == pfn + i;
		n += ok;
	}
	return n * HUGE_SZ;
}

/* Frees back what a case took: nothing pinned, node memory returned. */
#define CHECK_MEMORY_BACK(free0)						\
	do {									\
		CHECK_NOTHING_PINNED();						\
		CHECK(sp_free_bytes(-1) + 16 * MiB >= (free0),			\
		      "free memory %llu MiB, was %llu MiB: pages leaked",	\
		      (unsigned long long)(sp_free_bytes(-1) / MiB),		\
		      (unsigned long long)((free0) / MiB));			\
	} while (0)

static void mappings_are_2mib_aligned(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a, b;
	uint8_t *p, *q;

	CHECK_OK(sp_raw_alloc(fd, 16 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	CHECK_OK(sp_raw_alloc(fd, 8 * MiB + 12 * 1024, STRIXPEER_NODE_DEFAULT, 0, &b));
	for (int i = 0; i < 8; i++) {
		p = sp_raw_map(fd, &a);
		CHECK((uintptr_t)p % HUGE_SZ == 0, "mapping %d at %p", i, (void *)p);
		if (i < 7)
			munmap(p, a.size);
		q = sp_raw_map(fd, &b);
		CHECK((uintptr_t)q % HUGE_SZ == 0, "mapping %d of the mixed buffer at %p", i,
		      (void *)q);
		munmap(q, b.size);
	}
	/* A mapping from buffer offset 2 MiB + 4 KiB: congruent modulo 2 MiB. */
	q = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)(a.mmap_offset + HUGE_SZ + 4096));
	CHECK(q != MAP_FAILED, "mmap at an offset: %s", strerror(errno));
	CHECK((uintptr_t)q % HUGE_SZ == 4096, "offset mapping at %p", (void *)q);
	munmap(q, 4 * MiB);
	munmap(p, a.size);
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void huge_pages_mapped_huge(void)
{
	uint64_t free0 = sp_free_bytes(-1);
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 64 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 11);
	check_pmd_mapped(p, a.size, a.size);
	CHECK(sp_verify(p, a.size, 0, 11) < 0, "data");
	for (uint64_t off = 0; off < a.size; off += HUGE_SZ) {
		uint64_t pfn = sp_pfn(p + off);

		CHECK(pfn && pfn % 512 == 0 && sp_pfn(p + off + HUGE_SZ - 4096) == pfn + 511,
		      "2 MiB page at %llu is not one aligned physical page",
		      (unsigned long long)off);
	}
	tap_diag("64 MiB buffer: FilePmdMapped %llu MiB, PAGEMAP_SCAN huge %lld bytes",
		 (unsigned long long)(sp_smaps_field(p, "FilePmdMapped") / MiB),
		 (long long)scan_huge(p, a.size));
	munmap(p, a.size);
	close(fd);
	CHECK_MEMORY_BACK(free0);
}

/* 2 MiB pages first, 4 KiB tail: the head huge, the tail 4 KiB, data right. */
static void mixed_buffer_head_huge_tail_small(void)
{
	uint64_t free0 = sp_free_bytes(-1);
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_info info = { 0 };
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 6 * MiB + 12 * 1024, STRIXPEER_NODE_DEFAULT, 0, &a));
	info.handle = a.handle;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info));
	CHECK(info.page_size == 4096, "page size %llu", (unsigned long long)info.page_size);
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 12);
	/* 2 MiB pages come first; physically aligned runs may also be smaller ones */
	check_pmd_range(p, a.size, HUGE_SZ, physically_huge(p, a.size));
	CHECK(sp_verify(p, a.size, 0, 12) < 0, "data");
	munmap(p, a.size);
	close(fd);
	CHECK_MEMORY_BACK(free0);
}

/*
 * MADV_DONTNEED of whole 2 MiB pages and of 4 KiB inside one (a PMD split),
 * munmap of 4 KiB inside one, mprotect of part of one: the data stays, the
 * zapped ranges refault (whole pages huge again), nothing leaks.
 */
static void split_zap_refault_keep_data(void)
{
	uint64_t free0 = sp_free_bytes(-1);
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 16 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 13);
	check_pmd_mapped(p, a.size, a.size);

	CHECK_OK(madvise(p, 4 * MiB, MADV_DONTNEED));
	CHECK(sp_verify(p, a.size, 0, 13) < 0, "data after MADV_DONTNEED + refault");
	check_pmd_mapped(p, a.size, a.size);

	/* 4 KiB out of the third 2 MiB page: the PMD is split, the rest refaults 4 KiB. */
	CHECK_OK(madvise(p + 4 * MiB + 8192, 4096, MADV_DONTNEED));
	CHECK(sp_verify(p, a.size, 0, 13) < 0, "data after a split");
	/* a split file PMD is zapped: the refault may map that page huge again */
	check_pmd_range(p, a.size, a.size - HUGE_SZ, a.size);

	/* mprotect of half of the fourth page splits its PMD and the VMA. */
	CHECK_OK(mprotect(p + 6 * MiB, MiB, PROT_READ));
	CHECK(sp_verify(p + 6 * MiB, 2 * MiB, 6 * MiB, 13) < 0, "data after mprotect");
	CHECK_OK(mprotect(p + 6 * MiB, MiB, PROT_READ | PROT_WRITE));

	/* A 4 KiB hole in the fifth page: two VMAs around it keep the data. */
	CHECK_OK(munmap(p + 8 * MiB + 4096, 4096));
	CHECK(sp_verify(p, 8 * MiB + 4096, 0, 13) < 0, "data before the hole");
	CHECK(sp_verify(p + 8 * MiB + 8192, a.size - 8 * MiB - 8192, 8 * MiB + 8192, 13) < 0,
	      "data after the hole");
	touch(p + 10 * MiB, 6 * MiB);
	check_pmd_mapped(p + 10 * MiB, 6 * MiB, 6 * MiB);

	CHECK_OK(munmap(p, 8 * MiB + 4096));
	CHECK_OK(munmap(p + 8 * MiB + 8192, a.size - 8 * MiB - 8192));
	close(fd);
	CHECK_MEMORY_BACK(free0);
}

/* A forked child faults the shared pages in itself: same bytes both ways. */
static void fork_shares_huge_pages(void)
{
	uint64_t free0 = sp_free_bytes(-1);
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	uint8_t *p;
	int status;
	pid_t pid;

	CHECK_OK(sp_raw_alloc(fd, 8 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 14);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		if (sp_verify(p, a.size, 0, 14) >= 0)
			_exit(2);
		if (sp_smaps_field(p, "FilePmdMapped") != (expect_huge() ? a.size : 0))
			_exit(3);
		sp_fill(p, a.size, 0, 15);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "child");
	CHECK(WEXITSTATUS(status) != 2, "child read other bytes");
	CHECK(WEXITSTATUS(status) != 3, "child's mapping not huge as expected");
	CHECK(WEXITSTATUS(status) == 0, "child exit %d", WEXITSTATUS(status));
	CHECK(sp_verify(p, a.size, 0, 15) < 0, "parent does not see the child's bytes");
	munmap(p, a.size);
	close(fd);
	CHECK_MEMORY_BACK(free0);
}

/*
 * ibv_reg_mr (GUP with FOLL_LONGTERM) on a huge mapping it has never
 * touched: GUP faults the 2 MiB pages in huge; the MR outlives the buffer's
 * handle and mapping, and its pins give the memory back at deregistration.
 */
static void ibv_reg_mr_pins_huge_pages(void)
{
	uint64_t free0 = sp_free_bytes(-1);
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct strixpeer_buf_alloc a;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *p;
	int fd;

	for (int i = 0; list && list[i] && !ctx; i++)
		ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		SKIP("no verbs device (Soft-RoCE not set up)");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "pd");
	fd = sp_test_open();
	CHECK_OK(sp_raw_alloc(fd, 32 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	p = sp_raw_map(fd, &a);
	mr = ibv_reg_mr(pd, p, a.size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	check_pmd_mapped(p, a.size, a.size);
	/* MADV_DONTNEED under a live MR: the pages stay pinned, the refault maps them again. */
	CHECK_OK(madvise(p, a.size, MADV_DONTNEED));
	sp_fill(p, a.size, 0, 16);
	CHECK(sp_verify(p, a.size, 0, 16) < 0, "data");
	munmap(p, a.size);
	CHECK_OK(sp_raw_free(fd, a.handle));
	CHECK(sp_test_stats().buffers == 0, "buffer not released");
	CHECK_OK(ibv_dereg_mr(mr));
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	close(fd);
	CHECK_MEMORY_BACK(free0);
}

/* The dma-buf's mmap at a 2 MiB-aligned address maps huge too. */
static void dmabuf_mmap_huge(void)
{
	uint64_t free0 = sp_free_bytes(-1);
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_export e = { 0 };
	uint8_t *p, *res, *q;

	CHECK_OK(sp_raw_alloc(fd, 8 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 17);
	e.handle = a.handle;
	e.flags = STRIXPEER_EXPORT_RDWR | STRIXPEER_EXPORT_CLOEXEC;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e));
	/* dma-buf files place mappings as they like: choose an aligned spot. */
	res = mmap(NULL, a.size + HUGE_SZ, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(res != MAP_FAILED, "reserve");
	q = (uint8_t *)(((uintptr_t)res + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
	CHECK(mmap(q, a.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, e.fd, 0) == q,
	      "dma-buf mmap: %s", strerror(errno));
	CHECK(sp_verify(q, a.size, 0, 17) < 0, "dma-buf mapping shows other bytes");
	check_pmd_mapped(q, a.size, a.size);
	sp_fill(q + MiB, MiB, MiB, 18);
	CHECK(sp_verify(p + MiB, MiB, MiB, 18) < 0, "buffer mapping misses the dma-buf's writes");
	munmap(res, a.size + HUGE_SZ);
	munmap(p, a.size);
	close(e.fd);
	close(fd);
	CHECK_MEMORY_BACK(free0);
}

/* The page size reported is one the module advertises, and the real one. */
static void page_size_is_advertised(void)
{
	static const struct {
		uint64_t size;
		uint32_t flags;
		uint64_t page;
	} c[] = {
		{ 4096, 0, 4096 },
		{ 4097, 0, 4096 },
		{ 3 * MiB, 0, 4096 },
		{ 1, STRIXPEER_ALLOC_HUGE_ONLY, HUGE_SZ },
		{ 4 * MiB, STRIXPEER_ALLOC_HUGE_ONLY, HUGE_SZ },
	};
	struct strixpeer_version v = { 0 };
	int fd = sp_test_open();

	CHECK_OK(ioctl(fd, STRIXPEER_IOC_VERSION, &v));
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct strixpeer_buf_alloc a;
		struct strixpeer_buf_info info = { 0 };

		CHECK_OK(sp_raw_alloc(fd, c[i].size, STRIXPEER_NODE_DEFAULT, c[i].flags, &a));
		info.handle = a.handle;
		CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info));
		CHECK(info.page_size == c[i].page, "%llu bytes: page size %llu, expected %llu",
		      (unsigned long long)c[i].size, (unsigned long long)info.page_size,
		      (unsigned long long)c[i].page);
		CHECK(v.page_sizes & info.page_size, "page size %llu not in page_sizes %#llx",
		      (unsigned long long)info.page_size, (unsigned long long)v.page_sizes);
		CHECK_OK(sp_raw_free(fd, a.handle));
	}
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* Allocation errors name their real cause. */
static void alloc_errors_name_the_cause(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *b;

	CHECK(sp_buf_alloc(dev, 4096, SP_NODE_DEFAULT, SP_ALLOC_HUGE_ONLY | SP_ALLOC_ALLOW_SMALL,
			   &b) == -EINVAL, "contradictory flags accepted");
	CHECK(strstr(sp_errmsg(), "SP_ALLOC_HUGE_ONLY and SP_ALLOC_ALLOW_SMALL"), "message: %s",
	      sp_errmsg());
	CHECK(sp_buf_alloc(dev, 0, SP_NODE_DEFAULT, 0, &b) == -EINVAL, "size 0 accepted");
	CHECK(strstr(sp_errmsg(), "0 bytes"), "message: %s", sp_errmsg());
	CHECK(sp_buf_alloc(dev, 4096, 63, 0, &b) == -EINVAL, "node 63 accepted");
	CHECK(strstr(sp_errmsg(), "node 63"), "message: %s", sp_errmsg());
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static const struct tap_case cases[] = {
	TAP_CASE(page_size_is_advertised),
	TAP_CASE(alloc_errors_name_the_cause),
	TAP_CASE(mappings_are_2mib_aligned),
	TAP_CASE(huge_pages_mapped_huge),
	TAP_CASE(mixed_buffer_head_huge_tail_small),
	TAP_CASE(split_zap_refault_keep_data),
	TAP_CASE(fork_shares_huge_pages),
	TAP_CASE_T(ibv_reg_mr_pins_huge_pages, 120),
	TAP_CASE(dmabuf_mmap_huge),
};

TAP_MAIN(cases)
