// SPDX-License-Identifier: MIT
/*
 * hip_import - the GPU computes in a strixpeer buffer that any NIC registers
 *
 *   hip_import [SIZE]          (default 64 MiB)
 *
 * For NICs with neither dma-buf MRs nor a peer-memory client (ConnectX-3
 * and mlx4, Soft-RoCE rxe and siw, USB4/Thunderbolt networking): instead of
 * handing the NIC GPU memory, hand the GPU NIC-registrable memory. On an
 * APU (Strix Halo) both are the same DRAM, so nothing is copied.
 *
 *  1. sp_buf_alloc(): a strixpeer buffer (pinned, 2 MiB pages);
 *  2. sp_buf_export(): its dma-buf;
 *  3. hipImportExternalMemory(OpaqueFd) + hipExternalMemoryGetMappedBuffer():
 *     the same pages as a HIP device pointer (ROCm imports the dma-buf
 *     through KFD; amdgpu places a foreign dma-buf in GTT, which KFD
 *     accepts - read from Linux 6.12's amdgpu_amdkfd_gpuvm.c and
 *     amdgpu_dma_buf.c). hsa_amd_interop_map_buffer() is the HSA-level
 *     equivalent;
 *  4. the GPU writes (here hipMemsetD32; a kernel in a real program);
 *  5. hipDeviceSynchronize() before the NIC reads: the NIC does not see
 *     the GPU's L2 (docs/gpu-memory.md, "What the NIC sees");
 *  6. ibv_reg_mr() on the buffer's CPU mapping - the plain path every verbs
 *     driver has - and the CPU checks what the GPU wrote.
 *
 * Build (HIP's headers and libamdhip64, e.g. Debian's libamdhip64-dev):
 *   cc -O2 -D__HIP_PLATFORM_AMD__ hip_import.c -o hip_import \
 *       $(pkg-config --cflags --libs strixpeer) -lamdhip64
 * The suite compiles this file against Debian's ROCm headers; no test here
 * runs a GPU.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hip/hip_runtime_api.h>
#include <infiniband/verbs.h>
#include <strixpeer.h>
#include "example.h"

#define HIP(call) do { hipError_t e_ = (call); if (e_ != hipSuccess) \
	DIE("hip_import: %s: %s", #call, hipGetErrorString(e_)); } while (0)

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoull(argv[1], NULL, 0) : 64UL << 20;
	hipExternalMemoryHandleDesc desc;
	hipExternalMemoryBufferDesc bdesc;
	hipExternalMemory_t ext;
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct sp_dev *dev;
	struct sp_buf *buf;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	void *gpu = NULL;
	uint32_t *cpu;
	int fd, n;

	if (!len || len % 4)
		DIE("hip_import: SIZE must be a non-zero multiple of 4");
	if (sp_dev_open(NULL, &dev) || sp_buf_alloc(dev, len, SP_NODE_DEFAULT, 0, &buf))
		DIE("hip_import: %s", sp_errmsg());
	len = sp_buf_size(buf);
	if (sp_buf_export(buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &fd))
		DIE("hip_import: %s", sp_errmsg());

	memset(&desc, 0, sizeof(desc));
	desc.type = hipExternalMemoryHandleTypeOpaqueFd;
	desc.handle.fd = fd;
	desc.size = len;
	HIP(hipImportExternalMemory(&ext, &desc));
	/*
	 * Unlike CUDA's, ROCm's import does not take the fd: it holds the
	 * dma-buf itself (hsa_amd_interop_map_buffer()), so the fd is still
	 * ours to close. Vulkan's import, in examples/vulkan_import.c, does take it.
	 */
	close(fd);
	memset(&bdesc, 0, sizeof(bdesc));
	bdesc.offset = 0;
	bdesc.size = len;
	HIP(hipExternalMemoryGetMappedBuffer(&gpu, ext, &bdesc));

	/* The GPU writes the buffer, then everything it wrote is in DRAM. */
	HIP(hipMemsetD32((hipDeviceptr_t)gpu, 0x5eed5eed, len / 4));
	HIP(hipDeviceSynchronize());

	devs = ibv_get_device_list(&n);
	if (!devs || !n)
		DIE("hip_import: no RDMA device (rdma link add rxe0 type rxe netdev IF for Soft-RoCE)");
	ctx = ibv_open_device(devs[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd)
		DIE("hip_import: cannot open %s", ibv_get_device_name(devs[0]));
	cpu = sp_buf_addr(buf);
	mr = ibv_reg_mr(pd, cpu, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ);
	if (!mr)
		DIE("hip_import: ibv_reg_mr on %s: %m", ibv_get_device_name(devs[0]));
	for (size_t i = 0; i < len / 4; i++)
		if (cpu[i] != 0x5eed5eed)
			DIE("hip_import: byte %zu: the CPU does not see what the GPU wrote", i * 4);
	printf("hip_import: %zu bytes written by the GPU, registered on %s: addr %p rkey %#" PRIx32 "\n",
	       len, ibv_get_device_name(devs[0]), (void *)cpu, mr->rkey);

	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	HIP(hipFree(gpu));
	HIP(hipDestroyExternalMemory(ext));
	sp_buf_free(buf);
	sp_dev_close(dev);
	return 0;
}
