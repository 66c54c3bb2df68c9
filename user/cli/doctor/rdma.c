// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: RDMA devices and ports, their MTU, error counters,
 * and Soft-RoCE over USB4/Thunderbolt. Everything from
 * /sys/class/infiniband and /sys/class/net (formats: ib core's sysfs.c,
 * Documentation/ABI/stable/sysfs-class-infiniband).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor.h"

#define IB "/sys/class/infiniband"

/* "4: ACTIVE" -> 4 and "ACTIVE"; -EINVAL for anything else. */
static int parse_state(const char *s, int *num, char *text, size_t len)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || v < 0 || v > 255 || *end != ':')
		return -EINVAL;
	end++;
	while (*end == ' ')
		end++;
	*num = (int)v;
	snprintf(text, len, "%s", *end ? end : "?");
	return 0;
}

static void netdev_of_port(struct dr_ctx *c, struct dr_port *p)
{
	char **nets = NULL;
	int n;

	/* Soft-RoCE: its netdev, by name */
	if (dr_read(c, p->netdev, sizeof(p->netdev), IB "/%s/parent", p->dev) == 0) {
		p->rxe = true;
		return;
	}
	/* RoCE: the netdev behind GID 0 (reading it fails on IB ports) */
	if (dr_read(c, p->netdev, sizeof(p->netdev), IB "/%s/ports/%u/gid_attrs/ndevs/0",
		    p->dev, p->port) == 0 && p->netdev[0])
		return;
	p->netdev[0] = '\0';
	/* IPoIB and PCI functions: the function's netdevs, by dev_port */
	n = dr_list(c, &nets, IB "/%s/device/net", p->dev);
	for (int i = 0; i < n; i++) {
		uint64_t dev_port;

		if (n == 1 || (dr_read_u64(c, &dev_port, IB "/%s/device/net/%s/dev_port",
					   p->dev, nets[i]) == 0 && dev_port + 1 == p->port)) {
			snprintf(p->netdev, sizeof(p->netdev), "%s", nets[i]);
			break;
		}
	}
	dr_list_free(nets, n);
}

/* The PCI function under /sys/devices, if the device (or rxe's netdev) has one. */
static void pci_of_port(struct dr_ctx *c, struct dr_port *p)
{
	char path[256];
	const char *base;
	unsigned int d, b, s, f;
	int ret;

	if (p->rxe)
		ret = p->netdev[0] ? dr_resolve(c, path, sizeof(path), "/sys/class/net/%s/device",
						p->netdev) : -ENOENT;
	else
		ret = dr_resolve(c, path, sizeof(path), IB "/%s/device", p->dev);
	if (ret)
		return;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (sscanf(base, "%x:%x:%x.%x", &d, &b, &s, &f) == 4 && !strncmp(path, "/sys/devices/pci", 16))
		snprintf(p->pci, sizeof(p->pci), "%s", path);
}

void dr_scan_ports(struct dr_ctx *c)
{
	char **devs = NULL;
	int n;

	if (c->scanned)
		return;
	c->scanned = true;
	n = dr_list(c, &devs, IB);
	for (int i = 0; i < n; i++) {
		char **ports = NULL, fw[64] = "", hca[64] = "";
		int np;

		dr_read(c, fw, sizeof(fw), IB "/%s/fw_ver", devs[i]);
		dr_read(c, hca, sizeof(hca), IB "/%s/hca_type", devs[i]);
		np = dr_list(c, &ports, IB "/%s/ports", devs[i]);
		for (int j = 0; j < np; j++) {
			struct dr_port *p;
			char buf[64];
			uint64_t num;

			if (dr_parse_u64(ports[j], &num) || num == 0 || num > 255)
				continue;
			p = realloc(c->ports, (c->nports + 1) * sizeof(*p));
			if (!p)
				break;
			c->ports = p;
			p = &c->ports[c->nports++];
			memset(p, 0, sizeof(*p));
			snprintf(p->dev, sizeof(p->dev), "%s", devs[i]);
			p->port = (unsigned int)num;
			snprintf(p->fw_ver, sizeof(p->fw_ver), "%s", fw);
			snprintf(p->hca_type, sizeof(p->hca_type), "%s", hca);
			p->state = p->phys = -1;
			if (dr_read(c, buf, sizeof(buf), IB "/%s/ports/%u/state", p->dev, p->port) ||
			    parse_state(buf, &p->state, p->state_text, sizeof(p->state_text)))
				p->state = -1;
			if (dr_read(c, buf, sizeof(buf), IB "/%s/ports/%u/phys_state", p->dev, p->port) ||
			    parse_state(buf, &p->phys, p->phys_text, sizeof(p->phys_text)))
				p->phys = -1;
			if (dr_read(c, p->rate_text, sizeof(p->rate_text), IB "/%s/ports/%u/rate",
				    p->dev, p->port) == 0)
				p->rate_mbps = dr_parse_milli(p->rate_text, " Gb/sec");
			else
				p->rate_text[0] = '\0';
			dr_read(c, p->link_layer, sizeof(p->link_layer), IB "/%s/ports/%u/link_layer",
				p->dev, p->port);
			netdev_of_port(c, p);
			pci_of_port(c, p);
		}
		dr_list_free(ports, np);
	}
	dr_list_free(devs, n);
}

