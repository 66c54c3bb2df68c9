// SPDX-License-Identifier: MIT
/*
 * hip_export - hipMalloc() memory registered with a NIC through its dma-buf
 *
 *   hip_export [SIZE]          (default 64 MiB)
 *
 * The other direction from hip_import.c, for NICs that can take GPU
 * memory: ConnectX-4 and later (mlx5: dma-buf MRs; PeerDirect with
 * MLNX/DOCA-OFED), E810 (irdma: pinned dma-buf MRs). Plain ibv_reg_mr() on
 * a hipMalloc() pointer fails with EFAULT on a kernel without a
 * peer-memory core: its pages are not pinnable normal memory.
 *
 *  1. hipMalloc(): GPU memory (on an APU, a GTT or carve-out BO);
 *  2. hsa_amd_portable_export_dmabuf(): its dma-buf fd and the pointer's
 *     offset into it (ROCm 5.6 and later; Debian sid's ROCm has it);
 *  3. sp_import_dmabuf(): tells strixpeer where those bytes are mapped;
 *  4. sp_reg_mr(): ibv_reg_dmabuf_mr() on the dma-buf where the NIC has
 *     it, else ibv_reg_mr() through strixpeer's PeerDirect client where a
 *     peer-memory core is loaded, else an error naming what this node
 *     lacks; sp_mr_path() says which path served;
 *  5. before a remote peer reads what a kernel wrote: hipDeviceSynchronize()
 *     (or an event/stream sync); for flags the NIC polls, allocate with
 *     hipExtMallocWithFlags(..., hipDeviceMallocUncached).
 *
 * Build (HIP and HSA headers and libraries, e.g. Debian's libamdhip64-dev
 * and libhsa-runtime-dev):
 *   cc -O2 -D__HIP_PLATFORM_AMD__ hip_export.c -o hip_export \
 *       $(pkg-config --cflags --libs strixpeer) -lamdhip64 -lhsa-runtime64
 * The suite compiles this file against Debian's ROCm headers; no test here
 * runs a GPU.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hip/hip_runtime_api.h>
#include <hsa/hsa_ext_amd.h>
#include <infiniband/verbs.h>
#include <strixpeer.h>
#include "example.h"

#define HIP(call) do { hipError_t e_ = (call); if (e_ != hipSuccess) \
	DIE("hip_export: %s: %s", #call, hipGetErrorString(e_)); } while (0)

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoull(argv[1], NULL, 0) : 64UL << 20;
	long page = sysconf(_SC_PAGESIZE);
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct sp_import *imp;
	struct sp_dev *dev;
	struct sp_mr *smr;
	struct ibv_pd *pd;
	void *gpu = NULL;
	uint64_t offset;
	int fd, n, ret;

	if (!len || len % (size_t)page)
		DIE("hip_export: SIZE must be a non-zero multiple of %ld", page);
	HIP(hipMalloc(&gpu, len));
	HIP(hipMemset(gpu, 0, len));
	HIP(hipDeviceSynchronize());
	if (hsa_amd_portable_export_dmabuf(gpu, len, &fd, &offset) != HSA_STATUS_SUCCESS)
		DIE("hip_export: hsa_amd_portable_export_dmabuf failed (ROCm 5.6+, a kernel with dma-buf export)");

	if (sp_dev_open(NULL, &dev) ||
	    sp_import_dmabuf(dev, fd, offset, len, gpu, &imp))
		DIE("hip_export: %s", sp_errmsg());

	devs = ibv_get_device_list(&n);
	if (!devs || !n)
		DIE("hip_export: no RDMA device");
	ctx = ibv_open_device(devs[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd)
		DIE("hip_export: cannot open %s", ibv_get_device_name(devs[0]));
	ret = sp_reg_mr(dev, pd, gpu, len, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 0, &smr);
	if (ret < 0) {
		/* e.g. rxe or mlx4 on a kernel without a peer-memory core:
		 * use hip_import.c's direction instead */
		fprintf(stderr, "hip_export: %s\n", sp_errmsg());
		return 2;
	}
	printf("hip_export: %zu bytes of GPU memory registered on %s via %s: addr %p rkey %#" PRIx32 "\n",
	       len, ibv_get_device_name(devs[0]), sp_reg_path_name(sp_mr_path(smr)),
	       gpu, sp_mr_ibv(smr)->rkey);

	sp_dereg_mr(smr);
	sp_import_free(imp);	/* invalidates what is still registered */
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	sp_dev_close(dev);
	hsa_amd_portable_close_dmabuf(fd);
	HIP(hipFree(gpu));
	return 0;
}
