// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the small pieces everything uses. The PRNG (splitmix64),
 * the counters shared between the supervisor and every process of a phase
 * (an anonymous shared page) with the findings made inside a worker, the
 * run parameters (set by main()), the clock and whole-file reads and writes.
 */
#include "fuzz.h"

/* ---- PRNG (splitmix64: tiny, seedable, good enough) --------------------- */

uint64_t rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

uint64_t below(struct rng *r, uint64_t n)
{
	return n ? rnd(r) % n : 0;
}

bool one_in(struct rng *r, unsigned int n)
{
	return below(r, n) == 0;
}

uint64_t mix(uint64_t a, uint64_t b)
{
	struct rng r = { a ^ (b * 0xD6E8FEB86659FD93ULL) };

	rnd(&r);
	return rnd(&r);
}

uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ULL;
	return h;
}

/* ---- shared counters (an anonymous shared page, inherited by fork) ------ */

const char *const cat_name[C_NCAT] = { "ioctl", "mmap", "dmabuf", "netlink", "process/fd" };

struct shared *sh;

const char *const ok_name[6] = { "allocs", "buffer mmaps", "exports", "imports",
					"vgem attachments", "forks" };

void ok(enum ok_kind k)
{
	__atomic_add_fetch(&sh->ok[k], 1, __ATOMIC_RELAXED);
}

void count(enum cat c)
{
	__atomic_add_fetch(&sh->calls[c], 1, __ATOMIC_RELAXED);
}

/* A finding made inside a worker (the supervisor prints it with the seed). */
__attribute__((format(printf, 1, 2)))
void wreport(const char *fmt, ...)
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

uint64_t opt_seed;
double opt_seconds = 60;
unsigned long opt_ops;		/* 0: no limit */
uint64_t opt_memlock = 8 * MiB;
unsigned int opt_uid = NOBODY;
bool opt_faults = true, opt_kmemleak = true;
char opt_phases[256] = "root,user,fault-root,fault-user";
char self_exe[4096];
/* the device; SP_FUZZ_DRY=1 (debugging the fuzzer on a host without the module) uses /dev/null */
const char *dev_path = STRIXPEER_DEVICE_PATH;
bool dry;

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

bool write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val);
}

bool read_file(const char *path, char *buf, size_t len)
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

long long read_ll(const char *path)
{
	char b[64];

	return read_file(path, b, sizeof(b)) ? strtoll(b, NULL, 0) : -1;
}
