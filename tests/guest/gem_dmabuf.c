// SPDX-License-Identifier: MIT
/*
 * STRIXPEER_IOC_GEM_DMABUF and sp_gem_dmabuf(): the dma-buf of a GPU
 * range of the caller's own address space, with vgem's buffer objects
 * mapped through their card (GEM mappings, as hipMalloc's are amdgpu's):
 *
 * - the fd is the object's PRIME export: the one DRM_IOCTL_PRIME_HANDLE_TO_FD
 *   returns afterwards (the same inode), made here when there was none;
 *   the offset of an unaligned address in a BO, in the tail of a mapping
 *   whose head was unmapped, across a mapping split by mprotect, and in
 *   halves moved by mremap;
 * - NO_FD (no fd, the same inode), CLOEXEC, READ_ONLY for a PROT_READ
 *   mapping;
 * - refused, each with its errno and nothing left behind: unknown flags,
 *   reserved bits, empty and wrapping ranges, host memory, a hole, a
 *   dma-buf's own mmap, two BOs side by side, one BO's halves out of order,
 *   a BO whose handle was closed, another process's BO (its address in
 *   this process maps something else), the fd table full (EMFILE), the
 *   device opened by another process;
 * - the fd's lifetime: it outlives the mapping and the handle, and the
 *   bytes are still there through it;
 * - the library: sp_gem_dmabuf() and its messages.
 * Runs on every kernel of the suite (no RDMA needed); tests/guest/rdma_dmabuf.c
 * registers such dma-bufs through sp_reg_mr() and moves bytes over RDMA.
 */
#include "dmabuf_util.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define BO_LEN	(2 * MiB + 64 * 1024)	/* a multiple of vgem's 16 KiB */

/* A vgem BO mapped through its card, never PRIME-exported. */
struct bo {
	int card;
	uint32_t handle;
	uint64_t mmo;		/* its fake offset */
	uint8_t *map;
	size_t len;
};

static void bo_new(struct bo *b, int card, size_t len, int prot)
{
	struct sp_drm_create_dumb c = { .height = (uint32_t)(len / 16384), .width = 4096,
					.bpp = 32 };
	struct sp_drm_map_dumb md = { 0 };

	memset(b, 0, sizeof(*b));
	b->card = card;
	b->len = len;
	CHECK_OK(ioctl(card, SP_DRM_IOCTL_MODE_CREATE_DUMB, &c));
	b->handle = c.handle;
	md.handle = c.handle;
	CHECK_OK(ioctl(card, SP_DRM_IOCTL_MODE_MAP_DUMB, &md));
	b->mmo = md.offset;
	b->map = mmap(NULL, len, prot, MAP_SHARED, card, (off_t)md.offset);
	CHECK(b->map != MAP_FAILED, "vgem BO mmap: %s", strerror(errno));
}

static void bo_free(struct bo *b)
{
	if (b->map)
		munmap(b->map, b->len);
	if (b->handle)
		sp_vgem_close(b->card, b->handle);
	b->map = NULL;
	b->handle = 0;
}

static int card_open(void)
{
	int card = sp_vgem_card();

	if (card < 0)
		SKIP("no vgem card in /dev/dri (modprobe vgem)");
	return card;
}

static int gem_ioctl(int fd, const void *addr, uint64_t size, uint32_t flags,
		     struct strixpeer_gem_dmabuf *g)
{
	memset(g, 0, sizeof(*g));
	g->addr = (uintptr_t)addr;
	g->size = size;
	g->flags = flags;
	return ioctl(fd, STRIXPEER_IOC_GEM_DMABUF, g);
}

static uint64_t ino_of(int fd)
{
	struct stat st;

	CHECK_OK(fstat(fd, &st));
	return (uint64_t)st.st_ino;
}

