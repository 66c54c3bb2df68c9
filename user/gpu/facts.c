// SPDX-License-Identifier: MIT
/*
 * The node's facts that change gpu proof's result, for its report: the
 * kernel, the NICs' firmware, the IOMMU's mode, whether AMD's "PerfOpt"
 * IOMMU bypass is armed (its dmesg line), amdgpu's GTT size, the HIP
 * runtime and the GPU. Each says "unknown" with its reason rather than
 * guess.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/utsname.h>
#include <infiniband/verbs.h>

#include "gpu/proof_int.h"

/* The first line of @path into @buf (newline cut); 0 or -1. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ret = -1;

	if (!f)
		return -1;
	if (fgets(buf, (int)len, f)) {
		buf[strcspn(buf, "\n")] = '\0';
		ret = 0;
	}
	fclose(f);
	return ret;
}

static void nic_fw(const char *dev, char *out, size_t len)
{
	char path[192];

	snprintf(out, len, "unknown");
	if (!dev[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/fw_ver", dev);
	if (read_line(path, out, len) || !out[0])
		snprintf(out, len, "unknown");
}

/* The default domain type of the IOMMU groups, and the command line's iommu words. */
static void iommu_mode(char *out, size_t len)
{
	char type[64] = "", cmd[4096] = "", words[96] = "";
	size_t used = 0;
	glob_t g;

	if (glob("/sys/kernel/iommu_groups/*/type", 0, NULL, &g) == 0) {
		if (g.gl_pathc && read_line(g.gl_pathv[0], type, sizeof(type)))
			type[0] = '\0';
		globfree(&g);
	}
	if (!read_line("/proc/cmdline", cmd, sizeof(cmd))) {
		char *save = NULL;

		for (char *w = strtok_r(cmd, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
			if (!strstr(w, "iommu"))
				continue;
			used += snprintf(words + used, sizeof(words) - used, "%s%s",
					 used ? " " : "", w);
			if (used >= sizeof(words))
				break;
		}
	}
	snprintf(out, len, "%s%s%s%s", type[0] ? type : "no IOMMU groups",
		 type[0] && !strcmp(type, "identity") ? " (passthrough)" : "",
		 words[0] ? "; cmdline: " : "", words);
}

/* AMD's PerfOpt bypass says "PerfOpt armed" in the kernel log. */
static void perfopt(char *out, size_t len)
{
	int n = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *log;

	if (n <= 0) {
		snprintf(out, len, "unknown (kernel log: %s)", strerror(errno));
		return;
	}
	log = malloc((size_t)n + 1);
	if (!log) {
		snprintf(out, len, "unknown (out of memory)");
		return;
	}
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, n);
	if (n < 0) {
		snprintf(out, len, "unknown (kernel log: %s)", strerror(errno));
	} else {
		log[n] = '\0';
		snprintf(out, len, "%s", strstr(log, "PerfOpt armed") ? "armed" : "not seen");
	}
	free(log);
}

static long long gtt_size(void)
{
	char v[64];
	glob_t g;
	long long bytes = -1;

	if (glob("/sys/class/drm/card*/device/mem_info_gtt_total", 0, NULL, &g))
		return -1;
	if (g.gl_pathc && !read_line(g.gl_pathv[0], v, sizeof(v)))
		bytes = strtoll(v, NULL, 10);
	globfree(&g);
	return bytes;
}

void gp_nic_fw(const char *dev, char *out, size_t len)
{
	nic_fw(dev, out, len);
}

void sp_gp_facts(const struct sp_hiprt *rt, struct sp_gp_facts *f)
{
	struct utsname u;
	int v = 0;

	snprintf(f->kernel, sizeof(f->kernel), "%s", uname(&u) ? "unknown" : u.release);
	nic_fw(f->local_dev, f->local_fw, sizeof(f->local_fw));
	if (!f->server[0])	/* two nodes: the server said its own */
		nic_fw(f->peer_dev, f->peer_fw, sizeof(f->peer_fw));
	iommu_mode(f->iommu, sizeof(f->iommu));
	perfopt(f->perfopt, sizeof(f->perfopt));
	f->gtt_bytes = gtt_size();
	if (rt->RuntimeGetVersion(&v))
		snprintf(f->hip_version, sizeof(f->hip_version), "unknown");
	else
		sp_hiprt_version(v, f->hip_version, sizeof(f->hip_version));
	snprintf(f->hip_library, sizeof(f->hip_library), "%s", rt->hip_path);
	if (rt->DeviceGetName(f->gpu, sizeof(f->gpu), 0))
		snprintf(f->gpu, sizeof(f->gpu), "unknown");
	f->gpu[sizeof(f->gpu) - 1] = '\0';
}
