// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu proof's engine: the loopback pair (user/rdma/rc.h's
 * queue pairs on two devices of this node) and the trials of the
 * visibility matrix (proof.h says what each one does); the memory kinds
 * are kinds.c's, the figures numbers.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "gpu/proof_int.h"

/* The pair: the memory's device and the peer's, connected to each other. */
static int gp_pair(struct gp_ctx *c, struct sp_gp_facts *f, char *why, size_t wl)
{
	/* the figures keep up to 32 WRITEs and 16 READs outstanding */
	struct ibv_qp_cap cap = { .max_send_wr = 64, .max_recv_wr = 4, .max_send_sge = 1,
				  .max_recv_sge = 1 };
	struct sp_rc_path path = SP_RC_PATH_DEFAULT;
	struct ibv_device **list;
	const char *names[2] = { c->o->local_dev, c->o->peer_dev };
	char auto_names[2][64] = { "", "" };
	struct sp_rc_addr la, pa;
	int n = 0, ret;

	list = ibv_get_device_list(&n);
	for (int i = 0, k = 0; list && i < n && k < 2; i++) {
		const char *nm = ibv_get_device_name(list[i]);

		if ((names[0] && !strcmp(nm, names[0])) || (names[1] && !strcmp(nm, names[1])))
			continue;
		snprintf(auto_names[k++], sizeof(auto_names[0]), "%s", nm);
	}
	if (list)
		ibv_free_device_list(list);
	if (!names[0])
		names[0] = auto_names[0];
	if (!names[1])
		names[1] = names[0] == auto_names[0] ? auto_names[1] : auto_names[0];
	if (!names[0][0] || !names[1][0]) {
		snprintf(why, wl, "the loopback pair needs two RDMA devices on this node (found %d)", n);
		return -ENODEV;
	}
	snprintf(f->local_dev, sizeof(f->local_dev), "%s", names[0]);
	snprintf(f->peer_dev, sizeof(f->peer_dev), "%s", names[1]);
	ret = sp_rc_open(&c->local, names[0], 1, 128, &cap, 0, why, wl);
	if (!ret)
		ret = sp_rc_open(&c->peer, names[1], 1, 128, &cap, 0, why, wl);
	if (ret)
		return ret;
	sp_rc_local_addr(&c->local, 0x1000, &la);
	sp_rc_local_addr(&c->peer, 0x2000, &pa);
	path.rd_atomic = 16;
	ret = sp_rc_connect(&c->local, 0x1000, &pa, &path, why, wl);
	if (!ret)
		ret = sp_rc_connect(&c->peer, 0x2000, &la, &path, why, wl);
	if (ret)
		return ret;
	c->peer_mr = ibv_reg_mr(c->peer.pd, c->peer_buf, c->bufsz,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_WRITE);
	if (!c->peer_mr) {
		snprintf(why, wl, "ibv_reg_mr of the peer's buffer on %s: %s", names[1],
			 strerror(errno));
		return -errno;
	}
	return 0;
}

/* The loopback peer: the second device's queue pair and its buffer. */
static int gp_lo_write(struct gp_ctx *c, uint64_t raddr, uint32_t rkey, size_t len,
		       uint32_t seed, char *why, size_t wl)
{
	sp_rc_fill(c->peer_buf, len, 0, seed);
	return sp_rc_rdma(&c->peer, IBV_WR_RDMA_WRITE, c->peer_mr, 0, raddr, rkey,
			  (uint32_t)len, GP_WAIT_MS, why, wl) ? -1 : 0;
}

static int64_t gp_lo_read(struct gp_ctx *c, uint64_t raddr, uint32_t rkey, size_t len,
			  uint32_t seed, char *why, size_t wl)
{
	memset(c->peer_buf, 0, len);
	if (sp_rc_rdma(&c->peer, IBV_WR_RDMA_READ, c->peer_mr, 0, raddr, rkey, (uint32_t)len,
		       GP_WAIT_MS, why, wl))
		return -2;
	return sp_rc_verify(c->peer_buf, len, 0, seed);
}

