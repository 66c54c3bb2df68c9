// SPDX-License-Identifier: MIT
/*
 * PeerDirect tests: imports of real dma-bufs (vgem, udmabuf, the system
 * dma-heap), registered through the simulated PeerDirect core + HCA
 * (tests/kmod/peersim_core.c + peersim_hca.c, /dev/sp_peersim), which asks strixpeer's client
 * exactly as ib_core would: only after pinning failed.
 *
 *   peer          strixpeer built against the simulated core's symbols and
 *                 loaded after sp_peersim (semantics: whatever sp_peersim
 *                 was loaded with; the diag line says which)
 *   peer noapi    strixpeer built without the peer-memory API
 */
#include "peer_util.h"
#include "gpusim.h"

#include <grp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* ---- with the client ---------------------------------------------------- */

static void client_registered(void)
{
	int sim = sim_open(), fd = sp_test_open();
	struct strixpeer_version v = { 0 };
	struct peersim_client c = sim_client(sim);
	struct sp_info info = { .size = sizeof(info) };
	struct sp_ctl *ctl;
	char buf[64] = "";
	FILE *f;

	CHECK(c.flags & PEERSIM_CLIENT_INVAL_CB, "client did not ask for the invalidate callback");
	CHECK(c.flags & PEERSIM_CLIENT_EX, "client not in the extended form");
	CHECK(c.flags & PEERSIM_CLIENT_INVALIDATE_UNMAPS, "no PEER_MEM_INVALIDATE_UNMAPS");
	if (peersim_has_sysfs()) {
		f = fopen(PEERSIM_SYSFS_PEERS "/strixpeer/version", "re");
		CHECK(f && fgets(buf, sizeof(buf), f), "memory_peers/strixpeer/version");
		fclose(f);
		CHECK(buf[0] >= '0' && buf[0] <= '9', "version \"%s\"", buf);
	} else {
		/* OFED's core where mm_kobj is not exported: no sysfs at all */
		CHECK(access(PEERSIM_SYSFS_PEERS, F_OK) < 0 && errno == ENOENT,
		      "%s exists on a core without sysfs", PEERSIM_SYSFS_PEERS);
	}
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_VERSION, &v));
	CHECK(v.features & STRIXPEER_FEAT_PEERDIRECT, "features %#llx", (unsigned long long)v.features);
	CHECK(v.features & STRIXPEER_FEAT_DMABUF_IMPORT, "no import feature");
	CHECK(sp_ctl_open(&ctl) == 0, "sp_ctl_open: %s", sp_errmsg());
	CHECK(sp_ctl_info(ctl, &info) == 0, "info: %s", sp_errmsg());
	CHECK(info.features & SP_FEAT_PEERDIRECT, "netlink features");
	CHECK(info.peerdirect_reason[0] == '\0', "reason \"%s\"", info.peerdirect_reason);
	sp_ctl_close(ctl);
	tap_diag("semantics %s, max_seg_size %llu",
		 sim_info(sim).semantics == PEERSIM_SEM_LEGACY ? "legacy" : "modern",
		 (unsigned long long)sim_info(sim).max_seg_size);
}

