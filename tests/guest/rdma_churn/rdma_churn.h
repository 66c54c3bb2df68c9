/* SPDX-License-Identifier: MIT */
/* What the files of tests/guest/rdma_churn.c's program share (tests/guest/rdma_churn/). */
#ifndef SP_GUEST_RDMA_CHURN_H
#define SP_GUEST_RDMA_CHURN_H

#include "rdma_pair.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <time.h>

#define BIG		(6 * MiB)

#define SMALL_MAX	(8192)

#define ACCESS		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

#define MAX_REPORTS	3

#define MAX_FAILURES	10	/* 10 hangs: 200 s of the case's 600 */


enum kind { K_STRIXPEER, K_MMAP };

enum order { DEREG_THEN_FREE, FREE_THEN_DEREG };

struct churn {
	struct sp_rc ini, tgt;
	struct conn_info ini_ci, tgt_ci;
	uint8_t *host;
	struct ibv_mr *host_mr;
	struct sp_dev *dev;
	unsigned int iters, wait_ms, failures, reports;
	const char *variant;	/* of the iteration running, for reports */
	uint8_t timeout;	/* local ACK timeout: 14 (67 ms) unless a case says */
	uint8_t retry_cnt;	/* the requester's; 7 (rxe: forever) unless a case says */
	unsigned int naks_lost;	/* huge_unmapped_write: WRITEs whose NAK rxe lost */
	int have_node1;
};

/* One buffer of either kind. */
struct mem {
	enum kind kind;
	struct sp_buf *buf;
	uint8_t *addr;
	size_t len, maplen;
};


/* rdma_churn/churn.c: the churn loop: buffers, queue pairs, reports; churn_strixpeer, churn_mmap */
unsigned int env_uint(const char *name, unsigned int def);
uint64_t now_ms(void);
void mem_alloc(struct churn *c, struct mem *m, enum kind kind, size_t len, int node);
void mem_free(struct mem *m);
int page_node(void *p);
enum ibv_qp_state wait_qp_state(struct churn *c, struct sp_rc *n, enum ibv_qp_state want);
void dump_counters(const char *dev);
void report(struct churn *c, unsigned int it, const char *why);
int wait_wc(struct churn *c, struct sp_rc *n, struct ibv_wc *wc);
void qps_reset(struct churn *c);
void churn_open(struct churn *c);
void churn_close(struct churn *c);
int churn_one(struct churn *c, unsigned int it, enum kind kind, enum order order);
void churn(enum kind kind);
void churn_strixpeer(void);
void churn_mmap(void);

/* rdma_churn/stale.c: stale keys fail loudly */
void stale_keys_fail_loudly(void);

/* rdma_churn/huge.c: a WRITE beyond a 4097-byte MR on a 2 MiB page (issue 22) */
void huge_unmapped_write(void);

#endif /* SP_GUEST_RDMA_CHURN_H */
