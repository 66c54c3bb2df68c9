// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: memory (RLIMIT_MEMLOCK, hugepages, free 2 MiB
 * blocks), the AMD iGPU (Strix Halo), and GPUDirect readiness (peer-memory
 * core and clients as RCCL/UCX/NCCL look for them, the dma-buf MR path).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "../print.h"

#define MiB (1024ULL * 1024)
#define GiB (1024ULL * MiB)
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
 * README's "Users and memory limits" gives it).
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

/* --- the AMD iGPU --------------------------------------------------------- */

struct gpu {
	char bdf[32];
	char path[256];		/* under /sys/devices */
	uint64_t device;
};

#define MAX_GPUS 8

static int find_amd_gpus(struct dr_ctx *c, struct gpu *g, int max)
{
	char **devs = NULL;
	int n = dr_list(c, &devs, "/sys/bus/pci/devices"), found = 0;

	for (int i = 0; i < n && found < max; i++) {
		uint64_t vendor, cls, device;

		if (dr_read_u64(c, &vendor, "/sys/bus/pci/devices/%s/vendor", devs[i]) ||
		    vendor != 0x1002 ||
		    dr_read_u64(c, &cls, "/sys/bus/pci/devices/%s/class", devs[i]) ||
		    (cls >> 16) != 0x03 ||
		    dr_read_u64(c, &device, "/sys/bus/pci/devices/%s/device", devs[i]))
			continue;
		snprintf(g[found].bdf, sizeof(g[found].bdf), "%s", devs[i]);
		if (dr_resolve(c, g[found].path, sizeof(g[found].path), "/sys/bus/pci/devices/%s",
			       devs[i]))
			snprintf(g[found].path, sizeof(g[found].path), "/sys/bus/pci/devices/%s", devs[i]);
		g[found].device = device;
		found++;
	}
	dr_list_free(devs, n);
	return found;
}

/*
 * ROCm: gfx1151 compute needs Linux 6.18.4, or Ubuntu's HWE 6.17.0-19 /
 * OEM 6.14.0-1018 kernels, which carry the fixes.
 */
static bool kernel_ok_for_gfx1151(const char *rel)
{
	unsigned int a, b, c3, abi;
	char flavour[32];

	if (dr_kver_cmp(rel, "6.18.4") >= 0)
		return true;
	if (sscanf(rel, "%u.%u.%u-%u-%31s", &a, &b, &c3, &abi, flavour) != 5)
		return false;
	if (a == 6 && b == 17 && c3 == 0 && abi >= 19 && !strcmp(flavour, "generic"))
		return true;
	return a == 6 && b == 14 && c3 == 0 && abi >= 1018 && !strncmp(flavour, "oem", 3);
}

/*
 * AMD APUs (display function IDs from pci.ids 2023.04.10: Mendocino,
 * Phoenix, Picasso, Raven, Barcelo, Renoir, Cezanne, Lucienne, Rembrandt,
 * Raphael), plus Strix Halo: their "VRAM" is a carve-out of system RAM.
 */
static bool is_apu(uint64_t device)
{
	static const uint16_t ids[] = {
		0x1586, 0x1506, 0x15bf, 0x15c8, 0x15d8, 0x15dd, 0x15e7, 0x1636, 0x1638,
		0x164c, 0x164d, 0x164e, 0x1681,
	};

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (device == ids[i])
			return true;
	return false;
}

/* MemTotal of /proc/meminfo in bytes (RAM without the carve-out), or 0. */
static uint64_t mem_total(struct dr_ctx *c)
{
	FILE *f = dr_fopen(c, "/proc/meminfo");
	unsigned long long kb = 0;
	char line[256];
	int lines = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && lines++ < 200)
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb <= UINT64_MAX / 1024 ? kb * 1024 : 0;
}

/*
 * GTT, the system memory the GPU may map: against ttm.pages_limit (the
 * two must agree) and, on an APU, against the node's RAM. The GPU reaches
 * its carve-out (VRAM) plus GTT; AMD's advice for Strix Halo is a small
 * carve-out and a large GTT, set through ttm.pages_limit. Policy: WARN when
 * the GPU reaches less than 3/4 of the node's memory (MemTotal + carve-out:
 * TTM's default GTT is half of RAM); the suggestion is 7/8 of MemTotal.
 */
