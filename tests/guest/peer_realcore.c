// SPDX-License-Identifier: MIT
/*
 * PeerDirect against the real peer-memory core (OFED 25.10's peer_mem.c in
 * Debian 6.12's ib_uverbs, ../shared/peermem) and an rxe patched to ask it
 * as mlx5 does (tests/kmod/rxe-peer/): dma-bufs registered with a plain
 * ibv_reg_mr() on rxe1, RDMA WRITE / READ / SEND into them from rxe0, bytes
 * checked through the buffer's own mapping; after each invalidation cause
 * the remote operation fails with an error completion and the buffer is
 * left untouched. The same through sp_gpusim (tests/kmod/gpusim.c, the
 * amdgpu/TTM-like exporter) as ROCm maps its BOs: a hipMalloc sub-allocation
 * of a BO registered by plain ibv_reg_mr(), the BO pinned (not evictable)
 * while registered and movable once deregistered, and hipFree() invalidating
 * it; gpusim's check of every old backing counts no write after a move;
 * windows of 5 GiB sparse BOs at low and high DRM fake offsets.
 * tests/vm/realcore.sh loads the stack; tests/guest/peer_move_realcore.c
 * races the ends of a registration against real traffic. peer.c's,
 * peer_rocm.c's and peer_move.c's other cases need peersim's simulated HCA
 * (the DMA it issues on command, its MR states and timings) and run
 * against it instead.
 */
#include "peer_util.h"
#include "gpusim.h"
#include "rdma_pair.h"

#include <stdatomic.h>
#include <sys/syscall.h>

#define LEN	(4 * MiB)
#define KiB	1024ULL
#define GiB	(1024ULL * MiB)

struct two {
	struct sp_rc t, i;	/* target (rxe1, the dma-buf), initiator (rxe0) */
	struct conn_info ti, ii;
	uint8_t *host;
	struct ibv_mr *hmr;
};

