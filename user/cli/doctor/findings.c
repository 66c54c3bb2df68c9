// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the catalogue of finding ids. Every id doctor can
 * report ("<check>.<what>", as dr_add() builds it), the worst status it
 * can have (in enum dr_status's order, SKIP above INFO), where it is
 * reached, and one line of what it means. doctor-test's
 * findings_catalogued_emitted_documented checks it both ways: every id
 * the fixtures make doctor emit is here, at no worse a status; every id
 * here that a fixture can reach is emitted by one; and these ids and the
 * ones strixpeerctl-doctor(8) documents are the same set. A new finding
 * is a line here and a sentence in the man page.
 */
#include <string.h>

#include "doctor.h"

#define F(i, w, h, m) { .id = i, .worst = DR_##w, .reach = DR_REACH_##h, .meaning = m }

const struct dr_finding dr_findings[] = {
	F("rdma.port", FAIL, FIXTURE, "an RDMA port's state, physical state, link layer, netdev and rate"),
	F("rdma.devices", FAIL, FIXTURE, "no RDMA device at all"),
	F("rdma.core_version", WARN, FIXTURE, "rdma-core's release from libibverbs' file name (WARN: irdma below 50)"),
	F("pcie.link", WARN, FIXTURE, "a NIC's PCIe link up to the root port against its port rate"),
	F("mtu.roce", FAIL, FIXTURE, "the RDMA MTU a RoCE port's netdev MTU allows"),
	F("mtu.ipoib", SKIP, FIXTURE, "IPoIB's mode and MTU"),
	F("memory.memlock", FAIL, FIXTURE, "doctor's own RLIMIT_MEMLOCK, what registrations are charged to"),
	F("memory.services", WARN, FIXTURE, "the RLIMIT_MEMLOCK systemd services, docker and containerd get"),
	F("memory.hugepages", SKIP, FIXTURE, "the hugetlb pool and transparent hugepage mode"),
	F("memory.free_2m", WARN, FIXTURE, "free 2 MiB blocks per NUMA node, where strixpeer's pages come from"),
	F("numa.nodes", SKIP, FIXTURE, "the NUMA nodes online"),
	F("numa.nic", WARN, FIXTURE, "the NUMA node a NIC is on, and its CPUs"),
	F("iommu.mode", WARN, FIXTURE, "the IOMMU units and kernel command line (WARN: amd_iommu=off)"),
	F("iommu.group", SKIP, FIXTURE, "a NIC's IOMMU group and its default domain"),
	F("gpu.amd", SKIP, FIXTURE, "no AMD GPU"),
	F("gpu.driver", FAIL, FIXTURE, "an AMD GPU not bound to amdgpu"),
	F("gpu.kfd", FAIL, FIXTURE, "/dev/kfd, ROCm's compute device"),
	F("gpu.kernel", WARN, FIXTURE, "the kernel against the minimum ROCm gives for gfx1151"),
	F("gpu.carveout", WARN, FIXTURE, "an APU's BIOS VRAM carve-out (WARN above 4 GiB)"),
	F("gpu.gtt", WARN, FIXTURE, "the GTT size against ttm.pages_limit and, on an APU, RAM"),
	F("gpu.gttsize", WARN, FIXTURE, "the deprecated amdgpu.gttsize on the command line"),
	F("gpudirect.core", SKIP, FIXTURE, "the peer-memory core, its clients and where one would come from"),
	F("gpudirect.route", SKIP, FIXTURE, "the route GPU memory takes to a NIC with strixpeer and without"),
	F("gpudirect.client", FAIL, FIXTURE, "strixpeer's peer-memory client and its name (amdkfd)"),
	F("gpudirect.ucx", WARN, FIXTURE, "what UCX does with ROCm memory"),
	F("gpudirect.dmabuf_mr", SKIP, FIXTURE, "whether a device takes dma-buf MRs (probed as NCCL and UCX do)"),
	F("gpudirect.path", WARN, LIVE, "an AMD GPU with neither a peer-memory core nor a dma-buf device"),
	F("gpudirect.nic", INFO, FIXTURE, "the GPU memory paths a NIC's driver has"),
	F("gpudirect.rccl_level", SKIP, FIXTURE, "where a GPU and a NIC meet on PCIe (NCCL_NET_GDR_LEVEL)"),
	F("gpudirect.rccl_peermem", SKIP, FIXTURE, "the memory_peers client RCCL's scan finds first"),
	F("gpudirect.rccl_dmabuf", WARN, FIXTURE, "RCCL's dma-buf kernel test"),
	F("gpudirect.rccl", WARN, FIXTURE, "the route RCCL takes and the environment to export"),
	F("thunderbolt.link", WARN, FIXTURE, "Soft-RoCE over USB4/Thunderbolt: the XDomain link's lanes and speed"),
	F("counters.errors", FAIL, FIXTURE, "a port's error counters growing or saturated between two samples"),
	F("strixpeer.module", FAIL, FIXTURE, "strixpeer loaded, its version against the library's"),
	F("strixpeer.install", FAIL, FIXTURE, "strixpeer.ko installed for each kernel in /lib/modules"),
	F("strixpeer.abi", FAIL, FIXTURE, "the library's version handshake with the module"),
	F("strixpeer.device", FAIL, FIXTURE, "/dev/strixpeer's mode and group against the caller"),
	F("strixpeer.in_use", INFO, LIVE, "what holds the module (rmmod would fail)"),
	F("compare.mtu", FAIL, COMPARE, "the RoCE ports' RDMA and netdev MTU across the nodes"),
	F("compare.kernel", WARN, COMPARE, "the nodes' kernels differ"),
	F("compare.module", WARN, COMPARE, "the nodes' strixpeer module versions differ"),
	F("compare.library", WARN, COMPARE, "the nodes' libstrixpeer versions differ"),
	F("compare.abi", WARN, COMPARE, "the nodes' module ABIs differ"),
	F("compare.peer_client_name", WARN, COMPARE, "the nodes' PeerDirect client names differ"),
	F("compare.peer_clients", WARN, COMPARE, "the nodes' sets of peer-memory clients differ"),
	F("compare.memlock", WARN, COMPARE, "the reporting processes' RLIMIT_MEMLOCK differs"),
	F("compare.firmware", WARN, COMPARE, "NICs of one model run different firmware"),
	F("compare.nodes", INFO, COMPARE, "the reports compared and their exit statuses"),
	F("rdmatest.loopback", FAIL, LIVE, "an RDMA WRITE/READ into strixpeer memory through one port"),
	F("rdmatest.ports", FAIL, LIVE, "an RDMA WRITE/READ into strixpeer memory between two ports"),
	F("rdmatest.peer", FAIL, LIVE, "an RDMA WRITE/READ into strixpeer memory with doctor serve on a peer"),
};
#undef F

const size_t dr_nfindings = sizeof(dr_findings) / sizeof(dr_findings[0]);

const struct dr_finding *dr_finding(const char *id)
{
	for (size_t i = 0; i < dr_nfindings; i++)
		if (!strcmp(dr_findings[i].id, id))
			return &dr_findings[i];
	return NULL;
}
