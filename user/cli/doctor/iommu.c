// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the iommu check, the IOMMU's mode (units, kernel
 * command line) and each RDMA NIC's IOMMU group and default domain.
 * Formats: Documentation/ABI/testing/sysfs-kernel-iommu_groups.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

void dr_check_iommu(struct dr_ctx *c)
{
	char **units = NULL, val[64];
	int n = dr_list(c, &units, "/sys/class/iommu");
	struct dr_result *r;
	int ret;

	if (n > 0)
		r = dr_add(c, DR_C_IOMMU, "mode", "", DR_INFO, "IOMMU active (%d unit%s: %s%s)", n,
			   n == 1 ? "" : "s", units[0], n > 1 ? ", ..." : "");
	else
		r = dr_add(c, DR_C_IOMMU, "mode", "", DR_INFO, "no IOMMU active: DMA is not translated");
	dr_int(r, "units", n > 0 ? n : 0);
	dr_list_free(units, n);
	ret = dr_cmdline_has(c, "amd_iommu", val, sizeof(val));
	if (ret < 0) {
		dr_set_summary(r, "%s; /proc/cmdline %s", r->summary, dr_errstr(ret));
	} else if (ret && !strcmp(val, "off")) {
		r->status = DR_WARN;
		dr_str(r, "cmdline", "amd_iommu=off");
		dr_set_summary(r, "%s; amd_iommu=off on the kernel command line", r->summary);
		dr_advise(r, "amd_iommu=off turns the AMD IOMMU off entirely: no DMA protection for USB4/Thunderbolt devices (including thunderbolt-net peers), no XDNA NPU; strixpeer and RDMA need none of that off. Remove it; for the fastest DMA use iommu=pt (passthrough) instead");
	}
	if (dr_cmdline_has(c, "iommu", val, sizeof(val)) == 1 && !strcmp(val, "pt")) {
		dr_str(r, "cmdline_iommu", "pt");
		dr_set_summary(r, "%s; iommu=pt: devices use identity (passthrough) mappings", r->summary);
	}
	if (dr_cmdline_has(c, "iommu.strict", val, sizeof(val)) == 1 && !strcmp(val, "1"))
		dr_set_summary(r, "%s; iommu.strict=1: every unmap waits for an IOTLB flush", r->summary);

	for (size_t i = 0; i < c->nports; i++) {
		const struct dr_port *p = &c->ports[i];
		char group[64], type[32], devs[128], subj[160];

		if (!dr_pci_first_port(c, i))
			continue;
		dr_pci_devs_on(c, p->pci, devs, sizeof(devs));
		dr_fmt(subj, sizeof(subj), "%s %s", p->rxe ? p->netdev : devs, dr_pci_bdf(p->pci));
		if (dr_link_name(c, group, sizeof(group), "%s/iommu_group", p->pci)) {
			dr_add(c, DR_C_IOMMU, "group", subj, DR_INFO,
			       "not in an IOMMU group: DMA goes untranslated");
			continue;
		}
		ret = dr_read(c, type, sizeof(type), "/sys/kernel/iommu_groups/%s/type", group);
		if (ret) {
			dr_add(c, DR_C_IOMMU, "group", subj, DR_SKIP, "IOMMU group %s: type %s", group,
			       dr_errstr(ret));
			continue;
		}
		r = dr_add(c, DR_C_IOMMU, "group", subj, DR_INFO, "IOMMU group %s, default domain %s",
			   group, type);
		dr_str(r, "group", group);
		dr_str(r, "type", type);
		if (!strcmp(type, "identity"))
			dr_set_summary(r, "%s (passthrough: the NIC's DMA is not translated)", r->summary);
		else if (!strcmp(type, "DMA-FQ"))
			dr_set_summary(r, "%s (translated, lazy IOTLB flushes)", r->summary);
		else if (!strcmp(type, "DMA")) {
			dr_set_summary(r, "%s (translated, strict: an IOTLB flush per unmap)", r->summary);
			dr_advise(r, "registrations are mapped once, so RDMA transfers pay little; for less mapping cost use iommu=pt (passthrough) or iommu.strict=0");
		}
	}
}
