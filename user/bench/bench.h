/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl's benchmark (user/bench/, a static archive linked only into
 * strixpeerctl; not part of libstrixpeer, not installed): what
 * 'strixpeerctl bench' calls. It measures libstrixpeer's buffers through
 * the library's public API, like any application.
 *
 * Functions that can fail return 0 or a negative errno, and
 * sp_bench_errmsg() describes the calling thread's last failure (the
 * library's own message when a libstrixpeer call failed).
 */
#ifndef SP_BENCH_H
#define SP_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * What strixpeerctl bench runs. Each
 * figure is measured for every memory kind, the kinds interleaved within a
 * repetition, the repetitions repeated; the report gives min/median/max and
 * each kind's median divided by malloc's and by THP's. RDMA figures follow
 * perftest's definitions (bandwidth in MiB/s, 2^20 bytes; latency in
 * microseconds, half a round trip for WRITE and SEND ping-pong, a whole
 * READ) and connect through librdmacm, like perftest's -R.
 */

/** Memory kinds a benchmark compares. */
enum sp_bench_kind {
	SP_BENCH_STRIXPEER = 0,	/**< a strixpeer buffer (sp_buf_alloc()) */
	SP_BENCH_MALLOC,	/**< anonymous memory in 4 KiB pages (MADV_NOHUGEPAGE) */
	SP_BENCH_THP,		/**< anonymous memory, 2 MiB-aligned, MADV_HUGEPAGE */
	SP_BENCH_HUGETLB,	/**< MAP_HUGETLB, 2 MiB hugetlb pages */
	SP_BENCH_DMABUF,	/**< a strixpeer buffer's dma-buf, mmapped from
				 *   the dma-buf, imported (sp_import_dmabuf())
				 *   and registered with sp_reg_mr() */
	SP_BENCH_GPU_DMABUF,	/**< a GPU buffer object (DRM dumb buffer of a
				 *   driver in the module's claim_gem_drivers)
				 *   mapped through its card, registered with
				 *   sp_reg_mr(): its dma-buf from
				 *   sp_gem_dmabuf(), ibv_reg_dmabuf_mr() */
	SP_BENCH_GPU_PEERDIRECT,	/**< the same GPU buffer object, registered
					 *   with plain ibv_reg_mr(): only a
					 *   peer-memory core that asks strixpeer's
					 *   PeerDirect client makes that work */
	SP_BENCH_NR_KINDS
};

/** sp_bench_opts.ops bits */
#define SP_BENCH_OP_WRITE	(1U << 0) /**< RDMA WRITE bandwidth and latency */
#define SP_BENCH_OP_READ	(1U << 1) /**< RDMA READ bandwidth and latency */
#define SP_BENCH_OP_SEND	(1U << 2) /**< SEND bandwidth and latency */
#define SP_BENCH_OP_HOST	(1U << 3) /**< allocation, registration, memcpy */

/** Options of a benchmark; sp_bench_opts_init() sets the defaults. */
struct sp_bench_opts {
	size_t size;		/**< bytes for allocation, registration and
				 *   memcpy (default 256 MiB) */
	unsigned int repeat;	/**< repetitions (default 5, at most 64) */
	unsigned int kinds;	/**< bit (1 << enum sp_bench_kind) per kind
				 *   (default all) */
	unsigned int ops;	/**< SP_BENCH_OP_* bits (default all) */
	size_t min_msg;		/**< smallest RDMA message (default 2) */
	size_t max_msg;		/**< largest, powers of two (default 8 MiB) */
	unsigned int iters;	/**< bandwidth iterations (default 1000) ... */
	uint64_t max_bytes;	/**< ... fewer for big messages, bandwidth
				 *   and latency: at most this many bytes
				 *   per sample (default 1 GiB), at least 8
				 *   (bandwidth) or 5 (latency) iterations */
	unsigned int lat_iters;	/**< latency iterations (default 1000) */
	unsigned int depth;	/**< outstanding work requests (default 128) */
	const char *server;	/**< sp_bench_run(): the node running
				 *   sp_bench_serve(); NULL: this node, two
				 *   local RDMA devices */
	const char *local_addr;	/**< IPv4 of the client's RDMA device (NULL:
				 *   the first device with an IPv4 RoCE GID) */
	const char *serve_addr;	/**< local mode: the serving device's IPv4
				 *   (NULL: the second such device);
				 *   sp_bench_serve(): address to bind (NULL: any) */
	const char *port;	/**< the server's librdmacm port, its only one
				 *   (default "18515", perftest's) */
	unsigned int flags;	/**< SP_BENCH_EVENTS */
	void (*progress)(const char *msg, void *arg); /**< optional */
	void *progress_arg;
	uint64_t reserved[8];	/**< zero */
};

/**
 * sp_bench_opts.flags: wait for completions with events instead of busy
 * polling (perftest's -e). Where the NIC's work runs on the CPUs the
 * benchmark polls on (Soft-RoCE), polling starves it; with a real NIC,
 * polling is the usual choice. WRITE latency polls memory either way.
 */
#define SP_BENCH_EVENTS		(1U << 0)

/** Results of sp_bench_run() (opaque). */
struct sp_bench;

/**
 * sp_bench_opts_init() - fill in the defaults
 * @o: options
 */
void sp_bench_opts_init(struct sp_bench_opts *o);

/**
 * sp_bench_run() - run a benchmark
 * @o: options
 * @bp: receives the results (free with sp_bench_free())
 *
 * A kind that cannot be had (no strixpeer module, no free hugetlb pages,
 * ...) or an RDMA part that cannot run (no devices, server unreachable)
 * is reported with its reason in the results, not as a failure.
 *
 * Return: 0 or negative errno (bad options, out of memory); then
 * sp_bench_errmsg() says why.
 */
int sp_bench_run(const struct sp_bench_opts *o, struct sp_bench **bp);

/**
 * sp_bench_serve() - serve one sp_bench_run() from another node
 * @o: options (serve_addr, port)
 *
 * Accepts one client, allocates and registers memory of the kinds it asks
 * for, takes part in its RDMA figures, and returns when it disconnects.
 *
 * Return: 0 or negative errno.
 */
int sp_bench_serve(const struct sp_bench_opts *o);

/**
 * sp_bench_write_json() - the results as one JSON document
 * @b: results
 * @f: stream
 *
 * Return: 0 or negative errno.
 */
int sp_bench_write_json(const struct sp_bench *b, FILE *f);

/**
 * sp_bench_write_table() - the results as text: the ratio table first
 * @b: results
 * @f: stream
 *
 * Return: 0 or negative errno.
 */
int sp_bench_write_table(const struct sp_bench *b, FILE *f);

/**
 * sp_bench_write_plot() - bandwidth vs message size per kind, as SVG
 * @b: results
 * @svg: output file; @svg.dat and @svg.gp are written beside it
 *
 * Runs gnuplot(1).
 *
 * Return: 0, -ENOENT when gnuplot is not installed, or negative errno.
 */
int sp_bench_write_plot(const struct sp_bench *b, const char *svg);

/**
 * sp_bench_free() - free results
 * @b: results, or NULL
 */
void sp_bench_free(struct sp_bench *b);

/**
 * sp_bench_errmsg() - why the calling thread's last failing sp_bench_*()
 * call failed
 *
 * Return: a message, never NULL.
 */
const char *sp_bench_errmsg(void);

#endif /* SP_BENCH_H */