static void import_errors(void)
{
	int fd = sp_test_open();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct strixpeer_import im, im2;
	struct strixpeer_import_info ii = { 0 };
	struct sp_xbuf x;
	pid_t pid;
	int st;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK_ERR(sp_import_raw(fd, 12345, 0, 4096, x.map, NULL), EBADF);
	CHECK_ERR(sp_import_raw(fd, null, 0, 4096, x.map, NULL), EBADF);
	CHECK_ERR(sp_import_raw(fd, x.fd, 0, 0, x.map, NULL), EINVAL);
	CHECK_ERR(sp_import_raw(fd, x.fd, 100, 4096, x.map, NULL), EINVAL);
	CHECK_ERR(sp_import_raw(fd, x.fd, 0, 4000, x.map, NULL), EINVAL);
	CHECK_ERR(sp_import_raw(fd, x.fd, 0, 4096, x.map + 8, NULL), EINVAL);
	CHECK_ERR(sp_import_raw(fd, x.fd, 0, 2 * MiB, x.map, NULL), ERANGE);
	CHECK_ERR(sp_import_raw(fd, x.fd, 1 * MiB, 4096, x.map, NULL), ERANGE);
	CHECK_ERR(sp_import_raw(fd, x.fd, 0, 4096, (void *)(~0UL << 12), NULL), EINVAL);
	im = (struct strixpeer_import){ .dmabuf_fd = x.fd, .flags = 1, .length = 4096,
					.va = (uintptr_t)x.map };
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_IMPORT, &im), EINVAL);

	CHECK_OK(sp_import_raw(fd, x.fd, 0, 512 * 1024, x.map, &im));
	CHECK(im.handle > 0, "handle %u", im.handle);
	/* overlapping, even partly or through another fd of this process */
	CHECK_ERR(sp_import_raw(fd, x.fd, 0, 4096, x.map + 4096, NULL), EEXIST);
	CHECK_ERR(sp_import_raw(fd, x.fd, 0, 1 * MiB, x.map, NULL), EEXIST);
	{
		int fd2 = sp_test_open();

		CHECK_ERR(sp_import_raw(fd2, x.fd, 0, 4096, x.map + 256 * 1024, NULL), EEXIST);
		close(fd2);
	}
	/* adjacent is fine */
	CHECK_OK(sp_import_raw(fd, x.fd, 512 * 1024, 512 * 1024, x.map + 512 * 1024, &im2));

	ii.handle = im.handle;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_IMPORT_INFO, &ii));
	CHECK(ii.va == (uintptr_t)x.map && ii.length == 512 * 1024 && ii.offset == 0 &&
	      ii.dmabuf_size == 1 * MiB && ii.id == im.id &&
	      ii.state == STRIXPEER_IMPORT_ACTIVE && ii.registrations == 0, "import info");
	ii.reserved = 1;
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_IMPORT_INFO, &ii), EINVAL);

	/* a fork child may not use the parent's fd */
	pid = fork();
	if (pid == 0) {
		struct strixpeer_unimport u = { .handle = im.handle };

		_exit(ioctl(fd, STRIXPEER_IOC_UNIMPORT, &u) == -1 && errno == EACCES ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "child's UNIMPORT on the parent's fd was not refused with EACCES");

	/* the fd may go: strixpeer holds its own reference on the dma-buf */
	close(x.fd);
	x.fd = -1;
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	CHECK_ERR(sp_unimport_raw(fd, im.handle), ENOENT);
	CHECK_ERR(sp_unimport_raw(fd, 999), ENOENT);
	{
		struct strixpeer_unimport u = { .handle = im2.handle, .flags = 2 };

		CHECK_ERR(ioctl(fd, STRIXPEER_IOC_UNIMPORT, &u), EINVAL);
	}
	close(fd);	/* ends im2 */
	close(null);
	sp_xbuf_free(&x);
	check_all_released();
}

