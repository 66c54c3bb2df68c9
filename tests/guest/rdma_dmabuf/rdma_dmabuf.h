/* SPDX-License-Identifier: MIT */
/* What the files of tests/guest/rdma_dmabuf.c's program share (tests/guest/rdma_dmabuf/). */
#ifndef SP_GUEST_RDMA_DMABUF_H
#define SP_GUEST_RDMA_DMABUF_H

#include "rdma_pair.h"
#include "gpusim.h"

#include <dlfcn.h>
#include <grp.h>
#include <sys/resource.h>
#include <time.h>

#define ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* 4 MiB + 64 KiB, or 2 MiB + 64 KiB where SP_RDMA_MAX keeps transfers small */
uint64_t xlen(void);

#define XLEN	xlen()

#define MR_OFF	(5 * 4096 + 123)

#define MR_LEN	(XLEN - MR_OFF - 77)

/* rxe0 (initiator, host memory) and rxe1 (target, the dma-buf MR). */
struct two {
	struct sp_rc a, b;
	uint8_t *host;
};

/* rdma_dmabuf.c */
void two_open(struct two *t);
struct ibv_mr *reg_dmabuf(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
			  int fd, int access);
struct ibv_wc rdma_op(struct two *t, enum ibv_wr_opcode op, uint64_t local_off,
		      uint64_t raddr, uint32_t rkey, uint64_t len);
void rdma_ok(struct two *t, enum ibv_wr_opcode op, uint64_t local_off, uint64_t raddr,
	     uint32_t rkey, uint64_t len);
void check_mr(struct two *t, struct ibv_mr *mr, uint64_t iova, uint8_t *cpu,
	      uint64_t dmabuf_off, uint32_t seed);
void dmabuf_roundtrip(int fd, uint8_t *map, uint32_t seed);
void exporter_roundtrip(enum sp_exporter kind, uint32_t seed);

/* rdma_dmabuf/mr.c: ibv_reg_dmabuf_mr() of each exporter's dma-buf, its iova and errors */
void test_dmabuf_mr_udmabuf(void);
void test_dmabuf_mr_vgem(void);
void test_dmabuf_mr_system_heap(void);
void test_dmabuf_mr_strixpeer_export(void);
void test_dmabuf_mr_iova_and_errors(void);
void test_dmabuf_mr_unprivileged_handed_fd(void);

/* rdma_dmabuf/sp_reg.c: sp_reg_mr() taking the dma-buf path */
struct sp_reg_stats reg_stats(struct sp_dev *dev);
void test_sp_reg_mr_import_takes_dmabuf_path(void);
void test_sp_reg_mr_buffer_no_plain_takes_dmabuf_path(void);
void released_bo_moves(struct two *t, int g, uint32_t h, uint8_t *cpu, uint64_t iova,
		       uint32_t rkey, uint64_t stale0, uint32_t last);
void test_dmabuf_mr_gpusim_pinned_then_moves(void);
void test_sp_reg_mr_gpu_range_takes_dmabuf_path(void);
void test_sp_reg_mr_gpu_range_read_only(void);

/* rdma_dmabuf/gpu.c: GPU buffers that move (sp_gpusim) and the preload */
void test_sp_reg_mr_gpusim_range_pinned_then_moves(void);
void test_preload_plain_verbs_on_gpu_memory(void);
void test_preload_leaves_the_rest_alone(void);

#endif /* SP_GUEST_RDMA_DMABUF_H */
