// SPDX-License-Identifier: MIT
/*
 * The holder of tests/guest/fragment.c: a forked process that fills a
 * node and fragments it, and holds that until it is killed.
 */
#include "fragment.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>

int node = 1;
uint64_t margin = 16 * MiB;

uint64_t mib(uint64_t bytes)
{
	return bytes >> 20;
}

/* The buddy allocator's free pages (not the per-cpu lists): the fill's guard */
uint64_t node_free(void)
{
	return sp_meminfo(node, "MemFree");
}

/*
 * The node's high watermarks, boost included (/proc/zoneinfo), bytes: a
 * fragmentation event boosts them (watermark_boost_factor), and a fill
 * that stops at a fixed margin below them meets the OOM killer.
 */
static uint64_t node_wmark(void)
{
	char line[256];
	uint64_t pages = 0, v;
	int cur = -1;
	FILE *f = fopen("/proc/zoneinfo", "re");

	if (!f)
		die("zoneinfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Node %d,", &cur) == 1)
			continue;
		if (cur == node && sscanf(line, " high %" SCNu64, &v) == 1)
			pages += v;
	}
	fclose(f);
	return pages * PAGE;
}

/* Whether the holder may take @step more bytes: MemFree stays above margin + watermark */
static bool room_for(uint64_t step)
{
	return node_free() > margin + node_wmark() + step;
}

/* Bytes the node has free in blocks of 2 MiB or more (/proc/buddyinfo). */
uint64_t free_huge_bytes(void)
{
	char line[512], want[32];
	uint64_t bytes = 0;
	FILE *f = fopen("/proc/buddyinfo", "re");

	if (!f)
		die("/proc/buddyinfo: %s", strerror(errno));
	snprintf(want, sizeof(want), "Node %d,", node);
	while (fgets(line, sizeof(line), f)) {
		char *p, *end;
		int order = 0;

		if (strncmp(line, want, strlen(want)))
			continue;
		p = strstr(line, "zone");
		if (!p)
			continue;
		p += 4;
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')	/* the zone's name */
			p++;
		for (;; order++) {
			unsigned long long n = strtoull(p, &end, 10);

			if (end == p)
				break;
			if (order >= 9)
				bytes += n << order << 12;
			p = end;
		}
	}
	fclose(f);
	return bytes;
}

/* pfns[i] of the n pages from p: 0 when not present. */
void read_pfns(const void *p, uint64_t n, uint64_t *pfns)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t done = 0;

	if (fd < 0)
		die("pagemap: %s", strerror(errno));
	while (done < n) {
		ssize_t r = pread(fd, pfns + done, (n - done) * 8,
				  (off_t)(((uintptr_t)p / PAGE + done) * 8));

		if (r <= 0)
			die("pagemap read: %s", r < 0 ? strerror(errno) : "short");
		done += (uint64_t)r / 8;
	}
	close(fd);
	for (uint64_t i = 0; i < n; i++)
		pfns[i] = (pfns[i] >> 63) ? pfns[i] & ((1ULL << 55) - 1) : 0;
}

void touch(uint8_t *p, uint64_t size)
{
	for (uint64_t off = 0; off < size; off += PAGE)
		p[off] = 1;
}


static void bind_to_node(void)
{
	unsigned long mask[16] = { 0 };

	mask[node / 64] = 1UL << (node % 64);
	if (syscall(SYS_set_mempolicy, MPOL_BIND_MODE, mask, sizeof(mask) * 8))
		die("set_mempolicy: %s", strerror(errno));
}

/*
 * Takes a reference on the page at @addr that compaction cannot drop: the
 * page goes into a pipe with vmsplice() (no SPLICE_F_GIFT: the pipe
 * buffer holds the page, refcount above mapcount, and
 * isolate_migratepages_block() skips such a page). 256 pages a pipe.
 */
static void pin_page(void *addr)
{
	static int fds[2], used = 256;
	struct iovec iov = { addr, PAGE };

	if (used == 256) {
		if (pipe2(fds, O_CLOEXEC) || fcntl(fds[1], F_SETPIPE_SZ, 1 << 20) < (1 << 20))
			die("pipe for vmsplice: %s", strerror(errno));
		used = 0;
	}
	if (vmsplice(fds[1], &iov, 1, 0) != (ssize_t)PAGE)
		die("vmsplice: %s", strerror(errno));
	used++;
}

