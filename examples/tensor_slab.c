// SPDX-License-Identifier: MIT
/*
 * tensor_slab - tensors live in the slab: a two-rank all-reduce with no
 * staging copy
 *
 *   rank 1: tensor_slab -l ADDR [PORT [ELEMS]]   (ADDR: this node's RDMA IP)
 *   rank 0: tensor_slab HOST [PORT [ELEMS]]      (default 13380, 4 Mi floats)
 *
 * Each rank keeps its tensors in one strixpeer buffer, the slab, which
 * the GPU computes in and the NIC registers once with a plain ibv_reg_mr()
 * - any verbs provider (mlx4, mlx5, Soft-RoCE, USB4/Thunderbolt) pins such
 * pages. The slab has two tensors of ELEMS floats: A, where rank 0 computes
 * its partial result and both end with the sum, and B, rank 1's partial.
 * Every transfer goes from a rank's slab straight into the same offset of
 * the other's (RC RDMA WRITE, then a SEND saying it landed):
 *  1. each GPU computes its partial (rank 0 in A, rank 1 in B);
 *  2. reduce-scatter: rank 0 sends A's second half, rank 1 B's first;
 *  3. each GPU adds its half: A[half r] = A[half r] + B[half r];
 *  4. all-gather: each sends its half of A; both hold the sum in A.
 * The CPU stands in for the GPU below (gpu_partial(), gpu_reduce()); the
 * fences a real GPU needs are at gpu_before_nic() and gpu_after_nic()
 * (docs/cluster.md, "Tensors live in the slab": read from ROCm's and
 * Vulkan's documentation, not tried on hardware). How the GPU reaches the
 * slab (docs/gpu-memory.md): HIP hipHostRegister(slab, size, 0) then
 * hipHostGetDevicePointer(), or hipImportExternalMemory() of
 * sp_buf_export()'s dma-buf; Vulkan VK_EXT_external_memory_dma_buf on that
 * dma-buf. Exit status 0 when rank's A holds the sum, every element checked.
 *
 * On a cluster (README):
 *   cc -O2 tensor_slab.c $(pkg-config --cflags --libs strixpeer librdmacm libibverbs) \
 *       -o tensor_slab
 *   nodeB$ ./tensor_slab -l 10.0.0.2        nodeA$ ./tensor_slab 10.0.0.2
 */
#include <string.h>
#include <rdma/rdma_verbs.h>
#include <strixpeer.h>
#include "example.h"

struct slab_addr { uint64_t addr; uint32_t rkey, pad; };

#ifndef TENSOR_SLAB_GPU
/* The GPU's view of the slab (HIP: the device pointer of the registration). */
static void gpu_attach(struct sp_buf *buf)
{
	(void)buf;
}

/* The partial result a rank's GPU computes into [off, off + len). */
static float partial(int rank, uint64_t i)
{
	return (float)(i % 1024) * (float)(rank + 1);
}

static void gpu_partial(uint8_t *slab, uint64_t off, uint64_t len, int rank)
{
	float *t = (float *)(slab + off);

	for (uint64_t i = 0; i < len / 4; i++)
		t[i] = partial(rank, i);
}

/* A[half] += B[half]: the kernel of step 3. */
static void gpu_reduce(uint8_t *slab, uint64_t a_off, uint64_t b_off, uint64_t len)
{
	float *a = (float *)(slab + a_off), *b = (float *)(slab + b_off);

	for (uint64_t i = 0; i < len / 4; i++)
		a[i] += b[i];
}

/* The sum in A, every element; returns the first wrong byte's offset or -1. */
static int64_t gpu_check_sum(uint8_t *slab, uint64_t len)
{
	float *a = (float *)slab;

	for (uint64_t i = 0; i < len / 4; i++)
		if (a[i] != partial(0, i) + partial(1, i))
			return (int64_t)i * 4;
	return -1;
}

/*
 * The GPU's writes done and in memory before the NIC reads them. HIP:
 * hipStreamSynchronize() (or hipEventSynchronize()) on the stream that
 * wrote. Vulkan: the submission ends with a barrier releasing the buffer
 * to VK_QUEUE_FAMILY_EXTERNAL (srcAccessMask VK_ACCESS_SHADER_WRITE_BIT),
 * then vkWaitForFences() on its fence.
 */
