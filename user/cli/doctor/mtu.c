// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the mtu check, each RDMA port's active MTU against
 * its netdev's (RoCE, Soft-RoCE, IPoIB), from /sys/class/infiniband and
 * /sys/class/net.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

/* The largest IB MTU (256...4096) a payload of @bytes holds; 0: none. */
static unsigned int ib_mtu_for(long bytes)
{
	for (unsigned int m = 4096; m >= 256; m /= 2)
		if (bytes >= m)
			return m;
	return 0;
}

void dr_check_mtu(struct dr_ctx *c)
{
	size_t checked = 0;

	for (size_t i = 0; i < c->nports; i++) {
		struct dr_port *p = &c->ports[i];
		char name[96], mode[32];
		struct dr_result *r;
		unsigned int act;
		uint64_t mtu;
		int ret, over;

		dr_port_name(p, name, sizeof(name));
		if (!p->netdev[0]) {
			checked++;
			dr_add(c, DR_C_MTU, strcmp(p->link_layer, "InfiniBand") ? "roce" : "ipoib",
			       name, DR_SKIP, "no netdev found for this port");
			continue;
		}
		ret = dr_read_u64(c, &mtu, "/sys/class/net/%s/mtu", p->netdev);
		checked++;
		if (!strcmp(p->link_layer, "InfiniBand")) {
			r = dr_add(c, DR_C_MTU, "ipoib", name, DR_INFO, "IPoIB %s", p->netdev);
			if (ret) {
				r->status = DR_SKIP;
				dr_set_summary(r, "IPoIB %s: mtu %s", p->netdev, dr_errstr(ret));
				continue;
			}
			if (dr_read(c, mode, sizeof(mode), "/sys/class/net/%s/mode", p->netdev))
				snprintf(mode, sizeof(mode), "unknown");
			dr_str(r, "netdev", p->netdev);
			dr_int(r, "netdev_mtu", (int64_t)mtu);
			dr_str(r, "ipoib_mode", mode);
			if (!strcmp(mode, "datagram"))
				dr_set_summary(r, "IPoIB %s: datagram mode, MTU %llu (IB MTU %u)",
							 p->netdev, (unsigned long long)mtu,
							 ib_mtu_for((long)mtu + 4));
			else
				dr_set_summary(r, "IPoIB %s: %s mode, MTU %llu", p->netdev, mode,
							 (unsigned long long)mtu);
			if (!strcmp(mode, "datagram") && mtu < 4092)
				dr_advise(r, "IPoIB traffic only: a 4K IB MTU (set by the subnet manager's partition config) gives datagram MTU 4092, connected mode (echo connected > /sys/class/net/%s/mode) up to 65520",
					  p->netdev);
			continue;
		}
		over = p->rxe ? 80 : 96;
		r = dr_add(c, DR_C_MTU, "roce", name, DR_PASS, "%s", "");
		dr_str(r, "netdev", p->netdev);
		if (ret) {
			r->status = DR_SKIP;
			dr_set_summary(r, "%s: mtu %s", p->netdev, dr_errstr(ret));
			continue;
		}
		act = mtu > 65536 ? 4096 : ib_mtu_for((long)mtu - over);
		dr_int(r, "netdev_mtu", (int64_t)mtu);
		dr_int(r, "rdma_mtu", act);
		dr_int(r, "overhead", over);
		dr_set_summary(r, "%s MTU %llu -> RDMA MTU %u (%s: netdev MTU - %d, rounded down)",
					 p->netdev, (unsigned long long)mtu, act,
					 p->rxe ? "Soft-RoCE" : "RoCE", over);
		if (act < 4096) {
			r->status = act ? DR_WARN : DR_FAIL;
			dr_advise(r, "ip link set %s mtu 9000 (and make it permanent in the network configuration); the peer's netdev and every switch port on the path must allow the same MTU; RDMA MTU 4096 needs a netdev MTU of at least %d",
				  p->netdev, 4096 + over);
		}
	}
	if (!checked)
		dr_add(c, DR_C_MTU, "roce", "", DR_SKIP, "no RDMA ports");
}