static void check_gtt(struct dr_ctx *c, const struct gpu *g, const char *subj, bool apu,
		      uint64_t vram)
{
	char gtt_s[32], lim_s[32], mem_s[32], vram_s[32], want_s[32], how[512];
	uint64_t gtt = 0, pages = 0, mem, node, want;
	struct dr_result *r;
	int ret = dr_read_u64(c, &gtt, "%s/mem_info_gtt_total", g->path);

	if (ret) {
		dr_add(c, DR_C_GPU, "gtt", subj, DR_SKIP,
		       "GTT unknown: mem_info_gtt_total %s (amdgpu not bound to the GPU?)",
		       dr_errstr(ret));
		return;
	}
	pr_format_bytes(gtt_s, sizeof(gtt_s), gtt);
	r = dr_add(c, DR_C_GPU, "gtt", subj, DR_PASS, "GTT %s", gtt_s);
	dr_int(r, "gtt_total", (int64_t)gtt);
	if (dr_read_u64(c, &pages, "/sys/module/ttm/parameters/pages_limit") == 0 && pages &&
	    pages <= UINT64_MAX / 4096) {
		uint64_t lim = pages * 4096;

		pr_format_bytes(lim_s, sizeof(lim_s), lim);
		dr_int(r, "ttm_pages_limit", (int64_t)pages);
		dr_set_summary(r, "GTT %s, ttm.pages_limit %llu pages (%s)", gtt_s,
			       (unsigned long long)pages, lim_s);
		if (gtt + MiB < lim || gtt > lim + MiB) {
			r->status = DR_WARN;
			dr_set_summary(r, "%s: they differ, so something (amdgpu.gttsize?) overrides TTM's limit",
				       r->summary);
			dr_advise(r, "size GTT only through ttm.pages_limit (pages of 4 KiB) and drop amdgpu.gttsize");
		}
	}
	mem = mem_total(c);
	if (!apu || !mem)
		return;
	dr_int(r, "mem_total", (int64_t)mem);
	dr_int(r, "vram_total", (int64_t)vram);
	node = mem + vram;
	want = mem / 8 * 7 / GiB * GiB;
	pr_format_bytes(mem_s, sizeof(mem_s), mem);
	pr_format_bytes(vram_s, sizeof(vram_s), vram);
	pr_format_bytes(want_s, sizeof(want_s), want);
	dr_set_summary(r, "%s; RAM %s (MemTotal) + VRAM carve-out %s: the GPU reaches %llu%% of the node's memory",
		       r->summary, mem_s, vram_s,
		       (unsigned long long)((gtt + vram) * 100 / (node ? node : 1)));
	if (gtt + vram >= node / 4 * 3 || want <= gtt)
		return;
	dr_int(r, "suggested_gtt", (int64_t)want);
	dr_raise(r, DR_WARN);
	dr_set_summary(r, "%s, well below what it could have (policy: 3/4): GTT is TTM's default (half of RAM) or set small; AMD's advice for this APU is a small carve-out and a large GTT",
		       r->summary);
	dr_fmt(how, sizeof(how), "ttm.pages_limit=%llu", (unsigned long long)(want / 4096));
	switch (dr_os(c)) {
	case DR_OS_DEBIAN:
		dr_advise(r, "give GTT %s: add %s to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, update-grub, reboot (or options ttm pages_limit=%llu in /etc/modprobe.d/ttm.conf, update-initramfs -u); the guides' amdgpu.gttsize is deprecated: size GTT only with ttm.pages_limit",
			  want_s, how, (unsigned long long)(want / 4096));
		break;
	case DR_OS_FEDORA:
		dr_advise(r, "give GTT %s: grubby --update-kernel=ALL --args=\"%s\", reboot (or options ttm pages_limit=%llu in /etc/modprobe.d/ttm.conf, dracut -f); the guides' amdgpu.gttsize is deprecated: size GTT only with ttm.pages_limit",
			  want_s, how, (unsigned long long)(want / 4096));
		break;
	default:
		dr_advise(r, "give GTT %s: %s on the kernel command line (Debian, Ubuntu: GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, update-grub; Fedora: grubby --update-kernel=ALL --args=\"%s\"), reboot; the guides' amdgpu.gttsize is deprecated: size GTT only with ttm.pages_limit",
			  want_s, how, how);
	}
}

