// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the pcie check, the PCIe link of each RDMA NIC (up
 * through every bridge to the root port) against what its ports need.
 * Formats: drivers/pci/pci-sysfs.c, Documentation/ABI/testing/sysfs-bus-pci.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

struct link {
	unsigned int speed_mts;	/* 8000 for "8.0 GT/s PCIe"; 0 unknown */
	unsigned int width;
};

/* Usable Mb/s per lane after line coding, as the kernel computes it. */
static unsigned int lane_mbps(unsigned int mts)
{
	switch (mts) {
	case 2500: return 2000;		/* 8b/10b */
	case 5000: return 4000;
	case 8000: return 7876;		/* 128b/130b */
	case 16000: return 15753;
	case 32000: return 31507;
	case 64000: return 64000;	/* PAM4, FLIT */
	default: return 0;
	}
}

static int read_link(struct dr_ctx *c, const char *dev, const char *which, struct link *l)
{
	char buf[64];
	uint64_t w;
	int ret;

	l->speed_mts = 0;
	l->width = 0;
	ret = dr_read(c, buf, sizeof(buf), "%s/%s_link_speed", dev, which);
	if (ret)
		return ret;
	l->speed_mts = dr_parse_milli(buf, " GT/s");	/* older kernels: "8 GT/s" */
	ret = dr_read_u64(c, &w, "%s/%s_link_width", dev, which);
	if (ret)
		return ret;
	if (w == 0 || w > 32 || !l->speed_mts)
		return -EINVAL;
	l->width = (unsigned int)w;
	return 0;
}

static unsigned int link_mbps(const struct link *l)
{
	return lane_mbps(l->speed_mts) * l->width;
}

