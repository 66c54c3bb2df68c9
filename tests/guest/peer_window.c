// SPDX-License-Identifier: MIT
/*
 * Invalidation that cannot be missed (issue 45), through the simulated
 * PeerDirect core + HCA and sp_gpusim:
 *
 * - While an invalidation of a process's mm runs that overlaps another
 *   mmu interval notifier of it (a userptr BO's, an ODP MR's, another
 *   import's: truncation, reclaim, migration, eviction), the kernel only
 *   queues a newly inserted notifier and puts it in the mm's tree when the
 *   invalidation ends; an unmap meanwhile does not call it. The window is
 *   held open here by sp_gpusim's HOLD (a userptr notifier whose
 *   invalidation waits, as amdgpu's waits for fences) over a shared memfd
 *   mapping that another thread truncates. An IMPORT, or a zero-change
 *   claim, made in that window and unmapped right after must still end.
 * - IMPORT_INFO says UNMAPPED as soon as the unmap returned (what the
 *   claim path sees), not only once the worker ran.
 * - 7.x: a dma-buf whose exporter revokes as VFIO-PCI does (sp_gpusim's
 *   REVOCABLE_ONLY BOs and REVOKE) is either refused at registration or
 *   unmapped within the bound; the HCA never writes it after a revoke.
 */
#include "peer_util.h"
#include "gpusim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

/*
 * What the thread that registers inside the window does; @act returns
 * 0 or -errno, then the thread unmaps [@unmap, +@unmap_len).
 */
struct actor {
	int (*act)(struct actor *a);
	struct sp_window *w;
	atomic_int tid;
	atomic_int done;
	int ret;
	int returned_while_held;
	void *unmap;
	size_t unmap_len;
	/* act's inputs and outputs */
	int fd, dmabuf, sim;
	struct strixpeer_import im;
	struct peersim_reg_mr r;
};

static void *actor_run(void *arg)
{
	struct actor *a = arg;

	atomic_store(&a->tid, (int)syscall(SYS_gettid));
	a->ret = a->act(a);
	a->returned_while_held = sp_window_held(a->w);
	munmap(a->unmap, a->unmap_len);
	atomic_store(&a->done, 1);
	return NULL;
}

/*
 * Runs @a inside the open window @w: the actor finishes (its call did not
 * wait for the invalidation) or sleeps in mmu_interval_read_begin() (it
 * does); then the window is released and the actor joined.
 */
static void actor_in_window(struct actor *a, struct sp_window *w)
{
	pthread_t t;
	int blocked = 0, i;

	a->w = w;
	CHECK(pthread_create(&t, NULL, actor_run, a) == 0, "pthread_create");
	for (i = 0; i < 3000 && !atomic_load(&a->done); i++) {
		int tid = atomic_load(&a->tid);

		if (tid && sp_waits_in_read_begin(tid)) {
			blocked = 1;
			break;
		}
		usleep(10000);
	}
	tap_diag("the call %s (after %d polls of 10 ms)",
		 blocked ? "waited in mmu_interval_read_begin() for the held invalidation" :
		 atomic_load(&a->done) ? "returned while the invalidation was held" :
		 "neither returned nor waited in mmu_interval_read_begin() within 30 s", i);
	sp_window_release(w);
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");
}

/* ---- item 1: the IMPORT's notifier --------------------------------------- */

static int act_import(struct actor *a)
{
	return sp_import_raw(a->fd, a->dmabuf, 0, a->unmap_len, a->unmap, &a->im) ? -errno : 0;
}

static uint32_t import_state(int fd, uint32_t handle)
{
	struct strixpeer_import_info ii = { .handle = handle };

	CHECK_OK(ioctl(fd, STRIXPEER_IOC_IMPORT_INFO, &ii));
	return ii.state;
}