static void port_name(const struct dr_port *p, char *out, size_t len)
{
	snprintf(out, len, "%s/%u", p->dev, p->port);
}

/* The netdev's state: 1 up with carrier, 0 not, -errno gone/unreadable. */
static int netdev_up(struct dr_ctx *c, const char *dev, char *oper, size_t len)
{
	uint64_t carrier = 0;
	int ret = dr_read(c, oper, len, "/sys/class/net/%s/operstate", dev);

	if (ret)
		return ret;
	/* carrier reads EINVAL while the interface is down */
	if (dr_read_u64(c, &carrier, "/sys/class/net/%s/carrier", dev))
		carrier = 0;
	return (!strcmp(oper, "up") || !strcmp(oper, "unknown")) && carrier;
}

/* RoCE v2 GIDs other than link-local ones: what rdma_cm and IP peers use. */
static int routable_gids(struct dr_ctx *c, const struct dr_port *p)
{
	int found = 0;

	for (int k = 0; k < 256; k++) {
		char gid[64], type[32];

		if (dr_read(c, gid, sizeof(gid), IB "/%s/ports/%u/gids/%d", p->dev, p->port, k))
			break;
		if (!strcmp(gid, "0000:0000:0000:0000:0000:0000:0000:0000") ||
		    !strncmp(gid, "fe80:", 5))
			continue;
		if (dr_read(c, type, sizeof(type), IB "/%s/ports/%u/gid_attrs/types/%d",
			    p->dev, p->port, k) == 0 && !strcmp(type, "RoCE v2"))
			found++;
	}
	return found;
}

