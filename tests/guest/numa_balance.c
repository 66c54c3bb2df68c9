// SPDX-License-Identifier: MIT
/*
 * NUMA balancing leaves strixpeer buffers alone. Where buffers are
 * ordinary file mappings (the PMD path, 6.15+), task_numa_work() would
 * scan them like any other memory: every scan is an mmu notifier
 * invalidation (PROTECTION_VMA) of every range registered on the mapping
 * - a KFD userptr evicts its process's GPU queues for each - although the
 * pages are pinned and never move. The module's get_policy vm_op binds
 * the mapping to the buffer's node without MPOL_F_MOF, which the scanner
 * skips (numa_maps shows bind:N). On the 4 KiB path the VMAs are
 * VM_MIXEDMAP, which the scanner skips too.
 *
 * The registered range is sp_kfdsim's WATCH (tests/kmod/kfdsim.c: a KFD
 * userptr's interval notifier, counting invalidations by event); an
 * anonymous mapping watched the same way is the control that shows the
 * scanner ran. Needs two NUMA nodes (the test VM has them).
 */
#include "sp_test.h"

#include "kfdsim.h"

#define SCAN_SECONDS 30
#define LEN (64 * MiB)
/*
 * Full passes of the scanner over the address space (mm->numa_scan_seq)
 * after the one that first reached the control: in them it went past the
 * strixpeer buffer too, with the same access history as the control.
 */
#define PASSES_AFTER_CONTROL 2

static void kfdsim_watch(int fd, void *p, uint64_t len)
{
	struct sp_kfdsim_watch w = { .addr = (uintptr_t)p, .length = len };

	CHECK(ioctl(fd, SP_KFDSIM_IOC_WATCH, &w) == 0, "WATCH: %s", strerror(errno));
}

static struct sp_kfdsim_counts kfdsim_counts(int fd)
{
	struct sp_kfdsim_counts c;

	CHECK(ioctl(fd, SP_KFDSIM_IOC_COUNTS, &c) == 0, "COUNTS: %s", strerror(errno));
	return c;
}

static void need_two_nodes(void)
{
	if (access("/sys/devices/system/node/node1", F_OK))
		SKIP("one NUMA node: NUMA balancing never runs");
}

static void write_file(const char *path, const char *val)
{
	FILE *f = fopen(path, "we");

	CHECK(f && fputs(val, f) >= 0 && fclose(f) == 0, "write %s: %s", path, strerror(errno));
}

static int read_int(const char *path)
{
	int v = -1;
	FILE *f = fopen(path, "re");

	CHECK(f && fscanf(f, "%d", &v) == 1, "read %s", path);
	fclose(f);
	return v;
}

/* The policy field of /proc/self/numa_maps for the VMA starting at @p. */
static void numa_maps_policy(const void *p, char *out, size_t outlen)
{
	char line[1024];
	FILE *f = fopen("/proc/self/numa_maps", "re");

	CHECK(f, "numa_maps: %s", strerror(errno));
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		unsigned long start;
		char pol[64];

		if (sscanf(line, "%lx %63s", &start, pol) == 2 && start == (uintptr_t)p) {
			snprintf(out, outlen, "%s", pol);
			break;
		}
	}
	fclose(f);
	CHECK(out[0], "no numa_maps line for %p", p);
}

/*
 * mm->numa_scan_seq from /proc/self/sched (CONFIG_SCHED_DEBUG before 6.15,
 * always after): bumped each time the scanner has been over the whole
 * address space. -1 when the file does not show it.
 */
static long scanner_passes(void)
{
	char line[256];
	long seq = -1;
	FILE *f = fopen("/proc/self/sched", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!strncmp(line, "mm->numa_scan_seq", 17) && colon)
			seq = strtol(colon + 1, NULL, 10);
	}
	fclose(f);
	return seq;
}

static void touch_all(volatile uint8_t *p, uint64_t len)
{
	for (uint64_t off = 0; off < len; off += 4096)
		p[off]++;
}

