// SPDX-License-Identifier: MIT
/*
 * The shmem allocator (module parameter allocator=shmem, issue 48): each
 * case switches the parameter, makes buffers and switches it back. A
 * shmem buffer's pages are the folios of a file of a private tmpfs mount;
 * its mappings map that file ("/strixpeer:<id> (deleted)" in maps) with
 * the module's own fault handler. Checked here: the parameter's values;
 * alloc, mmap, read and write; the buffer keeps its allocator when the
 * parameter changes; PMD mapping of 2 MiB folios (ShmemPmdMapped);
 * ibv_reg_mr and an RDMA WRITE over Soft-RoCE; the dma-buf export and its
 * mmap; the module and dma-buf pin each mapping holds after every fd is
 * closed (rmmod refused); MADV_REMOVE and a writable open of the file
 * refused; fork, munmap and close; max_pinned_bytes and Shmem in meminfo;
 * STRIXPEER_ALLOC_HUGE_ONLY failing when shmem gives no 2 MiB folio; and
 * strixpeerctl buf show naming a shmem mapping as the buffer's holder.
 *
 * SP_SHMEM_OTHERS="prog ..." also runs those programs of build/tests/
 * with allocator=shmem (test_others_under_shmem), e.g. huge_map backing.
 */
#include "rdma_pair.h"

#include <ctype.h>
#include <sys/syscall.h>

#define PARAM	"/sys/module/strixpeer/parameters/allocator"
#define LEN	(8 * MiB)

static void set_allocator(const char *val)
{
	CHECK(sp_write_file(PARAM, val), "write %s to %s: %s", val, PARAM, strerror(errno));
}

static void read_param(const char *name, char *out, size_t size)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/strixpeer/parameters/%s", name);
	f = fopen(path, "re");
	CHECK(f && fgets(out, (int)size, f), "read %s: %s", path, strerror(errno));
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

/* The node-wide id of handle @handle on @fd, from the fd's fdinfo. */
static uint32_t buf_id(int fd, uint32_t handle)
{
	char path[64], line[256];
	unsigned int h, id;
	uint32_t found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	CHECK(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "strixpeer-buf: %u %u", &h, &id) == 2 && h == handle)
			found = id;
	fclose(f);
	CHECK(found, "handle %u not in %s", handle, path);
	return found;
}

/* The path /proc/PID/maps shows for the mapping holding @addr ("" none). */
static void maps_path(pid_t pid, const void *addr, char *out, size_t size)
{
	char path[64], line[512];
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	CHECK(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int pos = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &pos) < 2 || !pos)
			continue;
		if ((uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			snprintf(out, size, "%s", line + pos);
			out[strcspn(out, "\n")] = '\0';
			break;
		}
	}
	fclose(f);
}

static void check_shmem_named(const void *addr, uint32_t id)
{
	char got[256], want[64];

	maps_path(getpid(), addr, got, sizeof(got));
	snprintf(want, sizeof(want), "/strixpeer:%u (deleted)", id);
	CHECK(!strcmp(got, want), "maps names the mapping \"%s\", not \"%s\"", got, want);
}

static long module_refcnt(void)
{
	char v[32];

	read_param("../refcnt", v, sizeof(v));
	return strtol(v, NULL, 10);
}

