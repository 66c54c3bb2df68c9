// SPDX-License-Identifier: MIT
/*
 * Backing: a buffer really gets the pages it reports - 2 MiB pages
 * (checked through /proc/self/pagemap), smaller ones only when allowed,
 * on the NUMA node asked for (checked with move_pages(2) and the node's
 * MemFree) - and a request that cannot be met fails cleanly.
 */
#include "sp_test.h"

#include <sys/syscall.h>

static struct strixpeer_buf_info query(int fd, uint32_t handle)
{
	struct strixpeer_buf_info info = { .handle = handle };

	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info));
	return info;
}

/*
 * Faults every page of a mapping in: where the kernel PMD-maps buffers
 * (6.15+) mappings are populated on first access, not at mmap time.
 */
static void touch_pages(const uint8_t *p, uint64_t size)
{
	for (uint64_t off = 0; off < size; off += 4096)
		(void)*(const volatile uint8_t *)(p + off);
}

/* Every 2 MiB of the mapping is one physically contiguous, aligned page. */
static void check_huge_physical(const uint8_t *p, uint64_t size)
{
	const uint64_t per = HUGE_SZ / 4096;

	touch_pages(p, size);
	for (uint64_t off = 0; off < size; off += HUGE_SZ) {
		uint64_t first = sp_pfn(p + off);

		CHECK(first != 0, "page at %llu not present", (unsigned long long)off);
		CHECK(first % per == 0, "pfn 0x%llx at %llu not 2 MiB aligned",
		      (unsigned long long)first, (unsigned long long)off);
		for (uint64_t i = 1; i < per; i += 37)
			CHECK(sp_pfn(p + off + i * 4096) == first + i, "not contiguous at %llu",
			      (unsigned long long)(off + i * 4096));
		CHECK(sp_pfn(p + off + (per - 1) * 4096) == first + per - 1, "last page");
	}
}

static void huge_pages_when_fresh(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_info info;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 64 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	info = query(fd, a.handle);
	CHECK(info.page_size == HUGE_SZ, "page size %llu", (unsigned long long)info.page_size);
	CHECK(info.nr_chunks >= 1 && info.nr_chunks <= 32, "chunks %u", info.nr_chunks);
	p = sp_raw_map(fd, &a);
	check_huge_physical(p, a.size);
	tap_diag("64 MiB buffer: %u physically contiguous chunks", info.nr_chunks);
	close(fd);
	munmap(p, a.size);
	CHECK_NOTHING_PINNED();
}

