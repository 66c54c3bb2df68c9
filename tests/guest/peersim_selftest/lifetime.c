// SPDX-License-Identifier: MIT
/* peersim_selftest: lifetime: deregistration, bounds, handles, fd passing, races */
#include "peersim_selftest.h"

/* --- lifetime ------------------------------------------------------------------- */

void dereg_then_use(void)
{
	int fd = peersim_test_open();
	uint8_t *p = map_anon(page_size(), PROT_READ | PROT_WRITE);
	struct peersim_mr_info mi;
	uint32_t mr, n = 0;

	mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	CHECK_ERR(peersim_dereg_mr(fd, mr), ENOENT);
	CHECK_ERR(peersim_dma_write(fd, mr, 0, p, 1), ENOENT);
	CHECK_ERR(peersim_dma_read(fd, mr, 0, p, 1), ENOENT);
	CHECK_ERR(peersim_mr_info(fd, mr, &mi), ENOENT);
	CHECK_ERR(peersim_mr_segs(fd, mr, NULL, &n), ENOENT);
	CHECK_ERR(peersim_dereg_mr(fd, 0), ENOENT);
	CHECK_ERR(peersim_dereg_mr(fd, 0x7fffffff), ENOENT);
	munmap(p, page_size());
	close(fd);
}

void dma_bounds(void)
{
	int fd = peersim_test_open();
	uint64_t len = 3 * page_size();
	uint8_t *p = map_anon(len, PROT_READ | PROT_WRITE);
	uint8_t buf[16] = { 0 };
	uint32_t mr = reg_gup(fd, p + 8, len - 16, PEERSIM_ACCESS_WRITE);

	CHECK_ERR(peersim_dma_write(fd, mr, len - 16, buf, 1), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, len - 20, buf, 5), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, len, buf, 0), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, 1, buf, UINT64_MAX), EINVAL);
	CHECK_ERR(peersim_dma_read(fd, mr, UINT64_MAX, buf, 2), EINVAL);
	CHECK_OK(peersim_dma_read(fd, mr, len - 16, buf, 0));
	CHECK_OK(peersim_dma_read(fd, mr, len - 20, buf, 4));
	/* bad user pointers */
	CHECK_ERR(peersim_dma_write(fd, mr, 0, (void *)8, 4), EFAULT);
	CHECK_ERR(peersim_dma_read(fd, mr, 0, (void *)8, 4), EFAULT);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	munmap(p, len);
	close(fd);
}

void handles_per_fd(void)
{
	int fd = peersim_test_open(), fd2 = peersim_test_open();
	uint8_t *p = map_anon(page_size(), PROT_READ | PROT_WRITE);
	struct peersim_mr_info mi;
	uint32_t mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);

	CHECK_ERR(peersim_mr_info(fd2, mr, &mi), ENOENT);
	CHECK_ERR(peersim_dma_read(fd2, mr, 0, p, 1), ENOENT);
	CHECK_ERR(peersim_dereg_mr(fd2, mr), ENOENT);
	CHECK_OK(peersim_mr_info(fd, mr, &mi));
	close(fd2);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	munmap(p, page_size());
	close(fd);
}