/* Does shmem hand out 2 MiB folios here (THP built, shmem_enabled not deny)? */
static bool shmem_huge_possible(void)
{
	char line[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");

	if (!f)
		return false;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	return !strstr(line, "[deny]");
}

static void test_param_values(void)
{
	char v[32];

	read_param("allocator", v, sizeof(v));
	CHECK(!strcmp(v, "pages"), "allocator is \"%s\", not the default \"pages\"", v);
	CHECK(!sp_write_file(PARAM, "bogus"), "allocator=bogus was taken");
	set_allocator("shmem");
	read_param("allocator", v, sizeof(v));
	CHECK(!strcmp(v, "shmem"), "allocator reads \"%s\" after writing shmem", v);
	set_allocator("pages");
	read_param("allocator", v, sizeof(v));
	CHECK(!strcmp(v, "pages"), "allocator reads \"%s\" after writing pages", v);
}

/* Data, naming, and the allocator a buffer keeps when the parameter moves. */
static void test_alloc_map_rw_and_switch_back(void)
{
	struct strixpeer_buf_alloc a, b;
	int fd = sp_test_open();
	char got[256];
	uint8_t *p, *q;

	set_allocator("shmem");
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a));
	set_allocator("pages");
	p = sp_raw_map(fd, &a);
	check_shmem_named(p, buf_id(fd, a.handle));
	sp_fill(p, LEN, 0, 7);
	CHECK(sp_verify(p, LEN, 0, 7) < 0, "shmem buffer reads back wrong");
	/* MADV_DONTNEED drops the entries; the refault maps the same pages */
	CHECK_OK(madvise(p, LEN, MADV_DONTNEED));
	CHECK(sp_verify(p, LEN, 0, 7) < 0, "data changed across MADV_DONTNEED");

	/* made after the switch back: today's allocator, /dev/strixpeer */
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &b));
	q = sp_raw_map(fd, &b);
	maps_path(getpid(), q, got, sizeof(got));
	CHECK(!strcmp(got, "/dev/strixpeer"), "a pages buffer maps as \"%s\"", got);
	sp_fill(q, LEN, 0, 8);
	CHECK(sp_verify(q, LEN, 0, 8) < 0, "pages buffer reads back wrong");
	CHECK_OK(munmap(p, LEN));
	CHECK_OK(munmap(q, LEN));
	CHECK_OK(sp_raw_free(fd, a.handle));
	CHECK_OK(sp_raw_free(fd, b.handle));
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void test_pmd_mapped(void)
{
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_info info = { 0 };
	int fd = sp_test_open();
	uint64_t pmd;
	uint8_t *p;

	if (!shmem_huge_possible())
		SKIP("THP shmem_enabled is deny or absent: shmem gives no 2 MiB folios");
	set_allocator("shmem");
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a));
	set_allocator("pages");
	info.handle = a.handle;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info));
	p = sp_raw_map(fd, &a);
	CHECK((uintptr_t)p % HUGE_SZ == 0, "mapping at %p is not 2 MiB aligned", (void *)p);
	sp_fill(p, LEN, 0, 3);
	pmd = sp_smaps_field(p, "ShmemPmdMapped");
	tap_diag("page_size %llu, chunks %u, ShmemPmdMapped %llu of %llu",
		 (unsigned long long)info.page_size, info.nr_chunks,
		 (unsigned long long)pmd, (unsigned long long)LEN);
	if (info.page_size == HUGE_SZ)
		CHECK(pmd == LEN, "2 MiB folios but ShmemPmdMapped %llu, not %llu",
		      (unsigned long long)pmd, (unsigned long long)LEN);
	else
		CHECK(pmd < LEN, "page_size %llu yet all PMD-mapped",
		      (unsigned long long)info.page_size);
	/* fresh guest, huge-only, so the folios are 2 MiB unless refused */
	CHECK_OK(munmap(p, LEN));
	CHECK_OK(sp_raw_free(fd, a.handle));
	set_allocator("shmem");
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_HUGE_ONLY, &a));
	set_allocator("pages");
	p = sp_raw_map(fd, &a);
	sp_fill(p, LEN, 0, 4);
	pmd = sp_smaps_field(p, "ShmemPmdMapped");
	CHECK(pmd == LEN, "huge-only shmem buffer: ShmemPmdMapped %llu, not %llu",
	      (unsigned long long)pmd, (unsigned long long)LEN);
	CHECK_OK(munmap(p, LEN));
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* shmem_enabled=deny: a huge-only shmem buffer fails, a plain one works. */
static void test_huge_only_check_and_fail(void)
{
	const char *knob = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";
	char old[128] = "", *l, *r;
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_info info = { 0 };
	int fd = sp_test_open();
	FILE *f = fopen(knob, "re");

	if (!f)
		SKIP("no %s (no THP)", knob);
	CHECK(fgets(old, sizeof(old), f), "read %s", knob);
	fclose(f);
	l = strchr(old, '[');
	r = l ? strchr(l, ']') : NULL;
	CHECK(l && r, "no [current] value in %s: %s", knob, old);
	*r = '\0';
	CHECK(sp_write_file(knob, "deny"), "write deny to %s", knob);
	set_allocator("shmem");
	errno = 0;
	{
		int ret = sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT,
				       STRIXPEER_ALLOC_HUGE_ONLY, &a);
		int err = errno;
		int ret2 = sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a);

		set_allocator("pages");
		CHECK(sp_write_file(knob, l + 1), "restore %s to %s", knob, l + 1);
		CHECK(ret == -1 && err == ENOMEM,
		      "huge-only with shmem_enabled=deny: %d/%s, not ENOMEM", ret, strerror(err));
		CHECK(ret2 == 0, "plain shmem buffer with shmem_enabled=deny: %s", strerror(errno));
	}
	info.handle = a.handle;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info));
	CHECK(info.page_size == 4096, "deny, yet page_size %llu", (unsigned long long)info.page_size);
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void test_rdma_write_into_shmem_buffer(void)
{
	struct msg m = { 0 };
	struct pair p;
	char got[256];
	size_t len = tap_debug_kernel() ? 2 * MiB : LEN;

	set_allocator("shmem");
	pair_open(&p, LEN);
	set_allocator("pages");
	/* the target's buffer: a shmem one, registered with ibv_reg_mr */
	m.cmd = CMD_INFO;
	xfer(p.sock, &m);
	maps_path(p.target, (void *)(uintptr_t)p.peer.addr, got, sizeof(got));
	CHECK(!strncmp(got, "/strixpeer:", 11), "target buffer maps as \"%s\"", got);
	tap_diag("target buffer %s: page_size %llu, chunks %u", got,
		 (unsigned long long)m.page_size, m.nr_chunks);
	sp_fill(p.host, len, 0, 99);
	post_rdma(&p, IBV_WR_RDMA_WRITE, 0, 0, len);
	m.cmd = CMD_VERIFY;
	m.off = 0;
	m.len = len;
	m.seed = 99;
	xfer(p.sock, &m);
	CHECK(m.result < 0, "byte %lld of the RDMA WRITE is wrong", (long long)m.result);
	memset(p.host, 0, len);
	post_rdma(&p, IBV_WR_RDMA_READ, 0, 0, len);
	CHECK(sp_verify(p.host, len, 0, 99) < 0, "RDMA READ back is wrong");
	pair_close(&p);
	CHECK_NOTHING_PINNED();
}