/* Ordinary pages never reach a peer client: GUP takes them first. */
static void gup_first(void)
{
	int sim = sim_open(), fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	struct peersim_client before = sim_client(sim), after;
	struct peersim_reg_mr r;
	uint8_t *heap = aligned_alloc(4096, 1 * MiB), *spb;

	CHECK(heap, "malloc");
	memset(heap, 0, 1 * MiB);
	CHECK_OK(sim_reg(sim, heap, 1 * MiB, &r));
	CHECK(r.path == PEERSIM_PATH_GUP, "malloc memory took path %u", r.path);
	sim_dereg(sim, r.handle);

	CHECK_OK(sp_raw_alloc(fd, 2 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	spb = sp_raw_map(fd, &a);
	CHECK_OK(sim_reg(sim, spb, 2 * MiB, &r));
	CHECK(r.path == PEERSIM_PATH_GUP, "strixpeer buffer took path %u", r.path);
	sim_dereg(sim, r.handle);

	after = sim_client(sim);
	CHECK(after.acquire_calls == before.acquire_calls,
	      "strixpeer's acquire was asked %llu times",
	      (unsigned long long)(after.acquire_calls - before.acquire_calls));
	munmap(spb, a.size);
	free(heap);
	close(fd);
	close(sim);
}

/* DMA through the simulated HCA vs the exporter's CPU mapping. */
static void data_roundtrip(enum sp_exporter kind, size_t len, size_t skew)
{
	int sim = sim_open(), fd = sp_test_open();
	struct strixpeer_import im;
	struct peersim_reg_mr r;
	struct peersim_mr_info m;
	size_t rlen = len - skew - (skew ? 333 : 0);
	uint8_t *tmp = malloc(rlen);
	struct sp_xbuf x;

	CHECK(tmp, "malloc");
	sp_xbuf_new(kind, len, 0, &x);
	memset(x.map, 0, len);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, len, x.map, &im));
	CHECK_OK(sim_reg(sim, x.map + skew, rlen, &r));
	CHECK(r.path == PEERSIM_PATH_PEER && !strcmp(r.client, "strixpeer"),
	      "%s: path %u client \"%s\"", sp_exporter_name[kind], r.path, r.client);
	m = sim_mr(sim, r.handle);
	CHECK(m.state == PEERSIM_MR_ACTIVE && m.page_size == 4096, "mr state %u page %llu",
	      m.state, (unsigned long long)m.page_size);

	/* NIC writes, CPU reads through the exporter's mapping */
	sp_fill(tmp, rlen, 0, 21);
	CHECK_OK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, r.handle, 0, tmp, rlen));
	CHECK(sp_verify(x.map + skew, rlen, 0, 21) < 0, "%s: DMA write not seen by the CPU at %lld",
	      sp_exporter_name[kind], (long long)sp_verify(x.map + skew, rlen, 0, 21));
	if (skew)
		CHECK(x.map[skew - 1] == 0 && x.map[skew + rlen] == 0, "DMA wrote outside the MR");
	/* CPU writes, NIC reads */
	sp_fill(x.map + skew, rlen, 0, 22);
	memset(tmp, 0, rlen);
	CHECK_OK(sim_dma(sim, PEERSIM_IOC_DMA_READ, r.handle, 0, tmp, rlen));
	CHECK(sp_verify(tmp, rlen, 0, 22) < 0, "%s: DMA read differs", sp_exporter_name[kind]);

	sim_dereg(sim, r.handle);
	CHECK_OK(sp_unimport_raw(fd, im.handle));
	sp_xbuf_free(&x);
	free(tmp);
	close(fd);
	close(sim);
	check_all_released();
}

static void data_vgem_4k(void) { data_roundtrip(SP_EXP_VGEM, 16384, 0); }
static void data_vgem_1m_unaligned(void) { data_roundtrip(SP_EXP_VGEM, 1 * MiB, 123); }
/* 64 MiB; 16 MiB on a debug kernel (still hundreds of sg entries) */
#define LEN_64M (tap_debug_kernel() ? 16 * MiB : 64 * MiB)
static void data_vgem_64m(void) { data_roundtrip(SP_EXP_VGEM, LEN_64M, 4096 + 7); }
static void data_udmabuf_4k(void) { data_roundtrip(SP_EXP_UDMABUF, 4096, 0); }
static void data_udmabuf_64m_unaligned(void) { data_roundtrip(SP_EXP_UDMABUF, LEN_64M, 99); }
static void data_heap_4k(void) { data_roundtrip(SP_EXP_HEAP, 4096, 0); }
static void data_heap_64m_unaligned(void) { data_roundtrip(SP_EXP_HEAP, LEN_64M, 4095); }

/*
 * The sg table the client hands the core for a 64 MiB import: whole pages,
 * no segment above the device's max segment size, contiguous runs merged.
 */
