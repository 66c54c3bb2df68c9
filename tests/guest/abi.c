// SPDX-License-Identifier: MIT
/*
 * ABI tests: every malformed request is refused with the documented errno
 * and changes nothing; then the well-formed ones, checked through mmap.
 */
#include "sp_test.h"

/* An ioctl number for a command with another struct size or direction. */
#define SP_IOC_SIZED(dir, nr, size) _IOC(dir, STRIXPEER_IOC_MAGIC, nr, size)

static void version_reports_abi(void)
{
	int fd = sp_test_open();
	struct strixpeer_version v;

	memset(&v, 0xa5, sizeof(v));
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_VERSION, &v));
	CHECK(v.abi_major == STRIXPEER_ABI_MAJOR, "abi_major %u", v.abi_major);
	CHECK(v.abi_minor + 1 >= STRIXPEER_ABI_MINOR + 1, "abi_minor %u", v.abi_minor);
	CHECK(v.reserved == 0, "reserved not cleared");
	CHECK(v.features & STRIXPEER_FEAT_BUFFERS, "features 0x%llx", (unsigned long long)v.features);
	CHECK(v.page_sizes & (1ULL << 12), "4 KiB pages missing");
	CHECK(v.page_sizes & (1ULL << 21), "2 MiB pages missing");
	tap_diag("module %u.%u.%u abi %u.%u", v.module_version >> 16,
		 (v.module_version >> 8) & 0xff, v.module_version & 0xff,
		 v.abi_major, v.abi_minor);
	close(fd);
}

static void unknown_ioctls_enotty(void)
{
	int fd = sp_test_open();
	char buf[64] = { 0 };

	CHECK_ERR(ioctl(fd, _IOWR(STRIXPEER_IOC_MAGIC, 0x40, struct strixpeer_buf_info), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOWR(STRIXPEER_IOC_MAGIC, 0xff, char[8]), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOWR('x', 0x01, struct strixpeer_buf_alloc), buf), ENOTTY);
	/* right number, wrong direction */
	CHECK_ERR(ioctl(fd, SP_IOC_SIZED(_IOC_WRITE, 0x00, sizeof(struct strixpeer_version)), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, SP_IOC_SIZED(_IOC_NONE, 0x01, 0), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, FIONREAD, buf), ENOTTY);
	CHECK_NOTHING_PINNED();
	close(fd);
}

/* Every number of our magic, every direction, odd sizes: never a crash. */
static void ioctl_sweep_refused(void)
{
	int fd = sp_test_open();
	static char buf[16384];
	const unsigned int sizes[] = { 0, 1, 7, 8, 15, 33, 100, 4095 };

	memset(buf, 0, sizeof(buf));
	for (unsigned int nr = 0; nr < 256; nr++)
		for (unsigned int d = 0; d < 4; d++)
			for (unsigned int s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
				long r = ioctl(fd, SP_IOC_SIZED(d, nr, sizes[s]), buf);

				/* only VERSION (read-only, size >= 32) may succeed */
				if (r == 0)
					CHECK(nr == 0 && d == _IOC_READ && sizes[s] >= 32,
					      "nr %u dir %u size %u accepted", nr, d, sizes[s]);
			}
	CHECK_NOTHING_PINNED();
	close(fd);
}

static void alloc_bad_flags(void)
{
	int fd = sp_test_open();

	CHECK_ERR(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, 1U << 5, NULL), EINVAL);
	CHECK_ERR(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, 1U << 31, NULL), EINVAL);
	CHECK_ERR(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, STRIXPEER_ALLOC_FLAGS, NULL), EINVAL);
	CHECK_NOTHING_PINNED();
	close(fd);
}

static void alloc_reserved_nonzero(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a = { .size = MiB, .node = STRIXPEER_NODE_DEFAULT, .reserved = 1 };

	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a), EINVAL);
	CHECK_NOTHING_PINNED();
	close(fd);
}

