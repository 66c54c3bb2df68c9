// SPDX-License-Identifier: MIT
/* peer: invalidation, kills mid-registration, counters, events, read-only */
#include "peer.h"

enum trigger { T_UNIMPORT, T_CLOSE, T_MUNMAP };

static void invalidate_by(enum trigger t)
{
	int sim = sim_open(), fd = sp_test_open();
	struct sp_peer_counters c0 = peer_stats(), c1;
	long bufs0 = sp_dmabuf_count(), bufs1;
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	struct peersim_mr_info m;
	uint8_t byte = 0x5a;
	uint64_t t0, t1;
	struct sp_xbuf x;

	sp_xbuf_new(SP_EXP_VGEM, 4 * MiB, 0, &x);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, 4 * MiB, x.map, &im));
	close(x.fd);	/* only strixpeer and the mapping hold it now */
	x.fd = -1;
	CHECK_OK(sim_reg(sim, x.map, 4 * MiB, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "path %u", r.path);
	CHECK_OK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, r.handle, 100, &byte, 1));
	CHECK(x.map[100] == 0x5a, "first DMA not seen");

	t0 = now_ns();
	if (t == T_UNIMPORT)
		CHECK_OK(sp_unimport_raw(fd, im.handle));
	else if (t == T_CLOSE)
		close(fd);
	else {
		munmap(x.map, x.len);
		x.map = NULL;
	}
	t1 = now_ns();
	m = sim_mr(sim, r.handle);
	for (int i = 0; t == T_MUNMAP && i < 100 && m.state != PEERSIM_MR_INVALIDATED; i++) {
		usleep(20000);
		m = sim_mr(sim, r.handle);
	}
	CHECK(m.state == PEERSIM_MR_INVALIDATED, "MR still active after the trigger");
	CHECK(m.free_callbacks == 1, "%u invalidate callbacks", m.free_callbacks);
	if (t == T_MUNMAP)
		tap_diag("munmap -> core invalidated: %.3f ms (munmap itself %.3f ms)",
			 (double)(int64_t)(m.invalidated_at_ns - t0) / 1e6,
			 (double)(t1 - t0) / 1e6);
	else
		CHECK(m.invalidated_at_ns >= t0 && m.invalidated_at_ns <= t1,
		      "invalidated outside the call that ended the import");
	byte = 0xa5;
	CHECK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, r.handle, 100, &byte, 1) == -ENOLINK,
	      "DMA after invalidation was not refused");
	if (x.map)
		CHECK(x.map[100] == 0x5a, "DMA after invalidation reached the pages");
	c1 = peer_stats();
	CHECK(c1.invalidations == c0.invalidations + 1, "invalidations %llu -> %llu",
	      (unsigned long long)c0.invalidations, (unsigned long long)c1.invalidations);
	sim_dereg(sim, r.handle);
	if (t != T_CLOSE)
		close(fd);
	sp_xbuf_free(&x);
	close(sim);
	check_all_released();
	bufs1 = sp_dmabuf_count();
	if (bufs0 >= 0)
		CHECK(bufs1 == bufs0, "dma-bufs alive: %ld before, %ld after", bufs0, bufs1);
}

void invalidate_unimport(void) { invalidate_by(T_UNIMPORT); }
void invalidate_close(void) { invalidate_by(T_CLOSE); }
void invalidate_munmap(void) { invalidate_by(T_MUNMAP); }

