// SPDX-License-Identifier: MIT
/*
 * No DMA after a move. sp_gpusim (tests/kmod/gpusim.c) moves its buffers
 * as amdgpu/TTM does: evictions and migrations on demand, migrations inside
 * map_dma_buf() and pin() for importers that cannot reach VRAM peer to
 * peer, move notification to the dynamic importers of the BO's registered
 * dma-buf, kernel fences the importers must wait for, and old backing that
 * is checksummed, poisoned and checked afterwards (stale_writes counts
 * every page written after its move was announced).
 *
 * The importers under test: strixpeer's PeerDirect client, for explicit
 * imports and zero-change claims, through the simulated PeerDirect core
 * (whichever semantics sp_peersim was loaded with), and the simulated
 * HCA's own dma-buf MRs (ib_umem_dmabuf-like: dynamic ones remap after a
 * move, pinned ones keep the buffer from moving). strixpeer pins what it
 * maps for a PeerDirect registration (docs/peerdirect.md): the exporter
 * cannot move it until the registration is invalidated and the core
 * stopped its DMA.
 */
#include "peer_util.h"
#include "gpusim.h"

#include <pthread.h>
#include <sys/syscall.h>

#define KiB 1024ULL

static void gpusim_param(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", SP_GPUSIM_SYSFS_PARAMS, name);
	write_param(path, val);
}

/*
 * strixpeer pins what a registration maps: the exporter cannot evict it
 * (TTM never moves a pinned BO) until the registration goes; then it can,
 * and nothing writes the old backing.
 */
static void pinned_while_registered(void)
{
	int sim = sim_open(), fd = sp_test_open(), dmabuf;
	uint64_t stale0;
	struct sp_gpusim_info gi;
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	struct sp_rocm_bo b;
	uint32_t moved;

	sp_rocm_bo_new(&b, 1 * MiB, SP_GPUSIM_DOMAIN_GTT);
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	dmabuf = sp_prime_export(b.gfd, b.handle);
	CHECK_OK(sp_import_raw(fd, dmabuf, 0, b.len, b.va, &im));
	CHECK_OK(sim_reg(sim, b.va, b.len, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "path %u", r.path);
	gi = gpusim_info(b.gfd, b.handle);
	/* kernels without CONFIG_DMABUF_MOVE_NOTIFY pin on map as well: 2 */
	CHECK(gi.pin_count >= 1 && gi.mappings == 1 && gi.attachments == 1,
	      "pins %u mappings %u attachments %u", gi.pin_count, gi.mappings, gi.attachments);
	CHECK_ERR(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL), EBUSY);
	sim_write_seen(sim, r.handle, b.va, b.len, 1);

	sim_dereg(sim, r.handle);
	gi = gpusim_info(b.gfd, b.handle);
	CHECK(gi.pin_count == 0 && gi.mappings == 0, "after dereg: pins %u mappings %u",
	      gi.pin_count, gi.mappings);
	CHECK_OK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT,
			     &moved));
	CHECK(moved == 1 && sp_verify(b.va, b.len, 0, 1) < 0, "data lost in the move");
	gpusim_check_no_stale(b.gfd, stale0);
	close(dmabuf);
	close(fd);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

/*
 * Invalidation comes first: when UNIMPORT returns, the core was told (the
 * NIC is refused) and the pin is gone, so the exporter may evict at once;
 * the old backing it frees is never written.
 */
