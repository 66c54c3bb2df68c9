// SPDX-License-Identifier: MIT
/*
 * Real RDMA into strixpeer buffers: two Soft-RoCE devices on the two ends
 * of a veth pair act as two nodes, each driven by its own process. The
 * target registers a strixpeer buffer with a plain ibv_reg_mr(); the
 * initiator RDMA-WRITEs from its host memory into it, RDMA-READs it back
 * and SENDs into it. Every byte is verified on the side that received it.
 */
#include "rdma_pair.h"

#include <sys/utsname.h>

/* Transfer sizes, from one byte to 64 MiB, each at an unaligned offset (ascending). */
static const struct {
	uint64_t len;
	uint64_t off;
} sizes[] = {
	{ 1, 0 }, { 1, 4095 }, { 7, 13 }, { 4096, 0 }, { 4097, 4093 },
	{ 65536 + 13, 2 * MiB - 5 }, { MiB, 333 }, { 2 * MiB + 1, 2 * MiB - 1 },
	{ 16 * MiB, 4 * MiB + 100 }, { 64 * MiB, 8 * MiB + 7 },
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/*
 * Largest transfer to run: SP_RDMA_MAX when set (the suite sets it on
 * debug kernels, where KASAN makes rxe's per-packet work many times
 * slower), and for READs on 6.1 at most 4 MiB + 1 (rxe there acknowledges
 * large READs very slowly: "rdma_rxe: Failed sending ACK").
 */
static uint64_t size_limit(bool is_read)
{
	const char *env = getenv("SP_RDMA_MAX");
	uint64_t limit = env && *env ? strtoull(env, NULL, 0) : UINT64_MAX;
	struct utsname u;

	uname(&u);
	if (is_read && strncmp(u.release, "6.1.", 4) == 0 && limit > 4 * MiB + 1)
		limit = 4 * MiB + 1;
	if (limit != UINT64_MAX)
		tap_diag("transfers above %llu bytes not run on this kernel%s",
			 (unsigned long long)limit, env && *env ? " (SP_RDMA_MAX)" : "");
	return limit;
}

static void reg_mr_on_strixpeer_buffer(void)
{
	struct pair p;

	pair_open(&p, MiB);	/* the target registered its buffer */
	tap_diag("target registered %llu MiB strixpeer buffer (rkey 0x%x)",
		 (unsigned long long)(TARGET_BUF / MiB), p.peer.rkey);
	pair_close(&p);
}

static void rdma_write_into_buffer(void)
{
	uint64_t limit = size_limit(false);
	struct pair p;

	pair_open(&p, 64 * MiB);
	for (size_t i = 0; i < NSIZES && sizes[i].len <= limit; i++) {
		struct msg m = { .cmd = CMD_VERIFY, .off = sizes[i].off, .len = sizes[i].len,
				 .seed = 100 + (uint32_t)i };

		/* host bytes at [0, len) are the pattern of the remote range */
		sp_fill(p.host, sizes[i].len, sizes[i].off, m.seed);
		post_rdma(&p, IBV_WR_RDMA_WRITE, 0, sizes[i].off, sizes[i].len);
		xfer(p.sock, &m);
		CHECK(m.result < 0, "WRITE %llu bytes at %llu: byte %lld wrong",
		      (unsigned long long)sizes[i].len, (unsigned long long)sizes[i].off,
		      (long long)m.result);
	}
	pair_close(&p);
}

static void rdma_read_from_buffer(void)
{
	uint64_t limit = size_limit(true);
	struct pair p;

	pair_open(&p, 64 * MiB);
	for (size_t i = 0; i < NSIZES && sizes[i].len <= limit; i++) {
		struct msg m = { .cmd = CMD_FILL, .off = sizes[i].off, .len = sizes[i].len,
				 .seed = 200 + (uint32_t)i };
		int64_t bad;

		xfer(p.sock, &m);
		memset(p.host, 0, sizes[i].len);
		post_rdma(&p, IBV_WR_RDMA_READ, 0, sizes[i].off, sizes[i].len);
		bad = sp_verify(p.host, sizes[i].len, sizes[i].off, m.seed);
		CHECK(bad < 0, "READ %llu bytes at %llu: byte %lld wrong",
		      (unsigned long long)sizes[i].len, (unsigned long long)sizes[i].off,
		      (long long)bad);
	}
	pair_close(&p);
}

static void send_into_buffer(void)
{
	uint64_t limit = size_limit(false);
	struct pair p;

	pair_open(&p, 64 * MiB);
	for (size_t i = 0; i < NSIZES && sizes[i].len <= limit; i++) {
		struct msg m = { .cmd = CMD_POST_RECV, .off = sizes[i].off, .len = sizes[i].len,
				 .seed = 300 + (uint32_t)i };

		xfer(p.sock, &m);
		CHECK(m.result == 0, "post_recv: %lld", (long long)m.result);
		sp_fill(p.host, sizes[i].len, sizes[i].off, m.seed);
		post_rdma(&p, IBV_WR_SEND, 0, 0, sizes[i].len);
		m.cmd = CMD_WAIT_RECV;
		xfer(p.sock, &m);
		CHECK(m.result < 0, "SEND %llu bytes into %llu: byte %lld wrong",
		      (unsigned long long)sizes[i].len, (unsigned long long)sizes[i].off,
		      (long long)m.result);
	}
	pair_close(&p);
}

/*
 * A registered buffer that is freed and unmapped keeps its pages pinned by
 * the MR: RDMA into it still lands in pages nobody else owns, and the
 * memory comes back at ibv_dereg_mr.
 */
static void mr_outlives_buffer(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct sp_buf *buf;
	uint64_t free_before = sp_free_bytes(-1), held;

	list = ibv_get_device_list(NULL);
	CHECK(list, "devices");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name("SP_RDMA_TARGET", "rxe1")))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		SKIP("verbs device not present");
	pd = ibv_alloc_pd(ctx);
	CHECK(sp_buf_alloc(dev, 32 * MiB, SP_NODE_DEFAULT, 0, &buf) == 0, "%s", sp_errmsg());
	mr = ibv_reg_mr(pd, sp_buf_addr(buf), 32 * MiB, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr: %s", strerror(errno));
	CHECK_OK(sp_buf_free(buf));
	CHECK_NOTHING_PINNED();	/* strixpeer let go; the MR's pins hold the pages */
	held = sp_free_bytes(-1);
	CHECK(held + 24 * MiB < free_before, "pages freed under the MR");
	CHECK_OK(ibv_dereg_mr(mr));
	for (int i = 0; i < 20 && sp_free_bytes(-1) < held + 16 * MiB; i++)
		usleep(50000);
	CHECK(sp_free_bytes(-1) >= held + 16 * MiB, "memory not back after dereg");
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	sp_dev_close(dev);
}

static const struct tap_case cases[] = {
	TAP_CASE_T(reg_mr_on_strixpeer_buffer, 120),
	TAP_CASE_T(rdma_write_into_buffer, 600),
	TAP_CASE_T(rdma_read_from_buffer, 600),
	TAP_CASE_T(send_into_buffer, 600),
	TAP_CASE_T(mr_outlives_buffer, 120),
};

TAP_MAIN(cases)
