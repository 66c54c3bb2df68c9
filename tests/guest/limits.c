// SPDX-License-Identifier: MIT
/*
 * Limits: pinned memory is charged to the user's locked_vm against the
 * caller's RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, not to the process's
 * VmPin (ibv_reg_mr() charges that when the buffer is registered);
 * module parameters bound buffer sizes.
 */
#include "sp_test.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/resource.h>

#define NOBODY 65534

/* VmPin of this process, bytes. */
static uint64_t vmpin(void)
{
	char line[256];
	uint64_t kb = UINT64_MAX;
	FILE *f = fopen("/proc/self/status", "re");

	CHECK(f, "status");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %" SCNu64, &kb) == 1)
			break;
	fclose(f);
	CHECK(kb != UINT64_MAX, "no VmPin line");
	return kb * 1024;
}

static void drop_privileges(void)
{
	CHECK_OK(setgroups(0, NULL));
	CHECK_OK(setresgid(NOBODY, NOBODY, NOBODY));
	CHECK_OK(setresuid(NOBODY, NOBODY, NOBODY));
}

static void set_memlock(uint64_t bytes)
{
	struct rlimit rl = { .rlim_cur = bytes, .rlim_max = bytes };

	CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
}

static void unprivileged_memlock_enforced(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *a, *b;
	uint64_t fails;

	set_memlock(8 * MiB);
	drop_privileges();
	fails = sp_test_stats().fail_memlock;

	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &a) == 0, "%s", sp_errmsg());
	/* the user's locked_vm carries the charge; ibv_reg_mr() charges VmPin */
	CHECK(vmpin() == 0, "VmPin %llu: a buffer charged to pinned_vm too",
	      (unsigned long long)vmpin());
	CHECK(sp_buf_alloc(dev, 6 * MiB, SP_NODE_DEFAULT, 0, &b) == -EDQUOT, "over the limit");
	CHECK(strstr(sp_errmsg(), "RLIMIT_MEMLOCK"), "message: %s", sp_errmsg());
	CHECK(sp_test_stats().fail_memlock == fails + 1, "fail_memlock not counted");
	CHECK(sp_test_stats().buffers == 1, "failed allocation left a buffer");
	CHECK(vmpin() == 0, "failed allocation changed VmPin");
	CHECK_OK(sp_buf_free(a));
	CHECK(sp_buf_alloc(dev, 8 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "%s", sp_errmsg());
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

/* The charge stays with the mapping: unmapping last returns it. */
static void charge_released_with_last_mapping(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *a;
	void *p;

	set_memlock(4 * MiB);
	drop_privileges();
	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &a) == 0, "%s", sp_errmsg());
	p = mmap(NULL, 4 * MiB, PROT_READ, MAP_SHARED, sp_dev_fd(dev),
		 (off_t)(1ULL << 40));
	CHECK(p != MAP_FAILED, "second mapping: %s", strerror(errno));
	CHECK_OK(sp_buf_free(a));
	CHECK(sp_buf_alloc(dev, 4096, SP_NODE_DEFAULT, 0, &a) == -EDQUOT,
	      "charge dropped while still mapped: %s", sp_errmsg());
	munmap(p, 4 * MiB);
	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &a) == 0,
	      "charge kept after the last mapping went: %s", sp_errmsg());
	CHECK_OK(sp_buf_free(a));
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static void cap_ipc_lock_lifts_limit(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *a;

	set_memlock(1 * MiB);
	CHECK(sp_buf_alloc(dev, 16 * MiB, SP_NODE_DEFAULT, 0, &a) == 0, "%s", sp_errmsg());
	CHECK(vmpin() == 0, "VmPin %llu", (unsigned long long)vmpin());
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static void unprivileged_cannot_open(void)
{
	struct stat st;
	int fd;

	CHECK_OK(stat(STRIXPEER_DEVICE_PATH, &st));
	CHECK((st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);
	drop_privileges();
	fd = open(STRIXPEER_DEVICE_PATH, O_RDWR);
	CHECK(fd < 0 && errno == EACCES, "nobody opened the device");
}

static void small_max(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_buf *a;

	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &a) == 0, "%s", sp_errmsg());
	CHECK(sp_buf_alloc(dev, 4 * MiB + 1, SP_NODE_DEFAULT, 0, &a) == -EFBIG, "above max");
	CHECK(strstr(sp_errmsg(), "max_buf_size"), "message: %s", sp_errmsg());
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

/*
 * The kernel's log line for a refused size names the rounded size, the
 * one that would have been pinned. pr_info_ratelimited() may drop a line
 * when other tests were refused just before: the refusal is repeated
 * until a line shows, for at most 15 s (the ratelimit's interval is 5 s).
 */
static void refused_size_logged(struct sp_dev *dev, size_t asked, unsigned int flags,
				const char *want)
{
	struct timespec t0, now;
	char rec[1024];
	struct sp_buf *b;
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	bool seen = false;
	ssize_t n;

	CHECK(fd >= 0, "/dev/kmsg: %s", strerror(errno));
	CHECK(lseek(fd, 0, SEEK_END) >= 0, "seek /dev/kmsg");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		CHECK(sp_buf_alloc(dev, asked, SP_NODE_DEFAULT, flags, &b) == -EFBIG,
		      "%zu bytes above max", asked);
		while (!seen && (n = read(fd, rec, sizeof(rec) - 1)) != 0) {
			if (n < 0 && errno == EAGAIN)
				break;
			if (n < 0)	/* EPIPE: records overwritten, go on */
				continue;
			rec[n] = '\0';
			rec[strcspn(rec, "\n")] = '\0';
			if (strstr(rec, "refused: above max_buf_size")) {
				tap_diag("kernel: %s", strchr(rec, ';') ? strchr(rec, ';') + 1 : rec);
				CHECK(strstr(rec, want), "wanted \"%s\" in: %s", want, rec);
				seen = true;
			}
		}
		if (!seen)
			poll(NULL, 0, 100);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (!seen && now.tv_sec - t0.tv_sec < 15);
	CHECK(seen, "no max_buf_size line in 15 s of refusals");
	close(fd);
}

static void refused_size_rounded(void)
{
	struct sp_dev *dev = sp_test_dev();

	/* 2 bytes above a 4 MiB maximum: 4 MiB + 4 KiB, or 6 MiB in 2 MiB pages */
	refused_size_logged(dev, 4 * MiB + 2, SP_ALLOC_ALLOW_SMALL,
			    "4198400-byte buffer (4194306 bytes asked, in 4 KiB pages) refused");
	refused_size_logged(dev, 4 * MiB + 2, SP_ALLOC_HUGE_ONLY,
			    "6291456-byte buffer (4194306 bytes asked, in 2 MiB pages) refused");
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static void max_buf_size_rounded_in_log(void)
{
	with_param("max_buf_size", "4194304", refused_size_rounded);
}

static void max_buf_size_param(void)
{
	const char *path = "/sys/module/strixpeer/parameters/max_buf_size";
	char before[64] = "", after[64] = "";
	FILE *f;

	with_param("max_buf_size", "4194304", small_max);
	/* at most 1 TiB, a buffer's mmap window: 1 TiB + 4 KiB is refused */
	f = fopen(path, "re");
	CHECK(f && fgets(before, sizeof(before), f), "read %s", path);
	fclose(f);
	f = fopen(path, "we");
	CHECK(f, "open %s", path);
	fputs("1099511631872", f);
	CHECK(fclose(f) == EOF && errno == ERANGE, "max_buf_size of 1 TiB + 4 KiB: %s",
	      strerror(errno));
	f = fopen(path, "re");
	CHECK(f && fgets(after, sizeof(after), f), "read %s", path);
	fclose(f);
	CHECK(!strcmp(before, after), "max_buf_size %s after the refused write, was %s", after,
	      before);
}

/* Writes @val to the parameter; the errno of the write, 0 if it took. */
static int param_write(const char *name, const char *val, char *before, char *after)
{
	char path[128];
	int err = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/strixpeer/parameters/%s", name);
	f = fopen(path, "re");
	CHECK(f && fgets(before, 64, f), "read %s", path);
	fclose(f);
	f = fopen(path, "we");
	CHECK(f, "open %s", path);
	fputs(val, f);
	if (fclose(f) == EOF)
		err = errno;
	f = fopen(path, "re");
	CHECK(f && fgets(after, 64, f), "read %s", path);
	fclose(f);
	return err;
}

/* sysfs takes what config-set takes: below 4096 and unknown nodes refused. */
static void params_refuse_what_config_set_refuses(void)
{
	static const struct {
		const char *name, *val;
		int err;
	} bad[] = {
		{ "max_buf_size", "2048", ERANGE },
		{ "max_buf_size", "0", ERANGE },
		{ "default_node", "1023", EINVAL },
		{ "default_node", "-2", EINVAL },
	};
	char before[64] = "", after[64] = "";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = param_write(bad[i].name, bad[i].val, before, after);

		CHECK(err == bad[i].err, "%s=%s: %s, expected %s", bad[i].name, bad[i].val,
		      err ? strerror(err) : "accepted", strerror(bad[i].err));
		CHECK(!strcmp(before, after), "%s %s after the refused write, was %s",
		      bad[i].name, after, before);
	}
}

static const struct tap_case cases[] = {
	TAP_CASE(params_refuse_what_config_set_refuses),
	TAP_CASE(unprivileged_memlock_enforced),
	TAP_CASE(charge_released_with_last_mapping),
	TAP_CASE(cap_ipc_lock_lifts_limit),
	TAP_CASE(unprivileged_cannot_open),
	TAP_CASE(max_buf_size_param),
	TAP_CASE(max_buf_size_rounded_in_log),
};

TAP_MAIN(cases)
