// SPDX-License-Identifier: MIT
/*
 * strixpeerctl gpu proof's memory kinds (proof.h names them): allocating
 * and freeing each, and registering one by each route; what the matrix
 * (proof.c) and the figures (numbers.c) both use.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "gpu/proof_int.h"

const char *const sp_gp_kind_names[SP_GP_NR_KINDS] = {
	"malloc", "hip-malloc", "host-coherent", "host-noncoherent", "managed",
	"fine-grained", "uncached", "sp-hostreg", "sp-import",
};
const char *const sp_gp_route_names[SP_GP_NR_ROUTES] = { "reg_mr", "sp_reg_mr", "staged" };
const char *const sp_gp_dir_names[SP_GP_NR_DIRS] = { "gpu-write", "peer-write" };
const char *const sp_gp_fence_names[SP_GP_NR_FENCES] = { "none", "stream", "device", "system" };

void gp_msg(char *err, size_t len, const char *what, const struct sp_hiprt *rt, sp_hip_err e)
{
	snprintf(err, len, "%s: %s", what, sp_hiprt_strerror(rt, e));
}

/*
 * sp-import: a strixpeer buffer, its dma-buf (sp_buf_export()) imported by
 * hipImportExternalMemory() and mapped for the GPU by
 * hipExternalMemoryGetMappedBuffer(). ROCm keeps its own reference to the
 * dma-buf (KFD's import) and leaves the fd to the caller: gp_free() closes
 * it after hipDestroyExternalMemory().
 */
static int gp_alloc_import(struct gp_ctx *c, struct gp_mem *m, char *why, size_t wl)
{
	const struct sp_hiprt *rt = c->rt;
	struct sp_hip_extmem_handle_desc hd;
	struct sp_hip_extmem_buffer_desc bd;
	void *gpu = NULL;
	sp_hip_err e;
	int ret;

	if (!c->dev) {
		snprintf(why, wl, "no strixpeer buffer: %s", c->dev_reason);
		return -ENODEV;
	}
	if (sp_buf_alloc(c->dev, m->len, -1, 0, &m->buf) < 0) {
		snprintf(why, wl, "sp_buf_alloc: %s", sp_errmsg());
		return -ENOMEM;
	}
	ret = sp_buf_export(m->buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &m->dmabuf);
	if (ret < 0) {
		snprintf(why, wl, "sp_buf_export: %s", sp_errmsg());
		m->dmabuf = -1;
		goto out_free;
	}
	memset(&hd, 0, sizeof(hd));
	hd.type = SP_HIP_EXT_MEM_OPAQUE_FD;
	hd.handle.fd = m->dmabuf;
	hd.size = sp_buf_size(m->buf);
	e = rt->ImportExternalMemory(&m->ext, &hd);
	if (e) {
		gp_msg(why, wl, "hipImportExternalMemory of a strixpeer buffer's dma-buf", rt, e);
		m->ext = NULL;
		ret = -EIO;
		goto out_close;
	}
	memset(&bd, 0, sizeof(bd));
	bd.size = m->len;
	e = rt->ExternalMemoryGetMappedBuffer(&gpu, m->ext, &bd);
	if (e || !gpu) {
		gp_msg(why, wl, "hipExternalMemoryGetMappedBuffer", rt, e);
		ret = -EIO;
		goto out_destroy;
	}
	m->p = gpu;
	m->cpu = sp_buf_addr(m->buf);
	return 0;
out_destroy:
	rt->DestroyExternalMemory(m->ext);
	m->ext = NULL;
out_close:
	close(m->dmabuf);
	m->dmabuf = -1;
out_free:
	sp_buf_free(m->buf);
	m->buf = NULL;
	return ret < 0 ? ret : -EIO;
}

