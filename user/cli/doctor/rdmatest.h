/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl doctor's data-path test, what its two halves share:
 * rdmatest.c (--rdma-test on this node: loopback and port to port) and
 * peertest.c (--serve, and --peer HOST against it, over librdmacm). The
 * pattern fill/verify, bounded completion waits and one RDMA WRITE are in
 * rtutil.c, which both call; rdmatest.c calls peertest.c for --peer.
 */
#ifndef DR_RDMATEST_H
#define DR_RDMATEST_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "doctor.h"

struct sp_dev;

#define WAIT_MS		30000		/* every wait: a completion, a CM event */
#define LAT_ITERS	20		/* latency: 8-byte writes timed */
#define RT_MAGIC	0x53504454u	/* "SPDT": --serve/--peer messages */

/* rtutil.c */
uint64_t dr_rt_now_ns(void);
uint8_t dr_rt_pattern(uint32_t seed, uint64_t i);
void dr_rt_fill(uint8_t *p, size_t len, uint32_t seed);
int64_t dr_rt_verify(const uint8_t *p, size_t len, uint32_t seed);
int dr_rt_wait_wc(struct ibv_comp_channel *ch, struct ibv_cq *cq, struct ibv_wc *wc);
int dr_rt_write(struct ibv_qp *qp, struct ibv_comp_channel *ch, struct ibv_cq *cq,
		struct ibv_mr *lmr, uint64_t raddr, uint32_t rkey, size_t len, char *why,
		size_t wlen);
size_t dr_rt_max_msg(size_t size);
void dr_rt_fmt_rate(char *out, size_t len, size_t bytes, uint64_t ns);
/* peertest.c: --peer HOST, the results added to @c */
void dr_rt_peer_test(struct dr_ctx *c, struct sp_dev *spdev, const struct dr_rt_opts *o);

#endif
