// SPDX-License-Identifier: MIT
/* peer: imports, the data path, declines, zero-change */
#include "peer.h"

/* ---- with the client ---------------------------------------------------- */

void client_registered(void)
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

void import_errors(void)
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
void gup_first(void)
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

void data_vgem_4k(void) { data_roundtrip(SP_EXP_VGEM, 16384, 0); }
void data_vgem_1m_unaligned(void) { data_roundtrip(SP_EXP_VGEM, 1 * MiB, 123); }
/* 64 MiB; 16 MiB on a debug kernel (still hundreds of sg entries) */
#define LEN_64M (tap_debug_kernel() ? 16 * MiB : 64 * MiB)
void data_vgem_64m(void) { data_roundtrip(SP_EXP_VGEM, LEN_64M, 4096 + 7); }
void data_udmabuf_4k(void) { data_roundtrip(SP_EXP_UDMABUF, 4096, 0); }
void data_udmabuf_64m_unaligned(void) { data_roundtrip(SP_EXP_UDMABUF, LEN_64M, 99); }
void data_heap_4k(void) { data_roundtrip(SP_EXP_HEAP, 4096, 0); }
void data_heap_64m_unaligned(void) { data_roundtrip(SP_EXP_HEAP, LEN_64M, 4095); }

/*
 * The sg table the client hands the core for a 64 MiB import: whole pages,
 * no segment above the device's max segment size, contiguous runs merged.
 */
void segments_64m(void)
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
void declines(void)
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
void other_process(void)
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
void zero_change_vgem(void)
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

void zero_change_off(void)
{
	with_param("claim_gem_mappings", "0", zero_change_off_child);
	check_all_released();
}

/*
 * Invalidation: after the trigger the core has been told (the simulated
 * HCA refuses DMA with ENOLINK), and nothing is left behind.
 */
