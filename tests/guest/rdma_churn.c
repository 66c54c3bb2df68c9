// SPDX-License-Identifier: MIT
/*
 * Registration churn across NUMA nodes (issue 16's "QP hang"): over and
 * over, a 6 MiB buffer on node 0 is allocated, registered and freed, then
 * a 4-8 KiB buffer on node 1 is allocated and registered, and rxe0
 * RDMA-WRITEs into it through rxe1; the bytes, the node of the page and
 * the state of both QPs are checked every time. The same loop runs with
 * strixpeer buffers and, side by side, with plain anonymous mmap memory
 * bound to the same nodes (mbind), so that a failure says whether
 * strixpeer matters.
 *
 * Every wait is bounded (SP_CHURN_WAIT_MS, default 20000 ms of the
 * guest's clock, which runs fast on some kernels under TCG; a WRITE of
 * 8 KiB completes in milliseconds). When a WRITE does not
 * complete, completes with an error, or leaves either QP outside RTS, the
 * case prints both QPs (ibv_query_qp), what both CQs hold, rxe's counters
 * of both devices, 'rdma res show qp' and the kernel log, then resets and
 * reconnects the QPs and goes on, so that a long run counts the failures
 * (the case fails when there was any; it stops after MAX_FAILURES). SP_CHURN_ITERS=N runs N iterations
 * per case instead of the default (90; 15 on debug kernels).
 *
 * Issue 16's report - receiving QP (rxe1) in ERR, sender in RTS, no
 * completion, nothing in dmesg - did not reproduce here (6.1, 6.12, sid:
 * thousands of iterations per case, strixpeer and mmap alike). On these
 * kernels a WRITE with a stale rkey, a stale address or beyond the MR
 * fails at once with IBV_WC_REM_ACCESS_ERR on the sender, and both QPs
 * then reach ERR (the requester's just after its completion is posted:
 * stale_keys_fail_loudly waits for the state, bounded). The reported state is what rxe shows
 * when the responder is in ERR and no NAK reaches the requester (an error
 * that sends none, e.g. a receive CQ overflow, or a QP the application
 * moved to ERR; or a NAK that rxe's completer frees unread, issue 22:
 * huge_unmapped_write) while the requester's retry_cnt is 7: rxe_comp.c never
 * counts retry_cnt 7 down, so the WRITE is retried forever. With
 * retry_cnt 6 the same WRITE completes with IBV_WC_RETRY_EXC_ERR in about
 * half a second (timeout 14). rdma_pair.h connects with retry_cnt 7: the
 * bounded waits here are what turn such a hang into a report.
 */
/* The cases, a file per section, are in tests/guest/rdma_churn/; here the table and main. */
#include "rdma_churn/rdma_churn.h"

/*
 * libibverbs' first device scan loads every provider library, seconds over
 * the VM's 9p root on a debug kernel: once here, before the cases fork.
 */
__attribute__((constructor)) static void verbs_preload(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (list)
		ibv_free_device_list(list);
}

static const struct tap_case cases[] = {
	TAP_CASE_T(churn_strixpeer, 600),
	TAP_CASE_T(churn_mmap, 600),
	TAP_CASE_T(stale_keys_fail_loudly, 120),
	TAP_CASE_T(huge_unmapped_write, 600),
};

TAP_MAIN(cases)
