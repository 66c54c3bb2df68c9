// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: memory - RLIMIT_MEMLOCK (this process's, and what
 * systemd, containerd and docker give services), hugepages, free 2 MiB
 * blocks per NUMA node.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "../print.h"

#define MiB (1024ULL * 1024)
#define MEMLOCK_FAIL (64 * MiB)	/* below: RDMA registrations of any size fail */
#define CAP_IPC_LOCK_BIT 14

/* "Max locked memory  <soft> <hard> bytes"; UINT64_MAX for unlimited. */
static int read_memlock(struct dr_ctx *c, uint64_t *soft, uint64_t *hard)
{
	FILE *f = dr_fopen(c, "/proc/self/limits");
	char line[256], s[32], h[32];
	int ret = -ENOENT, lines = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f) && lines++ < 64) {
		if (strncmp(line, "Max locked memory", 17))
			continue;
		ret = -EINVAL;
		if (sscanf(line + 17, "%31s %31s", s, h) != 2)
			break;
		if (!strcmp(s, "unlimited"))
			*soft = UINT64_MAX;
		else if (dr_parse_u64(s, soft))
			break;
		if (!strcmp(h, "unlimited"))
			*hard = UINT64_MAX;
		else if (dr_parse_u64(h, hard))
			break;
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

/* A "Key:\tvalue" line of /proc/self/status. */
static int proc_status(struct dr_ctx *c, const char *key, char *out, size_t len)
{
	FILE *f = dr_fopen(c, "/proc/self/status");
	size_t n = strlen(key);
	char line[512];
	int ret = -ENOENT, lines = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f) && lines++ < 256) {
		char *v = line + n + 1;

		if (strncmp(line, key, n) || line[n] != ':')
			continue;
		while (*v == ' ' || *v == '\t')
			v++;
		v[strcspn(v, "\n")] = '\0';
		snprintf(out, len, "%s", v);
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

static bool has_cap_ipc_lock(struct dr_ctx *c)
{
	char caps[64];
	uint64_t v;
	char hex[80];

	if (proc_status(c, "CapEff", caps, sizeof(caps)))
		return false;
	snprintf(hex, sizeof(hex), "0x%s", caps);
	return dr_parse_u64(hex, &v) == 0 && (v >> CAP_IPC_LOCK_BIT) & 1;
}

static void fmt_limit(char *out, size_t len, uint64_t v)
{
	if (v == UINT64_MAX)
		snprintf(out, len, "unlimited");
	else
		pr_format_bytes(out, len, v);
}

/*
 * The memlock recipe, in the same words wherever doctor gives it (and as
 * docs/operations.md's "Users and memory limits" gives it).
 */
#define RECIPE_LOGINS "logins: /etc/security/limits.d/rdma.conf with \"* soft memlock unlimited\" and \"* hard memlock unlimited\", then log in again"
#define RECIPE_SERVICES "systemd services: LimitMEMLOCK=infinity in the unit (its [Service] section: sudo systemctl edit <unit>), or for every service DefaultLimitMEMLOCK=infinity under [Manager] in /etc/systemd/system.conf.d/memlock.conf (then systemctl daemon-reexec)"
#define RECIPE_CONTAINERS "containers: docker/podman run --ulimit memlock=-1:-1"
#define SYSTEMD_DEFAULT_MEMLOCK (8 * MiB)	/* systemd >= 253; older: 64 KiB */

/*
 * A systemd rlimit value (LimitMEMLOCK=, DefaultLimitMEMLOCK=): "infinity"
 * (UINT64_MAX), bytes with an optional K/M/G/T/P/E suffix (base 1024), or
 * "soft:hard", of which the soft part counts. 0 or -EINVAL.
 */
static int parse_rlimit(const char *v, uint64_t *out)
{
	static const char sfx[] = "KMGTPE";
	char buf[64], *colon, *end;
	unsigned long long n;
	const char *p;

	dr_fmt(buf, sizeof(buf), "%s", v);
	colon = strchr(buf, ':');
	if (colon)
		*colon = '\0';
	buf[strcspn(buf, " \t\r\n")] = '\0';
	if (!strcmp(buf, "infinity")) {
		*out = UINT64_MAX;
		return 0;
	}
	errno = 0;
	n = strtoull(buf, &end, 10);
	if (errno || end == buf || buf[0] == '-')
		return -EINVAL;
	if (*end == 'B' && !end[1])
		end++;
	if (*end) {
		p = strchr(sfx, *end);
		if (!p || (end[1] && strcmp(end + 1, "B")))
			return -EINVAL;
		for (long i = 0; i <= p - sfx; i++) {
			if (n > ULLONG_MAX / 1024)
				return -EINVAL;
			n *= 1024;
		}
	}
	*out = n;
	return 0;
}

/* Key=value lines of one file (any section): the last @key wins. */
static bool ini_value(struct dr_ctx *c, const char *path, const char *key, char *out, size_t len)
{
	FILE *f = dr_fopen(c, "%s", path);
	size_t n = strlen(key);
	char line[512];
	bool found = false;
	int lines = 0;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f) && lines++ < 2000) {
		char *v = line;

		while (*v == ' ' || *v == '\t')
			v++;
		if (strncmp(v, key, n) || v[n] != '=')
			continue;
		v += n + 1;
		v[strcspn(v, "\r\n")] = '\0';
		dr_fmt(out, len, "%s", v);
		found = true;
	}
	fclose(f);
	return found;
}