/* The importing process exits while the core still holds the MR. */
void invalidate_exit(void)
{
	int sim = sim_open(), sv[2];
	struct peersim_mr_info m;
	uint32_t handle = 0;
	pid_t pid;
	int st;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	if (pid == 0) {
		/* registers through the parent's sim fd, then dies */
		int fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		struct peersim_reg_mr r;
		struct sp_xbuf x;

		sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
		if (fd < 0 || sp_import_raw(fd, x.fd, 0, 1 * MiB, x.map, NULL) ||
		    sim_reg(sim, x.map, 1 * MiB, &r) || r.path != PEERSIM_PATH_PEER)
			_exit(1);
		if (write(sv[1], &r.handle, sizeof(r.handle)) != sizeof(r.handle))
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK(read(sv[0], &handle, sizeof(handle)) == sizeof(handle), "child did not register");
	m = sim_mr(sim, handle);
	CHECK(m.state == PEERSIM_MR_ACTIVE, "MR not active before exit");
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	for (int i = 0; i < 100 && m.state != PEERSIM_MR_INVALIDATED; i++) {
		usleep(20000);
		m = sim_mr(sim, handle);
	}
	CHECK(m.state == PEERSIM_MR_INVALIDATED, "MR of a dead process still active");
	CHECK(sim_dma(sim, PEERSIM_IOC_DMA_READ, handle, 0, &st, 1) == -ENOLINK,
	      "DMA after exit was not refused");
	sim_dereg(sim, handle);
	close(sim);
	check_all_released();
}

/* kill -9 while the core is between get_pages and dma_map. */
void kill_mid_registration(void)
{
	int sim = sim_open();
	struct peersim_info si = sim_info(sim);
	pid_t pid;
	int st;

	write_param(SIM_PARAM("reg_delay_ms"), "3000");
	pid = fork();
	if (pid == 0) {
		int fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		struct peersim_reg_mr r;
		struct sp_xbuf x;

		sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
		if (fd < 0 || sp_import_raw(fd, x.fd, 0, 1 * MiB, x.map, NULL))
			_exit(1);
		sim_reg(sim, x.map, 1 * MiB, &r);
		_exit(2);
	}
	for (int i = 0; i < 3000 && peer_stats().registrations == 0; i++)
		usleep(20000);
	CHECK(peer_stats().registrations == 1, "the child never got claimed");
	usleep(200000);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st), "child was not killed mid-way");
	write_param(SIM_PARAM("reg_delay_ms"), "0");
	CHECK(sim_info(sim).live_mrs == si.live_mrs, "sim has %llu MRs left",
	      (unsigned long long)sim_info(sim).live_mrs);
	close(sim);
	check_all_released();
}

/* Counters move as the client works. */
void counters(void)
{
	int sim = sim_open(), fd = sp_test_open();
	struct sp_peer_counters c0 = peer_stats(), c1;
	struct peersim_reg_mr r;
	struct sp_xbuf x;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, 1 * MiB, x.map, NULL));
	CHECK_OK(sim_reg(sim, x.map, 1 * MiB, &r));
	c1 = peer_stats();
	CHECK(c1.acquires > c0.acquires && c1.claims == c0.claims + 1 &&
	      c1.maps == c0.maps + 1 && c1.registrations == 1 && c1.imports == 1,
	      "acquires %llu claims %llu maps %llu regs %llu imports %llu",
	      (unsigned long long)(c1.acquires - c0.acquires),
	      (unsigned long long)(c1.claims - c0.claims),
	      (unsigned long long)(c1.maps - c0.maps),
	      (unsigned long long)c1.registrations, (unsigned long long)c1.imports);
	/* a registration holds the module: rmmod refuses, never blocks */
	CHECK_ERR(syscall(SYS_delete_module, "strixpeer", O_NONBLOCK), EWOULDBLOCK);
	sim_dereg(sim, r.handle);
	close(fd);
	sp_xbuf_free(&x);
	close(sim);
	check_all_released();
}

static int peer_event_to_pipe(const struct sp_event *ev, void *arg)
{
	int fd = *(int *)arg;

	/* config events too: the parent's sign that the monitor is in the group */
	if (ev->type != SP_EVENT_PEER && ev->type != SP_EVENT_CONFIG)
		return 0;
	if (write(fd, ev, sizeof(*ev)) != sizeof(*ev))
		return 1;
	return ev->type == SP_EVENT_PEER && ev->peer == SP_PEER_INVALIDATE;
}

/* The next PEER event from the monitor's pipe (config events skipped). */
static int read_peer_event(int fd, struct sp_event *ev)
{
	do {
		if (read(fd, ev, sizeof(*ev)) != sizeof(*ev))
			return -1;
	} while (ev->type != SP_EVENT_PEER);
	return 0;
}

