// SPDX-License-Identifier: MIT
/*
 * The memory kinds strixpeerctl bench compares, as a table of operations
 * (perftest's memory_ctx): how a kind is allocated and mapped, registered
 * with an HCA, freed, and what its mapping looks like to the CPU. Adding
 * a kind is one more entry; the rest of the bench only walks the table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <linux/types.h>

#include "strixpeer.h"
#include "bench_int.h"
#include "drm/spdrm.h"

#define MiB		((uint64_t)1024 * 1024)
#define HUGE_SZ		(2 * MiB)

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB	(21 << 26)
#endif

/* PAGEMAP_SCAN where the headers predate it */
#include "../compat/pagemap_scan.h"

/* mmap @len bytes at a 2 MiB-aligned address of a reserved range. */
static uint8_t *sp_reserve_aligned(size_t len, uint8_t **base, size_t *map_len)
{
	uint8_t *p = mmap(NULL, len + HUGE_SZ, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	*base = p;
	*map_len = len + HUGE_SZ;
	return (uint8_t *)(((uintptr_t)p + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
}

/* --- allocation ------------------------------------------------------------ */

static int sp_mem_strixpeer_alloc(struct sp_dev *dev, struct sp_bench_mem *m)
{
	int ret = sp_bench_lib(sp_buf_alloc(dev, m->size, SP_NODE_DEFAULT, 0, &m->buf));

	if (!ret)
		m->addr = sp_buf_addr(m->buf);
	return ret;
}

static int sp_mem_anon(struct sp_bench_mem *m, int advice)
{
	uint8_t *a = sp_reserve_aligned(m->size, &m->base, &m->map_len);

	if (!a)
		return sp_bench_fail(errno, "mmap of %zu bytes: %s", m->size, strerror(errno));
	if (mmap(a, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0) == MAP_FAILED || madvise(a, m->size, advice) < 0) {
		int err = errno;

		munmap(m->base, m->map_len);
		m->base = NULL;
		return sp_bench_fail(err, "anonymous mapping of %zu bytes: %s", m->size,
				     strerror(err));
	}
	m->addr = a;
	return 0;
}

static int sp_mem_malloc_alloc(struct sp_dev *dev, struct sp_bench_mem *m)
{
	(void)dev;
	return sp_mem_anon(m, MADV_NOHUGEPAGE);
}

static int sp_mem_thp_alloc(struct sp_dev *dev, struct sp_bench_mem *m)
{
	(void)dev;
	return sp_mem_anon(m, MADV_HUGEPAGE);
}

static int sp_mem_hugetlb_alloc(struct sp_dev *dev, struct sp_bench_mem *m)
{
	size_t len = (m->size + HUGE_SZ - 1) & ~(size_t)(HUGE_SZ - 1);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);

	(void)dev;
	if (p == MAP_FAILED) {
		int err = errno;

		if (err == ENOMEM)
			return sp_bench_fail(err, "not enough free 2 MiB hugetlb pages for %zu bytes (/proc/sys/vm/nr_hugepages)",
					     len);
		return sp_bench_fail(err, "MAP_HUGETLB mapping of %zu bytes: %s", len,
				     strerror(err));
	}
	m->base = m->addr = p;
	m->map_len = len;
	return 0;
}

/* A strixpeer buffer's dma-buf, mapped from the dma-buf fd and imported. */
static int sp_mem_dmabuf_alloc(struct sp_dev *dev, struct sp_bench_mem *m)
{
	size_t len;
	uint8_t *a;
	int ret;

	ret = sp_bench_lib(sp_buf_alloc(dev, m->size, SP_NODE_DEFAULT, SP_ALLOC_UNMAPPED,
					&m->buf));
	if (ret)
		return ret;
	len = sp_buf_size(m->buf);
	ret = sp_bench_lib(sp_buf_export(m->buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC,
					 &m->dmabuf_fd));
	if (ret)
		return ret;
	/* dma-buf files place mappings anywhere: choose a 2 MiB-aligned spot */
	a = sp_reserve_aligned(len, &m->base, &m->map_len);
	if (!a)
		return sp_bench_fail(errno, "mmap reserve: %s", strerror(errno));
	if (mmap(a, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, m->dmabuf_fd, 0) ==
	    MAP_FAILED)
		return sp_bench_fail(errno, "mmap of the dma-buf: %s", strerror(errno));
	m->addr = a;
	return sp_bench_lib(sp_import_dmabuf(dev, m->dmabuf_fd, 0, len, a, &m->imp));
}

/*
 * A GPU buffer object as ROCm maps one: a DRM dumb buffer on the first card
 * whose driver the module claims (claim_gem_drivers: amdgpu on a node, vgem
 * in the test VM), mapped through the card's GEM mmap (user/drm/spdrm.h).
 * Registered by sp_reg_mr(), which turns the mapping into the BO's dma-buf.
 */
#define SP_CLAIM_PARAM	"/sys/module/strixpeer/parameters/claim_gem_drivers"

static int sp_mem_gpu_alloc(struct sp_dev *dev, struct sp_bench_mem *m)
{
	char claim[256] = "", drv[64] = "";
	FILE *f = fopen(SP_CLAIM_PARAM, "re");
	uint64_t offset = 0;
	uint8_t *a;

	(void)dev;
	if (!f || !fgets(claim, sizeof(claim), f)) {
		if (f)
			fclose(f);
		return sp_bench_fail(ENOENT, "cannot read %s (strixpeer not loaded?)",
				     SP_CLAIM_PARAM);
	}
	fclose(f);
	claim[strcspn(claim, "\n")] = 0;
	m->card = sp_drm_find("card", 0, claim, drv, sizeof(drv));
	if (m->card < 0)
		return sp_bench_fail(ENODEV, "no /dev/dri/card* of a driver in claim_gem_drivers (%s)",
				     claim[0] ? claim : "empty");
	/* 4 KiB rows: any driver's pitch alignment holds */
	if (sp_drm_dumb_create(m->card, m->size, 4096, &m->gem, NULL))
		return sp_bench_fail(errno, "%s: a dumb buffer of %zu bytes: %s", drv, m->size,
				     strerror(errno));
	if (sp_drm_dumb_offset(m->card, m->gem, &offset))
		return sp_bench_fail(errno, "%s: the buffer's mmap offset: %s", drv, strerror(errno));
	a = sp_reserve_aligned(m->size, &m->base, &m->map_len);
	if (!a)
		return sp_bench_fail(errno, "mmap reserve: %s", strerror(errno));
	if (mmap(a, m->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, m->card,
		 (off_t)offset) == MAP_FAILED)
		return sp_bench_fail(errno, "%s: mmap of the buffer: %s", drv, strerror(errno));
	m->addr = a;
	return 0;
}

/* --- registration ---------------------------------------------------------- */

static int sp_mem_plain_reg(struct sp_dev *dev, struct ibv_pd *pd, struct sp_bench_mem *m,
			    int access)
{
	(void)dev;
	m->mr = ibv_reg_mr(pd, m->addr, m->size, access);
	if (!m->mr)
		return sp_bench_fail(errno, "ibv_reg_mr of %zu bytes (%s): %s", m->size,
				     sp_bench_kind_name(m->kind), strerror(errno));
	return 0;
}

/* An imported range or a GPU BO's mapping: ibv_reg_mr() cannot pin it, sp_reg_mr() finds a way. */
static int sp_mem_import_reg(struct sp_dev *dev, struct ibv_pd *pd, struct sp_bench_mem *m,
			     int access)
{
	int ret = sp_bench_lib(sp_reg_mr(dev, pd, m->addr, m->size, access,
					 SP_REG_NO_CACHE, &m->smr));

	return ret < 0 ? ret : 0;
}

/*
 * A GPU BO's mapping through plain ibv_reg_mr(), as RCCL, UCX and perftest
 * register GPU memory: the NIC driver's pin fails on the PFN mapping, and
 * only a peer-memory core then asks the PeerDirect clients.
 */
static int sp_mem_gpu_peer_reg(struct sp_dev *dev, struct ibv_pd *pd, struct sp_bench_mem *m,
			       int access)
{
	(void)dev;
	m->mr = ibv_reg_mr(pd, m->addr, m->size, access);
	if (!m->mr)
		return sp_bench_fail(errno, "ibv_reg_mr: %s (%s)", strerror(errno),
				     errno == EFAULT ? "no peer-memory core asked strixpeer's client" :
				     "the NIC driver refused it");
	return 0;
}

/* --- freeing: what alloc set up, also when it stopped half-way ------------ */

static void sp_mem_gpu_free(struct sp_bench_mem *m)
{
	if (m->base)
		munmap(m->base, m->map_len);
	if (m->gem)
		sp_drm_gem_release(m->card, m->gem);
	if (m->card >= 0)
		close(m->card);
}

static void sp_mem_strixpeer_free(struct sp_bench_mem *m)
{
	if (m->buf)
		sp_buf_free(m->buf);
}

static void sp_mem_mapping_free(struct sp_bench_mem *m)
{
	if (m->base)
		munmap(m->base, m->map_len);
}

static void sp_mem_dmabuf_free(struct sp_bench_mem *m)
{
	if (m->imp)
		sp_import_free(m->imp);
	if (m->base)
		munmap(m->base, m->map_len);
	if (m->dmabuf_fd >= 0)
		close(m->dmabuf_fd);
	if (m->buf)
		sp_buf_free(m->buf);
}

/* --- what a mapping looks like to the CPU ---------------------------------- */
/* Bytes of [p, p + len) mapped with huge entries; -1 without PAGEMAP_SCAN. */
static int64_t sp_scan_huge(const void *p, size_t len)
{
	struct page_region r[128];
	struct pm_scan_arg a;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int64_t bytes = 0;
	long n;

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.start = (uintptr_t)p;
	a.end = (uintptr_t)p + len;
	a.vec = (uintptr_t)r;
	a.vec_len = sizeof(r) / sizeof(r[0]);
	a.category_mask = PAGE_IS_HUGE;
	a.return_mask = PAGE_IS_HUGE;
	for (;;) {
		n = ioctl(fd, PAGEMAP_SCAN, &a);
		if (n < 0) {
			close(fd);
			return -1;
		}
		for (long i = 0; i < n; i++)
			bytes += (int64_t)(r[i].end - r[i].start);
		if (a.walk_end >= a.end || n < (long)a.vec_len)
			break;
		a.start = a.walk_end;
	}
	close(fd);
	return bytes;
}

/* Huge-mapped bytes of the VMA at @p from smaps (fallback for old kernels). */
static uint64_t sp_smaps_huge(const void *p)
{
	static const char *const fields[] = {
		"AnonHugePages:", "FilePmdMapped:", "ShmemPmdMapped:",
	};
	char line[512];
	bool in = false;
	uint64_t kb = 0, size = 0, kps = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char *sp = strchr(line, ' ');

		if (sp && sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < sp) {
			if (in)
				break;
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
			continue;
		}
		if (!in)
			continue;
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
			if (!strncmp(line, fields[i], strlen(fields[i])))
				kb += strtoull(line + strlen(fields[i]), NULL, 10);
		if (!strncmp(line, "Size:", 5))
			size = strtoull(line + 5, NULL, 10);
		if (!strncmp(line, "KernelPageSize:", 15))
			kps = strtoull(line + 15, NULL, 10);
	}
	fclose(f);
	if (kps >= 2048)	/* hugetlb: every byte is huge */
		return size * 1024;
	return kb * 1024;
}


/* Page-table walk first (PAGEMAP_SCAN), smaps where the kernel lacks it. */
static uint64_t sp_mem_scan_huge_bytes(const struct sp_bench_mem *m)
{
	int64_t huge = sp_scan_huge(m->addr, m->size);

	return huge >= 0 ? (uint64_t)huge : sp_smaps_huge(m->addr);
}

/* hugetlb mappings are huge by definition: smaps says how big. */
static uint64_t sp_mem_smaps_huge_bytes(const struct sp_bench_mem *m)
{
	return sp_smaps_huge(m->addr);
}

/* --- the table --------------------------------------------------------------- */

const struct sp_bench_mem_ops sp_bench_mem_ops[SP_BENCH_NR_KINDS] = {
	[SP_BENCH_STRIXPEER] = {
		.name = "strixpeer",
		.needs_dev = true,
		.alloc = sp_mem_strixpeer_alloc,
		.reg = sp_mem_plain_reg,
		.free = sp_mem_strixpeer_free,
		.huge_bytes = sp_mem_scan_huge_bytes,
	},
	[SP_BENCH_MALLOC] = {
		.name = "malloc",
		.alloc = sp_mem_malloc_alloc,
		.reg = sp_mem_plain_reg,
		.free = sp_mem_mapping_free,
		.huge_bytes = sp_mem_scan_huge_bytes,
	},
	[SP_BENCH_THP] = {
		.name = "thp",
		.alloc = sp_mem_thp_alloc,
		.reg = sp_mem_plain_reg,
		.free = sp_mem_mapping_free,
		.huge_bytes = sp_mem_scan_huge_bytes,
	},
	[SP_BENCH_HUGETLB] = {
		.name = "hugetlb",
		.alloc = sp_mem_hugetlb_alloc,
		.reg = sp_mem_plain_reg,
		.free = sp_mem_mapping_free,
		.huge_bytes = sp_mem_smaps_huge_bytes,
	},
	[SP_BENCH_DMABUF] = {
		.name = "dmabuf",
		.needs_dev = true,
		.alloc = sp_mem_dmabuf_alloc,
		.reg = sp_mem_import_reg,
		.free = sp_mem_dmabuf_free,
		.huge_bytes = sp_mem_scan_huge_bytes,
	},
	[SP_BENCH_GPU_DMABUF] = {
		.name = "gpu-dmabuf",
		.alloc = sp_mem_gpu_alloc,
		.reg = sp_mem_import_reg,
		.free = sp_mem_gpu_free,
		.huge_bytes = sp_mem_scan_huge_bytes,
	},
	[SP_BENCH_GPU_PEERDIRECT] = {
		.name = "gpu-peerdirect",
		.alloc = sp_mem_gpu_alloc,
		.reg = sp_mem_gpu_peer_reg,
		.free = sp_mem_gpu_free,
		.huge_bytes = sp_mem_scan_huge_bytes,
	},
};

const char *sp_bench_kind_name(enum sp_bench_kind kind)
{
	return (unsigned int)kind < SP_BENCH_NR_KINDS ? sp_bench_mem_ops[kind].name : "unknown";
}

/* --- what the rest of the bench calls -------------------------------------- */

int sp_bench_mem_alloc(struct sp_dev *dev, enum sp_bench_kind kind, size_t size,
		       struct sp_bench_mem *m)
{
	const struct sp_bench_mem_ops *ops;
	int ret;

	memset(m, 0, sizeof(*m));
	m->kind = kind;
	m->size = size;
	m->dmabuf_fd = -1;
	m->card = -1;
	if ((unsigned int)kind >= SP_BENCH_NR_KINDS)
		return sp_bench_fail(EINVAL, "unknown memory kind %d", kind);
	ops = &sp_bench_mem_ops[kind];
	if (ops->needs_dev && !dev)
		return sp_bench_fail(ENODEV, "no strixpeer device");
	ret = ops->alloc(dev, m);
	if (ret) {
		char msg[512];

		sp_bench_copy(msg, sizeof(msg), sp_bench_errmsg());
		sp_bench_mem_free(m);
		return sp_bench_fail(-ret, "%s", msg);
	}
	return 0;
}

/* One write per 4 KiB page: every page faulted in (and zeroed) now. */
void sp_bench_mem_touch(struct sp_bench_mem *m)
{
	for (size_t off = 0; off < m->size; off += 4096)
		((volatile uint8_t *)m->addr)[off] = 0;
}

int sp_bench_mem_reg(struct sp_dev *dev, struct ibv_pd *pd, struct sp_bench_mem *m,
		     int access)
{
	return sp_bench_mem_ops[m->kind].reg(dev, pd, m, access);
}

static struct ibv_mr *sp_mem_ibv(const struct sp_bench_mem *m)
{
	return m->smr ? sp_mr_ibv(m->smr) : m->mr;
}

uint32_t sp_bench_mem_lkey(const struct sp_bench_mem *m)
{
	return sp_mem_ibv(m)->lkey;
}

uint32_t sp_bench_mem_rkey(const struct sp_bench_mem *m)
{
	return sp_mem_ibv(m)->rkey;
}

void sp_bench_mem_dereg(struct sp_bench_mem *m)
{
	if (m->smr)
		sp_dereg_mr(m->smr);
	if (m->mr)
		ibv_dereg_mr(m->mr);
	m->smr = NULL;
	m->mr = NULL;
}

void sp_bench_mem_free(struct sp_bench_mem *m)
{
	sp_bench_mem_dereg(m);
	if ((unsigned int)m->kind < SP_BENCH_NR_KINDS)
		sp_bench_mem_ops[m->kind].free(m);
	memset(m, 0, sizeof(*m));
	m->dmabuf_fd = -1;
	m->card = -1;
}

uint64_t sp_bench_mem_huge_bytes(const struct sp_bench_mem *m)
{
	uint64_t huge = sp_bench_mem_ops[m->kind].huge_bytes(m);

	return huge > m->size ? m->size : huge;
}
