// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the AMD iGPU (Strix Halo: kernel, GTT, carve-out)
 * and GPUDirect readiness (peer-memory core and clients as RCCL/UCX/NCCL
 * look for them, the dma-buf MR path, each NIC driver's GPU memory paths).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "../print.h"

#define MiB (1024ULL * 1024)
#define GiB (1024ULL * MiB)

/* --- the AMD iGPU --------------------------------------------------------- */

struct gpu {
	char bdf[32];
	char path[256];		/* under /sys/devices */
	uint64_t device;
};

#define MAX_GPUS 8

static int find_amd_gpus(struct dr_ctx *c, struct gpu *g, int max)
{
	char **devs = NULL;
	int n = dr_list(c, &devs, "/sys/bus/pci/devices"), found = 0;

	for (int i = 0; i < n && found < max; i++) {
		uint64_t vendor, cls, device;

		if (dr_read_u64(c, &vendor, "/sys/bus/pci/devices/%s/vendor", devs[i]) ||
		    vendor != 0x1002 ||
		    dr_read_u64(c, &cls, "/sys/bus/pci/devices/%s/class", devs[i]) ||
		    (cls >> 16) != 0x03 ||
		    dr_read_u64(c, &device, "/sys/bus/pci/devices/%s/device", devs[i]))
			continue;
		snprintf(g[found].bdf, sizeof(g[found].bdf), "%s", devs[i]);
		if (dr_resolve(c, g[found].path, sizeof(g[found].path), "/sys/bus/pci/devices/%s",
			       devs[i]))
			snprintf(g[found].path, sizeof(g[found].path), "/sys/bus/pci/devices/%s", devs[i]);
		g[found].device = device;
		found++;
	}
	dr_list_free(devs, n);
	return found;
}

/*
 * ROCm: gfx1151 compute needs Linux 6.18.4, or Ubuntu's HWE 6.17.0-19 /
 * OEM 6.14.0-1018 kernels, which carry the fixes.
 */
static bool kernel_ok_for_gfx1151(const char *rel)
{
	unsigned int a, b, c3, abi;
	char flavour[32];

	if (dr_kver_cmp(rel, "6.18.4") >= 0)
		return true;
	if (sscanf(rel, "%u.%u.%u-%u-%31s", &a, &b, &c3, &abi, flavour) != 5)
		return false;
	if (a == 6 && b == 17 && c3 == 0 && abi >= 19 && !strcmp(flavour, "generic"))
		return true;
	return a == 6 && b == 14 && c3 == 0 && abi >= 1018 && !strncmp(flavour, "oem", 3);
}

/*
 * AMD APUs (display function IDs from pci.ids 2023.04.10: Mendocino,
 * Phoenix, Picasso, Raven, Barcelo, Renoir, Cezanne, Lucienne, Rembrandt,
 * Raphael), plus Strix Halo: their "VRAM" is a carve-out of system RAM.
 */
static bool is_apu(uint64_t device)
{
	static const uint16_t ids[] = {
		0x1586, 0x1506, 0x15bf, 0x15c8, 0x15d8, 0x15dd, 0x15e7, 0x1636, 0x1638,
		0x164c, 0x164d, 0x164e, 0x1681,
	};

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (device == ids[i])
			return true;
	return false;
}

/* MemTotal of /proc/meminfo in bytes (RAM without the carve-out), or 0. */
static uint64_t mem_total(struct dr_ctx *c)
{
	FILE *f = dr_fopen(c, "/proc/meminfo");
	unsigned long long kb = 0;
	char line[256];
	int lines = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && lines++ < 200)
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb <= UINT64_MAX / 1024 ? kb * 1024 : 0;
}

/*
 * GTT, the system memory the GPU may map: against ttm.pages_limit (the
 * two must agree) and, on an APU, against the node's RAM. The GPU reaches
 * its carve-out (VRAM) plus GTT; AMD's advice for Strix Halo is a small
 * carve-out and a large GTT, set through ttm.pages_limit. Policy: WARN when
 * the GPU reaches less than 3/4 of the node's memory (MemTotal + carve-out:
 * TTM's default GTT is half of RAM); the suggestion is 7/8 of MemTotal.
 */
