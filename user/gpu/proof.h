/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl gpu proof's engine (proof.c, the node's facts in facts.c):
 * the visibility matrix of issue 47 over a loopback pair of this node's
 * RDMA devices. For every memory kind x registration route x direction,
 * each repetition runs one trial per fence:
 *
 *   gpu-write:  the GPU writes a pattern (hipMemcpyAsync from host memory)
 *               -> fence -> the peer RDMA READs the memory, every byte
 *               compared;
 *   peer-write: the peer RDMA WRITEs a pattern -> fence -> the GPU reads it
 *               (hipMemcpyAsync to host memory, hipStreamSynchronize),
 *               every byte compared;
 *
 * and on the route "staged", host staging as host-staged RCCL/UCX do it,
 * the baseline of every zero-copy route: the memory under test is not
 * registered; a staging buffer is (ibv_reg_mr()), and
 *
 *   gpu-write:  the GPU writes the memory -> fence -> hipMemcpy(staging,
 *               memory) -> the peer RDMA READs the staging buffer;
 *   peer-write: the peer RDMA WRITEs the staging buffer -> hipMemcpy(memory,
 *               staging) -> fence -> the GPU reads the memory back.
 *
 * The staging buffer is hipHostMalloc() memory (default flags), as RCCL's
 * and UCX's host bounce buffers are: pinned host memory that the DMA
 * engines copy at full speed and any verbs device registers; a plain
 * malloc() would make ROCm copy through its own pinned bounce buffer
 * first, which no host-staged library does.
 *
 * The GPU's writes and reads run on a non-blocking stream
 * (hipStreamCreateWithFlags(hipStreamNonBlocking)), as the producers of
 * frameworks and collective libraries do: hipMemcpy runs on the null
 * stream, which waits for every blocking stream's work first (ROCm's
 * clr: WaitActiveStreams) - with a blocking stream the staging copy would
 * be a fence itself and the route's "none" would hide what a
 * non-blocking producer needs.
 *
 * fences, weakest first: none, stream (hipStreamSynchronize), device
 * (hipDeviceSynchronize), system (hipDeviceSynchronize, then a sequentially
 * consistent CPU fence). A cell's verdict is the weakest fence after which
 * every repetition was right, and stayed right with every stronger one.
 *
 * The "peer" is the second device's queue pair in this process; the memory
 * under test is registered on the first device's PD (ibv_reg_mr(), or
 * libstrixpeer's sp_reg_mr()).
 *
 * With opts.numbers, figures follow each kind's cells (numbers.c), for
 * the routes and directions whose verdict is a fence (never for a cell
 * "never" or "unavailable"), in a fresh allocation of max_msg bytes:
 *
 *   rdma:  the peer's RDMA WRITE (peer-write's verdict) and READ
 *          (gpu-write's) of every power of two from min_msg to max_msg:
 *          bandwidth (MiB/s, 2^20 bytes; user/bench's loop, up to 32
 *          WRITEs or 16 READs outstanding) and latency (us, one signalled
 *          operation and its completion, the median). On the route
 *          "staged" the timed span holds the hipMemcpy()s too: WRITE, the
 *          RDMA into the staging buffer then a hipMemcpy per message into
 *          the memory; READ, a hipMemcpy per message out of the memory
 *          then the RDMA; no overlap between the two.
 *   reg:   ibv_reg_mr() / sp_reg_mr() (SP_REG_NO_CACHE) of the whole
 *          allocation and its deregistration, ms per GiB (the median of 3).
 *   cpu:   memcpy() from (read) and into (write) the kind's CPU mapping,
 *          MiB/s (the median of 3); a kind the CPU cannot touch
 *          (SIGSEGV/SIGBUS) says so.
 */
#ifndef SP_GPU_PROOF_H
#define SP_GPU_PROOF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/hiprt.h"

enum sp_gp_kind {
	SP_GP_MALLOC,		/* host baseline: the CPU writes and reads */
	SP_GP_HIP_MALLOC,	/* hipMalloc */
	SP_GP_HOST_COHERENT,	/* hipHostMalloc(hipHostMallocCoherent) */
	SP_GP_HOST_NONCOHERENT,	/* hipHostMalloc(hipHostMallocNonCoherent) */
	SP_GP_MANAGED,		/* hipMallocManaged(hipMemAttachGlobal) */
	SP_GP_FINE,		/* hipExtMallocWithFlags(hipDeviceMallocFinegrained) */
	SP_GP_UNCACHED,		/* hipExtMallocWithFlags(hipDeviceMallocUncached) */
	SP_GP_SP_HOSTREG,	/* a strixpeer buffer, hipHostRegister()ed */
	SP_GP_SP_IMPORT,	/* a strixpeer buffer's dma-buf, hipImportExternalMemory()ed */
	SP_GP_NR_KINDS
};

/* staged: the memory is copied through a registered host buffer */
enum sp_gp_route { SP_GP_REG_MR, SP_GP_SP_REG_MR, SP_GP_STAGED, SP_GP_NR_ROUTES };
enum sp_gp_dir { SP_GP_GPU_WRITE, SP_GP_PEER_WRITE, SP_GP_NR_DIRS };
enum sp_gp_fence { SP_GP_NONE, SP_GP_STREAM, SP_GP_DEVICE, SP_GP_SYSTEM, SP_GP_NR_FENCES };

extern const char *const sp_gp_kind_names[SP_GP_NR_KINDS];
extern const char *const sp_gp_route_names[SP_GP_NR_ROUTES];
extern const char *const sp_gp_dir_names[SP_GP_NR_DIRS];
extern const char *const sp_gp_fence_names[SP_GP_NR_FENCES];

struct sp_gp_opts {
	size_t size;		/* bytes per trial, a multiple of 4 KiB */
	unsigned int repeat;	/* trials per fence */
	unsigned int kinds;	/* bit per enum sp_gp_kind */
	unsigned int routes;	/* bit per enum sp_gp_route */
	unsigned int dirs;	/* bit per enum sp_gp_dir */
	const char *local_dev;	/* verbs device of the memory (NULL: the first) */
	const char *peer_dev;	/* the peer's (NULL: the next one) */
	const char *server;	/* two nodes: 'gpu proof --serve' on this host (NULL: loopback) */
	const char *port;	/* its port (NULL: SP_LINK_PORT_GPU) */
	const char *bind;	/* the client's source address (NULL: as routed) */
	void (*progress)(const char *msg);	/* NULL: quiet */
	bool numbers;		/* measure the figures too */
	size_t min_msg, max_msg;	/* their message sizes: powers of two */
	unsigned int iters;	/* operations per figure (fewer for big messages) */
};

#define SP_GP_MAX_SIZES	20	/* 4 KiB .. 2 GiB */
enum sp_gp_op { SP_GP_OP_WRITE, SP_GP_OP_READ, SP_GP_NR_OPS };
extern const char *const sp_gp_op_names[SP_GP_NR_OPS];

/* The peer's RDMA op into one kind by one route, per message size. */
struct sp_gp_rdma_fig {
	bool measured;
	char reason[256];	/* not measured: why */
	double bw[SP_GP_MAX_SIZES];	/* MiB/s */
	double lat[SP_GP_MAX_SIZES];	/* us */
	uint64_t iters[SP_GP_MAX_SIZES];	/* bandwidth operations timed */
};

struct sp_gp_kind_numbers {
	bool allocated;
	char reason[200];	/* not allocated: why */
	struct sp_gp_rdma_fig rdma[SP_GP_NR_ROUTES][SP_GP_NR_OPS];
	double reg_ms_gib[SP_GP_NR_ROUTES];	/* registration, ms per GiB; < 0: none */
	double dereg_ms_gib[SP_GP_NR_ROUTES];
	char reg_reason[SP_GP_NR_ROUTES][256];	/* no registration figure: why */
	double cpu_read, cpu_write;	/* MiB/s; < 0: none */
	char cpu_reason[200];
};

struct sp_gp_numbers {
	bool run;
	bool stand_in;		/* the GPU is the suite's stand-in (sp_gpusim) */
	char source[256];	/* what the figures are figures of, said plainly */
	unsigned int nsizes;
	uint64_t sizes[SP_GP_MAX_SIZES];
	unsigned int iters;
	size_t bytes;		/* each kind's allocation for the figures */
	struct sp_gp_kind_numbers k[SP_GP_NR_KINDS];
};

struct sp_gp_cell {
	enum sp_gp_kind kind;
	enum sp_gp_route route;
	enum sp_gp_dir dir;
	bool available;
	char reason[256];	/* why not available */
	char reg_path[16];	/* how the route registered it */
	unsigned int ok[SP_GP_NR_FENCES], runs[SP_GP_NR_FENCES];
	int64_t first_bad[SP_GP_NR_FENCES];	/* first wrong byte seen, or -1 */
	int weakest;		/* enum sp_gp_fence, or -1: never right */
	bool inconsistent;	/* a weaker fence was right where a stronger was not */
};

struct sp_gp_facts {
	char mode[16];		/* "loopback" or "two-node" */
	char server[96];	/* two-node: "HOST port PORT" */
	char server_kernel[128];	/* two-node: the server's uname -r */
	char kernel[128];
	char local_dev[64], peer_dev[64];
	char local_fw[64], peer_fw[64];
	char iommu[160];	/* the default domain type and the command line's iommu words */
	char perfopt[64];	/* "armed", "not seen", or why unknown */
	long long gtt_bytes;	/* amdgpu's GTT size, -1 unknown */
	char hip_version[32];
	char hip_library[256];
	char gpu[256];
};

struct sp_gp_result {
	struct sp_gp_facts facts;
	struct sp_gp_cell cells[SP_GP_NR_KINDS * SP_GP_NR_ROUTES * SP_GP_NR_DIRS];
	unsigned int ncells;
	char rdma_reason[256];	/* the loopback pair could not be made: why */
	struct sp_gp_numbers numbers;	/* opts.numbers */
};

/*
 * Runs the matrix with @rt (a filled table). Return: 0 (the cells say what
 * was found; rdma_reason non-empty when no RDMA could run), or -errno with
 * @err saying why nothing could run.
 */
int sp_gp_run(const struct sp_hiprt *rt, const struct sp_gp_opts *o, struct sp_gp_result *res,
	      char *err, size_t errlen);

/*
 * peer.c: strixpeerctl gpu proof --serve, the peer of another node's
 * proof: listens on @bind (NULL: every address) @port (NULL:
 * SP_LINK_PORT_GPU) and serves one client at a time until SIGINT or
 * SIGTERM (0), or -errno with @err saying why it could not listen.
 * Progress and refused clients on stderr.
 */
int sp_gp_serve(const char *bind, const char *port, char *err, size_t errlen);

/* facts.c: the node's facts that change the result. */
void sp_gp_facts(const struct sp_hiprt *rt, struct sp_gp_facts *f);

#endif /* SP_GPU_PROOF_H */