static void two_open(struct two *w)
{
	memset(w, 0, sizeof(*w));
	node_open(&w->t, dev_name("SP_RDMA_TARGET", "rxe1"));
	node_open(&w->i, dev_name("SP_RDMA_INITIATOR", "rxe0"));
	w->host = aligned_alloc(4096, LEN);
	CHECK(w->host, "host buffer");
	memset(w->host, 0, LEN);
	w->hmr = ibv_reg_mr(w->i.pd, w->host, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(w->hmr, "ibv_reg_mr on host memory: %s", strerror(errno));
	w->i.mr = w->hmr;
	w->i.buf = w->host;
	w->i.len = LEN;
}

/* Register the target's memory (the dma-buf mapping), then connect. */
static void two_connect(struct two *w, uint8_t *buf, uint64_t len)
{
	w->t.buf = buf;
	w->t.len = len;
	w->t.mr = ibv_reg_mr(w->t.pd, buf, len, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(w->t.mr, "ibv_reg_mr on the dma-buf mapping: %s", strerror(errno));
	w->ti = node_info(&w->t);
	w->ii = node_info(&w->i);
	node_connect(&w->t, &w->ti, &w->ii);
	node_connect(&w->i, &w->ii, &w->ti);
}

static void two_close(struct two *w)
{
	CHECK_OK(ibv_dereg_mr(w->t.mr));
	CHECK_OK(ibv_dereg_mr(w->hmr));
	ibv_destroy_qp(w->t.qp);
	ibv_destroy_qp(w->i.qp);
	ibv_destroy_cq(w->t.cq);
	ibv_destroy_cq(w->i.cq);
	ibv_destroy_comp_channel(w->t.ch);
	ibv_destroy_comp_channel(w->i.ch);
	ibv_dealloc_pd(w->t.pd);
	ibv_dealloc_pd(w->i.pd);
	ibv_close_device(w->t.ctx);
	ibv_close_device(w->i.ctx);
	free(w->host);
}

/* Post one signalled RDMA op from the initiator; its completion. */
static struct ibv_wc rdma_op(struct two *w, enum ibv_wr_opcode op, uint64_t off, uint64_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(w->host + off), .length = (uint32_t)len,
			       .lkey = w->hmr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = w->ti.addr + off;
		wr.wr.rdma.rkey = w->ti.rkey;
	}
	CHECK_OK(ibv_post_send(w->i.qp, &wr, &bad));
	return node_wait_any(&w->i);
}

static void rdma_ok(struct two *w, enum ibv_wr_opcode op, uint64_t off, uint64_t len)
{
	struct ibv_wc wc = rdma_op(w, op, off, len);

	CHECK(wc.status == IBV_WC_SUCCESS, "opcode %d: completion %s", (int)op,
	      ibv_wc_status_str(wc.status));
}

/*
 * After invalidation: the remote op fails, and the buffer (seen through
 * @view) still holds seed @was's bytes, not the refused WRITE's.
 */
static void rdma_refused(struct two *w, uint8_t *view, uint64_t off, uint64_t len,
			 uint32_t was)
{
	struct ibv_wc wc;
	int64_t bad;

	sp_fill(w->host + off, len, off, 77);
	wc = rdma_op(w, IBV_WR_RDMA_WRITE, off, len);
	CHECK(wc.status == IBV_WC_REM_ACCESS_ERR,
	      "RDMA WRITE after invalidation: completion %s, wanted remote access error",
	      ibv_wc_status_str(wc.status));
	tap_diag("WRITE after invalidation: %s", ibv_wc_status_str(wc.status));
	bad = sp_verify(view + off, len, off, was);
	CHECK(bad < 0, "byte %lld of the range changed after invalidation (%s the refused WRITE's)",
	      (long long)bad, sp_verify(view + off, len, off, 77) < 0 ? "all are" : "not");
}

/* WRITE, READ and SEND into @buf (the dma-buf mapping), checked through it. */
static void rdma_all(struct two *w, uint8_t *buf)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf + 2 * MiB), .length = 64 * 1024,
			       .lkey = w->t.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct ibv_wc wc;

	sp_fill(w->host, MiB + 5, 0, 11);
	rdma_ok(w, IBV_WR_RDMA_WRITE, 0, MiB + 5);
	CHECK(sp_verify(buf, MiB + 5, 0, 11) < 0, "RDMA WRITE not seen through the mapping");

	sp_fill(buf + MiB + 4096, 300 * 1024, MiB + 4096, 12);
	rdma_ok(w, IBV_WR_RDMA_READ, MiB + 4096, 300 * 1024);
	CHECK(sp_verify(w->host + MiB + 4096, 300 * 1024, MiB + 4096, 12) < 0,
	      "RDMA READ returned other bytes");

	CHECK_OK(ibv_post_recv(w->t.qp, &rwr, &rbad));
	sp_fill(w->host + 2 * MiB, 64 * 1024, 2 * MiB, 13);
	rdma_ok(w, IBV_WR_SEND, 2 * MiB, 64 * 1024);
	wc = node_wait_any(&w->t);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 64 * 1024,
	      "recv: %s opcode %d len %u", ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
	CHECK(sp_verify(buf + 2 * MiB, 64 * 1024, 2 * MiB, 13) < 0, "SEND not seen");
}

/*
 * A second view of @len bytes of @fd at @off (to see the pages are not
 * written after invalidation), the pair connected with @buf registered, and
 * a first WRITE of seed 5 seen through the view.
 */
static uint8_t *connect_and_write(struct two *w, uint8_t *buf, int fd, off_t off)
{
	uint8_t *view = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);

	CHECK(view != MAP_FAILED, "second mapping: %s", strerror(errno));
	two_open(w);
	two_connect(w, buf, LEN);
	sp_fill(w->host, 8192, 0, 5);
	rdma_ok(w, IBV_WR_RDMA_WRITE, 0, 8192);
	CHECK(sp_verify(view, 8192, 0, 5) < 0, "first WRITE not seen");
	return view;
}

/*
 * An unmap ends the implicit import from a worker, which invalidates its
 * registrations: the count going up by one is the signal (at most 60 s).
 */
