/* SPDX-License-Identifier: MIT */
/*
 * The HIP/HSA entry points strixpeerctl's GPU commands use, in one table
 * filled at run time by dlopen()/dlsym() of ROCm's libamdhip64 and
 * libhsa-runtime64: strixpeer has no build-time dependency on ROCm.
 *
 * Only what the calls need of ROCm's ABI is declared here, under our own
 * names (sp_hip_*): opaque handles as pointers, error codes as int, the
 * two external-memory descriptors and the flag values the commands pass.
 * tests/host/gpu-host.sh compiles these declarations against ROCm's own
 * headers (tests/gpurt/abi-check.c) and checks every size, offset and
 * constant.
 *
 * A stand-in runtime exporting the same symbols (the suite's) is loaded
 * the same way: sp_hiprt_open()'s @hip_lib / @hsa_lib, or the
 * STRIXPEER_HIP_LIB / STRIXPEER_HSA_LIB environment variables, name the
 * file to load instead of ROCm's.
 */
#ifndef SP_HIPRT_H
#define SP_HIPRT_H

#include <stddef.h>
#include <stdint.h>

/* hipError_t: 0 is hipSuccess; hsa_status_t: 0 is HSA_STATUS_SUCCESS. */
typedef int sp_hip_err;
typedef int sp_hsa_status;
typedef void *sp_hip_stream;	/* hipStream_t (NULL: the null stream) */
typedef void *sp_hip_extmem;	/* hipExternalMemory_t */

/* hipHostMalloc() flags */
#define SP_HIP_HOST_MALLOC_DEFAULT	0x0u
#define SP_HIP_HOST_MALLOC_PORTABLE	0x1u
#define SP_HIP_HOST_MALLOC_MAPPED	0x2u
#define SP_HIP_HOST_MALLOC_COHERENT	0x40000000u
#define SP_HIP_HOST_MALLOC_NON_COHERENT	0x80000000u
/* hipMallocManaged() flags */
#define SP_HIP_MEM_ATTACH_GLOBAL	0x1u
/* hipExtMallocWithFlags() flags */
#define SP_HIP_DEVICE_MALLOC_DEFAULT	0x0u
#define SP_HIP_DEVICE_MALLOC_FINEGRAINED	0x1u
#define SP_HIP_DEVICE_MALLOC_UNCACHED	0x3u
/* hipHostRegister() flags */
#define SP_HIP_HOST_REGISTER_DEFAULT	0x0u
#define SP_HIP_HOST_REGISTER_MAPPED	0x2u
/* hipMemcpyKind */
#define SP_HIP_MEMCPY_HOST_TO_DEVICE	1
#define SP_HIP_MEMCPY_DEVICE_TO_HOST	2
#define SP_HIP_MEMCPY_DEFAULT		4
/* hipStreamCreateWithFlags() flags */
#define SP_HIP_STREAM_DEFAULT		0x0u
#define SP_HIP_STREAM_NON_BLOCKING	0x1u
/* hipExternalMemoryHandleType: a POSIX fd (ROCm takes a dma-buf's) */
#define SP_HIP_EXT_MEM_OPAQUE_FD	1

/* hipExternalMemoryHandleDesc, Linux members only (the union is 16 bytes). */
struct sp_hip_extmem_handle_desc {
	int type;
	union {
		int fd;
		struct {
			void *handle;
			const void *name;
		} win32;
	} handle;
	unsigned long long size;
	unsigned int flags;
	unsigned int reserved[16];
};

/* hipExternalMemoryBufferDesc */
struct sp_hip_extmem_buffer_desc {
	unsigned long long offset;
	unsigned long long size;
	unsigned int flags;
	unsigned int reserved[16];
};

/*
 * The table. Every member is filled, or sp_hiprt_open() fails naming the
 * first symbol it could not find. Names are ROCm's without "hip"/"hsa_".
 */
struct sp_hiprt {
	void *hip_dl, *hsa_dl;
	char hip_path[256];		/* the file that was loaded */
	char hsa_path[256];