/*
 * @key as systemd reads it: @main (the first that exists of a list), then
 * the *.conf drop-ins of @dropdirs (highest priority first), merged by file
 * name in order, the first directory's copy of a name winning. The last
 * setting wins; @src names its file. false: not set.
 */
static bool systemd_setting(struct dr_ctx *c, const char *const *main, size_t nmain,
			    const char *const *dropdirs, size_t ndirs, const char *key,
			    char *out, size_t len, char *src, size_t srclen)
{
	char **all = NULL, path[512];
	size_t nall = 0, cap = 0;
	bool found = false;

	for (size_t i = 0; i < nmain; i++) {
		if (!dr_exists(c, "%s", main[i]))
			continue;
		if (ini_value(c, main[i], key, out, len)) {
			dr_fmt(src, srclen, "%s", main[i]);
			found = true;
		}
		break;
	}
	for (size_t d = 0; d < ndirs; d++) {
		char **names;
		int n = dr_list(c, &names, "%s", dropdirs[d]);

		for (int i = 0; i < n; i++) {
			size_t l = strlen(names[i]);
			bool dup = false;

			if (l < 6 || strcmp(names[i] + l - 5, ".conf"))
				continue;
			for (size_t k = 0; k < nall && !dup; k++)
				dup = !strcmp(strrchr(all[k], '/') + 1, names[i]);
			if (dup)
				continue;
			if (nall == cap) {
				cap = cap ? 2 * cap : 16;
				all = realloc(all, cap * sizeof(*all));
				if (!all)
					abort();
			}
			all[nall++] = dr_asprintf("%s/%s", dropdirs[d], names[i]);
		}
		dr_list_free(names, n);
	}
	/* in file-name order, whatever the directory */
	for (size_t i = 1; i < nall; i++)
		for (size_t k = i; k > 0 && strcmp(strrchr(all[k - 1], '/'), strrchr(all[k], '/')) > 0; k--) {
			char *t = all[k];

			all[k] = all[k - 1];
			all[k - 1] = t;
		}
	for (size_t i = 0; i < nall; i++) {
		dr_fmt(path, sizeof(path), "%s", all[i]);
		if (ini_value(c, path, key, out, len)) {
			dr_fmt(src, srclen, "%s", path);
			found = true;
		}
		free(all[i]);
	}
	free(all);
	return found;
}