static void check_one_gpu(struct dr_ctx *c, const struct gpu *g, const char *rel)
{
	bool halo = g->device == 0x1586, apu = is_apu(g->device);
	char subj[96], drv[64] = "", vram_s[32], val[64];
	uint64_t vram = 0;
	struct dr_result *r;
	int ret;

	dr_fmt(subj, sizeof(subj), "%s %s", g->bdf,
	       halo ? "Strix Halo" : apu ? "AMD APU" : "AMD GPU");
	ret = dr_link_name(c, drv, sizeof(drv), "/sys/bus/pci/devices/%s/driver", g->bdf);
	r = dr_add(c, DR_C_GPU, "driver", subj, DR_PASS, "1002:%04llx bound to %s",
		   (unsigned long long)g->device, ret ? "no driver" : drv);
	dr_str(r, "driver", ret ? "" : drv);
	dr_str(r, "pci_id", halo ? "1002:1586" : "");
	if (ret || strcmp(drv, "amdgpu")) {
		r->status = DR_FAIL;
		dr_advise(r, "load amdgpu (modprobe amdgpu) and read why it did not bind: dmesg | grep -i amdgpu (missing firmware: install firmware-amd-graphics / linux-firmware)");
	}
	r = dr_add(c, DR_C_GPU, "kfd", subj, DR_PASS, "/dev/kfd present: ROCm/HIP can reach the GPU");
	if (!dr_exists(c, "/dev/kfd")) {
		r->status = DR_FAIL;
		dr_set_summary(r, "no /dev/kfd: ROCm/HIP cannot run (amdgpu not loaded, or a kernel without CONFIG_HSA_AMD)");
		dr_advise(r, "load amdgpu, or use a kernel built with CONFIG_HSA_AMD=y (Debian's and Ubuntu's are)");
	}
	if (halo) {
		r = dr_add(c, DR_C_GPU, "kernel", subj, DR_PASS, "kernel %s is new enough for gfx1151",
			   rel[0] ? rel : "unknown");
		dr_str(r, "kernel", rel);
		dr_str(r, "minimum", "6.18.4");
		if (!rel[0]) {
			r->status = DR_SKIP;
			dr_set_summary(r, "kernel release unreadable");
		} else if (!kernel_ok_for_gfx1151(rel)) {
			r->status = DR_WARN;
			dr_set_summary(r, "kernel %s is older than 6.18.4, which ROCm requires for gfx1151 (Strix Halo) compute",
				       rel);
			dr_advise(r, "install Linux 6.18.4 or newer (Debian: linux-image-amd64 from trixie-backports or sid; Ubuntu 24.04: HWE 6.17.0-19 or later, or OEM 6.14.0-1018 or later)");
		}
	}
	ret = dr_read_u64(c, &vram, "%s/mem_info_vram_total", g->path);
	if (!ret && apu) {
		pr_format_bytes(vram_s, sizeof(vram_s), vram);
		r = dr_add(c, DR_C_GPU, "carveout", subj, DR_PASS,
			   "BIOS VRAM carve-out %s (ROCm advises a small one and a large GTT)", vram_s);
		dr_int(r, "vram_total", (int64_t)vram);
		if (vram > 4 * GiB) {
			r->status = DR_WARN;
			dr_set_summary(r, "BIOS VRAM carve-out %s: that memory is lost to the CPU, to strixpeer buffers and to the NIC; ROCm advises a small carve-out and a large GTT (the GPU uses GTT memory just as fast on this APU)",
				       vram_s);
			dr_advise(r, "set the BIOS UMA frame buffer size to 512 MB, then give the GPU a large GTT: amd-ttm --set <GB>, or options ttm pages_limit=<pages of 4 KiB> in /etc/modprobe.d/ttm.conf (e.g. 26214400 for 100 GiB)");
		}
	} else if (ret && apu) {
		dr_add(c, DR_C_GPU, "carveout", subj, DR_SKIP, "mem_info_vram_total %s", dr_errstr(ret));
	}
	check_gtt(c, g, subj, apu, ret == 0 ? vram : 0);
	if (dr_cmdline_has(c, "amdgpu.gttsize", val, sizeof(val)) == 1) {
		r = dr_add(c, DR_C_GPU, "gttsize", subj, DR_WARN,
			   "amdgpu.gttsize=%s on the kernel command line: deprecated (amdgpu says so in dmesg) and it fights ttm.pages_limit",
			   val);
		dr_advise(r, "remove amdgpu.gttsize=%s and set ttm.pages_limit=<pages of 4 KiB> instead (GiB x 262144)",
			  val);
	}
}

