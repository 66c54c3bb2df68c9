// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: a seeded, bounded, reproducible fuzzer of strixpeer's
 * user-facing surface, with a consistency oracle. Runs as root inside a
 * test VM (tests/vm/fuzz.sh, or the "fuzz" case of tests/vm/guest-suite.sh).
 *
 *   fuzz [--seed N] [--seconds N] [--phases LIST] [--ops N] [--no-faults]
 *        [--no-kmemleak] [--memlock BYTES] [--uid N]
 *
 * A run is a sequence of phases (default "root,user,fault-root,fault-user";
 * the fault phases only where /sys/kernel/debug/failslab exists). Each phase
 * is one worker process (its own process group) that makes random calls for
 * its share of --seconds, from a PRNG seeded with (seed, phase name) only:
 * a phase replays on its own with --phases. The calls:
 *
 *   ioctl    every STRIXPEER_IOC_* with sane, edge and random fields; struct
 *            sizes smaller than, equal to and larger than the header's (tails
 *            zero or not), wrong directions, unknown numbers and magics,
 *            arguments NULL, unmapped, read-only or straddling a hole;
 *            handles live, freed, of another fd, random.
 *   mmap     the buffer cookie (handle << 40) with random offsets, lengths,
 *            protections and flags, at fixed places in a reserved arena;
 *            partial munmap, mprotect, madvise (DONTNEED, DONTFORK,
 *            WIPEONFORK, FREE, REMOVE, PAGEOUT, POPULATE_*, ...), mremap
 *            (grow, shrink, move); pages touched under a SIGSEGV/SIGBUS guard.
 *   dmabuf   BUF_EXPORT (flags random), mmap of the export, DMA_BUF_IOCTL_SYNC
 *            (valid and invalid flags), udmabuf from a sealed memfd, the
 *            system dma-heap, vgem dumb buffers (when loaded), IMPORT of
 *            those and of the module's own exports at random VAs, offsets
 *            and lengths, UNIMPORT, IMPORT_INFO, closing fds under imports;
 *            vgem importing exports (a device attaching and mapping them,
 *            DMA-API debug watching) and letting go.
 *   netlink  the "strixpeer" generic netlink family: every command, do and
 *            dump, with valid, wrong-typed, short, long, unknown, nested and
 *            truncated attributes, lying header lengths, config-set attempts
 *            (as root sane and random values, the start's configuration
 *            restored often and at the end of the phase; as nobody
 *            anything), joining the "events" group, dumps left unread or
 *            abandoned halfway.
 *   proc/fd  fork (children use inherited fds and mappings), kill -9 at a
 *            random moment of an alloc/map/export/import loop, execve chains
 *            carrying non-CLOEXEC device and dma-buf fds (the escape of
 *            issue 16), fds passed with SCM_RIGHTS, threads sharing one fd
 *            (frees, infos, exports, maps and a close racing each other),
 *            device fds closed with mappings and exports alive.
 *
 * The "user" phases run as uid/gid nobody (no groups, no capabilities) with
 * RLIMIT_MEMLOCK of 8 MiB (--memlock); /dev/strixpeer is made 0666 for the
 * phase (as if nobody were in group rdma) and restored after; udmabuf, the
 * dma-heap and vgem are opened before privileges are dropped (a GPU job).
 * The "fault-" phases set /proc/self/make-it-fail in the worker (inherited by
 * its children) with failslab and fail_page_alloc restricted by task-filter,
 * so only the fuzzer's own processes see injected failures; how many were
 * injected is read back from the attributes' "times" counters.
 *
 * Oracle, each finding a "report" with the seed, phase and a replay command:
 *  - after every phase, once every process of it was reaped (the supervisor
 *    is a child subreaper): stats-get's buffers, pinned-bytes, imports,
 *    dmabuf-exports, dmabuf-attachments and peer-registrations, and sysfs's
 *    buffers and pinned_bytes, all back to zero (polled for up to 10 s:
 *    dma-buf releases may be deferred to delayed fput and workqueues);
 *  - during "user" phases, sampled every 50 ms: the module's pinned-bytes
 *    never above the user's RLIMIT_MEMLOCK (pinning is charged per user);
 *  - config-get identical before and after each "user" phase;
 *  - no kernel report in the log (/dev/kmsg from the start of the run):
 *    BUG:, WARNING:, Oops, KASAN, UBSAN, lockdep's possible circular or
 *    recursive locking, DMA-API, refcount_t, general protection, Call Trace;
 *    in fault phases an allocation-failure warning (warn_alloc) and the
 *    trace after it are counted as injected, not reported;
 *  - kmemleak (debug kernel; --no-kmemleak leaves it to the suite's own scan
 *    at its end, as tests/fuzz/guest.sh does: each scan takes 30-50 s under
 *    TCG): a scan at the start and at the end; objects new in the end scan
 *    are reported (kmemleak cannot say when an object leaked);
 *  - a worker that crashed (a signal other than our SIGKILL), hung past
 *    its deadline, or a process that cannot be reaped after SIGKILL.
 * Errnos are not judged: the module's refusals change (see issue 16); a
 * call refused with ENOMEM in a fault phase is an injected failure, any
 * later inconsistency it leaves (a leak, a report) is a bug.
 *
 * What it does not cover: PeerDirect registrations (no ibv_reg_mr, no
 * sp_peersim MRs: peer_registrations is only checked to stay 0), RDMA
 * traffic, importers other than vgem (sp_peersim's dynamic importer, move
 * notifications, sp_gpusim's moving buffers), the 32-bit compat ioctl path,
 * data integrity (bytes are written and read, never compared), fail_function
 * (the module marks no function ALLOW_ERROR_INJECTION; reported as unused),
 * rmmod/insmod while busy, memory cgroups, module parameters written through
 * sysfs, CPU hotplug and real memory pressure. Reproducibility: the choices
 * depend only on the seed and on the kernel's answers, but timing (deadlines,
 * kill -9 moments, thread interleavings) varies, so a replay follows the
 * same sequence only as far as those answers and timings agree.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/udmabuf.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uapi/strixpeer.h"

#define MiB (1024ULL * 1024)
#define PAGE 4096ULL
#define NOBODY 65534
#define COOKIE_SHIFT 40

/* ---- PRNG (splitmix64: tiny, seedable, good enough) --------------------- */

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t below(struct rng *r, uint64_t n)
{
	return n ? rnd(r) % n : 0;
}

static bool one_in(struct rng *r, unsigned int n)
{
	return below(r, n) == 0;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	struct rng r = { a ^ (b * 0xD6E8FEB86659FD93ULL) };

	rnd(&r);
	return rnd(&r);
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ULL;
	return h;
}

/* ---- shared counters (an anonymous shared page, inherited by fork) ------ */

enum cat { C_IOCTL, C_MMAP, C_DMABUF, C_NETLINK, C_PROC, C_NCAT };
static const char *const cat_name[C_NCAT] = { "ioctl", "mmap", "dmabuf", "netlink", "process/fd" };

#define MAX_WREPORTS 16
struct shared {
	unsigned long calls[C_NCAT];
	unsigned long op;		/* the worker's current operation */
	unsigned long events_joined;	/* unprivileged joins of "events" that succeeded */
	unsigned long events_refused;
	unsigned long cfgset_accepted;	/* unprivileged config-set answered 0 */
	unsigned long nreports;
	unsigned long usec[C_NCAT];	/* time spent per category (the worker's loop) */
	unsigned long proc_usec[9];	/* ... and per kind of process/fd operation */
	unsigned long enomem[2];
	unsigned long ok[6];		/* calls that succeeded, by kind (coverage) */
	unsigned long unguarded;	/* SIGSEGV/SIGBUS our handler saw outside touch() */
	unsigned long fault_addr;
	int fault_code;			/* its si_code */
	int fault_in_arena;		/* 1: the address is in the slot arena */
	char fault_map[160];		/* its /proc/self/maps line, when there is one */
	struct {
		unsigned long op;
		char msg[240];
	} rep[MAX_WREPORTS];
};

static struct shared *sh;

enum ok_kind { OK_ALLOC, OK_MMAP, OK_EXPORT, OK_IMPORT, OK_ATTACH, OK_FORK };
static const char *const ok_name[6] = { "allocs", "buffer mmaps", "exports", "imports",
					"vgem attachments", "forks" };

static void ok(enum ok_kind k)
{
	__atomic_add_fetch(&sh->ok[k], 1, __ATOMIC_RELAXED);
}

static void count(enum cat c)
{
	__atomic_add_fetch(&sh->calls[c], 1, __ATOMIC_RELAXED);
}

/* A finding made inside a worker (the supervisor prints it with the seed). */
__attribute__((format(printf, 1, 2)))
static void wreport(const char *fmt, ...)
{
	unsigned long i = __atomic_fetch_add(&sh->nreports, 1, __ATOMIC_RELAXED);
	va_list ap;

	if (i >= MAX_WREPORTS)
		return;
	sh->rep[i].op = sh->op;
	va_start(ap, fmt);
	vsnprintf(sh->rep[i].msg, sizeof(sh->rep[i].msg), fmt, ap);
	va_end(ap);
}

/* ---- run parameters ------------------------------------------------------ */

static uint64_t opt_seed;
static double opt_seconds = 60;
static unsigned long opt_ops;		/* 0: no limit */
static uint64_t opt_memlock = 8 * MiB;
static unsigned int opt_uid = NOBODY;
static bool opt_faults = true, opt_kmemleak = true;
static char opt_phases[256] = "root,user,fault-root,fault-user";
static char self_exe[4096];
/* the device; SP_FUZZ_DRY=1 (debugging the fuzzer on a host without the module) uses /dev/null */
static const char *dev_path = STRIXPEER_DEVICE_PATH;
static bool dry;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val);
}

static bool read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = 0;
	return true;
}

static long long read_ll(const char *path)
{
	char b[64];

	return read_file(path, b, sizeof(b)) ? strtoll(b, NULL, 0) : -1;
}

/* ---- generic netlink, raw --------------------------------------------- */

struct nlmsg {
	union {
		struct nlmsghdr h;
		char b[16384];
	};
	size_t len;
};

static uint16_t sp_family;		/* 0: not found */
static uint32_t sp_events_group;
static uint32_t nl_seq = 1;

/* A generic netlink socket whose receives give up after @ms. */
static int nl_socket_t(int ms)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	int one = 1, fd;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	return fd;
}

static int nl_socket(void)
{
	return nl_socket_t(2000);
}

static void nl_begin(struct nlmsg *m, uint16_t type, uint16_t flags, uint8_t cmd, uint8_t ver)
{
	struct genlmsghdr *g;

	memset(m->b, 0, NLMSG_HDRLEN + GENL_HDRLEN);
	m->h.nlmsg_type = type;
	m->h.nlmsg_flags = flags;
	m->h.nlmsg_seq = nl_seq++;
	g = (struct genlmsghdr *)(m->b + NLMSG_HDRLEN);
	g->cmd = cmd;
	g->version = ver;
	m->len = NLMSG_HDRLEN + GENL_HDRLEN;
}

/* Appends an attribute; nla_len is what is claimed, len what is copied. */
static void nl_put_raw(struct nlmsg *m, uint16_t type, uint16_t nla_len, const void *data, size_t len)
{
	struct nlattr *a;

	if (m->len + NLA_HDRLEN + NLA_ALIGN(len) > sizeof(m->b))
		return;
	a = (struct nlattr *)(m->b + m->len);
	a->nla_type = type;
	a->nla_len = nla_len;
	if (len)
		memcpy(m->b + m->len + NLA_HDRLEN, data, len);
	memset(m->b + m->len + NLA_HDRLEN + len, 0, NLA_ALIGN(len) - len);
	m->len += NLA_HDRLEN + NLA_ALIGN(len);
}

static void nl_put(struct nlmsg *m, uint16_t type, const void *data, size_t len)
{
	nl_put_raw(m, type, (uint16_t)(NLA_HDRLEN + len), data, len);
}