static bool have_systemd(struct dr_ctx *c)
{
	return dr_exists(c, "/etc/systemd/system.conf") ||
	       dr_exists(c, "/usr/lib/systemd/system.conf") ||
	       dr_exists(c, "/run/systemd/system");
}

/* DefaultLimitMEMLOCK= for every service: bytes (UINT64_MAX unlimited). */
static bool systemd_default_memlock(struct dr_ctx *c, char *val, size_t len, char *src,
				    size_t srclen)
{
	static const char *const main[] = { "/etc/systemd/system.conf", "/usr/lib/systemd/system.conf" };
	static const char *const dirs[] = {
		"/etc/systemd/system.conf.d", "/run/systemd/system.conf.d",
		"/usr/lib/systemd/system.conf.d",
	};

	return systemd_setting(c, main, 2, dirs, 3, "DefaultLimitMEMLOCK", val, len, src, srclen);
}

/* LimitMEMLOCK= of containerd.service (its unit file and drop-ins). */
static bool containerd_memlock(struct dr_ctx *c, char *val, size_t len, char *src, size_t srclen)
{
	static const char *const main[] = {
		"/etc/systemd/system/containerd.service", "/usr/lib/systemd/system/containerd.service",
		"/lib/systemd/system/containerd.service",
	};
	static const char *const dirs[] = {
		"/etc/systemd/system/containerd.service.d", "/run/systemd/system/containerd.service.d",
		"/usr/lib/systemd/system/containerd.service.d",
	};

	return systemd_setting(c, main, 3, dirs, 3, "LimitMEMLOCK", val, len, src, srclen);
}

/*
 * docker's "default-ulimits": {"memlock": {"Name": "memlock", "Soft": N,
 * "Hard": N}} in /etc/docker/daemon.json: 1 and the soft limit (-1:
 * UINT64_MAX), 0 not set, -errno unreadable or not JSON.
 */
static int docker_memlock(struct dr_ctx *c, uint64_t *soft)
{
	FILE *f = dr_fopen(c, "/etc/docker/daemon.json");
	const struct dr_json *m, *s;
	struct dr_json *j;
	char err[128], *text;
	size_t got;
	int ret = 0;

	if (!f)
		return -errno;
	text = dr_alloc(1 << 20);
	got = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	j = dr_json_parse(text, got, err, sizeof(err));
	free(text);
	if (!j || j->type != DR_J_OBJ) {
		dr_json_free(j);
		return -EINVAL;
	}
	m = dr_json_get(dr_json_get(j, "default-ulimits"), "memlock");
	s = m ? dr_json_get(m, "Soft") : NULL;
	if (s && s->type == DR_J_NUM) {
		*soft = s->n < 0 ? UINT64_MAX : (uint64_t)s->n;
		ret = 1;
	} else if (m) {
		ret = -EINVAL;
	}
	dr_json_free(j);
	return ret;
}

static void limit_status(struct dr_result *r, uint64_t v)
{
	if (v == UINT64_MAX) {
		dr_null(r, "memlock");
		r->status = DR_PASS;
		return;
	}
	dr_int(r, "memlock", (int64_t)v);
	r->status = v < MEMLOCK_FAIL ? DR_WARN : DR_INFO;
}

/*
 * memory.services: what a systemd service and a container get. systemd's
 * DefaultLimitMEMLOCK (8 MiB when unset); docker's default-ulimits, else
 * what containerd.service passes down (its LimitMEMLOCK, else systemd's
 * default). WARN below 64 MiB (the memlock FAIL line), PASS unlimited.
 */