void close_frees_all(void)
{
	int ctl = peersim_test_open(), fd = peersim_test_open();
	uint64_t before = peersim_live_mrs(ctl);
	uint8_t *p = map_anon(16 * page_size(), PROT_READ | PROT_WRITE);
	int status;
	pid_t pid;

	for (int i = 0; i < 8; i++)
		reg_gup(fd, p + i * 2 * page_size(), page_size() + (i ? 17 : 0),
			i & 1 ? 0 : PEERSIM_ACCESS_WRITE);
	CHECK(peersim_live_mrs(ctl) == before + 8, "live_mrs %" PRIu64 ", before %" PRIu64,
	      peersim_live_mrs(ctl), before);
	close(fd);
	CHECK(peersim_live_mrs(ctl) == before, "close left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);

	/* a process that exits with MRs registered */
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int cfd = open(PEERSIM_DEVICE_PATH, O_RDWR);
		uint8_t *q = mmap(NULL, MiB, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

		if (cfd < 0 || q == MAP_FAILED)
			_exit(2);
		/* disjoint: DMA-API debug flags overlapping mappings */
		for (int i = 0; i < 4; i++)
			if (peersim_reg_mr(cfd, q + i * (MiB / 4) + 100, MiB / 4 - 4096,
					   PEERSIM_ACCESS_WRITE, NULL))
				_exit(3);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(peersim_live_mrs(ctl) == before, "exit left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);

	/* an MR outlives munmap of its range (the pages stay pinned) */
	fd = peersim_test_open();
	{
		uint32_t mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);
		uint8_t b = 0x77, c = 0;

		CHECK_OK(munmap(p, 16 * page_size()));
		CHECK_OK(peersim_dma_write(fd, mr, 5, &b, 1));
		CHECK_OK(peersim_dma_read(fd, mr, 5, &c, 1));
		CHECK(c == 0x77, "pinned page read back %#x", c);
	}
	close(fd);
	CHECK(peersim_live_mrs(ctl) == before, "MRs left behind");
	close(ctl);
}

/* An fd passed over a unix socket keeps its MRs usable by the receiver. */
void fd_passing(void)
{
	int fd = peersim_test_open(), sv[2];
	uint8_t *p = map_anon(page_size(), PROT_READ | PROT_WRITE);
	uint32_t mr = reg_gup(fd, p, page_size(), PEERSIM_ACCESS_WRITE);
	int status;
	pid_t pid;

	memset(p, 0x42, page_size());
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		char cbuf[CMSG_SPACE(sizeof(int))], dummy;
		struct iovec iov = { .iov_base = &dummy, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		uint8_t b = 0;
		int rfd;

		close(fd);
		if (recvmsg(sv[1], &msg, 0) != 1 || !CMSG_FIRSTHDR(&msg))
			_exit(2);
		memcpy(&rfd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
		if (peersim_dma_read(rfd, mr, 9, &b, 1) || b != 0x42)
			_exit(3);
		b = 0x43;
		if (peersim_dma_write(rfd, mr, 10, &b, 1))
			_exit(4);
		_exit(0);
	}
	{
		char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, dummy = 'x';
		struct iovec iov = { .iov_base = &dummy, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
		CHECK(sendmsg(sv[0], &msg, 0) == 1, "sendmsg: %s", strerror(errno));
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(p[10] == 0x43, "receiver's DMA write not seen: %#x", p[10]);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	close(sv[0]);
	close(sv[1]);
	munmap(p, page_size());
	close(fd);
}

void *dma_race_thread(void *arg)
{
	struct dma_race *r = arg;

	for (;;) {
		int ret = (r->rounds & 1) ?
			  peersim_dma_write(r->fd, r->mr, 0, r->buf, r->len) :
			  peersim_dma_read(r->fd, r->mr, 0, r->buf, r->len);

		if (ret) {
			r->err = errno;
			break;
		}
		r->rounds++;
	}
	return NULL;
}

/* DMA in flight while the MR is deregistered: it ends with ENOENT. */
void dereg_during_dma(void)
{
	int fd = peersim_test_open();
	uint64_t len = 2 * MiB;
	uint8_t *p = map_anon(len, PROT_READ | PROT_WRITE);
	struct dma_race r = { .fd = fd, .len = len };
	pthread_t t[2];

	r.buf = malloc(len);
	CHECK(r.buf, "malloc");
	memset(r.buf, 0, len);
	for (int round = 0; round < 5; round++) {
		struct dma_race rr[2];

		r.mr = reg_gup(fd, p, len, PEERSIM_ACCESS_WRITE);
		for (int i = 0; i < 2; i++) {
			rr[i] = r;
			rr[i].rounds = i;
			CHECK(pthread_create(&t[i], NULL, dma_race_thread, &rr[i]) == 0, "thread");
		}
		usleep(20000 + round * 10000);
		CHECK_OK(peersim_dereg_mr(fd, r.mr));
		for (int i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			CHECK(rr[i].err == ENOENT, "DMA ended with %s", strerror(rr[i].err));
		}
	}
	free(r.buf);
	munmap(p, len);
	close(fd);
}
