// SPDX-License-Identifier: MIT
/*
 * Test helper (not a TAP program) for tests/guest/cli-guest.sh:
 *
 *   hold_buffer MIB            allocates one strixpeer buffer of MIB MiB,
 *                              prints "ready <pid>" and holds it until killed
 *   hold_buffer orphan MIB     allocates (mapped) and forks; the child keeps
 *                              the /dev/strixpeer fd and the mapping, the
 *                              parent prints "ready <child pid>" and exits:
 *                              the child is re-parented (to init or a
 *                              subreaper) and holds the buffer in pause()
 *                              until killed
 *   hold_buffer inflight MIB   allocates, exports a dma-buf, sends its fd
 *                              with SCM_RIGHTS over a socketpair, closes the
 *                              sending end, the dma-buf fd, the handle and
 *                              /dev/strixpeer; keeps the receiving end open
 *                              and never reads it: the dma-buf (and the
 *                              buffer) is then held by no process's fd
 *                              table or mappings, only by the message in
 *                              flight. Prints "ready <pid> <dma-buf inode>";
 *                              killing it closes the socket and frees all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strixpeer.h"

static int send_fd(int sock, int fd)
{
	char byte = 'x';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	memset(&u, 0, sizeof(u));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int inflight(struct sp_dev *dev, struct sp_buf *buf)
{
	struct stat st;
	int sv[2], fd;

	if (sp_buf_export(buf, 0, &fd) < 0) {
		fprintf(stderr, "hold_buffer: %s\n", sp_errmsg());
		return 1;
	}
	if (fstat(fd, &st) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) ||
	    send_fd(sv[0], fd)) {
		perror("hold_buffer: inflight");
		return 1;
	}
	close(fd);
	close(sv[0]);
	if (sp_buf_free(buf) < 0) {
		fprintf(stderr, "hold_buffer: %s\n", sp_errmsg());
		return 1;
	}
	sp_dev_close(dev);
	printf("ready %d %llu\n", (int)getpid(), (unsigned long long)st.st_ino);
	fflush(stdout);
	for (;;)
		pause();	/* sv[1] stays open, never read */
}

int main(int argc, char **argv)
{
	const char *mode = argc == 3 ? argv[1] : "";
	struct sp_dev *dev;
	struct sp_buf *buf;
	pid_t child;

	if (argc < 2 || argc > 3 ||
	    (argc == 3 && strcmp(mode, "orphan") && strcmp(mode, "inflight"))) {
		fprintf(stderr, "usage: hold_buffer [orphan|inflight] MIB\n");
		return 2;
	}
	if (sp_dev_open(NULL, &dev) < 0 ||
	    sp_buf_alloc(dev, strtoull(argv[argc - 1], NULL, 10) << 20,
			 SP_NODE_DEFAULT, 0, &buf) < 0) {
		fprintf(stderr, "hold_buffer: %s\n", sp_errmsg());
		return 1;
	}
	if (!strcmp(mode, "inflight"))
		return inflight(dev, buf);
	if (!strcmp(mode, "orphan")) {
		fflush(stdout);
		child = fork();
		if (child < 0) {
			perror("hold_buffer: fork");
			return 1;
		}
		if (child > 0) {
			/* the child holds everything it inherited */
			printf("ready %d\n", (int)child);
			return 0;
		}
		for (;;)
			pause();
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
