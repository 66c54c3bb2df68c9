// SPDX-License-Identifier: MIT
/*
 * examples/tensor_slab.c's data path with sp_kfdsim as the GPU: two ranks
 * (processes) on the two Soft-RoCE nodes run the example's all-reduce,
 * each rank's "GPU" reaching its slab as a KFD userptr or through the
 * slab's dma-buf (amdgpu's import), and doing the GPU's parts: it writes
 * the partial result (FILL, rank 0 in A, rank 1 in B), checks every byte
 * of both halves it adds before writing the "sum" (a third pattern: the
 * stand-in cannot add), and at the end checks every byte of A, where both
 * ranks must hold the sum. Every transfer goes from one slab into the
 * other, registered with plain ibv_reg_mr(). Nothing stays pinned after.
 */
#include "sp_test.h"

#include <poll.h>
#include <time.h>

#include "kfdsim.h"
#include "../../examples/example.h"

#define TENSOR_SLAB_GPU
#define main tensor_slab_main

enum { SEED_A = 0x7a0, SEED_B = 0x7b0, SEED_SUM = 0x75a };

static int gpu_fd = -1, gpu_import;
static uint64_t gpu_t;		/* the tensor's bytes: B starts there */

static void gpu_ioctl(unsigned long cmd, uint64_t off, uint64_t len, uint32_t seed)
{
	struct sp_kfdsim_gpu g = { .offset = off, .length = len, .seed = seed };

	if (gpu_import)
		cmd = cmd == SP_KFDSIM_IOC_FILL ? SP_KFDSIM_IOC_IMPORT_FILL :
						  SP_KFDSIM_IOC_IMPORT_CHECK;
	if (ioctl(gpu_fd, cmd, &g))
		DIE("kfdsim GPU: %s", strerror(errno));
	if (cmd != SP_KFDSIM_IOC_FILL && cmd != SP_KFDSIM_IOC_IMPORT_FILL && g.bad != ~0ULL)
		DIE("kfdsim GPU read a wrong byte at slab offset %llu (seed %#x)",
		    (unsigned long long)g.bad, seed);
}

static void gpu_attach(struct sp_buf *buf)
{
	gpu_fd = open(SP_KFDSIM_DEVICE, O_RDWR | O_CLOEXEC);
	if (gpu_fd < 0)
		DIE("%s: %s", SP_KFDSIM_DEVICE, strerror(errno));
	if (gpu_import) {
		struct sp_kfdsim_import imp = { 0 };

		if (sp_buf_export(buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &imp.fd) ||
		    ioctl(gpu_fd, SP_KFDSIM_IOC_IMPORT, &imp))
			DIE("kfdsim import: %s", strerror(errno));
		close(imp.fd);
	} else {
		struct sp_kfdsim_userptr u = { .addr = (uintptr_t)sp_buf_addr(buf),
					       .length = sp_buf_size(buf) };

		if (ioctl(gpu_fd, SP_KFDSIM_IOC_USERPTR, &u))
			DIE("kfdsim userptr: %s", strerror(errno));
	}
}

static void gpu_partial(uint8_t *slab, uint64_t off, uint64_t len, int rank)
{
	(void)slab;
	gpu_t = len;
	gpu_ioctl(SP_KFDSIM_IOC_FILL, off, len, rank ? SEED_B : SEED_A);
}

static void gpu_reduce(uint8_t *slab, uint64_t a_off, uint64_t b_off, uint64_t len)
{
	(void)slab;
	gpu_ioctl(SP_KFDSIM_IOC_CHECK, a_off, len, SEED_A);	/* rank 0's partial */
	gpu_ioctl(SP_KFDSIM_IOC_CHECK, b_off, len, SEED_B);	/* rank 1's */
	gpu_ioctl(SP_KFDSIM_IOC_FILL, a_off, len, SEED_SUM);
}

static int64_t gpu_check_sum(uint8_t *slab, uint64_t len)
{
	(void)slab;
	gpu_ioctl(SP_KFDSIM_IOC_CHECK, 0, len, SEED_SUM);
	return -1;
}

/* the stand-in's "GPU" writes with the CPU: nothing to fence */
static void gpu_before_nic(void)
{
}

static void gpu_after_nic(void)
{
}

int tensor_slab_main(int argc, char **argv);

#include "../../examples/tensor_slab.c"
#undef main

/* One rank in a child, its stdout and stderr into *out. */
static pid_t rank(char *const *argv, int *out)
{
	int pfd[2];
	pid_t pid;

	CHECK(pipe(pfd) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int argc = 0;

		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		while (argv[argc])
			argc++;
		_exit(tensor_slab_main(argc, (char **)argv));
	}
	close(pfd[1]);
	*out = pfd[0];
	return pid;
}

/*
 * Reads a rank's output until it prints @what, up to @secs: rank 1's
 * "listening on" (rdma_listen() done) before rank 0 starts, or rank 0's
 * "retrying" (its first connection was refused) before rank 1 starts in
 * the case that proves the retry. Keeps what it read in @text for
 * finish(). 0 when seen; -1, with what it printed and whether it exited,
 * when not.
 */
