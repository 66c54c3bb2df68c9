// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the memory ops. mmap of buffer cookies into the slot
 * arena, munmap/mprotect/madvise/mremap/msync and touches; dma-bufs: exports,
 * udmabuf, the system dma-heap, vgem dumb buffers and vgem importing them,
 * their mmap and DMA_BUF_IOCTL_SYNC, IMPORT at the VA they are mapped at,
 * closing dma-buf fds.
 */
#include "fuzz.h"
#include "drm/spdrm.h"

/* ---- mmap and friends ------------------------------------------------------ */

void op_mmap(struct wstate *w)
{
	int s = (int)below(&w->r, NSLOT), bi = live_buf(w);
	char *a = slot_addr(w, s);
	uint64_t len, off;
	int prot, flags, fd;
	void *p;

	if (w->s[s].len && !one_in(&w->r, 4))
		slot_clear(w, s);
	if (bi < 0 && !one_in(&w->r, 4))
		return;
	fd = bi >= 0 ? w->dev[w->b[bi].dev] : w->dev[pick_dev(w)];
	len = bi >= 0 ? w->b[bi].size : 2 * MiB;
	off = bi >= 0 ? w->b[bi].cookie : 0;
	switch (below(&w->r, 10)) {
	case 0: len = pick_size(w); break;
	case 1: len = (below(&w->r, len / PAGE) + 1) * PAGE; break;
	case 2: off += below(&w->r, len / PAGE + 2) * PAGE; len = PAGE * (1 + below(&w->r, 8)); break;
	case 3: off = (uint64_t)below(&w->r, 64) << COOKIE_SHIFT; break;
	case 4: off = rnd(&w->r) & ~(PAGE - 1); break;
	case 5: off += below(&w->r, PAGE); break;
	case 6: len += PAGE; break;
	default: break;
	}
	if (len > SLOT_SZ || len == 0)
		len = len == 0 ? 0 : SLOT_SZ;
	prot = one_in(&w->r, 5) ? (int)below(&w->r, 8) : PROT_READ | PROT_WRITE;
	flags = one_in(&w->r, 6) ? MAP_PRIVATE : MAP_SHARED;
	if (one_in(&w->r, 8))
		flags |= MAP_POPULATE;
	if (one_in(&w->r, 10))
		flags |= MAP_LOCKED;
	count(C_MMAP);
	p = mmap(a, len, prot, flags | MAP_FIXED, fd, (off_t)off);
	if (p == MAP_FAILED) {
		/* a failed MAP_FIXED may have left the range unmapped: re-reserve */
		slot_clear(w, s);
		return;
	}
	ok(OK_MMAP);
	w->s[s].len = len;
	w->s[s].buf = bi;
	w->s[s].db = -1;
	/* touch a few pages: the first write of each page faults it in */
	for (int i = 0; i < 4; i++) {
		uint64_t o = below(&w->r, len / PAGE + 1) * PAGE;

		touch(a + (o < SLOT_SZ ? o : 0), one_in(&w->r, 2), (char)i);
	}
}

void op_mm(struct wstate *w)
{
	int s = (int)below(&w->r, NSLOT);
	char *a = slot_addr(w, s);
	uint64_t len = w->s[s].len ? w->s[s].len : 2 * MiB;
	uint64_t o = below(&w->r, len / PAGE) * PAGE, l = (below(&w->r, 16) + 1) * PAGE;
	static const int advice[] = {
		MADV_DONTNEED, MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK, MADV_KEEPONFORK,
		MADV_FREE, MADV_REMOVE, MADV_COLD, MADV_PAGEOUT, MADV_HUGEPAGE, MADV_NOHUGEPAGE,
		MADV_WILLNEED, MADV_SEQUENTIAL, MADV_RANDOM, MADV_MERGEABLE, MADV_UNMERGEABLE,
		MADV_DONTDUMP, MADV_DODUMP, 22 /* POPULATE_READ */, 23 /* POPULATE_WRITE */,
		25 /* COLLAPSE */, 100, -1,
	};

	if (o + l > SLOT_SZ)
		l = SLOT_SZ - o;
	count(C_MMAP);
	switch (below(&w->r, 7)) {
	case 0:	/* partial munmap; re-reserve the hole so nothing else lands there */
		if (!munmap(a + o, l))
			reserve(a + o, l);
		break;
	case 1:
		mprotect(a + o, l, (int)below(&w->r, 8));
		break;
	case 2:
	case 3:
		madvise(a + o, l, advice[below(&w->r, sizeof(advice) / sizeof(advice[0]))]);
		break;
	case 4: {	/* mremap: shrink, grow in place, or move to another slot */
		int t = (int)below(&w->r, NSLOT);
		uint64_t nl = (below(&w->r, 2 * len / PAGE) + 1) * PAGE;
		void *p;

		if (nl > SLOT_SZ)
			nl = SLOT_SZ;
		if (t == s || one_in(&w->r, 2)) {
			p = mremap(a, len, nl, 0);
			if (p != MAP_FAILED) {
				if (nl < len)	/* the tail it gave up */
					reserve(a + nl, len - nl);
				w->s[s].len = nl;
			}
		} else {
			slot_clear(w, t);
			p = mremap(a, len, nl, MREMAP_MAYMOVE | MREMAP_FIXED, slot_addr(w, t));
			if (p != MAP_FAILED) {
				w->s[t] = w->s[s];
				w->s[t].len = nl;
				slot_clear(w, s);
			} else {	/* it may have unmapped the target first */
				slot_clear(w, t);
			}
		}
		break;
	}
	case 5:
		msync(a + o, l, one_in(&w->r, 2) ? MS_SYNC : MS_INVALIDATE);
		break;
	default:
		for (int i = 0; i < 8; i++)
			touch(a + below(&w->r, len / PAGE) * PAGE + below(&w->r, PAGE),
			      one_in(&w->r, 2), (char)rnd(&w->r));
		break;
	}
}

