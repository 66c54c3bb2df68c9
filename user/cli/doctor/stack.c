// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: what RCCL will decide on this node, and why
 * (gpudirect.rccl_peermem, gpudirect.rccl_dmabuf, gpudirect.rccl).
 *
 * Each test repeats, on the files under the sysroot, what RCCL's code does
 * (read from RCCL's code, not tried on hardware): ROCm/rocm-systems
 * projects/rccl, src/transport/net_ib/gdr.cc at 484e896e and
 * src/misc/gdr_peermem.cc at 0d92d17d (2026):
 *  - ibGdrSupportInitOnce / ncclIbScanPeerMemClients: the first of
 *    /sys/kernel/mm/memory_peers, /sys/kernel/memory_peers, /sys/memory_peers
 *    holding any <client>/version means peer memory; /proc/kallsyms is no
 *    longer read (PR #9540). The open PR #11886 (src/misc/gdr_probe.cc at
 *    5090d876 on its branch) adds, when the scan finds nothing, a probe:
 *    hipMalloc(4096) and ibv_reg_mr on it; reported as "if merged".
 *  - PR #3607: peer memory is preferred over dma-buf; dma-buf only when
 *    RCCL sees no peer memory; RCCL_FORCE_ENABLE_DMABUF=1 forces dma-buf.
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
 * UCX's kernel test (dr_dmabuf_kernel_test(ucx)) is the same but for its
 * list of files (openucx/ucx src/uct/rocm/base/rocm_base.c at 9466d104) and
 * a kallsyms fallback whenever the config does not say yes.
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
static int kernel_config(const struct dr_ctx *c, const char *rel, char *used, size_t len,
			 bool ucx)
{
	static const char *const rccl_tmpl[] = {
		"/proc/config.gz", "/boot/config-%s", "/usr/src/linux-%s/.config",
		"/usr/src/linux/.config", "/usr/lib/modules/%s/config",
		"/usr/lib/ostree-boot/config-%s", "/usr/lib/kernel/config-%s",
		"/usr/src/linux-headers-%s/.config", "/lib/modules/%s/build/.config", NULL,
	};
	/* UCX's uct_rocm_base_load_kernel_config_file(): no config.gz */
	static const char *const ucx_tmpl[] = {
		"/boot/config-%s", "/usr/src/linux-%s/.config", "/usr/lib/modules/%s/config",
		"/usr/lib/kernel/config-%s", "/usr/src/linux-headers-%s/.config",
		"/lib/modules/%s/build/.config", "/usr/lib/ostree-boot/config-%s", NULL,
	};
	const char *const *tmpl = ucx ? ucx_tmpl : rccl_tmpl;
	char line[1024];

	for (size_t i = 0; tmpl[i]; i++) {
		int bits = 0, got = 0, zerr = Z_OK, plain;
		FILE *f;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		dr_fmt(used, len, tmpl[i], rel);
#pragma GCC diagnostic pop
		if (!strcmp(tmpl[i], "/proc/config.gz")) {
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

int dr_dmabuf_kernel_test(struct dr_ctx *c, bool ucx, char *used, size_t len)
{
	char rel[128] = "";
	int cf, ks = dr_kallsyms(c);

	dr_kernel_release(c, rel, sizeof(rel));
	cf = kernel_config(c, rel, used, len, ucx);
	if (cf >= 0 && (cf & CF_MOVE_NOTIFY) && (cf & CF_P2PDMA))
		return 1;
	/* UCX reads kallsyms when the config says no, RCCL only when there is none */
	if (cf >= 0 && !ucx)
		return 0;
	dr_fmt(used, len, "/proc/kallsyms");
	return ks >= 0 && (ks & DR_KS_MOVE_NOTIFY) && (ks & DR_KS_P2PDMA);
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

void dr_check_rccl(struct dr_ctx *c, int dmabuf_nic, bool any_gpu_nic, int client)
{
	char client_name[256] = "", rel[128] = "", cfg[512], env[256] = "", route[32], probe[32];
	const char *base = NULL, *level;
	bool peermem, dmabuf, force = false;
	int ks, cf;
	struct dr_result *r;

	ks = dr_kallsyms(c);
	if (ks < 0)
		ks = 0;

	/* 1. the memory_peers scan (and, if PR #11886 is merged, its probe) */
	peermem = scan_peer_clients(c, &base, client_name, sizeof(client_name));
	r = dr_add(c, DR_C_GPUDIRECT, "rccl_peermem", "", DR_INFO, "%s", "");
	dr_bool(r, "found", peermem);
	dr_str(r, "path", peermem ? base : "");
	dr_str(r, "client", client_name);
	dr_bool(r, "kallsyms_peer_api", ks & DR_KS_PEER_API);
	if (peermem) {
		r->status = DR_PASS;
		dr_set_summary(r, "RCCL finds the peer-memory client %s/%s/version, so it counts peer memory as available and prefers it over dma-buf (plain ibv_reg_mr on GPU memory); released RCCL before 2026 looked only for a client named amdkfd (read from RCCL's code, not tried on hardware)",
			       base, client_name);
	} else if (ks & DR_KS_PEER_API) {
		dr_set_summary(r, "a peer-memory core is in the kernel (ib_register_peer_memory_client in /proc/kallsyms) but none of /sys/kernel/mm/memory_peers, /sys/kernel/memory_peers, /sys/memory_peers has a client: OFED's core on kernels 6.4 and later creates no memory_peers sysfs at all, and RCCL no longer trusts the kallsyms symbol (rocm-systems PR #9540), so it sees no peer memory; the open PR #11886 would then probe (hipMalloc + ibv_reg_mr on device 0), which succeeds where strixpeer's client claims the range (read from RCCL's code, not tried on hardware)");
	} else {
		dr_set_summary(r, "no memory_peers client and no peer-memory core: RCCL sees no peer memory; the probe of the open PR #11886 (hipMalloc + ibv_reg_mr) would fail too, since without a core ibv_reg_mr cannot pin GPU (TTM) memory (read from RCCL's code, not tried on hardware)");
	}

	/* 2. the dma-buf kernel test */
	dr_kernel_release(c, rel, sizeof(rel));
	cf = kernel_config(c, rel, cfg, sizeof(cfg), false);
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
		dr_set_summary(r, "RCCL's dma-buf kernel test passes (%s in %s): with NCCL_DMABUF_ENABLE (default on) and ROCr's dma-buf export it can register GPU memory through ibv_reg_dmabuf_mr, which it uses when it sees no peer memory (read from RCCL's code, not tried on hardware)",
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
		/*
		 * worth forcing when RCCL sees no peer memory (forcing skips it)
		 * and a NIC may take dma-buf MRs (or it cannot be told)
		 */
		if (!peermem && c->nports && any_gpu_nic && dmabuf_nic != 0) {
			r->status = DR_WARN;
			force = true;
			dr_advise(r, "export RCCL_FORCE_ENABLE_DMABUF=1 (skips RCCL's kernel test)%s",
				  dmabuf_nic < 0 ? "; whether the NIC takes dma-buf MRs needs the live system (not under --sysroot)" : "");
		}
	}

	/* 3. the route (peer memory first, rocm-systems PR #3607) and environment */
	if (peermem)
		dr_fmt(route, sizeof(route), "peermem");
	else if ((dmabuf || force) && any_gpu_nic && dmabuf_nic != 0)
		dr_fmt(route, sizeof(route), "dma-buf");
	else
		dr_fmt(route, sizeof(route), "host staging");
	/* the open PR #11886: the probe, when the scan finds nothing */
	if (!peermem && (ks & DR_KS_PEER_API) && client != 0 && any_gpu_nic)
		dr_fmt(probe, sizeof(probe), "peermem (probe)");
	else
		dr_fmt(probe, sizeof(probe), "%s", route);
	level = strcmp(route, "host staging") || strcmp(probe, "host staging") ?
		gdr_level_needed(c) : "";
	if (force)
		dr_fmt(env, sizeof(env), "RCCL_FORCE_ENABLE_DMABUF=1");
	if (level[0]) {
		size_t l = strlen(env);

		snprintf(env + l, sizeof(env) - l, "%sNCCL_NET_GDR_LEVEL=%s", l ? " " : "", level);
	}
	/* GPU Direct RDMA on, yet no NIC takes GPU memory: turn it off */
	if (!strcmp(route, "peermem") && !any_gpu_nic && c->nports)
		dr_fmt(env, sizeof(env), "NCCL_NET_GDR_LEVEL=LOC");
	r = dr_add(c, DR_C_GPUDIRECT, "rccl", "", DR_INFO,
		   "RCCL takes the %s route%s; if the open PR #11886 is merged: %s%s%s (read from RCCL's code, not tried on hardware)",
		   route,
		   !strcmp(route, "peermem") ? (any_gpu_nic ? ": plain ibv_reg_mr on GPU memory, through the peer client" :
						": GPU Direct RDMA on, yet no NIC here takes GPU memory, so its registrations fail") :
		   !strcmp(route, "dma-buf") ? (dmabuf_nic < 0 ? ": ibv_reg_dmabuf_mr, if the NIC takes dma-buf MRs (not known under --sysroot), and then strixpeer is not needed for RCCL on this node" :
						": ibv_reg_dmabuf_mr on GPU memory, so strixpeer is not needed for RCCL on this node") :
		   ": no GPU Direct RDMA, data is copied through host memory",
		   !strcmp(probe, route) ? "the same" : probe,
		   env[0] ? "; set " : "; no environment needed", env);
	if (!strcmp(route, "peermem") && !any_gpu_nic && c->nports) {
		r->status = DR_WARN;
		dr_advise(r, "export NCCL_NET_GDR_LEVEL=LOC (never GPU Direct RDMA: RCCL then stages through host memory instead of failing its registrations), and give the GPU strixpeer buffers if it must share memory with the NIC");
	}
	dr_str(r, "route", route);
	dr_str(r, "route_if_pr11886", probe);
	dr_str(r, "env", env);
	if (env[0] && !r->advice)
		dr_advise(r, "export %s", env);
}