static void wait_invalidation(const struct sp_peer_counters *c0, const char *after)
{
	struct sp_peer_counters c = peer_stats();

	for (int i = 0; i < 3000 && c.invalidations == c0->invalidations; i++) {
		usleep(20000);
		c = peer_stats();
	}
	CHECK(c.invalidations == c0->invalidations + 1,
	      "invalidations %llu -> %llu 60 s after %s (imports %llu)",
	      (unsigned long long)c0->invalidations, (unsigned long long)c.invalidations,
	      after, (unsigned long long)c.imports);
}

static void client_registered(void)
{
	int fd = sp_test_open();
	struct strixpeer_version v = { 0 };
	struct sp_info info = { .size = sizeof(info) };
	struct sp_ctl *ctl;
	char line[256];
	int found = 0;
	FILE *f;

	CHECK_OK(ioctl(fd, STRIXPEER_IOC_VERSION, &v));
	CHECK(v.features & STRIXPEER_FEAT_PEERDIRECT, "features %#llx", (unsigned long long)v.features);
	CHECK(sp_ctl_open(&ctl) == 0, "sp_ctl_open: %s", sp_errmsg());
	CHECK(sp_ctl_info(ctl, &info) == 0, "info: %s", sp_errmsg());
	CHECK(info.peerdirect_reason[0] == '\0', "reason \"%s\"", info.peerdirect_reason);
	sp_ctl_close(ctl);
	close(fd);
	/* The real core's API comes from ib_uverbs, and it has no sysfs here. */
	f = fopen("/proc/kallsyms", "re");
	CHECK(f, "/proc/kallsyms");
	while (fgets(line, sizeof(line), f))
		if (strstr(line, " ib_register_peer_memory_client\t[ib_uverbs]"))
			found = 1;
	fclose(f);
	CHECK(found, "ib_register_peer_memory_client not exported by ib_uverbs");
	CHECK(access("/sys/kernel/mm/memory_peers", F_OK) < 0 && errno == ENOENT,
	      "/sys/kernel/mm/memory_peers exists: not the 6.12 core this test knows");
	CHECK(access("/sys/class/infiniband/rxe1", F_OK) == 0, "no rxe1");
}

/* An explicit import, registered with plain ibv_reg_mr on its mapping. */
static void rdma_into_vgem_import(void)
{
	int fd = sp_test_open();
	struct strixpeer_import im;
	struct sp_xbuf x;
	struct two w;

	sp_xbuf_new(SP_EXP_VGEM, LEN, 0, &x);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, LEN, x.map, &im));
	two_open(&w);
	two_connect(&w, x.map, LEN);
	CHECK(peer_stats().registrations == 1, "ibv_reg_mr did not come through strixpeer");
	rdma_all(&w, x.map);
	two_close(&w);
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	close(fd);
	sp_xbuf_free(&x);
	check_all_released();
}

/* Zero-change mode: a GEM mapping through the card, no import call. */
static void rdma_into_vgem_zero_change(void)
{
	struct sp_xbuf x;
	struct two w;

	sp_xbuf_new(SP_EXP_VGEM, LEN, 1, &x);
	two_open(&w);
	two_connect(&w, x.map, LEN);
	CHECK(peer_stats().imports == 1, "no implicit import");
	rdma_all(&w, x.map);
	two_close(&w);
	CHECK(peer_stats().imports == 0, "implicit import outlived its registration");
	sp_xbuf_free(&x);
	check_all_released();
}

enum trigger { T_UNIMPORT, T_CLOSE, T_MUNMAP };

