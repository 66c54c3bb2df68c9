// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the numa check, the NUMA nodes online and the node
 * each RDMA NIC is on (its numa_node, the node's CPUs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

/* Nodes online, as "0-1"; the count, or -errno. */
static int nodes_online(struct dr_ctx *c, char *list, size_t len)
{
	int count = 0;
	char *s, *save = NULL, copy[256];
	int ret = dr_read(c, list, len, "/sys/devices/system/node/online");

	if (ret)
		return ret;
	snprintf(copy, sizeof(copy), "%s", list);
	for (s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		unsigned int a, b;

		if (sscanf(s, "%u-%u", &a, &b) == 2 && b >= a)
			count += (int)(b - a + 1);
		else if (sscanf(s, "%u", &a) == 1)
			count++;
		else
			return -EINVAL;
	}
	return count;
}

void dr_check_numa(struct dr_ctx *c)
{
	char online[256], cpus[256];
	int nodes = nodes_online(c, online, sizeof(online));
	struct dr_result *r;
	int nics = 0;

	if (nodes < 0) {
		dr_add(c, DR_C_NUMA, "nodes", "", DR_SKIP, "/sys/devices/system/node/online %s",
		       dr_errstr(nodes));
		return;
	}
	r = dr_add(c, DR_C_NUMA, "nodes", "", DR_INFO, "%d NUMA node%s online (%s)", nodes,
		   nodes == 1 ? "" : "s", online);
	dr_int(r, "nodes", nodes);
	if (nodes == 1) {
		dr_set_summary(r, "one NUMA node (%s): every NIC, CPU and buffer is local (Strix Halo is one node)",
			       online);
		return;
	}
	for (size_t i = 0; i < c->nports; i++) {
		const struct dr_port *p = &c->ports[i];
		char devs[128], subj[160];
		int64_t node;
		int ret;

		if (!dr_pci_first_port(c, i))
			continue;
		nics++;
		dr_pci_devs_on(c, p->pci, devs, sizeof(devs));
		dr_fmt(subj, sizeof(subj), "%s %s", p->rxe ? p->netdev : devs, dr_pci_bdf(p->pci));
		ret = dr_read_s64(c, &node, "%s/numa_node", p->pci);
		if (ret) {
			dr_add(c, DR_C_NUMA, "nic", subj, DR_SKIP, "numa_node %s", dr_errstr(ret));
			continue;
		}
		if (node < 0) {
			r = dr_add(c, DR_C_NUMA, "nic", subj, DR_WARN,
				   "numa_node -1: the firmware does not say which of the %d nodes the NIC is on",
				   nodes);
			dr_int(r, "node", -1);
			dr_advise(r, "find the socket the slot is wired to (motherboard manual, lstopo) and run RDMA processes there: numactl --cpunodebind=N --membind=N; allocate strixpeer buffers on it (sp_buf_alloc node argument)");
			continue;
		}
		if (dr_read(c, cpus, sizeof(cpus), "/sys/devices/system/node/node%lld/cpulist",
			    (long long)node) || !cpus[0]) {
			r = dr_add(c, DR_C_NUMA, "nic", subj, DR_WARN,
				   "the NIC is on node %lld, which has no CPUs", (long long)node);
			dr_int(r, "node", node);
			dr_advise(r, "run RDMA processes on the node closest to %lld (numactl --hardware shows distances) and put buffers on node %lld",
				  (long long)node, (long long)node);
			continue;
		}
		r = dr_add(c, DR_C_NUMA, "nic", subj, DR_PASS, "the NIC is on node %lld (CPUs %s)",
			   (long long)node, cpus);
		dr_int(r, "node", node);
		dr_str(r, "cpus", cpus);
		dr_advise(r, "for the best bandwidth run RDMA processes there: numactl --cpunodebind=%lld --membind=%lld, and allocate strixpeer buffers on node %lld",
			  (long long)node, (long long)node, (long long)node);
	}
	if (!nics)
		dr_add(c, DR_C_NUMA, "nic", "", DR_SKIP, "no PCI RDMA NIC to place");
}
