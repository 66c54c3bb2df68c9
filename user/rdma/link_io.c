// SPDX-License-Identifier: MIT
/*
 * link.h's control messages: SENDs on the control connection's queue
 * pair into the receives kept posted there, each wait bounded by the
 * link's timeout and watching the connection's events (a disconnect ends
 * it at once).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "link.h"
#include "link_int.h"

#define WR_SEND		100u

/*
 * One completion on the control queue pair (a receive counted in
 * l->ready, our send in *@sent), watching the connection's events too;
 * the deadline and what we wait for given.
 */
static int ctl_completion(struct sp_link *l, int64_t deadline, unsigned int *sent,
			  const char *what, char *why, size_t len)
{
	struct sp_rc *rc = &l->ctl.rc;
	bool armed = false;

	for (;;) {
		struct pollfd pfd[2] = { { .fd = rc->ch->fd, .events = POLLIN },
					 { .fd = l->ch->fd, .events = POLLIN } };
		struct ibv_wc wc;
		int n = ibv_poll_cq(rc->cq, 1, &wc);

		if (n < 0) {
			snprintf(why, len, "%s: polling the control completions failed", rc->name);
			return -EIO;
		}
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				snprintf(why, len, "the connection to %s broke while waiting for %s: %s",
					 l->peer, what, ibv_wc_status_str(wc.status));
				return -ECONNRESET;
			}
			if (wc.opcode & IBV_WC_RECV)
				l->ready++;
			else if (wc.wr_id == WR_SEND)
				(*sent)++;
			return 0;
		}
		if (l->gone) {
			snprintf(why, len, "%s closed the connection while we waited for %s", l->peer,
				 what);
			return -ECONNRESET;
		}
		if (!armed) {
			if (ibv_req_notify_cq(rc->cq, 0)) {
				snprintf(why, len, "%s: ibv_req_notify_cq failed", rc->name);
				return -EIO;
			}
			armed = true;
			continue;	/* what completed before the request */
		}
		if (!sp_link_left_ms(deadline)) {
			snprintf(why, len, "waited %d s for %s from %s: nothing came (the control queue pair is %s)",
				 l->timeout_ms / 1000, what, l->peer,
				 sp_rc_qp_state_str(sp_rc_qp_state(rc)));
			return -ETIMEDOUT;
		}
		n = poll(pfd, 2, sp_link_left_ms(deadline));
		if (n < 0 && errno != EINTR) {
			snprintf(why, len, "poll: %s", strerror(errno));
			return -errno;
		}
		if (n > 0 && (pfd[0].revents & POLLIN)) {
			struct ibv_cq *cq;
			void *ctx;

			if (ibv_get_cq_event(rc->ch, &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				armed = false;
			}
		}
		if (n > 0 && (pfd[1].revents & POLLIN)) {
			struct rdma_cm_event *ev;

			if (rdma_get_cm_event(l->ch, &ev) == 0)
				sp_link_other_event(l, ev);
		}
	}
}

int sp_link_send(struct sp_link *l, const struct sp_link_msg *m, char *why, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)l->wire[SP_LINK_NRECV],
			       .length = SP_LINK_MSG_LEN, .lkey = l->mr->lkey };
	int64_t deadline = sp_link_now_ms() + l->timeout_ms;
	unsigned int sent = 0;
	char what[64];
	int ret;

	sp_link_msg_put(l->wire[SP_LINK_NRECV], l->tool, m);
	ret = sp_rc_post(&l->ctl.rc, IBV_WR_SEND, &sge, 0, 0, WR_SEND, IBV_SEND_SIGNALED, why,
			 len);
	snprintf(what, sizeof(what), "the acknowledgement of our %s", sp_link_type_name(m->type));
	while (!ret && !sent)
		ret = ctl_completion(l, deadline, &sent, what, why, len);
	return ret;
}

int sp_link_recv(struct sp_link *l, struct sp_link_msg *m, unsigned int want, char *why,
		 size_t len)
{
	int64_t deadline = sp_link_now_ms() + l->timeout_ms;
	unsigned int sent = 0, slot;
	char what[64], e[200];
	int ret = 0;

	snprintf(what, sizeof(what), "%s", want ? sp_link_type_name(want) : "a request");
	while (!ret && !l->ready)
		ret = ctl_completion(l, deadline, &sent, what, why, len);
	if (ret)
		return ret;
	slot = l->next;
	l->next = (l->next + 1) % SP_LINK_NRECV;
	l->ready--;
	ret = sp_link_msg_get(l->wire[slot], l->tool, m, e, sizeof(e));
	if (ret)
		snprintf(why, len, "%s sent %s", l->peer, e);
	else if (want && m->type != want) {
		snprintf(why, len, "%s sent %s, expected %s", l->peer, sp_link_type_name(m->type),
			 sp_link_type_name(want));
		ret = -EPROTO;
	}
	if (!ret)
		ret = sp_link_post_recv(l, slot, why, len);
	return ret;
}

int sp_link_call(struct sp_link *l, struct sp_link_msg *m, unsigned int want, char *why,
		 size_t len)
{
	int ret = sp_link_send(l, m, why, len);

	if (!ret)
		ret = sp_link_recv(l, m, want, why, len);
	if (!ret && m->status < 0) {
		snprintf(why, len, "server: %s", m->text[0] ? m->text : strerror(-m->status));
		ret = m->status;
	}
	return ret;
}