static int nl_send(int fd, struct nlmsg *m)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	m->h.nlmsg_len = (uint32_t)m->len;
	return (int)sendto(fd, m->b, m->len, 0, (struct sockaddr *)&sa, sizeof(sa));
}

typedef void (*nl_cb)(const struct nlmsghdr *h, void *arg);

/*
 * Reads the answers to sequence @seq until DONE or an error message;
 * returns 0 or -errno of the NLMSG_ERROR, -ETIMEDOUT/-errno of recv.
 * @max_msgs > 0 stops after that many datagrams (a dump left unread).
 */
static int nl_recv(int fd, uint32_t seq, nl_cb cb, void *arg, int max_msgs)
{
	static char buf[65536];
	int n_msgs = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				return e->error;
			}
			if (cb)
				cb(h, arg);
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				return 0;
		}
		if (max_msgs > 0 && ++n_msgs >= max_msgs)
			return 1;
	}
}

static const struct nlattr *nl_attrs(const struct nlmsghdr *h, int *rem)
{
	*rem = (int)h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
	return (const struct nlattr *)((const char *)h + NLMSG_HDRLEN + GENL_HDRLEN);
}

#define NLA_OK_(a, rem) ((rem) >= (int)sizeof(struct nlattr) && (a)->nla_len >= sizeof(struct nlattr) && \
			 (a)->nla_len <= (rem))
#define NLA_NEXT_(a, rem) ((rem) -= NLA_ALIGN((a)->nla_len), \
			   (const struct nlattr *)((const char *)(a) + NLA_ALIGN((a)->nla_len)))
#define NLA_DATA_(a) ((const void *)((const char *)(a) + NLA_HDRLEN))

static void family_cb(const struct nlmsghdr *h, void *arg)
{
	int rem;
	const struct nlattr *a = nl_attrs(h, &rem);

	(void)arg;
	for (; NLA_OK_(a, rem); a = NLA_NEXT_(a, rem)) {
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
			memcpy(&sp_family, NLA_DATA_(a), 2);
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_MCAST_GROUPS) {
			int r1 = a->nla_len - NLA_HDRLEN;
			const struct nlattr *g = NLA_DATA_(a);

			for (; NLA_OK_(g, r1); g = NLA_NEXT_(g, r1)) {
				int r2 = g->nla_len - NLA_HDRLEN;
				const struct nlattr *x = NLA_DATA_(g);
				uint32_t id = 0;
				bool events = false;

				for (; NLA_OK_(x, r2); x = NLA_NEXT_(x, r2)) {
					if (x->nla_type == CTRL_ATTR_MCAST_GRP_ID)
						memcpy(&id, NLA_DATA_(x), 4);
					if (x->nla_type == CTRL_ATTR_MCAST_GRP_NAME &&
					    !strcmp(NLA_DATA_(x), STRIXPEER_MCGRP_EVENTS))
						events = true;
				}
				if (events)
					sp_events_group = id;
			}
		}
	}
}

static void nl_resolve(void)
{
	struct nlmsg m;
	int fd = nl_socket();

	if (fd < 0)
		return;
	nl_begin(&m, GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK, CTRL_CMD_GETFAMILY, 1);
	nl_put(&m, CTRL_ATTR_FAMILY_NAME, STRIXPEER_GENL_NAME, sizeof(STRIXPEER_GENL_NAME));
	if (nl_send(fd, &m) > 0)
		nl_recv(fd, m.h.nlmsg_seq, family_cb, NULL, 0);
	close(fd);
}

/* The counters the oracle wants back at zero, from stats-get. */
enum { S_BUFFERS, S_PINNED, S_IMPORTS, S_EXPORTS, S_ATTACH, S_PEERREG, S_N };
static const char *const stat_name[S_N] = {
	"buffers", "pinned-bytes", "imports", "dmabuf-exports", "dmabuf-attachments",
	"peer-registrations"
};
static const int stat_attr[S_N] = {
	STRIXPEER_A_STATS_BUFFERS, STRIXPEER_A_STATS_PINNED_BYTES, STRIXPEER_A_STATS_IMPORTS,
	STRIXPEER_A_STATS_DMABUF_EXPORTS, STRIXPEER_A_STATS_DMABUF_ATTACHMENTS,
	STRIXPEER_A_STATS_PEER_REGISTRATIONS
};

static void stats_cb(const struct nlmsghdr *h, void *arg)
{
	int64_t *v = arg;
	int rem;
	const struct nlattr *a = nl_attrs(h, &rem);

	for (; NLA_OK_(a, rem); a = NLA_NEXT_(a, rem))
		for (int i = 0; i < S_N; i++)
			if (a->nla_type == stat_attr[i] && a->nla_len == NLA_HDRLEN + 8)
				memcpy(&v[i], NLA_DATA_(a), 8);
}

static int stats_get(int64_t v[S_N])
{
	struct nlmsg m;
	int fd = nl_socket(), ret;

	for (int i = 0; i < S_N; i++)
		v[i] = -1;
	if (fd < 0)
		return -errno;
	nl_begin(&m, sp_family, NLM_F_REQUEST, STRIXPEER_CMD_STATS_GET, STRIXPEER_GENL_VERSION);
	ret = nl_send(fd, &m) < 0 ? -errno : nl_recv(fd, m.h.nlmsg_seq, stats_cb, v, 0);
	close(fd);
	return ret;
}

/* config-get's answer as raw attributes: compared byte for byte. */
struct config {
	char raw[512];
	size_t len;
	uint64_t max_buf_size, max_pinned;
	int32_t default_node;
	uint8_t require_huge;
};

static void config_cb(const struct nlmsghdr *h, void *arg)
{
	struct config *c = arg;
	int rem;
	const struct nlattr *a = nl_attrs(h, &rem);

	c->len = rem > 0 && (size_t)rem <= sizeof(c->raw) ? (size_t)rem : 0;
	memcpy(c->raw, a, c->len);
	for (; NLA_OK_(a, rem); a = NLA_NEXT_(a, rem)) {
		switch (a->nla_type) {
		case STRIXPEER_A_CONFIG_MAX_BUF_SIZE: memcpy(&c->max_buf_size, NLA_DATA_(a), 8); break;
		case STRIXPEER_A_CONFIG_MAX_PINNED_BYTES: memcpy(&c->max_pinned, NLA_DATA_(a), 8); break;
		case STRIXPEER_A_CONFIG_DEFAULT_NODE: memcpy(&c->default_node, NLA_DATA_(a), 4); break;
		case STRIXPEER_A_CONFIG_REQUIRE_HUGE: memcpy(&c->require_huge, NLA_DATA_(a), 1); break;
		}
	}
}

static int config_get(struct config *c)
{
	struct nlmsg m;
	int fd = nl_socket(), ret;

	memset(c, 0, sizeof(*c));
	if (fd < 0)
		return -errno;
	nl_begin(&m, sp_family, NLM_F_REQUEST, STRIXPEER_CMD_CONFIG_GET, STRIXPEER_GENL_VERSION);
	ret = nl_send(fd, &m) < 0 ? -errno : nl_recv(fd, m.h.nlmsg_seq, config_cb, c, 0);
	close(fd);
	return ret;
}

static int config_set(const struct config *c)
{
	struct nlmsg m;
	int fd = nl_socket(), ret;
	uint32_t node = (uint32_t)c->default_node;

	if (fd < 0)
		return -errno;
	nl_begin(&m, sp_family, NLM_F_REQUEST | NLM_F_ACK, STRIXPEER_CMD_CONFIG_SET,
		 STRIXPEER_GENL_VERSION);
	nl_put(&m, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &c->max_buf_size, 8);
	nl_put(&m, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES, &c->max_pinned, 8);
	nl_put(&m, STRIXPEER_A_CONFIG_DEFAULT_NODE, &node, 4);
	nl_put(&m, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &c->require_huge, 1);
	ret = nl_send(fd, &m) < 0 ? -errno : nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 0);
	close(fd);
	return ret;
}

/* The configuration at the start (the supervisor's; workers inherit it). */
static struct config base_cfg;
static bool have_cfg;
static int kmsg = -1;		/* /dev/kmsg, the supervisor's */

/* ---- the worker's state ------------------------------------------------- */

#define NDEV 3
#define NBUF 48
#define NSLOT 12
#define SLOT_SZ (128 * MiB)
#define NDB 16
#define NIMP 24
#define NKIDS 6

struct fbuf {
	int dev;			/* index into dev[] */
	uint32_t handle;
	uint64_t size, cookie;
	bool live;
};

enum db_kind { DB_EXPORT, DB_UDMABUF, DB_HEAP, DB_VGEM };

struct dbuf {
	int fd;				/* -1: free slot */
	uint64_t size;
	enum db_kind kind;
};

struct fimp {
	int dev;
	uint32_t handle;
	bool live;
};

struct slot {
	uint64_t len;			/* 0: only the PROT_NONE reservation */
	int buf;			/* index into b[] or -1 */
	int db;				/* index into d[] or -1 */
};

struct wstate {
	struct rng r;
	bool priv, faults;
	int dev[NDEV];
	struct fbuf b[NBUF];
	struct dbuf d[NDB];
	struct fimp im[NIMP];
	struct slot s[NSLOT];
	char *arena;
	uint64_t live_bytes;		/* bytes allocated (upper bound of what is held) */
	int nl, nl_ev;
	int udmabuf, heap, vgem;
	uint32_t gem[8];		/* vgem's imports of dma-bufs (attachments), 0: none */
	pid_t kids[NKIDS];
	double deadline;
	uint64_t max_alloc;
};

static pid_t worker_pid;	/* time is accounted in the worker only, not its children */

/* volatile: the stores around the access must not be merged away */
static __thread sigjmp_buf *volatile guard_jb;

/*
 * A fault outside touch() is the fuzzer's (or the kernel's) fault: noted in
 * the shared page, then fatal. When the kernel cannot even build the signal
 * frame (an injected allocation failure while it faults in the stack), it
 * kills with SIGSEGV without running this handler (force_sigsegv): the
 * supervisor tells the two apart by this note.
 */
static char *arena_lo, *arena_hi;	/* the worker's slot arena */

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

static void on_fault(int sig, siginfo_t *si, void *uc)
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
static int touch(volatile char *p, bool write, char v)
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

static char *slot_addr(struct wstate *w, int i)
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
static void reserve(char *a, size_t len)
{
	for (int tries = 0; tries < 10000; tries++)
		if (mmap(a, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0) != MAP_FAILED || (errno != ENOMEM && errno != EAGAIN))
			return;
	wreport("could not re-reserve %zu bytes of the slot arena at %p: %s", len, (void *)a,
		strerror(errno));
}

/* Replaces whatever a slot holds by the PROT_NONE reservation. */
static void slot_clear(struct wstate *w, int i)
{
	reserve(slot_addr(w, i), SLOT_SZ);
	w->s[i].len = 0;
	w->s[i].buf = w->s[i].db = -1;
}

/* Edge and random values. */
static uint64_t pick_size(struct wstate *w)
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

static uint32_t pick_node(struct wstate *w)
{
	static const uint32_t nodes[] = { 0, 1, 2, 63, 64, 1024, STRIXPEER_NODE_DEFAULT,
					  0xfffffffe, 0x80000000 };

	if (one_in(&w->r, 3))
		return STRIXPEER_NODE_DEFAULT;
	return nodes[below(&w->r, sizeof(nodes) / sizeof(nodes[0]))];
}

static uint32_t pick_flags(struct wstate *w, uint32_t valid)
{
	switch (below(&w->r, 6)) {
	case 0: return (uint32_t)rnd(&w->r);
	case 1: return 1U << below(&w->r, 32);
	case 2: return valid;
	default: return (uint32_t)rnd(&w->r) & valid;
	}
}

static int pick_dev(struct wstate *w)
{
	int i = (int)below(&w->r, NDEV);

	if (w->dev[i] < 0 && !one_in(&w->r, 8))
		w->dev[i] = open(dev_path,
				 O_RDWR | (one_in(&w->r, 2) ? O_CLOEXEC : 0));
	return i;
}