static void check_port(struct dr_ctx *c, struct dr_port *p)
{
	bool ib = !strcmp(p->link_layer, "InfiniBand");
	char name[96], sm[32] = "", lid[32] = "", oper[32] = "";
	struct dr_result *r;
	int up;

	port_name(p, name, sizeof(name));
	if (p->state < 0) {
		r = dr_add(c, DR_C_RDMA, "port", name, DR_SKIP,
			   "port state unreadable (%s/%s/ports/%u/state)", IB, p->dev, p->port);
		return;
	}
	r = dr_add(c, DR_C_RDMA, "port", name, DR_PASS, "%s, %s, %s%s%s%s", p->state_text,
		   p->phys >= 0 ? p->phys_text : "phys_state unreadable",
		   p->link_layer[0] ? p->link_layer : "link layer unknown",
		   p->netdev[0] ? (p->rxe ? ", Soft-RoCE on " : ", netdev ") : "",
		   p->netdev, p->rate_text[0] ? "" : ", rate unreadable");
	if (p->rate_text[0])
		dr_set_summary(r, "%s, %s", r->summary, p->rate_text);
	dr_int(r, "state", p->state);
	dr_str(r, "state_name", p->state_text);
	dr_int(r, "phys_state", p->phys);
	dr_str(r, "phys_state_name", p->phys >= 0 ? p->phys_text : "");
	dr_str(r, "link_layer", p->link_layer);
	dr_int(r, "rate_mbps", p->rate_mbps);
	dr_str(r, "netdev", p->netdev);
	dr_bool(r, "soft_roce", p->rxe);
	dr_str(r, "fw_ver", p->fw_ver);
	dr_str(r, "hca_type", p->hca_type);
	if (ib) {
		dr_read(c, sm, sizeof(sm), IB "/%s/ports/%u/sm_lid", p->dev, p->port);
		dr_read(c, lid, sizeof(lid), IB "/%s/ports/%u/lid", p->dev, p->port);
		dr_str(r, "sm_lid", sm);
		dr_str(r, "lid", lid);
	}

	if (p->rxe) {
		up = netdev_up(c, p->netdev, oper, sizeof(oper));
		if (up < 0) {
			dr_raise(r, DR_FAIL);
			dr_set_summary(r, "Soft-RoCE bound to netdev \"%s\", which does not exist (%s)",
						 p->netdev, dr_errstr(up));
			dr_advise(r, "rdma link delete %s; rdma link add %s type rxe netdev <DEV>",
				  p->dev, p->dev);
			return;
		}
		if (!up) {
			dr_raise(r, DR_FAIL);
			dr_set_summary(r, "%s; Soft-RoCE bound to %s, which is down (operstate %s, no carrier)",
						 r->summary, p->netdev, oper);
			dr_advise(r, "ip link set %s up, and check its cable and link partner", p->netdev);
			return;
		}
	}
	switch (p->state) {
	case 4:	/* ACTIVE */
	case 5:	/* ACTIVE_DEFER */
		if (p->phys >= 0 && p->phys != 5) {
			dr_raise(r, DR_WARN);
			dr_advise(r, "the port is ACTIVE but the link is in %s: watch the error counters and check the cable",
				  p->phys_text);
		}
		if (!ib && routable_gids(c, p) == 0) {
			dr_raise(r, DR_WARN);
			dr_set_summary(r, "%s; no RoCE v2 GID with an IP address", r->summary);
			dr_advise(r, "give %s an IP address (ip addr add ADDR/PREFIX dev %s): RoCE v2 and rdma_cm address peers by IP",
				  p->netdev[0] ? p->netdev : "its netdev", p->netdev[0] ? p->netdev : "DEV");
		}
		return;
	case 3:	/* ARMED */
		dr_raise(r, DR_WARN);
		dr_advise(r, "the subnet manager configured the port but has not activated it yet; if it stays ARMED, check the SM's log (opensm)");
		return;
	case 2:	/* INIT */
		if (ib && p->phys == 5) {
			uint64_t smv = 1;

			if (dr_parse_u64(sm, &smv) == 0 && smv == 0) {
				dr_raise(r, DR_FAIL);
				dr_set_summary(r, "%s; sm_lid 0x0: no subnet manager has swept the link",
							 r->summary);
				char sm_pkg[160];

				dr_os_install(c, sm_pkg, sizeof(sm_pkg), "opensm");
				dr_advise(r, "no subnet manager: start opensm (needed even back to back): %s, then systemctl enable --now opensm, on one node of the fabric",
					  sm_pkg);
				return;
			}
			dr_raise(r, DR_WARN);
			dr_advise(r, "a subnet manager (LID %s) is known but has not activated the port: check its log and partitions",
				  sm);
			return;
		}
		dr_raise(r, DR_WARN);
		dr_advise(r, "the port is initializing; if it stays in INIT, check the link (phys_state %s)",
			  p->phys_text);
		return;
	default:	/* DOWN, NOP, unknown */
		dr_raise(r, DR_FAIL);
		if (p->phys == 2)
			dr_advise(r, "no link partner (Polling): plug in the cable, check that the other end is up and that cable and transceiver suit both ports");
		else if (p->phys == 3 && !ib && p->netdev[0])
			dr_advise(r, "the port follows its netdev: ip link set %s up", p->netdev);
		else if (p->phys == 3)
			dr_advise(r, "the port is disabled: enable it (ibportstate -D 0 %u enable) or check the switch port",
				  p->port);
		else
			dr_advise(r, "no usable link: check the cable, the peer and the driver's messages (dmesg)");
	}
}

/*
 * rdma-core's release, as a user finds it: libibverbs.so.1.14.<R>.<P>, the
 * file libibverbs.so.1 points to (its name carries rdma-core's version:
 * libibverbs/CMakeLists.txt, "1.14.${PACKAGE_VERSION}"), in the first
 * library directory holding one; else the highest such file there. The
 * package database is not portable; the file name is.
 */
static const char *const verbs_dirs[] = {
	"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64",
	"/usr/lib", "/usr/local/lib", "/usr/local/lib64",
};

static int verbs_version(const char *name, unsigned int *rel, unsigned int *point)
{
	unsigned int abi;
	int end = 0;

	if (sscanf(name, "libibverbs.so.1.%u.%u.%u%n", &abi, rel, point, &end) != 3 ||
	    name[end] != '\0')
		return -EINVAL;
	return 0;
}

static int rdma_core_version(struct dr_ctx *c, char *path, size_t len, unsigned int *rel,
			     unsigned int *point)
{
	for (size_t d = 0; d < sizeof(verbs_dirs) / sizeof(verbs_dirs[0]); d++) {
		char target[256], **names;
		int n, found = -1;

		if (dr_link_name(c, target, sizeof(target), "%s/libibverbs.so.1", verbs_dirs[d]) == 0 &&
		    verbs_version(target, rel, point) == 0) {
			dr_fmt(path, len, "%s/%s", verbs_dirs[d], target);
			return 0;
		}
		n = dr_list(c, &names, "%s", verbs_dirs[d]);
		for (int i = 0; i < n; i++)	/* version order: the last wins */
			if (verbs_version(names[i], rel, point) == 0)
				found = i;
		if (found >= 0) {
			verbs_version(names[found], rel, point);
			dr_fmt(path, len, "%s/%s", verbs_dirs[d], names[found]);
		}
		dr_list_free(names, n);
		if (found >= 0)
			return 0;
	}
	return -ENOENT;
}