static void pinned_buffer_not_scanned(void)
{
	const char *sysctl = "/proc/sys/kernel/numa_balancing";
	struct sp_kfdsim_counts cb, ca;
	struct sp_dev *dev;
	struct sp_buf *b;
	uint8_t *p, *anon;
	int fb, fa, old;
	time_t start, end;
	long passes = 0, seq, seq0 = -1;

	need_two_nodes();
	if (access(sysctl, W_OK))
		SKIP("%s not writable: kernel without CONFIG_NUMA_BALANCING", sysctl);
	dev = sp_test_dev();
	fb = sp_kfdsim_open();
	fa = sp_kfdsim_open();
	CHECK(sp_buf_alloc(dev, LEN, 0, 0, &b) == 0, "alloc: %s", sp_errmsg());
	p = sp_buf_addr(b);
	anon = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(anon != MAP_FAILED, "mmap: %s", strerror(errno));
	touch_all(p, LEN);
	touch_all(anon, LEN);
	kfdsim_watch(fb, p, LEN);
	kfdsim_watch(fa, anon, LEN);

	old = read_int(sysctl);
	write_file(sysctl, "1");
	/*
	 * CPU use: the scanner runs on task ticks. Until it has been over
	 * the whole address space PASSES_AFTER_CONTROL more times after
	 * first reaching the control; where numa_scan_seq cannot be read,
	 * or it never gets there, SCAN_SECONDS.
	 */
	start = time(NULL);
	end = start + SCAN_SECONDS;
	while (time(NULL) < end) {
		touch_all(p, LEN);
		touch_all(anon, LEN);
		passes++;
		if (passes % 256)	/* about every tenth of a second under TCG */
			continue;
		seq = scanner_passes();
		if (seq < 0)
			continue;
		if (seq0 < 0) {
			if (kfdsim_counts(fa).events[SP_KFDSIM_EV_PROTECTION_VMA])
				seq0 = seq;
		} else if (seq >= seq0 + PASSES_AFTER_CONTROL) {
			break;
		}
	}
	write_file(sysctl, old == 1 ? "1" : "0");
	cb = kfdsim_counts(fb);
	ca = kfdsim_counts(fa);
	seq = scanner_passes();
	if (seq0 >= 0 && seq >= seq0 + PASSES_AFTER_CONTROL)
		tap_diag("scan passes %ld to %ld: the control first in pass %ld", seq0, seq, seq0);
	else
		tap_diag("numa_scan_seq %ld (first pass on the control: %ld): ran the whole %d s",
			 seq, seq0, SCAN_SECONDS);
	tap_diag("%ld s, %ld passes: strixpeer range %llu PROTECTION_VMA (%llu in all), "
		 "anonymous control %llu PROTECTION_VMA (%llu in all)", (long)(time(NULL) - start), passes,
		 (unsigned long long)cb.events[SP_KFDSIM_EV_PROTECTION_VMA],
		 (unsigned long long)cb.total,
		 (unsigned long long)ca.events[SP_KFDSIM_EV_PROTECTION_VMA],
		 (unsigned long long)ca.total);
	CHECK(ca.events[SP_KFDSIM_EV_PROTECTION_VMA] > 0,
	      "NUMA balancing scanned nothing in %d s (the anonymous control saw no PROTECTION_VMA): the test proves nothing",
	      SCAN_SECONDS);
	CHECK(cb.events[SP_KFDSIM_EV_PROTECTION_VMA] == 0,
	      "NUMA balancing scanned the strixpeer buffer: %llu PROTECTION_VMA invalidations",
	      (unsigned long long)cb.events[SP_KFDSIM_EV_PROTECTION_VMA]);
	close(fb);
	close(fa);
	munmap(anon, LEN);
	CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static void numa_maps_show_the_buffer_node(void)
{
	struct sp_dev *dev;

	need_two_nodes();
	if (!sp_kernel_has("vmf_insert_folio_pmd"))
		SKIP("4 KiB path (before 6.15): VM_MIXEDMAP mappings, which NUMA balancing skips, carry no policy");
	dev = sp_test_dev();
	for (int node = 0; node < 2; node++) {
		char want[16], got[64];
		struct sp_buf *b;

		CHECK(sp_buf_alloc(dev, 4 * MiB, node, 0, &b) == 0, "alloc on node %d: %s", node,
		      sp_errmsg());
		numa_maps_policy(sp_buf_addr(b), got, sizeof(got));
		snprintf(want, sizeof(want), "bind:%d", node);
		tap_diag("node %d buffer: numa_maps says %s", node, got);
		CHECK(!strcmp(got, want), "numa_maps: %s, want %s", got, want);
		CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());
	}
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static const struct tap_case cases[] = {
	TAP_CASE_T(pinned_buffer_not_scanned, 180),
	TAP_CASE(numa_maps_show_the_buffer_node),
};

TAP_MAIN(cases)