static int wait_for(pid_t pid, int out, const char *what, const char *who, char *text,
		    size_t size, int secs)
{
	struct timespec t0, now;
	size_t len = 0;
	int status;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	text[0] = '\0';
	for (;;) {
		struct pollfd p = { .fd = out, .events = POLLIN };
		ssize_t n;

		if (strstr(text, what))
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= secs || len + 1 >= size)
			break;
		if (poll(&p, 1, 1000) < 0 && errno != EINTR)
			break;
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		n = read(out, text + len, size - 1 - len);
		if (n <= 0)
			break;	/* the rank closed its output: it exited */
		len += (size_t)n;
		text[len] = '\0';
	}
	tap_diag("%s did not print \"%s\" in %lld s (%s); it printed: %s", who, what,
		 (long long)(now.tv_sec - t0.tv_sec),
		 waitpid(pid, &status, WNOHANG) == pid ? "exited" : "still running",
		 len ? text : "nothing");
	return -1;
}

/*
 * Waits up to @secs for @pid; prints @seen (what was read of its output
 * before) and the rest of its output; its exit status or -1.
 */
static int finish(pid_t pid, int out, const char *seen, const char *who, int secs)
{
	char text[4096];
	ssize_t n;
	int status = -1;
	size_t len = strlen(seen);

	for (int i = 0; i < secs * 10 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(100000);
	if (waitpid(pid, &status, WNOHANG) == 0) {
		tap_diag("%s still running after %d s: killed", who, secs);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		status = -1;
	}
	if (len > sizeof(text) - 1)
		len = sizeof(text) - 1;
	memcpy(text, seen, len);
	n = read(out, text + len, sizeof(text) - 1 - len);
	close(out);
	text[len + (n > 0 ? (size_t)n : 0)] = '\0';
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		tap_diag("%s: %s", who, line);
	return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * Both ranks on @port, the GPU reaching the slab as a userptr or (@import)
 * through the dma-buf import. Rank 1 first, rank 0 once it listens; with
 * @rank0_first, rank 0 first and rank 1 once rank 0 was refused and says it
 * retries (the example's retry after a rejection).
 */
static void allreduce(int import, const char *port, int rank0_first)
{
	/* 4 Mi floats (16 MiB tensors, a 32 MiB slab); 256 Ki on debug kernels */
	const char *elems = tap_debug_kernel() ? "262144" : "4194304";
	char *const r1[] = { "tensor_slab", "-l", "198.18.0.2", (char *)port, (char *)elems, NULL };
	char *const r0[] = { "tensor_slab", "198.18.0.2", (char *)port, (char *)elems, NULL };
	char seen[4096], seen0[4096] = "";
	struct sp_stats s;
	int o1, o0, rc1, rc0;
	pid_t p1, p0;

	close(sp_kfdsim_open());	/* skips, saying why, without sp_kfdsim */
	if (access("/sys/class/infiniband/rxe1", F_OK))
		SKIP("verbs device rxe1 not present (Soft-RoCE not set up)");
	gpu_import = import;
	seen[0] = '\0';
	if (rank0_first) {
		p0 = rank(r0, &o0);
		if (wait_for(p0, o0, "retrying", "rank 0", seen0, sizeof(seen0), 300)) {
			finish(p0, o0, seen0, "rank 0", 0);
			CHECK(0, "rank 0 never said it retries: rank 1 not started");
		}
		p1 = rank(r1, &o1);
	} else {
		p1 = rank(r1, &o1);
		if (wait_for(p1, o1, "listening on", "rank 1", seen, sizeof(seen), 300)) {
			finish(p1, o1, seen, "rank 1", 0);
			CHECK(0, "rank 1 never listened: rank 0 not started");
		}
		p0 = rank(r0, &o0);
	}
	rc0 = finish(p0, o0, seen0, "rank 0", 300);
	rc1 = finish(p1, o1, seen, "rank 1", rc0 ? 0 : 300);	/* alone, rank 1 waits forever */
	CHECK(rc0 == 0 && rc1 == 0, "rank 0 exited %d, rank 1 %d", rc0, rc1);
	/* an import's last dma-buf reference may go from a worker (delayed fput) */
	s = sp_test_stats();
	for (int i = 0; i < 500 && (s.buffers || s.pinned_bytes); i++) {
		usleep(10000);
		s = sp_test_stats();
	}
	CHECK(s.buffers == 0 && s.pinned_bytes == 0, "5 s after both ranks exited the module "
	      "holds %" PRIu64 " buffers, %" PRIu64 " bytes", s.buffers, s.pinned_bytes);
}

static void allreduce_gpu_userptr(void)
{
	allreduce(0, "13390", 0);
}

static void allreduce_gpu_dmabuf_import(void)
{
	allreduce(1, "13391", 0);
}

static void rank0_first_retries(void)
{
	allreduce(0, "13392", 1);
}

static const struct tap_case cases[] = {
	TAP_CASE_T(allreduce_gpu_userptr, 600),
	TAP_CASE_T(allreduce_gpu_dmabuf_import, 600),
	TAP_CASE_T(rank0_first_retries, 600),
};

TAP_MAIN(cases)