/* fds open in this process (to see that a refusal leaves none behind) */
static int fd_count(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static void test_gem_dmabuf_is_the_prime_export(void)
{
	int sp = sp_test_open(), card = card_open();
	struct sp_drm_prime_handle ph = { .flags = O_RDWR | O_CLOEXEC };
	struct strixpeer_gem_dmabuf g, g2;
	uint8_t *view;
	struct bo b;

	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	sp_fill(b.map, BO_LEN, 0, 7);
	CHECK_OK(gem_ioctl(sp, b.map + 12345, 4096, STRIXPEER_GEM_DMABUF_CLOEXEC, &g));
	CHECK(g.fd >= 0 && g.offset == 12345 && !g.out_flags && !g.reserved,
	      "fd %d offset %llu out_flags %#x", g.fd, (unsigned long long)g.offset,
	      g.out_flags);
	CHECK(fcntl(g.fd, F_GETFD) == FD_CLOEXEC, "the fd is not close-on-exec");
	CHECK(g.ino == ino_of(g.fd), "ino %llu, fstat says %llu", (unsigned long long)g.ino,
	      (unsigned long long)ino_of(g.fd));
	/* DRM's own export afterwards: the same dma-buf */
	ph.handle = b.handle;
	CHECK_OK(ioctl(card, SP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph));
	CHECK(ino_of(ph.fd) == g.ino, "PRIME export is inode %llu, GEM_DMABUF gave %llu",
	      (unsigned long long)ino_of(ph.fd), (unsigned long long)g.ino);
	/* NO_FD: which dma-buf, no fd; the same again */
	CHECK_OK(gem_ioctl(sp, b.map, BO_LEN, STRIXPEER_GEM_DMABUF_NO_FD, &g2));
	CHECK(g2.fd == -1 && g2.ino == g.ino && g2.offset == 0, "NO_FD: fd %d ino %llu off %llu",
	      g2.fd, (unsigned long long)g2.ino, (unsigned long long)g2.offset);
	/* the bytes through the new fd are the BO's */
	view = mmap(NULL, BO_LEN, PROT_READ, MAP_SHARED, g.fd, 0);
	CHECK(view != MAP_FAILED, "mmap of the dma-buf: %s", strerror(errno));
	CHECK(sp_verify(view, BO_LEN, 0, 7) < 0, "the dma-buf does not hold the BO's bytes");
	munmap(view, BO_LEN);
	close(ph.fd);
	close(g.fd);
	bo_free(&b);
	close(card);
	close(sp);
}

/*
 * Offsets in split and moved mappings (DRM maps a BO only from its start;
 * the pieces keep their offsets): the tail left by an munmap of the head,
 * a mapping split by mprotect (one range over both pieces, READ_ONLY
 * from the read-only one), and the two halves moved by mremap into the
 * wrong order (refused across them, each at its own offset).
 */
static void test_gem_dmabuf_offsets_of_split_and_moved_mappings(void)
{
	int sp = sp_test_open(), card = card_open();
	const size_t half = BO_LEN / 2;	/* 1 MiB + 32 KiB: page aligned */
	struct strixpeer_gem_dmabuf g;
	uint8_t *area, *x, *y;
	struct bo b;

	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	/* the head unmapped: the tail maps from offset half */
	x = mmap(NULL, BO_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, card, (off_t)b.mmo);
	CHECK(x != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK_OK(munmap(x, half));
	CHECK_OK(gem_ioctl(sp, x + half + 77, 1000, STRIXPEER_GEM_DMABUF_NO_FD, &g));
	CHECK(g.offset == half + 77, "offset %llu, want %zu", (unsigned long long)g.offset,
	      half + 77);
	munmap(x + half, half);
	/* split by mprotect: still one range of consecutive offsets */
	CHECK_OK(mprotect(b.map + half, half, PROT_READ));
	CHECK_OK(gem_ioctl(sp, b.map + 4096 + 5, BO_LEN - 8192, STRIXPEER_GEM_DMABUF_NO_FD, &g));
	CHECK(g.offset == 4096 + 5 && g.out_flags == STRIXPEER_GEM_DMABUF_READ_ONLY,
	      "across the split: offset %llu, out_flags %#x", (unsigned long long)g.offset,
	      g.out_flags);
	CHECK_OK(gem_ioctl(sp, b.map, half, STRIXPEER_GEM_DMABUF_NO_FD, &g));
	CHECK(!g.out_flags, "the writable piece alone: out_flags %#x", g.out_flags);
	/* the second half first, then the first: out of order */
	area = mmap(NULL, BO_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(area != MAP_FAILED, "reserve: %s", strerror(errno));
	x = mmap(NULL, BO_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, card, (off_t)b.mmo);
	y = mmap(NULL, BO_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, card, (off_t)b.mmo);
	CHECK(x != MAP_FAILED && y != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(mremap(x + half, half, half, MREMAP_MAYMOVE | MREMAP_FIXED, area) == area,
	      "mremap: %s", strerror(errno));
	CHECK(mremap(y, half, half, MREMAP_MAYMOVE | MREMAP_FIXED, area + half) == area + half,
	      "mremap: %s", strerror(errno));
	CHECK_ERR(gem_ioctl(sp, area, BO_LEN, STRIXPEER_GEM_DMABUF_NO_FD, &g), EXDEV);
	CHECK_OK(gem_ioctl(sp, area, 4096, STRIXPEER_GEM_DMABUF_NO_FD, &g));
	CHECK(g.offset == half, "moved second half: offset %llu", (unsigned long long)g.offset);
	CHECK_OK(gem_ioctl(sp, area + half, 4096, STRIXPEER_GEM_DMABUF_NO_FD, &g));
	CHECK(g.offset == 0, "moved first half: offset %llu", (unsigned long long)g.offset);
	munmap(area, BO_LEN);
	munmap(x, half);
	munmap(y + half, half);
	bo_free(&b);
	close(card);
	close(sp);
}

static void test_gem_dmabuf_read_only_mapping_says_so(void)
{
	int sp = sp_test_open(), card = card_open();
	struct strixpeer_gem_dmabuf g;
	struct bo b;

	bo_new(&b, card, BO_LEN, PROT_READ);
	CHECK_OK(gem_ioctl(sp, b.map, BO_LEN, 0, &g));
	CHECK(g.out_flags == STRIXPEER_GEM_DMABUF_READ_ONLY, "out_flags %#x", g.out_flags);
	CHECK(fcntl(g.fd, F_GETFD) == 0, "close-on-exec without CLOEXEC");
	close(g.fd);
	bo_free(&b);
	close(card);
	close(sp);
}

static void test_gem_dmabuf_bad_arguments(void)
{
	int sp = sp_test_open(), card = card_open();
	struct strixpeer_gem_dmabuf g;
	int before;
	struct bo b;

	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	before = fd_count();
	CHECK_ERR(gem_ioctl(sp, b.map, 4096, 1U << 7, &g), EINVAL);
	CHECK_ERR(gem_ioctl(sp, b.map, 0, 0, &g), EINVAL);
	CHECK_ERR(gem_ioctl(sp, (void *)(uintptr_t)-4096, 8192, 0, &g), EINVAL);
	memset(&g, 0, sizeof(g));
	g.addr = (uintptr_t)b.map;
	g.size = 4096;
	g.reserved = 1;
	CHECK_ERR(ioctl(sp, STRIXPEER_IOC_GEM_DMABUF, &g), EINVAL);
	/* one byte past the BO's mapping: a hole (or another mapping) */
	CHECK(gem_ioctl(sp, b.map, BO_LEN + 1, 0, &g) < 0 &&
	      (errno == ENOENT || errno == EXDEV), "one byte past the BO: %s", strerror(errno));
	CHECK(fd_count() == before, "a refused call left %d fds", fd_count() - before);
	bo_free(&b);
	close(card);
	close(sp);
}

static void test_gem_dmabuf_refuses_what_is_no_gem_mapping(void)
{
	int sp = sp_test_open(), card = card_open();
	struct strixpeer_gem_dmabuf g;
	struct sp_xbuf x;
	uint8_t *host, *hole;
	int before;

	host = aligned_alloc(4096, 65536);
	CHECK(host, "host memory");
	memset(host, 1, 65536);
	hole = mmap(NULL, 65536, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(hole != MAP_FAILED, "mmap");
	munmap(hole, 65536);
	CHECK_ERR(gem_ioctl(sp, host, 65536, 0, &g), ENOENT);
	CHECK_ERR(gem_ioctl(sp, hole, 4096, 0, &g), ENOENT);
	/* a vgem BO mapped through its dma-buf: the exporter's mapping, not GEM's */
	sp_xbuf_new(SP_EXP_VGEM, BO_LEN, 0, &x);
	before = fd_count();
	CHECK_ERR(gem_ioctl(sp, x.map, 4096, 0, &g), ENOENT);
	CHECK(fd_count() == before, "a refused call left %d fds", fd_count() - before);
	sp_xbuf_free(&x);
	free(host);
	close(card);
	close(sp);
}

static void test_gem_dmabuf_two_bos_refused(void)
{
	int sp = sp_test_open(), card = card_open();
	struct strixpeer_gem_dmabuf g;
	struct bo a, b;
	uint8_t *area;

	bo_new(&a, card, BO_LEN, PROT_READ | PROT_WRITE);
	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	area = mmap(NULL, 2 * BO_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(area != MAP_FAILED, "reserve: %s", strerror(errno));
	CHECK(mmap(area, BO_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, card,
		   (off_t)a.mmo) == area, "a: %s", strerror(errno));
	CHECK(mmap(area + BO_LEN, BO_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, card,
		   (off_t)b.mmo) == area + BO_LEN, "b: %s", strerror(errno));
	CHECK_ERR(gem_ioctl(sp, area + BO_LEN - 4096, 8192, 0, &g), EXDEV);
	/* each alone: two different dma-bufs */
	CHECK_OK(gem_ioctl(sp, area, 4096, STRIXPEER_GEM_DMABUF_NO_FD, &g));
	{
		uint64_t ino = g.ino;

		CHECK_OK(gem_ioctl(sp, area + BO_LEN, 4096, STRIXPEER_GEM_DMABUF_NO_FD, &g));
		CHECK(g.ino != ino, "two BOs, one dma-buf inode %llu", (unsigned long long)ino);
	}
	munmap(area, 2 * BO_LEN);
	bo_free(&a);
	bo_free(&b);
	close(card);
	close(sp);
}

/* The handle closed, the mapping kept: the process no longer holds the BO. */
static void test_gem_dmabuf_closed_handle_refused(void)
{
	int sp = sp_test_open(), card = card_open();
	struct strixpeer_gem_dmabuf g;
	struct bo b;

	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	sp_vgem_close(card, b.handle);
	b.handle = 0;
	CHECK_ERR(gem_ioctl(sp, b.map, 4096, 0, &g), EACCES);
	bo_free(&b);
	close(card);
	close(sp);
}

/* In a forked child: a BO of its own, or exit 3 without a vgem card. */
static void child_bo(struct bo *b)
{
	int card = sp_vgem_card();

	if (card < 0)
		_exit(3);
	bo_new(b, card, BO_LEN, PROT_READ | PROT_WRITE);
}

/*
 * Another process's BO: a child maps one and says where; at that address
 * this process maps its own memory (or nothing), never the child's BO.
 */
static void test_gem_dmabuf_other_process_bo_unreachable(void)
{
	int sp = sp_test_open(), sv[2];
	struct strixpeer_gem_dmabuf g;
	uintptr_t where = 0;
	char c = 0;
	pid_t pid;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct bo b;

		child_bo(&b);
		where = (uintptr_t)b.map;
		if (write(sv[1], &where, sizeof(where)) != sizeof(where))
			_exit(1);
		/* hold it until the parent has asked */
		if (read(sv[1], &c, 1) != 1)
			_exit(1);
		bo_free(&b);
		_exit(0);
	}
	if (read(sv[0], &where, sizeof(where)) != sizeof(where)) {
		waitpid(pid, NULL, 0);
		SKIP("the child found no vgem card");
	}
	CHECK(gem_ioctl(sp, (void *)where, 4096, 0, &g) < 0 &&
	      (errno == ENOENT || errno == EXDEV), "the child's BO at %#lx: %s",
	      (unsigned long)where, errno ? strerror(errno) : "reached");
	/* and the child's own device fd, used by this process: refused too */
	CHECK(write(sv[0], "x", 1) == 1, "tell the child");
	CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct bo b;

		child_bo(&b);
		/* the parent's /dev/strixpeer, inherited */
		_exit(gem_ioctl(sp, b.map, 4096, 0, &g) < 0 && errno == EACCES ? 0 : 1);
	}
	{
		int st;

		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st), "child");
		if (WEXITSTATUS(st) == 3)
			SKIP("the child found no vgem card");
		CHECK(WEXITSTATUS(st) == 0, "an inherited /dev/strixpeer fd resolved the child's BO");
	}
	close(sv[0]);
	close(sv[1]);
	close(sp);
}

/* The fd table full: EMFILE, nothing made; a free slot later: it works. */
static void test_gem_dmabuf_emfile_loses_nothing(void)
{
	int sp = sp_test_open(), card = card_open();
	struct strixpeer_gem_dmabuf g;
	struct rlimit rl;
	int spare[64], n = 0, fd;
	struct bo b;

	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
	rl.rlim_cur = 32;
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl));
	while (n < 64 && (fd = dup(sp)) >= 0)
		spare[n++] = fd;
	CHECK(errno == EMFILE, "the table did not fill: %s", strerror(errno));
	CHECK_ERR(gem_ioctl(sp, b.map, 4096, 0, &g), EMFILE);
	/* NO_FD needs no slot */
	CHECK_OK(gem_ioctl(sp, b.map, 4096, STRIXPEER_GEM_DMABUF_NO_FD, &g));
	close(spare[--n]);
	CHECK_OK(gem_ioctl(sp, b.map, 4096, 0, &g));
	close(g.fd);
	while (n)
		close(spare[--n]);
	bo_free(&b);
	close(card);
	close(sp);
}

