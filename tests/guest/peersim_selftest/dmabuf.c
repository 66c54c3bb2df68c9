// SPDX-License-Identifier: MIT
/* peersim_selftest: dma-buf MRs */
#include "peersim_selftest.h"

/* --- dma-buf MRs (ibv_reg_dmabuf_mr) ---------------------------------------- */

/* The dma-buf MR ioctl exists (skips on an older sp_peersim.ko). */
static void need_dmabuf_mr(int fd)
{
	struct peersim_reg_dmabuf_mr r = { .fd = -1 };

	if (ioctl(fd, PEERSIM_IOC_REG_DMABUF_MR, &r) && errno == ENOTTY)
		SKIP("sp_peersim.ko has no PEERSIM_IOC_REG_DMABUF_MR");
}

/*
 * Registers a whole buffer of an exporter, then: DMA writes are seen through
 * the exporter's CPU mapping, CPU writes come back through DMA reads.
 */
static void dmabuf_roundtrip(enum sp_exporter kind, uint32_t flags)
{
	int fd = peersim_test_open();
	uint64_t before = peersim_live_mrs(fd), len = MiB;
	struct peersim_mr_info mi;
	struct sp_xbuf x;
	uint32_t mr;

	need_dmabuf_mr(fd);
	sp_xbuf_new(kind, len, 0, &x);
	mr = peersim_reg_dmabuf(fd, x.fd, 0, len, PEERSIM_ACCESS_WRITE, flags);
	CHECK(peersim_live_mrs(fd) == before + 1, "live_mrs not counted");
	dma_roundtrip(fd, mr, x.map, len, 21 + flags);
	CHECK_OK(peersim_mr_info(fd, mr, &mi));
	CHECK(mi.free_callbacks == 0 && mi.invalidated_at_ns == 0,
	      "%u move_notify calls from %s", mi.free_callbacks, sp_exporter_name[kind]);
	tap_diag("%s, %s: %u segments", sp_exporter_name[kind],
		 flags & PEERSIM_DMABUF_PINNED ? "pinned" : "dynamic", mi.nents);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	CHECK(peersim_live_mrs(fd) == before, "live_mrs not decremented");
	sp_xbuf_free(&x);
	close(fd);
}

void dmabuf_vgem_dynamic(void)
{
	dmabuf_roundtrip(SP_EXP_VGEM, 0);
}

void dmabuf_vgem_pinned(void)
{
	dmabuf_roundtrip(SP_EXP_VGEM, PEERSIM_DMABUF_PINNED);
}

void dmabuf_udmabuf_dynamic(void)
{
	dmabuf_roundtrip(SP_EXP_UDMABUF, 0);
}

void dmabuf_udmabuf_pinned(void)
{
	dmabuf_roundtrip(SP_EXP_UDMABUF, PEERSIM_DMABUF_PINNED);
}

/* Offset and length need no alignment; DMA stays inside the range. */
void dmabuf_unaligned(void)
{
	int fd = peersim_test_open();
	uint64_t len = 256 * 1024, off = 4096 + 123, n = 70001;
	uint8_t ones[2] = { 0xee, 0xee }, buf[16];
	struct sp_xbuf x;
	uint32_t mr, pmr;

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	memset(x.map, 0x11, len);
	for (int pinned = 0; pinned < 2; pinned++) {
		mr = peersim_reg_dmabuf(fd, x.fd, off, n, PEERSIM_ACCESS_WRITE,
					pinned ? PEERSIM_DMABUF_PINNED : 0);
		dma_roundtrip(fd, mr, x.map + off, n, 31 + pinned);
		x.map[off - 1] = 0x22;
		x.map[off + n] = 0x33;
		CHECK_OK(peersim_dma_write(fd, mr, 0, ones, 1));
		CHECK_OK(peersim_dma_write(fd, mr, n - 1, ones, 1));
		CHECK(x.map[off] == 0xee && x.map[off + n - 1] == 0xee, "ends not written");
		CHECK(x.map[off - 1] == 0x22 && x.map[off + n] == 0x33,
		      "DMA wrote outside the MR");
		CHECK_ERR(peersim_dma_write(fd, mr, n, ones, 1), EINVAL);
		CHECK_ERR(peersim_dma_read(fd, mr, n - 8, buf, 16), EINVAL);
		CHECK_OK(peersim_dereg_mr(fd, mr));
	}
	/* the last byte of the buffer, and a tail not ending on a page */
	mr = peersim_reg_dmabuf(fd, x.fd, len - 1, 1, PEERSIM_ACCESS_WRITE, 0);
	pmr = peersim_reg_dmabuf(fd, x.fd, 5, len - 10, 0, PEERSIM_DMABUF_PINNED);
	CHECK_OK(peersim_dma_write(fd, mr, 0, ones, 1));
	CHECK(x.map[len - 1] == 0xee, "last byte %#x", x.map[len - 1]);
	memset(buf, 0, sizeof(buf));
	CHECK_OK(peersim_dma_read(fd, pmr, len - 10 - 1, buf, 1));
	CHECK(buf[0] == x.map[len - 6], "read %#x, CPU sees %#x", buf[0], x.map[len - 6]);
	/* read-only MR: no DMA writes */
	CHECK_ERR(peersim_dma_write(fd, pmr, 0, ones, 1), EACCES);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	CHECK_OK(peersim_dereg_mr(fd, pmr));
	sp_xbuf_free(&x);
	close(fd);
}