static void evict_after_invalidation(void)
{
	int sim = sim_open(), fd = sp_test_open(), dmabuf;
	struct strixpeer_import im;
	struct peersim_mr_info mi;
	struct peersim_reg_mr r;
	uint8_t byte = 0x3c;
	uint64_t stale0, t_evict;
	struct sp_rocm_bo b;

	sp_rocm_bo_new(&b, 1 * MiB, SP_GPUSIM_DOMAIN_GTT);
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	dmabuf = sp_prime_export(b.gfd, b.handle);
	CHECK_OK(sp_import_raw(fd, dmabuf, 0, b.len, b.va, &im));
	CHECK_OK(sim_reg(sim, b.va, b.len, &r));
	sim_write_seen(sim, r.handle, b.va, b.len, 11);
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	t_evict = now_ns();
	CHECK_OK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL));
	mi = sim_mr(sim, r.handle);
	CHECK(mi.state == PEERSIM_MR_INVALIDATED && mi.invalidated_at_ns <= t_evict,
	      "MR state %u, invalidated %lld ns after the eviction started", mi.state,
	      (long long)(mi.invalidated_at_ns - t_evict));
	CHECK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, r.handle, 0, &byte, 1) == -ENOLINK,
	      "DMA after invalidation was not refused");
	sim_dereg(sim, r.handle);
	CHECK(sp_verify(b.va, b.len, 0, 11) < 0, "data lost in the move");
	gpusim_check_no_stale(b.gfd, stale0);
	close(dmabuf);
	close(fd);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

/*
 * A VRAM BO and an importer without P2P: the exporter migrates the BO to
 * GTT inside strixpeer's pin, announcing the move to every importer, the
 * one being mapped included. The registration completes (no hang), maps
 * the new pages, and the CPU sees the NIC's writes there.
 */
static void migrate_in_first_map(void)
{
	int sim = sim_open(), fd = sp_test_open(), dmabuf;
	struct sp_gpusim_stats s0, s1;
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	struct sp_rocm_bo b;

	gpusim_param("p2p", "0");
	sp_rocm_bo_new(&b, 1 * MiB, SP_GPUSIM_DOMAIN_VRAM);
	sp_fill(b.va, b.len, 0, 2);
	s0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN);
	dmabuf = sp_prime_export(b.gfd, b.handle);
	CHECK_OK(sp_import_raw(fd, dmabuf, 0, b.len, b.va, &im));
	CHECK_OK(sim_reg(sim, b.va, b.len, &r));
	s1 = gpusim_stats(b.gfd, 0);
	CHECK(s1.moves_in_pin == s0.moves_in_pin + 1, "%llu moves inside pin",
	      (unsigned long long)(s1.moves_in_pin - s0.moves_in_pin));
	CHECK(gpusim_info(b.gfd, b.handle).domain == SP_GPUSIM_DOMAIN_GTT, "not migrated");
	CHECK(sp_verify(b.va, b.len, 0, 2) < 0, "contents lost in the migration");
	sim_write_seen(sim, r.handle, b.va, b.len, 3);
	sim_dereg(sim, r.handle);
	gpusim_check_no_stale(b.gfd, s0.stale_writes);
	close(dmabuf);
	close(fd);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

/*
 * Zero-change on a BO nobody exported: strixpeer registers the export as
 * DRM's PRIME path does (obj->dma_buf), so the exporter's move
 * notification reaches its attachment, and a later PRIME export returns
 * the same dma-buf. Its registration pins the BO like any other.
 */
static void zero_change_unexported(void)
{
	int sim = sim_open(), dmabuf;
	long bufs0, bufs1, bufs2;
	uint64_t stale0;
	struct sp_gpusim_info gi;
	struct peersim_reg_mr r;
	struct sp_rocm_bo b;

	sp_rocm_bo_new(&b, 2 * MiB, SP_GPUSIM_DOMAIN_GTT);
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	CHECK(!gpusim_info(b.gfd, b.handle).exported, "exported before the test");
	bufs0 = sp_dmabuf_count();
	CHECK_OK(sim_reg(sim, b.va + 4 * KiB, 1 * MiB, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "path %u", r.path);
	gi = gpusim_info(b.gfd, b.handle);
	CHECK(gi.exported && gi.attachments == 1 && gi.pin_count >= 1,
	      "exported %u attachments %u pins %u", gi.exported, gi.attachments, gi.pin_count);
	bufs1 = sp_dmabuf_count();
	dmabuf = sp_prime_export(b.gfd, b.handle);
	bufs2 = sp_dmabuf_count();
	if (bufs0 >= 0)
		CHECK(bufs1 == bufs0 + 1 && bufs2 == bufs1,
		      "dma-bufs %ld -> %ld -> %ld: PRIME made a second export", bufs0, bufs1,
		      bufs2);
	CHECK_ERR(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL), EBUSY);
	sim_write_seen(sim, r.handle, b.va + 4 * KiB, 1 * MiB, 4);
	sim_dereg(sim, r.handle);
	CHECK_OK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT,
			     NULL));
	CHECK(sp_verify(b.va + 4 * KiB, 1 * MiB, 0, 4) < 0, "data lost in the move");
	gpusim_check_no_stale(b.gfd, stale0);
	close(dmabuf);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

