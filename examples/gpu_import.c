// SPDX-License-Identifier: MIT
/*
 * gpu_import - another node RDMA-writes into GPU memory, the PeerDirect way
 *
 *   target:    gpu_import [-g] -l ADDR [PORT [SIZE]]  (ADDR: this node's RDMA IP)
 *   initiator: gpu_import HOST [PORT [SIZE]]          (default 13378, 16 MiB)
 *
 * The target declares a GPU buffer's mapping and dma-buf to strixpeer
 * (sp_import_dmabuf) and registers it with sp_reg_mr(), which picks
 * ibv_reg_dmabuf_mr(), plain ibv_reg_mr() or strixpeer's PeerDirect client
 * and says which; address and rkey go to the initiator in the rdma_cm
 * private data. The initiator RDMA-writes a pattern and disconnects; the
 * target checks every byte through the GPU-side mapping (exit status 0).
 * The GPU is /dev/dri/card0 or $GPU: amdgpu, or vgem (modprobe vgem), the
 * tests' stand-in:
 *  - default: the GPU imports a strixpeer buffer's dma-buf (PRIME), the
 *    target maps what the GPU hands back: unified memory given to the GPU,
 *    registrable by any NIC (Soft-RoCE included);
 *  - -g: the GPU allocates (a dumb buffer mapped through the GPU's device
 *    node: a PFN mapping, as TTM maps VRAM/GTT). That needs a NIC with
 *    dma-buf MRs (mlx5) or a peer-memory core (MLNX_OFED/DOCA-OFED,
 *    Ubuntu's linux-nvidia kernels) for strixpeer's client; Soft-RoCE on
 *    a stock kernel has neither, and sp_reg_mr() says so (exit status 2). With HIP: hipMalloc()
 *    and hsa_amd_portable_export_dmabuf(). On a cluster (README):
 *   cc -O2 gpu_import.c $(pkg-config --cflags --libs strixpeer librdmacm libibverbs) \
 *       -o gpu_import
 *   nodeB$ ./gpu_import -g -l 10.0.0.2        nodeA$ ./gpu_import 10.0.0.2
 */
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <rdma/rdma_verbs.h>
#include <strixpeer.h>
#include "example.h"

/* DRM uapi (include/uapi/drm/drm.h, drm_mode.h), so that no libdrm is needed */
struct dumb { uint32_t height, width, bpp, flags, handle, pitch; uint64_t size; };
struct map_dumb { uint32_t handle, pad; uint64_t offset; };
struct prime { uint32_t handle, flags; int32_t fd; };
#define PRIME_TO_FD	_IOWR('d', 0x2d, struct prime)
#define FD_TO_PRIME	_IOWR('d', 0x2e, struct prime)
#define CREATE_DUMB	_IOWR('d', 0xB2, struct dumb)
#define MAP_DUMB	_IOWR('d', 0xB3, struct map_dumb)

struct remote { uint64_t addr; uint32_t rkey, pad; };

/* The GPU's buffer: its dma-buf in *fd; returns the GPU-side mapping. */
static void *gpu_buffer(struct sp_dev *dev, size_t len, int gpu_alloc, int *fd)
{
	struct dumb d = { .height = (uint32_t)(len / 16384), .width = 4096, .bpp = 32 };
	struct prime p = { .flags = O_RDWR | O_CLOEXEC };
	struct map_dumb m = { 0 };
	struct sp_buf *buf;
	int card = open(getenv("GPU") ? getenv("GPU") : "/dev/dri/card0", O_RDWR | O_CLOEXEC), x;
	void *map;

	if (card < 0)
		DIE("gpu_import: GPU device: %m (modprobe vgem; GPU=/dev/dri/cardN)");
	if (gpu_alloc) {
		if (ioctl(card, CREATE_DUMB, &d) || (p.handle = m.handle = d.handle,
		    ioctl(card, PRIME_TO_FD, &p)) || ioctl(card, MAP_DUMB, &m))
			DIE("gpu_import: GPU buffer: %m");
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, card, (off_t)m.offset);
	} else {	/* the buffer lives on in the GPU's import after sp_buf_free() */
		if (sp_buf_alloc(dev, len, SP_NODE_DEFAULT, 0, &buf) ||
		    sp_buf_export(buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &x))
			DIE("gpu_import: strixpeer: %s", sp_errmsg());
		p.fd = x;
		if (ioctl(card, FD_TO_PRIME, &p) || ioctl(card, PRIME_TO_FD, &p))
			DIE("gpu_import: the GPU's import: %m");
		close(x);
		sp_buf_free(buf);
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, 0);
	}
	if (map == MAP_FAILED)
		DIE("gpu_import: mmap: %m");
	*fd = p.fd;
	return map;
}

