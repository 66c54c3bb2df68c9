// SPDX-License-Identifier: MIT
/*
 * Lifetime tests: a buffer lives while its handle or any mapping holds it,
 * and after every way of letting go the memory is back - in the module's
 * own accounting and in MemFree.
 */
#include "sp_test.h"

#include <sys/socket.h>

/*
 * MemFree drifts on its own (page cache, slab), so compare it with its
 * value while the buffer was held: releasing @size bytes must bring back
 * at least @size minus some slack.
 */
#define MEMFREE_SLACK (16 * MiB)

static void check_memfree_returned(uint64_t held, uint64_t size)
{
	uint64_t now = 0;

	/* freed pages can sit in per-cpu lists for a moment */
	for (int i = 0; i < 20; i++) {
		now = sp_free_bytes(-1);
		if (now >= held + size - MEMFREE_SLACK)
			return;
		usleep(50000);
	}
	CHECK(now >= held + size - MEMFREE_SLACK, "free %llu MiB, %llu MiB while held",
	      (unsigned long long)(now / MiB), (unsigned long long)(held / MiB));
}

static void free_while_mapped(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_info info = { 0 };
	uint64_t before = sp_free_bytes(-1), held;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 128 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	held = sp_free_bytes(-1);
	CHECK(held + 100 * MiB < before, "free memory did not drop");
	p = sp_raw_map(fd, &a);
	info.handle = a.handle;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info));
	CHECK(info.map_count == 1, "map_count %u", info.map_count);
	sp_fill(p, a.size, 0, 11);
	CHECK_OK(sp_raw_free(fd, a.handle));
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info), ENOENT);
	/* the mapping still holds the memory */
	CHECK(sp_test_stats().pinned_bytes == a.size, "pinned dropped while mapped");
	CHECK(sp_verify(p, a.size, 0, 11) < 0, "content after free");
	munmap(p, a.size);
	CHECK_NOTHING_PINNED();
	check_memfree_returned(held, a.size);
	close(fd);
}

static void close_while_mapped(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	uint64_t held;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 64 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	held = sp_free_bytes(-1);
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 12);
	close(fd);
	CHECK(sp_test_stats().buffers == 1, "buffer gone while mapped");
	CHECK(sp_verify(p, a.size, 0, 12) < 0, "content after close");
	/* a partial unmap splits the VMA; both halves keep the buffer */
	munmap(p, 32 * MiB);
	CHECK(sp_test_stats().buffers == 1, "buffer gone after partial unmap");
	CHECK(sp_verify(p + 32 * MiB, 32 * MiB, 32 * MiB, 12) < 0, "second half");
	munmap(p + 32 * MiB, 32 * MiB);
	CHECK_NOTHING_PINNED();
	check_memfree_returned(held, 64 * MiB);
}

/* After fork the mapping is shared; the fd is the parent's only. */
static void fork_shares_mapping(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	int status;
	uint8_t *p;
	pid_t pid;

	CHECK_OK(sp_raw_alloc(fd, 8 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 21);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct strixpeer_buf_alloc b;

		CHECK(sp_verify(p, a.size, 0, 21) < 0, "child sees parent's data");
		sp_fill(p, MiB, 0, 22);
		/* the inherited fd is not the child's to use */
		CHECK_ERR(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, 0, &b), EACCES);
		CHECK_ERR(sp_raw_free(fd, a.handle), EACCES);
		CHECK_ERR(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (off_t)a.mmap_offset), EACCES);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child failed");
	CHECK(sp_verify(p, MiB, 0, 22) < 0, "parent sees child's write");
	CHECK(sp_verify(p + MiB, a.size - MiB, MiB, 21) < 0, "rest unchanged");
	CHECK_OK(sp_raw_free(fd, a.handle));
	munmap(p, a.size);
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* The parent frees and unmaps; the child's inherited mapping keeps it. */
static void fork_child_outlives(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	int go[2], status;
	uint8_t *p;
	pid_t pid;
	char c;

	CHECK_OK(sp_raw_alloc(fd, 4 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 23);
	CHECK_OK(pipe(go));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close(fd);
		CHECK(read(go[0], &c, 1) == 1, "wait");
		CHECK(sp_verify(p, a.size, 0, 23) < 0, "child content after parent let go");
		_exit(0);
	}
	CHECK_OK(sp_raw_free(fd, a.handle));
	munmap(p, a.size);
	close(fd);
	CHECK(sp_test_stats().buffers == 1, "buffer freed under the child");
	CHECK(write(go[1], "x", 1) == 1, "go");
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child failed");
	CHECK_NOTHING_PINNED();
}