static void segments_64m(void)
{
	int sim = sim_open(), fd = sp_test_open();
	struct peersim_info si = sim_info(sim);
	struct peersim_reg_mr r;
	struct peersim_seg *segs;
	struct peersim_mr_segs ms;
	uint64_t total = 0, maxlen = 0;
	unsigned int merged_ok = 1;
	struct sp_xbuf x;

	sp_xbuf_new(SP_EXP_VGEM, 64 * MiB, 0, &x);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, 64 * MiB, x.map, NULL));
	CHECK_OK(sim_reg(sim, x.map, 64 * MiB, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "path %u", r.path);
	segs = calloc(r.nents, sizeof(*segs));
	ms = (struct peersim_mr_segs){ .handle = r.handle, .count = r.nents,
				       .segs = (uintptr_t)segs };
	CHECK_OK(ioctl(sim, PEERSIM_IOC_MR_SEGS, &ms));
	CHECK(ms.count == r.nents, "%u segments, REG_MR said %u", ms.count, r.nents);
	for (uint32_t i = 0; i < ms.count; i++) {
		CHECK(segs[i].dma_addr % 4096 == 0 && segs[i].len % 4096 == 0,
		      "segment %u not page granular", i);
		CHECK(segs[i].len <= si.max_seg_size, "segment %u: %llu bytes > max %llu", i,
		      (unsigned long long)segs[i].len, (unsigned long long)si.max_seg_size);
		if (i && segs[i - 1].dma_addr + segs[i - 1].len == segs[i].dma_addr &&
		    segs[i - 1].len + 4096 <= si.max_seg_size)
			merged_ok = 0;
		total += segs[i].len;
		if (segs[i].len > maxlen)
			maxlen = segs[i].len;
	}
	CHECK(merged_ok, "contiguous pages left in separate segments");
	CHECK(total == 64 * MiB, "segments cover %llu bytes", (unsigned long long)total);
	tap_diag("64 MiB vgem import: %u DMA segments (largest %llu KiB, max_seg_size %llu KiB)",
		 ms.count, (unsigned long long)(maxlen / 1024),
		 (unsigned long long)(si.max_seg_size / 1024));
	sim_dereg(sim, r.handle);
	free(segs);
	close(fd);
	sp_xbuf_free(&x);
	close(sim);
	check_all_released();
}

/* What is not ours is declined; the core then fails as it would have. */
static void declines(void)
{
	int sim = sim_open(), fd = sp_test_open();
	struct peersim_client before = sim_client(sim), after;
	struct peersim_reg_mr r;
	struct sp_xbuf heap, vg;
	int ret;

	/* PFN mappings nobody imported that are not GEM mappings: a vgem
	 * buffer mapped through its dma-buf fd, a dma-heap buffer */
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &heap);
	ret = sim_reg(sim, heap.map, 1 * MiB, &r);
	CHECK(ret == -EFAULT, "unimported vgem dma-buf mapping: %d, path %u", ret, r.path);
	sp_xbuf_free(&heap);
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 1, &vg);
	if (access("/dev/dma_heap/system", F_OK) == 0) {
		sp_xbuf_new(SP_EXP_HEAP, 1 * MiB, 0, &heap);
		ret = sim_reg(sim, heap.map, 1 * MiB, &r);
		CHECK(ret == -EFAULT, "unimported dma-heap mapping: %d, path %u", ret, r.path);
		sp_xbuf_free(&heap);
	}
	/* a range that crosses an import's end in a mapping that is no GEM one */
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &heap);
	CHECK_OK(sp_import_raw(fd, heap.fd, 0, 512 * 1024, heap.map, NULL));
	ret = sim_reg(sim, heap.map + 256 * 1024, 512 * 1024, &r);
	CHECK(ret == -EFAULT, "range crossing the import's end: %d, path %u", ret, r.path);
	/* inside it: claimed */
	CHECK_OK(sim_reg(sim, heap.map + 4096, 8192, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "inside the import: path %u", r.path);
	sim_dereg(sim, r.handle);
	/*
	 * In a GEM mapping, a range crossing an import's end is claimed from
	 * the mapping itself (tests/guest/peer_rocm.c has the whole rule).
	 */
	CHECK_OK(sp_import_raw(fd, vg.fd, 0, 512 * 1024, vg.map, NULL));
	CHECK_OK(sim_reg(sim, vg.map + 256 * 1024, 512 * 1024, &r));
	CHECK(r.path == PEERSIM_PATH_PEER, "crossing inside a GEM mapping: path %u", r.path);
	sim_dereg(sim, r.handle);
	sp_xbuf_free(&heap);
	after = sim_client(sim);
	CHECK(after.acquire_calls > before.acquire_calls, "client never asked");
	close(fd);
	sp_xbuf_free(&vg);
	close(sim);
	check_all_released();
}

