// SPDX-License-Identifier: MIT
/*
 * dma-buf export of strixpeer buffers: the ioctl and sp_buf_export(), the
 * dma-buf's own mmap, begin/end CPU access, vgem as a pinned (static)
 * importer, the simulated HCA (tests/kmod/peersim_hca.c) as a dynamic and as
 * a pinned importer doing DMA through the scatterlist it was given (and
 * CPU copies through the exporter's vmap), the
 * lifetime rules, re-import through STRIXPEER_IOC_IMPORT, and the control
 * plane's counters and events.
 */
#include "dmabuf_util.h"
#include "peersim.h"

#include <linux/dma-buf.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

static int raw_export(int fd, uint32_t handle, uint32_t flags, int *out)
{
	struct strixpeer_buf_export e = { .handle = handle, .flags = flags };
	int ret = ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e);

	if (out)
		*out = e.fd;
	return ret;
}

/* One buffer, mapped, filled with a pattern, exported read-write. */
struct xb {
	struct sp_dev *dev;
	struct sp_buf *buf;
	uint8_t *map;
	size_t len;
	int fd;
};

static void xb_new(struct xb *x, size_t len, uint32_t seed)
{
	x->dev = sp_test_dev();
	CHECK(sp_buf_alloc(x->dev, len, SP_NODE_DEFAULT, SP_ALLOC_ALLOW_SMALL, &x->buf) == 0,
	      "%s", sp_errmsg());
	x->map = sp_buf_addr(x->buf);
	x->len = sp_buf_size(x->buf);
	sp_fill(x->map, x->len, 0, seed);
	CHECK(sp_buf_export(x->buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &x->fd) == 0,
	      "%s", sp_errmsg());
}

struct find_buf {
	uint32_t pid;
	uint64_t size;
	uint32_t id;
};

static int find_buf_cb(const struct sp_buf_entry *be, void *arg)
{
	struct find_buf *f = arg;

	if (be->pid == f->pid && be->bytes == f->size)
		f->id = be->id;
	return 0;
}

/* The buffer as netlink shows it (this process's buffer of that size). */
static struct sp_buf_entry xb_entry(struct xb *x)
{
	struct find_buf f = { (uint32_t)getpid(), x->len, 0 };
	struct sp_buf_entry e = { .size = sizeof(e) };
	struct sp_ctl *ctl;

	CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_bufs(ctl, 0, find_buf_cb, &f) == 0, "%s", sp_errmsg());
	CHECK(f.id, "buffer not listed");
	CHECK(sp_ctl_buf_get(ctl, f.id, &e) == 0, "%s", sp_errmsg());
	sp_ctl_close(ctl);
	return e;
}