int gp_alloc(struct gp_ctx *c, enum sp_gp_kind kind, size_t len, struct gp_mem *m, char *why,
	     size_t wl)
{
	const struct sp_hiprt *rt = c->rt;
	void *p = NULL;
	sp_hip_err e = 0;
	const char *what = "";

	memset(m, 0, sizeof(*m));
	m->kind = kind;
	m->len = len;
	m->dmabuf = -1;
	switch (kind) {
	case SP_GP_MALLOC:
		if (posix_memalign(&p, 4096, len)) {
			snprintf(why, wl, "posix_memalign: out of memory");
			return -ENOMEM;
		}
		break;
	case SP_GP_HIP_MALLOC:
		what = "hipMalloc";
		e = rt->Malloc(&p, len);
		break;
	case SP_GP_HOST_COHERENT:
		what = "hipHostMalloc(hipHostMallocCoherent)";
		e = rt->HostMalloc(&p, len, SP_HIP_HOST_MALLOC_COHERENT);
		break;
	case SP_GP_HOST_NONCOHERENT:
		what = "hipHostMalloc(hipHostMallocNonCoherent)";
		e = rt->HostMalloc(&p, len, SP_HIP_HOST_MALLOC_NON_COHERENT);
		break;
	case SP_GP_MANAGED:
		what = "hipMallocManaged";
		e = rt->MallocManaged(&p, len, SP_HIP_MEM_ATTACH_GLOBAL);
		break;
	case SP_GP_FINE:
		what = "hipExtMallocWithFlags(hipDeviceMallocFinegrained)";
		e = rt->ExtMallocWithFlags(&p, len, SP_HIP_DEVICE_MALLOC_FINEGRAINED);
		break;
	case SP_GP_UNCACHED:
		what = "hipExtMallocWithFlags(hipDeviceMallocUncached)";
		e = rt->ExtMallocWithFlags(&p, len, SP_HIP_DEVICE_MALLOC_UNCACHED);
		break;
	case SP_GP_SP_HOSTREG:
		if (!c->dev) {
			snprintf(why, wl, "no strixpeer buffer: %s", c->dev_reason);
			return -ENODEV;
		}
		if (sp_buf_alloc(c->dev, len, -1, 0, &m->buf) < 0) {
			snprintf(why, wl, "sp_buf_alloc: %s", sp_errmsg());
			return -ENOMEM;
		}
		p = sp_buf_addr(m->buf);
		what = "hipHostRegister(hipHostRegisterMapped) of a strixpeer buffer";
		e = rt->HostRegister(p, len, SP_HIP_HOST_REGISTER_MAPPED);
		m->registered = !e;
		break;
	case SP_GP_SP_IMPORT:
		return gp_alloc_import(c, m, why, wl);
	default:
		return -EINVAL;
	}
	m->p = p;
	m->cpu = p;
	if (e) {
		gp_msg(why, wl, what, rt, e);
		if (kind == SP_GP_SP_HOSTREG)
			sp_buf_free(m->buf);
		m->p = NULL;
		m->cpu = NULL;
		return -EIO;
	}
	return 0;
}

void gp_free(struct gp_ctx *c, struct gp_mem *m)
{
	const struct sp_hiprt *rt = c->rt;

	if (!m->p)
		return;
	switch (m->kind) {
	case SP_GP_MALLOC:
		free(m->p);
		break;
	case SP_GP_HOST_COHERENT:
	case SP_GP_HOST_NONCOHERENT:
		rt->HostFree(m->p);
		break;
	case SP_GP_SP_HOSTREG:
		if (m->registered)
			rt->HostUnregister(m->p);
		sp_buf_free(m->buf);
		break;
	case SP_GP_SP_IMPORT:
		rt->Free(m->p);		/* the mapped buffer holds the import too */
		rt->DestroyExternalMemory(m->ext);
		close(m->dmabuf);
		sp_buf_free(m->buf);
		break;
	default:
		rt->Free(m->p);
		break;
	}
	m->p = NULL;
	m->cpu = NULL;
}

int gp_reg(struct gp_ctx *c, struct gp_mem *m, enum sp_gp_route route, struct ibv_mr **mr,
	   struct sp_mr **smr, struct sp_gp_cell *cell)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	static const char *const paths[] = { "", "plain", "dmabuf", "peerdirect" };
	int ret;

	if (route == SP_GP_STAGED) {
		/* the memory stays unregistered: the staging buffer is */
		if (!c->stage_mr) {
			snprintf(cell->reason, sizeof(cell->reason), "%s", c->stage_reason);
			return -ENODEV;
		}
		*mr = c->stage_mr;
		snprintf(cell->reg_path, sizeof(cell->reg_path), "staged");
		return 0;
	}
	if (route == SP_GP_REG_MR) {
		*mr = ibv_reg_mr(c->local.pd, m->cpu, m->len, access);
		if (!*mr) {
			ret = -errno;
			snprintf(cell->reason, sizeof(cell->reason), "ibv_reg_mr on %s: %s",
				 c->local.name, strerror(errno));
			return ret;
		}
		snprintf(cell->reg_path, sizeof(cell->reg_path), "ibv_reg_mr");
		return 0;
	}
	if (!c->dev) {
		snprintf(cell->reason, sizeof(cell->reason), "sp_reg_mr: %s", c->dev_reason);
		return -ENODEV;
	}
	ret = sp_reg_mr(c->dev, c->local.pd, m->cpu, m->len, access, SP_REG_NO_CACHE, smr);
	if (ret < 0) {
		snprintf(cell->reason, sizeof(cell->reason), "sp_reg_mr: %s", sp_errmsg());
		return ret;
	}
	*mr = sp_mr_ibv(*smr);
	ret = sp_mr_path(*smr);
	snprintf(cell->reg_path, sizeof(cell->reg_path), "%s",
		 ret > 0 && ret < 4 ? paths[ret] : "?");
	return 0;
}

void gp_unreg(struct gp_ctx *c, struct ibv_mr *mr, struct sp_mr *smr)
{
	if (smr)
		sp_dereg_mr(smr);
	else if (mr && mr != c->stage_mr)
		ibv_dereg_mr(mr);
}