void dmabuf_bad_requests(void)
{
	int fd = peersim_test_open(), pfd[2];
	uint64_t len = 64 * 1024, before;
	struct peersim_reg_dmabuf_mr r;
	struct sp_xbuf x;

	need_dmabuf_mr(fd);
	before = peersim_live_mrs(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);

	/* beyond the dma-buf's size, empty, overflowing */
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, len + 1, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, len - 10, 11, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, len, 1, 0, PEERSIM_DMABUF_PINNED, NULL),
		  EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 0, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, UINT64_MAX - 10, 100, 0, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 4096, UINT64_MAX, 0, 0, NULL), EINVAL);

	/* not a dma-buf, not open */
	CHECK_OK(pipe(pfd));
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, pfd[0], 0, 4096, 0, 0, NULL), EBADF);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, fd, 0, 4096, 0, 0, NULL), EBADF);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, -1, 0, 4096, 0, 0, NULL), EBADF);
	close(pfd[1]);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, pfd[1], 0, 4096, 0, 0, NULL), EBADF);
	close(pfd[0]);

	/* flags, access bits, reserved */
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 4096, 0, 1U << 1, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 4096, 0, 1U << 31, NULL), EINVAL);
	CHECK_ERR(peersim_reg_dmabuf_mr(fd, x.fd, 0, 4096, 1U << 1, 0, NULL), EINVAL);
	r = (struct peersim_reg_dmabuf_mr){ .fd = x.fd, .length = 4096, .reserved = 1 };
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_DMABUF_MR, &r), EINVAL);
	/* an older, smaller struct is refused */
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x08, 16), &r), EINVAL);
	CHECK(peersim_live_mrs(fd) == before, "a refused request registered an MR");

	/* a bad output pointer: the registration is undone */
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_DMABUF_MR, (void *)8), EFAULT);
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	sp_xbuf_free(&x);
	close(fd);
}

/* The MR holds its own reference: closing the dma-buf fd changes nothing. */
void dmabuf_fd_closed(void)
{
	int fd = peersim_test_open();
	uint64_t len = 128 * 1024;
	uint32_t mr[2];
	struct sp_xbuf x;
	uint8_t b;

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	mr[0] = peersim_reg_dmabuf(fd, x.fd, 0, len / 2, PEERSIM_ACCESS_WRITE, 0);
	mr[1] = peersim_reg_dmabuf(fd, x.fd, len / 2, len / 2, PEERSIM_ACCESS_WRITE,
				   PEERSIM_DMABUF_PINNED);
	close(x.fd);
	x.fd = -1;
	close(x.card);	/* the GEM handle goes too; the mapping stays */
	x.card = -1;
	dma_roundtrip(fd, mr[0], x.map, len / 2, 41);
	dma_roundtrip(fd, mr[1], x.map + len / 2, len / 2, 42);
	CHECK_OK(peersim_dereg_mr(fd, mr[0]));
	/* dereg of one leaves the other working */
	b = 0x5c;
	CHECK_OK(peersim_dma_write(fd, mr[1], 7, &b, 1));
	CHECK(x.map[len / 2 + 7] == 0x5c, "byte %#x", x.map[len / 2 + 7]);
	CHECK_OK(peersim_dereg_mr(fd, mr[1]));
	sp_xbuf_free(&x);
	close(fd);
}

