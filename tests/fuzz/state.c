// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the worker's state (struct wstate, in fuzz.h) and what
 * works on it: the SIGSEGV/SIGBUS guard around single-byte accesses (touch()),
 * the slot arena and its PROT_NONE reservations, the edge and random values
 * (sizes, nodes, flags, devices, handles) and the tables of buffers, dma-bufs
 * and imports the ops pick from, closing a device and dropping everything.
 */
#include "fuzz.h"

/* ---- the worker's state ------------------------------------------------- */

/* volatile: the stores around the access must not be merged away */
static __thread sigjmp_buf *volatile guard_jb;

/*
 * A fault outside touch() is the fuzzer's (or the kernel's) fault: noted in
 * the shared page, then fatal. When the kernel cannot even build the signal
 * frame (an injected allocation failure while it faults in the stack), it
 * kills with SIGSEGV without running this handler (force_sigsegv): the
 * supervisor tells the two apart by this note.
 */
char *arena_lo, *arena_hi;	/* the worker's slot arena */

/* The /proc/self/maps line that holds @a, into @out (best effort: we die next). */
static void fault_map_line(unsigned long a, char *out, size_t cap)
{
	static char buf[16384];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	char *line, *save = NULL;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) {
			snprintf(out, cap, "%s", line);
			return;
		}
	}
	snprintf(out, cap, "no mapping");
}

