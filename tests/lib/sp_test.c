// SPDX-License-Identifier: MIT
/* tests/lib/sp_test.h's functions: the suite's library (build/tests/libsptest.a). */
#include "sp_test.h"

int sp_test_open(void)
{
	int fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		SKIP("%s not present: strixpeer module not loaded", STRIXPEER_DEVICE_PATH);
	CHECK(fd >= 0, "open %s: %s", STRIXPEER_DEVICE_PATH, strerror(errno));
	return fd;
}

struct sp_dev *sp_test_dev(void)
{
	struct sp_dev *dev;
	int ret = sp_dev_open(NULL, &dev);

	if (ret == -ENOENT)
		SKIP("%s", sp_errmsg());
	CHECK(ret == 0, "sp_dev_open: %s", sp_errmsg());
	return dev;
}

int sp_raw_alloc(int fd, uint64_t size, uint32_t node, uint32_t flags,
		 struct strixpeer_buf_alloc *out)
{
	struct strixpeer_buf_alloc a = { .size = size, .node = node, .flags = flags };
	int ret = ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a);

	if (out)
		*out = a;
	return ret;
}

int sp_raw_free(int fd, uint32_t handle)
{
	struct strixpeer_buf_free f = { .handle = handle };

	return ioctl(fd, STRIXPEER_IOC_BUF_FREE, &f);
}

void *sp_raw_map(int fd, const struct strixpeer_buf_alloc *a)
{
	void *p = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       (off_t)a->mmap_offset);

	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

struct sp_stats sp_test_stats(void)
{
	struct sp_stats st;

	CHECK(sp_stats_read(&st) == 0, "%s", sp_errmsg());
	return st;
}

uint64_t sp_meminfo(int node, const char *field)
{
	char path[96], line[256];
	uint64_t kb = 0;
	FILE *f;

	if (node < 0)
		snprintf(path, sizeof(path), "/proc/meminfo");
	else
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", node);
	f = fopen(path, "re");
	CHECK(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, field);

		if (p && p[strlen(field)] == ':') {
			kb = strtoull(p + strlen(field) + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb * 1024;
}

uint64_t sp_smaps_field(const void *addr, const char *field)
{
	char line[512];
	bool in = false;
	uint64_t kb = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	CHECK(f, "smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char c;

		/* a VMA's first line: "lo-hi perms ..."; fields are "Name: N kB" */
		if (sscanf(line, "%lx-%lx%c", &lo, &hi, &c) == 3 && c == ' ') {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && !strncmp(line, field, strlen(field)) && line[strlen(field)] == ':') {
			kb = strtoull(line + strlen(field) + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb * 1024;
}

uint64_t sp_free_bytes(int node)
{
	char line[256];
	uint64_t pages = 0, v;
	int cur = -1;
	FILE *f = fopen("/proc/zoneinfo", "re");

	CHECK(f, "zoneinfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Node %d,", &cur) == 1)
			continue;
		if (node >= 0 && cur != node)
			continue;
		if (sscanf(line, " pages free %" SCNu64, &v) == 1 ||
		    sscanf(line, " count: %" SCNu64, &v) == 1)
			pages += v;
	}
	fclose(f);
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint8_t sp_pattern(uint64_t pos, uint32_t seed)
{
	return sp_rc_pattern(pos, seed);
}

void sp_fill(void *p, uint64_t len, uint64_t pos, uint32_t seed)
{
	sp_rc_fill(p, len, pos, seed);
}

int64_t sp_verify(const void *p, uint64_t len, uint64_t pos, uint32_t seed)
{
	return sp_rc_verify(p, len, pos, seed);
}

uint64_t sp_pfn(const void *addr)
{
	uint64_t ent = 0;
	long psz = sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0, "pagemap: %s", strerror(errno));
	CHECK(pread(fd, &ent, sizeof(ent), (off_t)((uintptr_t)addr / psz * 8)) == 8,
	      "pagemap read");
	close(fd);
	if (!(ent & (1ULL << 63)))
		return 0;
	return ent & ((1ULL << 55) - 1);
}

void with_param(const char *name, const char *val, void (*fn)(void))
{
	char path[128], old[64] = "";
	int status;
	FILE *f;
	pid_t pid;

	snprintf(path, sizeof(path), "/sys/module/strixpeer/parameters/%s", name);
	f = fopen(path, "re");
	CHECK(f && fgets(old, sizeof(old), f), "read %s", path);
	fclose(f);
	f = fopen(path, "we");
	CHECK(f && fputs(val, f) >= 0 && fclose(f) == 0, "write %s", path);
	pid = fork();
	if (pid == 0) {
		fn();
		_exit(0);
	}
	waitpid(pid, &status, 0);
	f = fopen(path, "we");
	CHECK(f && fputs(old, f) >= 0 && fclose(f) == 0, "restore %s", path);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "with %s=%s", name, val);
}

void sp_send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = "f", .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	CHECK(sendmsg(sock, &msg, 0) == 1, "sendmsg: %s", strerror(errno));
}

int sp_recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, c;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *cm;
	int fd;

	CHECK(recvmsg(sock, &msg, 0) == 1, "recvmsg: %s", strerror(errno));
	cm = CMSG_FIRSTHDR(&msg);
	CHECK(cm && cm->cmsg_type == SCM_RIGHTS, "no fd received");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

bool sp_kernel_has(const char *sym)
{
	char line[256], name[128];
	bool found = false;
	FILE *f = fopen("/proc/kallsyms", "re");

	CHECK(f, "/proc/kallsyms: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%*s %*s %127s", name) == 1 && !strcmp(name, sym);
	fclose(f);
	return found;
}

bool sp_write_file(const char *path, const char *val)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return false;
	fputs(val, f);
	return fclose(f) == 0;
}
