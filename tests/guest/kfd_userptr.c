// SPDX-License-Identifier: MIT
/*
 * A strixpeer buffer as a KFD userptr (hipHostRegister()), the way amdgpu
 * reaches it: sp_kfdsim (tests/kmod/kfdsim.c) registers the range with an
 * mmu interval notifier and gets its pages with hmm_range_fault() - or,
 * the older way, pins them with pin_user_pages_fast(FOLL_WRITE |
 * FOLL_LONGTERM) - into an sg table mapped for its device, and its "GPU"
 * reads and writes through that table. For buffers of 4 KiB, 2 MiB and
 * 64 MiB + 4 KiB: what the GPU writes user space reads, byte for byte, and
 * the other way round; an invalidation marks the range invalid and the
 * next GPU access revalidates it; munmap, free and exit while the GPU side
 * holds the range reach it as invalidations, free nothing it still holds
 * (a pinned range keeps its data) and leave nothing behind; and gfx's
 * AMDGPU_GEM_USERPTR_ANONONLY (libdrm's amdgpu_create_bo_from_user_mem(),
 * so RADV's host-pointer import) refuses the buffer's VMA, which has a
 * file, with EPERM. SP_RDMA_MAX (set on debug kernels) caps the largest
 * size.
 */
#include "sp_test.h"

#include "kfdsim.h"

#define NO_BAD (~0ULL)
#define U(x) ((unsigned long long)(x))

static int kfd_userptr(int fd, void *p, uint64_t len, uint32_t flags)
{
	struct sp_kfdsim_userptr u = { .addr = (uintptr_t)p, .length = len, .flags = flags };

	return ioctl(fd, SP_KFDSIM_IOC_USERPTR, &u);
}

/* GPU FILL or CHECK; returns the ioctl's result, *bad the first bad byte. */
static int kfd_gpu(int fd, unsigned long cmd, uint64_t off, uint64_t len, uint32_t seed,
		   uint32_t flags, uint64_t *bad)
{
	struct sp_kfdsim_gpu g = { .offset = off, .length = len, .seed = seed, .flags = flags };
	int ret = ioctl(fd, cmd, &g);

	if (bad)
		*bad = g.bad;
	return ret;
}

static struct sp_kfdsim_status kfd_status(int fd)
{
	struct sp_kfdsim_status st;

	CHECK(ioctl(fd, SP_KFDSIM_IOC_STATUS, &st) == 0, "STATUS: %s", strerror(errno));
	return st;
}

static void gpu_fill(int fd, uint64_t len, uint32_t seed)
{
	CHECK(kfd_gpu(fd, SP_KFDSIM_IOC_FILL, 0, len, seed, 0, NULL) == 0, "GPU fill: %s",
	      strerror(errno));
}

static void gpu_check(int fd, uint64_t len, uint32_t seed, uint32_t flags)
{
	uint64_t bad;

	CHECK(kfd_gpu(fd, SP_KFDSIM_IOC_CHECK, 0, len, seed, flags, &bad) == 0, "GPU check: %s",
	      strerror(errno));
	CHECK(bad == NO_BAD, "GPU read a wrong byte at %" PRIu64 " of %" PRIu64, bad, len);
}

static uint64_t largest(void)
{
	const char *cap = getenv("SP_RDMA_MAX");
	uint64_t big = 64 * MiB + 4096;

	if (cap && strtoull(cap, NULL, 0) && strtoull(cap, NULL, 0) < big)
		big = (strtoull(cap, NULL, 0) + 4095) & ~4095ULL;
	return big;
}

static void data_both_ways(uint32_t flags)
{
	const uint64_t sizes[] = { 4096, 2 * MiB, largest() };
	struct sp_dev *dev = sp_test_dev();
	int fd = sp_kfdsim_open();

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct sp_kfdsim_status st;
		struct sp_buf *b;
		uint64_t len;
		int64_t bad;
		uint8_t *p;

		CHECK(sp_buf_alloc(dev, sizes[i], SP_NODE_DEFAULT, 0, &b) == 0, "alloc %" PRIu64
		      ": %s", sizes[i], sp_errmsg());
		p = sp_buf_addr(b);
		len = sp_buf_size(b);
		CHECK(kfd_userptr(fd, p, len, flags) == 0, "userptr of %" PRIu64 " bytes: %s", len,
		      strerror(errno));
		st = kfd_status(fd);
		CHECK(st.valid && st.nr_pages == len / 4096 && st.pinned == !!flags,
		      "status: valid %u, %llu pages, pinned %u", st.valid, U(st.nr_pages),
		      st.pinned);
		tap_diag("%" PRIu64 " bytes: %llu DMA segment(s)", len, U(st.dma_segments));
		/* the GPU writes, user space reads every byte */
		gpu_fill(fd, len, 0x6b1 + (uint32_t)i);
		bad = sp_verify(p, len, 0, 0x6b1 + (uint32_t)i);
		CHECK(bad < 0, "user space read a wrong byte at %" PRId64 " of %" PRIu64, bad, len);
		/* user space writes, the GPU reads every byte */
		sp_fill(p, len, 0, 0xc0de + (uint32_t)i);
		gpu_check(fd, len, 0xc0de + (uint32_t)i, 0);
		st = kfd_status(fd);
		CHECK(st.valid && !st.invalidations, "%llu invalidation(s) of a range no one touched",
		      U(st.invalidations));
		CHECK(ioctl(fd, SP_KFDSIM_IOC_DESTROY) == 0, "DESTROY: %s", strerror(errno));
		CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());
	}
	close(fd);
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static void hmm_userptr_data_both_ways(void)
{
	data_both_ways(0);
}

