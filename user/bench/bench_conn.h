/* SPDX-License-Identifier: MIT */
/*
 * The benchmark's RDMA connection (bench_conn.c): the control messages on
 * the TCP connection, the queue pair through librdmacm, posting and
 * waiting for completions, and the latency ping-pongs, as bench_rdma.c's
 * client and server use them.
 */
#ifndef SP_BENCH_CONN_H
#define SP_BENCH_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "bench_int.h"
#include "rdma/rc.h"

#define SP_BENCH_PROTO		1
#define SP_RD_DEPTH		16	/* outstanding RDMA READs */
#define SP_RECV_DEPTH		512
#define SP_WAIT_S		60.0	/* no progress for this long: give up */

enum sp_cmd {
	SP_CMD_HELLO = 1, SP_CMD_ALLOC, SP_CMD_FREE, SP_CMD_WRITE_LAT, SP_CMD_SEND_LAT,
	SP_CMD_SEND_BW, SP_CMD_QUIT, SP_CMD_READY, SP_CMD_DONE,
};

/* Control message (both nodes are little-endian x86-64 or arm64). */
struct sp_bench_msg {
	uint32_t cmd;
	uint32_t kind;
	uint64_t size;		/* ALLOC: bytes; tests: message size */
	uint64_t addr;		/* ALLOC: the sender's buffer */
	uint64_t iters;		/* tests: iterations incl. warm-up */
	uint32_t rkey;
	int32_t status;		/* reply: 0 or -errno */
	char text[200];		/* reply: error message, HELLO: device name */
};

struct sp_conn {
	int sock;
	struct rdma_cm_id *listen;
	struct rdma_cm_id *id;
	struct sp_rc rc;		/* rdma/rc.h's PD, channel, CQ, QP on @id */
	bool events;			/* sleep on rc.ch (SP_BENCH_EVENTS) */
	unsigned int sends, recvs;	/* completions seen, not yet waited for */
	pid_t child;
};

int sp_bench_send_msg(struct sp_conn *c, struct sp_bench_msg *m);
int sp_bench_recv_msg(struct sp_conn *c, struct sp_bench_msg *m);
int sp_bench_call(struct sp_conn *c, struct sp_bench_msg *m, uint32_t want);
int sp_bench_port_plus_one(const char *port, char *out, size_t len);
int sp_bench_qp_setup(struct sp_conn *c, const struct sp_bench_opts *o, bool server);
void sp_bench_conn_param(struct rdma_conn_param *p);
void sp_bench_conn_close(struct sp_conn *c);
int sp_bench_poll(struct sp_conn *c, struct ibv_wc *wc, int max);
int sp_bench_post(struct sp_conn *c, enum ibv_wr_opcode op, struct sp_bench_mem *m,
		   size_t off, size_t len, uint64_t raddr, uint32_t rkey, uint64_t wr_id,
		   bool signaled);
int sp_bench_post_recv(struct sp_conn *c, struct sp_bench_mem *m, size_t off, size_t len);
int sp_bench_wait_one(struct sp_conn *c, bool want_recv);
int sp_bench_write_pingpong(struct sp_conn *c, struct sp_bench_mem *m, size_t half,
			     size_t size, uint64_t raddr, uint32_t rkey, uint64_t n,
			     bool client, double *lat);
int sp_bench_send_pingpong(struct sp_conn *c, struct sp_bench_mem *m, size_t half,
			    size_t size, uint64_t n, bool client, double *lat);
int sp_bench_send_sink(struct sp_conn *c, struct sp_bench_mem *m, size_t half,
			size_t size, uint64_t n);

#endif
