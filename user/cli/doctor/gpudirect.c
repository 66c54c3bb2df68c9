// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the gpudirect check, GPUDirect readiness: the
 * peer-memory core and clients as RCCL/UCX/NCCL look for them, the dma-buf
 * MR path, each NIC driver's GPU memory paths (route.c, stack.c and ucx.c
 * add gpudirect.route, gpudirect.rccl* and gpudirect.ucx).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

#define PEERS "/sys/kernel/mm/memory_peers"

static void check_gdr_level(struct dr_ctx *c, const struct dr_gpu *g, int ngpu)
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
	struct dr_gpu g[DR_MAX_GPUS];
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

	amd_gpu = (ngpu = dr_find_amd_gpus(c, g, DR_MAX_GPUS)) > 0;

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
