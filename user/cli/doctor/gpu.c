// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the gpu check, the AMD iGPU (Strix Halo: kernel,
 * GTT, carve-out); dr_find_amd_gpus() for gpudirect.c.
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


int dr_find_amd_gpus(struct dr_ctx *c, struct dr_gpu *g, int max)
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
static void check_gtt(struct dr_ctx *c, const struct dr_gpu *g, const char *subj, bool apu,
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

static void check_one_gpu(struct dr_ctx *c, const struct dr_gpu *g, const char *rel)
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
	struct dr_gpu g[DR_MAX_GPUS];
	char rel[128] = "";
	int n = dr_find_amd_gpus(c, g, DR_MAX_GPUS);

	if (!n) {
		dr_add(c, DR_C_GPU, "amd", "", DR_SKIP, "no AMD GPU (PCI vendor 1002, display class)");
		return;
	}
	dr_kernel_release(c, rel, sizeof(rel));
	for (int i = 0; i < n; i++)
		check_one_gpu(c, &g[i], rel);
}