static uint32_t pick_handle(struct wstate *w, int dev)
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

static int live_buf(struct wstate *w)
{
	int i = (int)below(&w->r, NBUF);

	for (int k = 0; k < NBUF; k++, i = (i + 1) % NBUF)
		if (w->b[i].live && w->dev[w->b[i].dev] >= 0)
			return i;
	return -1;
}

static void add_buf(struct wstate *w, int dev, const struct strixpeer_buf_alloc *a)
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

static int add_db(struct wstate *w, int fd, uint64_t size, enum db_kind kind)
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

static int pick_db(struct wstate *w)
{
	int i = (int)below(&w->r, NDB);

	for (int k = 0; k < NDB; k++, i = (i + 1) % NDB)
		if (w->d[i].fd >= 0)
			return i;
	return -1;
}

/* Closes a device fd: its buffers and imports go (mappings keep buffers). */
static void close_dev(struct wstate *w, int i)
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
static void gem_close(struct wstate *w, int i);

static void reset_all(struct wstate *w)
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

/* ---- ioctls ----------------------------------------------------------- */

static const unsigned long known_cmds[] = {
	STRIXPEER_IOC_VERSION, STRIXPEER_IOC_BUF_ALLOC, STRIXPEER_IOC_BUF_FREE,
	STRIXPEER_IOC_BUF_INFO, STRIXPEER_IOC_IMPORT, STRIXPEER_IOC_UNIMPORT,
	STRIXPEER_IOC_IMPORT_INFO, STRIXPEER_IOC_BUF_EXPORT,
};

/* A page-aligned scratch area with a PROT_NONE page after it and a read-only page. */
static char *scratch, *scratch_ro;

static void scratch_init(void)
{
	scratch = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (scratch == MAP_FAILED)
		exit(3);
	mprotect(scratch + 2 * PAGE, PAGE, PROT_NONE);
	scratch_ro = scratch + 3 * PAGE;
	mprotect(scratch_ro, PAGE, PROT_READ);
}

/*
 * Issues @cmd's struct (@arg, @len bytes, the header's size) with a random
 * size variant, direction, and argument pointer. Returns the ioctl's result
 * and the struct as the kernel left it in @arg when the pointer was the
 * plain one.
 */
static int fuzz_ioctl(struct wstate *w, int fd, unsigned long cmd, void *arg, size_t len)
{
	unsigned int size = (unsigned int)len, dir = _IOC_DIR(cmd);
	char *p = scratch;
	bool plain = true;
	int ret;

	switch (below(&w->r, 10)) {
	case 0:	/* smaller */
		size = (unsigned int)below(&w->r, len);
		break;
	case 1:	/* larger, zero tail */
	case 2:	/* larger, non-zero tail */
		size = (unsigned int)(len + 1 + below(&w->r, 2 * PAGE - len - 1));
		if (one_in(&w->r, 3))
			size = (unsigned int)(len + 8);
		break;
	case 3:
		dir = (unsigned int)below(&w->r, 4);
		break;
	default:
		break;
	}
	memset(p, 0, 2 * PAGE);
	memcpy(p, arg, len < size ? len : size);
	if (size > len && !one_in(&w->r, 2))
		for (unsigned int i = (unsigned int)len; i < size; i += 1 + (unsigned int)below(&w->r, 64))
			p[i] = (char)(1 + below(&w->r, 255));
	switch (below(&w->r, 24)) {
	case 0: p = NULL; plain = false; break;
	case 1: p = (char *)(uintptr_t)rnd(&w->r); plain = false; break;
	case 2: {	/* the struct runs into the PROT_NONE page */
		uint64_t k = below(&w->r, size + 1);

		p = scratch + 2 * PAGE - k;
		memmove(p, scratch, k);
		plain = false;
		break;
	}
	case 3: p = scratch_ro; plain = false; break;
	case 4: p = scratch + 2 * PAGE; plain = false; break;
	default: break;
	}
	cmd = _IOC(dir, _IOC_TYPE(cmd), _IOC_NR(cmd), size & _IOC_SIZEMASK);
	count(C_IOCTL);
	ret = ioctl(fd, cmd, p);
	if (ret < 0 && errno == ENOMEM)
		__atomic_add_fetch(&sh->enomem[w->faults], 1, __ATOMIC_RELAXED);
	if (plain)
		memcpy(arg, scratch, len);
	return ret < 0 ? -errno : ret;
}

static void op_ioctl(struct wstate *w)
{
	int di = pick_dev(w), fd = w->dev[di];
	int which = (int)below(&w->r, 9);

	if (fd < 0 || one_in(&w->r, 40))
		fd = one_in(&w->r, 2) ? -1 : (int)below(&w->r, 64);	/* bad or random fd */

	switch (which) {
	case 0: {
		struct strixpeer_version v;

		memset(&v, 0, sizeof(v));
		fuzz_ioctl(w, fd, STRIXPEER_IOC_VERSION, &v, sizeof(v));
		break;
	}
	case 1:
	case 2: {
		if (fd == w->dev[di] && fd >= 0 && one_in(&w->r, 2)) {
			/* a sane one: the objects every other call works on */
			uint64_t unit = one_in(&w->r, 2) ? 2 * MiB : 64 * 1024;
			struct strixpeer_buf_alloc a = {
				.size = (below(&w->r, 8) + 1) * unit,
				.node = one_in(&w->r, 2) ? STRIXPEER_NODE_DEFAULT : (uint32_t)below(&w->r, 2),
				.flags = (uint32_t)below(&w->r, 3),
			};

			if (a.size > w->max_alloc)
				a.size = w->max_alloc / 2;
			if (w->live_bytes > w->max_alloc * 4)
				break;
			count(C_IOCTL);
			if (ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a) == 0) {
				ok(OK_ALLOC);
				add_buf(w, di, &a);
			}
			break;
		}
		struct strixpeer_buf_alloc a = {
			.size = pick_size(w), .node = pick_node(w),
			.flags = pick_flags(w, STRIXPEER_ALLOC_FLAGS),
			.handle = one_in(&w->r, 8) ? (uint32_t)rnd(&w->r) : 0,
			.reserved = one_in(&w->r, 10) ? 1 : 0,
			.mmap_offset = one_in(&w->r, 10) ? rnd(&w->r) : 0,
		};

		if (w->live_bytes > w->max_alloc * 4 && fd == w->dev[di])
			break;
		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_ALLOC, &a, sizeof(a)) == 0 && fd == w->dev[di] &&
		    fd >= 0) {
			ok(OK_ALLOC);
			add_buf(w, di, &a);
		}
		break;
	}
	case 3: {
		struct strixpeer_buf_free f = { .handle = pick_handle(w, di),
						.flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_FREE, &f, sizeof(f)) == 0)
			for (int i = 0; i < NBUF; i++)
				if (w->b[i].live && w->b[i].dev == di && w->b[i].handle == f.handle)
					w->b[i].live = false;
		break;
	}
	case 4: {
		struct strixpeer_buf_info in = { .handle = pick_handle(w, di),
						 .flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		if (one_in(&w->r, 8))
			memset(&in.size, 0xa5, sizeof(in) - 8);
		fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_INFO, &in, sizeof(in));
		break;
	}
	case 5: {
		struct strixpeer_buf_export e = { .handle = pick_handle(w, di),
						  .flags = pick_flags(w, STRIXPEER_EXPORT_FLAGS),
						  .fd = (int)rnd(&w->r),
						  .reserved = one_in(&w->r, 10) };

		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_EXPORT, &e, sizeof(e)) == 0 && e.fd >= 0) {
			struct stat st;

			ok(OK_EXPORT);
			if (fstat(e.fd, &st) == 0)
				add_db(w, e.fd, (uint64_t)st.st_size, DB_EXPORT);
		}
		break;
	}
	case 6: {	/* IMPORT with a random dma-buf and range */
		int k = pick_db(w), s = (int)below(&w->r, NSLOT);
		uint64_t dsz = k >= 0 ? w->d[k].size : PAGE;
		struct strixpeer_import im = {
			.dmabuf_fd = k >= 0 && !one_in(&w->r, 10) ? w->d[k].fd :
				     (one_in(&w->r, 2) ? fd : (int)rnd(&w->r)),
			.flags = one_in(&w->r, 10) ? pick_flags(w, 0) : 0,
			.offset = one_in(&w->r, 4) ? pick_size(w) : below(&w->r, dsz / PAGE + 1) * PAGE,
			.length = one_in(&w->r, 4) ? pick_size(w) : (below(&w->r, dsz / PAGE) + 1) * PAGE,
			.va = (uintptr_t)slot_addr(w, s) + below(&w->r, 32) * PAGE,
		};

		if (im.offset + im.length > dsz && !one_in(&w->r, 4))
			im.length = dsz > im.offset ? dsz - im.offset : PAGE;
		switch (below(&w->r, 8)) {
		case 0: im.va = rnd(&w->r); break;
		case 1: im.va += below(&w->r, PAGE); break;
		case 2: im.va = (uintptr_t)scratch; break;
		default: break;
		}
		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_IMPORT, &im, sizeof(im)) == 0 && fd == w->dev[di] &&
		    (ok(OK_IMPORT), true))
			for (int i = 0; i < NIMP; i++)
				if (!w->im[i].live) {
					w->im[i] = (struct fimp){ .dev = di, .handle = im.handle, .live = true };
					break;
				}
		break;
	}
	case 7: {
		int i = (int)below(&w->r, NIMP);
		struct strixpeer_unimport u = { .handle = one_in(&w->r, 5) ? (uint32_t)rnd(&w->r) : w->im[i].handle,
						.flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_UNIMPORT, &u, sizeof(u)) == 0)
			for (int k = 0; k < NIMP; k++)
				if (w->im[k].live && w->im[k].dev == di && w->im[k].handle == u.handle)
					w->im[k].live = false;
		break;
	}
	case 8: {
		int i = (int)below(&w->r, NIMP);
		struct strixpeer_import_info ii = { .handle = one_in(&w->r, 5) ? (uint32_t)rnd(&w->r) : w->im[i].handle,
						    .flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		fuzz_ioctl(w, fd, STRIXPEER_IOC_IMPORT_INFO, &ii, sizeof(ii));
		break;
	}
	}
}

/* Unknown commands, other magics, random numbers: all must be refused cleanly. */
static void op_ioctl_garbage(struct wstate *w)
{
	int di = pick_dev(w), fd = w->dev[di];
	unsigned long cmd;
	char *p = scratch;

	switch (below(&w->r, 4)) {
	case 0:
		cmd = _IOC((unsigned int)below(&w->r, 4), STRIXPEER_IOC_MAGIC,
			   8 + (unsigned int)below(&w->r, 248), (unsigned int)below(&w->r, 512));
		break;
	case 1:
		cmd = known_cmds[below(&w->r, 8)] ^ (1UL << below(&w->r, 32));
		break;
	case 2:
		cmd = _IOC((unsigned int)below(&w->r, 4), (unsigned int)below(&w->r, 256),
			   (unsigned int)below(&w->r, 8), (unsigned int)below(&w->r, 64));
		break;
	default:
		cmd = rnd(&w->r);
		break;
	}
	for (int i = 0; i < 256; i++)
		p[i] = (char)rnd(&w->r);
	if (one_in(&w->r, 4))
		p = (char *)(uintptr_t)rnd(&w->r);
	count(C_IOCTL);
	ioctl(fd, cmd, p);
}

/* ---- mmap and friends ------------------------------------------------------ */