static const struct gp_peer_ops gp_lo_ops = { .write = gp_lo_write, .read = gp_lo_read };

static sp_hip_err gp_fence(const struct gp_ctx *c, enum sp_gp_fence f)
{
	sp_hip_err e = 0;

	switch (f) {
	case SP_GP_STREAM:
		e = c->rt->StreamSynchronize(c->stream);
		break;
	case SP_GP_DEVICE:
		e = c->rt->DeviceSynchronize();
		break;
	case SP_GP_SYSTEM:
		e = c->rt->DeviceSynchronize();
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		break;
	default:
		break;
	}
	return e;
}

/* staged: the copy between the memory and the staging buffer (hipMemcpy). */
static int gp_stage_copy(struct gp_ctx *c, struct gp_mem *m, bool to_stage, char *why,
			 size_t wl)
{
	sp_hip_err e;

	if (to_stage)
		e = c->rt->Memcpy(c->stage, m->p, m->len, SP_HIP_MEMCPY_DEFAULT);
	else
		e = c->rt->Memcpy(m->p, c->stage, m->len, SP_HIP_MEMCPY_DEFAULT);
	if (e) {
		gp_msg(why, wl, to_stage ? "hipMemcpy into the staging buffer" :
		       "hipMemcpy from the staging buffer", c->rt, e);
		return -1;
	}
	return 0;
}

/*
 * One trial: the first wrong byte's offset, -1 when all were right, or
 * < -1 (-2 - errno-ish) when an operation failed (@why says which). @mr is
 * the memory's MR, or on the route "staged" the staging buffer's.
 */
static int64_t gp_trial(struct gp_ctx *c, struct gp_mem *m, struct ibv_mr *mr,
			enum sp_gp_route route, enum sp_gp_dir dir, enum sp_gp_fence f,
			uint32_t seed, char *why, size_t wl)
{
	const struct sp_hiprt *rt = c->rt;
	bool cpu = m->kind == SP_GP_MALLOC, staged = route == SP_GP_STAGED;
	uint64_t raddr = staged ? (uintptr_t)c->stage : (uintptr_t)m->cpu;
	size_t len = m->len;
	sp_hip_err e;

	/*
	 * Start from zeros, with nothing outstanding: the clearing copy runs
	 * on the null stream, which the non-blocking stream does not wait for.
	 */
	e = rt->DeviceSynchronize();
	if (!e && !cpu)
		e = rt->Memcpy(m->p, c->zeros, len, SP_HIP_MEMCPY_HOST_TO_DEVICE);
	if (!e)
		e = rt->DeviceSynchronize();
	if (e) {
		gp_msg(why, wl, "clearing the memory (hipMemcpy, hipDeviceSynchronize)", rt, e);
		return -2;
	}
	if (cpu)
		memset(m->p, 0, len);
	if (staged)
		memset(c->stage, 0, len);
	if (dir == SP_GP_GPU_WRITE) {
		sp_rc_fill(c->src, len, 0, seed);
		if (cpu)
			memcpy(m->p, c->src, len);
		else
			e = rt->MemcpyAsync(m->p, c->src, len, SP_HIP_MEMCPY_HOST_TO_DEVICE,
					    c->stream);
		if (e) {
			gp_msg(why, wl, "hipMemcpyAsync (the GPU's write)", rt, e);
			return -2;
		}
		e = gp_fence(c, f);
		if (e) {
			gp_msg(why, wl, sp_gp_fence_names[f], rt, e);
			return -2;
		}
		if (staged && gp_stage_copy(c, m, true, why, wl))
			return -2;
		return c->ops->read(c, raddr, mr->rkey, len, seed, why, wl);
	}
	memset(c->dst, 0, len);
	if (c->ops->write(c, raddr, mr->rkey, len, seed, why, wl))
		return -2;
	if (staged && gp_stage_copy(c, m, false, why, wl))
		return -2;
	e = gp_fence(c, f);
	if (e) {
		gp_msg(why, wl, sp_gp_fence_names[f], rt, e);
		return -2;
	}
	if (cpu) {
		memcpy(c->dst, m->p, len);
	} else {
		e = rt->MemcpyAsync(c->dst, m->p, len, SP_HIP_MEMCPY_DEVICE_TO_HOST, c->stream);
		if (!e)
			e = rt->StreamSynchronize(c->stream);
	}
	if (e) {
		gp_msg(why, wl, "hipMemcpyAsync, hipStreamSynchronize (the GPU's read)", rt, e);
		return -2;
	}
	return sp_rc_verify(c->dst, len, 0, seed);
}

