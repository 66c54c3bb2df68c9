// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the thunderbolt check, Soft-RoCE over USB4/
 * Thunderbolt (thunderbolt-net): the link's speed and lanes from the
 * thunderbolt bus's XDomain attributes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

/* The XDomain (remote host) directory of a thunderbolt netdev, under /sys. */
static int tb_xdomain(struct dr_ctx *c, const char *netdev, char *out, size_t len)
{
	char svc[PATH_MAX];
	char *slash;
	int ret = dr_resolve(c, svc, sizeof(svc), "/sys/class/net/%s/device", netdev);

	if (ret)
		return ret;
	slash = strrchr(svc, '/');
	if (!slash || slash == svc)
		return -ENOENT;
	*slash = '\0';	/* the service's parent is the XDomain */
	if (strlen(svc) + 1 > len)
		return -ENAMETOOLONG;
	strcpy(out, svc);
	return 0;
}

/* thunderbolt-net's netdev: by its kernel name, or its bus if renamed */
static bool is_tb(struct dr_ctx *c, const char *netdev)
{
	char bus[32];

	if (!strncmp(netdev, "thunderbolt", 11))
		return true;
	return dr_link_name(c, bus, sizeof(bus), "/sys/class/net/%s/device/subsystem", netdev) == 0 &&
	       !strcmp(bus, "thunderbolt");
}

void dr_check_thunderbolt(struct dr_ctx *c)
{
	char **nets = NULL;
	int n, found = 0;

	for (size_t i = 0; i < c->nports; i++) {
		struct dr_port *p = &c->ports[i];
		char name[96], xd[PATH_MAX], speed[32] = "";
		uint64_t rx_lanes = 0, tx_lanes = 0;
		struct dr_result *r;
		unsigned int gbps;

		if (!p->rxe || !is_tb(c, p->netdev))
			continue;
		found++;
		dr_port_name(p, name, sizeof(name));
		r = dr_add(c, DR_C_THUNDERBOLT, "link", name, DR_PASS, "Soft-RoCE on %s", p->netdev);
		dr_str(r, "netdev", p->netdev);
		dr_int(r, "rxe_rate_mbps", p->rate_mbps);
		if (tb_xdomain(c, p->netdev, xd, sizeof(xd)) ||
		    dr_read_u64(c, &rx_lanes, "%s/rx_lanes", xd) ||
		    dr_read(c, speed, sizeof(speed), "%s/rx_speed", xd)) {
			r->status = DR_INFO;
			dr_set_summary(r, "Soft-RoCE on %s; the USB4/Thunderbolt link's lanes and speed are not readable (kernel older than 5.17?)",
						 p->netdev);
			dr_advise(r, "measure the link (iperf3 over %s): rxe's rate (%s) is not the link's",
				  p->netdev, p->rate_text);
			continue;
		}
		dr_read_u64(c, &tx_lanes, "%s/tx_lanes", xd);
		gbps = (unsigned int)strtoul(speed, NULL, 10);
		dr_int(r, "rx_lanes", (int64_t)rx_lanes);
		dr_int(r, "tx_lanes", (int64_t)tx_lanes);
		dr_int(r, "lane_gbps", gbps);
		dr_int(r, "link_gbps", (int64_t)(gbps * rx_lanes));
		dr_set_summary(r, "Soft-RoCE on %s: %llu lane(s) x %u Gb/s = %llu Gb/s (rxe reports %s, which is not the link's rate)",
					 p->netdev, (unsigned long long)rx_lanes, gbps,
					 (unsigned long long)(gbps * rx_lanes),
					 p->rate_text[0] ? p->rate_text : "no rate");
		if (rx_lanes < 2) {
			r->status = DR_WARN;
			dr_advise(r, "one lane: half the bandwidth; use a certified 40 Gb/s USB4/Thunderbolt cable and ports that bond two lanes (check tx_lanes/rx_lanes again after replugging)");
		}
		if (gbps && gbps <= 10) {
			r->status = DR_WARN;
			dr_advise(r, "Gen2 lanes (10 Gb/s): a USB4 (20 Gb/s per lane) or Thunderbolt 4/5 port and cable give more");
		}
	}
	/* thunderbolt netdevs nobody runs Soft-RoCE on */
	n = dr_list(c, &nets, "/sys/class/net");
	for (int i = 0; i < n; i++) {
		bool used = false;
		struct dr_result *r;

		if (!is_tb(c, nets[i]))
			continue;
		for (size_t k = 0; k < c->nports; k++)
			used |= c->ports[k].rxe && !strcmp(c->ports[k].netdev, nets[i]);
		if (used)
			continue;
		found++;
		r = dr_add(c, DR_C_THUNDERBOLT, "link", nets[i], DR_INFO,
			   "%s (USB4/Thunderbolt networking) has no Soft-RoCE device", nets[i]);
		dr_advise(r, "for RDMA over it: rdma link add rxe_%s type rxe netdev %s", nets[i], nets[i]);
	}
	dr_list_free(nets, n);
	if (!found)
		dr_add(c, DR_C_THUNDERBOLT, "link", "", DR_SKIP,
		       "no USB4/Thunderbolt network interface (thunderbolt*)");
}