/* A BO whose last GEM handle is gone cannot be exported (DRM refuses): declined. */
static void zero_change_no_handle(void)
{
	int sim = sim_open();
	struct sp_drm_gem_close gc;
	struct peersim_reg_mr r;
	struct sp_rocm_bo b;
	int ret;

	sp_rocm_bo_new(&b, 1 * MiB, SP_GPUSIM_DOMAIN_GTT);
	gc = (struct sp_drm_gem_close){ .handle = b.handle };
	CHECK_OK(ioctl(b.gfd, SP_DRM_IOCTL_GEM_CLOSE, &gc));	/* the mapping still holds it */
	b.va[0] = 1;
	ret = sim_reg(sim, b.va, b.len, &r);
	CHECK(ret == -EFAULT, "a BO without handles: %d, path %u", ret, r.path);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

/*
 * The simulated HCA's dynamic dma-buf MR follows moves: the exporter's
 * notification unmaps it, the next DMA maps it again after the move's
 * fence. A move announced but not copied yet (a slow copy engine) must be
 * waited for, or the copy would overwrite what the NIC wrote. Kernels
 * without CONFIG_DMABUF_MOVE_NOTIFY (Debian's 6.1 and 6.12) pin a dynamic
 * importer's buffer while it is mapped instead: there it must not move.
 * Pinned MRs keep the BO from moving everywhere.
 */
static void hca_dmabuf_mrs(void)
{
	int sim = sim_open(), dmabuf;
	struct sp_gpusim_stats s0, s1;
	struct peersim_mr_info mi;
	struct sp_rocm_bo b;
	uint32_t h, hp;

	gpusim_param("p2p", "0");
	sp_rocm_bo_new(&b, 1 * MiB, SP_GPUSIM_DOMAIN_VRAM);
	s0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN);
	dmabuf = sp_prime_export(b.gfd, b.handle);
	/* migrated to GTT inside map_dma_buf (or inside the core's pin) */
	h = peersim_reg_dmabuf(sim, dmabuf, 0, b.len, PEERSIM_ACCESS_WRITE, 0);
	s1 = gpusim_stats(b.gfd, 0);
	CHECK(s1.moves_in_map + s1.moves_in_pin == s0.moves_in_map + s0.moves_in_pin + 1,
	      "no move inside map or pin");
	sim_write_seen(sim, h, b.va, b.len, 5);
	if (gpusim_info(b.gfd, b.handle).pin_count) {
		CHECK(s1.moves_in_pin == s0.moves_in_pin + 1, "pinned, but not moved in pin");
		CHECK_ERR(gpusim_move(b.gfd, b.handle, SP_GPUSIM_DOMAIN_SYSTEM, 0, NULL), EBUSY);
		tap_diag("no CONFIG_DMABUF_MOVE_NOTIFY: the core pins mapped dynamic importers");
		sim_dereg(sim, h);
		gpusim_check_no_stale(b.gfd, s0.stale_writes);
		close(dmabuf);
		sp_rocm_bo_free(&b);
		close(sim);
		return;
	}
	/* each round: evicted to SYSTEM, then back to GTT inside the remap */
	for (int i = 0; i < 4; i++) {
		uint32_t moved;

		gpusim_param("move_delay_ms", i & 1 ? "300" : "1");
		CHECK_OK(gpusim_move(b.gfd, b.handle, SP_GPUSIM_DOMAIN_SYSTEM, 0, &moved));
		CHECK(moved, "round %d: no move", i);
		sim_write_seen(sim, h, b.va, b.len, 6 + i);
	}
	gpusim_param("move_delay_ms", "10");
	CHECK_OK(peersim_mr_info(sim, h, &mi));
	CHECK(mi.free_callbacks >= 4, "%u move notifications", mi.free_callbacks);
	hp = peersim_reg_dmabuf(sim, dmabuf, 0, b.len, PEERSIM_ACCESS_WRITE,
				PEERSIM_DMABUF_PINNED);
	CHECK_ERR(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL), EBUSY);
	sim_dereg(sim, hp);
	sim_dereg(sim, h);
	gpusim_check_no_stale(b.gfd, s0.stale_writes);
	close(dmabuf);
	sp_rocm_bo_free(&b);
	close(sim);
}

