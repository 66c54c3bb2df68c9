// SPDX-License-Identifier: MIT
/*
 * A fixture, not a runtime: a shared library with some of the entry points
 * of ROCm's libamdhip64 (-DSP_OLD_HIP) or libhsa-runtime64 (-DSP_OLD_HSA)
 * and not the others, as an older or foreign library has them, so that
 * tests/host/gpu-host.sh sees strixpeerctl gpu name the missing symbol
 * and exit 5. Nothing here is ever called: the table is refused before
 * any call. It reproduces no behaviour of ROCm at all.
 */
#define SP_FIXTURE_NOT_SUPPORTED	801	/* hipErrorNotSupported */

#ifdef SP_OLD_HIP
/* hipRuntimeGetVersion and hipMalloc exist; hipGetErrorString is missing. */
int hipRuntimeGetVersion(int *v);
int hipMalloc(void **p, unsigned long size);

int hipRuntimeGetVersion(int *v)
{
	*v = 50200000;
	return SP_FIXTURE_NOT_SUPPORTED;
}

int hipMalloc(void **p, unsigned long size)
{
	(void)p;
	(void)size;
	return SP_FIXTURE_NOT_SUPPORTED;
}
#endif

#ifdef SP_OLD_HSA
/* Debian 12's ROCm 5.2 HSA: no hsa_amd_portable_export_dmabuf(). */
int hsa_init(void);
int hsa_shut_down(void);
int hsa_status_string(int status, const char **s);

int hsa_init(void)
{
	return 0;
}

int hsa_shut_down(void)
{
	return 0;
}

int hsa_status_string(int status, const char **s)
{
	(void)status;
	*s = "fixture";
	return 0;
}
#endif
