// SPDX-License-Identifier: MIT
/*
 * fragment: a memory fragmenter, and the share of 2 MiB pages today's
 * allocators get on the node it fragmented (issue 48's measurement;
 * docs/performance.md, "Allocation on a fragmented node").
 *
 *   fragment [-n NODE] [-s MiB] [-m MiB] [-v VARIANTS] [-d DEFRAGS] [-k KINDS] [-j FILE]
 *
 * A measurement tool, not a TAP program: its numbers depend on the guest
 * and the run, so they are reported (a table on stdout, one JSON object
 * per allocation into FILE), never asserted. What must always hold exits
 * 1 with the state seen: the node was fragmented (its free memory in
 * blocks of 2 MiB or more, /proc/buddyinfo, below a quarter of the fresh
 * node's; kcompactd may repair some before the allocation, which the
 * report's free2M column shows) and everything came back (the node's
 * free pages within 64 MiB or 10 % of the start). Exit 4: not root, no
 * module, no such node.
 *
 * Every allocation gets a node fragmented afresh (compaction done for one
 * must not help the next): a forked holder (fragment/hold.c) binds itself
 * to NODE (default 1) and fills it while MemFree stays -m MiB (default
 * 16) above the node's high watermarks, boost included:
 *   movable    anonymous 4 KiB pages (MADV_NOHUGEPAGE); through pagemap,
 *              every page of an even-numbered 2 MiB physical block but one
 *              is dropped (MADV_DONTNEED): compaction can move the rest
 *   pinned     the same, and the first page of every block held by a
 *              pipe (vmsplice): compaction cannot move it, so by
 *              construction no 2 MiB block can become free
 *   unmovable  pipes of 1 MiB, filled (kernel pages, unmovable
 *              pageblocks), every other pipe closed; their placement is
 *              the allocator's, so fragmentation is likely, not certain
 * It holds that until SIGKILL (or PR_SET_PDEATHSIG). Then one allocation
 * of -s MiB (default 256; at most a quarter of the fresh node's free
 * memory: about half of the fragmented node's, more than it has in 2 MiB
 * blocks and less than compaction can assemble in the movable variant):
 *   sp         the BUF_ALLOC ioctl, flags 0 (2 MiB pages first)
 *   sp-huge    the same with SP_ALLOC_HUGE_ONLY
 *   thp        anonymous memory, mbind() to the node, MADV_HUGEPAGE
 *   shm        like sp, with the module's allocator parameter at shmem
 *              (kmod/shmem.c; set for the allocation, then back to pages)
 *   shm-huge   like sp-huge, with allocator=shmem
 * mapped and touched every 4 KiB (timed until every page is present),
 * under each THP defrag value of -d (default "madvise always never";
 * restored at exit). Reported: success, the share in 2 MiB pages
 * (physically aligned runs of 512 pages, from pagemap; smaps'
 * AnonHugePages too for thp), the module's nr_chunks, the time against
 * the same kind on the fresh node, and the compact_* and thp_* deltas of
 * /proc/vmstat.
 */
#include "fragment/fragment.h"

#include <sys/utsname.h>
#include <time.h>

#define MAX_VM 96
#define DEFRAG "/sys/kernel/mm/transparent_hugepage/defrag"
#define ALLOCATOR "/sys/module/strixpeer/parameters/allocator"
#define MAX_KINDS 6

static uint64_t want_size = 256 * MiB;
static FILE *json;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct vmstat {
	int n;
	char name[MAX_VM][64];
	unsigned long long val[MAX_VM];
};

/* The compact_* and thp_* counters of /proc/vmstat. */
static void vmstat_read(struct vmstat *v)
{
	char name[64];
	unsigned long long val;
	FILE *f = fopen("/proc/vmstat", "re");

	if (!f)
		die("/proc/vmstat: %s", strerror(errno));
	v->n = 0;
	while (v->n < MAX_VM && fscanf(f, "%63s %llu", name, &val) == 2) {
		if (strncmp(name, "compact_", 8) && strncmp(name, "thp_", 4))
			continue;
		snprintf(v->name[v->n], sizeof(v->name[0]), "%s", name);
		v->val[v->n++] = val;
	}
	fclose(f);
}

/* "name+delta ..." of the counters that moved, for the table and JSON. */
static void vmstat_delta(const struct vmstat *a, const struct vmstat *b,
			 char *txt, size_t tlen, char *js, size_t jlen)
{
	size_t t = 0, j = 0;

	txt[0] = 0;
	j += snprintf(js + j, jlen - j, "{");
	for (int i = 0; i < a->n && i < b->n; i++) {
		unsigned long long d = b->val[i] - a->val[i];

		if (!d || strcmp(a->name[i], b->name[i]))
			continue;
		if (t < tlen)
			t += snprintf(txt + t, tlen - t, "%s%s+%llu", t ? " " : "", a->name[i], d);
		if (j < jlen)
			j += snprintf(js + j, jlen - j, "%s\"%s\":%llu", j > 1 ? "," : "",
				      a->name[i], d);
	}
	if (j < jlen)
		snprintf(js + j, jlen - j, "}");
	if (!txt[0])
		snprintf(txt, tlen, "-");
}