static void invalidate_by(enum trigger t)
{
	int fd = sp_test_open();
	struct sp_peer_counters c0, c1;
	struct strixpeer_import im = { 0 };
	struct sp_xbuf x;
	uint8_t *view;
	struct two w;

	/* munmap: an implicit import (zero-change); else an explicit one */
	sp_xbuf_new(SP_EXP_VGEM, LEN, t == T_MUNMAP, &x);
	if (t != T_MUNMAP)
		CHECK_OK(sp_import_raw(fd, x.fd, 0, LEN, x.map, &im));
	view = connect_and_write(&w, x.map, x.fd, 0);

	c0 = peer_stats();
	if (t == T_UNIMPORT)
		CHECK_OK(sp_unimport_raw(fd, im.handle));
	else if (t == T_CLOSE)
		close(fd);
	else {
		munmap(x.map, x.len);
		x.map = NULL;
		/*
		 * The import itself is freed only when the MR goes (the real
		 * core calls release() at deregistration, never for an
		 * invalidation): checked below.
		 */
		wait_invalidation(&c0, "munmap");
	}
	c1 = peer_stats();
	CHECK(c1.invalidations == c0.invalidations + 1, "invalidations %llu -> %llu",
	      (unsigned long long)c0.invalidations, (unsigned long long)c1.invalidations);
	CHECK(sp_verify(view + 4096, 4096, 4096, 5) < 0, "buffer changed before the WRITE");
	rdma_refused(&w, view, 4096, 4096, 5);
	two_close(&w);
	munmap(view, LEN);
	if (t != T_CLOSE)
		close(fd);
	sp_xbuf_free(&x);
	check_all_released();
}

static void invalidate_unimport(void) { invalidate_by(T_UNIMPORT); }
static void invalidate_close(void) { invalidate_by(T_CLOSE); }
static void invalidate_munmap(void) { invalidate_by(T_MUNMAP); }

/*
 * Issue 45 under the real core: a zero-change registration (plain
 * ibv_reg_mr() of a vgem mapping) made while an invalidation of this mm is
 * held (sp_gpusim's HOLD, as in peer_window.c), and the mapping unmapped
 * before the invalidation ends. The implicit import's notifier must see
 * the munmap: the core invalidates the MR and a WRITE from the other node
 * fails with a remote access error, the BO untouched.
 */
struct window_reg {
	struct two *w;
	struct sp_xbuf *x;
	struct sp_window *win;
	atomic_int tid, done;
	int returned_while_held;
};

static void *window_reg_run(void *arg)
{
	struct window_reg *r = arg;

	atomic_store(&r->tid, (int)syscall(SYS_gettid));
	two_connect(r->w, r->x->map, LEN);
	r->returned_while_held = sp_window_held(r->win);
	munmap(r->x->map, r->x->len);
	r->x->map = NULL;
	atomic_store(&r->done, 1);
	return NULL;
}

static void zero_change_claim_in_invalidation_window(void)
{
	struct sp_peer_counters c0;
	struct sp_window win;
	struct window_reg r = { 0 };
	struct sp_xbuf x;
	struct two w;
	uint8_t *view;
	pthread_t t;
	int i, blocked = 0;

	sp_xbuf_new(SP_EXP_VGEM, LEN, 1, &x);
	memset(x.map, 0, LEN);
	view = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, x.fd, 0);
	CHECK(view != MAP_FAILED, "second mapping: %s", strerror(errno));
	sp_fill(view, LEN, 0, 5);
	two_open(&w);
	c0 = peer_stats();
	r.w = &w;
	r.x = &x;
	r.win = &win;
	sp_window_open(&win);
	CHECK(pthread_create(&t, NULL, window_reg_run, &r) == 0, "pthread_create");
	for (i = 0; i < 3000 && !atomic_load(&r.done); i++) {
		int tid = atomic_load(&r.tid);

		if (tid && sp_waits_in_read_begin(tid)) {
			blocked = 1;
			break;
		}
		usleep(10000);
	}
	tap_diag("ibv_reg_mr %s", blocked ? "waited in mmu_interval_read_begin()" :
		 atomic_load(&r.done) ? "returned (and the range was unmapped) while the invalidation was held" :
		 "neither returned nor waited within 30 s");
	sp_window_release(&win);
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	wait_invalidation(&c0, "munmap of a mapping registered inside an invalidation");
	CHECK(!r.returned_while_held,
	      "the claim returned while an invalidation of its mm was held: its notifier was only deferred");
	rdma_refused(&w, view, 4096, 4096, 5);
	two_close(&w);
	sp_window_close(&win);
	munmap(view, LEN);
	sp_xbuf_free(&x);
	check_all_released();
}

/*
 * hipMalloc sub-allocation: ROCr hands out a piece of a bigger BO; the NIC
 * registers only that piece. While registered the BO is pinned (TTM never
 * evicts a pinned BO); after deregistration it can move, with the bytes the
 * NIC wrote, and no old backing is written.
 */