static void pinned_userptr_data_both_ways(void)
{
	data_both_ways(SP_KFDSIM_USERPTR_PIN);
}

static void invalidation_then_revalidation(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_kfdsim_status st;
	int fd = sp_kfdsim_open();
	struct sp_buf *b;
	uint8_t *p;

	CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "alloc: %s", sp_errmsg());
	p = sp_buf_addr(b);
	CHECK(kfd_userptr(fd, p, 4 * MiB, 0) == 0, "userptr: %s", strerror(errno));
	gpu_fill(fd, 4 * MiB, 7);
	/* zaps the entries: the range's pages are to be got again */
	CHECK(madvise(p + 2 * MiB, 2 * MiB, MADV_DONTNEED) == 0, "madvise: %s", strerror(errno));
	st = kfd_status(fd);
	CHECK(!st.valid && st.invalidations == 1 && !st.unmaps,
	      "after MADV_DONTNEED: valid %u, %llu invalidations, %llu unmaps",
	      st.valid, U(st.invalidations), U(st.unmaps));
	/* the GPU's next access restores the range: same pages, same bytes */
	gpu_check(fd, 4 * MiB, 7, 0);
	st = kfd_status(fd);
	CHECK(st.valid && st.revalidations == 1, "after the access: valid %u, %llu revalidations",
	      st.valid, U(st.revalidations));
	CHECK(sp_verify(p, 4 * MiB, 0, 7) < 0, "user space sees other bytes");
	close(fd);
	CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

/*
 * After the process's mapping went (munmap + free, or exit): the range is
 * invalid, the unmap reached kfdsim, the module freed the buffer, a pinned
 * range still holds its data, and a GPU access, which would revalidate,
 * fails with @want_errno.
 */
static void check_gone(int fd, uint32_t flags, uint64_t len, uint32_t seed, int want_errno)
{
	struct sp_kfdsim_status st = kfd_status(fd);
	struct sp_stats s = sp_test_stats();
	uint64_t bad;

	tap_diag("%s: valid %u, %llu invalidations, %llu unmaps; module: %" PRIu64 " buffers",
		 flags ? "pinned" : "hmm", st.valid, U(st.invalidations), U(st.unmaps), s.buffers);
	CHECK(!st.valid && st.invalidations >= 1 && st.unmaps >= 1,
	      "the unmap did not reach the GPU side");
	CHECK(s.buffers == 0 && s.pinned_bytes == 0, "the module still holds %" PRIu64
	      " buffers", s.buffers);
	if (flags & SP_KFDSIM_USERPTR_PIN) {
		CHECK(st.pinned, "the pins are gone");
		/* what it still holds is the buffer's memory, intact */
		CHECK(kfd_gpu(fd, SP_KFDSIM_IOC_CHECK, 0, len, seed, SP_KFDSIM_GPU_STALE, &bad) == 0,
		      "stale check: %s", strerror(errno));
		CHECK(bad == NO_BAD, "pinned pages changed at %" PRIu64 ": freed under the GPU", bad);
	}
	/* a restore fails, and drops what the range held */
	CHECK(kfd_gpu(fd, SP_KFDSIM_IOC_CHECK, 0, len, seed, 0, &bad) == -1 && errno == want_errno,
	      "a GPU access to the unmapped range: %s, want %s", strerror(errno),
	      strerror(want_errno));
	CHECK(!kfd_status(fd).pinned, "a failed restore kept its pins");
	CHECK(ioctl(fd, SP_KFDSIM_IOC_DESTROY) == 0, "DESTROY: %s", strerror(errno));
}