static void check_services(struct dr_ctx *c)
{
	char val[128] = "", src[512] = "", lim_s[32], cval[128] = "", csrc[512] = "";
	uint64_t svc = SYSTEMD_DEFAULT_MEMLOCK, ctr, d = 0;
	bool set = false, docker, containerd;
	struct dr_result *r;
	int dret;

	if (have_systemd(c)) {
		set = systemd_default_memlock(c, val, sizeof(val), src, sizeof(src));
		if (set && parse_rlimit(val, &svc)) {
			r = dr_add(c, DR_C_MEMORY, "services", "", DR_WARN,
				   "DefaultLimitMEMLOCK=%s in %s: not a limit systemd takes, so services get its default (8 MiB)",
				   val, src);
			dr_str(r, "default_limit_memlock", val);
			dr_str(r, "source", src);
			dr_int(r, "memlock", (int64_t)SYSTEMD_DEFAULT_MEMLOCK);
			dr_advise(r, RECIPE_SERVICES);
			svc = SYSTEMD_DEFAULT_MEMLOCK;
		} else {
			fmt_limit(lim_s, sizeof(lim_s), svc);
			r = dr_add(c, DR_C_MEMORY, "services", "", DR_PASS,
				   "systemd services get RLIMIT_MEMLOCK %s%s%s%s", lim_s,
				   set ? " (DefaultLimitMEMLOCK in " : " (systemd's default; DefaultLimitMEMLOCK is not set)",
				   set ? src : "", set ? ")" : "");
			dr_str(r, "default_limit_memlock", set ? val : "");
			dr_str(r, "source", set ? src : "");
			limit_status(r, svc);
			if (r->status == DR_WARN) {
				dr_set_summary(r, "%s: a service (an MPI launcher, a storage daemon) registering more than that fails (ENOMEM / EDQUOT) unless its unit raises LimitMEMLOCK",
					       r->summary);
				dr_advise(r, RECIPE_SERVICES);
			} else if (r->status == DR_INFO) {
				dr_advise(r, "RDMA services registering more than %s need more: " RECIPE_SERVICES,
					  lim_s);
			}
		}
	}

	/* containers */
	docker = dr_exists(c, "/etc/docker/daemon.json") || dr_exists(c, "/usr/bin/dockerd");
	containerd = dr_exists(c, "/usr/bin/containerd") || dr_exists(c, "/etc/containerd/config.toml");
	if (!docker && !containerd)
		return;
	ctr = svc;
	dr_fmt(csrc, sizeof(csrc), "%s", set ? "DefaultLimitMEMLOCK" : "systemd's default");
	if (containerd_memlock(c, cval, sizeof(cval), csrc, sizeof(csrc)) && parse_rlimit(cval, &ctr))
		ctr = svc;
	if (containerd) {
		fmt_limit(lim_s, sizeof(lim_s), ctr);
		r = dr_add(c, DR_C_MEMORY, "services", "containerd", DR_PASS,
			   "containerd's containers get RLIMIT_MEMLOCK %s (from %s), unless their runtime sets one",
			   lim_s, csrc);
		dr_str(r, "source", csrc);
		limit_status(r, ctr);
		if (r->status == DR_WARN)
			dr_advise(r, "LimitMEMLOCK=infinity for containerd (sudo systemctl edit containerd: [Service] LimitMEMLOCK=infinity, then systemctl restart containerd); " RECIPE_CONTAINERS);
	}
	if (!docker)
		return;
	dret = docker_memlock(c, &d);
	if (dret == 1) {
		fmt_limit(lim_s, sizeof(lim_s), d);
		r = dr_add(c, DR_C_MEMORY, "services", "docker", DR_PASS,
			   "docker containers get RLIMIT_MEMLOCK %s (default-ulimits in /etc/docker/daemon.json)",
			   lim_s);
		dr_str(r, "source", "/etc/docker/daemon.json");
		limit_status(r, d);
	} else {
		fmt_limit(lim_s, sizeof(lim_s), ctr);
		r = dr_add(c, DR_C_MEMORY, "services", "docker", DR_PASS,
			   "docker containers get RLIMIT_MEMLOCK %s (%s; no memlock in /etc/docker/daemon.json's default-ulimits%s)",
			   lim_s, csrc, dret == -EINVAL ? ", which is not JSON docker reads" : "");
		dr_str(r, "source", csrc);
		limit_status(r, ctr);
	}
	if (r->status == DR_WARN)
		dr_advise(r, RECIPE_CONTAINERS " for each, or for every container \"default-ulimits\": {\"memlock\": {\"Name\": \"memlock\", \"Soft\": -1, \"Hard\": -1}} in /etc/docker/daemon.json, then systemctl restart docker");
}

