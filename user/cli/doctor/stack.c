// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: what RCCL will decide on this node, and why
 * (gpudirect.rccl_peermem, gpudirect.rccl_dmabuf, gpudirect.rccl).
 *
 * Each test repeats, on the files under the sysroot, what RCCL's code does
 * (ROCm/rocm-systems projects/rccl, 2026; read from RCCL's code, not tried
 * on hardware):
 *  - src/misc/gdr_peermem.cc ncclIbScanPeerMemClients: the first of
 *    /sys/kernel/mm/memory_peers, /sys/kernel/memory_peers, /sys/memory_peers
 *    holding any <client>/version turns GPU Direct RDMA on; if none does,
 *    gdr_probe.cc ncclIbProbeGdrSupport decides: hipMalloc(4096) and
 *    ibv_reg_mr on it, which must succeed on every NIC.
 *  - src/misc/rocmwrap.cc + kernel_config.cc: dma-buf (NCCL_DMABUF_ENABLE,
 *    default on) needs "CONFIG_DMABUF_MOVE_NOTIFY=y" and "CONFIG_PCI_P2PDMA=y"
 *    as substrings of the first readable of /proc/config.gz (RCCL runs
 *    zcat; doctor reads it with zlib, no shell),
 *    /boot/config-R, /usr/src/linux-R/.config, /usr/src/linux/.config,
 *    /usr/lib/modules/R/config, /usr/lib/ostree-boot/config-R,
 *    /usr/lib/kernel/config-R, /usr/src/linux-headers-R/.config,
 *    /lib/modules/R/build/.config (R = uname -r); only when none is
 *    readable, /proc/kallsyms lines containing "dma_buf_move_notify" and
 *    "pci_p2pdma". RCCL_FORCE_ENABLE_DMABUF=1 skips the kernel test.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "doctor.h"

static const char *const peer_bases[] = {
	"/sys/kernel/mm/memory_peers", "/sys/kernel/memory_peers", "/sys/memory_peers",
};

/* The first <base>/<client>/version, as RCCL finds it: 1 and @base/@client, or 0. */
static int scan_peer_clients(const struct dr_ctx *c, const char **base, char *client, size_t len)
{
	for (size_t b = 0; b < sizeof(peer_bases) / sizeof(peer_bases[0]); b++) {
		char **names;
		int n = dr_list(c, &names, "%s", peer_bases[b]);
		int found = 0;

		for (int i = 0; i < n && !found; i++) {
			if (names[i][0] == '.' || !dr_exists(c, "%s/%s/version", peer_bases[b], names[i]))
				continue;
			*base = peer_bases[b];
			dr_fmt(client, len, "%s", names[i]);
			found = 1;
		}
		dr_list_free(names, n);
		if (found)
			return 1;
	}
	return 0;
}

/* Bits of a kernel config, as RCCL tests it (substrings). */
#define CF_MOVE_NOTIFY	0x1	/* CONFIG_DMABUF_MOVE_NOTIFY=y */
#define CF_P2PDMA	0x2	/* CONFIG_PCI_P2PDMA=y */
#define CF_MN_LINE	0x4	/* any CONFIG_DMABUF_MOVE_NOTIFY line (=n, "is not set") */

static void config_line(const char *line, int *bits)
{
	if (strstr(line, "CONFIG_DMABUF_MOVE_NOTIFY=y"))
		*bits |= CF_MOVE_NOTIFY;
	if (strstr(line, "CONFIG_PCI_P2PDMA=y"))
		*bits |= CF_P2PDMA;
	if (strstr(line, "CONFIG_DMABUF_MOVE_NOTIFY"))
		*bits |= CF_MN_LINE;
}

/*
 * The first kernel config RCCL would read: its bits, the path in @used, or
 * -ENOENT when none is readable.
 */