/* The verdict: the weakest fence right every time, with every stronger one. */
static void gp_verdict(struct sp_gp_cell *cell)
{
	bool all_after = true;

	cell->weakest = -1;
	for (int f = SP_GP_NR_FENCES - 1; f >= 0; f--) {
		bool right = cell->runs[f] && cell->ok[f] == cell->runs[f];

		if (right && all_after)
			cell->weakest = f;
		if (!right)
			all_after = false;
		if (right && !all_after)
			cell->inconsistent = true;
	}
}

static void gp_cell(struct gp_ctx *c, struct gp_mem *m, struct sp_gp_cell *cell)
{
	struct ibv_mr *mr = NULL;
	struct sp_mr *smr = NULL;
	char why[256];

	for (int f = 0; f < SP_GP_NR_FENCES; f++)
		cell->first_bad[f] = -1;
	if (gp_reg(c, m, cell->route, &mr, &smr, cell))
		return;
	cell->available = true;
	for (unsigned int r = 0; r < c->o->repeat && cell->available; r++) {
		for (int f = 0; f < SP_GP_NR_FENCES; f++) {
			uint32_t seed = 0x9e3779b9u * (r * SP_GP_NR_FENCES + f + 1) + cell->dir;
			int64_t bad = gp_trial(c, m, mr, cell->route, cell->dir, f, seed, why,
					       sizeof(why));

			if (bad < -1) {
				cell->available = false;
				snprintf(cell->reason, sizeof(cell->reason), "%s", why);
				break;
			}
			cell->runs[f]++;
			if (bad == -1)
				cell->ok[f]++;
			else if (cell->first_bad[f] < 0)
				cell->first_bad[f] = bad;
		}
	}
	gp_unreg(c, mr, smr);
	gp_verdict(cell);
}

/*
 * staged: the staging buffer, hipHostMalloc()ed and registered on the
 * memory's device; on failure the staged cells say why.
 */
static void gp_stage_open(struct gp_ctx *c)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	void *p = NULL;
	sp_hip_err e;

	e = c->rt->HostMalloc(&p, c->bufsz, SP_HIP_HOST_MALLOC_DEFAULT);
	if (e || !p) {
		gp_msg(c->stage_reason, sizeof(c->stage_reason),
		       "the staging buffer: hipHostMalloc", c->rt, e);
		return;
	}
	c->stage = p;
	c->stage_mr = ibv_reg_mr(c->local.pd, c->stage, c->bufsz, access);
	if (!c->stage_mr)
		snprintf(c->stage_reason, sizeof(c->stage_reason),
			 "the staging buffer: ibv_reg_mr on %s: %s", c->local.name,
			 strerror(errno));
}

static void gp_close(struct gp_ctx *c)
{
	if (c->stage_mr)
		ibv_dereg_mr(c->stage_mr);
	if (c->stage)
		c->rt->HostFree(c->stage);
	if (c->peer_mr)
		ibv_dereg_mr(c->peer_mr);
	if (c->remote) {
		gp_remote_close(c);	/* @local is its data connection's */
	} else {
		sp_rc_close(&c->local);
		sp_rc_close(&c->peer);
	}
	if (c->stream)
		c->rt->StreamDestroy(c->stream);
	if (c->dev)
		sp_dev_close(c->dev);
	free(c->peer_buf);
	free(c->src);
	free(c->dst);
	free(c->zeros);
}