/* The dma-buf's mmap maps the same pages, and keeps the module after close. */
static void test_dmabuf_export_and_pins(void)
{
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_export e = { 0 };
	long base = module_refcnt(), held;
	int fd = sp_test_open();
	uint8_t *p, *d;

	set_allocator("shmem");
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a));
	set_allocator("pages");
	p = sp_raw_map(fd, &a);
	sp_fill(p, LEN, 0, 11);
	e.handle = a.handle;
	e.flags = STRIXPEER_EXPORT_RDWR | STRIXPEER_EXPORT_CLOEXEC;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e));
	d = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
	CHECK(d != MAP_FAILED, "mmap of the dma-buf: %s", strerror(errno));
	CHECK(sp_verify(d, LEN, 0, 11) < 0, "the dma-buf mapping reads other bytes");
	sp_fill(d, MiB, 0, 12);
	CHECK(sp_verify(p, MiB, 0, 12) < 0, "a write through the dma-buf is not seen");

	/* every fd closed: the two mappings alone hold the module */
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
	close(e.fd);
	held = module_refcnt();
	CHECK(held > base, "module refcnt %ld with two mappings and no fd, %ld before", held, base);
	CHECK_ERR(syscall(SYS_delete_module, "strixpeer", O_NONBLOCK), EWOULDBLOCK);
	CHECK(sp_verify(p, MiB, 0, 12) < 0, "data changed");
	CHECK_OK(munmap(p, LEN));
	CHECK(module_refcnt() > base, "the dma-buf mapping alone no longer holds the module");
	CHECK_OK(munmap(d, LEN));
	/* fput() of the last holder ran before munmap returned (task work) */
	CHECK(module_refcnt() == base, "module refcnt %ld after munmap, %ld before",
	      module_refcnt(), base);
	CHECK_NOTHING_PINNED();
}