static void check_memlock(struct dr_ctx *c)
{
	char soft_s[32], hard_s[32], uid[64] = "";
	uint64_t soft = 0, hard = 0;
	struct dr_result *r;
	bool cap;
	int ret = read_memlock(c, &soft, &hard);

	if (ret) {
		dr_add(c, DR_C_MEMORY, "memlock", "", DR_SKIP,
		       "RLIMIT_MEMLOCK: /proc/self/limits %s", dr_errstr(ret));
		return;
	}
	cap = has_cap_ipc_lock(c);
	proc_status(c, "Uid", uid, sizeof(uid));
	fmt_limit(soft_s, sizeof(soft_s), soft);
	fmt_limit(hard_s, sizeof(hard_s), hard);
	r = dr_add(c, DR_C_MEMORY, "memlock", "", DR_PASS,
		   "RLIMIT_MEMLOCK of this process: %s (hard limit %s)%s", soft_s, hard_s,
		   cap ? "; it has CAP_IPC_LOCK, so the limit does not apply to it" : "");
	/* bytes, or null for unlimited: one type per field on every node */
	if (soft == UINT64_MAX) {
		dr_null(r, "soft");
		dr_null(&c->node, "memlock");
	} else {
		dr_int(r, "soft", (int64_t)soft);
		dr_int(&c->node, "memlock", (int64_t)soft);
	}
	if (hard == UINT64_MAX)
		dr_null(r, "hard");
	else
		dr_int(r, "hard", (int64_t)hard);
	dr_bool(r, "cap_ipc_lock", cap);
	if (soft != UINT64_MAX && !cap) {
		r->status = soft < MEMLOCK_FAIL ? DR_FAIL : DR_WARN;
		dr_set_summary(r, "%s: RDMA registrations and strixpeer buffers beyond %s in all fail (ENOMEM / EDQUOT)",
			       r->summary, soft_s);
		if (hard > soft)
			dr_advise(r, "this shell: ulimit -l %s",
				  hard == UINT64_MAX ? "unlimited" : hard_s);
		dr_advise(r, RECIPE_LOGINS "; " RECIPE_SERVICES "; " RECIPE_CONTAINERS);
	} else if (cap && soft != UINT64_MAX) {
		dr_advise(r, "other (unprivileged) users and services are still limited: raise their limit too (limits.d, LimitMEMLOCK=infinity, --ulimit memlock=-1:-1)");
	}
}