/*
 * The fd passed to another process: that process cannot use it (it is not
 * the opener), but holding it keeps the buffers; its close releases them.
 */
static void fd_passed_over_socket(void)
{
	struct strixpeer_buf_alloc a;
	int sv[2], fd, status;
	pid_t pid;
	char c;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* a process unrelated to the opener: receives only the fd */
		int rfd = sp_recv_fd(sv[1]);
		struct strixpeer_buf_info info = { .handle = 1 };

		CHECK_ERR(ioctl(rfd, STRIXPEER_IOC_BUF_INFO, &info), EACCES);
		CHECK_ERR(mmap(NULL, 4096, PROT_READ, MAP_SHARED, rfd, 1ULL << 40), EACCES);
		CHECK(write(sv[1], "r", 1) == 1, "ack");
		CHECK(read(sv[1], &c, 1) == 1, "wait");
		close(rfd);
		CHECK(write(sv[1], "c", 1) == 1, "ack");
		_exit(0);
	}
	fd = sp_test_open();
	CHECK_OK(sp_raw_alloc(fd, 16 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK(a.handle == 1, "first handle is %u", a.handle);
	sp_send_fd(sv[0], fd);
	CHECK(read(sv[0], &c, 1) == 1 && c == 'r', "child checks");
	close(fd);
	/* the receiver still holds the file, so the buffer is alive */
	CHECK(sp_test_stats().buffers == 1, "buffer gone while the fd is held");
	CHECK(write(sv[0], "g", 1) == 1, "go");
	CHECK(read(sv[0], &c, 1) == 1 && c == 'c', "child closed");
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child failed");
	CHECK_NOTHING_PINNED();
}

static void many_buffers(void)
{
	struct sp_dev *dev = sp_test_dev();
	enum { N = 1000 };
	static struct sp_buf *bufs[N];
	struct sp_stats st;

	for (int i = 0; i < N; i++) {
		size_t sz = 4096 * (1 + i % 7);

		CHECK(sp_buf_alloc(dev, sz, SP_NODE_DEFAULT, 0, &bufs[i]) == 0,
		      "buffer %d: %s", i, sp_errmsg());
		sp_fill(sp_buf_addr(bufs[i]), sz, 0, (uint32_t)i);
	}
	st = sp_test_stats();
	CHECK(st.buffers == N, "buffers %llu", (unsigned long long)st.buffers);
	for (int i = 0; i < N; i++)
		CHECK(sp_verify(sp_buf_addr(bufs[i]), sp_buf_size(bufs[i]), 0, (uint32_t)i) < 0,
		      "buffer %d content", i);
	/* free half explicitly, leave the rest to close */
	for (int i = 0; i < N; i += 2)
		CHECK_OK(sp_buf_free(bufs[i]));
	CHECK(sp_test_stats().buffers == N / 2, "half freed");
	sp_dev_close(dev);
	CHECK_NOTHING_PINNED();
}

/* Killed while allocating and while holding buffers: everything returns. */
static void killed_mid_allocation(void)
{
	for (int round = 0; round < 4; round++) {
		int status;
		pid_t pid = fork();

		CHECK(pid >= 0, "fork");
		if (pid == 0) {
			int fd = sp_test_open();
			uint32_t held[3] = { 0 };

			for (unsigned int n = 0;; n++) {
				struct strixpeer_buf_alloc a;

				if (held[n % 3])
					sp_raw_free(fd, held[n % 3]);
				held[n % 3] = 0;
				if (sp_raw_alloc(fd, 96 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a) == 0) {
					held[n % 3] = a.handle;
					if (round & 1) {
						uint8_t *m = sp_raw_map(fd, &a);

						m[a.size - 1] = 1;
						munmap(m, a.size);
					}
				}
			}
		}
		usleep(200000 + 150000 * round);
		kill(pid, SIGKILL);
		CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status), "child not killed");
		CHECK_NOTHING_PINNED();
	}
}

static const struct tap_case cases[] = {
	TAP_CASE(free_while_mapped),
	TAP_CASE(close_while_mapped),
	TAP_CASE(fork_shares_mapping),
	TAP_CASE(fork_child_outlives),
	TAP_CASE(fd_passed_over_socket),
	TAP_CASE_T(many_buffers, 180),
	TAP_CASE_T(killed_mid_allocation, 120),
};

TAP_MAIN(cases)