static void op_mmap(struct wstate *w)
{
	int s = (int)below(&w->r, NSLOT), bi = live_buf(w);
	char *a = slot_addr(w, s);
	uint64_t len, off;
	int prot, flags, fd;
	void *p;

	if (w->s[s].len && !one_in(&w->r, 4))
		slot_clear(w, s);
	if (bi < 0 && !one_in(&w->r, 4))
		return;
	fd = bi >= 0 ? w->dev[w->b[bi].dev] : w->dev[pick_dev(w)];
	len = bi >= 0 ? w->b[bi].size : 2 * MiB;
	off = bi >= 0 ? w->b[bi].cookie : 0;
	switch (below(&w->r, 10)) {
	case 0: len = pick_size(w); break;
	case 1: len = (below(&w->r, len / PAGE) + 1) * PAGE; break;
	case 2: off += below(&w->r, len / PAGE + 2) * PAGE; len = PAGE * (1 + below(&w->r, 8)); break;
	case 3: off = (uint64_t)below(&w->r, 64) << COOKIE_SHIFT; break;
	case 4: off = rnd(&w->r) & ~(PAGE - 1); break;
	case 5: off += below(&w->r, PAGE); break;
	case 6: len += PAGE; break;
	default: break;
	}
	if (len > SLOT_SZ || len == 0)
		len = len == 0 ? 0 : SLOT_SZ;
	prot = one_in(&w->r, 5) ? (int)below(&w->r, 8) : PROT_READ | PROT_WRITE;
	flags = one_in(&w->r, 6) ? MAP_PRIVATE : MAP_SHARED;
	if (one_in(&w->r, 8))
		flags |= MAP_POPULATE;
	if (one_in(&w->r, 10))
		flags |= MAP_LOCKED;
	count(C_MMAP);
	p = mmap(a, len, prot, flags | MAP_FIXED, fd, (off_t)off);
	if (p == MAP_FAILED) {
		/* a failed MAP_FIXED may have left the range unmapped: re-reserve */
		slot_clear(w, s);
		return;
	}
	ok(OK_MMAP);
	w->s[s].len = len;
	w->s[s].buf = bi;
	w->s[s].db = -1;
	/* touch a few pages: the first write of each page faults it in */
	for (int i = 0; i < 4; i++) {
		uint64_t o = below(&w->r, len / PAGE + 1) * PAGE;

		touch(a + (o < SLOT_SZ ? o : 0), one_in(&w->r, 2), (char)i);
	}
}

static void op_mm(struct wstate *w)
{
	int s = (int)below(&w->r, NSLOT);
	char *a = slot_addr(w, s);
	uint64_t len = w->s[s].len ? w->s[s].len : 2 * MiB;
	uint64_t o = below(&w->r, len / PAGE) * PAGE, l = (below(&w->r, 16) + 1) * PAGE;
	static const int advice[] = {
		MADV_DONTNEED, MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK, MADV_KEEPONFORK,
		MADV_FREE, MADV_REMOVE, MADV_COLD, MADV_PAGEOUT, MADV_HUGEPAGE, MADV_NOHUGEPAGE,
		MADV_WILLNEED, MADV_SEQUENTIAL, MADV_RANDOM, MADV_MERGEABLE, MADV_UNMERGEABLE,
		MADV_DONTDUMP, MADV_DODUMP, 22 /* POPULATE_READ */, 23 /* POPULATE_WRITE */,
		25 /* COLLAPSE */, 100, -1,
	};

	if (o + l > SLOT_SZ)
		l = SLOT_SZ - o;
	count(C_MMAP);
	switch (below(&w->r, 7)) {
	case 0:	/* partial munmap; re-reserve the hole so nothing else lands there */
		if (!munmap(a + o, l))
			reserve(a + o, l);
		break;
	case 1:
		mprotect(a + o, l, (int)below(&w->r, 8));
		break;
	case 2:
	case 3:
		madvise(a + o, l, advice[below(&w->r, sizeof(advice) / sizeof(advice[0]))]);
		break;
	case 4: {	/* mremap: shrink, grow in place, or move to another slot */
		int t = (int)below(&w->r, NSLOT);
		uint64_t nl = (below(&w->r, 2 * len / PAGE) + 1) * PAGE;
		void *p;

		if (nl > SLOT_SZ)
			nl = SLOT_SZ;
		if (t == s || one_in(&w->r, 2)) {
			p = mremap(a, len, nl, 0);
			if (p != MAP_FAILED) {
				if (nl < len)	/* the tail it gave up */
					reserve(a + nl, len - nl);
				w->s[s].len = nl;
			}
		} else {
			slot_clear(w, t);
			p = mremap(a, len, nl, MREMAP_MAYMOVE | MREMAP_FIXED, slot_addr(w, t));
			if (p != MAP_FAILED) {
				w->s[t] = w->s[s];
				w->s[t].len = nl;
				slot_clear(w, s);
			} else {	/* it may have unmapped the target first */
				slot_clear(w, t);
			}
		}
		break;
	}
	case 5:
		msync(a + o, l, one_in(&w->r, 2) ? MS_SYNC : MS_INVALIDATE);
		break;
	default:
		for (int i = 0; i < 8; i++)
			touch(a + below(&w->r, len / PAGE) * PAGE + below(&w->r, PAGE),
			      one_in(&w->r, 2), (char)rnd(&w->r));
		break;
	}
}

/* ---- dma-bufs ---------------------------------------------------------------- */

struct drm_create_dumb_ {
	uint32_t height, width, bpp, flags, handle, pitch;
	uint64_t size;
};

struct drm_prime_handle_ {
	uint32_t handle, flags;
	int32_t fd;
};

struct drm_gem_close_ {
	uint32_t handle, pad;
};

#define DRM_IOCTL_MODE_CREATE_DUMB_ _IOWR('d', 0xB2, struct drm_create_dumb_)
#define DRM_IOCTL_PRIME_HANDLE_TO_FD_ _IOWR('d', 0x2d, struct drm_prime_handle_)
#define DRM_IOCTL_PRIME_FD_TO_HANDLE_ _IOWR('d', 0x2e, struct drm_prime_handle_)
#define DRM_IOCTL_GEM_CLOSE_ _IOW('d', 0x09, struct drm_gem_close_)

/* vgem lets go of what it imported (its attachment goes with the last handle) */
static void gem_close(struct wstate *w, int i)
{
	struct drm_gem_close_ c = { .handle = w->gem[i] };

	if (w->gem[i] && w->vgem >= 0)
		ioctl(w->vgem, DRM_IOCTL_GEM_CLOSE_, &c);
	w->gem[i] = 0;
}

struct drm_version_ {
	int version_major, version_minor, version_patchlevel;
	size_t name_len;
	char *name;
	size_t date_len;
	char *date;
	size_t desc_len;
	char *desc;
};

#define DRM_IOCTL_VERSION_ _IOWR('d', 0x00, struct drm_version_)