void dr_check_gpu(struct dr_ctx *c)
{
	struct gpu g[MAX_GPUS];
	char rel[128] = "";
	int n = find_amd_gpus(c, g, MAX_GPUS);

	if (!n) {
		dr_add(c, DR_C_GPU, "amd", "", DR_SKIP, "no AMD GPU (PCI vendor 1002, display class)");
		return;
	}
	dr_kernel_release(c, rel, sizeof(rel));
	for (int i = 0; i < n; i++)
		check_one_gpu(c, &g[i], rel);
}

/* --- GPUDirect readiness --------------------------------------------------- */

#define PEERS "/sys/kernel/mm/memory_peers"

static void check_gdr_level(struct dr_ctx *c, const struct gpu *g, int ngpu)
{
	for (int i = 0; i < ngpu; i++) {
		for (size_t k = 0; k < c->nports; k++) {
			const struct dr_port *p = &c->ports[k];
			char common[256], subj[128];
			struct dr_result *r;
			int shared;

			if (!p->pci[0] || (k && !strcmp(c->ports[k - 1].pci, p->pci)))
				continue;
			dr_fmt(subj, sizeof(subj), "%s<->%s", g[i].bdf, p->rxe ? p->netdev : p->dev);
			shared = dr_pci_common(g[i].path, p->pci, common, sizeof(common));
			if (shared > 0) {
				r = dr_add(c, DR_C_GPUDIRECT, "rccl_level", subj, DR_PASS,
					   "GPU and NIC share a PCIe switch/bridge: RCCL's default GPU Direct RDMA distance (NCCL_NET_GDR_LEVEL=PXB) covers it");
				dr_str(r, "path_type", "PXB");
				continue;
			}
			r = dr_add(c, DR_C_GPUDIRECT, "rccl_level", subj, DR_INFO,
				   "GPU and NIC meet only at %s: RCCL's default (NCCL_NET_GDR_LEVEL=PXB) turns GPU Direct RDMA off for this pair",
				   shared == 0 ? "the host bridge (PHB)" : "the CPU interconnect (SYS)");
			dr_str(r, "path_type", shared == 0 ? "PHB" : "SYS");
			dr_advise(r, "RCCL users: export NCCL_NET_GDR_LEVEL=%s (the GPU memory is system RAM on an APU, so the host bridge is its normal path)",
				  shared == 0 ? "PHB" : "SYS");
		}
	}
}

/*
 * What GPU memory paths a verbs driver offers, by its device name (read
 * from the drivers' code, not tried on hardware): mlx5 registers peer
 * memory (PeerDirect) and dma-buf MRs; irdma pinned dma-buf MRs only;
 * mlx4, rxe and siw neither: host buffers (strixpeer's) only.
 */