/* Is the sysroot's distribution Ubuntu (its os-release ID)? */
static bool os_is_ubuntu(const struct dr_ctx *c)
{
	FILE *f = dr_fopen(c, "/etc/os-release");
	char line[256];
	bool yes = false;
	int lines = 0;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f) && lines++ < 100)
		if (!strcmp(line, "ID=ubuntu\n") || !strcmp(line, "ID=\"ubuntu\"\n"))
			yes = true;
	fclose(f);
	return yes;
}

#define RDMA_CORE_IRDMA_MIN 50	/* policy: irdma's provider fixes */

static void check_rdma_core(struct dr_ctx *c)
{
	unsigned int rel = 0, point = 0;
	char path[512], ver[32], irdma[64] = "";
	struct dr_result *r;

	for (size_t i = 0; i < c->nports && !irdma[0]; i++)
		if (!strncmp(c->ports[i].dev, "irdma", 5))
			dr_fmt(irdma, sizeof(irdma), "%s", c->ports[i].dev);
	if (rdma_core_version(c, path, sizeof(path), &rel, &point)) {
		r = dr_add(c, DR_C_RDMA, "core_version", "", DR_SKIP,
			   "no libibverbs.so.1.14.<release>.<n> in /usr/lib/x86_64-linux-gnu, /usr/lib64 or the other library directories: rdma-core's version unknown");
		dr_bool(r, "irdma", irdma[0]);
		return;
	}
	dr_fmt(ver, sizeof(ver), "%u.%u", rel, point);
	r = dr_add(c, DR_C_RDMA, "core_version", "", DR_INFO, "rdma-core %s (%s)%s%s", ver, path,
		   irdma[0] ? "; irdma device " : "", irdma);
	dr_str(r, "version", ver);
	dr_int(r, "release", rel);
	dr_str(r, "library", path);
	dr_bool(r, "irdma", irdma[0]);
	if (!irdma[0] || rel >= RDMA_CORE_IRDMA_MIN)
		return;
	r->status = DR_WARN;
	dr_set_summary(r, "rdma-core %s (%s) with the irdma device %s: irdma's provider in rdma-core before v%d reports \"Unknown completion\" errors and mishandles completions that later releases fixed (policy: v%d or newer with irdma)",
		       ver, path, irdma, RDMA_CORE_IRDMA_MIN, RDMA_CORE_IRDMA_MIN);
	switch (dr_os(c)) {
	case DR_OS_DEBIAN:
		if (os_is_ubuntu(c))
			dr_advise(r, "install rdma-core %d or newer: Ubuntu 24.04 ships 50 (apt install rdma-core ibverbs-providers libibverbs1 after the upgrade); on older releases build rdma-core from https://github.com/linux-rdma/rdma-core",
				  RDMA_CORE_IRDMA_MIN);
		else
			dr_advise(r, "install rdma-core %d or newer: Debian 13 (trixie) ships it (apt install rdma-core ibverbs-providers libibverbs1), Debian 12 has 44; or build rdma-core from https://github.com/linux-rdma/rdma-core",
				  RDMA_CORE_IRDMA_MIN);
		break;
	case DR_OS_FEDORA:
		dr_advise(r, "install rdma-core %d or newer: dnf upgrade rdma-core libibverbs libibverbs-utils (on a Fedora release that ships it), or build rdma-core from https://github.com/linux-rdma/rdma-core",
			  RDMA_CORE_IRDMA_MIN);
		break;
	default:
		dr_advise(r, "install rdma-core %d or newer (apt install rdma-core ibverbs-providers libibverbs1 on Debian 13 / Ubuntu 24.04, dnf upgrade rdma-core libibverbs on Fedora), or build it from https://github.com/linux-rdma/rdma-core",
			  RDMA_CORE_IRDMA_MIN);
	}
}

void dr_check_rdma(struct dr_ctx *c)
{
	struct dr_result *r;

	check_rdma_core(c);
	if (!c->nports) {
		r = dr_add(c, DR_C_RDMA, "devices", "", DR_FAIL, "no RDMA device (%s %s)", IB,
			   dr_exists(c, IB) ? "is empty" : "does not exist");
		dr_advise(r, "load the NIC's RDMA driver (modprobe mlx5_ib, mlx4_ib or irdma) with rdma-core installed, or create Soft-RoCE: rdma link add rxe0 type rxe netdev <DEV>");
		return;
	}
	for (size_t i = 0; i < c->nports; i++)
		check_port(c, &c->ports[i]);
}

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

		port_name(p, name, sizeof(name));
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

		port_name(&c->ports[i], name, sizeof(name));
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
		port_name(p, name, sizeof(name));
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
