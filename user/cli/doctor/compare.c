// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor compare A.json B.json ...: several nodes' reports
 * (doctor -j) side by side, and the differences that break a cluster:
 * MTU, kernel, module/library/ABI and firmware versions, PeerDirect client
 * names, RLIMIT_MEMLOCK.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"

#define MAX_REPORT (64 << 20)

struct report {
	const char *file;
	char name[128];
	struct dr_json *root;
	const struct dr_json *node, *checks;
};

static int read_report(const char *file, struct report *rep)
{
	char err[160];
	struct stat st;
	char *text;
	ssize_t n;
	size_t got = 0;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "strixpeerctl doctor compare: %s: %s\n", file, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > MAX_REPORT) {
		fprintf(stderr, "strixpeerctl doctor compare: %s: %s\n", file,
			S_ISREG(st.st_mode) ? "larger than 64 MiB: not a doctor report" :
					      "not a regular file");
		close(fd);
		return -1;
	}
	text = dr_alloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size && (n = read(fd, text + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	close(fd);
	rep->file = file;
	rep->root = dr_json_parse(text, got, err, sizeof(err));
	free(text);
	if (!rep->root) {
		fprintf(stderr, "strixpeerctl doctor compare: %s: not JSON: %s\n", file, err);
		return -1;
	}
	rep->node = dr_json_get(rep->root, "node");
	rep->checks = dr_json_get(rep->root, "checks");
	if (!rep->node || rep->node->type != DR_J_OBJ || !rep->checks ||
	    rep->checks->type != DR_J_ARR) {
		fprintf(stderr, "strixpeerctl doctor compare: %s: JSON, but not a report of \"strixpeerctl doctor -j\" (no \"node\" and \"checks\")\n",
			file);
		return -1;
	}
	snprintf(rep->name, sizeof(rep->name), "%s",
		 dr_json_str(rep->node, "hostname") ? dr_json_str(rep->node, "hostname") : file);
	return 0;
}

/*
 * A node fact as text: a string, a number, null (unlimited) or an array of
 * strings (", " between them); NULL when the report lacks it.
 */
static const char *fact(const struct dr_json *node, const char *key, char *buf, size_t len)
{
	const struct dr_json *v = dr_json_get(node, key);

	if (!v)
		return NULL;
	switch (v->type) {
	case DR_J_STR:
		return v->s;
	case DR_J_NUM:
		snprintf(buf, len, "%.0f", v->n);
		return buf;
	case DR_J_NULL:
		return "unlimited";
	case DR_J_ARR:
		buf[0] = '\0';
		for (size_t i = 0; i < v->nkids; i++) {
			size_t l = strlen(buf);

			if (v->kids[i].type == DR_J_STR)
				snprintf(buf + l, len - l, "%s%s", l ? ", " : "", v->kids[i].s);
		}
		return buf;
	default:
		return NULL;
	}
}

/* Every node's value of one node fact: PASS when they agree. */
static void compare_fact(struct dr_ctx *c, struct report *reps, int n, const char *key,
			 const char *what, const char *advice)
{
	char list[1024] = "", first[512] = "";
	bool differ = false;
	struct dr_result *r;
	int have = 0;

	for (int i = 0; i < n; i++) {
		char buf[512];
		const char *v = fact(reps[i].node, key, buf, sizeof(buf));
		size_t l = strlen(list);

		if (!v || !v[0])
			continue;
		have++;
		if (have == 1)	/* a copy: v may be this iteration's buf */
			snprintf(first, sizeof(first), "%s", v);
		else if (strcmp(first, v))
			differ = true;
		snprintf(list + l, sizeof(list) - l, "%s%s %s", l ? "; " : "", reps[i].name, v);
	}
	if (!have) {
		dr_add(c, DR_C_COMPARE, key, "", DR_SKIP, "no report has the %s", what);
		return;
	}
	r = dr_add(c, DR_C_COMPARE, key, "", differ ? DR_WARN : DR_PASS, "%s %s: %s", what,
		   differ ? "differs" : "is the same", differ ? list : first);
	dr_int(r, "nodes", have);
	if (differ)
		dr_advise(r, "%s", advice);
}

/* Observed string/number of a check result in a report, as text. */
static const char *obs(const struct dr_json *check, const char *key, char *buf, size_t len)
{
	const struct dr_json *v = dr_json_get(dr_json_get(check, "observed"), key);

	if (!v)
		return NULL;
	if (v->type == DR_J_STR)
		return v->s;
	if (v->type != DR_J_NUM)
		return NULL;
	snprintf(buf, len, "%.0f", v->n);
	return buf;
}

static void compare_mtu(struct dr_ctx *c, struct report *reps, int n)
{
	char list[2048] = "", first[32] = "", first_net[32] = "";
	bool rdma_differ = false, net_differ = false;
	struct dr_result *r;
	int ports = 0;

	for (int i = 0; i < n; i++) {
		for (size_t k = 0; k < reps[i].checks->nkids; k++) {
			const struct dr_json *ch = &reps[i].checks->kids[k];
			char b1[32], b2[32], b3[32];
			const char *id = dr_json_str(ch, "id"), *rm, *nm, *net;
			size_t l = strlen(list);

			if (!id || strcmp(id, "mtu.roce"))
				continue;
			rm = obs(ch, "rdma_mtu", b1, sizeof(b1));
			nm = obs(ch, "netdev_mtu", b2, sizeof(b2));
			if (!rm || !nm)
				continue;
			net = obs(ch, "netdev", b3, sizeof(b3));
			ports++;
			if (!first[0]) {
				snprintf(first, sizeof(first), "%s", rm);
				snprintf(first_net, sizeof(first_net), "%s", nm);
			}
			rdma_differ |= strcmp(first, rm) != 0;
			net_differ |= strcmp(first_net, nm) != 0;
			snprintf(list + l, sizeof(list) - l, "%s%s %s RDMA MTU %s (%s MTU %s)",
				 l ? "; " : "", reps[i].name,
				 dr_json_str(ch, "subject") ? dr_json_str(ch, "subject") : "?", rm,
				 net ? net : "netdev", nm);
		}
	}
	if (!ports) {
		dr_add(c, DR_C_COMPARE, "mtu", "", DR_SKIP, "no report has a RoCE port's MTU");
		return;
	}
	r = dr_add(c, DR_C_COMPARE, "mtu", "", DR_PASS, "%s MTU on every RoCE port: %s",
		   rdma_differ ? "different RDMA" : net_differ ? "the same RDMA but a different netdev" :
		   "the same", list);
	dr_int(r, "ports", ports);
	if (rdma_differ) {
		r->status = DR_FAIL;
		dr_set_summary(r, "MTU mismatch between nodes: %s", list);
		dr_advise(r, "set the same netdev MTU on every node and allow it on every switch port (ip link set DEV mtu 9000 on each node): queue pairs need one path MTU, and frames larger than a hop allows are dropped");
	} else if (net_differ) {
		r->status = DR_WARN;
		dr_advise(r, "use one netdev MTU everywhere (ip link set DEV mtu 9000): IP traffic between the nodes (rdma_cm, TCP fallbacks) breaks on the larger frames");
	}
}

static void compare_fw(struct dr_ctx *c, struct report *reps, int n)
{
	char list[2048] = "", types[16][64], fws[16][64];
	int nt = 0, differ = 0;
	struct dr_result *r;

	for (int i = 0; i < n; i++) {
		for (size_t k = 0; k < reps[i].checks->nkids; k++) {
			const struct dr_json *ch = &reps[i].checks->kids[k];
			const char *id = dr_json_str(ch, "id"), *fw, *hca;
			char b1[32], b2[32];
			int t;

			if (!id || strcmp(id, "rdma.port"))
				continue;
			fw = obs(ch, "fw_ver", b1, sizeof(b1));
			hca = obs(ch, "hca_type", b2, sizeof(b2));
			if (!fw || !fw[0])
				continue;
			hca = hca && hca[0] ? hca : "?";
			for (t = 0; t < nt; t++)
				if (!strcmp(types[t], hca))
					break;
			if (t == nt && nt < 16) {
				snprintf(types[nt], sizeof(types[0]), "%s", hca);
				snprintf(fws[nt], sizeof(fws[0]), "%s", fw);
				nt++;
			} else if (t < nt && strcmp(fws[t], fw)) {
				differ = 1;
			}
			if (!strstr(list, reps[i].name)) {
				size_t l = strlen(list);

				snprintf(list + l, sizeof(list) - l, "%s%s %s %s", l ? "; " : "",
					 reps[i].name, hca, fw);
			}
		}
	}
	if (!nt) {
		dr_add(c, DR_C_COMPARE, "firmware", "", DR_SKIP, "no report has a device firmware version");
		return;
	}
	r = dr_add(c, DR_C_COMPARE, "firmware", "", differ ? DR_WARN : DR_PASS,
		   "NIC firmware %s: %s", differ ? "differs between nodes with the same NIC" :
		   "is the same for each NIC model", list);
	if (differ)
		dr_advise(r, "update every NIC of a model to the same firmware (mstflint / the vendor's tool): mixed firmware is a common source of interop bugs");
}

/* Node facts that should be the same everywhere, and the fix when not. */
static const struct {
	const char *key, *what, *advice;
} facts[] = {
	{ "kernel", "kernel",
	  "run one kernel release on every node (and let DKMS build strixpeer for it)" },
	{ "module", "strixpeer module version",
	  "install the same strixpeer-dkms release on every node, then reload the module" },
	{ "library", "libstrixpeer version",
	  "install the same libstrixpeer1/strixpeer-utils release on every node" },
	{ "abi", "module ABI", "install the same strixpeer release on every node" },
	{ "peer_client_name", "strixpeer PeerDirect client name",
	  "use one peer_client_name everywhere (amdkfd, for RCCL): options strixpeer peer_client_name=amdkfd in /etc/modprobe.d/" },
	{ "peer_clients", "set of peer-memory clients",
	  "load the same peer-memory clients on every node, or GPU Direct RDMA works on some nodes only" },
	{ "memlock", "RLIMIT_MEMLOCK of the reporting process",
	  "give every node the same memlock limit (unlimited: /etc/security/limits.d/rdma.conf, LimitMEMLOCK=infinity, --ulimit memlock=-1:-1)" },
};

int dr_compare(struct dr_ctx *c, int nfiles, char **files)
{
	struct report *reps;
	char names[1024] = "";
	struct dr_result *r;
	int ret = 0;

	if (nfiles < 2) {
		fprintf(stderr, "strixpeerctl doctor compare: needs two or more reports (strixpeerctl doctor -j > NODE.json on each node)\n");
		return -1;
	}
	reps = dr_alloc((size_t)nfiles * sizeof(*reps));
	for (int i = 0; i < nfiles; i++) {
		if (read_report(files[i], &reps[i])) {
			ret = -1;
			goto out;
		}
		for (int k = 0; k < i; k++)	/* the same host twice: tell them apart */
			if (!strcmp(reps[k].name, reps[i].name))
				snprintf(reps[i].name, sizeof(reps[i].name), "%s", files[i]);
	}
	for (int i = 0; i < nfiles; i++) {
		size_t l = strlen(names);
		const struct dr_json *sum = dr_json_get(reps[i].root, "summary");
		const struct dr_json *ex = dr_json_get(sum, "exit");

		snprintf(names + l, sizeof(names) - l, "%s%s (%s, exit %.0f)", l ? ", " : "",
			 reps[i].name, reps[i].file, ex && ex->type == DR_J_NUM ? ex->n : -1.0);
	}
	dr_str(&c->node, "reports", names);
	r = dr_add(c, DR_C_COMPARE, "nodes", "", DR_INFO, "%d reports: %s", nfiles, names);
	dr_int(r, "reports", nfiles);
	compare_mtu(c, reps, nfiles);
	for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++)
		compare_fact(c, reps, nfiles, facts[i].key, facts[i].what, facts[i].advice);
	compare_fw(c, reps, nfiles);
out:
	for (int i = 0; i < nfiles; i++)
		dr_json_free(reps[i].root);
	free(reps);
	return ret;
}