static void rdma_into_gpusim(uint32_t domain)
{
	struct sp_peer_counters c;
	struct sp_gpusim_info gi;
	uint64_t stale0;
	uint32_t moved;
	struct sp_rocm_bo b;
	struct two w;
	uint8_t *va;

	sp_rocm_bo_new(&b, 4 * MiB + LEN, domain);
	va = b.ap + 2 * MiB;	/* the sub-allocation: 2 MiB into the BO */
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	two_open(&w);
	two_connect(&w, va, LEN);
	c = peer_stats();
	CHECK(c.registrations == 1 && c.imports == 1,
	      "ibv_reg_mr did not come through strixpeer (registrations %llu, imports %llu)",
	      (unsigned long long)c.registrations, (unsigned long long)c.imports);
	gi = gpusim_info(b.gfd, b.handle);
	CHECK(gi.pin_count >= 1 && gi.mappings == 1, "registered: pins %u mappings %u",
	      gi.pin_count, gi.mappings);
	rdma_all(&w, va);
	for (size_t i = 0; i < 2 * MiB; i++)
		CHECK(b.ap[i] == 0, "byte %zu, before the sub-allocation, changed", i);
	CHECK_ERR(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL), EBUSY);
	two_close(&w);
	gi = gpusim_info(b.gfd, b.handle);
	CHECK(gi.pin_count == 0 && gi.mappings == 0, "deregistered: pins %u mappings %u",
	      gi.pin_count, gi.mappings);
	CHECK_OK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT,
			     &moved));
	CHECK(moved == 1, "eviction moved %u BOs", moved);
	CHECK(sp_verify(va, MiB + 5, 0, 11) < 0, "the WRITE's bytes did not survive the move");
	gpusim_check_no_stale(b.gfd, stale0);
	sp_rocm_bo_free(&b);
	check_all_released();
}

static void rdma_into_gpusim_gtt_suballoc(void) { rdma_into_gpusim(SP_GPUSIM_DOMAIN_GTT); }
static void rdma_into_gpusim_vram_suballoc(void) { rdma_into_gpusim(SP_GPUSIM_DOMAIN_VRAM); }

/*
 * hipFree(): the range goes back to PROT_NONE; the implicit import ends and
 * invalidates the registration; the NIC's next WRITE fails and the BO (seen
 * through a second mapping) keeps its bytes; it can then be evicted and no
 * old backing is written.
 */
static void hipfree_invalidates_gpusim(void)
{
	struct sp_peer_counters c0;
	uint64_t stale0;
	uint8_t *view;
	struct sp_rocm_bo b;
	struct two w;

	sp_rocm_bo_new(&b, LEN, SP_GPUSIM_DOMAIN_GTT);
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	view = connect_and_write(&w, b.ap, b.gfd, (off_t)b.mmap_offset);
	c0 = peer_stats();
	sp_rocm_free(b.ap, LEN);
	wait_invalidation(&c0, "hipFree");
	rdma_refused(&w, view, 4096, 4096, 5);
	two_close(&w);
	CHECK_OK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT,
			     NULL));
	CHECK(sp_verify(view, 8192, 0, 5) < 0, "bytes lost in the move");
	munmap(view, LEN);
	gpusim_check_no_stale(b.gfd, stale0);
	sp_rocm_bo_free(&b);
	check_all_released();
}

/*
 * BOs larger than 4 GiB at low and high DRM fake offsets (the first 5 GiB
 * BO's offset in pages is below its page count, the second's above): 64 KiB
 * windows at the start, the middle, 4 GiB + 64 KiB and the end of each,
 * registered by plain ibv_reg_mr() on rxe1 through the core; the remote
 * WRITE into each lands at that offset (each window has its own pattern).
 */