static void gpu_before_nic(void)
{
}

/*
 * The NIC's writes complete (the SEND after them arrived) before the GPU
 * reads them: HIP launches the consuming kernel only now (a kernel that
 * polls a flag the NIC writes needs fine-grained or uncached memory);
 * Vulkan's next submission starts with a barrier acquiring the buffer from
 * VK_QUEUE_FAMILY_EXTERNAL (dstAccessMask VK_ACCESS_SHADER_READ_BIT).
 */
static void gpu_after_nic(void)
{
}
#endif

/* RDMA WRITE [off, off + len) of the slab to the same offset of the peer's, then SEND. */
static void put(struct rdma_cm_id *id, struct ibv_mr *mr, uint8_t *slab, uint64_t off,
		uint64_t len, const struct slab_addr *peer, uint64_t flag_off)
{
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };

	if (rdma_post_write(id, NULL, slab + off, len, mr, 0, peer->addr + off, peer->rkey) ||
	    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		DIE("tensor_slab: RDMA WRITE: %s", ibv_wc_status_str(wc.status));
	wc.status = IBV_WC_GENERAL_ERR;
	if (rdma_post_send(id, NULL, slab + flag_off, 8, mr, 0) ||
	    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		DIE("tensor_slab: SEND: %s", ibv_wc_status_str(wc.status));
}

/* The peer's SEND: its RDMA WRITE before it has landed. */
static void landed(struct rdma_cm_id *id)
{
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };

	if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		DIE("tensor_slab: receive: %s", ibv_wc_status_str(wc.status));
}

/* Both receives (one per step), before the peer can send. */
static void post_recvs(struct rdma_cm_id *id, struct ibv_mr *mr, uint8_t *slab, uint64_t flag)
{
	for (int i = 0; i < 2; i++)
		if (rdma_post_recv(id, NULL, slab + flag + 8, 8, mr))
			DIE("tensor_slab: rdma_post_recv: %m");
}

/* The slab, registered once with a plain ibv_reg_mr() on the QP's PD. */
static struct ibv_mr *reg_slab(struct rdma_cm_id *id, struct sp_buf *buf, struct slab_addr *me)
{
	struct ibv_mr *mr = ibv_reg_mr(id->qp->pd, sp_buf_addr(buf), sp_buf_size(buf),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ);

	if (!mr)
		DIE("tensor_slab: ibv_reg_mr of the slab: %m");
	*me = (struct slab_addr){ (uintptr_t)sp_buf_addr(buf), mr->rkey, 0 };
	return mr;
}

/*
 * Rank 0 connects, its slab's address in the private data; retries while
 * rank 1 is not listening yet or the address does not resolve (10 s).
 */
static struct rdma_cm_id *connect_to(struct rdma_addrinfo *res, struct ibv_qp_init_attr *qa,
				     struct rdma_conn_param *cp, struct sp_buf *buf,
				     uint64_t flag, struct ibv_mr **mr)
{
	static struct slab_addr me;
	struct rdma_cm_id *id;

	/* rank 1 may not listen yet (rejected: ECONNREFUSED): retry for 60 s */
	for (int i = 0; i < 600; i++, usleep(100000)) {
		/*
		 * A fresh copy each time: rdma_create_qp() writes the CQs it
		 * made into the attributes it is given, and rdma_destroy_ep()
		 * destroys them - reused, the next QP would name dead CQs.
		 */
		struct ibv_qp_init_attr a = *qa;

		if (rdma_create_ep(&id, res, NULL, &a)) {
			if (!i)
				fprintf(stderr, "rank 0: %m; retrying\n");
			continue;
		}
		*mr = reg_slab(id, buf, &me);
		post_recvs(id, *mr, sp_buf_addr(buf), flag);
		cp->private_data = &me;
		if (!rdma_connect(id, cp))
			return id;
		if (!i)
			fprintf(stderr, "rank 0: rank 1 not listening yet (%m); retrying\n");
		ibv_dereg_mr(*mr);
		rdma_destroy_ep(id);
	}
	DIE("tensor_slab: no connection to rank 1 within 60 s: %m");
}