/* The fd outlives the mapping and the handle; the bytes stay reachable. */
static void test_gem_dmabuf_fd_outlives_mapping_and_handle(void)
{
	int sp = sp_test_open(), card = card_open();
	struct strixpeer_gem_dmabuf g;
	uint8_t *view;
	struct bo b;

	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	sp_fill(b.map, BO_LEN, 0, 9);
	CHECK_OK(gem_ioctl(sp, b.map, BO_LEN, STRIXPEER_GEM_DMABUF_CLOEXEC, &g));
	bo_free(&b);
	close(card);
	view = mmap(NULL, BO_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, g.fd, 0);
	CHECK(view != MAP_FAILED, "mmap of the dma-buf after the BO's handle went: %s",
	      strerror(errno));
	CHECK(sp_verify(view, BO_LEN, 0, 9) < 0, "the bytes did not stay");
	munmap(view, BO_LEN);
	close(g.fd);
	close(sp);
}

static void test_sp_gem_dmabuf_library(void)
{
	struct sp_dev *dev = sp_test_dev();
	int card = card_open(), fd = -1;
	struct sp_version ver;
	unsigned int fl = 7;
	uint64_t off = 0;
	struct bo b;
	char host[64];

	CHECK_OK(sp_dev_version(dev, &ver));
	CHECK(ver.features & SP_FEAT_GEM_DMABUF, "features %#llx without SP_FEAT_GEM_DMABUF",
	      (unsigned long long)ver.features);
	bo_new(&b, card, BO_LEN, PROT_READ | PROT_WRITE);
	CHECK(sp_gem_dmabuf(dev, b.map + 3, 100, &fd, &off, &fl) == 0, "%s", sp_errmsg());
	CHECK(fd >= 0 && off == 3 && fl == 0, "fd %d off %llu flags %#x", fd,
	      (unsigned long long)off, fl);
	CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC, "not close-on-exec");
	close(fd);
	CHECK(sp_gem_dmabuf(dev, host, sizeof(host), &fd, &off, NULL) == -ENOENT,
	      "host memory: %s", sp_errmsg());
	CHECK(strstr(sp_errmsg(), "not (all) in a GPU buffer's mapping"), "message: %s",
	      sp_errmsg());
	CHECK(sp_gem_dmabuf(dev, b.map, 0, &fd, &off, NULL) == -EINVAL, "empty range");
	bo_free(&b);
	close(card);
	sp_dev_close(dev);
}

static const struct tap_case cases[] = {
	TAP_CASE(test_gem_dmabuf_is_the_prime_export),
	TAP_CASE(test_gem_dmabuf_offsets_of_split_and_moved_mappings),
	TAP_CASE(test_gem_dmabuf_read_only_mapping_says_so),
	TAP_CASE(test_gem_dmabuf_bad_arguments),
	TAP_CASE(test_gem_dmabuf_refuses_what_is_no_gem_mapping),
	TAP_CASE(test_gem_dmabuf_two_bos_refused),
	TAP_CASE(test_gem_dmabuf_closed_handle_refused),
	TAP_CASE(test_gem_dmabuf_other_process_bo_unreachable),
	TAP_CASE(test_gem_dmabuf_emfile_loses_nothing),
	TAP_CASE(test_gem_dmabuf_fd_outlives_mapping_and_handle),
	TAP_CASE(test_sp_gem_dmabuf_library),
};

TAP_MAIN(cases)