static int kernel_config(const struct dr_ctx *c, const char *rel, char *used, size_t len)
{
	static const char *const tmpl[] = {
		"/proc/config.gz", "/boot/config-%s", "/usr/src/linux-%s/.config",
		"/usr/src/linux/.config", "/usr/lib/modules/%s/config",
		"/usr/lib/ostree-boot/config-%s", "/usr/lib/kernel/config-%s",
		"/usr/src/linux-headers-%s/.config", "/lib/modules/%s/build/.config",
	};
	char line[1024];

	for (size_t i = 0; i < sizeof(tmpl) / sizeof(tmpl[0]); i++) {
		int bits = 0, got = 0, zerr = Z_OK, plain;
		FILE *f;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		dr_fmt(used, len, tmpl[i], rel);
#pragma GCC diagnostic pop
		if (i == 0) {
			gzFile z;
			int fd;

			/* RCCL runs zcat on it; doctor reads it with zlib (no shell) */
			f = dr_fopen(c, "%s", used);	/* a regular file, never a FIFO */
			if (!f)
				continue;
			fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
			fclose(f);
			z = fd < 0 ? NULL : gzdopen(fd, "rb");
			if (!z) {
				if (fd >= 0)
					close(fd);
				continue;
			}
			/* a kernel config has ~10000 lines; a bigger stream is no config */
			while (got < 200000 && gzgets(z, line, sizeof(line))) {
				config_line(line, &bits);
				got++;
			}
			gzerror(z, &zerr);
			plain = gzdirect(z);
			gzclose(z);
			/* zcat refuses a truncated or not gzipped file: the next path */
			if (!got || plain || (zerr != Z_OK && zerr != Z_STREAM_END))
				continue;
			return bits;
		}
		f = dr_fopen(c, "%s", used);
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			config_line(line, &bits);
		fclose(f);
		return bits;
	}
	used[0] = '\0';
	return -ENOENT;
}

/* The widest NCCL_NET_GDR_LEVEL check_gdr_level asked for: "", "PHB" or "SYS". */
static const char *gdr_level_needed(const struct dr_ctx *c)
{
	const char *need = "";

	for (size_t i = 0; i < c->nres; i++) {
		const struct dr_val *v;

		if (strcmp(c->res[i].id, "gpudirect.rccl_level"))
			continue;
		v = dr_get(&c->res[i], "path_type");
		if (!v || v->type != DR_V_STR)
			continue;
		if (!strcmp(v->s, "SYS"))
			need = "SYS";
		else if (!strcmp(v->s, "PHB") && !need[0])
			need = "PHB";
	}
	return need;
}