static void test_punch_refused(void)
{
	struct strixpeer_buf_alloc a;
	int fd = sp_test_open(), mf;
	char mfpath[96];
	uint8_t *p;

	set_allocator("shmem");
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a));
	set_allocator("pages");
	p = sp_raw_map(fd, &a);
	sp_fill(p, LEN, 0, 21);
	CHECK_ERR(madvise(p, LEN, MADV_REMOVE), EPERM);
	snprintf(mfpath, sizeof(mfpath), "/proc/self/map_files/%lx-%lx",
		 (unsigned long)(uintptr_t)p, (unsigned long)(uintptr_t)(p + LEN));
	/* S_IMMUTABLE: no writable open, so no fallocate or truncate */
	CHECK_ERR(open(mfpath, O_RDWR | O_CLOEXEC), EPERM);
	mf = open(mfpath, O_RDONLY | O_CLOEXEC);
	if (mf >= 0) {
		CHECK_ERR(fallocate(mf, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, LEN),
			  EBADF);
		CHECK_ERR(ftruncate(mf, 0), EINVAL);
		close(mf);
	}
	CHECK(sp_verify(p, LEN, 0, 21) < 0, "data changed after the refused punches");
	CHECK_OK(munmap(p, LEN));
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void test_fork_munmap_close(void)
{
	struct strixpeer_buf_alloc a;
	int fd = sp_test_open(), status;
	uint8_t *p;
	pid_t pid;

	set_allocator("shmem");
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a));
	set_allocator("pages");
	p = sp_raw_map(fd, &a);
	sp_fill(p, LEN, 0, 31);
	/* split the VMA: both halves share the mapping's pin */
	CHECK_OK(mprotect(p + 2 * MiB, 2 * MiB, PROT_READ));
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (!pid) {
		close(fd);
		if (sp_verify(p, LEN, 0, 31) >= 0)
			_exit(2);
		sp_fill(p + 4 * MiB, 4 * MiB, 4 * MiB, 32);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "child: status 0x%x", status);
	CHECK(sp_verify(p + 4 * MiB, 4 * MiB, 4 * MiB, 32) < 0, "child's write not shared");
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
	CHECK(sp_test_stats().buffers == 1, "the mapping no longer holds the buffer");
	CHECK(sp_verify(p, 4 * MiB, 0, 31) < 0, "data changed after close");
	CHECK_OK(munmap(p, 2 * MiB));
	CHECK(sp_test_stats().buffers == 1, "a part of the mapping no longer holds it");
	CHECK_OK(munmap(p + 2 * MiB, LEN - 2 * MiB));
	CHECK_NOTHING_PINNED();
}