/* My import is mine: another process's registration of the same VA is not. */
static void other_process(void)
{
	int fd = sp_test_open();
	struct sp_xbuf x;
	pid_t pid;
	int st;

	/* through the dma-buf fd: not a GEM mapping, so no zero-change claim */
	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK_OK(sp_import_raw(fd, x.fd, 0, 1 * MiB, x.map, NULL));
	pid = fork();
	if (pid == 0) {
		/* the child inherited the mapping but not the import */
		int sim = open(PEERSIM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		struct peersim_reg_mr r;

		_exit(sim >= 0 && sim_reg(sim, x.map, 1 * MiB, &r) == -EFAULT ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "a child registered the parent's import");
	close(fd);
	sp_xbuf_free(&x);
	check_all_released();
}

/* Zero-change mode: a GEM mapping through the card, no import call. */
static void zero_change_vgem(void)
{
	int sim = sim_open();
	uint8_t *tmp = malloc(256 * 1024);
	struct peersim_reg_mr r;
	struct sp_xbuf x;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 1, &x);
	memset(x.map, 0, 1 * MiB);
	CHECK_OK(sim_reg(sim, x.map + 64 * 1024 + 5, 256 * 1024, &r));
	CHECK(r.path == PEERSIM_PATH_PEER && !strcmp(r.client, "strixpeer"),
	      "GEM mapping: path %u client \"%s\"", r.path, r.client);
	sp_fill(tmp, 256 * 1024, 0, 31);
	CHECK_OK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, r.handle, 0, tmp, 256 * 1024));
	CHECK(sp_verify(x.map + 64 * 1024 + 5, 256 * 1024, 0, 31) < 0, "DMA not seen");
	CHECK(peer_stats().imports == 1, "implicit import not counted");
	sim_dereg(sim, r.handle);
	CHECK(peer_stats().imports == 0, "implicit import outlived its registration");

	/* an unmap of the mapping invalidates an implicit import too */
	CHECK_OK(sim_reg(sim, x.map, 1 * MiB, &r));
	munmap(x.map, 1 * MiB);
	x.map = NULL;
	for (int i = 0; i < 600 && sim_mr(sim, r.handle).state != PEERSIM_MR_INVALIDATED; i++)
		usleep(100000);	/* the import's worker invalidates: at most 60 s */
	CHECK(sim_mr(sim, r.handle).state == PEERSIM_MR_INVALIDATED,
	      "not invalidated 60 s after munmap: MR state %u", sim_mr(sim, r.handle).state);
	sim_dereg(sim, r.handle);
	sp_xbuf_free(&x);
	free(tmp);
	close(sim);
	check_all_released();
}

static void zero_change_off_child(void)
{
	int sim = sim_open();
	struct peersim_reg_mr r;
	struct sp_xbuf x;
	int ret;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 1, &x);
	ret = sim_reg(sim, x.map, 1 * MiB, &r);
	CHECK(ret == -EFAULT, "GEM mapping with claim_gem_mappings=0: %d, path %u", ret, r.path);
	sp_xbuf_free(&x);
	close(sim);
}

static void zero_change_off(void)
{
	with_param("claim_gem_mappings", "0", zero_change_off_child);
	check_all_released();
}

/*
 * Invalidation: after the trigger the core has been told (the simulated
 * HCA refuses DMA with ENOLINK), and nothing is left behind.
 */
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

static void invalidate_unimport(void) { invalidate_by(T_UNIMPORT); }
static void invalidate_close(void) { invalidate_by(T_CLOSE); }
static void invalidate_munmap(void) { invalidate_by(T_MUNMAP); }