static void check_gtt(struct dr_ctx *c, const struct gpu *g, const char *subj, bool apu,
		      uint64_t vram)
{
	char gtt_s[32], lim_s[32], mem_s[32], vram_s[32], want_s[32], how[512];
	uint64_t gtt = 0, pages = 0, mem, node, want;
	struct dr_result *r;
	int ret = dr_read_u64(c, &gtt, "%s/mem_info_gtt_total", g->path);

	if (ret) {
		dr_add(c, DR_C_GPU, "gtt", subj, DR_SKIP,
		       "GTT unknown: mem_info_gtt_total %s (amdgpu not bound to the GPU?)",
		       dr_errstr(ret));
		return;
	}
	pr_format_bytes(gtt_s, sizeof(gtt_s), gtt);
	r = dr_add(c, DR_C_GPU, "gtt", subj, DR_PASS, "GTT %s", gtt_s);
	dr_int(r, "gtt_total", (int64_t)gtt);
	if (dr_read_u64(c, &pages, "/sys/module/ttm/parameters/pages_limit") == 0 && pages &&
	    pages <= UINT64_MAX / 4096) {
		uint64_t lim = pages * 4096;

		pr_format_bytes(lim_s, sizeof(lim_s), lim);
		dr_int(r, "ttm_pages_limit", (int64_t)pages);
		dr_set_summary(r, "GTT %s, ttm.pages_limit %llu pages (%s)", gtt_s,
			       (unsigned long long)pages, lim_s);
		if (gtt + MiB < lim || gtt > lim + MiB) {
			r->status = DR_WARN;
			dr_set_summary(r, "%s: they differ, so something (amdgpu.gttsize?) overrides TTM's limit",
				       r->summary);
			dr_advise(r, "size GTT only through ttm.pages_limit (pages of 4 KiB) and drop amdgpu.gttsize");
		}
	}
	mem = mem_total(c);
	if (!apu || !mem)
		return;
	dr_int(r, "mem_total", (int64_t)mem);
	dr_int(r, "vram_total", (int64_t)vram);
	node = mem + vram;
	want = mem / 8 * 7 / GiB * GiB;
	pr_format_bytes(mem_s, sizeof(mem_s), mem);
	pr_format_bytes(vram_s, sizeof(vram_s), vram);
	pr_format_bytes(want_s, sizeof(want_s), want);
	dr_set_summary(r, "%s; RAM %s (MemTotal) + VRAM carve-out %s: the GPU reaches %llu%% of the node's memory",
		       r->summary, mem_s, vram_s,
		       (unsigned long long)((gtt + vram) * 100 / (node ? node : 1)));
	if (gtt + vram >= node / 4 * 3 || want <= gtt)
		return;
	dr_int(r, "suggested_gtt", (int64_t)want);
	dr_raise(r, DR_WARN);
	dr_set_summary(r, "%s, well below what it could have (policy: 3/4): GTT is TTM's default (half of RAM) or set small; AMD's advice for this APU is a small carve-out and a large GTT",
		       r->summary);
	dr_fmt(how, sizeof(how), "ttm.pages_limit=%llu", (unsigned long long)(want / 4096));
	switch (dr_os(c)) {
	case DR_OS_DEBIAN:
		dr_advise(r, "give GTT %s: add %s to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, update-grub, reboot (or options ttm pages_limit=%llu in /etc/modprobe.d/ttm.conf, update-initramfs -u); the guides' amdgpu.gttsize is deprecated: size GTT only with ttm.pages_limit",
			  want_s, how, (unsigned long long)(want / 4096));
		break;
	case DR_OS_FEDORA:
		dr_advise(r, "give GTT %s: grubby --update-kernel=ALL --args=\"%s\", reboot (or options ttm pages_limit=%llu in /etc/modprobe.d/ttm.conf, dracut -f); the guides' amdgpu.gttsize is deprecated: size GTT only with ttm.pages_limit",
			  want_s, how, (unsigned long long)(want / 4096));
		break;
	default:
		dr_advise(r, "give GTT %s: %s on the kernel command line (Debian, Ubuntu: GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, update-grub; Fedora: grubby --update-kernel=ALL --args=\"%s\"), reboot; the guides' amdgpu.gttsize is deprecated: size GTT only with ttm.pages_limit",
			  want_s, how, how);
	}
}

