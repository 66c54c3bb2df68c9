/* SPDX-License-Identifier: MIT */
/*
 * Two Soft-RoCE "nodes" for tests and the demo: the target process owns a
 * strixpeer buffer registered with a plain ibv_reg_mr(); the initiator
 * process owns host memory and drives RDMA WRITE / READ / SEND into the
 * target's buffer. The two talk over a socketpair (struct msg) so the
 * target checks the bytes it received itself.
 *
 * Environment: SP_RDMA_TARGET / SP_RDMA_INITIATOR name the verbs devices
 * (default rxe1 / rxe0); tests/vm/rxe-setup.sh creates both.
 */
#ifndef SP_RDMA_PAIR_H
#define SP_RDMA_PAIR_H

#include "sp_test.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

#include "rdma/rc.h"

#define TARGET_BUF	(80 * MiB)
#define WAIT_MS		120000

struct conn_info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
	union ibv_gid gid;
};

/*
 * A node is rdma/rc.h's struct sp_rc: one device's PD, channel, CQ and RC
 * QP (the bring-up strixpeerctl doctor and bench use too), with the node's
 * registered buffer in its mr/buf/len.
 */

/* Control messages between the two processes. */
enum { CMD_FILL = 1, CMD_VERIFY, CMD_POST_RECV, CMD_WAIT_RECV, CMD_INFO, CMD_QUIT };

struct msg {
	uint32_t cmd;
	uint32_t seed;
	uint64_t off;
	uint64_t len;
	int64_t result;
	/* CMD_INFO: the target buffer as strixpeer reports it */
	uint64_t page_size;
	uint32_t nr_chunks;
	int32_t node;
};

void pin_cpu(int cpu);

const char *dev_name(const char *env, const char *def);

/* @name's port 1, addressed by the RoCE v2 GID carrying its IPv4 address. */
void node_open(struct sp_rc *n, const char *name);

struct conn_info node_info(struct sp_rc *n);

/*
 * RESET -> RTS (rdma/rc.h). @timeout is the local ACK timeout (4.096 us <<
 * timeout; rdma_pair uses 14, 67 ms), @retry_cnt the requester's transport
 * retry count: 7 is what rdma_pair's own tests use, and rxe's completer
 * never counts it down (a WRITE whose NAK is lost is retried forever:
 * rxe_comp.c); 0-6 make such a WRITE fail with IBV_WC_RETRY_EXC_ERR after
 * retry_cnt + 1 timeouts.
 */
void node_connect_opts(struct sp_rc *n, const struct conn_info *me,
		       const struct conn_info *peer, uint8_t timeout, uint8_t retry_cnt);

void node_connect(struct sp_rc *n, const struct conn_info *me, const struct conn_info *peer);

/*
 * One completion, whatever its status (node_wait_any), or one that must
 * be a success (node_wait); event driven: no busy polling under TCG. On timeout the QP is in RTS when the peer's QP
 * went to ERR without a NAK reaching us, or rxe lost it (issue 22); rxe
 * retries retry_cnt 7 forever (tests/guest/rdma_churn.c).
 */
struct ibv_wc node_wait_any(struct sp_rc *n);

struct ibv_wc node_wait(struct sp_rc *n);

void xfer(int sock, struct msg *m);

/*
 * How the target makes its memory and MR, when a test wants something else
 * than the default (a strixpeer buffer registered with plain ibv_reg_mr):
 * setup() sets n->buf, n->len and n->mr; verify() (optional) checks bytes
 * through another view; teardown() undoes setup().
 */
struct target_ops {
	void (*setup)(struct sp_rc *n, struct sp_dev *dev);
	int64_t (*verify)(struct sp_rc *n, uint64_t off, uint64_t len, uint32_t seed);
	void (*teardown)(struct sp_rc *n);
};

extern const struct target_ops *pair_target_ops;

/*
 * The target node: a strixpeer buffer registered with plain ibv_reg_mr
 * (or pair_target_ops), then serving the initiator's requests until
 * CMD_QUIT.
 */
void target_main(int sock);

struct pair {
	struct sp_rc n;
	struct conn_info peer;
	uint8_t *host;
	uint64_t host_len;
	int sock;
	pid_t target;
};

void pair_open(struct pair *p, uint64_t host_len);

void pair_close(struct pair *p);

void post_rdma(struct pair *p, enum ibv_wr_opcode op, uint64_t local_off,
	       uint64_t remote_off, uint64_t len);

#endif /* SP_RDMA_PAIR_H */