/* The importing process exits while the core still holds the MR. */
static void invalidate_exit(void)
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
static void kill_mid_registration(void)
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
static void counters(void)
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
static void events(void)
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
static void read_only_dmabuf(void)
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
#define NOBODY 65534
#define PIN_BO (2 * MiB)
#define PIN_BOS 8

struct pin_result {
	int ok;			/* registrations that succeeded, in order */
	int err;		/* errno of the first that failed, 0 if none */
	uint64_t user_bytes;	/* the uid's PeerDirect pins after the last */
	uint64_t shared_bytes;	/* ... after a 2nd registration of BO 0 */
	uint64_t fail_limit;	/* peer_fail_limit grew by */
};

/*
 * In a child: RLIMIT_MEMLOCK @memlock, as nobody (no groups, so not in the
 * device group; the render node and the verbs device opened before, as a
 * user who may open them) unless @root; PIN_BOS BOs of PIN_BO bytes, 4 KiB
 * registered from each until one fails. The child exits with its MRs
 * registered: exit must release them, their pins and their charge.
 */
static struct pin_result pin_run(uint64_t memlock, bool root)
{
	struct pin_result res = { 0 };
	int pfd[2], st;
	pid_t pid;

	CHECK_OK(pipe(pfd));
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int sim = sim_open(), gfd = gpusim_open();
		struct rlimit rl = { .rlim_cur = memlock, .rlim_max = memlock };
		uint64_t fails0 = peer_pins().fail_limit;
		struct peersim_reg_mr r;
		uint8_t *va[PIN_BOS];

		close(pfd[0]);
		CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
		if (!root) {
			CHECK_OK(setgroups(0, NULL));
			CHECK_OK(setresgid(NOBODY, NOBODY, NOBODY));
			CHECK_OK(setresuid(NOBODY, NOBODY, NOBODY));
		}
		CHECK(peer_pins().user_pinned_bytes == 0, "uid %u starts with %llu bytes pinned",
		      getuid(), (unsigned long long)peer_pins().user_pinned_bytes);
		for (int i = 0; i < PIN_BOS; i++) {
			uint64_t off;

			gpusim_create(gfd, PIN_BO, SP_GPUSIM_DOMAIN_GTT, 0, &off);
			va[i] = sp_aperture(PIN_BO, 2 * MiB);
			sp_rocm_map(va[i], PIN_BO, gfd, off);
			st = sim_reg(sim, va[i], 4096, &r);
			if (st) {
				res.err = -st;
				break;
			}
			CHECK(r.path == PEERSIM_PATH_PEER, "BO %d registered on path %u", i, r.path);
			res.ok++;
			res.user_bytes = peer_pins().user_pinned_bytes;
			CHECK(res.user_bytes <= (uint64_t)res.ok * PIN_BO,
			      "%d registrations of 4 KiB charge %llu bytes", res.ok,
			      (unsigned long long)res.user_bytes);
		}
		/* another registration of a pinned BO pins nothing new */
		if (res.ok) {
			st = sim_reg(sim, va[0] + 8192, 4096, &r);
			CHECK(st == 0, "2nd registration of a pinned BO: %s", strerror(-st));
			res.shared_bytes = peer_pins().user_pinned_bytes;
		}
		res.fail_limit = peer_pins().fail_limit - fails0;
		CHECK(write(pfd[1], &res, sizeof(res)) == sizeof(res), "write: %s",
		      strerror(errno));
		_exit(0);	/* MRs, BOs and fds still held */
	}
	close(pfd[1]);
	st = (int)read(pfd[0], &res, sizeof(res));
	close(pfd[0]);
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 4)
		SKIP("no sp_gpusim or sp_peersim (see the child's reason above)");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pinning child failed (status %#x, FAIL line above)",
	      st);
	tap_diag("memlock %llu KiB%s: %d of %d registrations, then %s; uid pinned %llu KiB",
		 (unsigned long long)memlock >> 10, root ? " (root)" : " (nobody)", res.ok, PIN_BOS,
		 res.err ? strerrorname_np(res.err) : "none failed",
		 (unsigned long long)res.user_bytes >> 10);
	return res;
}