static void check_one_gpu(struct dr_ctx *c, const struct gpu *g, const char *rel)
{
	bool halo = g->device == 0x1586, apu = is_apu(g->device);
	char subj[96], drv[64] = "", vram_s[32], val[64];
	uint64_t vram = 0;
	struct dr_result *r;
	int ret;

	dr_fmt(subj, sizeof(subj), "%s %s", g->bdf,
	       halo ? "Strix Halo" : apu ? "AMD APU" : "AMD GPU");
	ret = dr_link_name(c, drv, sizeof(drv), "/sys/bus/pci/devices/%s/driver", g->bdf);
	r = dr_add(c, DR_C_GPU, "driver", subj, DR_PASS, "1002:%04llx bound to %s",
		   (unsigned long long)g->device, ret ? "no driver" : drv);
	dr_str(r, "driver", ret ? "" : drv);
	dr_str(r, "pci_id", halo ? "1002:1586" : "");
	if (ret || strcmp(drv, "amdgpu")) {
		r->status = DR_FAIL;
		dr_advise(r, "load amdgpu (modprobe amdgpu) and read why it did not bind: dmesg | grep -i amdgpu (missing firmware: install firmware-amd-graphics / linux-firmware)");
	}
	r = dr_add(c, DR_C_GPU, "kfd", subj, DR_PASS, "/dev/kfd present: ROCm/HIP can reach the GPU");
	if (!dr_exists(c, "/dev/kfd")) {
		r->status = DR_FAIL;
		dr_set_summary(r, "no /dev/kfd: ROCm/HIP cannot run (amdgpu not loaded, or a kernel without CONFIG_HSA_AMD)");
		dr_advise(r, "load amdgpu, or use a kernel built with CONFIG_HSA_AMD=y (Debian's and Ubuntu's are)");
	}
	if (halo) {
		r = dr_add(c, DR_C_GPU, "kernel", subj, DR_PASS, "kernel %s is new enough for gfx1151",
			   rel[0] ? rel : "unknown");
		dr_str(r, "kernel", rel);
		dr_str(r, "minimum", "6.18.4");
		if (!rel[0]) {
			r->status = DR_SKIP;
			dr_set_summary(r, "kernel release unreadable");
		} else if (!kernel_ok_for_gfx1151(rel)) {
			r->status = DR_WARN;
			dr_set_summary(r, "kernel %s is older than 6.18.4, which ROCm requires for gfx1151 (Strix Halo) compute",
				       rel);
			dr_advise(r, "install Linux 6.18.4 or newer (Debian: linux-image-amd64 from trixie-backports or sid; Ubuntu 24.04: HWE 6.17.0-19 or later, or OEM 6.14.0-1018 or later)");
		}
	}
	ret = dr_read_u64(c, &vram, "%s/mem_info_vram_total", g->path);
	if (!ret && apu) {
		pr_format_bytes(vram_s, sizeof(vram_s), vram);
		r = dr_add(c, DR_C_GPU, "carveout", subj, DR_PASS,
			   "BIOS VRAM carve-out %s (ROCm advises a small one and a large GTT)", vram_s);
		dr_int(r, "vram_total", (int64_t)vram);
		if (vram > 4 * GiB) {
			r->status = DR_WARN;
			dr_set_summary(r, "BIOS VRAM carve-out %s: that memory is lost to the CPU, to strixpeer buffers and to the NIC; ROCm advises a small carve-out and a large GTT (the GPU uses GTT memory just as fast on this APU)",
				       vram_s);
			dr_advise(r, "set the BIOS UMA frame buffer size to 512 MB, then give the GPU a large GTT: amd-ttm --set <GB>, or options ttm pages_limit=<pages of 4 KiB> in /etc/modprobe.d/ttm.conf (e.g. 26214400 for 100 GiB)");
		}
	} else if (ret && apu) {
		dr_add(c, DR_C_GPU, "carveout", subj, DR_SKIP, "mem_info_vram_total %s", dr_errstr(ret));
	}
	check_gtt(c, g, subj, apu, ret == 0 ? vram : 0);
	if (dr_cmdline_has(c, "amdgpu.gttsize", val, sizeof(val)) == 1) {
		r = dr_add(c, DR_C_GPU, "gttsize", subj, DR_WARN,
			   "amdgpu.gttsize=%s on the kernel command line: deprecated (amdgpu says so in dmesg) and it fights ttm.pages_limit",
			   val);
		dr_advise(r, "remove amdgpu.gttsize=%s and set ttm.pages_limit=<pages of 4 KiB> instead (GiB x 262144)",
			  val);
	}
}