static void test_export_bad_input(void)
{
	int fd = sp_test_open(), out = -1;
	struct strixpeer_buf_alloc a;

	CHECK_OK(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_ALLOW_SMALL, &a));
	CHECK_ERR(raw_export(fd, a.handle, 1U << 7, NULL), EINVAL);
	CHECK_ERR(raw_export(fd, a.handle + 100, 0, NULL), ENOENT);
	{
		struct strixpeer_buf_export e = { .handle = a.handle, .reserved = 1 };

		CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e), EINVAL);
	}
	/* a result that cannot be copied back leaves no fd and no dma-buf */
	{
		long before = sp_dmabuf_count();
		int probe;

		CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, (void *)16), EFAULT);
		probe = dup(0);
		CHECK(probe >= 0, "dup");
		close(probe);
		if (before >= 0)
			CHECK(sp_dmabuf_count() == before, "dma-bufs %ld -> %ld",
			      before, sp_dmabuf_count());
	}
	/* CLOEXEC and read-only are honoured */
	CHECK_OK(raw_export(fd, a.handle, STRIXPEER_EXPORT_CLOEXEC, &out));
	CHECK(fcntl(out, F_GETFD) & FD_CLOEXEC, "CLOEXEC not set");
	CHECK((fcntl(out, F_GETFL) & O_ACCMODE) == O_RDONLY, "not read-only");
	CHECK(mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, out, 0) == MAP_FAILED &&
	      errno == EACCES, "writable mapping of a read-only export");
	close(out);
	CHECK_OK(raw_export(fd, a.handle, STRIXPEER_EXPORT_RDWR, &out));
	CHECK(!(fcntl(out, F_GETFD) & FD_CLOEXEC), "CLOEXEC set");
	CHECK((fcntl(out, F_GETFL) & O_ACCMODE) == O_RDWR, "not read-write");
	/* a private mapping would copy away from the shared pages */
	CHECK(mmap(NULL, a.size, PROT_READ, MAP_PRIVATE, out, 0) == MAP_FAILED &&
	      errno == EINVAL, "private mapping accepted");
	CHECK(mmap(NULL, 2 * a.size, PROT_READ, MAP_SHARED, out, 0) == MAP_FAILED,
	      "mapping beyond the buffer accepted");
	close(out);
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void test_export_mmap_same_bytes(void)
{
	struct xb x;
	uint8_t *m;

	xb_new(&x, 3 * MiB + 4096, 11);
	m = mmap(NULL, x.len, PROT_READ | PROT_WRITE, MAP_SHARED, x.fd, 0);
	CHECK(m != MAP_FAILED, "mmap of the dma-buf: %s", strerror(errno));
	CHECK(sp_verify(m, x.len, 0, 11) < 0, "dma-buf mapping differs");
	sp_fill(m + 4096, MiB, 4096, 12);
	CHECK(sp_verify(x.map + 4096, MiB, 4096, 12) < 0, "buffer mapping differs");
	for (size_t off = 0; off < x.len; off += 4096)
		CHECK(sp_pfn(m + off) == 0 || sp_pfn(m + off) == sp_pfn(x.map + off),
		      "page %zu differs", off / 4096);
	/* an offset mapping of the dma-buf */
	munmap(m, x.len);
	m = mmap(NULL, MiB, PROT_READ, MAP_SHARED, x.fd, 2 * MiB);
	CHECK(m != MAP_FAILED, "offset mmap: %s", strerror(errno));
	CHECK(sp_verify(m, MiB, 2 * MiB, 11) < 0, "offset mapping differs");
	munmap(m, MiB);
	close(x.fd);
	sp_dev_close(x.dev);
	CHECK_NOTHING_PINNED();
}