/* After the child is gone: nothing registered, pinned or charged. */
static void check_no_peer_pins(void)
{
	struct sp_peer_pins p = { 0 };

	check_all_released();
	for (int i = 0; i < 600; i++) {	/* exit ends imports from a worker (60 s) */
		p = peer_pins();
		if (!p.pinned_bytes)
			break;
		usleep(100000);
	}
	CHECK(p.pinned_bytes == 0, "%llu GPU bytes still pinned after the registrant exited",
	      (unsigned long long)p.pinned_bytes);
}

static void set_peer_bound(uint64_t bytes)
{
	char v[32];

	snprintf(v, sizeof(v), "%llu", (unsigned long long)bytes);
	write_param("/sys/module/strixpeer/parameters/max_peer_pinned_per_user", v);
}

/* nobody, 8 MiB: 4 BOs of 2 MiB, the 5th refused; twice (exit uncharged). */
static void pin_bound_memlock(void)
{
	struct pin_result a, b;

	/* max_peer_pinned_per_user is 0 (the cases that set it restore it) */
	a = pin_run(8 * MiB, false);
	CHECK(a.ok == 4, "nobody with an 8 MiB RLIMIT_MEMLOCK registered 4 KiB of %d 2 MiB BOs (want 4: each pins its whole BO)",
	      a.ok);
	CHECK(a.err == EDQUOT, "registration past RLIMIT_MEMLOCK failed with %s, want EDQUOT",
	      a.err ? strerrorname_np(a.err) : "nothing");
	CHECK(a.user_bytes == 8 * MiB, "uid charged %llu bytes for 4 pinned 2 MiB BOs",
	      (unsigned long long)a.user_bytes);
	CHECK(a.shared_bytes == a.user_bytes, "a 2nd registration of a pinned BO charged %llu more",
	      (unsigned long long)(a.shared_bytes - a.user_bytes));
	CHECK(a.fail_limit == 1, "peer_fail_limit grew by %llu, want 1",
	      (unsigned long long)a.fail_limit);
	check_no_peer_pins();
	/* the charge left with the pins: the same again */
	b = pin_run(8 * MiB, false);
	CHECK(b.ok == 4 && b.err == EDQUOT, "2nd run: %d registrations, then %s: the 1st run's charge stayed",
	      b.ok, b.err ? strerrorname_np(b.err) : "none failed");
	check_no_peer_pins();
}

/* max_peer_pinned_per_user bounds nobody below its RLIMIT_MEMLOCK. */
static void pin_bound_param(void)
{
	struct pin_result a;
	struct sp_peer_pins p;

	set_peer_bound(4 * MiB);
	p = peer_pins();
	CHECK(p.max_per_user == 4 * MiB, "config reports max_peer_pinned_per_user %llu",
	      (unsigned long long)p.max_per_user);
	a = pin_run(8 * MiB, false);
	set_peer_bound(0);
	CHECK(a.ok == 2 && a.err == EDQUOT, "bound 4 MiB: %d registrations of 2 MiB BOs, then %s (want 2, EDQUOT)",
	      a.ok, a.err ? strerrorname_np(a.err) : "none failed");
	check_no_peer_pins();
}

/* CAP_IPC_LOCK (root): RLIMIT_MEMLOCK does not bind, the parameter does. */
static void pin_bound_root(void)
{
	struct pin_result a;
	int fd = open("/sys/module/strixpeer/parameters/max_peer_pinned_per_user",
		      O_WRONLY | O_CLOEXEC);

	CHECK(fd >= 0, "max_peer_pinned_per_user: %s", strerror(errno));
	CHECK_ERR(write(fd, "100", 3), ERANGE);	/* a bound below one page */
	close(fd);
	set_peer_bound(12 * MiB);
	a = pin_run(4 * MiB, true);
	set_peer_bound(0);
	CHECK(a.ok == 6 && a.err == EDQUOT, "root, memlock 4 MiB, bound 12 MiB: %d registrations of 2 MiB BOs, then %s (want 6, EDQUOT)",
	      a.ok, a.err ? strerrorname_np(a.err) : "none failed");
	CHECK(a.user_bytes == 12 * MiB, "root charged %llu bytes", (unsigned long long)a.user_bytes);
	check_no_peer_pins();
}

