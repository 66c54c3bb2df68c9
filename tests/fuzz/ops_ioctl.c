// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the ioctl ops. Every STRIXPEER_IOC_* with sane, edge and
 * random fields, struct sizes and directions varied and argument pointers
 * bad (fuzz_ioctl()), and unknown commands and magics.
 */
#include "fuzz.h"

/* ---- ioctls ----------------------------------------------------------- */

static const unsigned long known_cmds[] = {
	STRIXPEER_IOC_VERSION, STRIXPEER_IOC_BUF_ALLOC, STRIXPEER_IOC_BUF_FREE,
	STRIXPEER_IOC_BUF_INFO, STRIXPEER_IOC_IMPORT, STRIXPEER_IOC_UNIMPORT,
	STRIXPEER_IOC_IMPORT_INFO, STRIXPEER_IOC_BUF_EXPORT,
};

/* A page-aligned scratch area with a PROT_NONE page after it and a read-only page. */
static char *scratch, *scratch_ro;

void scratch_init(void)
{
	scratch = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (scratch == MAP_FAILED)
		exit(3);
	mprotect(scratch + 2 * PAGE, PAGE, PROT_NONE);
	scratch_ro = scratch + 3 * PAGE;
	mprotect(scratch_ro, PAGE, PROT_READ);
}

/*
 * Issues @cmd's struct (@arg, @len bytes, the header's size) with a random
 * size variant, direction, and argument pointer. Returns the ioctl's result
 * and the struct as the kernel left it in @arg when the pointer was the
 * plain one.
 */
static int fuzz_ioctl(struct wstate *w, int fd, unsigned long cmd, void *arg, size_t len)
{
	unsigned int size = (unsigned int)len, dir = _IOC_DIR(cmd);
	char *p = scratch;
	bool plain = true;
	int ret;

	switch (below(&w->r, 10)) {
	case 0:	/* smaller */
		size = (unsigned int)below(&w->r, len);
		break;
	case 1:	/* larger, zero tail */
	case 2:	/* larger, non-zero tail */
		size = (unsigned int)(len + 1 + below(&w->r, 2 * PAGE - len - 1));
		if (one_in(&w->r, 3))
			size = (unsigned int)(len + 8);
		break;
	case 3:
		dir = (unsigned int)below(&w->r, 4);
		break;
	default:
		break;
	}
	memset(p, 0, 2 * PAGE);
	memcpy(p, arg, len < size ? len : size);
	if (size > len && !one_in(&w->r, 2))
		for (unsigned int i = (unsigned int)len; i < size; i += 1 + (unsigned int)below(&w->r, 64))
			p[i] = (char)(1 + below(&w->r, 255));
	switch (below(&w->r, 24)) {
	case 0: p = NULL; plain = false; break;
	case 1: p = (char *)(uintptr_t)rnd(&w->r); plain = false; break;
	case 2: {	/* the struct runs into the PROT_NONE page */
		uint64_t k = below(&w->r, size + 1);

		p = scratch + 2 * PAGE - k;
		memmove(p, scratch, k);
		plain = false;
		break;
	}
	case 3: p = scratch_ro; plain = false; break;
	case 4: p = scratch + 2 * PAGE; plain = false; break;
	default: break;
	}
	cmd = _IOC(dir, _IOC_TYPE(cmd), _IOC_NR(cmd), size & _IOC_SIZEMASK);
	count(C_IOCTL);
	ret = ioctl(fd, cmd, p);
	if (ret < 0 && errno == ENOMEM)
		__atomic_add_fetch(&sh->enomem[w->faults], 1, __ATOMIC_RELAXED);
	if (plain)
		memcpy(arg, scratch, len);
	return ret < 0 ? -errno : ret;
}