/* The vgem card (DRM_IOCTL_VERSION names the driver), or -1. */
static int open_vgem(void)
{
	for (int i = 0; i < 16; i++) {
		char path[64], name[16] = "";
		struct drm_version_ v = { .name_len = sizeof(name) - 1, .name = name };
		int fd;

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (ioctl(fd, DRM_IOCTL_VERSION_, &v) == 0 && !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return -1;
}

static void op_dmabuf(struct wstate *w)
{
	count(C_DMABUF);
	switch (below(&w->r, 11)) {
	case 9: {	/* vgem imports a dma-buf: a device attaches and maps it (DMA-API debug watches) */
		int k = pick_db(w), g = (int)below(&w->r, 8);
		struct drm_prime_handle_ ph = { .flags = 0 };

		if (w->vgem < 0)
			return;
		if (one_in(&w->r, 3)) {	/* a second export of a buffer vgem may hold already */
			int bi = live_buf(w);
			struct strixpeer_buf_export e = { .flags = STRIXPEER_EXPORT_CLOEXEC };

			if (bi >= 0) {
				e.handle = w->b[bi].handle;
				if (ioctl(w->dev[w->b[bi].dev], STRIXPEER_IOC_BUF_EXPORT, &e) == 0) {
					ok(OK_EXPORT);
					k = add_db(w, e.fd, w->b[bi].size, DB_EXPORT);
				}
			}
		}
		if (k < 0 || w->d[k].fd < 0)
			return;
		gem_close(w, g);
		ph.fd = w->d[k].fd;
		if (ioctl(w->vgem, DRM_IOCTL_PRIME_FD_TO_HANDLE_, &ph) == 0) {
			ok(OK_ATTACH);
			for (int i = 0; i < 8; i++)	/* the same dma-buf again: the same handle */
				if (w->gem[i] == ph.handle)
					return;
			w->gem[g] = ph.handle;
		}
		break;
	}
	case 10:
		gem_close(w, (int)below(&w->r, 8));
		break;
	case 0:
	case 1: {	/* export a live buffer, sane flags mostly */
		int bi = live_buf(w);
		struct strixpeer_buf_export e = { .flags = (uint32_t)below(&w->r, 4) };

		if (bi < 0)
			return;
		e.handle = w->b[bi].handle;
		if (ioctl(w->dev[w->b[bi].dev], STRIXPEER_IOC_BUF_EXPORT, &e) == 0) {
			ok(OK_EXPORT);
			add_db(w, e.fd, w->b[bi].size, DB_EXPORT);
		}
		break;
	}
	case 2: {	/* udmabuf from a sealed memfd */
		uint64_t sz = (below(&w->r, 64) + 1) * PAGE;
		int mfd;
		struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC };

		if (w->udmabuf < 0)
			return;
		mfd = memfd_create("fuzz", MFD_ALLOW_SEALING | MFD_CLOEXEC);
		if (mfd < 0)
			return;
		if (ftruncate(mfd, (off_t)sz) == 0 && fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
			int fd;

			c.memfd = (uint32_t)mfd;
			c.size = one_in(&w->r, 6) ? sz + PAGE : sz;
			fd = ioctl(w->udmabuf, UDMABUF_CREATE, &c);
			if (fd >= 0)
				add_db(w, fd, sz, DB_UDMABUF);
		}
		close(mfd);
		break;
	}
	case 3: {	/* the system dma-heap */
		struct dma_heap_allocation_data h = { .len = (below(&w->r, 64) + 1) * PAGE,
						      .fd_flags = O_RDWR | O_CLOEXEC };

		if (w->heap >= 0 && ioctl(w->heap, DMA_HEAP_IOCTL_ALLOC, &h) == 0)
			add_db(w, (int)h.fd, h.len, DB_HEAP);
		break;
	}
	case 4: {	/* vgem dumb buffer, PRIME-exported */
		struct drm_create_dumb_ c = { .height = (uint32_t)(1 + below(&w->r, 16)), .width = 1024, .bpp = 32 };
		struct drm_prime_handle_ ph = { .flags = O_RDWR | O_CLOEXEC };

		if (w->vgem < 0 || ioctl(w->vgem, DRM_IOCTL_MODE_CREATE_DUMB_, &c))
			return;
		ph.handle = c.handle;
		if (ioctl(w->vgem, DRM_IOCTL_PRIME_HANDLE_TO_FD_, &ph) == 0)
			add_db(w, ph.fd, c.size, DB_VGEM);
		break;
	}
	case 5: {	/* mmap a dma-buf into a slot */
		int k = pick_db(w), s = (int)below(&w->r, NSLOT);
		uint64_t len, off = 0;
		void *p;

		if (k < 0)
			return;
		slot_clear(w, s);
		len = w->d[k].size;
		if (one_in(&w->r, 4))
			len = (below(&w->r, len / PAGE + 2) + 1) * PAGE;
		if (one_in(&w->r, 4))
			off = below(&w->r, w->d[k].size / PAGE + 2) * PAGE;
		if (len > SLOT_SZ)
			len = SLOT_SZ;
		p = mmap(slot_addr(w, s), len, one_in(&w->r, 4) ? PROT_READ : PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, w->d[k].fd, (off_t)off);
		if (p == MAP_FAILED) {
			slot_clear(w, s);
			return;
		}
		w->s[s].len = len;
		w->s[s].db = k;
		touch(p, one_in(&w->r, 2), 1);
		break;
	}
	case 6: {	/* DMA_BUF_IOCTL_SYNC, valid pairs mostly */
		int k = pick_db(w);
		struct dma_buf_sync sync = { .flags = below(&w->r, 4) };

		if (k < 0)
			return;
		if (one_in(&w->r, 5))
			sync.flags = rnd(&w->r);
		else
			sync.flags |= one_in(&w->r, 2) ? DMA_BUF_SYNC_START : DMA_BUF_SYNC_END;
		/*
		 * 6.12's udmabuf maps its sg table with the direction of the first
		 * begin_cpu_access and syncs later ones with theirs: DMA-API debug
		 * warns ("syncs DMA memory with different direction", seen with
		 * seed 0x1, phase user). Not strixpeer's: one direction there.
		 */
		if (w->d[k].kind == DB_UDMABUF)
			sync.flags = DMA_BUF_SYNC_RW | (sync.flags & DMA_BUF_SYNC_END);
		ioctl(w->d[k].fd, DMA_BUF_IOCTL_SYNC, &sync);
		break;
	}
	case 7: {	/* an import of a dma-buf at the VA where it is mapped, mostly sane */
		int s = (int)below(&w->r, NSLOT), di = pick_dev(w);
		struct strixpeer_import im = { 0 };

		if (w->s[s].db < 0 || w->dev[di] < 0 || w->d[w->s[s].db].fd < 0)
			return;
		im.dmabuf_fd = w->d[w->s[s].db].fd;
		im.length = w->s[s].len;
		if (im.length > w->d[w->s[s].db].size)
			im.length = w->d[w->s[s].db].size;
		im.va = (uintptr_t)slot_addr(w, s);
		if (one_in(&w->r, 3) && im.length > PAGE) {
			uint64_t cut = below(&w->r, im.length / PAGE) * PAGE;

			im.offset = cut;
			im.va += cut;
			im.length -= cut;
		}
		if (ioctl(w->dev[di], STRIXPEER_IOC_IMPORT, &im) == 0 && (ok(OK_IMPORT), true))
			for (int i = 0; i < NIMP; i++)
				if (!w->im[i].live) {
					w->im[i] = (struct fimp){ .dev = di, .handle = im.handle, .live = true };
					break;
				}
		break;
	}
	default: {	/* close a dma-buf fd (imports and mappings may still hold it) */
		int k = pick_db(w);

		if (k >= 0) {
			close(w->d[k].fd);
			w->d[k].fd = -1;
		}
		break;
	}
	}
}

/* ---- netlink ----------------------------------------------------------------- */

static void add_random_attrs(struct wstate *w, struct nlmsg *m, int depth)
{
	int n = (int)below(&w->r, 6);

	for (int i = 0; i < n; i++) {
		uint16_t type = (uint16_t)(one_in(&w->r, 3) ? rnd(&w->r) : below(&w->r, 24));
		char data[64];
		size_t len = (size_t)below(&w->r, sizeof(data));

		for (size_t k = 0; k < len; k++)
			data[k] = (char)rnd(&w->r);
		if (one_in(&w->r, 8))
			type |= NLA_F_NESTED;
		switch (below(&w->r, 8)) {
		case 0:	/* nested garbage */
			if (depth < 3) {
				size_t start = m->len;
				struct nlattr *a;

				nl_put(m, type | NLA_F_NESTED, NULL, 0);
				add_random_attrs(w, m, depth + 1);
				a = (struct nlattr *)(m->b + start);
				a->nla_len = (uint16_t)(m->len - start);
				if (one_in(&w->r, 4))
					a->nla_len = (uint16_t)(a->nla_len + below(&w->r, 64));
			}
			break;
		case 1:	/* a length that lies */
			nl_put_raw(m, type, (uint16_t)below(&w->r, 200), data, len);
			break;
		case 2:	/* a well-formed value of each common width */
		case 3: {
			static const size_t widths[] = { 0, 1, 2, 4, 8, 3, 16 };

			nl_put(m, (uint16_t)below(&w->r, 24), data, widths[below(&w->r, 7)]);
			break;
		}
		default:
			nl_put(m, type, data, len);
			break;
		}
	}
}

static void op_netlink(struct wstate *w)
{
	struct nlmsg m;
	int fd;
	uint8_t cmd;
	uint16_t flags = NLM_F_REQUEST;

	count(C_NETLINK);
	if (!sp_family)
		return;
	if (w->nl < 0)
		w->nl = nl_socket_t(100);
	fd = w->nl;
	if (fd < 0)
		return;
	switch (below(&w->r, 12)) {
	case 0: {	/* join (or leave) "events", read what is there */
		int grp = (int)sp_events_group, ret;
		bool leave;

		if (w->nl_ev < 0)
			w->nl_ev = nl_socket_t(100);
		if (w->nl_ev < 0)
			return;
		leave = one_in(&w->r, 4);
		ret = setsockopt(w->nl_ev, SOL_NETLINK, leave ? NETLINK_DROP_MEMBERSHIP :
				 NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp));
		/* leaving needs no privilege: only joins count */
		if (!w->priv && !leave)
			__atomic_add_fetch(ret == 0 ? &sh->events_joined : &sh->events_refused, 1,
					   __ATOMIC_RELAXED);
		for (int i = 0; i < 32; i++) {
			char b[8192];

			if (recv(w->nl_ev, b, sizeof(b), MSG_DONTWAIT) <= 0)
				break;
		}
		return;
	}
	case 1: {	/* config-set: valid values as root (restored later), anything as nobody */
		struct config c;
		uint64_t v64 = pick_size(w);
		uint32_t v32 = pick_node(w);
		uint8_t v8 = (uint8_t)below(&w->r, 3);
		int ret;

		nl_begin(&m, sp_family, NLM_F_REQUEST | NLM_F_ACK, STRIXPEER_CMD_CONFIG_SET,
			 STRIXPEER_GENL_VERSION);
		if (w->priv && have_cfg && one_in(&w->r, 3)) {
			config_set(&base_cfg);	/* back to the start's */
			return;
		}
		if (w->priv && config_get(&c) == 0 && one_in(&w->r, 2)) {
			/* a sane change that keeps the phase able to work */
			switch (below(&w->r, 4)) {
			case 0: v64 = (below(&w->r, 64) + 1) * MiB; nl_put(&m, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &v64, 8); break;
			case 1: v64 = below(&w->r, 2) * (below(&w->r, 256) + 1) * MiB; nl_put(&m, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES, &v64, 8); break;
			case 2: v32 = (uint32_t)below(&w->r, 3) - 1; nl_put(&m, STRIXPEER_A_CONFIG_DEFAULT_NODE, &v32, 4); break;
			default: v8 = (uint8_t)below(&w->r, 2); nl_put(&m, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &v8, 1); break;
			}
		} else {
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_MAX_BUF_SIZE, &v64, one_in(&w->r, 4) ? 4 : 8);
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_MAX_PINNED_BYTES, &v64, 8);
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_DEFAULT_NODE, &v32, one_in(&w->r, 4) ? 8 : 4);
			if (one_in(&w->r, 2))
				nl_put(&m, STRIXPEER_A_CONFIG_REQUIRE_HUGE, &v8, 1);
			if (one_in(&w->r, 3))
				add_random_attrs(w, &m, 0);
		}
		if (nl_send(fd, &m) < 0)
			return;
		ret = nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 0);
		if (!w->priv && ret == 0)
			__atomic_add_fetch(&sh->cfgset_accepted, 1, __ATOMIC_RELAXED);
		return;
	}
	case 2:
	case 3: {	/* a dump: read all, some, or nothing (then abandon the socket) */
		int mode = (int)below(&w->r, 3);
		uint32_t pid = one_in(&w->r, 2) ? (uint32_t)getpid() : (uint32_t)below(&w->r, 4);

		nl_begin(&m, sp_family, NLM_F_REQUEST | NLM_F_DUMP, STRIXPEER_CMD_BUF_GET,
			 STRIXPEER_GENL_VERSION);
		if (one_in(&w->r, 2))
			nl_put(&m, STRIXPEER_A_BUF_PID, &pid, 4);
		if (one_in(&w->r, 4))
			add_random_attrs(w, &m, 0);
		if (nl_send(fd, &m) < 0)
			return;
		if (mode == 0) {
			nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 0);
		} else {
			if (mode == 1)
				nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 1);
			close(fd);	/* a dump interrupted */
			w->nl = -1;
		}
		return;
	}
	default:
		break;
	}
	/* any command, do or dump, valid or garbage attributes, version, header */
	cmd = (uint8_t)(one_in(&w->r, 4) ? rnd(&w->r) : below(&w->r, STRIXPEER_CMD_MAX + 2));
	if (one_in(&w->r, 3))
		flags |= NLM_F_DUMP;
	if (one_in(&w->r, 2))
		flags |= NLM_F_ACK;
	if (one_in(&w->r, 10))
		flags = (uint16_t)rnd(&w->r) | NLM_F_REQUEST;
	nl_begin(&m, one_in(&w->r, 20) ? (uint16_t)rnd(&w->r) : sp_family, flags, cmd,
		 one_in(&w->r, 8) ? (uint8_t)rnd(&w->r) : STRIXPEER_GENL_VERSION);
	if (cmd == STRIXPEER_CMD_BUF_GET && !(flags & NLM_F_DUMP) && one_in(&w->r, 2)) {
		uint32_t id = (uint32_t)below(&w->r, 64);

		nl_put(&m, STRIXPEER_A_BUF_ID, &id, 4);
	}
	if (one_in(&w->r, 2))
		add_random_attrs(w, &m, 0);
	if (one_in(&w->r, 16)) {	/* the header lies about the length */
		m.h.nlmsg_len = (uint32_t)below(&w->r, m.len + 64);
		sendto(fd, m.b, m.len, 0, NULL, 0);
	} else if (nl_send(fd, &m) < 0) {
		return;
	}
	if (one_in(&w->r, 6)) {	/* leave the answers unread */
		close(fd);
		w->nl = -1;
		return;
	}
	nl_recv(fd, m.h.nlmsg_seq, NULL, NULL, 8);
}

/* ---- processes and fds ------------------------------------------------------------ */

static void run_ops(struct wstate *w, unsigned long n);

static void reap_kids(struct wstate *w, bool block)
{
	for (int i = 0; i < NKIDS; i++) {
		if (w->kids[i] <= 0)
			continue;
		if (block) {	/* the end of the phase: kill -9 once more */
			kill(w->kids[i], SIGKILL);
			waitpid(w->kids[i], NULL, 0);
			w->kids[i] = 0;
		} else if (waitpid(w->kids[i], NULL, WNOHANG) != 0) {
			w->kids[i] = 0;
		}
	}
}

static int kid_slot(struct wstate *w)
{
	reap_kids(w, false);
	for (int i = 0; i < NKIDS; i++)
		if (w->kids[i] == 0)
			return i;
	return -1;
}

/* The exec chain: argv = exe --exec-child SEED DEPTH; fds inherited. */
static int exec_child(uint64_t seed, int depth)
{
	struct rng r = { seed };
	struct strixpeer_buf_alloc a = { .node = STRIXPEER_NODE_DEFAULT };
	int fd, inherited = 0;
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;

	/* every inherited fd: the device ones must refuse us (EACCES), dma-bufs work */
	while (dir && (e = readdir(dir))) {
		int f = atoi(e->d_name);
		struct strixpeer_version v;

		if (f > 2 && f != dirfd(dir) && ioctl(f, STRIXPEER_IOC_VERSION, &v) == 0)
			inherited++;
	}
	if (dir)
		closedir(dir);
	fd = open(dev_path, O_RDWR);	/* not CLOEXEC: the next image inherits it */
	a.size = (below(&r, 2) + 1) * 2 * MiB;
	if (fd >= 0 && ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a) == 0) {
		struct strixpeer_buf_export ex = { .handle = a.handle, .flags = STRIXPEER_EXPORT_RDWR };

		if (one_in(&r, 2))
			mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)a.mmap_offset);
		ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &ex);	/* not CLOEXEC */
	}
	if (depth > 0) {
		char s[32], d[16];

		snprintf(s, sizeof(s), "%" PRIu64, rnd(&r));
		snprintf(d, sizeof(d), "%d", depth - 1);
		execl(self_exe, self_exe, "--exec-child", s, d, (char *)NULL);
	}
	usleep((useconds_t)below(&r, 300000));
	(void)inherited;
	return 0;
}