static void check_hugepages(struct dr_ctx *c)
{
	uint64_t total = 0, freep = 0, size_kb = 0, mem_kb = 0;
	char line[256], thp[128] = "", *a, *b, mode[32] = "?", sz[32];
	FILE *f = dr_fopen(c, "/proc/meminfo");
	struct dr_result *r;
	int lines = 0, got = 0;

	if (!f) {
		dr_add(c, DR_C_MEMORY, "hugepages", "", DR_SKIP, "/proc/meminfo %s", dr_errstr(-errno));
		return;
	}
	while (fgets(line, sizeof(line), f) && lines++ < 200) {
		unsigned long long v;

		if (sscanf(line, "HugePages_Total: %llu", &v) == 1)
			total = v, got++;
		else if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
			freep = v, got++;
		else if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1)
			size_kb = v, got++;
		else if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
			mem_kb = v;
	}
	fclose(f);
	if (mem_kb)
		dr_int(&c->node, "mem_total", (int64_t)(mem_kb * 1024));
	if (dr_read(c, thp, sizeof(thp), "/sys/kernel/mm/transparent_hugepage/enabled") == 0 &&
	    (a = strchr(thp, '[')) && (b = strchr(a, ']')) && b - a < (long)sizeof(mode))
		snprintf(mode, sizeof(mode), "%.*s", (int)(b - a - 1), a + 1);
	if (got < 3) {
		r = dr_add(c, DR_C_MEMORY, "hugepages", "", DR_INFO,
			   "no hugetlb pool information in /proc/meminfo; transparent hugepages: %s", mode);
		dr_str(r, "thp", mode);
		return;
	}
	pr_format_bytes(sz, sizeof(sz), size_kb * 1024);
	r = dr_add(c, DR_C_MEMORY, "hugepages", "", DR_INFO,
		   "hugetlb pool: %llu pages of %s (%llu free); transparent hugepages: %s",
		   (unsigned long long)total, sz, (unsigned long long)freep, mode);
	dr_int(r, "hugepages_total", (int64_t)total);
	dr_int(r, "hugepages_free", (int64_t)freep);
	dr_int(r, "hugepage_size", (int64_t)(size_kb * 1024));
	dr_str(r, "thp", mode);
	/* RDMA needs no hugetlbfs; a big static pool is memory the GPU loses */
	if (mem_kb && total * size_kb > mem_kb / 4)
		dr_advise(r, "%llu%% of RAM is reserved as hugetlb pages, which neither GTT (the iGPU) nor strixpeer buffers can use; RDMA needs no hugetlbfs: shrink vm.nr_hugepages unless an application uses them",
			  (unsigned long long)(total * size_kb * 100 / mem_kb));
}

/* Free 2 MiB (order 9) or larger blocks per node, from /proc/buddyinfo. */
static void check_huge_blocks(struct dr_ctx *c)
{
	uint64_t blocks[64] = { 0 };
	bool seen[64] = { false };
	FILE *f = dr_fopen(c, "/proc/buddyinfo");
	char line[512];
	int lines = 0, nodes = 0;

	if (!f) {
		dr_add(c, DR_C_MEMORY, "free_2m", "", DR_SKIP, "/proc/buddyinfo %s", dr_errstr(-errno));
		return;
	}
	while (fgets(line, sizeof(line), f) && lines++ < 256) {
		unsigned int node;
		int off = 0;
		char *p;

		if (sscanf(line, "Node %u, zone %*s%n", &node, &off) < 1 || !off || node >= 64)
			continue;
		seen[node] = true;
		p = line + off;
		for (int order = 0; order < 20; order++) {
			char *end;
			unsigned long long n = strtoull(p, &end, 10);

			if (end == p)
				break;
			if (order >= 9)
				blocks[node] += n << (order - 9);
			p = end;
		}
	}
	fclose(f);
	for (unsigned int n = 0; n < 64; n++) {
		char subj[16], sz[32];
		struct dr_result *r;

		if (!seen[n])
			continue;
		nodes++;
		snprintf(subj, sizeof(subj), "node%u", n);
		pr_format_bytes(sz, sizeof(sz), blocks[n] * 2 * MiB);
		r = dr_add(c, DR_C_MEMORY, "free_2m", subj, blocks[n] ? DR_INFO : DR_WARN,
			   "%llu free 2 MiB blocks (%s) for strixpeer buffers' 2 MiB pages",
			   (unsigned long long)blocks[n], sz);
		dr_int(r, "free_2m_blocks", (int64_t)blocks[n]);
		if (!blocks[n])
			dr_advise(r, "memory is fragmented: buffers fall back to 4 KiB pages (slower to register, more IOTLB misses); compact it (echo 1 > /proc/sys/vm/compact_memory) or allocate big buffers early after boot");
	}
	if (!nodes)
		dr_add(c, DR_C_MEMORY, "free_2m", "", DR_SKIP, "/proc/buddyinfo lists no node");
}

void dr_check_memory(struct dr_ctx *c)
{
	check_memlock(c);
	check_services(c);
	check_hugepages(c);
	check_huge_blocks(c);
}