/* --- races ------------------------------------------------------------------ */

enum trig { T_UNIMPORT, T_MUNMAP, T_DEREG, T_EXIT };

struct hammer {
	int sim, gfd;
	uint32_t mr, bo;
	volatile int stop;
	unsigned long ok, fail, moves;
	int move_err;
};

/* The NIC writes the MR until it is refused. */
static void *dma_hammer(void *arg)
{
	struct hammer *hm = arg;
	uint8_t buf[4096];

	memset(buf, 0xd5, sizeof(buf));
	while (!hm->stop) {
		if (sim_dma(hm->sim, PEERSIM_IOC_DMA_WRITE, hm->mr, 0, buf, sizeof(buf)))
			hm->fail++;
		else
			hm->ok++;
	}
	return NULL;
}

/* The exporter tries to move the BO (GTT <-> SYSTEM), over and over. */
static void *evict_hammer(void *arg)
{
	struct hammer *hm = arg;
	unsigned int k = 0;
	uint32_t moved;

	while (!hm->stop) {
		uint32_t to = k++ & 1 ? SP_GPUSIM_DOMAIN_GTT : SP_GPUSIM_DOMAIN_SYSTEM;

		if (gpusim_move(hm->gfd, hm->bo, to, 0, &moved) == 0) {
			hm->moves += moved;
		} else if (errno != EBUSY) {
			hm->move_err = errno;
			break;
		}
		usleep(rand() % 500);
	}
	return NULL;
}

static unsigned int race_rounds(void)
{
	/* the debug kernel (kmemleak) runs everything several times slower */
	return access("/sys/kernel/debug/kmemleak", F_OK) == 0 ? 12 : 40;
}

/*
 * One registration ends (trigger) while the NIC writes into it and the
 * exporter tries to evict the BO, with random delays, many times: no
 * deadlock (the case's timeout is the watchdog), no write into moved-away
 * memory, nothing left behind.
 */
