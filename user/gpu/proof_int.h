/* SPDX-License-Identifier: MIT */
/*
 * What proof.c (the loopback pair, the visibility matrix), numbers.c (the
 * figures measured after it) and kinds.c (the memory kinds) share: one
 * allocation of a kind, the run's context, and kinds.c's calls. proof.c
 * calls numbers.c and kinds.c, numbers.c calls kinds.c, never back.
 */
#ifndef SP_GPU_PROOF_INT_H
#define SP_GPU_PROOF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "gpu/proof.h"
#include "rdma/rc.h"
#include "strixpeer.h"

#define GP_WAIT_MS	120000	/* one RDMA operation: generous for a loaded TCG guest */

/*
 * One allocation of a kind under test. @p is what the GPU (HIP) is given,
 * @cpu what the routes register and the peer addresses: the same, but for
 * sp-import, whose @p is HIP's mapping of the dma-buf (a GPU address a
 * real ROCm does not map for the CPU) and @cpu the strixpeer buffer's.
 */
struct gp_mem {
	enum sp_gp_kind kind;
	uint8_t *p, *cpu;
	size_t len;
	struct sp_buf *buf;	/* sp-hostreg, sp-import */
	bool registered;	/* sp-hostreg: hipHostRegister()ed */
	int dmabuf;		/* sp-import: the buffer's dma-buf, or -1 */
	sp_hip_extmem ext;	/* sp-import: HIP's import of it, or NULL */
};

struct gp_ctx;
struct gp_remote;

/*
 * The peer's two operations on the memory under test (@raddr/@rkey, @len
 * bytes): WRITE the pattern of @seed into it (0, or < 0 and @why); READ
 * it and compare every byte with the pattern (the first wrong byte's
 * offset, -1 all right, < -1 and @why: the operation failed). Loopback:
 * the second device's queue pair (proof.c); remote: the server of
 * another node, over the link (peer.c).
 */
struct gp_peer_ops {
	int (*write)(struct gp_ctx *c, uint64_t raddr, uint32_t rkey, size_t len, uint32_t seed,
		     char *why, size_t wl);
	int64_t (*read)(struct gp_ctx *c, uint64_t raddr, uint32_t rkey, size_t len,
			uint32_t seed, char *why, size_t wl);
};

/*
 * What a run holds: the runtime, the pair, the host buffers (@bufsz bytes
 * each: the trial's size, or the largest message when figures are
 * measured, whichever is larger).
 */
struct gp_ctx {
	const struct sp_hiprt *rt;
	const struct sp_gp_opts *o;
	size_t bufsz;
	struct sp_dev *dev;		/* NULL: no strixpeer module */
	char dev_reason[160];
	struct sp_rc local, peer;	/* remote: @local is the data connection's */
	const struct gp_peer_ops *ops;
	struct gp_remote *remote;	/* two nodes, or NULL */
	struct ibv_mr *peer_mr;
	uint8_t *peer_buf, *src, *dst, *zeros;
	sp_hip_stream stream;		/* non-blocking (proof.h says why) */
	uint8_t *stage;			/* staged: hipHostMalloc()ed, or NULL */
	struct ibv_mr *stage_mr;	/* staged: its MR on the memory's device */
	char stage_reason[200];		/* staged: why not */
};

/*
 * peer.c: connect to o->server (the control and data connections); the
 * data connection's queue pair and PD become @c->local, @f says who the
 * server is. 0, or -errno and @why. gp_remote_close() undoes it.
 */
int gp_remote_open(struct gp_ctx *c, struct sp_gp_facts *f, char *why, size_t wl);
void gp_remote_close(struct gp_ctx *c);
extern const struct gp_peer_ops gp_remote_ops;

/* facts.c: @dev's firmware version, or why it is unknown. */
void gp_nic_fw(const char *dev, char *out, size_t len);

/* kinds.c */
void gp_msg(char *err, size_t len, const char *what, const struct sp_hiprt *rt, sp_hip_err e);
/* @len bytes of @kind into @m; 0, or -errno and @why. */
int gp_alloc(struct gp_ctx *c, enum sp_gp_kind kind, size_t len, struct gp_mem *m, char *why,
	     size_t wl);
void gp_free(struct gp_ctx *c, struct gp_mem *m);
/*
 * Register @m on the memory's device by @route (staged: the staging
 * buffer's MR, nothing registered); 0 or -errno, @cell's reg_path or
 * reason set. Undo with gp_unreg().
 */
int gp_reg(struct gp_ctx *c, struct gp_mem *m, enum sp_gp_route route, struct ibv_mr **mr,
	   struct sp_mr **smr, struct sp_gp_cell *cell);
void gp_unreg(struct gp_ctx *c, struct ibv_mr *mr, struct sp_mr *smr);

/*
 * numbers.c: the figures of @kind (its own allocation of the largest
 * message's size), for the routes and directions whose cells in @res
 * have a verdict.
 */
void gp_numbers_kind(struct gp_ctx *c, enum sp_gp_kind kind, const struct sp_gp_result *res,
		     struct sp_gp_kind_numbers *kn);
/* numbers.c: the figures' header (sizes, the stand-in's label). */
void gp_numbers_init(const struct sp_gp_opts *o, struct sp_gp_result *res);

#endif /* SP_GPU_PROOF_INT_H */