void dr_check_rccl(struct dr_ctx *c, int dmabuf_nic, bool any_gpu_nic)
{
	char client[256] = "", rel[128] = "", cfg[512], env[256] = "", route[96];
	const char *base = NULL, *level;
	bool peermem, dmabuf, probe_may_work;
	int ks, cf, advise_force;
	struct dr_result *r;

	ks = dr_kallsyms(c);
	if (ks < 0)
		ks = 0;

	/* 1. the memory_peers scan */
	peermem = scan_peer_clients(c, &base, client, sizeof(client));
	probe_may_work = peermem || (ks & DR_KS_PEER_API);
	r = dr_add(c, DR_C_GPUDIRECT, "rccl_peermem", "", DR_INFO, "%s", "");
	dr_bool(r, "found", peermem);
	dr_str(r, "path", peermem ? base : "");
	dr_str(r, "client", client);
	dr_bool(r, "kallsyms_peer_api", ks & DR_KS_PEER_API);
	if (peermem) {
		r->status = DR_PASS;
		dr_set_summary(r, "RCCL finds the peer-memory client %s/%s/version, so it turns GPU Direct RDMA on with plain ibv_reg_mr on GPU memory (RCCL since 2026 takes any client; older releases only one named amdkfd) (read from RCCL's code, not tried on hardware)",
			       base, client);
	} else if (ks & DR_KS_PEER_API) {
		dr_set_summary(r, "a peer-memory core is in the kernel (ib_register_peer_memory_client in /proc/kallsyms) but none of /sys/kernel/mm/memory_peers, /sys/kernel/memory_peers, /sys/memory_peers has a client: OFED's core on kernels 6.4 and later creates no memory_peers sysfs at all (mm_kobj is not exported), so RCCL decides by its probe alone: hipMalloc(4096) and ibv_reg_mr on every NIC, which succeeds only if a client is registered with the core (older releases, e.g. rocm-6.2's net_ib.cc, took this kallsyms symbol alone as a yes) (read from RCCL's code, not tried on hardware)");
	} else {
		dr_set_summary(r, "no memory_peers client and no peer-memory core: RCCL decides by its probe alone (hipMalloc(4096) and ibv_reg_mr on every NIC), and without a peer client ibv_reg_mr cannot pin GPU (TTM) memory, so the probe fails (read from RCCL's code, not tried on hardware)");
	}

	/* 2. the dma-buf kernel test */
	dr_kernel_release(c, rel, sizeof(rel));
	cf = kernel_config(c, rel, cfg, sizeof(cfg));
	if (cf >= 0)
		dmabuf = (cf & CF_MOVE_NOTIFY) && (cf & CF_P2PDMA);
	else
		dmabuf = (ks & DR_KS_MOVE_NOTIFY) && (ks & DR_KS_P2PDMA);
	r = dr_add(c, DR_C_GPUDIRECT, "rccl_dmabuf", "", dmabuf ? DR_PASS : DR_INFO, "%s", "");
	dr_bool(r, "kernel_ok", dmabuf);
	dr_str(r, "source", cf >= 0 ? cfg : "/proc/kallsyms");
	dr_bool(r, "move_notify", cf >= 0 ? (cf & CF_MOVE_NOTIFY) : (ks & DR_KS_MOVE_NOTIFY));
	dr_bool(r, "p2pdma", cf >= 0 ? (cf & CF_P2PDMA) : (ks & DR_KS_P2PDMA));
	dr_bool(r, "kallsyms_invalidate_mappings", ks & DR_KS_INVALIDATE);
	if (dmabuf) {
		dr_set_summary(r, "RCCL's dma-buf kernel test passes (%s in %s): with NCCL_DMABUF_ENABLE (default on) and ROCr's dma-buf export it registers GPU memory through ibv_reg_dmabuf_mr (read from RCCL's code, not tried on hardware)",
			       cf >= 0 ? "CONFIG_DMABUF_MOVE_NOTIFY=y and CONFIG_PCI_P2PDMA=y" : "dma_buf_move_notify and pci_p2pdma",
			       cf >= 0 ? cfg : "/proc/kallsyms");
	} else {
		bool mn = cf >= 0 ? (cf & CF_MOVE_NOTIFY) : (ks & DR_KS_MOVE_NOTIFY);
		bool p2 = cf >= 0 ? (cf & CF_P2PDMA) : (ks & DR_KS_P2PDMA);
		char miss[160];

		dr_fmt(miss, sizeof(miss), "%s%s%s",
		       mn ? "" : cf >= 0 ? "CONFIG_DMABUF_MOVE_NOTIFY=y" : "dma_buf_move_notify",
		       !mn && !p2 ? " and " : "",
		       p2 ? "" : cf >= 0 ? "CONFIG_PCI_P2PDMA=y" : "pci_p2pdma");
		dr_set_summary(r, "RCCL's dma-buf kernel test fails: no %s in %s, so RCCL silently turns dma-buf off%s (read from RCCL's code, not tried on hardware)",
			       miss, cf >= 0 ? cfg : "/proc/kallsyms (no kernel config readable)",
			       (ks & DR_KS_INVALIDATE) && !(cf >= 0 ? (cf & CF_MN_LINE) : (ks & DR_KS_MOVE_NOTIFY)) ?
			       "; yet this kernel has dma_buf_invalidate_mappings, move-notify under its 7.x name, which RCCL's test does not look for" : "");
		/* worth forcing when a NIC may take dma-buf MRs (or it cannot be told) */
		if (c->nports && any_gpu_nic && dmabuf_nic != 0) {
			r->status = DR_WARN;
			dr_advise(r, "export RCCL_FORCE_ENABLE_DMABUF=1 (skips RCCL's kernel test)%s",
				  dmabuf_nic < 0 ? "; whether the NIC takes dma-buf MRs needs the live system (not under --sysroot)" : "");
		}
	}
	advise_force = r->status == DR_WARN;

	/* 3. the summary: route and environment */
	level = gdr_level_needed(c);
	if (advise_force)
		dr_fmt(env, sizeof(env), "RCCL_FORCE_ENABLE_DMABUF=1");
	if (level[0]) {
		size_t l = strlen(env);

		snprintf(env + l, sizeof(env) - l, "%sNCCL_NET_GDR_LEVEL=%s", l ? " " : "", level);
	}
	if ((dmabuf || advise_force) && any_gpu_nic && dmabuf_nic != 0)
		dr_fmt(route, sizeof(route), "dma-buf");
	else if (peermem)
		dr_fmt(route, sizeof(route), "peermem sysfs");
	else if (probe_may_work && any_gpu_nic)
		dr_fmt(route, sizeof(route), "probe");
	else
		dr_fmt(route, sizeof(route), "host staging");
	r = dr_add(c, DR_C_GPUDIRECT, "rccl", "", DR_INFO,
		   "RCCL takes the %s route%s%s%s (read from RCCL's code, not tried on hardware)",
		   route,
		   !strcmp(route, "dma-buf") ?
		   (dmabuf_nic < 0 ? (peermem ? " if the NIC takes dma-buf MRs (not known under --sysroot), else the peer client" :
				      " if the NIC takes dma-buf MRs (not known under --sysroot), else its probe") :
		    peermem ? ", the peer client as fallback" : "") :
		   !strcmp(route, "probe") ? ": GPU Direct RDMA only if hipMalloc+ibv_reg_mr succeeds on every NIC" :
		   !strcmp(route, "host staging") ? ": no GPU Direct RDMA, data is copied through host memory" : "",
		   env[0] ? "; set " : "; no environment needed", env);
	dr_str(r, "route", route);
	dr_str(r, "env", env);
	if (env[0])
		dr_advise(r, "export %s", env);
}