static const struct tap_case with_client[] = {
	TAP_CASE(client_registered),
	TAP_CASE(import_errors),
	TAP_CASE(gup_first),
	TAP_CASE(data_vgem_4k),
	TAP_CASE(data_vgem_1m_unaligned),
	TAP_CASE_T(data_vgem_64m, 300),
	TAP_CASE(data_udmabuf_4k),
	TAP_CASE_T(data_udmabuf_64m_unaligned, 300),
	TAP_CASE(data_heap_4k),
	TAP_CASE_T(data_heap_64m_unaligned, 300),
	TAP_CASE_T(segments_64m, 120),
	TAP_CASE(declines),
	TAP_CASE(other_process),
	TAP_CASE(zero_change_vgem),
	TAP_CASE(zero_change_off),
	TAP_CASE(invalidate_unimport),
	TAP_CASE(invalidate_close),
	TAP_CASE(invalidate_munmap),
	TAP_CASE(invalidate_exit),
	TAP_CASE(kill_mid_registration),
	TAP_CASE(counters),
	TAP_CASE(events),
	TAP_CASE(read_only_dmabuf),
	TAP_CASE_T(pin_bound_memlock, 180),
	TAP_CASE_T(pin_bound_param, 120),
	TAP_CASE_T(pin_bound_root, 120),
};

/* ---- built without the peer-memory API --------------------------------- */

static void noapi_reports_reason(void)
{
	int fd = sp_test_open();
	struct strixpeer_version v = { 0 };
	struct sp_info info = { .size = sizeof(info) };
	struct sp_ctl *ctl;

	CHECK_OK(ioctl(fd, STRIXPEER_IOC_VERSION, &v));
	CHECK(!(v.features & STRIXPEER_FEAT_PEERDIRECT), "PeerDirect claimed without the API");
	CHECK(v.features & STRIXPEER_FEAT_DMABUF_IMPORT, "no import feature");
	CHECK(sp_ctl_open(&ctl) == 0, "sp_ctl_open: %s", sp_errmsg());
	CHECK(sp_ctl_info(ctl, &info) == 0, "info: %s", sp_errmsg());
	CHECK(strstr(info.peerdirect_reason, "built without the peer-memory API"),
	      "reason \"%s\"", info.peerdirect_reason);
	tap_diag("reason: %s", info.peerdirect_reason);
	sp_ctl_close(ctl);
	close(fd);
}

static void noapi_imports_work(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_import *imp;
	struct sp_import_info ii;
	struct sp_xbuf x;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK(sp_import_dmabuf(dev, x.fd, 0, 1 * MiB, x.map, &imp) == 0, "import: %s",
	      sp_errmsg());
	CHECK(sp_import_query(imp, &ii) == 0 && ii.length == 1 * MiB && !ii.unmapped,
	      "query: %s", sp_errmsg());
	CHECK(sp_import_dmabuf(dev, x.fd, 0, 4096, x.map, &imp) == -EEXIST, "overlap accepted");
	CHECK(strstr(sp_errmsg(), "overlaps"), "message \"%s\"", sp_errmsg());
	munmap(x.map, x.len);
	x.map = NULL;
	for (int i = 0; i < 600 && sp_import_query(imp, &ii) == 0 && !ii.unmapped; i++)
		usleep(100000);
	CHECK(ii.unmapped, "import not ended 60 s after munmap");
	CHECK(sp_import_free(imp) == 0, "free: %s", sp_errmsg());
	sp_dev_close(dev);
	sp_xbuf_free(&x);
	check_all_released();
}

static const struct tap_case without_api[] = {
	TAP_CASE(noapi_reports_reason),
	TAP_CASE(noapi_imports_work),
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "noapi"))
		return tap_run(without_api, sizeof(without_api) / sizeof(without_api[0]));
	return tap_run(with_client, sizeof(with_client) / sizeof(with_client[0]));
}
