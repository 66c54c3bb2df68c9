// SPDX-License-Identifier: MIT
/*
 * rc.h's queue pair on a librdmacm id: the id resolved the route and owns
 * the QP, which it moves to RTS itself when it connects or accepts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "rc.h"

static void cm_qp_destroy(struct sp_rc *e)
{
	if (e->cm_id && e->cm_id->qp)
		rdma_destroy_qp(e->cm_id);
	e->qp = NULL;
}

int sp_rc_cm_setup(struct sp_rc *e, struct rdma_cm_id *id, int cqe,
		   const struct ibv_qp_cap *cap, unsigned int flags, char *why, size_t len)
{
	struct ibv_qp_init_attr qa;
	int err;

	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s/%u", ibv_get_device_name(id->verbs->device),
		 (unsigned int)id->port_num);
	e->ctx = id->verbs;
	e->cm_id = id;
	e->port = id->port_num;
	e->cap = *cap;
	err = -sp_rc_pd_cq(e, cqe, flags, why, len);
	if (err)
		goto out;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = e->cq;
	qa.recv_cq = e->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap = *cap;
	if (rdma_create_qp(id, e->pd, &qa)) {
		err = errno ? errno : EIO;
		snprintf(why, len, "%s: rdma_create_qp: %s", e->name, strerror(err));
		goto out;
	}
	e->qp = id->qp;
	e->qp_destroy = cm_qp_destroy;
	return 0;
out:
	sp_rc_close(e);
	return -err;
}