struct thr {
	int fd;
	uint64_t seed;
	uint32_t handles[8];
};

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	struct rng r = { t->seed };
	uint32_t mine[8];
	int nmine = 0;

	for (int i = 0; i < 16; i++) {
		uint32_t h = one_in(&r, 2) && nmine ? mine[below(&r, (uint64_t)nmine)] : t->handles[below(&r, 8)];

		switch (below(&r, 6)) {
		case 0: {
			struct strixpeer_buf_alloc a = { .size = (below(&r, 512) + 1) * PAGE,
							 .node = STRIXPEER_NODE_DEFAULT };

			if (nmine < 8 && ioctl(t->fd, STRIXPEER_IOC_BUF_ALLOC, &a) == 0)
				mine[nmine++] = a.handle;
			break;
		}
		case 1: {
			struct strixpeer_buf_free f = { .handle = h };

			ioctl(t->fd, STRIXPEER_IOC_BUF_FREE, &f);
			break;
		}
		case 2: {
			struct strixpeer_buf_info in = { .handle = h };

			if (ioctl(t->fd, STRIXPEER_IOC_BUF_INFO, &in) == 0 && in.size && in.size <= 64 * MiB) {
				char *p = mmap(NULL, in.size, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd,
					       (off_t)in.mmap_offset);

				if (p != MAP_FAILED) {
					touch(p, true, 1);
					munmap(p, in.size);
				}
			}
			break;
		}
		case 3: {
			struct strixpeer_buf_export e = { .handle = h, .flags = STRIXPEER_EXPORT_CLOEXEC };

			if (ioctl(t->fd, STRIXPEER_IOC_BUF_EXPORT, &e) == 0)
				close(e.fd);
			break;
		}
		case 4: {
			struct strixpeer_unimport u = { .handle = (uint32_t)below(&r, 8) };

			ioctl(t->fd, STRIXPEER_IOC_UNIMPORT, &u);
			break;
		}
		default:
			sched_yield();
			break;
		}
		__atomic_add_fetch(&sh->calls[C_IOCTL], 1, __ATOMIC_RELAXED);
	}
	for (int i = 0; i < nmine; i++) {
		struct strixpeer_buf_free f = { .handle = mine[i] };

		ioctl(t->fd, STRIXPEER_IOC_BUF_FREE, &f);
	}
	return NULL;
}

static const char *const proc_kind_name[9] = {
	"fork", "fork", "kill-9", "exec", "scm_rights", "threads", "threads", "close", "open"
};
static int proc_kind;

static void op_proc(struct wstate *w)
{
	int k;

	count(C_PROC);
	proc_kind = (int)below(&w->r, 9);
	switch (proc_kind) {
	case 0:
	case 1: {	/* fork: the child uses the inherited fds, maps, handles, then exits or is killed */
		uint64_t seed = rnd(&w->r);
		bool kill_it = one_in(&w->r, 2);
		unsigned int delay = (unsigned int)below(&w->r, 40000);
		pid_t pid;

		k = kid_slot(w);
		if (k < 0)
			return;
		pid = fork();
		if (pid > 0)
			ok(OK_FORK);
		if (pid == 0) {
			w->r.s = seed;
			w->deadline = now() + 1.5;
			/* its own allocations only: bounded, whatever it inherited */
			w->live_bytes = 0;
			w->max_alloc = w->max_alloc < 4 * MiB ? w->max_alloc : 4 * MiB;
			for (int i = 0; i < NKIDS; i++)
				w->kids[i] = 0;
			run_ops(w, 40);
			_exit(0);
		}
		if (pid > 0) {
			w->kids[k] = pid;
			if (kill_it) {
				usleep(delay);
				kill(pid, SIGKILL);
			}
		}
		return;
	}
	case 2: {	/* kill -9 in the middle of alloc/map/export/import */
		unsigned int delay = (unsigned int)below(&w->r, 30000);
		uint64_t seed = rnd(&w->r);
		pid_t pid;

		k = kid_slot(w);
		if (k < 0)
			return;
		pid = fork();
		if (pid == 0) {
			struct rng r = { seed };
			int fd = open(dev_path, O_RDWR | O_CLOEXEC);

			for (int i = 0; i < 12 && fd >= 0; i++) {
				struct strixpeer_buf_alloc a = { .size = (below(&r, 4) + 1) * MiB,
								 .node = STRIXPEER_NODE_DEFAULT };
				struct strixpeer_buf_export e = { .flags = STRIXPEER_EXPORT_RDWR };
				char *p;

				if (ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a))
					continue;
				p = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
					 (off_t)a.mmap_offset);
				e.handle = a.handle;
				if (ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e) == 0 && p != MAP_FAILED) {
					struct strixpeer_import im = { .dmabuf_fd = e.fd, .length = a.size,
								       .va = (uintptr_t)p };
					struct strixpeer_buf_free f = { .handle = a.handle };

					munmap(p, a.size);
					p = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
					if (p != MAP_FAILED) {
						im.va = (uintptr_t)p;
						ioctl(fd, STRIXPEER_IOC_IMPORT, &im);
					}
					if (one_in(&r, 2))
						ioctl(fd, STRIXPEER_IOC_BUF_FREE, &f);
					if (one_in(&r, 2))
						close(e.fd);
				}
			}
			_exit(0);
		}
		if (pid > 0) {
			usleep(delay);
			kill(pid, SIGKILL);
			w->kids[k] = pid;
		}
		return;
	}
	case 3: {	/* execve chains carrying non-CLOEXEC fds */
		char s[32], d[16];
		pid_t pid;

		k = kid_slot(w);
		if (k < 0 || !self_exe[0])
			return;
		snprintf(s, sizeof(s), "%" PRIu64, rnd(&w->r));
		snprintf(d, sizeof(d), "%d", (int)below(&w->r, 5));
		pid = fork();
		if (pid == 0) {
			execl(self_exe, self_exe, "--exec-child", s, d, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			w->kids[k] = pid;
		return;
	}
	case 4: {	/* SCM_RIGHTS: the device fd and dma-bufs to a child */
		int sv[2], fds[4], n = 0;
		pid_t pid;

		k = kid_slot(w);
		if (k < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			return;
		pid = fork();
		if (pid == 0) {
			char b[1], cbuf[CMSG_SPACE(sizeof(int) * 4)];
			struct iovec iov = { b, 1 };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
					     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
			struct cmsghdr *c;
			int myfd = open(dev_path, O_RDWR | O_CLOEXEC);

			close(sv[0]);
			if (recvmsg(sv[1], &mh, 0) <= 0)
				_exit(0);
			for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
				int nf = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				int *got = (int *)CMSG_DATA(c);

				for (int i = 0; i < nf; i++) {
					struct strixpeer_buf_alloc a = { .size = 2 * MiB, .node = STRIXPEER_NODE_DEFAULT };
					struct stat st;
					char *p;

					ioctl(got[i], STRIXPEER_IOC_BUF_ALLOC, &a);	/* a passed device fd: EACCES */
					if (fstat(got[i], &st) || st.st_size <= 0 || st.st_size > (off_t)SLOT_SZ)
						continue;
					p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, got[i], 0);
					if (p == MAP_FAILED)
						continue;
					touch(p, true, 2);
					if (myfd >= 0) {
						struct strixpeer_import im = { .dmabuf_fd = got[i],
									       .length = (uint64_t)st.st_size,
									       .va = (uintptr_t)p };

						ioctl(myfd, STRIXPEER_IOC_IMPORT, &im);
					}
				}
			}
			usleep(20000);
			_exit(0);
		}
		close(sv[1]);
		if (pid > 0) {
			char b[1] = { 0 }, cbuf[CMSG_SPACE(sizeof(int) * 4)];
			struct iovec iov = { b, 1 };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
			struct cmsghdr *c;

			w->kids[k] = pid;
			if (w->dev[0] >= 0)
				fds[n++] = w->dev[0];
			for (int i = 0; i < 3; i++) {
				int j = pick_db(w);

				if (j >= 0)
					fds[n++] = w->d[j].fd;
			}
			if (n) {
				memset(cbuf, 0, sizeof(cbuf));
				mh.msg_control = cbuf;
				mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
				c = CMSG_FIRSTHDR(&mh);
				c->cmsg_level = SOL_SOCKET;
				c->cmsg_type = SCM_RIGHTS;
				c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
				memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
			}
			sendmsg(sv[0], &mh, MSG_NOSIGNAL);
			if (one_in(&w->r, 3)) {
				usleep((useconds_t)below(&w->r, 20000));
				kill(pid, SIGKILL);
			}
		}
		close(sv[0]);
		return;
	}
	case 5:
	case 6: {	/* threads sharing one fd; maybe a close racing them */
		int di = pick_dev(w), nt = 2 + (int)below(&w->r, 2);
		pthread_t th[3];
		struct thr t[3];
		bool close_race = one_in(&w->r, 6);

		if (w->dev[di] < 0)
			return;
		for (int i = 0; i < nt; i++) {
			t[i].fd = w->dev[di];
			t[i].seed = rnd(&w->r);
			for (int j = 0; j < 8; j++)
				t[i].handles[j] = pick_handle(w, di);
			if (pthread_create(&th[i], NULL, thread_main, &t[i]))
				nt = i;
		}
		if (close_race) {
			usleep((useconds_t)below(&w->r, 2000));
			close_dev(w, di);
		}
		for (int i = 0; i < nt; i++)
			pthread_join(th[i], NULL);
		/* a thread may have freed any buffer: forget those the kernel no longer knows */
		for (int i = 0; i < NBUF; i++) {
			struct strixpeer_buf_info in = { .handle = w->b[i].handle };

			if (w->b[i].live && w->b[i].dev == di &&
			    ioctl(w->dev[di], STRIXPEER_IOC_BUF_INFO, &in))
				w->b[i].live = false;
		}
		return;
	}
	case 7:	/* close a device fd with its mappings and exports alive */
		close_dev(w, (int)below(&w->r, NDEV));
		return;
	default:	/* open another */
		k = (int)below(&w->r, NDEV);
		if (w->dev[k] < 0)
			w->dev[k] = open(dev_path, O_RDWR | O_CLOEXEC);
		return;
	}
}

/* ---- the worker's loop --------------------------------------------------- */

static void run_ops(struct wstate *w, unsigned long n)
{
	for (unsigned long i = 0; !n || i < n; i++) {
		unsigned long op;

		if (now() > w->deadline)
			break;
		op = __atomic_add_fetch(&sh->op, 1, __ATOMIC_RELAXED);
		if (opt_ops && op > opt_ops)
			break;
		if (w->live_bytes > 4 * w->max_alloc || one_in(&w->r, 400))
			reset_all(w);
		double t = now();
		enum cat c;

		switch (below(&w->r, 20)) {
		case 0: case 1: case 2: case 3: case 4: case 5: op_ioctl(w); c = C_IOCTL; break;
		case 6: op_ioctl_garbage(w); c = C_IOCTL; break;
		case 7: case 8: case 9: op_mmap(w); c = C_MMAP; break;
		case 10: case 11: op_mm(w); c = C_MMAP; break;
		case 12: case 13: case 14: case 15: op_dmabuf(w); c = C_DMABUF; break;
		case 16: case 17: op_netlink(w); c = C_NETLINK; break;
		default: op_proc(w); c = C_PROC; break;	/* the slowest: fork, threads */
		}
		if (getpid() == worker_pid) {
			unsigned long us = (unsigned long)((now() - t) * 1e6);

			__atomic_add_fetch(&sh->usec[c], us, __ATOMIC_RELAXED);
			if (c == C_PROC)
				__atomic_add_fetch(&sh->proc_usec[proc_kind], us, __ATOMIC_RELAXED);
		}
	}
}