static void race(enum trig t)
{
	int sim = sim_open(), fd = sp_test_open();
	unsigned long moves = 0, dma_ok = 0, refused = 0;
	uint64_t stale0;
	unsigned int n = race_rounds();
	struct sp_rocm_bo b;

	srand((unsigned int)getpid());
	sp_rocm_bo_new(&b, 256 * KiB, SP_GPUSIM_DOMAIN_GTT);
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	for (unsigned int i = 0; i < n; i++) {
		struct hammer hm = { .sim = sim, .gfd = b.gfd, .bo = b.handle };
		pthread_t dt, et;
		struct strixpeer_import im;
		struct peersim_reg_mr r;
		int dmabuf = -1, sv[2];
		pid_t pid = 0;

		if (t == T_MUNMAP)
			sp_rocm_map(b.va, b.len, b.gfd, b.mmap_offset);
		if (t == T_UNIMPORT) {
			dmabuf = sp_prime_export(b.gfd, b.handle);
			CHECK_OK(sp_import_raw(fd, dmabuf, 0, b.len, b.va, &im));
		}
		if (t == T_EXIT) {
			/* a child registers through our sim fd and is killed */
			CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
			pid = fork();
			if (pid == 0) {
				/* MADV_DONTFORK: the child maps the BO itself */
				sp_rocm_map(b.va, b.len, b.gfd, b.mmap_offset);
				if (sim_reg(sim, b.va, b.len, &r) ||
				    write(sv[1], &r.handle, sizeof(r.handle)) != sizeof(r.handle))
					_exit(1);
				pause();
				_exit(0);
			}
			CHECK(read(sv[0], &hm.mr, sizeof(hm.mr)) == sizeof(hm.mr),
			      "child did not register");
			close(sv[0]);
			close(sv[1]);
		} else {
			CHECK_OK(sim_reg(sim, b.va, b.len, &r));
			hm.mr = r.handle;
		}
		CHECK(pthread_create(&dt, NULL, dma_hammer, &hm) == 0, "pthread");
		CHECK(pthread_create(&et, NULL, evict_hammer, &hm) == 0, "pthread");
		usleep(1000 + rand() % 20000);
		if (t == T_UNIMPORT)
			CHECK_OK(sp_unimport_raw(fd, im.handle));
		else if (t == T_MUNMAP)
			sp_rocm_free(b.va, b.len);
		else if (t == T_DEREG)
			sim_dereg(sim, hm.mr);
		else
			kill(pid, SIGKILL);
		usleep(rand() % 20000);
		if (t == T_EXIT)
			CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");
		/* the registration is gone or going: the NIC must be refused soon */
		for (int k = 0; k < 500 && hm.fail == 0; k++)
			usleep(10000);
		hm.stop = 1;
		pthread_join(dt, NULL);
		pthread_join(et, NULL);
		CHECK(hm.fail > 0, "round %u: the NIC was never refused", i);
		CHECK(!hm.move_err, "round %u: MOVE: %s", i, strerror(hm.move_err));
		moves += hm.moves;
		dma_ok += hm.ok;
		refused += hm.fail;
		if (t != T_DEREG)
			sim_dereg(sim, hm.mr);
		if (dmabuf >= 0)
			close(dmabuf);
		if (t == T_MUNMAP)	/* wait for the worker before mapping again */
			check_all_released();
		/* the BO must be free to move once nothing registers it */
		CHECK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL) == 0 ||
		      errno != EBUSY, "round %u: still pinned", i);
	}
	tap_diag("%u rounds: %lu evictions, %lu DMA writes done, %lu refused", n, moves, dma_ok,
		 refused);
	gpusim_check_no_stale(b.gfd, stale0);
	close(fd);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

static void race_evict_unimport(void) { race(T_UNIMPORT); }
static void race_evict_munmap(void) { race(T_MUNMAP); }
static void race_evict_dereg(void) { race(T_DEREG); }
static void race_evict_exit(void) { race(T_EXIT); }

/* While a registration lives, rmmod strixpeer is refused, never blocks. */
static void race_evict_rmmod(void)
{
	int sim = sim_open();
	struct hammer hm = { .sim = sim };
	struct peersim_reg_mr r;
	pthread_t et;
	struct sp_rocm_bo b;

	sp_rocm_bo_new(&b, 256 * KiB, SP_GPUSIM_DOMAIN_GTT);
	hm.gfd = b.gfd;
	hm.bo = b.handle;
	CHECK_OK(sim_reg(sim, b.va, b.len, &r));
	CHECK(pthread_create(&et, NULL, evict_hammer, &hm) == 0, "pthread");
	for (int i = 0; i < 20; i++) {
		CHECK_ERR(syscall(SYS_delete_module, "strixpeer", O_NONBLOCK), EWOULDBLOCK);
		usleep(rand() % 5000);
	}
	hm.stop = 1;
	pthread_join(et, NULL);
	CHECK(hm.moves == 0, "a registered BO moved %lu times", hm.moves);
	sim_dereg(sim, r.handle);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

struct bg_reg {
	int sim;
	const void *addr;
	uint64_t len;
	struct peersim_reg_mr r;
	int ret;
};

static void *bg_reg_run(void *arg)
{
	struct bg_reg *g = arg;

	g->ret = sim_reg(g->sim, g->addr, g->len, &g->r);
	return NULL;
}

/* Polls until cond holds, at most 60 s; false on timeout. */
#define WAIT_FOR(cond) ({						\
	bool ok_ = false;						\
	for (int i_ = 0; i_ < 6000 && !(ok_ = (cond)); i_++)		\
		usleep(10000);						\
	ok_; })

