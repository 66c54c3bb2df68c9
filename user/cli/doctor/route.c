// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: where a peer-memory core would come from on this
 * node, and which route GPU memory takes to each NIC, with strixpeer and
 * without it (gpudirect.route).
 *
 * Where a core exists (sources named in docs/gpu-memory.md):
 *  - Ubuntu's generic kernels: none since 6.8 (Ubuntu Discourse topic 44425,
 *    "NVIDIA GPUDirect over InfiniBand migration paths": 24.04 and the 22.04
 *    HWE kernel are affected, 22.04's 5.15 is not);
 *  - Ubuntu's linux-nvidia kernels and MLNX/DOCA-OFED: a core in ib_uverbs
 *    (the same announcement); on kernels 6.4 and later it creates no
 *    /sys/kernel/mm/memory_peers (ROCm/rccl PR #1328, NVIDIA/nccl#1939);
 *  - Debian's and Fedora's stock kernels: none (no peer_mem in their
 *    drivers/infiniband/core; read from the kernels' code).
 * The kernel flavour comes from uname -r, OFED from its files
 * (/usr/src/ofa_kernel, ib_uverbs under /lib/modules/R/updates), the core
 * itself from /proc/kallsyms, which lists loaded modules only.
 */
#include <string.h>

#include "doctor.h"

const char *dr_flavour_name(enum dr_flavour f)
{
	static const char *const names[] = {
		[DR_FL_OTHER] = "other", [DR_FL_UBUNTU_GENERIC] = "ubuntu-generic",
		[DR_FL_UBUNTU_NVIDIA] = "ubuntu-nvidia", [DR_FL_FEDORA] = "fedora",
		[DR_FL_DEBIAN] = "debian",
	};

	return names[f];
}

static enum dr_flavour flavour(const char *rel)
{
	const char *fc = strstr(rel, ".fc");
	size_t n = strlen(rel);

	if (strstr(rel, "-nvidia"))
		return DR_FL_UBUNTU_NVIDIA;
	if (strstr(rel, "-generic") || (n > 11 && !strcmp(rel + n - 11, "-lowlatency")))
		return DR_FL_UBUNTU_GENERIC;
	if (fc && fc[3] >= '0' && fc[3] <= '9')
		return DR_FL_FEDORA;
	if (strstr(rel, "+deb") || (n > 6 && !strcmp(rel + n - 6, "-amd64")))
		return DR_FL_DEBIAN;
	return DR_FL_OTHER;
}

void dr_core_facts(struct dr_ctx *c, struct dr_core *k)
{
	static const char *const ofed[] = {
		"/usr/src/ofa_kernel", "/lib/modules/%s/updates/dkms/ib_uverbs.ko",
		"/lib/modules/%s/updates/dkms/ib_uverbs.ko.zst",
		"/lib/modules/%s/updates/dkms/ib_uverbs.ko.xz",
		"/lib/modules/%s/extra/mlnx-ofa_kernel/drivers/infiniband/core/ib_uverbs.ko",
	};
	int ks;

	memset(k, 0, sizeof(*k));
	dr_kernel_release(c, k->release, sizeof(k->release));
	k->flavour = flavour(k->release);
	for (size_t i = 0; i < sizeof(ofed) / sizeof(ofed[0]) && !k->ofed; i++) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		dr_fmt(k->ofed_path, sizeof(k->ofed_path), ofed[i], k->release);
#pragma GCC diagnostic pop
		k->ofed = dr_exists(c, "%s", k->ofed_path);
	}
	if (!k->ofed)
		k->ofed_path[0] = 0;
	ks = dr_kallsyms(c);
	k->kallsyms_api = ks >= 0 && (ks & DR_KS_PEER_API);
	k->sysfs = dr_exists(c, "/sys/kernel/mm/memory_peers");
}

bool dr_core_advice(const struct dr_ctx *c, const struct dr_core *k, char *out, size_t len)
{
	char ver[64];

	dr_os_var(c, "VERSION_ID", ver, sizeof(ver));
	if (k->ofed) {
		dr_fmt(out, len, "OFED is installed (%s) but its core is not in /proc/kallsyms, which lists loaded modules only: modprobe ib_uverbs (modinfo -n ib_uverbs must name OFED's, under updates/), then reinstall strixpeer-dkms so that it builds against OFED's Module.symvers",
		       k->ofed_path);
		return true;
	}
	switch (k->flavour) {
	case DR_FL_UBUNTU_GENERIC:
		if (k->release[0] && dr_kver_cmp(k->release, "6.8") < 0) {
			dr_fmt(out, len, "whether Ubuntu's generic kernels of 6.5 and 6.6 still carry the core is not settled (ROCm/rccl PR #1218 says the HWE 6.5 kernel does, issue 43 read their ABI files as exporting none): modprobe ib_uverbs (/proc/kallsyms lists loaded modules only); if ib_register_peer_memory_client still does not show, install NVIDIA's DOCA-OFED for Ubuntu%s%s",
			       ver[0] ? " " : "", ver);
			return true;
		}
		dr_fmt(out, len, "Ubuntu's generic kernels have no peer-memory core since 6.8 (Ubuntu Discourse topic 44425): install NVIDIA's DOCA-OFED for Ubuntu%s%s (its mlnx-ofa_kernel DKMS brings ib_uverbs with the core) or boot Ubuntu's linux-nvidia kernel, then reinstall strixpeer-dkms so that it builds against the core (docs/install.md, PeerDirect on OFED nodes)",
		       ver[0] ? " " : "", ver);
		return true;
	case DR_FL_UBUNTU_NVIDIA:
		dr_fmt(out, len, "Ubuntu's linux-nvidia kernels keep the core in ib_uverbs (Ubuntu Discourse topic 44425), and /proc/kallsyms lists loaded modules only: modprobe ib_uverbs, then reload strixpeer");
		return true;
	case DR_FL_FEDORA:
		dr_fmt(out, len, "Fedora's kernels have no peer-memory core, and this doctor knows of no OFED build for Fedora (not checked)");
		return false;
	case DR_FL_DEBIAN:
		dr_fmt(out, len, "Debian's kernels have no peer-memory core; DOCA-OFED brings one where NVIDIA publishes it for Debian%s%s (not checked here)",
		       ver[0] ? " " : "", ver);
		return false;
	default:
		dr_fmt(out, len, "a core comes with MLNX/DOCA-OFED's mlnx-ofa_kernel or Ubuntu's linux-nvidia kernels; no distribution's stock kernel has one");
		return false;
	}
}

enum dr_nic_kind dr_nic_kind(const struct dr_port *p)
{
	static const struct {
		const char *prefix;
		enum dr_nic_kind kind;
	} drv[] = {
		{ "mlx5", DR_NIC_PEER_DMABUF }, { "irdma", DR_NIC_DMABUF },
		{ "bnxt_re", DR_NIC_DMABUF }, { "efa", DR_NIC_DMABUF },
		{ "mlx4", DR_NIC_HOST }, { "siw", DR_NIC_HOST }, { "rxe", DR_NIC_HOST },
	};

	if (p->rxe)
		return DR_NIC_HOST;
	for (size_t i = 0; i < sizeof(drv) / sizeof(drv[0]); i++)
		if (!strncmp(p->dev, drv[i].prefix, strlen(drv[i].prefix)))
			return drv[i].kind;
	return DR_NIC_UNKNOWN;
}

static const char *const dmabuf_how =
	"sp_reg_mr() on the hipMalloc pointer, or LD_PRELOAD=libstrixpeer-preload.so for unmodified programs that call ibv_reg_mr (libstrixpeer(7)); UCX 1.23 and later and RCCL's dma-buf route use dma-buf MRs by themselves";

/* One NIC: its route and the one thing to do. @client: 1 strixpeer's client is registered, 0 not, -1 unknown */
static void route_one(struct dr_ctx *c, const struct dr_core *k, const struct dr_port *p,
		      int client)
{
	enum dr_nic_kind kind = dr_nic_kind(p);
	bool core = k->kallsyms_api || k->sysfs;
	const char *with = "", *without = "";
	char how[768];
	struct dr_result *r;

	r = dr_add(c, DR_C_GPUDIRECT, "route", p->rxe ? p->netdev : p->dev, DR_INFO, "%s", "");
	switch (kind) {
	case DR_NIC_HOST:
		with = "host";
		without = "host staging";
		dr_set_summary(r, "%s takes host memory only (no peer-core hook, no dma-buf MRs): GPU memory reaches it only as a strixpeer buffer the GPU computes in (the host route); without strixpeer, libraries copy GPU memory through host buffers. A peer-memory core, OFED or NCCL_NET_GDR_LEVEL cannot change that (read from the drivers' code, not tried on hardware)",
			       p->rxe ? "Soft-RoCE" : "this driver");
		dr_advise(r, "allocate the buffers the NIC and the GPU share with sp_buf_alloc() and give them to HIP with sp_buf_export() + hipImportExternalMemory() (examples/hip_import.c); register them with plain ibv_reg_mr()");
		break;
	case DR_NIC_DMABUF:
		with = without = "dma-buf";
		dr_set_summary(r, "the driver takes GPU memory as pinned dma-buf MRs (ibv_reg_dmabuf_mr) and has no peer-core hook, so plain ibv_reg_mr on hipMalloc memory fails with EFAULT%s (read from the driver's code, not tried on hardware)",
			       core ? " even with this node's core" : "");
		dr_advise(r, "register GPU memory through its dma-buf: %s", dmabuf_how);
		break;
	case DR_NIC_PEER_DMABUF:
		without = "dma-buf";
		if (core && client != 0) {
			with = "peerdirect";
			r->status = DR_PASS;
			dr_set_summary(r, "plain ibv_reg_mr on hipMalloc memory goes through the peer-memory core to strixpeer's client%s, and dma-buf MRs work too; without strixpeer only dma-buf MRs do (amdgpu's own client cannot register with the core on current kernels: symbol_get() refuses its non-GPL export, ROCm/mori PR #560) (read from the code, not tried on hardware)",
				       client < 0 ? " (if it registered: the core has no memory_peers sysfs; strixpeerctl status says)" : "");
			break;
		}
		with = "dma-buf";
		if (core) {
			dr_set_summary(r, "this kernel has a peer-memory core, but strixpeer's client is not registered, so plain ibv_reg_mr on hipMalloc memory fails (EFAULT) and GPU memory goes through dma-buf MRs only (read from the code, not tried on hardware)");
			dr_advise(r, "load strixpeer with its client (modprobe strixpeer; gpudirect.client says why it did not register)");
			break;
		}
		dr_set_summary(r, "no peer-memory core in kernel %s (%s, %s, no ib_register_peer_memory_client in /proc/kallsyms): plain ibv_reg_mr on hipMalloc memory fails (EFAULT); GPU memory goes through dma-buf MRs, with strixpeer for any program, without it only in programs that call ibv_reg_dmabuf_mr (read from the code, not tried on hardware)",
			       k->release[0] ? k->release : "(unknown)",
			       dr_flavour_name(k->flavour), k->ofed ? "OFED installed" : "no OFED");
		if (dr_core_advice(c, k, how, sizeof(how)))
			dr_advise(r, "dma-buf MRs work now (%s); for plain ibv_reg_mr on hipMalloc memory as well: %s",
				  dmabuf_how, how);
		else
			dr_advise(r, "register GPU memory through its dma-buf: %s (%s)", dmabuf_how, how);
		break;
	default:
		with = without = "unknown";
		dr_set_summary(r, "a driver this doctor has no GPU-memory facts for; sp_reg_mr() tries every route and names what each lacked (sp_reg_mr(3))");
	}
	dr_str(r, "route", with);
	dr_str(r, "route_without_strixpeer", without);
	dr_str(r, "kernel_flavour", dr_flavour_name(k->flavour));
	dr_bool(r, "ofed", k->ofed);
	dr_bool(r, "core", core);
}

void dr_check_route(struct dr_ctx *c, const struct dr_core *k, int client)
{
	for (size_t i = 0; i < c->nports; i++) {
		if (i && !strcmp(c->ports[i - 1].dev, c->ports[i].dev))
			continue;
		route_one(c, k, &c->ports[i], client);
	}
}
