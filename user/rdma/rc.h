/* SPDX-License-Identifier: MIT */
/*
 * One reliable-connected queue pair, brought up the same way by everything
 * in strixpeer that opens an RDMA connection: strixpeerctl doctor's
 * data-path tests (--rdma-test, --serve/--peer), strixpeerctl bench, and
 * the test programs (tests/lib/rdma_pair.h).
 *
 *   rc.c     a verbs device opened by name, the GID to address a port by,
 *            PD, completion channel, CQ, RC QP; RESET -> INIT -> RTR -> RTS
 *            against the other side's address; a bounded completion wait
 *            that says the QP's state when it times out; one signalled
 *            operation waited for; the data pattern's fill and verify.
 *   rc_cm.c  the same PD/channel/CQ/QP on a librdmacm id (the id moves the
 *            QP to RTS itself when it connects).
 *
 * Internal: a static archive (libsprdma.a) linked into strixpeerctl and the
 * tests, never into libstrixpeer. Functions that can fail return 0 or a
 * negative errno and write a sentence naming the device into @why.
 * Nothing here is thread-safe for one struct sp_rc; distinct ones are
 * independent.
 */
#ifndef SP_RDMA_RC_H
#define SP_RDMA_RC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct rdma_cm_id;

struct sp_rc {
	char name[96];			/* "dev/port", for messages */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;	/* NULL: polled only (SP_RC_POLLED) */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_cap cap;		/* what sp_rc_qp_create() asks for */
	uint8_t port;
	bool ib;			/* InfiniBand link: addressed by LID */
	bool gid_v4;			/* the GID is RoCE v2 carrying an IPv4 address */
	uint16_t lid;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;		/* the port's active MTU */
	struct rdma_cm_id *cm_id;	/* rc_cm.c: the id owning the QP ... */
	void (*qp_destroy)(struct sp_rc *e);	/* ... and how it goes */
	/* the caller's own registered memory, for callers that keep one */
	struct ibv_mr *mr;
	uint8_t *buf;
	uint64_t len;
};

/* What one side tells the other to connect to it. */
struct sp_rc_addr {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint16_t pad;
	uint32_t pad2;
	union ibv_gid gid;
};

/* RTR/RTS parameters beyond the other side's address. */
struct sp_rc_path {
	enum ibv_mtu mtu;	/* 0: this port's active MTU */
	uint8_t timeout;	/* local ACK timeout: 4.096 us << timeout */
	uint8_t retry_cnt;	/* transport retries; 7 = rxe retries forever */
	uint8_t rnr_retry;
	uint8_t rd_atomic;	/* outstanding RDMA READs, both directions */
	uint8_t hop_limit;
};

#define SP_RC_PATH_DEFAULT \
	{ .mtu = 0, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rd_atomic = 1, .hop_limit = 64 }

/* sp_rc_open() flags */
#define SP_RC_POLLED	0x1u	/* no completion channel: the caller busy-polls */
#define SP_RC_NO_QP	0x2u	/* PD and CQ only; sp_rc_qp_create() later */

/*
 * Opens verbs device @dev (by name), queries @port and picks its GID (RoCE
 * v2 with an IPv4 address, then RoCE v2, then any; none needed on
 * InfiniBand), allocates PD, channel, a CQ of @cqe entries and an RC QP of
 * @cap. -ENODEV: no such device (callers may skip); -ENOENT: no GID.
 * On failure @e holds nothing (sp_rc_close() is still safe).
 */
int sp_rc_open(struct sp_rc *e, const char *dev, unsigned int port, int cqe,
	       const struct ibv_qp_cap *cap, unsigned int flags, char *why, size_t len);
/* A new RC QP of e->cap on e's PD and CQ, destroying the one it had. */
int sp_rc_qp_create(struct sp_rc *e, char *why, size_t len);
/* PD, channel (unless SP_RC_POLLED) and a CQ of @cqe entries on e->ctx. */
int sp_rc_pd_cq(struct sp_rc *e, int cqe, unsigned int flags, char *why, size_t len);
/*
 * Destroys what sp_rc_open() or sp_rc_cm_setup() made (not the caller's
 * @mr, nor a librdmacm id); zeroes @e.
 */
void sp_rc_close(struct sp_rc *e);

/* @e's address for the other side, starting its send PSN at @psn. */
void sp_rc_local_addr(const struct sp_rc *e, uint32_t psn, struct sp_rc_addr *a);
/*
 * RESET -> INIT -> RTR -> RTS: @e's QP connected to @peer, sending from
 * @my_psn; remote write and read allowed. @p NULL: SP_RC_PATH_DEFAULT.
 */
int sp_rc_connect(struct sp_rc *e, uint32_t my_psn, const struct sp_rc_addr *peer,
		  const struct sp_rc_path *p, char *why, size_t len);
/* Back to RESET (its outstanding work flushed away, not completed). */
int sp_rc_reset(struct sp_rc *e);
enum ibv_qp_state sp_rc_qp_state(const struct sp_rc *e);	/* IBV_QPS_UNKNOWN on error */
const char *sp_rc_qp_state_str(enum ibv_qp_state s);

/*
 * One completion of any status into @wc: asleep on the channel (or polling
 * without one), at most @timeout_ms. -ETIMEDOUT: @why says how long and the
 * QP's state then; -EIO: the CQ failed.
 */
int sp_rc_wait(struct sp_rc *e, struct ibv_wc *wc, int timeout_ms, char *why, size_t len);
/*
 * Posts one @op of @sge to @raddr/@rkey (ignored for a SEND) with
 * @send_flags (IBV_SEND_SIGNALED for a completion).
 */
int sp_rc_post(struct sp_rc *e, enum ibv_wr_opcode op, const struct ibv_sge *sge,
	       uint64_t raddr, uint32_t rkey, uint64_t wr_id, unsigned int send_flags,
	       char *why, size_t wlen);
/*
 * One signalled @op of @len bytes from @lmr at @loff to @raddr/@rkey and its
 * completion, which must be a success.
 */
int sp_rc_rdma(struct sp_rc *e, enum ibv_wr_opcode op, struct ibv_mr *lmr, uint64_t loff,
	       uint64_t raddr, uint32_t rkey, uint32_t len, int timeout_ms, char *why,
	       size_t wlen);

/*
 * The data pattern: byte @pos of a transfer seeded @seed. Position-
 * dependent (any sub-range can be checked on its own, misplaced bytes
 * show) and seed-dependent in every bit.
 */
uint8_t sp_rc_pattern(uint64_t pos, uint32_t seed);
void sp_rc_fill(void *p, uint64_t len, uint64_t pos, uint32_t seed);
/* Index of the first wrong byte, or -1. */
int64_t sp_rc_verify(const void *p, uint64_t len, uint64_t pos, uint32_t seed);

/*
 * rc_cm.c: PD, channel (unless SP_RC_POLLED), a CQ of @cqe entries and an
 * RC QP of @cap on librdmacm's @id; @e->qp is the id's.
 */
int sp_rc_cm_setup(struct sp_rc *e, struct rdma_cm_id *id, int cqe,
		   const struct ibv_qp_cap *cap, unsigned int flags, char *why, size_t len);

#endif