static void alloc_bad_sizes(void)
{
	int fd = sp_test_open();
	char val[64];
	uint64_t max;
	FILE *f;

	f = fopen("/sys/module/strixpeer/parameters/max_buf_size", "re");
	CHECK(f && fgets(val, sizeof(val), f), "max_buf_size parameter");
	fclose(f);
	max = strtoull(val, NULL, 10);

	CHECK_ERR(sp_raw_alloc(fd, 0, STRIXPEER_NODE_DEFAULT, 0, NULL), EINVAL);
	CHECK_ERR(sp_raw_alloc(fd, max + 1, STRIXPEER_NODE_DEFAULT, 0, NULL), EFBIG);
	CHECK_ERR(sp_raw_alloc(fd, UINT64_MAX, STRIXPEER_NODE_DEFAULT, 0, NULL), EFBIG);
	CHECK_ERR(sp_raw_alloc(fd, UINT64_MAX - 4095, STRIXPEER_NODE_DEFAULT,
			       STRIXPEER_ALLOC_HUGE_ONLY, NULL), EFBIG);
	CHECK_ERR(sp_raw_alloc(fd, 1ULL << 63, STRIXPEER_NODE_DEFAULT, 0, NULL), EFBIG);
	CHECK_NOTHING_PINNED();
	close(fd);
}

static void alloc_bad_node(void)
{
	int fd = sp_test_open();

	CHECK_ERR(sp_raw_alloc(fd, MiB, 4096, 0, NULL), EINVAL);
	CHECK_ERR(sp_raw_alloc(fd, MiB, 0x7fffffff, 0, NULL), EINVAL);
	CHECK_ERR(sp_raw_alloc(fd, MiB, 0xfffffffe, 0, NULL), EINVAL);
	/* a possible but offline/memoryless node id */
	for (int n = 0; n < 64; n++) {
		char path[64];

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", n);
		if (access(path, F_OK) != 0) {
			CHECK_ERR(sp_raw_alloc(fd, MiB, (uint32_t)n, 0, NULL), EINVAL);
			break;
		}
	}
	CHECK_NOTHING_PINNED();
	close(fd);
}

/* A struct smaller than the first ABI version of it is refused. */
static void struct_smaller_refused(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a = { .size = MiB, .node = STRIXPEER_NODE_DEFAULT };
	struct strixpeer_version v;

	CHECK_ERR(ioctl(fd, SP_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, 16), &a), EINVAL);
	CHECK_ERR(ioctl(fd, SP_IOC_SIZED(_IOC_READ, 0x00, 8), &v), EINVAL);
	CHECK_NOTHING_PINNED();
	close(fd);
}

/* A newer, larger struct: accepted with a zero tail, E2BIG otherwise. */
static void struct_larger(void)
{
	int fd = sp_test_open();
	struct {
		struct strixpeer_buf_alloc a;
		uint64_t future[3];
	} big;
	struct {
		struct strixpeer_version v;
		uint64_t future[2];
	} bigv;

	memset(&big, 0, sizeof(big));
	big.a.size = MiB;
	big.a.node = STRIXPEER_NODE_DEFAULT;
	big.future[2] = 1;
	CHECK_ERR(ioctl(fd, SP_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, sizeof(big)), &big), E2BIG);
	CHECK_NOTHING_PINNED();

	big.future[2] = 0;
	CHECK_OK(ioctl(fd, SP_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, sizeof(big)), &big));
	CHECK(big.a.handle != 0 && big.a.size == MiB, "handle %u size %llu",
	      big.a.handle, (unsigned long long)big.a.size);
	CHECK(big.future[0] == 0 && big.future[1] == 0 && big.future[2] == 0, "tail changed");
	CHECK_OK(sp_raw_free(fd, big.a.handle));

	/* out-only struct: a non-zero tail is E2BIG too; a zero one stays zero */
	memset(&bigv, 0xff, sizeof(bigv));
	CHECK_ERR(ioctl(fd, SP_IOC_SIZED(_IOC_READ, 0x00, sizeof(bigv)), &bigv), E2BIG);
	memset(bigv.future, 0, sizeof(bigv.future));
	CHECK_OK(ioctl(fd, SP_IOC_SIZED(_IOC_READ, 0x00, sizeof(bigv)), &bigv));
	CHECK(bigv.v.abi_major == STRIXPEER_ABI_MAJOR, "abi");
	CHECK(bigv.future[0] == 0 && bigv.future[1] == 0, "tail changed");
	CHECK_NOTHING_PINNED();
	close(fd);
}