	sp_hip_err (*RuntimeGetVersion)(int *version);
	const char *(*GetErrorString)(sp_hip_err err);
	sp_hip_err (*GetDeviceCount)(int *count);
	sp_hip_err (*SetDevice)(int device);
	sp_hip_err (*DeviceGetName)(char *name, int len, int device);
	sp_hip_err (*Malloc)(void **ptr, size_t size);
	sp_hip_err (*Free)(void *ptr);
	sp_hip_err (*HostMalloc)(void **ptr, size_t size, unsigned int flags);
	sp_hip_err (*HostFree)(void *ptr);
	sp_hip_err (*MallocManaged)(void **ptr, size_t size, unsigned int flags);
	sp_hip_err (*ExtMallocWithFlags)(void **ptr, size_t size, unsigned int flags);
	sp_hip_err (*HostRegister)(void *ptr, size_t size, unsigned int flags);
	sp_hip_err (*HostUnregister)(void *ptr);
	sp_hip_err (*ImportExternalMemory)(sp_hip_extmem *out,
					   const struct sp_hip_extmem_handle_desc *desc);
	sp_hip_err (*ExternalMemoryGetMappedBuffer)(void **ptr, sp_hip_extmem mem,
						    const struct sp_hip_extmem_buffer_desc *desc);
	sp_hip_err (*DestroyExternalMemory)(sp_hip_extmem mem);
	sp_hip_err (*Memcpy)(void *dst, const void *src, size_t size, int kind);
	sp_hip_err (*MemcpyAsync)(void *dst, const void *src, size_t size, int kind,
				  sp_hip_stream stream);
	sp_hip_err (*MemsetD32Async)(void *dst, int value, size_t count, sp_hip_stream stream);
	sp_hip_err (*StreamCreate)(sp_hip_stream *stream);
	sp_hip_err (*StreamCreateWithFlags)(sp_hip_stream *stream, unsigned int flags);
	sp_hip_err (*StreamDestroy)(sp_hip_stream stream);
	sp_hip_err (*StreamSynchronize)(sp_hip_stream stream);
	sp_hip_err (*DeviceSynchronize)(void);

	sp_hsa_status (*hsa_init)(void);
	sp_hsa_status (*hsa_shut_down)(void);
	sp_hsa_status (*hsa_status_string)(sp_hsa_status status, const char **str);
	sp_hsa_status (*portable_export_dmabuf)(const void *ptr, size_t size, int *dmabuf,
						uint64_t *offset);
	sp_hsa_status (*portable_close_dmabuf)(int dmabuf);
};

/* sp_hiprt_open()'s failures beyond -errno of the dynamic loader. */
#define SP_HIPRT_ABSENT		(-2)	/* -ENOENT: a library could not be loaded */
#define SP_HIPRT_TOO_OLD	(-38)	/* -ENOSYS: a symbol is missing */

/**
 * sp_hiprt_open() - load the runtime and fill @rt
 * @rt: the table (zeroed by this call)
 * @hip_lib: the HIP library to load, NULL: $STRIXPEER_HIP_LIB, else
 *	libamdhip64.so, .so.7, .so.6 (the first that loads)
 * @hsa_lib: the HSA library, NULL: $STRIXPEER_HSA_LIB, else
 *	libhsa-runtime64.so, .so.1
 * @err: receives the reason of a failure (the library names tried and
 *	dlerror()'s message, or the missing symbol and its library)
 * @errlen: bytes at @err
 *
 * Return: 0; SP_HIPRT_ABSENT when a library cannot be loaded;
 * SP_HIPRT_TOO_OLD when one lacks a symbol. Nothing stays loaded on failure.
 */
int sp_hiprt_open(struct sp_hiprt *rt, const char *hip_lib, const char *hsa_lib,
		  char *err, size_t errlen);

/**
 * sp_hiprt_close() - unload what sp_hiprt_open() loaded
 * @rt: the table, or one sp_hiprt_open() failed to fill
 */
void sp_hiprt_close(struct sp_hiprt *rt);

/**
 * sp_hiprt_version() - "7.1.25424" from hipRuntimeGetVersion()'s number
 * @v: major * 10000000 + minor * 100000 + patch, as HIP encodes it
 * @buf: output
 * @len: bytes at @buf
 *
 * Return: @buf.
 */
char *sp_hiprt_version(int v, char *buf, size_t len);

/**
 * sp_hiprt_strerror() - HIP's name for @e (hipGetErrorString()), or its number
 * @rt: a filled table
 * @e: a hipError_t
 *
 * Return: a message, never NULL.
 */
const char *sp_hiprt_strerror(const struct sp_hiprt *rt, sp_hip_err e);

#endif /* SP_HIPRT_H */