/* PCIe generation of a transfer rate */
static unsigned int gen_of(unsigned int mts)
{
	static const unsigned int rates[] = { 2500, 5000, 8000, 16000, 32000, 64000 };

	for (unsigned int i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (mts <= rates[i])
			return i + 1;
	return 0;
}

static void fmt_link(char *out, size_t len, const struct link *l)
{
	snprintf(out, len, "%u.%u GT/s x%u", l->speed_mts / 1000, l->speed_mts % 1000 / 100,
		 l->width);
}

/* 31504 -> "31.504 Gb/s", 56000 -> "56 Gb/s" */
static void fmt_gbps(char *out, size_t len, unsigned int mbps)
{
	if (mbps % 1000)
		snprintf(out, len, "%u.%03u Gb/s", mbps / 1000, mbps % 1000);
	else
		snprintf(out, len, "%u Gb/s", mbps / 1000);
}

/* The fastest port of the device the PCI function carries (Mb/s). */
static unsigned int port_rate(const struct dr_ctx *c, const char *pci, char *text, size_t len)
{
	unsigned int best = 0;

	text[0] = '\0';
	for (size_t i = 0; i < c->nports; i++) {
		if (strcmp(c->ports[i].pci, pci) || c->ports[i].rxe ||
		    c->ports[i].rate_mbps <= best)
			continue;
		best = c->ports[i].rate_mbps;
		snprintf(text, len, "%s", c->ports[i].rate_text);
	}
	return best;
}

#define MAX_HOPS 16	/* PCI functions from a NIC up to its root port */

static void check_nic_link(struct dr_ctx *c, const struct dr_port *p)
{
	char subj[160], devs[128], cur_s[48], max_s[48], bw_s[48], rate_s[48], cause[512] = "";
	char chain[MAX_HOPS][256], rate_text[64], bneck[64] = "", upstream[64] = "";
	struct link cur, max, up_max;
	unsigned int rate, min_bw;
	int n;
	struct dr_result *r;
	bool downgraded;
	int ret;

	dr_pci_devs_on(c, p->pci, devs, sizeof(devs));
	dr_fmt(subj, sizeof(subj), "%s %s", p->rxe ? p->netdev : devs, dr_pci_bdf(p->pci));
	ret = read_link(c, p->pci, "current", &cur);
	if (!ret)
		ret = read_link(c, p->pci, "max", &max);
	if (ret) {
		dr_add(c, DR_C_PCIE, "link", subj, DR_SKIP,
		       "link speed/width %s (not a PCIe device, or the kernel does not show it)",
		       dr_errstr(ret));
		return;
	}
	r = dr_add(c, DR_C_PCIE, "link", subj, DR_PASS, "%s", "");
	dr_str(r, "pci", dr_pci_bdf(p->pci));
	dr_int(r, "current_speed_mts", cur.speed_mts);
	dr_int(r, "current_width", cur.width);
	dr_int(r, "max_speed_mts", max.speed_mts);
	dr_int(r, "max_width", max.width);

	/*
	 * The chain from the NIC up to the root port: chain[1] is the port
	 * the NIC sits in (its slot, or an adapter's), and every function
	 * below the root port has its own upstream link; the slowest link
	 * limits the NIC.
	 */
	snprintf(chain[0], sizeof(chain[0]), "%s", p->pci);
	for (n = 1; n < MAX_HOPS; n++) {
		memcpy(chain[n], chain[n - 1], sizeof(chain[n]));
		if (!dr_pci_parent(chain[n]))
			break;
	}
	up_max.speed_mts = up_max.width = 0;
	if (n > 1) {
		dr_fmt(upstream, sizeof(upstream), "%s", dr_pci_bdf(chain[1]));
		if (read_link(c, chain[1], "max", &up_max))
			up_max.speed_mts = up_max.width = 0;
	}
	min_bw = link_mbps(&cur);
	for (int k = 1; k < n - 1; k++) {
		struct link pc;

		if (read_link(c, chain[k], "current", &pc) || link_mbps(&pc) >= min_bw)
			continue;
		min_bw = link_mbps(&pc);
		fmt_link(cur_s, sizeof(cur_s), &pc);
		dr_fmt(bneck, sizeof(bneck), "%s", dr_pci_bdf(chain[k]));
		snprintf(cause, sizeof(cause),
			 "the link above bridge %s runs at %s, narrower or slower than the NIC's own link",
			 bneck, cur_s);
	}
	rate = port_rate(c, p->pci, rate_text, sizeof(rate_text));
	if (p->rxe && !rate) {
		uint64_t mbps;

		if (dr_read_u64(c, &mbps, "/sys/class/net/%s/speed", p->netdev) == 0 &&
		    mbps < 10000000) {
			rate = (unsigned int)mbps;
			dr_fmt(rate_text, sizeof(rate_text), "%s at %llu Mb/s", p->netdev,
				 (unsigned long long)mbps);
		}
	}
	downgraded = cur.speed_mts < max.speed_mts || cur.width < max.width;
	if (downgraded && !bneck[0]) {
		fmt_link(max_s, sizeof(max_s), &max);
		if (up_max.width && up_max.width < max.width) {
			fmt_link(cur_s, sizeof(cur_s), &up_max);
			snprintf(cause, sizeof(cause),
				 "the slot/adapter is the limit: upstream port %s can do no more than %s (an M.2/Oculink adapter or a slot wired x%u) for a card capable of %s",
				 upstream, cur_s, up_max.width, max_s);
		} else if (up_max.speed_mts && up_max.speed_mts < max.speed_mts) {
			fmt_link(cur_s, sizeof(cur_s), &up_max);
			snprintf(cause, sizeof(cause),
				 "the slot is the limit: upstream port %s can do no more than %s for a card capable of %s",
				 upstream, cur_s, max_s);
		} else {
			snprintf(cause, sizeof(cause),
				 "both ends can do %s but the link trained lower: a riser, cable or adapter losing lanes/speed, a badly seated card, or a BIOS link-speed setting",
				 max_s);
		}
	}
	fmt_link(cur_s, sizeof(cur_s), &cur);
	fmt_link(max_s, sizeof(max_s), &max);
	fmt_gbps(bw_s, sizeof(bw_s), min_bw);
	dr_int(r, "usable_mbps", min_bw);
	dr_int(r, "port_rate_mbps", rate);
	if (up_max.width)
		dr_int(r, "slot_max_width", up_max.width);
	if (bneck[0])
		dr_str(r, "bottleneck", bneck);
	if (rate)
		fmt_gbps(rate_s, sizeof(rate_s), rate);
	else
		snprintf(rate_s, sizeof(rate_s), "an unknown rate");
	dr_set_summary(r, "%s (card capable of %s): %s usable %s the %s port%s%s%s%s",
		       cur_s, max_s, bw_s,
		       !rate ? "for" : min_bw < rate ? "- below" : "for",
		       rate_s, rate_text[0] ? " (" : "", rate_text, rate_text[0] ? ")" : "",
		       cause[0] ? "; " : "");
	if (cause[0])
		dr_set_summary(r, "%scause: %s", r->summary, cause);
	/* a slower link still carries RDMA: WARN with the usable rate, never FAIL */
	if (rate && min_bw < rate) {
		r->status = DR_WARN;
	} else if (downgraded || bneck[0]) {
		r->status = DR_INFO;
		dr_advise(r, "the link is downgraded but still faster than the port: nothing lost for RDMA");
		return;
	}
	if (r->status >= DR_WARN) {
		if (strstr(cause, "slot/adapter"))
			dr_advise(r, "put the NIC in a slot wired x%u (or wider) from the CPU: an M.2/Oculink x4 adapter caps it at %s",
				  max.width, bw_s);
		else if (strstr(cause, "slot is"))
			dr_advise(r, "put the NIC in a slot of its own generation (%s)", max_s);
		else if (bneck[0])
			dr_advise(r, "move the NIC off the switch/bridge %s, or to a slot wired to the CPU", bneck);
		else
			dr_advise(r, "reseat the card, replace riser/cable/adapter, set the slot to Auto or Gen%u in the BIOS; check with lspci -vv -s %s (LnkSta)",
				  gen_of(max.speed_mts), dr_pci_bdf(p->pci));
	}
}

void dr_check_pcie(struct dr_ctx *c)
{
	int n = 0;

	for (size_t i = 0; i < c->nports; i++) {
		if (!dr_pci_first_port(c, i))
			continue;
		n++;
		check_nic_link(c, &c->ports[i]);
	}
	for (size_t i = 0; i < c->nports; i++) {
		const struct dr_port *p = &c->ports[i];
		char name[96];

		if (p->pci[0] || (i && !strcmp(c->ports[i - 1].dev, p->dev)))
			continue;
		n++;
		snprintf(name, sizeof(name), "%s", p->dev);
		dr_add(c, DR_C_PCIE, "link", name, DR_SKIP, "%s%s%s: no PCIe device of its own",
		       p->rxe ? "software RDMA device (Soft-RoCE on " : "not a PCI device",
		       p->rxe ? p->netdev : "", p->rxe ? ")" : "");
	}
	if (!n)
		dr_add(c, DR_C_PCIE, "link", "", DR_SKIP, "no RDMA devices");
}
