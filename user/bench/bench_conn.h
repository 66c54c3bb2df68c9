/* SPDX-License-Identifier: MIT */
/*
 * The benchmark's RDMA connection (bench_conn.c): the control messages and
 * the data queue pair through rdma/link.h, posting and waiting for
 * completions, and the latency ping-pongs, as bench_rdma.c's client and
 * server use them.
 */
#ifndef SP_BENCH_CONN_H
#define SP_BENCH_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

#include "bench_int.h"
#include "rdma/rc.h"
#include "rdma/link.h"

#define SP_RD_DEPTH		16	/* outstanding RDMA READs */
#define SP_RECV_DEPTH		512
#define SP_WAIT_S		60.0	/* no progress for this long: give up */
#define SP_BENCH_IDLE_MS	600000	/* the server, between two requests */

/*
 * Two connections to the server, both through rdma/link.h on the one
 * port: @link carries the requests (struct sp_link_msg, SP_MSG_*), @data
 * the measured traffic (its receive queue holds SEND figures' receives
 * only).
 */
struct sp_conn {
	struct sp_link link;
	struct sp_link_ep data;		/* data.rc: rdma/rc.h's PD, CQ, QP */
	bool linked;			/* @link is up */
	bool events;			/* sleep on data.rc.ch (SP_BENCH_EVENTS) */
	unsigned int sends, recvs;	/* completions seen, not yet waited for */
	pid_t child;
};

int sp_bench_send_msg(struct sp_conn *c, const struct sp_link_msg *m);
/* The next message, of type @want (0: any). */
int sp_bench_recv_msg(struct sp_conn *c, struct sp_link_msg *m, unsigned int want);
/* Request and reply; a negative status in the reply is the error ("server: ..."). */
int sp_bench_call(struct sp_conn *c, struct sp_link_msg *m, unsigned int want);
/* The data connection's queue pair for @o; the server's always has a channel. */
void sp_bench_data_qp(const struct sp_bench_opts *o, bool server, struct sp_link_qp *qp);
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
/*
 * bench_rdma.c's bandwidth loop: @n WRITEs or READs of @size from @m at
 * offset 0 to @raddr/@rkey, @depth outstanding, every min(@depth/2, 64)th
 * signalled; the seconds taken into @secs. strixpeerctl gpu proof's
 * figures use it too.
 */
int sp_bench_bw_run(struct sp_conn *c, enum ibv_wr_opcode op, struct sp_bench_mem *m,
		    size_t size, uint64_t raddr, uint32_t rkey, uint64_t n, unsigned int depth,
		    double *secs);
/* The median of @v[0..@n), sorting @v. */
double sp_bench_median(double *v, uint64_t n);
int sp_bench_send_sink(struct sp_conn *c, struct sp_bench_mem *m, size_t half,
			size_t size, uint64_t n);

#endif
