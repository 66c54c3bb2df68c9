// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the links of the RDMA ports rdma.c scanned. Their
 * MTU (mtu), error counters sampled twice (counters), and Soft-RoCE over
 * USB4/Thunderbolt (thunderbolt). Everything from /sys/class/infiniband,
 * /sys/class/net and the thunderbolt bus's XDomain attributes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor.h"

#define IB "/sys/class/infiniband"

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

/* Counters whose growth means trouble, and their widths (IBA PMA). */
static const struct ctr_rule {
	const char *name;
	enum dr_status on_growth;
	unsigned int bits;	/* saturation value 2^bits-1; 0: 64-bit, never */
} ctr_rules[] = {
	{ "link_downed", DR_FAIL, 8 },
	{ "symbol_error", DR_WARN, 16 },
	{ "link_error_recovery", DR_WARN, 8 },
	{ "port_rcv_errors", DR_WARN, 16 },
	{ "local_link_integrity_errors", DR_WARN, 4 },
	{ "excessive_buffer_overrun_errors", DR_WARN, 4 },
	{ "port_rcv_remote_physical_errors", DR_WARN, 16 },
	{ "port_xmit_discards", DR_INFO, 16 },
	{ "VL15_dropped", DR_INFO, 16 },
	/* hw_counters (mlx5, mlx4, rxe), 64-bit */
	{ "packet_seq_err", DR_WARN, 0 },
	{ "out_of_sequence", DR_WARN, 0 },
	{ "out_of_seq_request", DR_WARN, 0 },
	{ "rcvd_seq_err", DR_WARN, 0 },
	{ "implied_nak_seq_err", DR_WARN, 0 },
	{ "local_ack_timeout_err", DR_WARN, 0 },
	{ "retry_exceeded_err", DR_WARN, 0 },
	{ "rq_num_oos", DR_WARN, 0 },
};

#define MAX_CTRS 160

struct ctr_sample {
	char name[MAX_CTRS][64];
	const struct ctr_rule *rule[MAX_CTRS];
	uint64_t v1[MAX_CTRS], v2[MAX_CTRS];
	bool ok1[MAX_CTRS], ok2[MAX_CTRS];
	bool in_hw[MAX_CTRS];
	int n;
	int dirs;	/* counters/ and hw_counters/ found */
};

static const struct ctr_rule *rule_for(const char *name)
{
	for (size_t i = 0; i < sizeof(ctr_rules) / sizeof(ctr_rules[0]); i++)
		if (!strcmp(ctr_rules[i].name, name))
			return &ctr_rules[i];
	return NULL;
}

static void sample_list(struct dr_ctx *c, const struct dr_port *p, struct ctr_sample *s)
{
	static const char *const dirs[] = { "counters", "hw_counters" };

	for (int d = 0; d < 2; d++) {
		char **names = NULL;
		int n = dr_list(c, &names, IB "/%s/ports/%u/%s", p->dev, p->port, dirs[d]);

		if (n >= 0)
			s->dirs++;
		for (int i = 0; i < n && s->n < MAX_CTRS; i++) {
			if (!strcmp(names[i], "lifespan"))
				continue;
			snprintf(s->name[s->n], sizeof(s->name[0]), "%s", names[i]);
			s->rule[s->n] = rule_for(names[i]);
			s->in_hw[s->n] = d == 1;
			s->n++;
		}
		dr_list_free(names, n);
	}
}

static void sample_read(struct dr_ctx *c, const struct dr_port *p, struct ctr_sample *s,
			bool second)
{
	for (int i = 0; i < s->n; i++) {
		uint64_t *v = second ? &s->v2[i] : &s->v1[i];
		bool *ok = second ? &s->ok2[i] : &s->ok1[i];

		/* "N/A (no PMA)" and read errors: the counter is left out */
		*ok = dr_read_u64(c, v, IB "/%s/ports/%u/%s/%s", p->dev, p->port,
				  s->in_hw[i] ? "hw_counters" : "counters", s->name[i]) == 0;
	}
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void dr_check_counters(struct dr_ctx *c)
{
	struct ctr_sample *s;

	if (!c->nports) {
		dr_add(c, DR_C_COUNTERS, "errors", "", DR_SKIP, "no RDMA ports");
		return;
	}
	s = dr_alloc(c->nports * sizeof(*s));
	for (size_t i = 0; i < c->nports; i++) {
		sample_list(c, &c->ports[i], &s[i]);
		sample_read(c, &c->ports[i], &s[i], false);
	}
	/* a tree under --sysroot does not count by itself: no point waiting */
	if (c->between_samples)
		c->between_samples(c->hook_arg);
	else if (c->live)
		sleep_ms(c->interval_ms);
	for (size_t i = 0; i < c->nports; i++)
		sample_read(c, &c->ports[i], &s[i], true);

	for (size_t i = 0; i < c->nports; i++) {
		struct ctr_sample *x = &s[i];
		char name[96], grew[512] = "", sat[256] = "";
		struct dr_result *r;
		enum dr_status st = DR_PASS;
		int read = 0;

		dr_port_name(&c->ports[i], name, sizeof(name));
		if (!x->dirs) {
			dr_add(c, DR_C_COUNTERS, "errors", name, DR_SKIP,
			       "no counters/ (driver without a PMA) and no hw_counters/");
			continue;
		}
		r = dr_add(c, DR_C_COUNTERS, "errors", name, DR_PASS, "%s", "");
		for (int k = 0; k < x->n; k++) {
			const struct ctr_rule *rule = x->rule[k];

			if (!x->ok1[k] || !x->ok2[k])
				continue;
			read++;
			if (!rule)
				continue;
			dr_int(r, x->name[k], (int64_t)x->v2[k]);
			if (x->v2[k] > x->v1[k] && rule->on_growth > DR_PASS) {
				size_t n = strlen(grew);

				snprintf(grew + n, sizeof(grew) - n, "%s%s +%llu", n ? ", " : "",
					 x->name[k], (unsigned long long)(x->v2[k] - x->v1[k]));
				if (rule->on_growth > st)
					st = rule->on_growth;
			}
			if (rule->bits && !x->in_hw[k] && x->v2[k] >= (1ULL << rule->bits) - 1) {
				size_t n = strlen(sat);

				snprintf(sat + n, sizeof(sat) - n, "%s%s", n ? ", " : "", x->name[k]);
				st = DR_FAIL;
			}
		}
		dr_int(r, "interval_ms", c->live ? c->interval_ms : 0);
				if (!read) {
			r->status = DR_SKIP;
			dr_set_summary(r, "no counter readable");
			continue;
		}
		r->status = st;
		dr_set_summary(r, "%d counters read twice %u ms apart%s%s%s%s%s", read,
					 c->live ? c->interval_ms : 0, grew[0] ? "; grew: " : "", grew,
					 sat[0] ? "; saturated (stuck at their maximum): " : "", sat,
					 grew[0] || sat[0] ? "" : "; no error counter grew");
		if (strstr(grew, "link_downed"))
			dr_advise(r, "the link went down while sampling: reseat or replace the cable/transceiver, check the peer and the switch port");
		else if (grew[0] && st >= DR_WARN)
			dr_advise(r, "errors are growing now: a marginal cable, transceiver or switch port (symbol/link errors), or packet loss (sequence errors: RoCE needs a lossless or lightly loaded network; check PFC/ECN and MTU)");
		if (sat[0])
			dr_advise(r, "saturated PMA counters no longer count: reset them (perfquery -R) and watch them again");
	}
	free(s);
}

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
