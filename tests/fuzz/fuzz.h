/* SPDX-License-Identifier: MIT */
/*
 * strixpeer-fuzz: what its files share. The system headers, the types (the
 * PRNG, the shared page, netlink messages, the configuration, the worker's
 * state, reports), the globals (each defined once, in the file named) and
 * the functions one file calls in another. What the fuzzer does and how it
 * is run: the comment at the top of main.c.
 */
#ifndef SP_FUZZ_H
#define SP_FUZZ_H

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

struct rng {
	uint64_t s;
};

enum cat { C_IOCTL, C_MMAP, C_DMABUF, C_NETLINK, C_PROC, C_NCAT };

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

enum ok_kind { OK_ALLOC, OK_MMAP, OK_EXPORT, OK_IMPORT, OK_ATTACH, OK_FORK };

struct nlmsg {
	union {
		struct nlmsghdr h;
		char b[16384];
	};
	size_t len;
};

typedef void (*nl_cb)(const struct nlmsghdr *h, void *arg);

/* The counters the oracle wants back at zero, from stats-get. */
enum { S_BUFFERS, S_PINNED, S_IMPORTS, S_EXPORTS, S_ATTACH, S_PEERREG, S_N };

/* config-get's answer as raw attributes: compared byte for byte. */
struct config {
	char raw[512];
	size_t len;
	uint64_t max_buf_size, max_pinned;
	int32_t default_node;
	uint8_t require_huge;
};

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

struct report {
	char phase[32];
	uint64_t seed;
	unsigned long op;
	char msg[512];
};

#define MAX_REPORTS 64

/* util.c: the PRNG, the shared page, the run parameters, files */
uint64_t rnd(struct rng *r);
uint64_t below(struct rng *r, uint64_t n);
bool one_in(struct rng *r, unsigned int n);
uint64_t mix(uint64_t a, uint64_t b);
uint64_t hash_str(const char *s);
extern const char *const cat_name[C_NCAT];
extern struct shared *sh;
extern const char *const ok_name[6];
void ok(enum ok_kind k);
void count(enum cat c);
__attribute__((format(printf, 1, 2)))
void wreport(const char *fmt, ...);
extern uint64_t opt_seed;
extern double opt_seconds;
extern unsigned long opt_ops;
extern uint64_t opt_memlock;
extern unsigned int opt_uid;
extern bool opt_faults, opt_kmemleak;
extern char opt_phases[256];
extern char self_exe[4096];
extern const char *dev_path;
extern bool dry;
double now(void);
bool write_file(const char *path, const char *val);
bool read_file(const char *path, char *buf, size_t len);
long long read_ll(const char *path);

/* nl.c: generic netlink, raw */
extern uint16_t sp_family;
extern uint32_t sp_events_group;
int nl_socket_t(int ms);
void nl_begin(struct nlmsg *m, uint16_t type, uint16_t flags, uint8_t cmd, uint8_t ver);
void nl_put_raw(struct nlmsg *m, uint16_t type, uint16_t nla_len, const void *data, size_t len);
void nl_put(struct nlmsg *m, uint16_t type, const void *data, size_t len);
int nl_send(int fd, struct nlmsg *m);
int nl_recv(int fd, uint32_t seq, nl_cb cb, void *arg, int max_msgs);
void nl_resolve(void);
extern const char *const stat_name[S_N];
int stats_get(int64_t v[S_N]);
int config_get(struct config *c);
int config_set(const struct config *c);

/* state.c: the worker's state */
extern char *arena_lo, *arena_hi;
void on_fault(int sig, siginfo_t *si, void *uc);
int touch(volatile char *p, bool write, char v);
char *slot_addr(struct wstate *w, int i);
void reserve(char *a, size_t len);
void slot_clear(struct wstate *w, int i);
uint64_t pick_size(struct wstate *w);
uint32_t pick_node(struct wstate *w);
uint32_t pick_flags(struct wstate *w, uint32_t valid);
int pick_dev(struct wstate *w);
uint32_t pick_handle(struct wstate *w, int dev);
int live_buf(struct wstate *w);
void add_buf(struct wstate *w, int dev, const struct strixpeer_buf_alloc *a);
int add_db(struct wstate *w, int fd, uint64_t size, enum db_kind kind);
int pick_db(struct wstate *w);
void close_dev(struct wstate *w, int i);
void reset_all(struct wstate *w);

/* ops_ioctl.c */
void scratch_init(void);
void op_ioctl(struct wstate *w);
void op_ioctl_garbage(struct wstate *w);

/* ops_mem.c: mmap and friends, dma-bufs */
void op_mmap(struct wstate *w);
void op_mm(struct wstate *w);
void gem_close(struct wstate *w, int i);
int open_vgem(void);
void op_dmabuf(struct wstate *w);

/* ops_nl.c */
void op_netlink(struct wstate *w);

/* ops_proc.c: processes and fds */
void reap_kids(struct wstate *w, bool block);
int exec_child(uint64_t seed, int depth);
extern const char *const proc_kind_name[9];
extern int proc_kind;
void op_proc(struct wstate *w);

/* worker.c */
void run_ops(struct wstate *w, unsigned long n);
void worker(const char *phase, uint64_t seed, double seconds);

/* oracle.c: the supervisor */
extern struct report reports[MAX_REPORTS];
extern int nreports;
extern const char *cur_phase;
extern uint64_t cur_seed;
extern struct config base_cfg;
extern bool have_cfg;
extern int kmsg;
__attribute__((format(printf, 1, 2)))
void report(const char *fmt, ...);
extern unsigned long injected_warnings, injected_kills;
void check_kmsg(bool fault_phase);
char *kmemleak_list(bool scan);
void kmemleak_compare(const char *before, const char *after);
int run_phase(const char *phase, double seconds);

#endif /* SP_FUZZ_H */