static const char *nic_gpu_paths(const struct dr_port *p, bool *gpu)
{
	static const struct {
		const char *prefix, *paths;
		bool gpu;
	} drv[] = {
		{ "mlx5", "PeerDirect (ibv_reg_mr on GPU memory through a peer client) and dma-buf MRs", true },
		{ "irdma", "pinned dma-buf MRs (no PeerDirect)", true },
		{ "mlx4", "host buffers only: no PeerDirect, no dma-buf MRs", false },
		{ "rxe", "host buffers only: no PeerDirect, no dma-buf MRs", false },
		{ "siw", "host buffers only: no PeerDirect, no dma-buf MRs", false },
	};

	for (size_t i = 0; i < sizeof(drv) / sizeof(drv[0]); i++)
		if (!strncmp(p->dev, drv[i].prefix, strlen(drv[i].prefix)) || (p->rxe && !strcmp(drv[i].prefix, "rxe"))) {
			*gpu = drv[i].gpu;
			return drv[i].paths;
		}
	*gpu = true;
	return NULL;
}

/*
 * gpudirect.ucx, read from UCX's code (src/uct/ib/base/ib_md.c), not tried
 * on hardware: with UCX_IB_GPU_DIRECT_RDMA=try (the default) the IB memory
 * domain counts ROCm memory as registrable when /dev/kfd exists, and then
 * calls ibv_reg_mr on hipMalloc pointers; that pins GPU (TTM) memory only
 * through a peer-memory client (ROCm's amdkfd, or strixpeer's). Its
 * dma-buf route for ROCm memory (UCX_ROCM_COPY_DMABUF) is off by default.
 * @client: a memory_peers client is registered; @unknown: a core without
 * memory_peers sysfs, strixpeer loaded (whether it registered is not in
 * files); @no_gpu_nic: every NIC here takes host memory only.
 */
static void check_ucx(struct dr_ctx *c, bool client, bool unknown, bool no_gpu_nic)
{
	struct dr_result *r;

	if (!dr_exists(c, "/dev/kfd")) {
		r = dr_add(c, DR_C_GPUDIRECT, "ucx", "", DR_INFO,
			   "no /dev/kfd: UCX does not count ROCm memory as registrable on its IB devices (read from UCX's code, not tried on hardware)");
		dr_bool(r, "kfd", false);
		dr_bool(r, "peer_client", client);
		return;
	}
	r = dr_add(c, DR_C_GPUDIRECT, "ucx", "", DR_PASS,
		   "/dev/kfd exists, so UCX treats ROCm memory as registrable (UCX_IB_GPU_DIRECT_RDMA=try): it calls ibv_reg_mr on GPU pointers, which succeeds only through a peer-memory client%s (read from UCX's code, not tried on hardware)",
		   client ? " (one is registered)" : unknown ? " (whether strixpeer's registered cannot be told from files: the core has no memory_peers sysfs)" : " (none is registered)");
	dr_bool(r, "kfd", true);
	dr_bool(r, "peer_client", client);
	if (no_gpu_nic) {
		r->status = DR_INFO;
		dr_set_summary(r, "%s; and no NIC here registers GPU memory (mlx4/rxe/siw): it fails on every one",
			       r->summary);
		dr_advise(r, "give UCX strixpeer buffers (sp_buf_alloc, exported to HIP) rather than hipMalloc memory, or export UCX_IB_GPU_DIRECT_RDMA=no so UCX stages GPU memory through host buffers");
	} else if (unknown) {
		r->status = DR_INFO;
		dr_advise(r, "strixpeerctl status says whether strixpeer's PeerDirect client registered; if not, export UCX_IB_GPU_DIRECT_RDMA=no");
	} else if (!client) {
		r->status = DR_WARN;
		dr_set_summary(r, "%s: no peer client can claim GPU memory, so UCX's registrations of hipMalloc memory fail and its transfers of GPU memory fail or fall back",
			       r->summary);
		dr_advise(r, "export UCX_IB_GPU_DIRECT_RDMA=no (UCX then stages GPU memory through host buffers), or give UCX strixpeer buffers (sp_buf_alloc, exported to HIP), or load strixpeer with its PeerDirect client on a kernel with the peer-memory core (gpudirect.core, gpudirect.client); where the NIC takes dma-buf MRs, start the program with LD_PRELOAD=libstrixpeer-preload.so (libstrixpeer(3): its ibv_reg_mr registers GPU memory through its dma-buf) or set UCX_ROCM_COPY_DMABUF=y (UCX's own dma-buf route, off by default)");
	}
}