static void munmap_and_free_while_held(void)
{
	for (uint32_t flags = 0; flags <= SP_KFDSIM_USERPTR_PIN; flags += SP_KFDSIM_USERPTR_PIN) {
		struct sp_dev *dev = sp_test_dev();
		int fd = sp_kfdsim_open();
		struct sp_buf *b;

		CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "alloc: %s",
		      sp_errmsg());
		CHECK(kfd_userptr(fd, sp_buf_addr(b), 4 * MiB, flags) == 0, "userptr: %s",
		      strerror(errno));
		gpu_fill(fd, 4 * MiB, 11);
		CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());	/* munmap + free */
		check_gone(fd, flags, 4 * MiB, 11, EFAULT);
		close(fd);
		sp_dev_close(dev);
		CHECK_NOTHING_PINNED();
	}
}

static void exit_while_held(void)
{
	for (uint32_t flags = 0; flags <= SP_KFDSIM_USERPTR_PIN; flags += SP_KFDSIM_USERPTR_PIN) {
		int fd = sp_kfdsim_open(), pfd[2], status;
		char c;
		pid_t pid;

		CHECK(pipe(pfd) == 0, "pipe: %s", strerror(errno));
		pid = fork();
		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {		/* registers, lets the GPU write, exits holding all */
			struct sp_dev *dev = sp_test_dev();
			struct sp_buf *b;

			close(pfd[0]);
			CHECK(sp_buf_alloc(dev, 4 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "alloc: %s",
			      sp_errmsg());
			CHECK(kfd_userptr(fd, sp_buf_addr(b), 4 * MiB, flags) == 0, "userptr: %s",
			      strerror(errno));
			gpu_fill(fd, 4 * MiB, 13);
			CHECK(write(pfd[1], "r", 1) == 1, "write: %s", strerror(errno));
			_exit(0);
		}
		close(pfd[1]);
		CHECK(read(pfd[0], &c, 1) == 1, "the child failed before registering");
		close(pfd[0]);
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
		      "child: status %#x", status);
		check_gone(fd, flags, 4 * MiB, 13, ESRCH);
		close(fd);
		CHECK_NOTHING_PINNED();
	}
}

static bool dmesg_has(const char *what)
{
	char line[512];
	bool found = false;
	FILE *f = popen("dmesg", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		found = found || strstr(line, what);
	pclose(f);
	return found;
}

static void anononly_refused(void)
{
	struct sp_dev *dev = sp_test_dev();
	int fd = sp_kfdsim_open(), mfd;
	struct sp_buf *b;
	void *anon, *mem;

	CHECK(sp_buf_alloc(dev, 2 * MiB, SP_NODE_DEFAULT, 0, &b) == 0, "alloc: %s", sp_errmsg());
	CHECK_ERR(kfd_userptr(fd, sp_buf_addr(b), 2 * MiB, SP_KFDSIM_USERPTR_ANONONLY), EPERM);
	CHECK(dmesg_has("refused: AMDGPU_GEM_USERPTR_ANONONLY, and the VMA has a file"),
	      "no message in the kernel log");
	/* as for a memfd */
	mfd = memfd_create("kfd_userptr", MFD_CLOEXEC);
	CHECK(mfd >= 0 && ftruncate(mfd, 2 * MiB) == 0, "memfd: %s", strerror(errno));
	mem = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(mem != MAP_FAILED, "mmap memfd: %s", strerror(errno));
	CHECK_ERR(kfd_userptr(fd, mem, 2 * MiB, SP_KFDSIM_USERPTR_ANONONLY), EPERM);
	/* anonymous memory passes, and without ANONONLY the buffer does */
	anon = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(anon != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(kfd_userptr(fd, anon, 2 * MiB, SP_KFDSIM_USERPTR_ANONONLY) == 0,
	      "anonymous memory refused: %s", strerror(errno));
	CHECK(ioctl(fd, SP_KFDSIM_IOC_DESTROY) == 0, "DESTROY: %s", strerror(errno));
	CHECK(kfd_userptr(fd, sp_buf_addr(b), 2 * MiB, 0) == 0, "userptr: %s", strerror(errno));
	close(fd);
	munmap(anon, 2 * MiB);
	munmap(mem, 2 * MiB);
	close(mfd);
	CHECK(sp_buf_free(b) == 0, "free: %s", sp_errmsg());
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

static const struct tap_case cases[] = {
	TAP_CASE_T(hmm_userptr_data_both_ways, 600),
	TAP_CASE_T(pinned_userptr_data_both_ways, 600),
	TAP_CASE(invalidation_then_revalidation),
	TAP_CASE(munmap_and_free_while_held),
	TAP_CASE(exit_while_held),
	TAP_CASE(anononly_refused),
};

TAP_MAIN(cases)