static void bad_user_pointer(void)
{
	int fd = sp_test_open();

	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, (void *)16), EFAULT);
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_VERSION, (void *)16), EFAULT);
	CHECK_NOTHING_PINNED();
	close(fd);
}

/* Output copy fails after the allocation: the allocation is undone. */
static void alloc_readonly_struct(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc *a;

	a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(a != MAP_FAILED, "mmap");
	a->size = MiB;
	a->node = STRIXPEER_NODE_DEFAULT;
	CHECK_OK(mprotect(a, 4096, PROT_READ));
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, a), EFAULT);
	CHECK_NOTHING_PINNED();
	close(fd);
}

static void free_and_info_errors(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	struct strixpeer_buf_free fr = { 0 };
	struct strixpeer_buf_info info = { 0 };

	CHECK_ERR(sp_raw_free(fd, 0), ENOENT);
	CHECK_ERR(sp_raw_free(fd, 12345), ENOENT);
	CHECK_OK(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	fr.handle = a.handle;
	fr.flags = 1;
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_FREE, &fr), EINVAL);
	info.handle = a.handle;
	info.flags = 2;
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info), EINVAL);
	info.flags = 0;
	info.reserved = 1;
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info), EINVAL);
	info.reserved = 0;
	info.handle = a.handle + 1;
	CHECK_ERR(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info), ENOENT);
	info.handle = a.handle;
	CHECK_OK(ioctl(fd, STRIXPEER_IOC_BUF_INFO, &info));
	CHECK(info.size == MiB && info.mmap_offset == a.mmap_offset, "info");
	CHECK_OK(sp_raw_free(fd, a.handle));
	CHECK_ERR(sp_raw_free(fd, a.handle), ENOENT);	/* double free */
	CHECK_NOTHING_PINNED();
	close(fd);
}