void dr_check_gpudirect(struct dr_ctx *c)
{
	char **clients = NULL, list[512] = "", name[80] = "", ours[64] = "", pd[8] = "";
	char ver[64], reason[256];
	struct gpu g[MAX_GPUS];
	bool core, loaded, kfd_client, amd_gpu;
	int n, ks, ngpu, dmabuf_ok = -1;
	struct dr_result *r;

	n = dr_list(c, &clients, PEERS);
	ks = dr_kallsyms(c);
	core = n >= 0 || (ks >= 0 && (ks & DR_KS_PEER_API));
	for (int i = 0; i < n; i++) {
		size_t l = strlen(list);

		snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", clients[i]);
	}
	r = dr_add(c, DR_C_GPUDIRECT, "core", "", core ? DR_PASS : DR_INFO, "%s", "");
	dr_bool(r, "peer_memory_core", core);
	dr_str(r, "clients", list);
	if (core)
		dr_set_summary(r, "peer-memory core present (%s%s%s)",
			       n >= 0 ? "memory_peers/ clients: " : "ib_register_peer_memory_client in kallsyms",
			       n >= 0 ? (list[0] ? list : "none yet") : "", "");
	else
		dr_set_summary(r, "no peer-memory core in this kernel (no %s, no ib_register_peer_memory_client in /proc/kallsyms%s): ibv_reg_mr cannot register GPU (TTM) memory; strixpeer buffers and dma-buf still work",
			       PEERS, ks < 0 ? ", which is unreadable" : "");
	if (!core)
		dr_advise(r, "PeerDirect needs a kernel with the peer-memory API (Ubuntu kernels, MLNX_OFED/DOCA-OFED); otherwise register strixpeer buffers, or GPU memory through ibv_reg_dmabuf_mr on a NIC that supports it");

	/* strixpeer's own client */
	loaded = dr_exists(c, "/sys/module/strixpeer");
	kfd_client = false;
	if (n > 0)
		for (int i = 0; i < n; i++)
			kfd_client |= !strcmp(clients[i], "amdkfd");
	dr_list_free(clients, n);
	if (!loaded) {
		dr_add(c, DR_C_GPUDIRECT, "client", "", DR_SKIP,
		       "strixpeer is not loaded (see the strixpeer check)");
	} else {
		dr_read(c, name, sizeof(name), "/sys/module/strixpeer/parameters/peer_client_name");
		dr_read(c, ours, sizeof(ours), "/sys/module/strixpeer/version");
		dr_read(c, pd, sizeof(pd), "/sys/module/strixpeer/parameters/peerdirect");
		r = dr_add(c, DR_C_GPUDIRECT, "client", name, DR_PASS, "%s", "");
		dr_str(r, "name", name);
		ver[0] = '\0';
		if (name[0])
			dr_read(c, ver, sizeof(ver), PEERS "/%s/version", name);
		dr_str(r, "registered_version", ver);
		if (!core) {
			r->status = DR_SKIP;
			dr_set_summary(r, "strixpeer's client (name \"%s\") has no peer-memory core to register with",
				       name);
		} else if (pd[0] == 'N' || pd[0] == '0') {
			r->status = DR_INFO;
			dr_set_summary(r, "strixpeer's client is off (peerdirect=N)");
			dr_advise(r, "remove peerdirect=0 from strixpeer's options (/etc/modprobe.d/) and reload it");
		} else if (!strcmp(name, "amdkfd") && ver[0] && strcmp(ver, ours)) {
			r->status = DR_FAIL;
			dr_set_summary(r, "clash: strixpeer wants the client name amdkfd, but another amdkfd client (version %s, ROCm's amdgpu-dkms) is registered, so strixpeer's registration failed",
				       ver);
			dr_advise(r, "either drop peer_client_name=amdkfd (ROCm's amdkfd client then serves RCCL for its own memory) or remove amdgpu-dkms (AMD does not support it on Strix Halo)");
		} else if (!ver[0]) {
			r->status = DR_WARN;
			reason[0] = '\0';
			if (c->live)
				dr_live_peer_reason(reason, sizeof(reason));
			dr_set_summary(r, "strixpeer's client \"%s\" is not registered with the peer-memory core%s%s",
				       name, reason[0] ? ": " : "", reason);
			dr_advise(r, "see strixpeerctl status (PeerDirect reason) and dmesg | grep strixpeer; rebuild the module against the core's Module.symvers (make module SP_PEER_SYMVERS=...)");
		} else if (strcmp(name, "amdkfd") && !kfd_client) {
			r->status = DR_WARN;
			dr_set_summary(r, "strixpeer's client is registered as \"%s\": released RCCL, GASNet-EX, LCI and ctran look only for %s/amdkfd/version and will not use GPU Direct RDMA (RCCL's current code accepts any client: gpudirect.rccl_peermem)",
				       name, PEERS);
			dr_advise(r, "echo \"options strixpeer peer_client_name=amdkfd\" > /etc/modprobe.d/strixpeer-amdkfd.conf, then rmmod strixpeer && modprobe strixpeer");
		} else if (strcmp(name, "amdkfd")) {
			r->status = DR_INFO;
			dr_set_summary(r, "strixpeer's client is registered as \"%s\"; another client (ROCm's) is registered as amdkfd, which is what RCCL looks for",
				       name);
		} else {
			dr_set_summary(r, "strixpeer's client is registered as amdkfd (version %s): RCCL, GASNet-EX and others find it",
				       ver);
		}
	}

	/* each NIC driver's GPU paths */
	bool any_gpu_nic = false;

	for (size_t i = 0; i < c->nports; i++) {
		const struct dr_port *p = &c->ports[i];
		const char *paths;
		bool gpu;

		if (i && !strcmp(c->ports[i - 1].dev, p->dev))
			continue;
		paths = nic_gpu_paths(p, &gpu);
		any_gpu_nic |= gpu;
		if (!paths)
			continue;
		r = dr_add(c, DR_C_GPUDIRECT, "nic", p->dev, DR_INFO, "%s (read from the driver's code, not tried on hardware)",
			   paths);
		dr_bool(r, "gpu_memory", gpu);
		if (!gpu)
			dr_advise(r, "register strixpeer buffers (sp_buf_alloc) on this NIC; GPU memory (hipMalloc) cannot be registered on it");
	}

	amd_gpu = (ngpu = find_amd_gpus(c, g, MAX_GPUS)) > 0;
	check_ucx(c, list[0] != '\0', core && n < 0 && loaded && pd[0] != 'N' && pd[0] != '0',
		  c->nports && !any_gpu_nic);

	/* the dma-buf MR path, probed per device as NCCL/UCX do */
	for (size_t i = 0; i < c->nports; i++) {
		const struct dr_port *p = &c->ports[i];
		char why[160];
		int ret;

		if (i && !strcmp(c->ports[i - 1].dev, p->dev))
			continue;
		if (!c->live) {
			dr_add(c, DR_C_GPUDIRECT, "dmabuf_mr", p->dev, DR_SKIP,
			       "the ibv_reg_dmabuf_mr probe needs the live device (not under --sysroot)");
			continue;
		}
		ret = dr_live_dmabuf_probe(p->dev, why, sizeof(why));
		if (ret > 0 && dmabuf_ok < 1)
			dmabuf_ok = 1;
		else if (ret == 0 && dmabuf_ok < 0)
			dmabuf_ok = 0;
		r = dr_add(c, DR_C_GPUDIRECT, "dmabuf_mr", p->dev, ret < 0 ? DR_SKIP : DR_INFO,
			   "%s", why);
		dr_bool(r, "supported", ret > 0);
	}
	if (amd_gpu && !core && dmabuf_ok == 0) {
		r = dr_add(c, DR_C_GPUDIRECT, "path", "", DR_WARN,
			   "no way for the NIC to register GPU memory: no peer-memory core and no device takes dma-buf MRs");
		dr_advise(r, "use strixpeer buffers for RDMA (export them to HIP with sp_buf_export), or a kernel with the peer-memory API, or a NIC with dma-buf MRs (mlx5)");
	}
	if (amd_gpu) {
		check_gdr_level(c, g, ngpu);
		dr_check_rccl(c, dmabuf_ok, any_gpu_nic);
	}
}
