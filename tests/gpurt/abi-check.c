// SPDX-License-Identifier: MIT
/*
 * user/gpu/hiprt.h's declarations against ROCm's own headers: every
 * constant, the descriptors' sizes and offsets, the error types' sizes,
 * and every name the table looks up declared by ROCm with the arity the
 * table calls it with. Compiled by tests/host/gpu-host.sh with sid's
 * ROCm headers (-D__HIP_PLATFORM_AMD__), never linked or run.
 */
#include <stddef.h>
#include <hip/hip_runtime_api.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include "gpu/hiprt.h"

#define SAME(ours, theirs) _Static_assert((ours) == (theirs), #ours " != " #theirs)
#define LAYOUT(ours, theirs, m) \
	_Static_assert(offsetof(struct ours, m) == offsetof(theirs, m), #ours "." #m)

SAME(SP_HIP_HOST_MALLOC_DEFAULT, hipHostMallocDefault);
SAME(SP_HIP_HOST_MALLOC_PORTABLE, hipHostMallocPortable);
SAME(SP_HIP_HOST_MALLOC_MAPPED, hipHostMallocMapped);
SAME(SP_HIP_HOST_MALLOC_COHERENT, hipHostMallocCoherent);
SAME(SP_HIP_HOST_MALLOC_NON_COHERENT, hipHostMallocNonCoherent);
SAME(SP_HIP_MEM_ATTACH_GLOBAL, hipMemAttachGlobal);
SAME(SP_HIP_DEVICE_MALLOC_DEFAULT, hipDeviceMallocDefault);
SAME(SP_HIP_DEVICE_MALLOC_FINEGRAINED, hipDeviceMallocFinegrained);
SAME(SP_HIP_DEVICE_MALLOC_UNCACHED, hipDeviceMallocUncached);
SAME(SP_HIP_HOST_REGISTER_DEFAULT, hipHostRegisterDefault);
SAME(SP_HIP_HOST_REGISTER_MAPPED, hipHostRegisterMapped);
SAME(SP_HIP_MEMCPY_HOST_TO_DEVICE, hipMemcpyHostToDevice);
SAME(SP_HIP_MEMCPY_DEVICE_TO_HOST, hipMemcpyDeviceToHost);
SAME(SP_HIP_MEMCPY_DEFAULT, hipMemcpyDefault);
SAME(SP_HIP_STREAM_DEFAULT, hipStreamDefault);
SAME(SP_HIP_STREAM_NON_BLOCKING, hipStreamNonBlocking);
SAME(SP_HIP_EXT_MEM_OPAQUE_FD, hipExternalMemoryHandleTypeOpaqueFd);
SAME(0, hipSuccess);
SAME(0, HSA_STATUS_SUCCESS);
SAME(sizeof(sp_hip_err), sizeof(hipError_t));
SAME(sizeof(sp_hsa_status), sizeof(hsa_status_t));
SAME(sizeof(sp_hip_stream), sizeof(hipStream_t));
SAME(sizeof(sp_hip_extmem), sizeof(hipExternalMemory_t));

SAME(sizeof(struct sp_hip_extmem_handle_desc), sizeof(hipExternalMemoryHandleDesc));
LAYOUT(sp_hip_extmem_handle_desc, hipExternalMemoryHandleDesc, type);
LAYOUT(sp_hip_extmem_handle_desc, hipExternalMemoryHandleDesc, handle);
LAYOUT(sp_hip_extmem_handle_desc, hipExternalMemoryHandleDesc, handle.fd);
LAYOUT(sp_hip_extmem_handle_desc, hipExternalMemoryHandleDesc, size);
LAYOUT(sp_hip_extmem_handle_desc, hipExternalMemoryHandleDesc, flags);
LAYOUT(sp_hip_extmem_handle_desc, hipExternalMemoryHandleDesc, reserved);
SAME(sizeof(struct sp_hip_extmem_buffer_desc), sizeof(hipExternalMemoryBufferDesc));
LAYOUT(sp_hip_extmem_buffer_desc, hipExternalMemoryBufferDesc, offset);
LAYOUT(sp_hip_extmem_buffer_desc, hipExternalMemoryBufferDesc, size);
LAYOUT(sp_hip_extmem_buffer_desc, hipExternalMemoryBufferDesc, flags);
LAYOUT(sp_hip_extmem_buffer_desc, hipExternalMemoryBufferDesc, reserved);

/* Each entry point called as hiprt.h's pointer calls it (never run). */
void sp_abi_calls(void);
void sp_abi_calls(void)
{
	void *p = NULL;
	int i = 0;
	char name[8];
	const char *s;
	hipStream_t st = NULL;
	hipExternalMemory_t em = NULL;
	hipExternalMemoryHandleDesc hd = { 0 };
	hipExternalMemoryBufferDesc bd = { 0 };
	uint64_t off;

	(void)hipRuntimeGetVersion(&i);
	(void)hipGetErrorString(hipSuccess);
	(void)hipGetDeviceCount(&i);
	(void)hipSetDevice(0);
	(void)hipDeviceGetName(name, (int)sizeof(name), 0);
	(void)hipMalloc(&p, 4096);
	(void)hipFree(p);
	(void)hipHostMalloc(&p, 4096, 0u);
	(void)hipHostFree(p);
	(void)hipMallocManaged(&p, 4096, 1u);
	(void)hipExtMallocWithFlags(&p, 4096, 1u);
	(void)hipHostRegister(p, 4096, 0u);
	(void)hipHostUnregister(p);
	(void)hipImportExternalMemory(&em, &hd);
	(void)hipExternalMemoryGetMappedBuffer(&p, em, &bd);
	(void)hipDestroyExternalMemory(em);
	(void)hipMemcpy(p, p, 4096, hipMemcpyDefault);
	(void)hipMemcpyAsync(p, p, 4096, hipMemcpyDefault, st);
	(void)hipMemsetD32Async((hipDeviceptr_t)p, 0, 1024, st);
	(void)hipStreamCreate(&st);
	(void)hipStreamCreateWithFlags(&st, hipStreamNonBlocking);
	(void)hipStreamDestroy(st);
	(void)hipStreamSynchronize(st);
	(void)hipDeviceSynchronize();
	(void)hsa_init();
	(void)hsa_shut_down();
	(void)hsa_status_string(HSA_STATUS_SUCCESS, &s);
	(void)hsa_amd_portable_export_dmabuf(p, 4096, &i, &off);
	(void)hsa_amd_portable_close_dmabuf(i);
}