/* Handles are per fd: another fd of the same process cannot use them. */
static void handle_of_other_fd(void)
{
	int fd = sp_test_open(), fd2 = sp_test_open();
	struct strixpeer_buf_alloc a;

	CHECK_OK(sp_raw_alloc(fd, MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK_ERR(sp_raw_free(fd2, a.handle), ENOENT);
	CHECK_ERR(mmap(NULL, MiB, PROT_READ, MAP_SHARED, fd2, (off_t)a.mmap_offset), EINVAL);
	close(fd2);
	close(fd);
	CHECK_NOTHING_PINNED();
}

static void mmap_errors(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 4 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	/* unknown cookie */
	CHECK_ERR(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (off_t)(a.mmap_offset + (1ULL << 40))), EINVAL);
	CHECK_ERR(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0), EINVAL);
	/* beyond the buffer, and straddling its end */
	CHECK_ERR(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (off_t)(a.mmap_offset + 4 * MiB)), EINVAL);
	CHECK_ERR(mmap(NULL, 8 * MiB, PROT_READ, MAP_SHARED, fd, (off_t)a.mmap_offset), EINVAL);
	CHECK_ERR(mmap(NULL, 2 * MiB, PROT_READ, MAP_SHARED, fd, (off_t)(a.mmap_offset + 3 * MiB)), EINVAL);
	/* private mappings would copy on write away from the NIC's pages */
	CHECK_ERR(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, (off_t)a.mmap_offset), EINVAL);
	/* the whole buffer, then a window at an offset sees the same bytes */
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 7);
	{
		uint8_t *w = mmap(NULL, MiB, PROT_READ, MAP_SHARED, fd, (off_t)(a.mmap_offset + 3 * MiB));

		CHECK(w != MAP_FAILED, "window mmap: %s", strerror(errno));
		CHECK(sp_verify(w, MiB, 3 * MiB, 7) < 0, "window content");
		/* mremap cannot grow it */
		CHECK(mremap(w, MiB, 2 * MiB, 0) == MAP_FAILED, "mremap grew the mapping");
		munmap(w, MiB);
	}
	munmap(p, a.size);
	CHECK_OK(sp_raw_free(fd, a.handle));
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* A fresh buffer is zeroed and holds what is written. */
static void data_roundtrip(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 3 * MiB + 5, STRIXPEER_NODE_DEFAULT, 0, &a));
	CHECK(a.size == 3 * MiB + 4096, "rounded size %llu", (unsigned long long)a.size);
	p = sp_raw_map(fd, &a);
	for (uint64_t i = 0; i < a.size; i++)
		CHECK(p[i] == 0, "byte %llu not zero", (unsigned long long)i);
	sp_fill(p, a.size, 0, 3);
	CHECK(sp_verify(p, a.size, 0, 3) < 0, "content");
	munmap(p, a.size);
	p = sp_raw_map(fd, &a);
	CHECK(sp_verify(p, a.size, 0, 3) < 0, "content after remap");
	munmap(p, a.size);
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* PTEs zapped by MADV_DONTNEED come back as the same pages on the next touch. */
static void refault_after_zap(void)
{
	int fd = sp_test_open();
	struct strixpeer_buf_alloc a;
	uint64_t pfn;
	uint8_t *p;

	CHECK_OK(sp_raw_alloc(fd, 4 * MiB, STRIXPEER_NODE_DEFAULT, 0, &a));
	p = sp_raw_map(fd, &a);
	sp_fill(p, a.size, 0, 9);
	pfn = sp_pfn(p + MiB);
	CHECK_OK(madvise(p, a.size, MADV_DONTNEED));
	CHECK(sp_verify(p, a.size, 0, 9) < 0, "content after zap");
	CHECK(sp_pfn(p + MiB) == pfn, "a different page came back");
	munmap(p, a.size);
	close(fd);
	CHECK_NOTHING_PINNED();
}

/* The version handshake of the library, and its error words. */
static void library_handshake(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_version v;

	CHECK_OK(sp_dev_version(dev, &v));
	CHECK(v.abi_major == STRIXPEER_ABI_MAJOR, "abi");
	sp_dev_close(dev);
	CHECK(sp_dev_open("/dev/null", &dev) == -EPROTONOSUPPORT, "/dev/null accepted");
	CHECK(strstr(sp_errmsg(), "not a strixpeer device"), "message: %s", sp_errmsg());
	CHECK(sp_dev_open("/nonexistent/strixpeer", &dev) == -ENOENT, "missing node");
	CHECK(strstr(sp_errmsg(), "modprobe strixpeer"), "message: %s", sp_errmsg());
}

static const struct tap_case cases[] = {
	TAP_CASE(version_reports_abi),
	TAP_CASE(unknown_ioctls_enotty),
	TAP_CASE(ioctl_sweep_refused),
	TAP_CASE(alloc_bad_flags),
	TAP_CASE(alloc_reserved_nonzero),
	TAP_CASE(alloc_bad_sizes),
	TAP_CASE(alloc_bad_node),
	TAP_CASE(struct_smaller_refused),
	TAP_CASE(struct_larger),
	TAP_CASE(bad_user_pointer),
	TAP_CASE(alloc_readonly_struct),
	TAP_CASE(free_and_info_errors),
	TAP_CASE(handle_of_other_fd),
	TAP_CASE(mmap_errors),
	TAP_CASE(data_roundtrip),
	TAP_CASE(refault_after_zap),
	TAP_CASE(library_handshake),
};

TAP_MAIN(cases)