static uint8_t *anon_page(void *at)
{
	uint8_t *p = mmap(at, 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	CHECK(p != MAP_FAILED && (!at || p == at), "mmap: %s", strerror(errno));
	p[0] = 1;
	return p;
}

/*
 * IMPORT over a fresh page while an invalidation of the mm is held, then
 * munmap: the import must end (UNMAPPED), and a new IMPORT at that
 * address must not collide with it.
 */
static void import_in_invalidation_window(void)
{
	struct actor a = { .act = act_import };
	struct strixpeer_import im2;
	struct sp_window w;
	struct sp_xbuf x;
	uint32_t st = STRIXPEER_IMPORT_ACTIVE;
	uint8_t *p;

	a.fd = sp_test_open();
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	a.dmabuf = x.fd;
	p = anon_page(NULL);
	a.unmap = p;
	a.unmap_len = 4096;
	sp_window_open(&w);
	actor_in_window(&a, &w);
	CHECK(a.ret == 0, "IMPORT: %s", strerror(-a.ret));
	for (int i = 0; i < 100 && st != STRIXPEER_IMPORT_UNMAPPED; i++) {
		st = import_state(a.fd, a.im.handle);
		if (st != STRIXPEER_IMPORT_UNMAPPED)
			usleep(100000);	/* the worker ends it: 10 s at most */
	}
	CHECK(st == STRIXPEER_IMPORT_UNMAPPED,
	      "import %u still ACTIVE 10 s after munmap of its range: its notifier missed the unmap",
	      a.im.id);
	CHECK(!a.returned_while_held,
	      "IMPORT returned while an invalidation of its mm was held: its notifier was only deferred");
	/* the address is free for a new mapping and a new import */
	anon_page(p);
	CHECK(sp_import_raw(a.fd, x.fd, 0, 4096, p, &im2) == 0,
	      "a new IMPORT over the remapped page: %s", strerror(errno));
	CHECK_OK(sp_unimport_raw(a.fd, im2.handle));
	CHECK_OK(sp_unimport_raw(a.fd, a.im.handle));
	munmap(p, 4096);
	sp_window_close(&w);
	sp_xbuf_free(&x);
	close(a.fd);
	check_all_released();
}

/* ---- item 1: the zero-change claim's notifier ---------------------------- */

static int act_register(struct actor *a)
{
	return sim_reg(a->sim, a->unmap, a->unmap_len, &a->r);
}

/*
 * A registration of a GEM mapping (zero-change: an implicit import) made
 * while an invalidation of the mm is held, then munmap of the mapping:
 * the core must be told, and the HCA refused.
 */
static void claim_in_invalidation_window(void)
{
	struct actor a = { .act = act_register };
	struct peersim_mr_info m = { 0 };
	struct sp_window w;
	struct sp_xbuf x;
	uint8_t byte = 7;

	a.sim = sim_open();
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 1, &x);
	memset(x.map, 0, 1 * MiB);
	a.unmap = x.map;
	a.unmap_len = 1 * MiB;
	x.map = NULL;	/* the actor unmaps it */
	sp_window_open(&w);
	actor_in_window(&a, &w);
	CHECK(a.ret == 0, "registration of the GEM mapping: %s", strerror(-a.ret));
	CHECK(a.r.path == PEERSIM_PATH_PEER && !strcmp(a.r.client, "strixpeer"),
	      "GEM mapping: path %u client \"%s\"", a.r.path, a.r.client);
	for (int i = 0; i < 100; i++) {
		m = sim_mr(a.sim, a.r.handle);
		if (m.state == PEERSIM_MR_INVALIDATED)
			break;
		usleep(100000);	/* the import's worker invalidates: 10 s at most */
	}
	CHECK(m.state == PEERSIM_MR_INVALIDATED,
	      "MR still state %u 10 s after munmap of the GEM mapping: the implicit import's notifier missed the unmap",
	      m.state);
	CHECK(sim_dma(a.sim, PEERSIM_IOC_DMA_WRITE, a.r.handle, 0, &byte, 1) == -ENOLINK,
	      "the HCA's write after munmap was not refused");
	CHECK(!a.returned_while_held,
	      "the claim returned while an invalidation of its mm was held: its notifier was only deferred");
	sim_dereg(a.sim, a.r.handle);
	sp_window_close(&w);
	sp_xbuf_free(&x);
	close(a.sim);
	check_all_released();
}

/* ---- item 3: IMPORT_INFO reports what the claim path sees ----------------- */

static void import_info_unmapped_at_once(void)
{
	int fd = sp_test_open(), active = 0, n = 200;
	struct strixpeer_import im;
	struct sp_xbuf x;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	for (int i = 0; i < n; i++) {
		uint8_t *p = anon_page(NULL);

		CHECK_OK(sp_import_raw(fd, x.fd, 0, 4096, p, &im));
		munmap(p, 4096);
		/* the notifier ran inside munmap; the worker may not have */
		if (import_state(fd, im.handle) != STRIXPEER_IMPORT_UNMAPPED)
			active++;
		CHECK_OK(sp_unimport_raw(fd, im.handle));
	}
	CHECK(active == 0,
	      "%d of %d IMPORT_INFO answers right after munmap said ACTIVE (the claim path already refuses the import)",
	      active, n);
	sp_xbuf_free(&x);
	close(fd);
	check_all_released();
}

static void *actor_register(void *arg)
{
	struct actor *a = arg;

	atomic_store(&a->tid, (int)syscall(SYS_gettid));
	a->ret = a->act(a);
	atomic_store(&a->done, 1);
	return NULL;
}

/*
 * The worker that ends an unmapped import can be held up: it invalidates
 * the import's registrations, and the core's invalidate callback waits
 * for a registration in flight (sp_peersim holds the MR's mapping lock
 * across reg_delay_ms, as a core holds it across get_pages/dma_map).
 * Meanwhile IMPORT_INFO must already say UNMAPPED: the claim path does.
 */