/*
 * How many 2 MiB pages back [p, p + size): physically 2 MiB-aligned runs
 * of 512 contiguous pages, wherever they start in the mapping.
 */
static uint64_t huge_pieces(const uint8_t *p, uint64_t size)
{
	uint64_t n = size / PAGE, count = 0, i = 0;
	uint64_t *pfns = malloc(n * 8);

	if (!pfns)
		die("malloc");
	read_pfns(p, n, pfns);
	while (i + PER_HUGE <= n) {
		uint64_t j = 1;

		if (!pfns[i] || pfns[i] % PER_HUGE) {
			i++;
			continue;
		}
		while (j < PER_HUGE && pfns[i + j] == pfns[i] + j)
			j++;
		count += j == PER_HUGE;
		i += j;
	}
	free(pfns);
	return count;
}

/* smaps' AnonHugePages of the mapping that starts at p, bytes. */
static uint64_t anon_huge(const void *p)
{
	char line[256];
	uint64_t kb = 0;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		die("smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;

		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			in = start == (uintptr_t)p;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %" SCNu64 " kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb * 1024;
}

/* ---- the allocations measured ------------------------------------- */

struct result {
	bool ok;
	int err;
	uint64_t size;
	double secs;
	uint64_t pieces;	/* 2 MiB pages, from pagemap */
	uint64_t anon_huge;	/* thp: smaps AnonHugePages */
	uint32_t chunks;	/* sp: the module's physically contiguous runs */
	char vm_txt[512];
	char vm_js[1024];
};

static int dev_fd = -1;

static void measure_sp(uint32_t flags, uint64_t size, struct result *r)
{
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_info info = { 0 };
	uint8_t *p;

	if (sp_raw_alloc(dev_fd, size, (uint32_t)node, flags, &a)) {
		r->err = errno;
		r->secs = 0;
		return;
	}
	p = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, dev_fd, (off_t)a.mmap_offset);
	if (p == MAP_FAILED)
		die("mmap of a buffer: %s", strerror(errno));
	touch(p, a.size);
	r->ok = true;
	r->size = a.size;
	info.handle = a.handle;
	if (ioctl(dev_fd, STRIXPEER_IOC_BUF_INFO, &info))
		die("BUF_INFO: %s", strerror(errno));
	r->chunks = info.nr_chunks;
	r->secs = now();	/* the caller subtracts */
	r->pieces = huge_pieces(p, a.size);
	munmap(p, a.size);
	if (sp_raw_free(dev_fd, a.handle))
		die("BUF_FREE: %s", strerror(errno));
}