static void worker(const char *phase, uint64_t seed, double seconds)
{
	struct wstate w;
	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_NODEFER | SA_SIGINFO | SA_ONSTACK };
	static char altstack[65536];
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	char *base;

	memset(&w, 0, sizeof(w));
	worker_pid = getpid();
	w.r.s = seed;
	w.priv = !strstr(phase, "user");
	w.faults = !strncmp(phase, "fault-", 6);
	w.max_alloc = w.priv ? 32 * MiB : opt_memlock;
	w.deadline = now() + seconds;
	w.nl = w.nl_ev = -1;
	for (int i = 0; i < NDEV; i++)
		w.dev[i] = -1;
	for (int i = 0; i < NDB; i++)
		w.d[i].fd = -1;
	/* a signal stack faulted in before any injection: frames never need a new page */
	memset(altstack, 1, sizeof(altstack));
	sigaltstack(&ss, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	scratch_init();
	base = mmap(NULL, (NSLOT + 1) * SLOT_SZ, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		_exit(3);
	w.arena = (char *)(((uintptr_t)base + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	arena_lo = w.arena;
	arena_hi = w.arena + (size_t)NSLOT * SLOT_SZ;
	for (int i = 0; i < NSLOT; i++)
		slot_clear(&w, i);
	/* exporters: opened as root, kept after dropping privileges (a GPU job) */
	w.udmabuf = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	w.heap = open("/dev/dma_heap/system", O_RDWR | O_CLOEXEC);
	w.vgem = open_vgem();
	if (w.udmabuf < 0 || w.heap < 0 || w.vgem < 0)
		printf("fuzz: %s: exporters absent:%s%s%s\n", phase, w.udmabuf < 0 ? " udmabuf" : "",
		       w.heap < 0 ? " dma-heap" : "", w.vgem < 0 ? " vgem" : "");
	close(kmsg);
	/* before dropping privileges: /proc/self/ is root's afterwards; inherited by children */
	if (w.faults && !write_file("/proc/self/make-it-fail", "1"))
		wreport("cannot write /proc/self/make-it-fail: %s", strerror(errno));
	if (!w.priv) {
		struct rlimit rl = { opt_memlock, opt_memlock };

		int tries = 0;

		/* under fault injection these may fail (ENOMEM): try again */
		while (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
		       setresgid(opt_uid, opt_uid, opt_uid) || setresuid(opt_uid, opt_uid, opt_uid)) {
			if (++tries > 1000 || (errno != ENOMEM && errno != EAGAIN)) {
				wreport("worker could not drop privileges: %s", strerror(errno));
				_exit(3);
			}
		}
	}
	run_ops(&w, 0);
	reap_kids(&w, true);
	if (w.faults)
		write_file("/proc/self/make-it-fail", "0");
	reset_all(&w);
	_exit(0);
}

/* ---- the supervisor: phases, oracle, reports ------------------------------ */

struct report {
	char phase[32];
	uint64_t seed;
	unsigned long op;
	char msg[512];
};

#define MAX_REPORTS 64
static struct report reports[MAX_REPORTS];
static int nreports;
static const char *cur_phase = "setup";
static uint64_t cur_seed;

__attribute__((format(printf, 1, 2)))
static void report(const char *fmt, ...)
{
	struct report *r;
	va_list ap;

	nreports++;
	if (nreports > MAX_REPORTS)
		return;
	r = &reports[nreports - 1];
	snprintf(r->phase, sizeof(r->phase), "%s", cur_phase);
	r->seed = cur_seed;
	r->op = sh ? sh->op : 0;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	printf("fuzz: REPORT [%s, seed %#" PRIx64 ", op %lu] %s\n", r->phase, opt_seed, r->op, r->msg);
	fflush(stdout);
}

/* Kernel log records since the last call; complaints become reports. */
static unsigned long injected_warnings, injected_kills;

static void check_kmsg(bool fault_phase)
{
	static const char *const bad[] = {
		"BUG:", "WARNING:", "Oops", "KASAN", "UBSAN", "possible circular locking",
		"possible recursive locking", "DMA-API", "refcount_t", "general protection",
		"Call Trace", "unreferenced object", "kernel BUG", "list_add corruption",
		"list_del corruption", "INFO: task", "watchdog: BUG",
	};
	static bool in_alloc_warning;
	char rec[2048], first[600] = "";
	int lines = 0;

	if (kmsg < 0)
		return;
	for (;;) {
		ssize_t n = read(kmsg, rec, sizeof(rec) - 1);
		char *msg;

		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on */
		if (n <= 0)
			break;
		rec[n] = 0;
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		msg[strcspn(msg, "\n")] = 0;
		/*
		 * DMA-API debug's own bookkeeping allocates (GFP_ATOMIC) inside
		 * dma_map_*(): an injected failure there makes it say
		 * "cacheline tracking ENOMEM, dma-debug disabled" and switch
		 * itself off - the fault injection's doing, not a bug.
		 */
		if (strstr(msg, "page allocation failure") || strstr(msg, "vmalloc error") ||
		    strstr(msg, "FAULT_INJECTION") ||
		    (fault_phase && strstr(msg, "cacheline tracking ENOMEM"))) {
			in_alloc_warning = fault_phase;
			if (fault_phase) {
				injected_warnings++;
				continue;
			}
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (!strstr(msg, bad[i]))
				continue;
			if (in_alloc_warning && !strcmp(bad[i], "Call Trace"))
				break;
			if (strcmp(bad[i], "Call Trace"))
				in_alloc_warning = false;
			if (!lines++)
				snprintf(first, sizeof(first), "%.400s", msg);
			break;
		}
	}
	if (lines)
		report("kernel log: %s (%d complaining lines in all: see dmesg)", first, lines);
}

/* The objects kmemleak lists now (after a scan when @scan). */
static char *kmemleak_list(bool scan)
{
	const char *path = "/sys/kernel/debug/kmemleak";
	size_t cap = 1 << 20, len = 0;
	char *b = calloc(1, cap);
	int fd;
	ssize_t n;

	if (!b)
		return NULL;
	if (scan) {
		write_file(path, "scan");
		sleep(1);
		write_file(path, "scan");
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(b);
		return NULL;
	}
	while (len < cap - 1 && (n = read(fd, b + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	return b;
}

static void kmemleak_compare(const char *before, const char *after)
{
	const char *p = after;
	int found = 0;

	while ((p = strstr(p, "unreferenced object "))) {
		char obj[64];
		const char *e = strchr(p, '(');

		snprintf(obj, sizeof(obj), "%.*s", (int)(e && e - p < 60 ? e - p : 40), p);
		if (!before || !strstr(before, obj)) {
			const char *bt = strstr(p, "backtrace:");
			char what[200] = "";

			if (bt) {
				const char *l = strchr(bt, '\n');

				if (l)
					snprintf(what, sizeof(what), "%.*s", (int)strcspn(l + 1, "\n"), l + 1);
			}
			if (found++ < 4)
				report("kmemleak: %s- first frame: %s", obj, what);
		}
		p += 20;
	}
}

/* Fault injection: configure or disable; returns the "times" left (or -1). */
#define FI_TIMES 100000000LL
static const char *const fi_dirs[] = { "/sys/kernel/debug/failslab", "/sys/kernel/debug/fail_page_alloc" };

static void faults_setup(bool on)
{
	char path[128];

	for (int i = 0; i < 2; i++) {
		const char *d = fi_dirs[i];

#define FI(attr, v) (snprintf(path, sizeof(path), "%s/" attr, d), write_file(path, v))
		if (!on) {
			FI("probability", "0");
			continue;
		}
		FI("task-filter", "Y");
		FI("verbose", "0");
		FI("interval", "1");
		FI("space", "0");
		FI("ignore-gfp-wait", "N");
		FI("ignore-gfp-highmem", "N");
		FI("min-order", "0");
		FI("cache-filter", "N");
		FI("probability", i == 0 ? "3" : "2");
		snprintf(path, sizeof(path), "%s/times", d);
		{
			char v[32];

			snprintf(v, sizeof(v), "%lld", FI_TIMES);
			write_file(path, v);
		}
#undef FI
	}
}

static long long faults_injected(void)
{
	long long n = 0;
	char path[128];

	for (int i = 0; i < 2; i++) {
		long long left;

		snprintf(path, sizeof(path), "%s/times", fi_dirs[i]);
		left = read_ll(path);
		if (left >= 0 && left <= FI_TIMES)
			n += FI_TIMES - left;
	}
	return n;
}

static long long sysfs_stat(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/misc/strixpeer/stats/%s", name);
	return read_ll(path);
}

/* Every counter back to zero, waiting up to 10 s for deferred releases. */
static void check_counters(void)
{
	int64_t v[S_N];
	long long sb = -1, sp = -1;
	double t = now() + 10;
	bool zero = false;

	do {
		int ret = stats_get(v);

		sb = sysfs_stat("buffers");
		sp = sysfs_stat("pinned_bytes");
		zero = ret == 0 && sb == 0 && sp == 0;
		for (int i = 0; i < S_N; i++)
			zero = zero && v[i] == 0;
		if (!zero)
			usleep(100000);
	} while (!zero && now() < t);
	if (!zero) {
		char b[400];
		int o = 0;

		for (int i = 0; i < S_N; i++)
			o += snprintf(b + o, sizeof(b) - (size_t)o, "%s %" PRId64 ", ", stat_name[i], v[i]);
		report("counters not back to zero 10 s after every process was reaped: %s"
		       "sysfs buffers %lld, pinned_bytes %lld", b, sb, sp);
	}
}

static int run_phase(const char *phase, double seconds)
{
	uint64_t pseed = mix(opt_seed, hash_str(phase));
	bool user = strstr(phase, "user") != NULL, faults = !strncmp(phase, "fault-", 6);
	struct stat dev_st;
	long long peak = 0, faults_before = 0, fi = 0, pinned0 = 0;
	pid_t pid;
	int status = 0;
	double t0 = now(), kill_at;
	bool reaped = false;
	struct config after, before;
	bool have_before;
	int ret;

	cur_phase = phase;
	cur_seed = pseed;
	have_before = config_get(&before) == 0 && before.len > 0;
	sh->op = 0;
	sh->nreports = 0;
	sh->unguarded = 0;
	sh->fault_map[0] = 0;
	if (stat(dev_path, &dev_st)) {
		report("%s: %s", dev_path, strerror(errno));
		return -1;
	}
	if (user && !dry)
		chmod(dev_path, 0666);
	if (user) {	/* what an earlier phase left (then already reported) is not this user's */
		pinned0 = sysfs_stat("pinned_bytes");
		pinned0 = pinned0 > 0 ? pinned0 : 0;
	}
	if (faults) {
		faults_setup(true);
		faults_before = faults_injected();
	}
	printf("fuzz: phase %s: seed %#" PRIx64 ", %g s\n", phase, pseed, seconds);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		worker(phase, pseed, seconds);
	}
	if (pid < 0) {
		report("fork: %s", strerror(errno));
		return -1;
	}
	setpgid(pid, pid);
	kill_at = t0 + seconds + 20;
	/* wait, sampling pinned_bytes; then kill the whole group and reap everything */
	while (!reaped) {
		pid_t r;
		int st;

		/* orphans of the phase are ours (subreaper): reap them as they come */
		while ((r = waitpid(-1, &st, WNOHANG)) > 0)
			if (r == pid) {
				status = st;
				reaped = true;
			}
		if (reaped)
			break;
		if (user) {
			long long p = sysfs_stat("pinned_bytes");

			if (p > peak)
				peak = p;
		}
		if (now() > kill_at) {
			report("worker still running %.0f s past its deadline: killed (hang?)",
			       now() - t0 - seconds);
			kill(-pid, SIGKILL);
			kill_at = now() + 1e9;
		}
		usleep(50000);
	}
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);

		/*
		 * Under injected allocation failures the kernel itself kills
		 * with SIGSEGV when it cannot write a signal frame (or read it
		 * back in sigreturn): force_sigsegv(), si_code SI_KERNEL, no
		 * address. Either the handler does not run (the SIGSEGV being
		 * delivered was the one that failed), or it runs for the
		 * kernel's SIGSEGV once the next frame could be written. The
		 * same ops run without injection in the other phases, where
		 * such a kill is reported.
		 */
		if (faults && sig == SIGSEGV && !sh->unguarded) {
			printf("fuzz: %s: worker killed by SIGSEGV without its handler running: the kernel "
			       "could not deliver a signal (force_sigsegv) under an injected failure; not a report\n",
			       phase);
			injected_kills++;
		} else if (faults && sig == SIGSEGV && sh->fault_code == SI_KERNEL &&
			   !sh->fault_addr) {
			printf("fuzz: %s: worker killed by the kernel's SIGSEGV (si_code SI_KERNEL, no "
			       "address): a signal frame it could not write under an injected failure "
			       "(force_sigsegv); not a report\n", phase);
			injected_kills++;
		} else {
			if (sh->unguarded)
				report("worker killed by signal %d (%s) at address %#lx (si_code %d, %s; "
				       "%.160s) outside a guarded access (the fuzzer's bug, or the kernel's)",
				       sig, strsignal(sig), sh->fault_addr, sh->fault_code,
				       sh->fault_in_arena ? "in the slot arena" : "outside the slot arena",
				       sh->fault_map[0] ? sh->fault_map : "maps not read");
			else
				report("worker killed by signal %d (%s)", sig, strsignal(sig));
		}
	} else if (WEXITSTATUS(status)) {
		report("worker exited with status %d", WEXITSTATUS(status));
	}
	kill(-pid, SIGKILL);	/* whatever the worker left behind */
	{
		double t = now() + 30;

		for (;;) {
			pid_t r = waitpid(-1, NULL, WNOHANG);

			if (r < 0 && errno == ECHILD)
				break;
			if (r == 0) {
				if (user) {
					long long p = sysfs_stat("pinned_bytes");

					if (p > peak)
						peak = p;
				}
				if (now() > t) {
					report("processes of the phase not reaped 30 s after SIGKILL (stuck in the kernel?)");
					break;
				}
				kill(-pid, SIGKILL);
				usleep(20000);
			}
		}
	}
	if (faults) {
		fi = faults_injected() - faults_before;
		faults_setup(false);
	}
	if (user && !dry)
		chmod(dev_path, dev_st.st_mode & 07777);
	for (unsigned long i = 0; i < sh->nreports && i < MAX_WREPORTS; i++)
		report("in the worker at op %lu: %s", sh->rep[i].op, sh->rep[i].msg);
	if (user && peak - pinned0 > (long long)opt_memlock)
		report("pinned_bytes reached %lld (%lld at the start) with only uid %u (RLIMIT_MEMLOCK %"
		       PRIu64 ") running: pinning escapes the limit", peak, pinned0, opt_uid, opt_memlock);
	check_counters();
	if (user && have_before) {
		if (config_get(&after) || after.len != before.len ||
		    memcmp(after.raw, before.raw, after.len))
			report("configuration changed during an unprivileged phase (max_buf_size %" PRIu64
			       " -> %" PRIu64 ", max_pinned %" PRIu64 " -> %" PRIu64 ", default_node %d -> %d"
			       ", require_huge %u -> %u)",
			       before.max_buf_size, after.max_buf_size, before.max_pinned,
			       after.max_pinned, before.default_node, after.default_node,
			       before.require_huge, after.require_huge);
	}
	if (!user && have_cfg) {	/* root may have changed it on purpose: restore */
		if (config_get(&after) == 0 && (after.len != base_cfg.len ||
						 memcmp(after.raw, base_cfg.raw, after.len)))
			if ((ret = config_set(&base_cfg)))
				report("could not restore the configuration: %s", strerror(-ret));
	}
	check_kmsg(faults);
	printf("fuzz: phase %s: %lu ops in %.0f s", phase, sh->op, now() - t0);
	if (user)
		printf(", peak pinned_bytes %lld", peak);
	if (faults)
		printf(", %lld faults injected", fi);
	printf("\n");
	fflush(stdout);
	return (int)fi;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fuzz [--seed N] [--seconds N] [--phases root,user,fault-root,fault-user]\n"
		"            [--ops N] [--memlock BYTES] [--uid N] [--no-faults] [--no-kmemleak]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char *phases[8];
	int nphases = 0;
	long long faults_total = 0;
	char *leaks_before = NULL;
	bool have_faults, seed_given = false;
	double t_start = now();

	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

	self_exe[n > 0 ? n : 0] = 0;
	if (argc == 4 && !strcmp(argv[1], "--exec-child"))
		return exec_child(strtoull(argv[2], NULL, 0), atoi(argv[3]));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--seed") && v) {
			opt_seed = strtoull(v, NULL, 0);
			seed_given = true;
			i++;
		} else if (!strcmp(a, "--seconds") && v) {
			opt_seconds = strtod(v, NULL);
			i++;
		} else if (!strcmp(a, "--phases") && v) {
			snprintf(opt_phases, sizeof(opt_phases), "%s", v);
			i++;
		} else if (!strcmp(a, "--ops") && v) {
			opt_ops = strtoul(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--memlock") && v) {
			opt_memlock = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--uid") && v) {
			opt_uid = (unsigned int)strtoul(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--no-faults")) {
			opt_faults = false;
		} else if (!strcmp(a, "--no-kmemleak")) {
			opt_kmemleak = false;
		} else {
			usage();
		}
	}
	if (!seed_given) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		opt_seed = mix((uint64_t)ts.tv_nsec, (uint64_t)ts.tv_sec ^ (uint64_t)getpid()) & 0xffffffffULL;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		fprintf(stderr, "fuzz: must run as root (inside the test VM)\n");
		return 4;
	}
	if (getenv("SP_FUZZ_DRY")) {
		dry = true;
		dev_path = "/dev/null";
	}
	if (access(dev_path, F_OK)) {
		printf("fuzz: %s absent: strixpeer not loaded\n", dev_path);
		return 4;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 3;
	memset(sh, 0, sizeof(*sh));
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	nl_resolve();
	if (!sp_family)
		printf("fuzz: generic netlink family %s not found: netlink calls and stats-get skipped\n",
		       STRIXPEER_GENL_NAME);
	have_cfg = config_get(&base_cfg) == 0 && base_cfg.len > 0;
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);
	have_faults = access("/sys/kernel/debug/failslab/probability", W_OK) == 0 &&
		      access("/sys/kernel/debug/fail_page_alloc/probability", W_OK) == 0;
	opt_kmemleak = opt_kmemleak && access("/sys/kernel/debug/kmemleak", W_OK) == 0;

	for (char *save = NULL, *p = strtok_r(opt_phases, ",", &save); p && nphases < 8;
	     p = strtok_r(NULL, ",", &save)) {
		if (strcmp(p, "root") && strcmp(p, "user") && strcmp(p, "fault-root") &&
		    strcmp(p, "fault-user"))
			usage();
		if (!strncmp(p, "fault-", 6) && (!opt_faults || !have_faults)) {
			printf("fuzz: phase %s left out: %s\n", p, opt_faults ?
			       "no failslab/fail_page_alloc in /sys/kernel/debug (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC)" :
			       "--no-faults");
			continue;
		}
		phases[nphases++] = p;
	}
	if (!nphases)
		usage();
	printf("fuzz: seed %#" PRIx64 ", %g s, phases", opt_seed, opt_seconds);
	for (int i = 0; i < nphases; i++)
		printf(" %s", phases[i]);
	{
		struct utsname u;

		printf(", RLIMIT_MEMLOCK of uid %u: %" PRIu64 " bytes, kernel %s\n", opt_uid, opt_memlock,
		       uname(&u) ? "?" : u.release);
	}
	if (have_faults && opt_faults) {
		char inj[4096] = "";

		read_file("/sys/kernel/debug/fail_function/injectable", inj, sizeof(inj));
		if (!strstr(inj, "[strixpeer]"))
			printf("fuzz: fail_function not used: the module marks no function injectable\n");
	}
	if (opt_kmemleak) {
		double t = now();

		leaks_before = kmemleak_list(true);
		printf("fuzz: kmemleak scan before the run: %.0f s\n", now() - t);
	}
	check_kmsg(false);
	for (int i = 0; i < nphases; i++) {
		int fi = run_phase(phases[i], opt_seconds / nphases);

		if (fi > 0)
			faults_total += fi;
	}
	cur_phase = "end";
	cur_seed = opt_seed;
	if (opt_kmemleak) {
		double t = now();
		char *after = kmemleak_list(true);

		printf("fuzz: kmemleak scan after the run: %.0f s\n", now() - t);
		if (after)
			kmemleak_compare(leaks_before, after);
		free(after);
		free(leaks_before);
	}
	check_kmsg(false);

	printf("fuzz: summary: seed %#" PRIx64 ", %g s asked, %.0f s taken\n", opt_seed, opt_seconds,
	       now() - t_start);
	printf("fuzz: calls:");
	for (int i = 0; i < C_NCAT; i++)
		printf(" %s %lu,", cat_name[i], sh->calls[i]);
	printf(" faults injected %lld\n", faults_total);
	printf("fuzz: seconds spent:");
	for (int i = 0; i < C_NCAT; i++)
		printf(" %s %.1f%s", cat_name[i], sh->usec[i] / 1e6, i + 1 < C_NCAT ? "," : "\n");
	printf("fuzz: seconds spent in process/fd:");
	for (int i = 0; i < 9; i++)
		if (i == 8 || strcmp(proc_kind_name[i], proc_kind_name[i + 1]))
			printf(" %s %.1f%s", proc_kind_name[i],
			       (sh->proc_usec[i] + (i && !strcmp(proc_kind_name[i], proc_kind_name[i - 1]) ?
						    sh->proc_usec[i - 1] : 0)) / 1e6, i < 8 ? "," : "\n");
	printf("fuzz: succeeded:");
	for (int i = 0; i < 6; i++)
		printf(" %s %lu%s", ok_name[i], sh->ok[i], i < 5 ? "," : "\n");
	printf("fuzz: ioctls answered ENOMEM: %lu in fault phases (injected), %lu in the others\n",
	       sh->enomem[1], sh->enomem[0]);
	if (injected_kills)
		printf("fuzz: %lu workers killed by the kernel's force_sigsegv under injection (not reports)\n",
		       injected_kills);
	if (injected_warnings)
		printf("fuzz: %lu allocation-failure warnings under injection (expected, not reports)\n",
		       injected_warnings);
	if (sh->events_joined || sh->events_refused)
		printf("fuzz: unprivileged joins of \"events\": %lu accepted, %lu refused\n",
		       sh->events_joined, sh->events_refused);
	if (sh->events_joined)
		report("an unprivileged process joined the events group %lu times",
		       sh->events_joined);
	if (sh->cfgset_accepted)
		report("an unprivileged config-set was accepted %lu times", sh->cfgset_accepted);
	printf("fuzz: reports: %d\n", nreports);
	for (int i = 0; i < nreports && i < MAX_REPORTS; i++) {
		struct report *r = &reports[i];

		printf("fuzz: report %d: [phase %s, phase seed %#" PRIx64 ", op %lu] %s\n", i + 1,
		       r->phase, r->seed, r->op, r->msg);
		if (strcmp(r->phase, "end") && strcmp(r->phase, "setup"))
			printf("fuzz:   replay: make fuzz FUZZ_SEED=%#" PRIx64 " FUZZ_SECONDS=%g FUZZ_PHASES=%s"
			       "   (in a VM: fuzz --seed %#" PRIx64 " --seconds %g --phases %s)\n",
			       opt_seed, opt_seconds / nphases, r->phase, opt_seed,
			       opt_seconds / nphases, r->phase);
		else
			printf("fuzz:   replay: make fuzz FUZZ_SEED=%#" PRIx64 " FUZZ_SECONDS=%g\n",
			       opt_seed, opt_seconds);
	}
	return nreports ? 1 : 0;
}