void op_ioctl(struct wstate *w)
{
	int di = pick_dev(w), fd = w->dev[di];
	int which = (int)below(&w->r, 9);

	if (fd < 0 || one_in(&w->r, 40))
		fd = one_in(&w->r, 2) ? -1 : (int)below(&w->r, 64);	/* bad or random fd */

	switch (which) {
	case 0: {
		struct strixpeer_version v;

		memset(&v, 0, sizeof(v));
		fuzz_ioctl(w, fd, STRIXPEER_IOC_VERSION, &v, sizeof(v));
		break;
	}
	case 1:
	case 2: {
		if (fd == w->dev[di] && fd >= 0 && one_in(&w->r, 2)) {
			/* a sane one: the objects every other call works on */
			uint64_t unit = one_in(&w->r, 2) ? 2 * MiB : 64 * 1024;
			struct strixpeer_buf_alloc a = {
				.size = (below(&w->r, 8) + 1) * unit,
				.node = one_in(&w->r, 2) ? STRIXPEER_NODE_DEFAULT : (uint32_t)below(&w->r, 2),
				.flags = (uint32_t)below(&w->r, 3),
			};

			if (a.size > w->max_alloc)
				a.size = w->max_alloc / 2;
			if (w->live_bytes > w->max_alloc * 4)
				break;
			count(C_IOCTL);
			if (ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a) == 0) {
				ok(OK_ALLOC);
				add_buf(w, di, &a);
			}
			break;
		}
		struct strixpeer_buf_alloc a = {
			.size = pick_size(w), .node = pick_node(w),
			.flags = pick_flags(w, STRIXPEER_ALLOC_FLAGS),
			.handle = one_in(&w->r, 8) ? (uint32_t)rnd(&w->r) : 0,
			.reserved = one_in(&w->r, 10) ? 1 : 0,
			.mmap_offset = one_in(&w->r, 10) ? rnd(&w->r) : 0,
		};

		if (w->live_bytes > w->max_alloc * 4 && fd == w->dev[di])
			break;
		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_ALLOC, &a, sizeof(a)) == 0 && fd == w->dev[di] &&
		    fd >= 0) {
			ok(OK_ALLOC);
			add_buf(w, di, &a);
		}
		break;
	}
	case 3: {
		struct strixpeer_buf_free f = { .handle = pick_handle(w, di),
						.flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_FREE, &f, sizeof(f)) == 0)
			for (int i = 0; i < NBUF; i++)
				if (w->b[i].live && w->b[i].dev == di && w->b[i].handle == f.handle)
					w->b[i].live = false;
		break;
	}
	case 4: {
		struct strixpeer_buf_info in = { .handle = pick_handle(w, di),
						 .flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		if (one_in(&w->r, 8))
			memset(&in.size, 0xa5, sizeof(in) - 8);
		fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_INFO, &in, sizeof(in));
		break;
	}
	case 5: {
		struct strixpeer_buf_export e = { .handle = pick_handle(w, di),
						  .flags = pick_flags(w, STRIXPEER_EXPORT_FLAGS),
						  .fd = (int)rnd(&w->r),
						  .reserved = one_in(&w->r, 10) };

		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_BUF_EXPORT, &e, sizeof(e)) == 0 && e.fd >= 0) {
			struct stat st;

			ok(OK_EXPORT);
			if (fstat(e.fd, &st) == 0)
				add_db(w, e.fd, (uint64_t)st.st_size, DB_EXPORT);
		}
		break;
	}
	case 6: {	/* IMPORT with a random dma-buf and range */
		int k = pick_db(w), s = (int)below(&w->r, NSLOT);
		uint64_t dsz = k >= 0 ? w->d[k].size : PAGE;
		struct strixpeer_import im = {
			.dmabuf_fd = k >= 0 && !one_in(&w->r, 10) ? w->d[k].fd :
				     (one_in(&w->r, 2) ? fd : (int)rnd(&w->r)),
			.flags = one_in(&w->r, 10) ? pick_flags(w, 0) : 0,
			.offset = one_in(&w->r, 4) ? pick_size(w) : below(&w->r, dsz / PAGE + 1) * PAGE,
			.length = one_in(&w->r, 4) ? pick_size(w) : (below(&w->r, dsz / PAGE) + 1) * PAGE,
			.va = (uintptr_t)slot_addr(w, s) + below(&w->r, 32) * PAGE,
		};

		if (im.offset + im.length > dsz && !one_in(&w->r, 4))
			im.length = dsz > im.offset ? dsz - im.offset : PAGE;
		switch (below(&w->r, 8)) {
		case 0: im.va = rnd(&w->r); break;
		case 1: im.va += below(&w->r, PAGE); break;
		case 2: im.va = (uintptr_t)scratch; break;
		default: break;
		}
		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_IMPORT, &im, sizeof(im)) == 0 && fd == w->dev[di] &&
		    (ok(OK_IMPORT), true))
			for (int i = 0; i < NIMP; i++)
				if (!w->im[i].live) {
					w->im[i] = (struct fimp){ .dev = di, .handle = im.handle, .live = true };
					break;
				}
		break;
	}
	case 7: {
		int i = (int)below(&w->r, NIMP);
		struct strixpeer_unimport u = { .handle = one_in(&w->r, 5) ? (uint32_t)rnd(&w->r) : w->im[i].handle,
						.flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		if (fuzz_ioctl(w, fd, STRIXPEER_IOC_UNIMPORT, &u, sizeof(u)) == 0)
			for (int k = 0; k < NIMP; k++)
				if (w->im[k].live && w->im[k].dev == di && w->im[k].handle == u.handle)
					w->im[k].live = false;
		break;
	}
	case 8: {
		int i = (int)below(&w->r, NIMP);
		struct strixpeer_import_info ii = { .handle = one_in(&w->r, 5) ? (uint32_t)rnd(&w->r) : w->im[i].handle,
						    .flags = one_in(&w->r, 8) ? pick_flags(w, 0) : 0 };

		fuzz_ioctl(w, fd, STRIXPEER_IOC_IMPORT_INFO, &ii, sizeof(ii));
		break;
	}
	}
}

/* Unknown commands, other magics, random numbers: all must be refused cleanly. */
void op_ioctl_garbage(struct wstate *w)
{
	int di = pick_dev(w), fd = w->dev[di];
	unsigned long cmd;
	char *p = scratch;

	switch (below(&w->r, 4)) {
	case 0:
		cmd = _IOC((unsigned int)below(&w->r, 4), STRIXPEER_IOC_MAGIC,
			   8 + (unsigned int)below(&w->r, 248), (unsigned int)below(&w->r, 512));
		break;
	case 1:
		cmd = known_cmds[below(&w->r, 8)] ^ (1UL << below(&w->r, 32));
		break;
	case 2:
		cmd = _IOC((unsigned int)below(&w->r, 4), (unsigned int)below(&w->r, 256),
			   (unsigned int)below(&w->r, 8), (unsigned int)below(&w->r, 64));
		break;
	default:
		cmd = rnd(&w->r);
		break;
	}
	for (int i = 0; i < 256; i++)
		p[i] = (char)rnd(&w->r);
	if (one_in(&w->r, 4))
		p = (char *)(uintptr_t)rnd(&w->r);
	count(C_IOCTL);
	ioctl(fd, cmd, p);
}