static void measure_thp(uint64_t size, struct result *r)
{
	unsigned long mask[16] = { 0 };
	uint8_t *m = mmap(NULL, size + HUGE_SZ, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *p;
	uint64_t head;

	if (m == MAP_FAILED) {
		r->err = errno;
		return;
	}
	/* one VMA that starts and ends 2 MiB-aligned */
	p = (uint8_t *)(((uintptr_t)m + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
	head = (uint64_t)(p - m);
	if (head)
		munmap(m, head);
	if (HUGE_SZ - head)
		munmap(p + size, HUGE_SZ - head);
	mask[node / 64] = 1UL << (node % 64);
	if (syscall(SYS_mbind, p, size, MPOL_BIND_MODE, mask, sizeof(mask) * 8, 0))
		die("mbind: %s", strerror(errno));
	if (madvise(p, size, MADV_HUGEPAGE))
		die("MADV_HUGEPAGE: %s", strerror(errno));
	touch(p, size);
	r->secs = now();
	r->ok = true;
	r->size = size;
	r->pieces = huge_pieces(p, size);
	r->anon_huge = anon_huge(p);
	munmap(p, size);
}

static void measure(const char *kind, uint64_t size, struct result *r)
{
	struct vmstat before, after;
	double t0;

	bool shm = !strncmp(kind, "shm", 3);
	bool huge = !strcmp(kind, "sp-huge") || !strcmp(kind, "shm-huge");

	memset(r, 0, sizeof(*r));
	if (shm && !sp_write_file(ALLOCATOR, "shmem"))
		die("cannot write shmem to %s: %s", ALLOCATOR, strerror(errno));
	vmstat_read(&before);
	t0 = now();
	if (!strcmp(kind, "thp"))
		measure_thp(size, r);
	else
		measure_sp(huge ? STRIXPEER_ALLOC_HUGE_ONLY : 0, size, r);
	if (r->ok)
		r->secs -= t0;
	if (shm && !sp_write_file(ALLOCATOR, "pages"))
		die("cannot write pages to %s: %s", ALLOCATOR, strerror(errno));
	vmstat_read(&after);
	vmstat_delta(&before, &after, r->vm_txt, sizeof(r->vm_txt), r->vm_js, sizeof(r->vm_js));
}

/* The selected word of the defrag file ("always madvise [never]"). */
static void get_defrag(char *out, size_t len)
{
	char buf[128] = "", *a, *b;
	FILE *f = fopen(DEFRAG, "re");

	snprintf(out, len, "madvise");
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f)) {
		a = strchr(buf, '[');
		b = a ? strchr(a, ']') : NULL;
		if (b) {
			*b = 0;
			snprintf(out, len, "%s", a + 1);
		}
	}
	fclose(f);
}

static struct utsname uts;
static const char *const mem_fields[] = { "MemFree", "AnonPages", "FilePages", "Slab", "PageTables" };
static uint64_t mem_start[5];

/* The node's meminfo fields above, printed, and kept at the first call. */
static void node_mem(const char *when)
{
	printf("fragment: node %d %s:", node, when);
	for (int i = 0; i < 5; i++) {
		uint64_t v = sp_meminfo(node, mem_fields[i]);

		mem_start[i] = mem_start[i] ? mem_start[i] : v;
		printf(" %s %" PRIu64 " MiB", mem_fields[i], mib(v));
	}
	printf("\n");
}

static void report(const char *variant, const char *defrag, const char *kind,
		   const struct result *r, const struct result *fresh,
		   uint64_t free_b, uint64_t huge_b, bool fragmented)
{
	double share = r->ok ? (double)r->pieces * HUGE_SZ / r->size : 0;
	double ratio = !fresh ? 1 : r->ok && fresh->ok && fresh->secs > 0 ? r->secs / fresh->secs : 0;
	double smaps = r->ok && !strcmp(kind, "thp") ? (double)r->anon_huge / r->size : -1;

	char sm[16] = "-";

	if (smaps >= 0)
		snprintf(sm, sizeof(sm), "%.1f%%", smaps * 100);
	printf("%-9s %-7s %-7s %-4s %6.1f%% %6s %6lu %6.2fx %7" PRIu64 " %7" PRIu64 "  %s\n",
	       variant, defrag, kind, r->ok ? "yes" : "no", share * 100, sm,
	       (unsigned long)r->chunks, ratio, mib(free_b), mib(huge_b),
	       r->ok ? r->vm_txt : strerror(r->err));
	fflush(stdout);
	if (!json)
		return;
	fprintf(json, "{\"kernel\":\"%s\",\"node\":%d,\"variant\":\"%s\",\"defrag\":\"%s\",",
		uts.release, node, variant, defrag);
	fprintf(json, "\"kind\":\"%s\",\"size\":%" PRIu64 ",\"ok\":%s,\"errno\":%d,",
		kind, r->size, r->ok ? "true" : "false", r->err);
	fprintf(json, "\"huge_share\":%.4f,\"smaps_huge_share\":%.4f,\"chunks\":%u,",
		share, smaps, r->chunks);
	fprintf(json, "\"seconds\":%.6f,\"time_vs_fresh\":%.4f,\"node_free\":%" PRIu64 ",",
		r->ok ? r->secs : 0.0, ratio, free_b);
	fprintf(json, "\"node_free_in_2m_blocks\":%" PRIu64 ",\"fragmented\":%s,\"vmstat\":%s}\n",
		huge_b, fragmented ? "true" : "false", r->vm_js);
	fflush(json);
}

static int words(char *s, char **out, int max)
{
	int n = 0;

	for (char *t = strtok(s, " ,"); t && n < max; t = strtok(NULL, " ,"))
		out[n++] = t;
	return n;
}

int main(int argc, char **argv)
{
	const char *arg[128] = { ['n'] = "1", ['s'] = "256", ['m'] = "16",
		['v'] = "movable pinned unmovable", ['d'] = "madvise always never",
		['k'] = "sp sp-huge thp" };
	char *variants[4], *defrags[4], *kinds[MAX_KINDS], path[64], saved[32];
	int nv, nd, nk, opt, rc = 0;
	bool back;
	uint64_t free0, huge0, size, end_free;
	struct result fresh[MAX_KINDS];

	while ((opt = getopt(argc, argv, "n:s:m:v:d:k:j:")) != -1) {
		if (opt == '?') {
			fprintf(stderr, "usage: fragment [-n NODE] [-s MiB] [-m MiB] [-v VARIANTS] [-d DEFRAGS] [-k KINDS] [-j FILE]\n");
			return 2;
		}
		arg[opt] = optarg;
	}
	node = atoi(arg['n']);
	want_size = strtoull(arg['s'], NULL, 0) * MiB;
	margin = strtoull(arg['m'], NULL, 0) * MiB;
	if (arg['j']) {
		json = fopen(arg['j'], "we");
		if (!json)
			die("%s: %s", arg['j'], strerror(errno));
	}
	nv = words(strdup(arg['v']), variants, 4);
	nd = words(strdup(arg['d']), defrags, 4);
	nk = words(strdup(arg['k']), kinds, MAX_KINDS);
	for (int i = 0; i < nv; i++)
		if (strcmp(variants[i], "movable") && strcmp(variants[i], "pinned") &&
		    strcmp(variants[i], "unmovable"))
			die("unknown variant %s (movable, pinned, unmovable)", variants[i]);
	for (int i = 0; i < nk; i++)
		if (strcmp(kinds[i], "sp") && strcmp(kinds[i], "sp-huge") && strcmp(kinds[i], "thp") &&
		    strcmp(kinds[i], "shm") && strcmp(kinds[i], "shm-huge"))
			die("unknown kind %s (sp, sp-huge, thp, shm, shm-huge)", kinds[i]);
	uname(&uts);
	if (geteuid()) {
		printf("fragment: SKIP needs root (pagemap's physical addresses, THP settings)\n");
		return 4;
	}
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
	if (access(path, F_OK)) {
		printf("fragment: SKIP no NUMA node %d\n", node);
		return 4;
	}
	dev_fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev_fd < 0) {
		printf("fragment: SKIP %s: %s (strixpeer not loaded)\n", STRIXPEER_DEVICE_PATH,
		       strerror(errno));
		return 4;
	}
	get_defrag(saved, sizeof(saved));
	free0 = sp_free_bytes(node);
	huge0 = free_huge_bytes();
	size = want_size;
	if (size > free0 / 4)
		size = free0 / 4;
	size &= ~(HUGE_SZ - 1);
	printf("fragment: %s, node %d: %" PRIu64 " MiB free, %" PRIu64 " MiB in 2 MiB blocks; ",
	       uts.release, node, mib(free0), mib(huge0));
	printf("margin %" PRIu64 " MiB; buffers of %" PRIu64 " MiB; defrag was %s\n",
	       mib(margin), mib(size), saved);
	printf("%-9s %-7s %-7s %-4s %7s %6s %6s %7s %7s %7s  %s\n", "variant", "defrag", "kind",
	       "ok", "2M", "smaps", "chunks", "t/fresh", "free", "free2M", "vmstat deltas");

	/* the fresh node, under the default defrag */
	if (!sp_write_file(DEFRAG, "madvise"))
		die("cannot write %s", DEFRAG);
	node_mem("at the start");
	for (int k = 0; k < nk; k++) {
		measure(kinds[k], size, &fresh[k]);	/* once to warm up */
		measure(kinds[k], size, &fresh[k]);
		report("fresh", "madvise", kinds[k], &fresh[k], NULL, sp_free_bytes(node),
		       free_huge_bytes(), false);
	}
	for (int v = 0; v < nv; v++) {
		for (int d = 0; d < nd; d++) {
			for (int k = 0; k < nk; k++) {
				struct result r;
				uint64_t free_b, huge_b;
				bool frag;
				pid_t pid;

				if (!sp_write_file(DEFRAG, defrags[d]))
					die("cannot write %s to %s", defrags[d], DEFRAG);
				pid = fragment(variants[v]);
				free_b = sp_free_bytes(node);
				huge_b = free_huge_bytes();
				frag = huge_b < huge0 / 4;
				if (!frag) {
					printf("fragment: NOT fragmented: %" PRIu64 " MiB of %" PRIu64
					       " MiB free is in 2 MiB blocks (fresh: %" PRIu64 " MiB)\n",
					       mib(huge_b), mib(free_b), mib(huge0));
					rc = 1;
				}
				measure(kinds[k], size, &r);
				release(pid);
				report(variants[v], defrags[d], kinds[k], &r, &fresh[k], free_b,
				       huge_b, frag);
			}
		}
	}
	sp_write_file(DEFRAG, saved);
	end_free = sp_free_bytes(node);
	node_mem("at the end");
	back = end_free + (free0 / 10 > 64 * MiB ? free0 / 10 : 64 * MiB) >= free0;
	rc |= !back;
	printf("fragment: %s: node %d has %" PRIu64 " MiB free (%" PRIu64 " at the start), ",
	       back ? "released" : "NOT released", node, mib(end_free), mib(free0));
	printf("%" PRIu64 " MiB in 2 MiB blocks (%" PRIu64 ")\n", mib(free_huge_bytes()), mib(huge0));
	if (json)
		fclose(json);
	close(dev_fd);
	return rc;
}
