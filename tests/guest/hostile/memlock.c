// SPDX-License-Identifier: MIT
/* hostile: the memlock charge across exec, fd passing and fork */
#include "hostile.h"

/*
 * The device as packaged: root:DEV_GID 0660 (main() puts the owner and
 * mode back once every case ran).
 */
void device_for_group(void)
{
	CHECK_OK(chown(STRIXPEER_DEVICE_PATH, 0, DEV_GID));
	CHECK_OK(chmod(STRIXPEER_DEVICE_PATH, 0660));
}

/* nobody, in the device's group, no capabilities, RLIMIT_MEMLOCK @limit. */
void become_nobody(uint64_t limit)
{
	struct rlimit rl = { .rlim_cur = limit, .rlim_max = limit };
	gid_t g = DEV_GID;

	CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
	CHECK_OK(setgroups(1, &g));
	CHECK_OK(setresgid(NOBODY, NOBODY, NOBODY));
	CHECK_OK(setresuid(NOBODY, NOBODY, NOBODY));
}

int wait_child(pid_t pid)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int raw_export(int fd, uint32_t handle, uint32_t flags)
{
	struct strixpeer_buf_export e = { .handle = handle, .flags = flags };

	if (ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e) < 0)
		return -errno;
	return e.fd;
}

/*
 * One step of the exec chain (argv: --exec-step N RESULT_FD): allocate
 * 8 MiB, export it without O_CLOEXEC (the dma-buf outlives this image),
 * report "N rc" and exec the next step. The last step reports "end" and
 * waits for its parent to look, holding every fd the chain left open.
 */
int exec_step(int n, int out)
{
	struct strixpeer_buf_alloc a;
	char line[64], arg[16], outs[16];
	int fd = open(STRIXPEER_DEVICE_PATH, O_RDWR);	/* inherited on purpose */
	int rc = -1;

	if (fd >= 0) {
		rc = sp_raw_alloc(fd, LIMIT, STRIXPEER_NODE_DEFAULT, 0, &a) ? -errno : 0;
		if (!rc && raw_export(fd, a.handle, 0) < 0)
			rc = -1000;
	} else {
		rc = -2000 - errno;
	}
	snprintf(line, sizeof(line), "%d %d\n", n, rc);
	if (write(out, line, strlen(line)) < 0)
		return 1;
	if (n == 9) {
		if (write(out, "end\n", 4) < 0)
			return 1;
		pause();
		return 0;
	}
	snprintf(arg, sizeof(arg), "%d", n + 1);
	snprintf(outs, sizeof(outs), "%d", out);
	execl(self_exe, self_exe, "--exec-step", arg, outs, (char *)NULL);
	return 1;
}

void exec_loop_stays_within_memlock(void)
{
	struct sp_stats st;
	char line[64];
	int pfd[2], got = 0, ok = 0, edquot = 0;
	FILE *f;
	pid_t pid;

	CHECK_NOTHING_PINNED();
	device_for_group();
	CHECK_OK(pipe(pfd));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close(pfd[0]);
		become_nobody(LIMIT);
		_exit(exec_step(0, pfd[1]));
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	while (fgets(line, sizeof(line), f) && strcmp(line, "end\n")) {
		int n, rc;

		CHECK(sscanf(line, "%d %d", &n, &rc) == 2, "step said: %s", line);
		got++;
		if (rc == 0)
			ok++;
		else if (rc == -EDQUOT)
			edquot++;
		else
			tap_diag("step %d: %d", n, rc);
	}
	st = sp_test_stats();
	kill(pid, SIGKILL);
	wait_child(pid);
	fclose(f);
	CHECK(got == 10, "%d steps reported", got);
	CHECK(ok == 1 && edquot == 9, "%d allocations succeeded, %d refused with EDQUOT (want 1, 9)",
	      ok, edquot);
	CHECK(st.pinned_bytes <= LIMIT, "the chain pinned %" PRIu64 " bytes with an 8 MiB limit",
	      st.pinned_bytes);
	CHECK_NOTHING_PINNED();
}

/* nobody allocates @size, exports it and sends the dma-buf to @sock. */
static int alloc_export_send(int sock, uint64_t size)
{
	struct strixpeer_buf_alloc a;
	int fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int dfd;

	if (fd < 0)
		return 10;
	if (sp_raw_alloc(fd, size, STRIXPEER_NODE_DEFAULT, 0, &a))
		return errno == EDQUOT ? 11 : 12;
	dfd = raw_export(fd, a.handle, STRIXPEER_EXPORT_CLOEXEC);
	if (dfd < 0)
		return 13;
	sp_send_fd(sock, dfd);
	return 0;	/* exit closes the device and the dma-buf fd */
}

void fd_passing_stays_within_memlock(void)
{
	int sv[2], held;
	pid_t pid;

	CHECK_NOTHING_PINNED();
	device_for_group();
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	if (pid == 0) {
		become_nobody(LIMIT);
		_exit(alloc_export_send(sv[1], LIMIT));
	}
	held = sp_recv_fd(sv[0]);
	CHECK(wait_child(pid) == 0, "first allocation");
	CHECK(sp_test_stats().pinned_bytes == LIMIT, "the dma-buf keeps the buffer");

	/* root holds nobody's buffer: it is still nobody's pinned memory */
	pid = fork();
	if (pid == 0) {
		become_nobody(LIMIT);
		_exit(alloc_export_send(sv[1], 4096));
	}
	CHECK(wait_child(pid) == 11, "nobody pinned past its limit while its buffer was passed away");

	close(held);
	CHECK_NOTHING_PINNED();
	pid = fork();
	if (pid == 0) {
		become_nobody(LIMIT);
		_exit(alloc_export_send(sv[1], LIMIT));
	}
	held = sp_recv_fd(sv[0]);
	CHECK(wait_child(pid) == 0, "the charge was not given back with the buffer");
	close(held);
	close(sv[0]);
	close(sv[1]);
	CHECK_NOTHING_PINNED();
}

void fork_keeps_the_charge(void)
{
	int go[2], ready[2];
	pid_t pid, holder;
	char c;

	CHECK_NOTHING_PINNED();
	device_for_group();
	CHECK_OK(pipe(go));
	CHECK_OK(pipe(ready));
	holder = fork();
	if (holder == 0) {
		struct strixpeer_buf_alloc a;
		int fd;

		become_nobody(LIMIT);
		fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (fd < 0 || sp_raw_alloc(fd, LIMIT, STRIXPEER_NODE_DEFAULT, 0, &a))
			_exit(10);
		sp_raw_map(fd, &a);
		if (fork() == 0) {	/* the child inherits the mapping */
			close(fd);
			if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) < 0)
				_exit(1);
			_exit(0);
		}
		_exit(0);	/* the parent leaves: handle and mapping go */
	}
	CHECK(wait_child(holder) == 0, "allocation");
	CHECK(read(ready[0], &c, 1) == 1, "the child");
	CHECK(sp_test_stats().pinned_bytes == LIMIT, "the child's mapping keeps the buffer");
	pid = fork();
	if (pid == 0) {
		int sv[2];

		become_nobody(LIMIT);
		CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
		_exit(alloc_export_send(sv[1], 4096));
	}
	CHECK(wait_child(pid) == 11, "nobody pinned past its limit while a child held its buffer");
	CHECK(write(go[1], "g", 1) == 1, "release the child");
	close(go[1]);
	for (int i = 0; i < 600 && sp_test_stats().buffers; i++)
		usleep(100000);	/* the orphan exits on its own */
	CHECK_NOTHING_PINNED();
}