/* After deregistration the dma-buf is the exporter's as before. */
void dmabuf_dereg_then_usable(void)
{
	int fd = peersim_test_open();
	uint64_t len = 64 * 1024;
	struct peersim_mr_info mi;
	struct sp_xbuf x;
	uint32_t mr, n = 0;
	uint8_t b = 0;

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	for (int round = 0; round < 4; round++) {
		mr = peersim_reg_dmabuf(fd, x.fd, 0, len, PEERSIM_ACCESS_WRITE,
					round & 1 ? PEERSIM_DMABUF_PINNED : 0);
		CHECK_OK(peersim_dereg_mr(fd, mr));
		CHECK_ERR(peersim_dereg_mr(fd, mr), ENOENT);
		CHECK_ERR(peersim_dma_read(fd, mr, 0, &b, 1), ENOENT);
		CHECK_ERR(peersim_mr_info(fd, mr, &mi), ENOENT);
		CHECK_ERR(peersim_mr_segs(fd, mr, NULL, &n), ENOENT);
		/* CPU access through the exporter still works */
		memset(x.map, round, len);
		CHECK(x.map[len - 1] == round, "CPU write lost");
	}
	/* and a new registration sees the CPU's bytes */
	mr = peersim_reg_dmabuf(fd, x.fd, 0, len, 0, 0);
	CHECK_OK(peersim_dma_read(fd, mr, len - 1, &b, 1));
	CHECK(b == 3, "read %#x", b);
	CHECK_OK(peersim_dereg_mr(fd, mr));
	sp_xbuf_free(&x);
	close(fd);
}

/* Closing the peersim fd deregisters its dma-buf MRs and drops the buffers. */
void dmabuf_close_releases(void)
{
	int ctl = peersim_test_open(), fd = peersim_test_open();
	uint64_t len = 64 * 1024, before;
	long bufs_before, bufs_after;
	struct sp_xbuf x, u;
	int have_u = 0, status;
	pid_t pid;

	need_dmabuf_mr(ctl);
	before = peersim_live_mrs(ctl);
	bufs_before = sp_dmabuf_count();
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	for (int i = 0; i < 4; i++)
		peersim_reg_dmabuf(fd, x.fd, i * 4096 + i, 4096, PEERSIM_ACCESS_WRITE,
				   i & 1 ? PEERSIM_DMABUF_PINNED : 0);
	if (access("/dev/udmabuf", F_OK) == 0) {
		sp_xbuf_new(SP_EXP_UDMABUF, len, 0, &u);
		peersim_reg_dmabuf(fd, u.fd, 100, len - 200, 0, 0);
		have_u = 1;
	}
	CHECK(peersim_live_mrs(ctl) == before + 4 + have_u, "live_mrs %" PRIu64,
	      peersim_live_mrs(ctl));
	/* the MRs hold the buffers: closing our fds keeps them alive */
	sp_xbuf_free(&x);
	if (have_u)
		sp_xbuf_free(&u);
	close(fd);
	CHECK(peersim_live_mrs(ctl) == before, "close left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);
	bufs_after = sp_dmabuf_count();
	if (bufs_before >= 0)
		CHECK(bufs_after == bufs_before, "%ld dma-bufs before, %ld after",
		      bufs_before, bufs_after);
	else
		tap_diag("debugfs dma_buf/bufinfo not readable: buffer count not checked");

	/* a process that exits with dma-buf MRs registered */
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int cfd = open(PEERSIM_DEVICE_PATH, O_RDWR);
		struct sp_xbuf y;

		sp_xbuf_new(SP_EXP_VGEM, len, 0, &y);
		if (cfd < 0 ||
		    peersim_reg_dmabuf_mr(cfd, y.fd, 0, len, PEERSIM_ACCESS_WRITE, 0, NULL) ||
		    peersim_reg_dmabuf_mr(cfd, y.fd, 0, len, 0, PEERSIM_DMABUF_PINNED, NULL))
			_exit(3);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(peersim_live_mrs(ctl) == before, "exit left %" PRIu64 " MRs",
	      peersim_live_mrs(ctl) - before);
	if (bufs_before >= 0)
		CHECK(sp_dmabuf_count() == bufs_before, "%ld dma-bufs before, %ld after exit",
		      bufs_before, sp_dmabuf_count());
	close(ctl);
}

/* DMA in flight while a dma-buf MR is deregistered: it ends with ENOENT. */
void dmabuf_dereg_during_dma(void)
{
	int fd = peersim_test_open();
	uint64_t len = MiB;
	struct dma_race r = { .fd = fd, .len = len };
	struct sp_xbuf x;
	pthread_t t[2];

	need_dmabuf_mr(fd);
	sp_xbuf_new(SP_EXP_VGEM, len, 0, &x);
	r.buf = malloc(len);
	CHECK(r.buf, "malloc");
	memset(r.buf, 0, len);
	for (int round = 0; round < 4; round++) {
		struct dma_race rr[2];

		r.mr = peersim_reg_dmabuf(fd, x.fd, 0, len, PEERSIM_ACCESS_WRITE,
					  round & 1 ? PEERSIM_DMABUF_PINNED : 0);
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
	sp_xbuf_free(&x);
	close(fd);
}