int sp_gp_run(const struct sp_hiprt *rt, const struct sp_gp_opts *o, struct sp_gp_result *res,
	      char *err, size_t errlen)
{
	struct gp_ctx c = { .rt = rt, .o = o };
	void *bufs[4] = { NULL };
	sp_hip_err e;
	int ret = 0;

	memset(res, 0, sizeof(*res));
	if (o->server && o->numbers) {
		snprintf(err, errlen, "%s",
			 "the figures (--numbers) are measured on one node only for now: run them without HOST");
		return -EINVAL;
	}
	c.bufsz = o->numbers && o->max_msg > o->size ? o->max_msg : o->size;
	sp_gp_facts(rt, &res->facts);
	gp_numbers_init(o, res);
	e = rt->SetDevice(0);
	if (!e)
		e = rt->StreamCreateWithFlags(&c.stream, SP_HIP_STREAM_NON_BLOCKING);
	if (e) {
		gp_msg(err, errlen, "hipSetDevice(0), hipStreamCreateWithFlags(hipStreamNonBlocking)",
		       rt, e);
		return -EIO;
	}
	for (int i = 0; i < 4; i++)
		if (posix_memalign(&bufs[i], 4096, c.bufsz)) {
			snprintf(err, errlen, "out of memory for %zu-byte host buffers", c.bufsz);
			ret = -ENOMEM;
		}
	c.peer_buf = bufs[0];
	c.src = bufs[1];
	c.dst = bufs[2];
	c.zeros = bufs[3];
	if (ret)
		goto out;
	memset(c.zeros, 0, c.bufsz);
	if (sp_dev_open(NULL, &c.dev) < 0) {
		c.dev = NULL;
		snprintf(c.dev_reason, sizeof(c.dev_reason), "%s", sp_errmsg());
	}
	if (o->server) {
		c.ops = &gp_remote_ops;
		e = gp_remote_open(&c, &res->facts, res->rdma_reason, sizeof(res->rdma_reason));
	} else {
		c.ops = &gp_lo_ops;
		e = gp_pair(&c, &res->facts, res->rdma_reason, sizeof(res->rdma_reason));
	}
	sp_gp_facts(rt, &res->facts);	/* again: now the NICs are known */
	if (e)
		goto out;
	if (o->routes & (1U << SP_GP_STAGED))
		gp_stage_open(&c);
	for (int k = 0; k < SP_GP_NR_KINDS; k++) {
		struct gp_mem m;
		char why[200] = "";
		int aret;

		if (!(o->kinds & (1U << k)))
			continue;
		if (o->progress) {
			char msg[96];

			snprintf(msg, sizeof(msg), "gpu proof: %s", sp_gp_kind_names[k]);
			o->progress(msg);
		}
		aret = gp_alloc(&c, k, o->size, &m, why, sizeof(why));
		for (int r = 0; r < SP_GP_NR_ROUTES; r++) {
			for (int d = 0; d < SP_GP_NR_DIRS; d++) {
				struct sp_gp_cell *cell = &res->cells[res->ncells];

				if (!(o->routes & (1U << r)) || !(o->dirs & (1U << d)))
					continue;
				res->ncells++;
				cell->kind = k;
				cell->route = r;
				cell->dir = d;
				cell->weakest = -1;
				if (aret) {
					snprintf(cell->reason, sizeof(cell->reason), "%s", why);
					continue;
				}
				gp_cell(&c, &m, cell);
			}
		}
		gp_free(&c, &m);
		if (o->numbers)
			gp_numbers_kind(&c, k, res, &res->numbers.k[k]);
	}
out:
	gp_close(&c);
	return ret;
}