static void hold_movable(uint64_t avail, bool pin)
{
	uint64_t size = avail, touched = 0, nblocks, *pfns, maxpfn = 0, dropped = 0;
	uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t *seen;

	if (p == MAP_FAILED)
		die("mmap %" PRIu64 ": %s", size, strerror(errno));
	madvise(p, size, MADV_NOHUGEPAGE);
	/* 16 MiB at a time, until only the margin is free */
	while (touched + 16 * MiB <= size && room_for(16 * MiB)) {
		touch(p + touched, 16 * MiB);
		touched += 16 * MiB;
	}
	pfns = malloc(touched / PAGE * 8);
	if (!pfns)
		die("malloc");
	read_pfns(p, touched / PAGE, pfns);
	for (uint64_t i = 0; i < touched / PAGE; i++)
		maxpfn = pfns[i] > maxpfn ? pfns[i] : maxpfn;
	nblocks = maxpfn / PER_HUGE + 1;
	seen = calloc(nblocks, 1);
	if (!seen)
		die("calloc");
	/* every page of an even 2 MiB block but the first one seen goes */
	for (uint64_t i = 0, run = 0, len = 0; i <= touched / PAGE; i++) {
		bool drop = false;

		if (i < touched / PAGE && pfns[i]) {
			uint64_t b = pfns[i] / PER_HUGE;

			drop = !(b & 1) && seen[b];
			if (pin && !seen[b])	/* odd blocks too: none can empty */
				pin_page(p + i * PAGE);
			seen[b] = 1;
		}
		if (drop) {
			if (!len)
				run = i;
			len++;
			continue;
		}
		if (len && madvise(p + run * PAGE, len * PAGE, MADV_DONTNEED))
			die("MADV_DONTNEED: %s", strerror(errno));
		dropped += len;
		len = 0;
	}
	free(pfns);
	free(seen);
	fprintf(stderr, "fragment: holder: %" PRIu64 " MiB anonymous, %" PRIu64 " MiB dropped\n",
		mib(touched), mib(dropped * PAGE));
}

static void hold_unmovable(void)
{
	const int pipe_sz = 1 << 20;
	static char data[64 << 10];
	struct rlimit rl = { 1 << 16, 1 << 16 };
	int cap = 1 << 15, n = 0, (*fds)[2];

	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("RLIMIT_NOFILE: %s", strerror(errno));
	fds = calloc(cap, sizeof(*fds));
	if (!fds)
		die("calloc");
	while (n < cap && room_for(2 * MiB)) {
		if (pipe2(fds[n], O_NONBLOCK | O_CLOEXEC))
			die("pipe %d: %s", n, strerror(errno));
		if (fcntl(fds[n][1], F_SETPIPE_SZ, pipe_sz) < pipe_sz)
			die("F_SETPIPE_SZ %d: %s", pipe_sz, strerror(errno));
		for (int w = 0; w < pipe_sz;) {
			ssize_t r = write(fds[n][1], data, sizeof(data));

			if (r <= 0)
				die("pipe write: %s", r < 0 ? strerror(errno) : "0");
			w += (int)r;
		}
		n++;
	}
	for (int i = 1; i < n; i += 2) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	fprintf(stderr, "fragment: holder: %d pipes of 1 MiB, every other one closed\n", n);
}

/*
 * Forks the holder; returns its pid once the node is fragmented (it says
 * so on a pipe; a bounded wait that names the state when it expires).
 */
pid_t fragment(const char *variant)
{
	int sync[2];
	pid_t pid;
	char c;
	struct pollfd pfd;
	int r;

	if (pipe2(sync, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		close(sync[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		bind_to_node();
		if (strcmp(variant, "unmovable"))
			hold_movable(node_free(), !strcmp(variant, "pinned"));
		else
			hold_unmovable();
		if (write(sync[1], "k", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(sync[1]);
	pfd = (struct pollfd){ .fd = sync[0], .events = POLLIN };
	r = poll(&pfd, 1, 900 * 1000);
	if (r != 1 || read(sync[0], &c, 1) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		die("the %s holder %s: node %d free %" PRIu64 " MiB, in 2 MiB blocks %" PRIu64
		    " MiB (dmesg may say why)", variant,
		    r == 1 ? "ended before it was done" : "was not done within 900 s", node,
		    mib(node_free()), mib(free_huge_bytes()));
	}
	close(sync[0]);
	return pid;
}

void release(pid_t pid)
{
	kill(pid, SIGKILL);
	if (waitpid(pid, NULL, 0) != pid)
		die("waitpid: %s", strerror(errno));
}
