// SPDX-License-Identifier: MIT
/* rdma_churn: stale keys fail loudly */
#include "rdma_churn.h"

/*
 * What a test's own mistake looks like: a WRITE with the keys of the freed
 * 6 MiB buffer (its rkey, or its address with the new buffer's rkey)
 * fails at once with a remote access error on the sender, both QPs in
 * ERR; it does not hang. (A silent hang - responder in ERR, sender in
 * RTS, no completion - needs a responder error whose NAK never reaches
 * the sender: rxe's completer treats retry_cnt 7 as "retry forever".)
 */
void stale_keys_fail_loudly(void)
{
	struct churn c;
	struct ibv_mr *big_mr, *mr;
	struct mem big, small;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	uint32_t old_rkey, len = 4096;
	enum ibv_qp_state ini_s, tgt_s;
	uint8_t *old_addr;

	churn_open(&c);
	for (int k = 0; k < 2; k++) {
		const enum kind kind = k ? K_MMAP : K_STRIXPEER;

		for (int stale_rkey = 0; stale_rkey < 2; stale_rkey++) {
			mem_alloc(&c, &big, kind, BIG, 0);
			big_mr = ibv_reg_mr(c.tgt.pd, big.addr, BIG, ACCESS);
			CHECK(big_mr, "ibv_reg_mr 6 MiB: %s", strerror(errno));
			old_rkey = big_mr->rkey;
			old_addr = big.addr;
			CHECK_OK(ibv_dereg_mr(big_mr));
			mem_free(&big);
			mem_alloc(&c, &small, kind, len, 1);
			mr = ibv_reg_mr(c.tgt.pd, small.addr, len, ACCESS);
			CHECK(mr, "ibv_reg_mr: %s", strerror(errno));

			sge = (struct ibv_sge){ .addr = (uintptr_t)c.host, .length = len,
						.lkey = c.host_mr->lkey };
			wr.wr_id = 99;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = stale_rkey ? (uintptr_t)small.addr : (uintptr_t)old_addr;
			wr.wr.rdma.rkey = stale_rkey ? old_rkey : mr->rkey;
			CHECK_OK(ibv_post_send(c.ini.qp, &wr, &bad));
			if (!wait_wc(&c, &c.ini, &wc) || wc.status != IBV_WC_REM_ACCESS_ERR) {
				report(&c, 0, "a WRITE with a freed buffer's key did not fail with a remote access error");
				CHECK(0, "stale %s (%s): see above", stale_rkey ? "rkey" : "address",
				      k ? "mmap" : "strixpeer");
			}
			ini_s = wait_qp_state(&c, &c.ini, IBV_QPS_ERR);
			tgt_s = wait_qp_state(&c, &c.tgt, IBV_QPS_ERR);
			if (ini_s != IBV_QPS_ERR || tgt_s != IBV_QPS_ERR)
				report(&c, 0, "the QPs did not both reach ERR after the access error");
			CHECK(ini_s == IBV_QPS_ERR && tgt_s == IBV_QPS_ERR,
			      "QPs %s/%s %u ms after the access error", sp_rc_qp_state_str(ini_s),
			      sp_rc_qp_state_str(tgt_s), c.wait_ms);
			CHECK_OK(ibv_dereg_mr(mr));
			mem_free(&small);
			qps_reset(&c);
		}
	}
	/* and the connection works again */
	CHECK(churn_one(&c, 0, K_STRIXPEER, DEREG_THEN_FREE) == 0, "after the reset: see above");
	churn_close(&c);
}
