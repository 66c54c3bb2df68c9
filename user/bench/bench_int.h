/* SPDX-License-Identifier: MIT */
/*
 * The benchmark's internals, shared by bench.c (the run and the CPU-side
 * figures), report.c (their output), mem.c (the memory kinds' table),
 * bench_rdma.c (the RDMA figures, client and server), bench_conn.c (its
 * connection over librdmacm) and util.c (what they all use: the failure
 * message, the clock, CPU pinning, progress, the result series).
 */
#ifndef SP_BENCH_INT_H
#define SP_BENCH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "strixpeer.h"
#include "bench.h"

struct ibv_pd;
struct ibv_mr;

#define SP_BENCH_MAX_REPEAT	64

/* One piece of memory of one kind, mapped into this process. */
struct sp_bench_mem {
	enum sp_bench_kind kind;
	size_t size;		/* bytes asked for */
	size_t map_len;		/* bytes to munmap at base */
	uint8_t *addr;		/* 2 MiB-aligned where the kind allows */
	uint8_t *base;		/* what mmap returned (THP, dma-buf) */
	struct sp_buf *buf;	/* strixpeer, dma-buf */
	struct sp_import *imp;	/* dma-buf */
	int dmabuf_fd;		/* dma-buf, else -1 */
	int card;		/* gpu-dmabuf: the DRM card fd, else -1 */
	uint32_t gem;		/* gpu-dmabuf: the BO's handle on the card */
	struct ibv_mr *mr;	/* plain registration */
	struct sp_mr *smr;	/* dma-buf: registered through sp_reg_mr() */
};

/* A series of samples: one figure (and message size) for every kind. */
struct sp_bench_series {
	char figure[32];	/* "alloc", "reg", "write_bw", ... */
	uint64_t msg_size;	/* RDMA figures: message bytes, else 0 */
	uint64_t iters;		/* RDMA figures: iterations per sample */
	const char *unit;	/* "ms", "GiB/s", "MiB/s", "us" */
	bool higher_better;
	unsigned int n[SP_BENCH_NR_KINDS];
	double v[SP_BENCH_NR_KINDS][SP_BENCH_MAX_REPEAT];
};

/* What the mapping of a kind looks like to the CPU and to an HCA. */
struct sp_bench_map_info {
	bool valid;
	uint64_t huge_bytes;	/* mapped with 2 MiB entries */
	bool phys_known;	/* pagemap gave physical addresses */
	uint64_t segments;	/* physically contiguous runs (DMA segments) */
	uint64_t mtt_page;	/* best HCA page size (4 KiB..1 GiB) */
	char reg_path[16];	/* how the registration was made */
};

struct sp_bench {
	struct sp_bench_opts o;
	char kernel[128];
	char thp[32];
	char mode[16];		/* "local" or "remote" */
	char client_dev[64], server_dev[64];
	char client_addr[64], server_addr[64];
	bool available[SP_BENCH_NR_KINDS];
	char reason[SP_BENCH_NR_KINDS][160];
	char rdma_reason[200];	/* why RDMA figures are missing, if they are */
	struct sp_bench_map_info map[SP_BENCH_NR_KINDS];
	struct sp_bench_series *series;
	size_t nr_series, cap_series;
};

/* Copy @src into @dst[@len], cut short if need be. */
static inline void sp_bench_copy(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/*
 * What one memory kind does (mem.c; perftest's memory_ctx is the model),
 * indexed by enum sp_bench_kind. alloc() maps @m->size bytes at @m->addr
 * and records what it set up in @m; free() undoes that, also after an
 * alloc() that stopped half-way; reg() registers @m with @pd (@m->mr or
 * @m->smr; sp_bench_mem_dereg() undoes it for every kind); huge_bytes()
 * says how many of its bytes the CPU maps with 2 MiB entries.
 */
struct sp_bench_mem_ops {
	const char *name;	/* in --kinds, the reports and the JSON */
	bool needs_dev;		/* needs /dev/strixpeer */
	int (*alloc)(struct sp_dev *dev, struct sp_bench_mem *m);
	int (*reg)(struct sp_dev *dev, struct ibv_pd *pd, struct sp_bench_mem *m,
		   int access);
	void (*free)(struct sp_bench_mem *m);
	uint64_t (*huge_bytes)(const struct sp_bench_mem *m);
};

/* mem.c */
extern const struct sp_bench_mem_ops sp_bench_mem_ops[SP_BENCH_NR_KINDS];

const char *sp_bench_kind_name(enum sp_bench_kind kind);
int sp_bench_mem_alloc(struct sp_dev *dev, enum sp_bench_kind kind, size_t size,
		       struct sp_bench_mem *m);
void sp_bench_mem_touch(struct sp_bench_mem *m);
int sp_bench_mem_reg(struct sp_dev *dev, struct ibv_pd *pd, struct sp_bench_mem *m,
		     int access);
void sp_bench_mem_dereg(struct sp_bench_mem *m);
uint32_t sp_bench_mem_lkey(const struct sp_bench_mem *m);
uint32_t sp_bench_mem_rkey(const struct sp_bench_mem *m);
void sp_bench_mem_free(struct sp_bench_mem *m);
/* Bytes of @m mapped with 2 MiB entries, at most @m->size. */
uint64_t sp_bench_mem_huge_bytes(const struct sp_bench_mem *m);

/* util.c; sp_bench_errmsg() is bench.h's. */
/* Records a message for sp_bench_errmsg() and returns -err. */
int sp_bench_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A libstrixpeer call returned @ret: when it failed, its sp_errmsg()
 * becomes the bench's message. Returns @ret.
 */
int sp_bench_lib(int ret);
double sp_bench_now(void);
struct sp_bench_series *sp_bench_series_get(struct sp_bench *b, const char *figure,
					    uint64_t msg_size, const char *unit,
					    bool higher_better);
void sp_bench_add(struct sp_bench_series *s, enum sp_bench_kind kind, double v);
void sp_bench_progress(const struct sp_bench *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void sp_bench_pin_cpu(int cpu);

/*
 * The CPU-side figures (bench.c's), which sp_bench_rdma_run() runs once it
 * knows the client's PD, or that there is none (@pd NULL: then the first
 * verbs device's is used; @pd_reason, if not NULL, says why the client has
 * none). Passed in, so that bench_rdma.c does not call back into bench.c.
 */
typedef int sp_bench_host_fn(struct sp_bench *b, struct sp_dev *dev, struct ibv_pd *pd,
			     const char *pd_reason);

/* bench_rdma.c */
int sp_bench_rdma_run(struct sp_bench *b, struct sp_dev *dev, sp_bench_host_fn *host_part);
int sp_bench_rdma_serve(const struct sp_bench_opts *o, struct sp_dev *dev, int ready_fd);

#endif
