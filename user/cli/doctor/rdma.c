// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: RDMA devices and ports. The port scan every RDMA
 * check starts from (dr_scan_ports), and the rdma check: each port's state,
 * link and addresses, and rdma-core's version. Everything from
 * /sys/class/infiniband and /sys/class/net (formats: ib core's sysfs.c,
 * Documentation/ABI/stable/sysfs-class-infiniband). The ports' MTU, error
 * counters and USB4/Thunderbolt links: mtu.c, counters.c, thunderbolt.c.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* "mlx4_0/1": a port as the results name it. */
void dr_port_name(const struct dr_port *p, char *out, size_t len)
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

	dr_port_name(p, name, sizeof(name));
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