/* ---- dma-bufs ---------------------------------------------------------------- */

/* vgem lets go of what it imported (its attachment goes with the last handle) */
void gem_close(struct wstate *w, int i)
{
	if (w->gem[i] && w->vgem >= 0)
		sp_drm_gem_release(w->vgem, w->gem[i]);
	w->gem[i] = 0;
}

/* The vgem card (DRM_IOCTL_VERSION names the driver), or -1. */
int open_vgem(void)
{
	return sp_drm_find("card", 0, "vgem", NULL, 0);
}

void op_dmabuf(struct wstate *w)
{
	count(C_DMABUF);
	switch (below(&w->r, 11)) {
	case 9: {	/* vgem imports a dma-buf: a device attaches and maps it (DMA-API debug watches) */
		int k = pick_db(w), g = (int)below(&w->r, 8);
		uint32_t handle;

		if (w->vgem < 0)
			return;
		if (one_in(&w->r, 3)) {	/* a second export of a buffer vgem may hold already */
			int bi = live_buf(w);
			struct strixpeer_buf_export e = { .flags = STRIXPEER_EXPORT_CLOEXEC };

			if (bi >= 0) {
				e.handle = w->b[bi].handle;
				if (ioctl(w->dev[w->b[bi].dev], STRIXPEER_IOC_BUF_EXPORT, &e) == 0) {
					ok(OK_EXPORT);
					k = add_db(w, e.fd, w->b[bi].size, DB_EXPORT);
				}
			}
		}
		if (k < 0 || w->d[k].fd < 0)
			return;
		gem_close(w, g);
		if (sp_drm_prime_import(w->vgem, w->d[k].fd, &handle) == 0) {
			ok(OK_ATTACH);
			for (int i = 0; i < 8; i++)	/* the same dma-buf again: the same handle */
				if (w->gem[i] == handle)
					return;
			w->gem[g] = handle;
		}
		break;
	}
	case 10:
		gem_close(w, (int)below(&w->r, 8));
		break;
	case 0:
	case 1: {	/* export a live buffer, sane flags mostly */
		int bi = live_buf(w);
		struct strixpeer_buf_export e = { .flags = (uint32_t)below(&w->r, 4) };

		if (bi < 0)
			return;
		e.handle = w->b[bi].handle;
		if (ioctl(w->dev[w->b[bi].dev], STRIXPEER_IOC_BUF_EXPORT, &e) == 0) {
			ok(OK_EXPORT);
			add_db(w, e.fd, w->b[bi].size, DB_EXPORT);
		}
		break;
	}
	case 2: {	/* udmabuf from a sealed memfd */
		uint64_t sz = (below(&w->r, 64) + 1) * PAGE;
		int mfd;
		struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC };

		if (w->udmabuf < 0)
			return;
		mfd = memfd_create("fuzz", MFD_ALLOW_SEALING | MFD_CLOEXEC);
		if (mfd < 0)
			return;
		if (ftruncate(mfd, (off_t)sz) == 0 && fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
			int fd;

			c.memfd = (uint32_t)mfd;
			c.size = one_in(&w->r, 6) ? sz + PAGE : sz;
			fd = ioctl(w->udmabuf, UDMABUF_CREATE, &c);
			if (fd >= 0)
				add_db(w, fd, sz, DB_UDMABUF);
		}
		close(mfd);
		break;
	}
	case 3: {	/* the system dma-heap */
		struct dma_heap_allocation_data h = { .len = (below(&w->r, 64) + 1) * PAGE,
						      .fd_flags = O_RDWR | O_CLOEXEC };

		if (w->heap >= 0 && ioctl(w->heap, DMA_HEAP_IOCTL_ALLOC, &h) == 0)
			add_db(w, (int)h.fd, h.len, DB_HEAP);
		break;
	}
	case 4: {	/* vgem dumb buffer, PRIME-exported */
		uint64_t size = (1 + below(&w->r, 16)) * 4096;	/* 1 to 16 rows of 4 KiB */
		uint32_t handle;
		int fd;

		if (w->vgem < 0 || sp_drm_dumb_create(w->vgem, size, 4096, &handle, &size))
			return;
		fd = sp_drm_prime_export(w->vgem, handle, O_RDWR | O_CLOEXEC);
		if (fd >= 0)
			add_db(w, fd, size, DB_VGEM);
		break;
	}
	case 5: {	/* mmap a dma-buf into a slot */
		int k = pick_db(w), s = (int)below(&w->r, NSLOT);
		uint64_t len, off = 0;
		void *p;

		if (k < 0)
			return;
		slot_clear(w, s);
		len = w->d[k].size;
		if (one_in(&w->r, 4))
			len = (below(&w->r, len / PAGE + 2) + 1) * PAGE;
		if (one_in(&w->r, 4))
			off = below(&w->r, w->d[k].size / PAGE + 2) * PAGE;
		if (len > SLOT_SZ)
			len = SLOT_SZ;
		p = mmap(slot_addr(w, s), len, one_in(&w->r, 4) ? PROT_READ : PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, w->d[k].fd, (off_t)off);
		if (p == MAP_FAILED) {
			slot_clear(w, s);
			return;
		}
		w->s[s].len = len;
		w->s[s].db = k;
		touch(p, one_in(&w->r, 2), 1);
		break;
	}
	case 6: {	/* DMA_BUF_IOCTL_SYNC, valid pairs mostly */
		int k = pick_db(w);
		struct dma_buf_sync sync = { .flags = below(&w->r, 4) };

		if (k < 0)
			return;
		if (one_in(&w->r, 5))
			sync.flags = rnd(&w->r);
		else
			sync.flags |= one_in(&w->r, 2) ? DMA_BUF_SYNC_START : DMA_BUF_SYNC_END;
		/*
		 * 6.12's udmabuf maps its sg table with the direction of the first
		 * begin_cpu_access and syncs later ones with theirs: DMA-API debug
		 * warns ("syncs DMA memory with different direction", seen with
		 * seed 0x1, phase user). Not strixpeer's: one direction there.
		 */
		if (w->d[k].kind == DB_UDMABUF)
			sync.flags = DMA_BUF_SYNC_RW | (sync.flags & DMA_BUF_SYNC_END);
		ioctl(w->d[k].fd, DMA_BUF_IOCTL_SYNC, &sync);
		break;
	}
	case 7: {	/* an import of a dma-buf at the VA where it is mapped, mostly sane */
		int s = (int)below(&w->r, NSLOT), di = pick_dev(w);
		struct strixpeer_import im = { 0 };

		if (w->s[s].db < 0 || w->dev[di] < 0 || w->d[w->s[s].db].fd < 0)
			return;
		im.dmabuf_fd = w->d[w->s[s].db].fd;
		im.length = w->s[s].len;
		if (im.length > w->d[w->s[s].db].size)
			im.length = w->d[w->s[s].db].size;
		im.va = (uintptr_t)slot_addr(w, s);
		if (one_in(&w->r, 3) && im.length > PAGE) {
			uint64_t cut = below(&w->r, im.length / PAGE) * PAGE;

			im.offset = cut;
			im.va += cut;
			im.length -= cut;
		}
		if (ioctl(w->dev[di], STRIXPEER_IOC_IMPORT, &im) == 0 && (ok(OK_IMPORT), true))
			for (int i = 0; i < NIMP; i++)
				if (!w->im[i].live) {
					w->im[i] = (struct fimp){ .dev = di, .handle = im.handle, .live = true };
					break;
				}
		break;
	}
	default: {	/* close a dma-buf fd (imports and mappings may still hold it) */
		int k = pick_db(w);

		if (k >= 0) {
			close(w->d[k].fd);
			w->d[k].fd = -1;
		}
		break;
	}
	}
}