void dr_check_gpu(struct dr_ctx *c)
{
	struct gpu g[MAX_GPUS];
	char rel[128] = "";
	int n = find_amd_gpus(c, g, MAX_GPUS);

	if (!n) {
		dr_add(c, DR_C_GPU, "amd", "", DR_SKIP, "no AMD GPU (PCI vendor 1002, display class)");
		return;
	}
	dr_kernel_release(c, rel, sizeof(rel));
	for (int i = 0; i < n; i++)
		check_one_gpu(c, &g[i], rel);
}

/* --- GPUDirect readiness --------------------------------------------------- */

#define PEERS "/sys/kernel/mm/memory_peers"

static void check_gdr_level(struct dr_ctx *c, const struct gpu *g, int ngpu)
{
	for (int i = 0; i < ngpu; i++) {
		for (size_t k = 0; k < c->nports; k++) {
			const struct dr_port *p = &c->ports[k];
			char common[256], subj[128];
			struct dr_result *r;
			int shared;

			/* a NIC that takes no GPU memory has no distance to tune */
			if (!p->pci[0] || (k && !strcmp(c->ports[k - 1].pci, p->pci)) ||
			    dr_nic_kind(p) == DR_NIC_HOST)
				continue;
			dr_fmt(subj, sizeof(subj), "%s<->%s", g[i].bdf, p->rxe ? p->netdev : p->dev);
			shared = dr_pci_common(g[i].path, p->pci, common, sizeof(common));
			if (shared > 0) {
				r = dr_add(c, DR_C_GPUDIRECT, "rccl_level", subj, DR_PASS,
					   "GPU and NIC share a PCIe switch/bridge: RCCL's default GPU Direct RDMA distance (NCCL_NET_GDR_LEVEL=PXB) covers it");
				dr_str(r, "path_type", "PXB");
				continue;
			}
			r = dr_add(c, DR_C_GPUDIRECT, "rccl_level", subj, DR_INFO,
				   "GPU and NIC meet only at %s: RCCL's default (NCCL_NET_GDR_LEVEL=PXB) turns GPU Direct RDMA off for this pair",
				   shared == 0 ? "the host bridge (PHB)" : "the CPU interconnect (SYS)");
			dr_str(r, "path_type", shared == 0 ? "PHB" : "SYS");
			dr_advise(r, "RCCL users: export NCCL_NET_GDR_LEVEL=%s (the GPU memory is system RAM on an APU, so the host bridge is its normal path)",
				  shared == 0 ? "PHB" : "SYS");
		}
	}
}

/* What GPU memory a NIC driver takes (dr_nic_kind), in words; NULL: not known */
static const char *nic_gpu_paths(const struct dr_port *p, bool *gpu)
{
	switch (dr_nic_kind(p)) {
	case DR_NIC_PEER_DMABUF:
		*gpu = true;
		return "PeerDirect (ibv_reg_mr on GPU memory through a peer client) and dma-buf MRs";
	case DR_NIC_DMABUF:
		*gpu = true;
		return "pinned dma-buf MRs (no PeerDirect)";
	case DR_NIC_HOST:
		*gpu = false;
		return "host buffers only: no PeerDirect, no dma-buf MRs";
	default:
		*gpu = true;
		return NULL;
	}
}