int main(int argc, char **argv)
{
	int g = argc > 1 && !strcmp(argv[1], "-g"), t = argc > 1 + g && !strcmp(argv[1 + g], "-l");
	int a = 1 + g + t, fd, e = 0;
	struct rdma_addrinfo hints = { .ai_flags = t ? RAI_PASSIVE : 0,
				       .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr qa = { .cap = { 1, 1, 1, 1, 0 }, .qp_type = IBV_QPT_RC, .sq_sig_all = 1 };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .private_data_len = sizeof(struct remote) };
	size_t len = argc > a + 2 ? (strtoull(argv[a + 2], NULL, 0) + 16383) & ~16383ULL : 16 << 20;
	struct rdma_cm_id *listen, *id;
	struct rdma_cm_event *ev;
	struct sp_import *imp;
	struct ibv_pd *pd;
	struct sp_dev *dev;
	struct sp_mr *smr;
	struct ibv_mr *mr;
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };
	struct remote r;
	uint8_t *p;

	if (argc <= a)
		DIE("usage: gpu_import [-g] -l ADDR [PORT [SIZE]] | gpu_import HOST [PORT [SIZE]]");
	if (rdma_getaddrinfo(argv[a], argc > a + 1 ? argv[a + 1] : "13378", &hints, &res))
		DIE("gpu_import: rdma_getaddrinfo %s: %m", argv[a]);
	if (!t) {	/* the initiator: host memory, one RDMA WRITE */
		if (!(p = aligned_alloc(4096, len)) || rdma_create_ep(&id, res, NULL, &qa) ||
		    !(mr = rdma_reg_msgs(id, p, len)) || rdma_connect(id, &cp))
			DIE("gpu_import: connecting to %s: %m", argv[a]);
		memcpy(&r, id->event->param.conn.private_data, sizeof(r));
		pattern(p, len, len, 0);
		if (rdma_post_write(id, NULL, p, len, mr, 0, r.addr, r.rkey) ||
		    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
			DIE("gpu_import: RDMA WRITE: %s", ibv_wc_status_str(wc.status));
		printf("initiator: wrote %zu bytes into the target's GPU memory\n", len);
		rdma_disconnect(id);
		rdma_dereg_mr(mr);
		rdma_destroy_ep(id);
		return 0;
	}
	if (rdma_create_ep(&listen, res, NULL, NULL) || !listen->verbs ||
	    !(pd = ibv_alloc_pd(listen->verbs)))
		DIE("gpu_import: no RDMA device has the address %s: %m", argv[a]);
	if (sp_dev_open(NULL, &dev))
		DIE("gpu_import: strixpeer: %s", sp_errmsg());
	p = gpu_buffer(dev, len, g, &fd);
	if (sp_import_dmabuf(dev, fd, 0, len, p, &imp))	/* strixpeer keeps a reference */
		DIE("gpu_import: sp_import_dmabuf: %s", sp_errmsg());
	close(fd);
	memset(p, 0, len);
	if (sp_reg_mr(dev, pd, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
		      &smr) < 0) {
		fprintf(stderr, "gpu_import: sp_reg_mr: %s\n", sp_errmsg());
		return 2;
	}
	r = (struct remote){ (uintptr_t)p, sp_mr_ibv(smr)->rkey, 0 };
	cp.private_data = &r;
	if (rdma_listen(listen, 1))
		DIE("gpu_import: rdma_listen: %m");
	printf("target: %zu bytes of GPU memory on %s, registered via %s; listening\n", len,
	       ibv_get_device_name(listen->verbs->device), sp_reg_path_name(sp_mr_path(smr)));
	fflush(stdout);
	if (rdma_get_request(listen, &id) || rdma_create_qp(id, pd, &qa) || rdma_accept(id, &cp))
		DIE("gpu_import: accepting the connection: %m");
	while (e != RDMA_CM_EVENT_DISCONNECTED && !rdma_get_cm_event(id->channel, &ev)) {
		e = ev->event;
		rdma_ack_cm_event(ev);
	}
	if (pattern(p, len, len, 1) >= 0)
		DIE("gpu_import: byte %lld read through the GPU-side mapping is wrong",
		    (long long)pattern(p, len, len, 1));
	printf("target: %zu bytes written by the other node, every byte verified through the GPU-side mapping\n",
	       len);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	sp_dereg_mr(smr);
	sp_import_free(imp);
	sp_dev_close(dev);
	ibv_dealloc_pd(pd);
	rdma_destroy_ep(listen);
	return 0;
}