int main(int argc, char **argv)
{
	int l = argc > 1 && !strcmp(argv[1], "-l"), rank = l, a = 1 + l;
	struct rdma_addrinfo hints = { .ai_flags = l ? RAI_PASSIVE : 0,
				       .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr qa = { .cap = { 4, 4, 1, 1, 0 }, .qp_type = IBV_QPT_RC,
				       .sq_sig_all = 1 };
	/* transport and RNR retries as a NIC's verbs default them (rdma_cm's are 0) */
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7,
				      .private_data_len = sizeof(struct slab_addr) };
	uint64_t elems = argc > a + 2 ? strtoull(argv[a + 2], NULL, 0) & ~1023ULL : 4 << 20;
	uint64_t t = elems * 4, half = t / 2, flag = 2 * t;	/* A, B, then 16 flag bytes */
	uint64_t mine = rank * half, theirs = (1 - rank) * half;	/* halves of A */
	struct rdma_cm_id *listen = NULL, *id;
	struct slab_addr me, peer;
	struct ibv_pd *pd = NULL;
	struct sp_buf *buf;
	struct sp_dev *dev;
	struct ibv_mr *mr;
	uint8_t *slab;
	int64_t bad;

	if (argc <= a || !elems)
		DIE("usage: tensor_slab -l ADDR [PORT [ELEMS]] | tensor_slab HOST [PORT [ELEMS]]");
	if (rdma_getaddrinfo(argv[a], argc > a + 1 ? argv[a + 1] : "13380", &hints, &res))
		DIE("tensor_slab: rdma_getaddrinfo %s: %m", argv[a]);
	if (sp_dev_open(NULL, &dev) || sp_buf_alloc(dev, flag + 16, SP_NODE_DEFAULT, 0, &buf))
		DIE("tensor_slab: strixpeer: %s", sp_errmsg());
	slab = sp_buf_addr(buf);
	gpu_attach(buf);
	if (l) {
		if (rdma_create_ep(&listen, res, NULL, NULL) || rdma_listen(listen, 1))
			DIE("tensor_slab: listening on %s: %m", argv[a]);
		printf("rank 1: listening on %s\n", argv[a]);
		fflush(stdout);
		if (rdma_get_request(listen, &id) || !(pd = ibv_alloc_pd(id->verbs)) ||
		    rdma_create_qp(id, pd, &qa))
			DIE("tensor_slab: the connection: %m");
		memcpy(&peer, id->event->param.conn.private_data, sizeof(peer));
		mr = reg_slab(id, buf, &me);
		post_recvs(id, mr, slab, flag);
		cp.private_data = &me;
		if (rdma_accept(id, &cp))
			DIE("tensor_slab: rdma_accept: %m");
	} else {
		id = connect_to(res, &qa, &cp, buf, flag, &mr);
		memcpy(&peer, id->event->param.conn.private_data, sizeof(peer));
	}
	memset(slab + flag, 0, 8);

	/* 1. the partial results, in the slab */
	gpu_partial(slab, rank * t, t, rank);
	gpu_before_nic();
	/* 2. reduce-scatter: the half the peer adds, straight from the slab */
	put(id, mr, slab, rank * t + theirs, half, &peer, flag);
	landed(id);
	gpu_after_nic();
	/* 3. A[half r] += B[half r] */
	gpu_reduce(slab, mine, t + mine, half);
	gpu_before_nic();
	/* 4. all-gather: my half of the sum into the peer's A */
	put(id, mr, slab, mine, half, &peer, flag);
	landed(id);
	gpu_after_nic();
	bad = gpu_check_sum(slab, t);
	if (bad >= 0)
		DIE("tensor_slab: rank %d: the sum is wrong at byte %lld of %llu", rank,
		    (long long)bad, (unsigned long long)t);
	printf("rank %d: all-reduce of %llu floats in the slab, every element checked\n", rank,
	       (unsigned long long)elems);
	rdma_disconnect(id);
	ibv_dereg_mr(mr);
	if (l) {
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		ibv_dealloc_pd(pd);
		rdma_destroy_ep(listen);
	} else {
		rdma_destroy_ep(id);
	}
	rdma_freeaddrinfo(res);
	sp_buf_free(buf);
	sp_dev_close(dev);
	return 0;
}