/* claim, map and invalidate reach the events group, in that order */
void events(void)
{
	int sim = sim_open(), fd = sp_test_open(), pfd[2];
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	struct sp_event ev[3];
	struct sp_config cfg = { .size = sizeof(cfg) };
	struct sp_ctl *ctl;
	struct sp_xbuf x;
	int joined = 0;
	pid_t pid;

	CHECK_OK(pipe(pfd));
	pid = fork();
	if (pid == 0) {
		struct sp_ctl *mon;

		if (sp_ctl_open(&mon))
			_exit(1);
		_exit(sp_ctl_monitor_ex(mon, SP_MONITOR_PEER, peer_event_to_pipe, &pfd[1]) < 0);
	}
	/* the monitor is in the group once it passes a config event on (60 s) */
	CHECK(sp_ctl_open(&ctl) == 0 && sp_ctl_config_get(ctl, &cfg) == 0, "%s", sp_errmsg());
	for (int i = 0; i < 600 && !joined; i++) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };

		CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_REQUIRE_HUGE) == 0, "%s", sp_errmsg());
		if (poll(&p, 1, 100) == 1) {
			CHECK(read(pfd[0], &ev[0], sizeof(ev[0])) == sizeof(ev[0]), "monitor pipe");
			joined = ev[0].type == SP_EVENT_CONFIG;
		}
	}
	sp_ctl_close(ctl);
	CHECK(joined, "the monitor passed no config event on in 60 s");
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, 1 * MiB, x.map, &im));
	CHECK_OK(sim_reg(sim, x.map, 1 * MiB, &r));
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	for (int i = 0; i < 3; i++)
		CHECK(read_peer_event(pfd[0], &ev[i]) == 0, "event %d missing", i);
	CHECK(ev[0].peer == SP_PEER_CLAIM && ev[1].peer == SP_PEER_MAP &&
	      ev[2].peer == SP_PEER_INVALIDATE, "events %d %d %d", ev[0].peer, ev[1].peer,
	      ev[2].peer);
	for (int i = 0; i < 3; i++)
		CHECK(ev[i].import_id == im.id && ev[i].pid == (uint32_t)getpid() &&
		      ev[i].bytes == 1 * MiB, "event %d: import %u pid %u size %llu", i,
		      ev[i].import_id, ev[i].pid, (unsigned long long)ev[i].bytes);
	CHECK(ev[2].reason == SP_INVAL_UNIMPORT && ev[0].reason == 0, "reason %d", ev[2].reason);
	waitpid(pid, NULL, 0);
	sim_dereg(sim, r.handle);
	close(fd);
	sp_xbuf_free(&x);
	close(sim);
	check_all_released();
}

/*
 * A read-only dma-buf (exported without O_RDWR) imported at a mapping that
 * GUP cannot pin: a writable registration is refused, as a writable pin
 * of read-only memory would be; a read-only one works.
 */
void read_only_dmabuf(void)
{
	int sim = sim_open(), fd = sp_test_open(), card = sp_vgem_card();
	struct sp_drm_create_dumb c = { .height = 64, .width = 4096, .bpp = 32 };
	struct sp_drm_prime_handle ph = { .flags = O_CLOEXEC };
	struct sp_drm_map_dumb md = { 0 };
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	uint8_t *map;
	int ret;

	if (card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	CHECK_OK(ioctl(card, SP_DRM_IOCTL_MODE_CREATE_DUMB, &c));
	ph.handle = c.handle;
	CHECK_OK(ioctl(card, SP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph));
	CHECK((fcntl(ph.fd, F_GETFL) & O_ACCMODE) == O_RDONLY, "dma-buf flags %#x",
	      fcntl(ph.fd, F_GETFL));
	md.handle = c.handle;
	CHECK_OK(ioctl(card, SP_DRM_IOCTL_MODE_MAP_DUMB, &md));
	map = mmap(NULL, 1 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, card, (off_t)md.offset);
	CHECK(map != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK_OK(sp_import_raw(fd, ph.fd, 0, 1 * MiB, map, &im));
	ret = sim_reg(sim, map, 1 * MiB, &r);
	if (ret == 0)
		sim_dereg(sim, r.handle);
	CHECK(ret == -EACCES, "writable registration of a read-only dma-buf: %d", ret);
	memset(&r, 0, sizeof(r));
	r.addr = (uintptr_t)map;
	r.length = 1 * MiB;
	r.access = 0;
	CHECK_OK(ioctl(sim, PEERSIM_IOC_REG_MR, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "path %u", r.path);
	sim_dereg(sim, r.handle);
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	/*
	 * Zero-change: the object's registered dma-buf is that read-only
	 * export, but the mapping is writable: a writable registration works.
	 */
	CHECK_OK(sim_reg(sim, map, 1 * MiB, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "writable GEM mapping: path %u", r.path);
	sim_dereg(sim, r.handle);
	munmap(map, 1 * MiB);
	/* a mapping that may never be written cannot be registered writable */
	map = mmap(NULL, 1 * MiB, PROT_READ, MAP_SHARED, card, (off_t)md.offset);
	CHECK(map != MAP_FAILED, "mmap: %s", strerror(errno));
	ret = sim_reg(sim, map, 1 * MiB, &r);
	if (ret == 0)
		sim_dereg(sim, r.handle);
	CHECK(ret == -EACCES, "writable registration of a PROT_READ GEM mapping: %d", ret);
	munmap(map, 1 * MiB);
	close(ph.fd);
	close(card);
	close(fd);
	close(sim);
	check_all_released();
}

/*
 * ---- what registrations pin, and who pays (issue 24, finding 2) ----------
 *
 * A registration of 4 KiB of a GPU BO pins the whole BO (the shared pinned
 * mapping). The pin is charged once, to the registering user's locked_vm
 * against RLIMIT_MEMLOCK (CAP_IPC_LOCK exempt) and against
 * max_peer_pinned_per_user (nobody exempt); past either the registration
 * fails with EDQUOT.
 */