/*
 * A legacy core holds no lock between dma_map() and activating the MR
 * while it walks the client's sg list into its MTT; an invalidation in
 * there only marks the MR, and the core unwinds it itself (dma_unmap,
 * put_pages, release). Until then the sg list must stay the client's and
 * the buffer pinned: the exporter cannot evict it, and the registration
 * fails once it goes on.
 */
static void legacy_invalidate_before_activation(bool by_munmap)
{
	int sim = sim_open(), fd = sp_test_open(), dmabuf;
	struct peersim_info si0 = sim_info(sim), si;
	struct strixpeer_import im;
	struct sp_gpusim_info gi;
	struct bg_reg g = { .sim = sim };
	pthread_t t;
	struct sp_rocm_bo b;
	int ev;

	if (si0.semantics != PEERSIM_SEM_LEGACY)
		SKIP("a modern core holds the MR's mapping lock from get_pages() to activation: no such window");
	sp_rocm_bo_new(&b, 1 * MiB, SP_GPUSIM_DOMAIN_GTT);
	dmabuf = sp_prime_export(b.gfd, b.handle);
	CHECK_OK(sp_import_raw(fd, dmabuf, 0, b.len, b.va, &im));
	write_param(SIM_PARAM("mtt_hold"), "1");
	g.addr = b.va;
	g.len = b.len;
	CHECK(pthread_create(&t, NULL, bg_reg_run, &g) == 0, "pthread_create");
	if (!WAIT_FOR(sim_info(sim).mtt_held == 1)) {
		si = sim_info(sim);
		write_param(SIM_PARAM("mtt_hold"), "0");
		pthread_join(t, NULL);
		CHECK(0, "registration never reached the MTT window: held %u, reg ret %d",
		      si.mtt_held, g.ret);
	}
	if (by_munmap)
		CHECK_OK(munmap(b.va, b.len));
	else
		CHECK_OK(sp_unimport_raw(fd, im.handle));
	if (!WAIT_FOR(sim_info(sim).invalidations > si0.invalidations)) {
		write_param(SIM_PARAM("mtt_hold"), "0");
		pthread_join(t, NULL);
		CHECK(0, "the core was never told (invalidations %llu)",
		      (unsigned long long)sim_info(sim).invalidations);
	}
	/* the core still walks our sg list: the BO must stay where it is */
	gi = gpusim_info(b.gfd, b.handle);
	ev = gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL) ? -errno : 0;
	write_param(SIM_PARAM("mtt_hold"), "0");
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	CHECK(ev == -EBUSY, "eviction answered %d while the core built its MTT from it; pins %u mappings %u",
	      ev, gi.pin_count, gi.mappings);
	CHECK(gi.pin_count >= 1 && gi.mappings == 1, "in the window: pins %u mappings %u",
	      gi.pin_count, gi.mappings);
	CHECK(g.ret == -EINVAL, "registration invalidated before activation returned %d", g.ret);
	gi = gpusim_info(b.gfd, b.handle);
	CHECK(gi.pin_count == 0 && gi.mappings == 0, "after the core's unwind: pins %u mappings %u",
	      gi.pin_count, gi.mappings);
	close(dmabuf);
	close(fd);
	sp_rocm_bo_free(&b);
	close(sim);
	check_all_released();
}

static void legacy_unimport_before_activation(void)
{
	legacy_invalidate_before_activation(false);
}

static void legacy_munmap_before_activation(void)
{
	legacy_invalidate_before_activation(true);
}

static const struct tap_case cases[] = {
	TAP_CASE(pinned_while_registered),
	TAP_CASE(evict_after_invalidation),
	TAP_CASE(migrate_in_first_map),
	TAP_CASE(zero_change_unexported),
	TAP_CASE(zero_change_no_handle),
	TAP_CASE(hca_dmabuf_mrs),
	TAP_CASE_T(race_evict_unimport, 300),
	TAP_CASE_T(race_evict_munmap, 300),
	TAP_CASE_T(race_evict_dereg, 300),
	TAP_CASE_T(race_evict_exit, 300),
	TAP_CASE(race_evict_rmmod),
	TAP_CASE(legacy_unimport_before_activation),
	TAP_CASE(legacy_munmap_before_activation),
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
