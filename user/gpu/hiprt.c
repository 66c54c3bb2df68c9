// SPDX-License-Identifier: MIT
/*
 * The HIP/HSA table (hiprt.h): dlopen() of ROCm's runtime libraries, or of
 * the files the caller or the environment names, and dlsym() of every
 * entry point the GPU commands use. A library that lacks one is "too
 * old": the message names the symbol and the file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/hiprt.h"

_Static_assert(SP_HIPRT_ABSENT == -ENOENT, "SP_HIPRT_ABSENT is -ENOENT");
_Static_assert(SP_HIPRT_TOO_OLD == -ENOSYS, "SP_HIPRT_TOO_OLD is -ENOSYS");

struct sp_hiprt_sym {
	const char *name;
	size_t off;		/* of the pointer in struct sp_hiprt */
	int hsa;		/* in the HSA library, not HIP's */
};

#define HIP_SYM(m)	{ "hip" #m, offsetof(struct sp_hiprt, m), 0 }
#define HSA_SYM(s, m)	{ s, offsetof(struct sp_hiprt, m), 1 }

static const struct sp_hiprt_sym sp_hiprt_syms[] = {
	HIP_SYM(RuntimeGetVersion),
	HIP_SYM(GetErrorString),
	HIP_SYM(GetDeviceCount),
	HIP_SYM(SetDevice),
	HIP_SYM(DeviceGetName),
	HIP_SYM(Malloc),
	HIP_SYM(Free),
	HIP_SYM(HostMalloc),
	HIP_SYM(HostFree),
	HIP_SYM(MallocManaged),
	HIP_SYM(ExtMallocWithFlags),
	HIP_SYM(HostRegister),
	HIP_SYM(HostUnregister),
	HIP_SYM(ImportExternalMemory),
	HIP_SYM(ExternalMemoryGetMappedBuffer),
	HIP_SYM(DestroyExternalMemory),
	HIP_SYM(Memcpy),
	HIP_SYM(MemcpyAsync),
	HIP_SYM(MemsetD32Async),
	HIP_SYM(StreamCreate),
	HIP_SYM(StreamCreateWithFlags),
	HIP_SYM(StreamDestroy),
	HIP_SYM(StreamSynchronize),
	HIP_SYM(DeviceSynchronize),
	HSA_SYM("hsa_init", hsa_init),
	HSA_SYM("hsa_shut_down", hsa_shut_down),
	HSA_SYM("hsa_status_string", hsa_status_string),
	HSA_SYM("hsa_amd_portable_export_dmabuf", portable_export_dmabuf),
	HSA_SYM("hsa_amd_portable_close_dmabuf", portable_close_dmabuf),
};

static void sp_hiprt_msg(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void sp_hiprt_msg(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/*
 * Load @want, or (NULL) the environment's @env, or the first of @names
 * that loads. RTLD_GLOBAL: ROCm's HIP library finds HSA's symbols itself.
 */
static void *sp_hiprt_load(const char *want, const char *env, const char *const *names,
			   char *path, size_t pathlen, char *err, size_t errlen)
{
	char tried[512] = "";
	size_t used = 0;
	void *dl;

	if (!want)
		want = getenv(env);
	if (want && want[0]) {
		dl = dlopen(want, RTLD_NOW | RTLD_GLOBAL);
		if (!dl) {
			sp_hiprt_msg(err, errlen, "cannot load %s: %s", want, dlerror());
			return NULL;
		}
		snprintf(path, pathlen, "%s", want);
		return dl;
	}
	for (; *names; names++) {
		dl = dlopen(*names, RTLD_NOW | RTLD_GLOBAL);
		if (dl) {
			snprintf(path, pathlen, "%s", *names);
			return dl;
		}
		used += snprintf(tried + used, sizeof(tried) - used, "%s%s",
				 used ? ", " : "", *names);
		if (used >= sizeof(tried))
			used = sizeof(tried) - 1;
	}
	sp_hiprt_msg(err, errlen, "ROCm's runtime is not installed: none of %s loads (%s names another file)",
		     tried, env);
	return NULL;
}

int sp_hiprt_open(struct sp_hiprt *rt, const char *hip_lib, const char *hsa_lib,
		  char *err, size_t errlen)
{
	static const char *const hip_names[] = {
		"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", NULL
	};
	static const char *const hsa_names[] = {
		"libhsa-runtime64.so", "libhsa-runtime64.so.1", NULL
	};
	size_t i;

	memset(rt, 0, sizeof(*rt));
	rt->hip_dl = sp_hiprt_load(hip_lib, "STRIXPEER_HIP_LIB", hip_names, rt->hip_path,
				   sizeof(rt->hip_path), err, errlen);
	if (!rt->hip_dl)
		return SP_HIPRT_ABSENT;
	rt->hsa_dl = sp_hiprt_load(hsa_lib, "STRIXPEER_HSA_LIB", hsa_names, rt->hsa_path,
				   sizeof(rt->hsa_path), err, errlen);
	if (!rt->hsa_dl) {
		sp_hiprt_close(rt);
		return SP_HIPRT_ABSENT;
	}
	for (i = 0; i < sizeof(sp_hiprt_syms) / sizeof(sp_hiprt_syms[0]); i++) {
		const struct sp_hiprt_sym *s = &sp_hiprt_syms[i];
		void *fn;

		dlerror();
		fn = dlsym(s->hsa ? rt->hsa_dl : rt->hip_dl, s->name);
		if (!fn) {
			sp_hiprt_msg(err, errlen,
				     "%s has no %s: the ROCm runtime is too old (or not ROCm's)",
				     s->hsa ? rt->hsa_path : rt->hip_path, s->name);
			sp_hiprt_close(rt);
			return SP_HIPRT_TOO_OLD;
		}
		memcpy((char *)rt + s->off, &fn, sizeof(fn));
	}
	return 0;
}

void sp_hiprt_close(struct sp_hiprt *rt)
{
	if (rt->hsa_dl)
		dlclose(rt->hsa_dl);
	if (rt->hip_dl)
		dlclose(rt->hip_dl);
	memset(rt, 0, sizeof(*rt));
}

char *sp_hiprt_version(int v, char *buf, size_t len)
{
	snprintf(buf, len, "%d.%d.%d", v / 10000000, v / 100000 % 100, v % 100000);
	return buf;
}

const char *sp_hiprt_strerror(const struct sp_hiprt *rt, sp_hip_err e)
{
	static __thread char num[32];
	const char *s = rt->GetErrorString ? rt->GetErrorString(e) : NULL;

	if (s)
		return s;
	snprintf(num, sizeof(num), "hipError %d", e);
	return num;
}
