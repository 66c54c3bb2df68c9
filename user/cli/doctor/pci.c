// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: PCI helpers the pcie, numa, iommu and gpudirect
 * checks share: a function's BDF, its parent, the RDMA devices on it, one
 * port per NIC, where two devices meet. Formats: drivers/pci/pci-sysfs.c,
 * Documentation/ABI/testing/sysfs-bus-pci.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

const char *dr_pci_bdf(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static bool is_bdf(const char *name)
{
	unsigned int d, b, s, f;
	char end;

	return sscanf(name, "%x:%x:%x.%x%c", &d, &b, &s, &f, &end) == 4;
}

/* is_bdf() of the first @n characters of @name */
static bool is_bdf_n(const char *name, size_t n)
{
	char buf[32];

	if (n >= sizeof(buf))
		return false;
	memcpy(buf, name, n);
	buf[n] = '\0';
	return is_bdf(buf);
}

/* Parent directory of a PCI device path; false at the host bridge. */
bool dr_pci_parent(char *path)
{
	char *slash = strrchr(path, '/');

	if (!slash)
		return false;
	*slash = '\0';
	return is_bdf(dr_pci_bdf(path));
}

/* Names of the RDMA devices on a PCI function: "mlx4_0". */
void dr_pci_devs_on(const struct dr_ctx *c, const char *pci, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < c->nports; i++) {
		size_t n = strlen(out);

		if (strcmp(c->ports[i].pci, pci) || strstr(out, c->ports[i].dev))
			continue;
		snprintf(out + n, len - n, "%s%s", n ? "," : "", c->ports[i].dev);
	}
}

/* Is this port's PCI function the first with that path (one result per NIC)? */
bool dr_pci_first_port(const struct dr_ctx *c, size_t i)
{
	if (!c->ports[i].pci[0])
		return false;
	for (size_t k = 0; k < i; k++)
		if (!strcmp(c->ports[k].pci, c->ports[i].pci))
			return false;
	return true;
}

/*
 * Where two PCI devices meet: the number of bridges (PCI functions) their
 * paths share below the host bridge, 0 when only the host bridge (PHB),
 * -1 when not even that (different host bridges: SYS). @out receives the
 * shared path.
 */
int dr_pci_common(const char *a, const char *b, char *out, size_t len)
{
	size_t i = 0, end = 0;
	int comps = 0, bridges = 0;

	out[0] = '\0';
	/* compare whole components of /sys/devices/pciDDDD:BB/<bdf>/<bdf>... */
	for (;; i++) {
		bool ea = a[i] == '/' || !a[i], eb = b[i] == '/' || !b[i];

		if (ea || eb) {
			if (!(ea && eb))
				break;
			if (i > end) {
				comps++;
				if (comps > 3 && is_bdf_n(a + end + 1, i - end - 1))
					bridges++;
			}
			end = i;
			if (!a[i] || !b[i])
				break;
			continue;
		}
		if (a[i] != b[i])
			break;
	}
	/* components: "sys", "devices", "pciDDDD:BB", bridges... */
	if (comps < 3 || strncmp(a, "/sys/devices/pci", 16))
		return -1;
	snprintf(out, len, "%.*s", (int)end, a);
	return bridges;
}