void dr_check_gpudirect(struct dr_ctx *c)
{
	char **clients = NULL, list[512] = "", name[80] = "", ours[64] = "", pd[8] = "";
	char ver[64], reason[256], how[768];
	struct gpu g[MAX_GPUS];
	bool core, loaded, kfd_client, amd_gpu, peer_nic = false, dmabuf_nic = false;
	struct dr_core k;
	int client = 0;
	int n, ks, ngpu, dmabuf_ok = -1;
	struct dr_result *r;

	n = dr_list(c, &clients, PEERS);
	ks = dr_kallsyms(c);
	core = n >= 0 || (ks >= 0 && (ks & DR_KS_PEER_API));
	for (int i = 0; i < n; i++) {
		size_t l = strlen(list);

		snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", clients[i]);
	}
	dr_core_facts(c, &k);
	for (size_t i = 0; i < c->nports; i++)
		peer_nic |= dr_nic_kind(&c->ports[i]) == DR_NIC_PEER_DMABUF;
	r = dr_add(c, DR_C_GPUDIRECT, "core", "", core ? DR_PASS : DR_INFO, "%s", "");
	dr_bool(r, "peer_memory_core", core);
	dr_str(r, "clients", list);
	dr_str(r, "kernel_flavour", dr_flavour_name(k.flavour));
	dr_bool(r, "ofed", k.ofed);
	dr_str(r, "ofed_path", k.ofed_path);
	dr_bool(r, "kallsyms_peer_api", k.kallsyms_api);
	if (core) {
		dr_set_summary(r, "peer-memory core present (%s%s; kernel %s, %s, %s)",
			       n >= 0 ? "memory_peers/ clients: " : "ib_register_peer_memory_client in kallsyms, no memory_peers sysfs",
			       n >= 0 ? (list[0] ? list : "none yet") : "", k.release,
			       dr_flavour_name(k.flavour), k.ofed ? "OFED installed" : "no OFED");
	} else {
		dr_set_summary(r, "no peer-memory core in kernel %s (%s, %s; no %s, no ib_register_peer_memory_client in /proc/kallsyms%s): ibv_reg_mr cannot register GPU (TTM) memory; strixpeer buffers and dma-buf MRs still work",
			       k.release[0] ? k.release : "(unknown)", dr_flavour_name(k.flavour),
			       k.ofed ? "OFED installed" : "no OFED", PEERS,
			       ks < 0 ? ", which is unreadable" : "");
		/* only a NIC that asks a core (mlx5) gains from one: no advice otherwise */
		if (peer_nic && dr_core_advice(c, &k, how, sizeof(how)))
			dr_advise(r, "%s", how);
	}

	/* strixpeer's own client */
	loaded = dr_exists(c, "/sys/module/strixpeer");
	kfd_client = false;
	if (n > 0)
		for (int i = 0; i < n; i++)
			kfd_client |= !strcmp(clients[i], "amdkfd");
	dr_list_free(clients, n);
	if (!loaded) {
		dr_add(c, DR_C_GPUDIRECT, "client", "", DR_SKIP,
		       "strixpeer is not loaded (see the strixpeer check)");
	} else {
		dr_read(c, name, sizeof(name), "/sys/module/strixpeer/parameters/peer_client_name");
		dr_read(c, ours, sizeof(ours), "/sys/module/strixpeer/version");
		dr_read(c, pd, sizeof(pd), "/sys/module/strixpeer/parameters/peerdirect");
		r = dr_add(c, DR_C_GPUDIRECT, "client", name, DR_PASS, "%s", "");
		dr_str(r, "name", name);
		ver[0] = '\0';
		if (name[0])
			dr_read(c, ver, sizeof(ver), PEERS "/%s/version", name);
		dr_str(r, "registered_version", ver);
		if (!core) {
			r->status = DR_SKIP;
			dr_set_summary(r, "strixpeer's client (name \"%s\") has no peer-memory core to register with",
				       name);
		} else if (pd[0] == 'N' || pd[0] == '0') {
			r->status = DR_INFO;
			dr_set_summary(r, "strixpeer's client is off (peerdirect=N)");
			dr_advise(r, "remove peerdirect=0 from strixpeer's options (/etc/modprobe.d/) and reload it");
		} else if (!strcmp(name, "amdkfd") && ver[0] && strcmp(ver, ours)) {
			r->status = DR_FAIL;
			dr_set_summary(r, "clash: strixpeer wants the client name amdkfd, but another amdkfd client (version %s, ROCm's amdgpu-dkms) is registered, so strixpeer's registration failed",
				       ver);
			dr_advise(r, "either drop peer_client_name=amdkfd (ROCm's amdkfd client then serves RCCL for its own memory) or remove amdgpu-dkms (AMD does not support it on Strix Halo)");
		} else if (!ver[0] && n < 0) {
			r->status = DR_INFO;
			dr_set_summary(r, "whether strixpeer's client \"%s\" registered cannot be told from files: this core has no memory_peers sysfs (OFED's and linux-nvidia's on 6.4 and later)",
				       name);
			dr_advise(r, "strixpeerctl status (PeerDirect: available yes/no, and why)");
		} else if (!ver[0]) {
			r->status = DR_WARN;
			reason[0] = '\0';
			if (c->live)
				dr_live_peer_reason(reason, sizeof(reason));
			dr_set_summary(r, "strixpeer's client \"%s\" is not registered with the peer-memory core%s%s",
				       name, reason[0] ? ": " : "", reason);
			dr_advise(r, "see strixpeerctl status (PeerDirect reason) and dmesg | grep strixpeer; rebuild the module against the core's Module.symvers (make module SP_PEER_SYMVERS=...)");
		} else if (strcmp(name, "amdkfd") && !kfd_client && c->nports && !peer_nic) {
			dr_set_summary(r, "strixpeer's client is registered as \"%s\"; no NIC here asks a peer-memory core (gpudirect.route), so neither its name nor the client changes anything on this node",
				       name);
		} else if (strcmp(name, "amdkfd") && !kfd_client) {
			r->status = DR_WARN;
			dr_set_summary(r, "strixpeer's client is registered as \"%s\": released RCCL, GASNet-EX, LCI and ctran look only for %s/amdkfd/version and will not use GPU Direct RDMA (RCCL's current code accepts any client: gpudirect.rccl_peermem)",
				       name, PEERS);
			dr_advise(r, "echo \"options strixpeer peer_client_name=amdkfd\" > /etc/modprobe.d/strixpeer-amdkfd.conf, then rmmod strixpeer && modprobe strixpeer");
		} else if (strcmp(name, "amdkfd")) {
			r->status = DR_INFO;
			dr_set_summary(r, "strixpeer's client is registered as \"%s\"; another client (ROCm's) is registered as amdkfd, which is what RCCL looks for",
				       name);
		} else {
			dr_set_summary(r, "strixpeer's client is registered as amdkfd (version %s): RCCL, GASNet-EX and others find it",
				       ver);
		}
	}

	/* strixpeer's client: registered (in sysfs), not, or not told by files */
	if (loaded && pd[0] != 'N' && pd[0] != '0' && core)
		client = ver[0] ? 1 : n < 0 ? -1 : 0;

	/* each NIC driver's GPU paths */
	bool any_gpu_nic = false;

	for (size_t i = 0; i < c->nports; i++) {
		const struct dr_port *p = &c->ports[i];
		const char *paths;
		bool gpu;

		if (i && !strcmp(c->ports[i - 1].dev, p->dev))
			continue;
		paths = nic_gpu_paths(p, &gpu);
		any_gpu_nic |= gpu;
		dmabuf_nic |= dr_nic_kind(p) == DR_NIC_PEER_DMABUF || dr_nic_kind(p) == DR_NIC_DMABUF;
		if (!paths)
			continue;
		r = dr_add(c, DR_C_GPUDIRECT, "nic", p->dev, DR_INFO, "%s (read from the driver's code, not tried on hardware)",
			   paths);
		dr_bool(r, "gpu_memory", gpu);
		if (!gpu)
			dr_advise(r, "register strixpeer buffers (sp_buf_alloc) on this NIC; GPU memory (hipMalloc) cannot be registered on it");
	}

	amd_gpu = (ngpu = find_amd_gpus(c, g, MAX_GPUS)) > 0;

	/* the dma-buf MR path, probed per device as NCCL/UCX do */
	for (size_t i = 0; i < c->nports; i++) {
		const struct dr_port *p = &c->ports[i];
		char why[160];
		int ret;

		if (i && !strcmp(c->ports[i - 1].dev, p->dev))
			continue;
		if (!c->live) {
			dr_add(c, DR_C_GPUDIRECT, "dmabuf_mr", p->dev, DR_SKIP,
			       "the ibv_reg_dmabuf_mr probe needs the live device (not under --sysroot)");
			continue;
		}
		ret = dr_live_dmabuf_probe(p->dev, why, sizeof(why));
		if (ret > 0 && dmabuf_ok < 1)
			dmabuf_ok = 1;
		else if (ret == 0 && dmabuf_ok < 0)
			dmabuf_ok = 0;
		r = dr_add(c, DR_C_GPUDIRECT, "dmabuf_mr", p->dev, ret < 0 ? DR_SKIP : DR_INFO,
			   "%s", why);
		dr_bool(r, "supported", ret > 0);
	}
	if (dmabuf_ok >= 0)
		dmabuf_nic = dmabuf_ok == 1;
	dr_check_ucx(c, client, c->nports && !any_gpu_nic, dmabuf_nic);
	if (amd_gpu && !core && dmabuf_ok == 0) {
		r = dr_add(c, DR_C_GPUDIRECT, "path", "", DR_WARN,
			   "no way for the NIC to register GPU memory: no peer-memory core and no device takes dma-buf MRs");
		dr_advise(r, "use strixpeer buffers for RDMA (export them to HIP with sp_buf_export); gpudirect.route says what this node's NICs take");
	}
	if (amd_gpu) {
		dr_check_route(c, &k, client);
		check_gdr_level(c, g, ngpu);
		dr_check_rccl(c, dmabuf_ok, any_gpu_nic, client);
	}
}