static void rdma_into_large_bos(void)
{
	const uint64_t size = 5 * GiB, wl = 64 * KiB;
	const uint64_t win[] = { 0, 2 * GiB + 512 * MiB, 4 * GiB + 64 * KiB, 5 * GiB - 64 * KiB };
	enum { NW = sizeof(win) / sizeof(win[0]) };
	int gfd = gpusim_open();
	uint8_t *ap = sp_aperture(16 * GiB, 2 * MiB);
	struct ibv_mr *mr[2][NW];
	uint64_t off[2];
	uint32_t bo[2];
	struct two w;

	for (int i = 0; i < 2; i++) {
		bo[i] = gpusim_create(gfd, size, SP_GPUSIM_DOMAIN_VRAM, SP_GPUSIM_CREATE_SPARSE,
				      &off[i]);
		for (unsigned int k = 0; k < NW; k++)
			gpusim_populate(gfd, bo[i], win[k] & ~(2 * MiB - 1), wl);
		sp_rocm_map(ap + (uint64_t)i * 8 * GiB, size, gfd, off[i]);
	}
	CHECK((off[0] >> 12) < (size >> 12) && (off[1] >> 12) >= (size >> 12),
	      "fake offsets (pages) %llu and %llu, BO pages %llu",
	      (unsigned long long)(off[0] >> 12), (unsigned long long)(off[1] >> 12),
	      (unsigned long long)(size >> 12));
	two_open(&w);
	for (int i = 0; i < 2; i++)
		for (unsigned int k = 0; k < NW; k++) {
			uint8_t *va = ap + (uint64_t)i * 8 * GiB + win[k];

			memset(va, 0, wl);
			mr[i][k] = ibv_reg_mr(w.t.pd, va, wl, IBV_ACCESS_LOCAL_WRITE |
					      IBV_ACCESS_REMOTE_WRITE);
			CHECK(mr[i][k], "BO %d: ibv_reg_mr at %#llx: %s", i,
			      (unsigned long long)win[k], strerror(errno));
		}
	CHECK(peer_stats().registrations == 2 * NW, "registrations %llu, wanted %d",
	      (unsigned long long)peer_stats().registrations, 2 * NW);
	w.t.mr = mr[0][0];
	w.t.buf = ap;
	w.t.len = wl;
	w.ti = node_info(&w.t);
	w.ii = node_info(&w.i);
	node_connect(&w.t, &w.ti, &w.ii);
	node_connect(&w.i, &w.ii, &w.ti);
	for (int i = 0; i < 2; i++)
		for (unsigned int k = 0; k < NW; k++) {
			w.ti.addr = (uintptr_t)(ap + (uint64_t)i * 8 * GiB + win[k]);
			w.ti.rkey = mr[i][k]->rkey;
			sp_fill(w.host, wl, 0, 20 + 4 * (uint32_t)i + k);
			rdma_ok(&w, IBV_WR_RDMA_WRITE, 0, wl);
		}
	for (int i = 0; i < 2; i++)
		for (unsigned int k = 0; k < NW; k++)
			CHECK(sp_verify(ap + (uint64_t)i * 8 * GiB + win[k], wl, 0,
					20 + 4 * (uint32_t)i + k) < 0,
			      "BO %d: the WRITE to offset %#llx is not there", i,
			      (unsigned long long)win[k]);
	tap_diag("5 GiB BOs at fake-offset pages %llu (low) and %llu (high): %d windows written",
		 (unsigned long long)(off[0] >> 12), (unsigned long long)(off[1] >> 12), 2 * NW);
	for (int i = 0; i < 2; i++)
		for (unsigned int k = 0; k < NW; k++)
			if (mr[i][k] != w.t.mr)
				CHECK_OK(ibv_dereg_mr(mr[i][k]));
	two_close(&w);
	munmap(ap, 16 * GiB);
	close(gfd);
	check_all_released();
}

static const struct tap_case cases[] = {
	TAP_CASE(client_registered),
	TAP_CASE(rdma_into_vgem_import),
	TAP_CASE(rdma_into_vgem_zero_change),
	TAP_CASE(invalidate_unimport),
	TAP_CASE(invalidate_close),
	TAP_CASE(invalidate_munmap),
	TAP_CASE(zero_change_claim_in_invalidation_window),
	TAP_CASE(rdma_into_gpusim_gtt_suballoc),
	TAP_CASE(rdma_into_gpusim_vram_suballoc),
	TAP_CASE(hipfree_invalidates_gpusim),
	TAP_CASE(rdma_into_large_bos),
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