void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (guard_jb)
		siglongjmp(*guard_jb, sig);
	if (!sh->unguarded++) {
		sh->fault_addr = (unsigned long)si->si_addr;
		sh->fault_code = si->si_code;
		sh->fault_in_arena = (char *)si->si_addr >= arena_lo && (char *)si->si_addr < arena_hi;
		fault_map_line(sh->fault_addr, sh->fault_map, sizeof(sh->fault_map));
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Reads or writes one byte at p under a SIGSEGV/SIGBUS guard; 0 ok, else the signal. */
int touch(volatile char *p, bool write, char v)
{
	sigjmp_buf jb;
	int sig;

	sig = sigsetjmp(jb, 1);
	if (sig) {
		guard_jb = NULL;
		return sig;
	}
	guard_jb = &jb;
	if (write)
		*p = v;
	else
		(void)*p;
	guard_jb = NULL;
	return 0;
}

char *slot_addr(struct wstate *w, int i)
{
	return w->arena + (size_t)i * SLOT_SZ;
}

/*
 * Puts the PROT_NONE reservation back over [a, a + len) of the arena. It
 * must not fail for good: a hole left in the arena is where the worker's
 * own thread stacks and malloc arenas land next, and a later MAP_FIXED
 * into the slot would pull them away under a running thread (a SIGSEGV
 * that is the fuzzer's, not the kernel's). Under fault injection the VMA
 * allocation fails now and then: try again.
 */
void reserve(char *a, size_t len)
{
	for (int tries = 0; tries < 10000; tries++)
		if (mmap(a, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0) != MAP_FAILED || (errno != ENOMEM && errno != EAGAIN))
			return;
	wreport("could not re-reserve %zu bytes of the slot arena at %p: %s", len, (void *)a,
		strerror(errno));
}

/* Replaces whatever a slot holds by the PROT_NONE reservation. */
void slot_clear(struct wstate *w, int i)
{
	reserve(slot_addr(w, i), SLOT_SZ);
	w->s[i].len = 0;
	w->s[i].buf = w->s[i].db = -1;
}

/* Edge and random values. */
uint64_t pick_size(struct wstate *w)
{
	static const uint64_t edge[] = {
		0, 1, 4095, 4096, 4097, 8192, 65536, 2 * MiB - 1, 2 * MiB, 2 * MiB + 1,
		4 * MiB, 6 * MiB, 8 * MiB, 8 * MiB + 4096, 16 * MiB, 64 * MiB, 1ULL << 32,
		1ULL << 40, 65ULL << 30, UINT64_MAX, UINT64_MAX - 4095, 1ULL << 63,
	};
	uint64_t v;

	switch (below(&w->r, 4)) {
	case 0:
		v = edge[below(&w->r, sizeof(edge) / sizeof(edge[0]))];
		break;
	case 1:
		v = rnd(&w->r);
		break;
	default:
		v = (below(&w->r, 64) + 1) * (one_in(&w->r, 2) ? PAGE : 64 * 1024);
		break;
	}
	/*
	 * Bounded: a sane-looking size above what this phase may hold is cut
	 * down (huge ones stay: the module must refuse them without trying).
	 * Root holds CAP_IPC_LOCK: a plausible 40 GiB would reach the OOM killer.
	 */
	if (w->priv && v > w->max_alloc && v <= (64ULL << 30))
		v = w->max_alloc - below(&w->r, 2) * PAGE;
	return v;
}

uint32_t pick_node(struct wstate *w)
{
	static const uint32_t nodes[] = { 0, 1, 2, 63, 64, 1024, STRIXPEER_NODE_DEFAULT,
					  0xfffffffe, 0x80000000 };

	if (one_in(&w->r, 3))
		return STRIXPEER_NODE_DEFAULT;
	return nodes[below(&w->r, sizeof(nodes) / sizeof(nodes[0]))];
}

uint32_t pick_flags(struct wstate *w, uint32_t valid)
{
	switch (below(&w->r, 6)) {
	case 0: return (uint32_t)rnd(&w->r);
	case 1: return 1U << below(&w->r, 32);
	case 2: return valid;
	default: return (uint32_t)rnd(&w->r) & valid;
	}
}

int pick_dev(struct wstate *w)
{
	int i = (int)below(&w->r, NDEV);

	if (w->dev[i] < 0 && !one_in(&w->r, 8))
		w->dev[i] = open(dev_path,
				 O_RDWR | (one_in(&w->r, 2) ? O_CLOEXEC : 0));
	return i;
}

uint32_t pick_handle(struct wstate *w, int dev)
{
	int i = (int)below(&w->r, NBUF);

	switch (below(&w->r, 8)) {
	case 0: return (uint32_t)rnd(&w->r);
	case 1: return (uint32_t)below(&w->r, 4);
	case 2: return UINT32_MAX;
	default:
		for (int k = 0; k < NBUF; k++, i = (i + 1) % NBUF)
			if (w->b[i].live && (w->b[i].dev == dev || one_in(&w->r, 4)))
				return w->b[i].handle;
		return w->b[i].handle;	/* stale, or 0 */
	}
}

int live_buf(struct wstate *w)
{
	int i = (int)below(&w->r, NBUF);

	for (int k = 0; k < NBUF; k++, i = (i + 1) % NBUF)
		if (w->b[i].live && w->dev[w->b[i].dev] >= 0)
			return i;
	return -1;
}

void add_buf(struct wstate *w, int dev, const struct strixpeer_buf_alloc *a)
{
	for (int i = 0; i < NBUF; i++) {
		if (!w->b[i].live) {
			w->b[i] = (struct fbuf){ .dev = dev, .handle = a->handle, .size = a->size,
						 .cookie = a->mmap_offset, .live = true };
			w->live_bytes += a->size;
			return;
		}
	}
	/* table full: free it again so that nothing grows without bound */
	struct strixpeer_buf_free f = { .handle = a->handle };

	ioctl(w->dev[dev], STRIXPEER_IOC_BUF_FREE, &f);
	count(C_IOCTL);
}

int add_db(struct wstate *w, int fd, uint64_t size, enum db_kind kind)
{
	for (int i = 0; i < NDB; i++) {
		if (w->d[i].fd < 0) {
			w->d[i] = (struct dbuf){ .fd = fd, .size = size, .kind = kind };
			return i;
		}
	}
	close(fd);
	return -1;
}

int pick_db(struct wstate *w)
{
	int i = (int)below(&w->r, NDB);

	for (int k = 0; k < NDB; k++, i = (i + 1) % NDB)
		if (w->d[i].fd >= 0)
			return i;
	return -1;
}

/* Closes a device fd: its buffers and imports go (mappings keep buffers). */
void close_dev(struct wstate *w, int i)
{
	if (w->dev[i] < 0)
		return;
	close(w->dev[i]);
	w->dev[i] = -1;
	for (int k = 0; k < NBUF; k++)
		if (w->b[k].live && w->b[k].dev == i)
			w->b[k].live = false;
	for (int k = 0; k < NIMP; k++)
		if (w->im[k].live && w->im[k].dev == i)
			w->im[k].live = false;
	count(C_PROC);
}

/* Drops everything this worker holds (bounds memory; also exercises close paths). */
void reset_all(struct wstate *w)
{
	for (int i = 0; i < 8; i++)
		gem_close(w, i);
	for (int i = 0; i < NSLOT; i++)
		if (w->s[i].len || one_in(&w->r, 4))
			slot_clear(w, i);
	for (int i = 0; i < NDB; i++)
		if (w->d[i].fd >= 0) {
			close(w->d[i].fd);
			w->d[i].fd = -1;
		}
	for (int i = 0; i < NDEV; i++)
		close_dev(w, i);
	w->live_bytes = 0;
}