static void import_info_while_the_worker_waits(void)
{
	struct actor a = { .act = act_register };
	struct sp_xbuf x;
	char wchan[128] = "";
	uint32_t st;
	pthread_t t;
	int i;

	a.sim = sim_open();
	a.fd = sp_test_open();
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK_OK(sp_import_raw(a.fd, x.fd, 0, 1 * MiB, x.map, &a.im));
	a.unmap = x.map;
	a.unmap_len = 1 * MiB;
	write_param(SIM_PARAM("reg_delay_ms"), "3000");
	CHECK(pthread_create(&t, NULL, actor_register, &a) == 0, "pthread_create");
	/* the registration sleeps in the core (reg_delay_ms), mapping lock held */
	for (i = 0; i < 3000 && !atomic_load(&a.done); i++) {
		int tid = atomic_load(&a.tid);

		/* psim_reg_delay(), or the timed sleep it calls where that shows */
		if (tid && (strstr(sp_task_wchan(tid, wchan, sizeof(wchan)), "psim_reg_delay") ||
			    !strncmp(wchan, "schedule_timeout", 16)))
			break;
		usleep(10000);
	}
	write_param(SIM_PARAM("reg_delay_ms"), "0");
	CHECK(!atomic_load(&a.done) && i < 3000,
	      "the registration never slept in the core's reg_delay_ms (done %d, wchan \"%s\")",
	      atomic_load(&a.done), wchan);
	munmap(x.map, 1 * MiB);
	x.map = NULL;
	st = import_state(a.fd, a.im.handle);
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	tap_diag("registration in flight: %s", a.ret ? strerror(-a.ret) : "made");
	CHECK(st == STRIXPEER_IMPORT_UNMAPPED,
	      "IMPORT_INFO right after munmap, while the worker waits for the core: state %u, not UNMAPPED",
	      st);
	if (!a.ret)
		sim_dereg(a.sim, a.r.handle);
	CHECK_OK(sp_unimport_raw(a.fd, a.im.handle));
	sp_xbuf_free(&x);
	close(a.fd);
	close(a.sim);
	check_all_released();
}

/* ---- item 2: a revoking exporter (7.x) ------------------------------------ */

/* The running kernel has dma_buf_attach_revocable() (7.x revoke semantics). */
static int kernel_has_revocable(void)
{
	char line[256];
	int found = 0;
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, " dma_buf_attach_revocable") != NULL;
	fclose(f);
	return found;
}

/*
 * Register a REVOCABLE_ONLY BO (a VFIO-PCI-like exporter), then revoke as
 * VFIO does on a reset: either the registration is refused (we are not a
 * revocable importer), or the revocation ends it within 2 s and the HCA's
 * write is refused. Never a registration that outlives the revocation.
 */
static void revoking_exporter(void)
{
	int sim, gfd, ret, rv;
	struct peersim_reg_mr r;
	uint64_t off;
	uint32_t h, left = 0;
	uint8_t *ap, byte = 9;

	if (!kernel_has_revocable())
		SKIP("no dma_buf_attach_revocable() in this kernel (7.x revoke semantics)");
	sim = sim_open();
	gfd = gpusim_open();
	h = gpusim_create(gfd, 1 * MiB, SP_GPUSIM_DOMAIN_GTT, SP_GPUSIM_CREATE_REVOCABLE_ONLY, &off);
	ap = sp_aperture(64 * MiB, 2 * MiB);
	sp_rocm_map(ap, 1 * MiB, gfd, off);
	memset(ap, 0, 1 * MiB);
	ret = sim_reg(sim, ap, 1 * MiB, &r);
	if (ret) {
		tap_diag("registration refused: %s (strixpeer is no revocable importer)",
			 strerror(-ret));
		rv = gpusim_revoke(gfd, h, 2000, &left);
		CHECK(rv == 0 && left == 0, "REVOKE with no registration: %s, %u mappings left",
		      strerror(-rv), left);
	} else {
		CHECK(r.path == PEERSIM_PATH_PEER, "path %u", r.path);
		rv = gpusim_revoke(gfd, h, 2000, &left);
		CHECK(rv == 0 && left == 0,
		      "REVOKE: %s, %u mapping(s) left after 2 s: an importer that supplied invalidate_mappings did not unmap",
		      strerror(-rv), left);
		CHECK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, r.handle, 0, &byte, 1) == -ENOLINK,
		      "the HCA's write after the revocation was not refused");
		sim_dereg(sim, r.handle);
	}
	munmap(ap, 64 * MiB);
	close(gfd);
	close(sim);
	check_all_released();
}

static const struct tap_case cases[] = {
	TAP_CASE(import_in_invalidation_window),
	TAP_CASE(claim_in_invalidation_window),
	TAP_CASE(import_info_unmapped_at_once),
	TAP_CASE(import_info_while_the_worker_waits),
	TAP_CASE(revoking_exporter),
};

TAP_MAIN(cases)