/* Without a flag, 2 MiB pages are used first, and smaller ones for the tail. */
static void huge_first_then_smaller(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_info info;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 8 * MiB + 12 * 1024, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK(a.size == 8 * MiB + 12 * 1024, "size %llu", (unsigned long long)a.size);
	info = query(fd, a.handle);
	CHECK(info.page_size < HUGE_SZ, "tail pages are smaller: %llu",
	      (unsigned long long)info.page_size);
	p = sp_raw_map(fd, &a);
	check_huge_physical(p, 8 * MiB);
	close(fd);
	munmap(p, a.size);

	fd = sp_test_open();
	CHECK_OK(sp_raw_alloc(fd, 4096, STRIXPEER_NODE_DEFAULT, 0, &a));
	info = query(fd, a.handle);
	CHECK(info.page_size == 4096 && info.nr_chunks == 1, "4 KiB buffer");
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void huge_only_rounds_up(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;

	CHECK_OK(sp_raw_alloc(fd, 1, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	CHECK(a.size == HUGE_SZ, "size %llu", (unsigned long long)a.size);
	CHECK(query(fd, a.handle).page_size == HUGE_SZ, "page size");
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void require_huge_default(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;

	CHECK_OK(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK(a.size == HUGE_SZ, "require_huge did not apply: %llu", (unsigned long long)a.size);
	CHECK_OK(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_ALLOW_SMALL, &a));
	CHECK(a.size == MiB, "ALLOW_SMALL did not override: %llu", (unsigned long long)a.size);
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void require_huge_param(void)
{
	with_param("require_huge", "Y", require_huge_default);
}

/* More 2 MiB pages than the node has: ENOMEM, and nothing kept. */
static void huge_unavailable_enomem(void)
{
	int fd = sp_test_open();
	uint64_t free0 = sp_free_bytes(0), total0 = sp_meminfo(0, "MemTotal");
	struct sp_stats before = sp_test_stats();
	struct sp_dev *dev;
	struct sp_buf *b;
	uint64_t want = (total0 + 64 * MiB) & ~(HUGE_SZ - 1);

	CHECK_ERR(sp_raw_alloc(fd, want, 0, STRIXPEER_ALLOC_HUGE_ONLY, NULL), ENOMEM);
	CHECK(sp_test_stats().fail_nomem == before.fail_nomem + 1, "fail_nomem not counted");
	CHECK_NOTHING_PINNED();
	CHECK(sp_free_bytes(0) + 32 * MiB >= free0, "node 0 free %llu MiB, was %llu MiB",
	      (unsigned long long)(sp_free_bytes(0) / MiB), (unsigned long long)(free0 / MiB));
	close(fd);

	dev = sp_test_dev();
	CHECK(sp_buf_alloc(dev, want, 0, SP_ALLOC_HUGE_ONLY, &b) == -ENOMEM, "library");
	CHECK(strstr(sp_errmsg(), "node 0"), "message: %s", sp_errmsg());
	sp_dev_close(dev);
}

#define FPA "/sys/kernel/debug/fail_page_alloc/"

/* Fault injection refuses every order >= 9 allocation of this task. */
static void huge_refused_by_fault_injection(void)
{
	struct strixpeer_buf_alloc a;
	int fd;

	if (access(FPA "probability", W_OK) != 0)
		SKIP("kernel has no fail_page_alloc (CONFIG_FAIL_PAGE_ALLOC); the debug kernel runs this");
	fd = sp_test_open();
	CHECK(sp_write_file(FPA "min-order", "9") && sp_write_file(FPA "ignore-gfp-wait", "N") &&
	      sp_write_file(FPA "ignore-gfp-highmem", "N") && sp_write_file(FPA "task-filter", "Y") &&
	      sp_write_file(FPA "verbose", "0") && sp_write_file(FPA "interval", "1") &&
	      sp_write_file(FPA "times", "-1") && sp_write_file(FPA "probability", "100"),
	      "configure fail_page_alloc");
	CHECK(sp_write_file("/proc/self/make-it-fail", "1"), "make-it-fail");

	CHECK_ERR(sp_raw_alloc(fd, 8 * MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, NULL),
		  ENOMEM);
	CHECK_NOTHING_PINNED();
	CHECK_OK(sp_raw_alloc(fd, 8 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK(query(fd, a.handle).page_size < HUGE_SZ, "got 2 MiB pages despite injection");

	CHECK(sp_write_file("/proc/self/make-it-fail", "0"), "make-it-fail");
	sp_write_file(FPA "probability", "0");
	close(fd);
	CHECK_NOTHING_PINNED();
}

static int node_count(void)
{
	int n = 0;
	char path[64];

	for (int i = 0; i < 64; i++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", i);
		if (access(path, R_OK) == 0 && sp_meminfo(i, "MemTotal") > 0)
			n = i + 1;
	}
	return n;
}

static void numa_placement(void)
{
	int nodes = node_count();

	if (nodes < 2)
		SKIP("guest has %d NUMA node(s); boot with two (qemu -numa) to test placement", nodes);
	for (int node = 0; node < nodes; node++) {
		int fd = sp_test_open();
		struct strixpeer_buf_alloc a;
		uint64_t free_before = sp_free_bytes(node);
		enum { NPAGES = 32 * 256 };
		static void *pages[NPAGES];
		static int status[NPAGES];
		uint8_t *p;

		CHECK_OK(sp_raw_alloc(fd, 32 * MiB, (uint32_t)node, 0, &a));
		CHECK(query(fd, a.handle).node == (uint32_t)node, "reported node");
		CHECK(sp_free_bytes(node) + 28 * MiB <= free_before,
		      "node %d free memory did not drop", node);
		p = sp_raw_map(fd, &a);
		touch_pages(p, a.size);
		for (int i = 0; i < NPAGES; i++) {
			pages[i] = p + (uint64_t)i * 4096;
			status[i] = -1;
		}
		CHECK(syscall(SYS_move_pages, 0, NPAGES, pages, NULL, status, 0) == 0,
		      "move_pages: %s", strerror(errno));
		for (int i = 0; i < NPAGES; i++)
			CHECK(status[i] == node, "page %d on node %d, wanted %d", i, status[i], node);
		munmap(p, a.size);
		close(fd);
	}
	CHECK_NOTHING_PINNED();
}

static void default_node_alloc(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;

	CHECK_OK(sp_raw_alloc(fd, 4 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK(query(fd, a.handle).node == 1, "default_node=1 not used");
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void default_node_param(void)
{
	if (node_count() < 2)
		SKIP("guest has one NUMA node");
	with_param("default_node", "1", default_node_alloc);
}

static const struct tap_case cases[] = {
	TAP_CASE(huge_pages_when_fresh),
	TAP_CASE(huge_first_then_smaller),
	TAP_CASE(huge_only_rounds_up),
	TAP_CASE(require_huge_param),
	TAP_CASE_T(huge_unavailable_enomem, 120),
	TAP_CASE(huge_refused_by_fault_injection),
	TAP_CASE(numa_placement),
	TAP_CASE(default_node_param),
};

TAP_MAIN(cases)