static void test_export_cpu_access(void)
{
	struct dma_buf_sync s;
	struct xb x;
	uint8_t *m;

	xb_new(&x, MiB, 21);
	m = mmap(NULL, x.len, PROT_READ | PROT_WRITE, MAP_SHARED, x.fd, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	s.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW;
	CHECK_OK(ioctl(x.fd, DMA_BUF_IOCTL_SYNC, &s));
	sp_fill(m, x.len, 0, 22);
	s.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW;
	CHECK_OK(ioctl(x.fd, DMA_BUF_IOCTL_SYNC, &s));
	CHECK(sp_verify(x.map, x.len, 0, 22) < 0, "bytes after END");
	s.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ;
	CHECK_OK(ioctl(x.fd, DMA_BUF_IOCTL_SYNC, &s));
	s.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ;
	CHECK_OK(ioctl(x.fd, DMA_BUF_IOCTL_SYNC, &s));
	s.flags = 1ULL << 40;
	CHECK_ERR(ioctl(x.fd, DMA_BUF_IOCTL_SYNC, &s), EINVAL);
	munmap(m, x.len);
	close(x.fd);
	sp_dev_close(x.dev);
	CHECK_NOTHING_PINNED();
}

/* vgem imports the export (a pinned, non-dynamic importer: drm_prime). */
static void test_vgem_imports_export(void)
{
	struct sp_drm_prime_handle back = { .flags = O_RDWR | O_CLOEXEC };
	struct sp_drm_map_dumb md = { 0 };
	uint32_t gem;
	struct sp_buf_entry e = { .size = sizeof(e) };
	struct stat st1, st2;
	int card = sp_vgem_card();
	struct xb x;
	uint8_t *m;

	if (card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	xb_new(&x, 4 * MiB, 31);
	gem = sp_vgem_import(card, x.fd);
	e = xb_entry(&x);
	CHECK(e.exported && e.exports == 1 && e.attachments == 1,
	      "exported %d exports %u attachments %u", e.exported, e.exports, e.attachments);

	/* vgem hands the same dma-buf back; its bytes are the buffer's */
	back.handle = gem;
	CHECK_OK(ioctl(card, SP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &back));
	CHECK_OK(fstat(x.fd, &st1));
	CHECK_OK(fstat(back.fd, &st2));
	CHECK(st1.st_ino == st2.st_ino, "vgem made another dma-buf");
	m = mmap(NULL, x.len, PROT_READ | PROT_WRITE, MAP_SHARED, back.fd, 0);
	CHECK(m != MAP_FAILED, "mmap of vgem's fd: %s", strerror(errno));
	CHECK(sp_verify(m, x.len, 0, 31) < 0, "bytes through vgem's fd");
	sp_fill(m, x.len, 0, 32);
	CHECK(sp_verify(x.map, x.len, 0, 32) < 0, "bytes written through vgem's fd");
	munmap(m, x.len);

	/* vgem's own mapping of an imported object, where the kernel allows it */
	md.handle = gem;
	if (ioctl(card, SP_DRM_IOCTL_MODE_MAP_DUMB, &md) == 0) {
		m = mmap(NULL, x.len, PROT_READ | PROT_WRITE, MAP_SHARED, card, (off_t)md.offset);
		CHECK(m != MAP_FAILED, "vgem mmap: %s", strerror(errno));
		CHECK(sp_verify(m, x.len, 0, 32) < 0, "bytes through vgem's mapping");
		munmap(m, x.len);
	} else {
		CHECK(errno == EINVAL, "MAP_DUMB: %s", strerror(errno));
		tap_diag("vgem refuses its own mapping of imported objects (drm_gem_dumb_map_offset: EINVAL); bytes checked through the fd vgem hands back");
	}
	close(back.fd);
	sp_vgem_close(card, gem);
	e = xb_entry(&x);
	CHECK(e.attachments == 0, "attachments %u after GEM_CLOSE", e.attachments);
	close(card);
	close(x.fd);
	sp_dev_close(x.dev);
	CHECK_NOTHING_PINNED();
}

/* Freeing the handle and closing every fd leaves the memory to vgem. */
static void test_export_outlives_handle(void)
{
	struct sp_drm_prime_handle back = { .flags = O_RDWR };
	uint64_t buffers0 = sp_test_stats().buffers;
	int card = sp_vgem_card();
	struct xb x;
	uint8_t *m;

	if (card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	xb_new(&x, 2 * MiB, 41);
	back.handle = sp_vgem_import(card, x.fd);
	CHECK_OK(sp_buf_free(x.buf));
	close(x.fd);
	sp_dev_close(x.dev);
	CHECK(sp_test_stats().buffers == buffers0 + 1, "buffer went with its handle");

	CHECK_OK(ioctl(card, SP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &back));
	m = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, back.fd, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	close(back.fd);
	CHECK(sp_verify(m, 2 * MiB, 0, 41) < 0, "bytes after the handle went");
	sp_fill(m, 2 * MiB, 0, 42);
	CHECK(sp_verify(m, 2 * MiB, 0, 42) < 0, "write after the handle went");
	sp_vgem_close(card, back.handle);
	CHECK(sp_test_stats().buffers == buffers0 + 1, "the mapping no longer holds it");
	munmap(m, 2 * MiB);
	close(card);
	CHECK(sp_test_stats().buffers == buffers0, "memory not returned after the last reference");
	CHECK_NOTHING_PINNED();
}

/* The simulated HCA as importer: dynamic and pinned, DMA both ways. */
static void sim_importer(uint32_t flags, size_t len, const char *what)
{
	int sim = peersim_test_open();
	struct peersim_info info;
	uint32_t h;
	uint8_t *tmp;
	struct xb x;

	xb_new(&x, len, 51);
	CHECK_OK(peersim_info(sim, &info));
	h = peersim_reg_dmabuf(sim, x.fd, 4096 + 7, x.len - 8192, PEERSIM_ACCESS_WRITE, flags);
	close(x.fd);	/* the MR keeps its own reference */
	CHECK_ERR(peersim_reg_dmabuf_mr(sim, -1, 0, 4096, 0, flags, NULL), EBADF);
	tmp = malloc(x.len);
	CHECK(tmp, "malloc");
	CHECK_OK(peersim_dma_read(sim, h, 0, tmp, x.len - 8192));
	CHECK(sp_verify(tmp, x.len - 8192, 4096 + 7, 51) < 0, "device read wrong bytes");
	sp_fill(tmp, x.len - 8192, 4096 + 7, 52);
	CHECK_OK(peersim_dma_write(sim, h, 0, tmp, x.len - 8192));
	CHECK(sp_verify(x.map + 4096 + 7, x.len - 8192, 4096 + 7, 52) < 0,
	      "device write not in the buffer");
	CHECK(sp_verify(x.map, 4096 + 7, 0, 51) < 0, "device wrote before its range");
	/* the CPU through the exporter's vmap() sees and changes the same bytes */
	CHECK_OK(peersim_vmap_copy(sim, h, 0, tmp, x.len - 8192, 0));
	CHECK(sp_verify(tmp, x.len - 8192, 4096 + 7, 52) < 0, "vmap read wrong bytes");
	sp_fill(tmp, 4096, 4096 + 7, 53);
	CHECK_OK(peersim_vmap_copy(sim, h, 0, tmp, 4096, 1));
	CHECK(sp_verify(x.map + 4096 + 7, 4096, 4096 + 7, 53) < 0, "vmap write not in the buffer");
	free(tmp);
	CHECK(xb_entry(&x).attachments == 1, "attachment not counted");
	CHECK_OK(peersim_dereg_mr(sim, h));
	CHECK(xb_entry(&x).attachments == 0, "attachment left after dereg");
	tap_diag("%s importer: %zu-byte buffer, device max segment %llu", what, x.len,
		 (unsigned long long)info.max_seg_size);
	close(sim);
	sp_dev_close(x.dev);
	CHECK_NOTHING_PINNED();
}

static void test_sim_dynamic_importer(void)
{
	sim_importer(0, 8 * MiB, "dynamic");
}

static void test_sim_pinned_importer(void)
{
	sim_importer(PEERSIM_DMABUF_PINNED, 8 * MiB, "pinned");
}

/* What an importer's device receives for a 64 MiB buffer. */
static void test_sg_entries_64m(void)
{
	int sim = peersim_test_open();
	struct peersim_reg_dmabuf_mr r;
	struct peersim_info info;
	struct sp_buf_info bi;
	struct xb x;

	xb_new(&x, 64 * MiB, 61);
	CHECK_OK(peersim_info(sim, &info));
	CHECK(sp_buf_query(x.buf, &bi) == 0, "%s", sp_errmsg());
	CHECK_OK(peersim_reg_dmabuf_mr(sim, x.fd, 0, x.len, PEERSIM_ACCESS_WRITE, 0, &r));
	/* what strixpeer handed the importer, before the HCA's own splitting */
	CHECK(r.exp_max_seg <= info.max_seg_size,
	      "exporter gave a %llu-byte segment to a device whose limit is %llu",
	      (unsigned long long)r.exp_max_seg, (unsigned long long)info.max_seg_size);
	CHECK(r.exp_nents == r.nents, "the HCA had to split: %u entries given, %u used",
	      r.exp_nents, r.nents);
	/* runs merged: no more entries than runs split at the limit */
	CHECK(r.exp_nents >= x.len / info.max_seg_size && r.exp_nents >= bi.nr_chunks,
	      "%u entries for %u runs", r.exp_nents, bi.nr_chunks);
	if (info.max_seg_size >= 2 * MiB && bi.page_size >= 2 * MiB)
		CHECK(r.exp_nents <= x.len / (2 * MiB), "%u entries: 2 MiB pages not merged",
		      r.exp_nents);
	tap_diag("segments_64m_export %u (buffer: %u contiguous runs, %llu KiB pages; device max segment %llu; longest %llu)",
		 r.exp_nents, bi.nr_chunks, (unsigned long long)(bi.page_size / 1024),
		 (unsigned long long)info.max_seg_size, (unsigned long long)r.exp_max_seg);
	CHECK_OK(peersim_dereg_mr(sim, r.handle));
	close(sim);
	close(x.fd);
	sp_dev_close(x.dev);
	CHECK_NOTHING_PINNED();
}

/* An export imported back through STRIXPEER_IOC_IMPORT. */
static void test_reimport_export(void)
{
	struct peersim_reg_mr rm;
	struct sp_import_info ii;
	struct sp_import *imp;
	int sim = peersim_test_open();
	uint8_t *m, *tmp;
	struct xb x;

	xb_new(&x, 4 * MiB, 71);
	m = mmap(NULL, x.len, PROT_READ | PROT_WRITE, MAP_SHARED, x.fd, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(sp_import_dmabuf(x.dev, x.fd, 0, x.len, m, &imp) == 0, "%s", sp_errmsg());
	CHECK(sp_import_query(imp, &ii) == 0, "%s", sp_errmsg());
	CHECK(ii.dmabuf_size == x.len && ii.length == x.len && !ii.unmapped,
	      "import info size %llu", (unsigned long long)ii.dmabuf_size);
	close(x.fd);
	/* the pages pin normally: the core registers them without a client */
	CHECK_OK(peersim_reg_mr(sim, m, x.len, PEERSIM_ACCESS_WRITE, &rm));
	CHECK(rm.path == PEERSIM_PATH_GUP, "path %u", rm.path);
	tmp = malloc(x.len);
	CHECK(tmp, "malloc");
	sp_fill(tmp, x.len, 0, 72);
	CHECK_OK(peersim_dma_write(sim, rm.handle, 0, tmp, x.len));
	CHECK(sp_verify(x.map, x.len, 0, 72) < 0, "DMA into the re-imported range");
	free(tmp);
	CHECK_OK(peersim_dereg_mr(sim, rm.handle));
	/* unmapping the range ends the import */
	munmap(m, x.len);
	for (int i = 0; i < 200; i++) {
		CHECK(sp_import_query(imp, &ii) == 0, "%s", sp_errmsg());
		if (ii.unmapped)
			break;
		usleep(10000);
	}
	CHECK(ii.unmapped, "import still active after munmap");
	CHECK(sp_import_free(imp) == 0, "%s", sp_errmsg());
	close(sim);
	sp_dev_close(x.dev);
	CHECK_NOTHING_PINNED();
}

/* Counters and events of the control plane. */
struct ev_log {
	struct sp_ctl *ctl;
	int joined;	/* a config event arrived: the monitor is in the group */
	int want;
	int got[8];
	char device[64];
};

static int on_export_event(const struct sp_event *ev, void *arg)
{
	struct ev_log *l = arg;

	if (ev->type == SP_EVENT_CONFIG)
		__atomic_store_n(&l->joined, 1, __ATOMIC_RELEASE);
	if (ev->type != SP_EVENT_EXPORT || ev->pid == 0)
		return 0;
	if ((unsigned int)ev->export_event < 8)
		l->got[ev->export_event]++;
	if (ev->export_event == SP_EXPORT_ATTACH)
		snprintf(l->device, sizeof(l->device), "%s", ev->device);
	return ev->export_event == SP_EXPORT_RELEASE;
}

static void *monitor_thread(void *arg)
{
	struct ev_log *l = arg;

	sp_ctl_monitor_ex(l->ctl, SP_MONITOR_EXPORT, on_export_event, l);
	return NULL;
}

static void test_export_counters_and_events(void)
{
	struct ev_log l = { 0 };
	struct sp_counters c0 = { .size = sizeof(c0) }, c1 = { .size = sizeof(c1) };
	struct sp_config cfg = { .size = sizeof(cfg) };
	uint32_t gem;
	struct sp_ctl *ctl;
	int card = sp_vgem_card();
	pthread_t t;
	struct xb x;

	if (card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_stats(ctl, &c0) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_open(&l.ctl) == 0, "%s", sp_errmsg());
	CHECK_OK(pthread_create(&t, NULL, monitor_thread, &l));
	/* the monitor is in the group once it sees a config event (at most 60 s) */
	CHECK(sp_ctl_config_get(ctl, &cfg) == 0, "%s", sp_errmsg());
	for (int i = 0; i < 600 && !__atomic_load_n(&l.joined, __ATOMIC_ACQUIRE); i++) {
		CHECK(sp_ctl_config_set(ctl, &cfg, SP_CONFIG_REQUIRE_HUGE) == 0, "%s", sp_errmsg());
		usleep(100000);
	}
	CHECK(__atomic_load_n(&l.joined, __ATOMIC_ACQUIRE), "the monitor saw no config event in 60 s");
	xb_new(&x, MiB, 81);
	gem = sp_vgem_import(card, x.fd);
	CHECK(sp_ctl_stats(ctl, &c1) == 0, "%s", sp_errmsg());
	CHECK(c1.dmabuf_exports == c0.dmabuf_exports + 1 &&
	      c1.dmabuf_attachments == c0.dmabuf_attachments + 1,
	      "exports %llu -> %llu, attachments %llu -> %llu",
	      (unsigned long long)c0.dmabuf_exports, (unsigned long long)c1.dmabuf_exports,
	      (unsigned long long)c0.dmabuf_attachments, (unsigned long long)c1.dmabuf_attachments);
	sp_vgem_close(card, gem);
	close(x.fd);
	pthread_join(t, NULL);
	CHECK(l.got[SP_EXPORT_CREATE] == 1 && l.got[SP_EXPORT_ATTACH] == 1 &&
	      l.got[SP_EXPORT_DETACH] == 1 && l.got[SP_EXPORT_RELEASE] == 1,
	      "events create %d attach %d detach %d release %d", l.got[1], l.got[2],
	      l.got[3], l.got[4]);
	CHECK(l.device[0], "attach event without the device's name");
	CHECK(sp_ctl_stats(ctl, &c1) == 0, "%s", sp_errmsg());
	CHECK(c1.dmabuf_exports == c0.dmabuf_exports &&
	      c1.dmabuf_attachments == c0.dmabuf_attachments, "counters not back");
	sp_ctl_close(l.ctl);
	sp_ctl_close(ctl);
	close(card);
	sp_dev_close(x.dev);
	CHECK_NOTHING_PINNED();
}

/* Killed while it holds exports and an importer's attachment: nothing stays. */
static void test_export_process_killed(void)
{
	int card = sp_vgem_card();
	int sv[2];
	pid_t pid;
	char c;

	if (card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	close(card);
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct sp_drm_prime_handle ph = { 0 };
		struct xb x;
		int fd2, cd = sp_vgem_card();

		xb_new(&x, 4 * MiB, 91);
		ph.fd = x.fd;
		if (ioctl(cd, SP_DRM_IOCTL_PRIME_FD_TO_HANDLE, &ph))
			_exit(2);
		if (sp_buf_export(x.buf, 0, &fd2))
			_exit(3);
		if (write(sv[1], "r", 1) != 1)
			_exit(4);
		pause();
		_exit(0);
	}
	close(sv[1]);
	CHECK(read(sv[0], &c, 1) == 1, "child failed before holding its exports");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(sv[0]);
	CHECK_NOTHING_PINNED();
}

static const struct tap_case cases[] = {
	TAP_CASE(test_export_bad_input),
	TAP_CASE(test_export_mmap_same_bytes),
	TAP_CASE(test_export_cpu_access),
	TAP_CASE(test_vgem_imports_export),
	TAP_CASE(test_export_outlives_handle),
	TAP_CASE(test_sim_dynamic_importer),
	TAP_CASE(test_sim_pinned_importer),
	TAP_CASE_T(test_sg_entries_64m, 300),
	TAP_CASE(test_reimport_export),
	TAP_CASE(test_export_counters_and_events),
	TAP_CASE(test_export_process_killed),
};

TAP_MAIN(cases)