static void test_accounting(void)
{
	struct strixpeer_buf_alloc a;
	char old[32];
	int fd = sp_test_open();
	uint64_t shmem0 = sp_meminfo(-1, "Shmem"), shmem1;

	read_param("max_pinned_bytes", old, sizeof(old));
	CHECK(sp_write_file("/sys/module/strixpeer/parameters/max_pinned_bytes", "4194304"),
	      "set max_pinned_bytes");
	set_allocator("shmem");
	{
		int r1 = sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a);
		int e1 = errno;
		int r2 = sp_raw_alloc(fd, 4 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a);

		set_allocator("pages");
		CHECK(sp_write_file("/sys/module/strixpeer/parameters/max_pinned_bytes", old),
		      "restore max_pinned_bytes");
		CHECK(r1 == -1 && e1 == ENOSPC, "8 MiB over a 4 MiB max_pinned_bytes: %d/%s",
		      r1, strerror(e1));
		CHECK(r2 == 0, "4 MiB under 4 MiB max_pinned_bytes: %s", strerror(errno));
	}
	CHECK(sp_test_stats().pinned_bytes == 4 * MiB, "pinned_bytes %" PRIu64,
	      sp_test_stats().pinned_bytes);
	shmem1 = sp_meminfo(-1, "Shmem");
	tap_diag("Shmem %llu -> %llu kB", (unsigned long long)shmem0 / 1024,
		 (unsigned long long)shmem1 / 1024);
	CHECK(shmem1 >= shmem0 + 4 * MiB - MiB, "Shmem grew by %lld bytes only",
	      (long long)(shmem1 - shmem0));
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* strixpeerctl buf show finds a shmem mapping as the buffer's holder. */
static void test_holders_view(void)
{
	struct strixpeer_buf_alloc a;
	char cmd[128], out[8192], want[64];
	int fd = sp_test_open();
	size_t n = 0, w = 0;
	uint32_t id;
	uint8_t *p;
	FILE *f;
	int c;

	set_allocator("shmem");
	CHECK_OK(sp_raw_alloc(fd, LEN, STRIXPEER_NODE_DEFAULT, 0, &a));
	set_allocator("pages");
	id = buf_id(fd, a.handle);
	p = sp_raw_map(fd, &a);
	/* the handle goes: only the mapping holds the buffer */
	CHECK_OK(sp_raw_free(fd, a.handle));
	snprintf(cmd, sizeof(cmd), "build/strixpeerctl -j buf show pid %d", (int)getpid());
	f = popen(cmd, "re");
	CHECK(f, "popen %s: %s", cmd, strerror(errno));
	while ((c = fgetc(f)) != EOF && n < sizeof(out) - 1)
		if (!isspace(c))
			out[n++] = (char)c;
	out[n] = '\0';
	CHECK(pclose(f) == 0, "%s failed: %s", cmd, out);
	snprintf(want, sizeof(want), "\"id\":%u,", id);
	CHECK(strstr(out, want), "buffer %u not listed: %s", id, out);
	snprintf(want, sizeof(want), "\"pid\":%d,", (int)getpid());
	for (const char *s = out; (s = strstr(s, "\"kind\":\"mapping\"")); s++)
		w++;
	CHECK(w == 1, "%zu mapping holders, not 1: %s", w, out);
	CHECK(strstr(strstr(out, "\"holders\""), want), "holder is not pid %d: %s",
	      (int)getpid(), out);
	CHECK_OK(munmap(p, LEN));
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* SP_SHMEM_OTHERS: other buffer programs, run with allocator=shmem. */
static void test_others_under_shmem(void)
{
	const char *list = getenv("SP_SHMEM_OTHERS");
	char progs[512], *save = NULL, *prog;
	unsigned int bad = 0, n = 0;

	if (!list || !*list)
		SKIP("SP_SHMEM_OTHERS names no program to run with allocator=shmem");
	snprintf(progs, sizeof(progs), "%s", list);
	set_allocator("shmem");
	for (prog = strtok_r(progs, " ", &save); prog; prog = strtok_r(NULL, " ", &save)) {
		char cmd[256], line[1024];
		unsigned int ok = 0, nok = 0, skip = 0;
		FILE *f;

		snprintf(cmd, sizeof(cmd), "build/tests/%s 2>&1", prog);
		f = popen(cmd, "re");
		if (!f) {
			bad++;
			continue;
		}
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "not ok ", 7)) {
				nok++;
				tap_diag("%s: %s", prog, strtok(line, "\n"));
			} else if (!strncmp(line, "ok ", 3)) {
				ok++;
				skip += strstr(line, "# SKIP") != NULL;
			} else if (strstr(line, "CHECK") || strstr(line, "failed")) {
				tap_diag("%s: %s", prog, strtok(line, "\n"));
			}
		}
		pclose(f);
		tap_diag("%s with allocator=shmem: %u ok (%u skipped), %u not ok",
			 prog, ok, skip, nok);
		bad += nok || !ok;
		n++;
	}
	set_allocator("pages");
	CHECK(!bad, "%u of %u programs failed with allocator=shmem", bad, n);
}

static const struct tap_case cases[] = {
	TAP_CASE(test_param_values),
	TAP_CASE(test_alloc_map_rw_and_switch_back),
	TAP_CASE(test_pmd_mapped),
	TAP_CASE(test_huge_only_check_and_fail),
	TAP_CASE_T(test_rdma_write_into_shmem_buffer, 300),
	TAP_CASE(test_dmabuf_export_and_pins),
	TAP_CASE(test_punch_refused),
	TAP_CASE(test_fork_munmap_close),
	TAP_CASE(test_accounting),
	TAP_CASE(test_holders_view),
	TAP_CASE_T(test_others_under_shmem, 2400),
};

TAP_MAIN(cases)
