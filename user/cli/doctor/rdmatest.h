/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl doctor's data-path test, what its two halves share:
 * rdmatest.c (--rdma-test on this node: loopback and port to port) and
 * peertest.c (serve, and peer HOST against it, over rdma/link.h). Both
 * bring their queue pairs up with rdma/rc.h (which has the data pattern
 * and the bounded completion waits) and call rtutil.c; rdmatest.c calls
 * peertest.c for --peer.
 */
#ifndef DR_RDMATEST_H
#define DR_RDMATEST_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "doctor.h"
#include "rdma/rc.h"

struct sp_dev;

#define WAIT_MS		30000		/* every wait: a completion, a CM event */
#define LAT_ITERS	20		/* latency: 8-byte writes timed */
/* rtutil.c */
uint64_t dr_rt_now_ns(void);
int dr_rt_write(struct sp_rc *e, struct ibv_mr *lmr, uint64_t raddr, uint32_t rkey, size_t len,
		char *why, size_t wlen);
size_t dr_rt_max_msg(size_t size);
void dr_rt_fmt_rate(char *out, size_t len, size_t bytes, uint64_t ns);
/* peertest.c: --peer HOST, the results added to @c */
void dr_rt_peer_test(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_rt_opts *o);

#endif
