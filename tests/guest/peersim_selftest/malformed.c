// SPDX-License-Identifier: MIT
/* peersim_selftest: malformed requests */
#include "peersim_selftest.h"

/* --- malformed requests ---------------------------------------------------- */

void info_reports_abi(void)
{
	int fd = peersim_test_open();
	struct peersim_info info;
	char sem[32];

	memset(&info, 0xa5, sizeof(info));
	CHECK_OK(ioctl(fd, PEERSIM_IOC_INFO, &info));
	CHECK(info.abi_version == PEERSIM_ABI_VERSION, "abi_version %u", info.abi_version);
	CHECK(info.semantics == PEERSIM_SEM_MODERN || info.semantics == PEERSIM_SEM_LEGACY,
	      "semantics %u", info.semantics);
	CHECK(info.page_size == (uint64_t)page_size(), "page_size %" PRIu64,
	      (uint64_t)info.page_size);
	CHECK(info.max_seg_size >= (uint64_t)page_size(), "max_seg_size %" PRIu64,
	      (uint64_t)info.max_seg_size);
	CHECK(peersim_param_get("semantics", sem, sizeof(sem)) == 0, "semantics parameter");
	CHECK(!strcmp(sem, info.semantics == PEERSIM_SEM_LEGACY ? "legacy" : "modern"),
	      "parameter says %s", sem);
	tap_diag("%s semantics, max_seg_size %" PRIu64 ", %u clients, %" PRIu64 " live MRs",
		 sem, (uint64_t)info.max_seg_size, info.nclients, (uint64_t)info.live_mrs);
	close(fd);
}

void unknown_ioctls_enotty(void)
{
	int fd = peersim_test_open();
	char buf[256] = { 0 };

	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x09, 16), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0xff, 8), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOWR('x', 0x01, struct peersim_reg_mr), buf), ENOTTY);
	/* right number, wrong direction */
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_WRITE, 0x00, sizeof(struct peersim_info)), buf),
		  ENOTTY);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ, 0x02, sizeof(struct peersim_mr_handle)),
			buf), ENOTTY);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_NONE, 0x01, 0), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, FIONREAD, buf), ENOTTY);
	close(fd);
}

void ioctl_sizes(void)
{
	int fd = peersim_test_open();
	char buf[512];
	struct peersim_info *info = (void *)buf;
	uint64_t before = peersim_live_mrs(fd);

	/* smaller than the first version */
	memset(buf, 0, sizeof(buf));
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ, 0x00, sizeof(struct peersim_info) - 8), buf),
		  EINVAL);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, 8), buf), EINVAL);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_WRITE, 0x02, 4), buf), EINVAL);
	CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_WRITE, 0x04, 0), buf), EINVAL);

	/* a newer, larger out-struct: the tail is cleared */
	memset(buf, 0x5a, sizeof(buf));
	CHECK_OK(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ, 0x00, sizeof(struct peersim_info) + 64), buf));
	CHECK(info->abi_version == PEERSIM_ABI_VERSION, "abi_version %u", info->abi_version);
	for (size_t i = sizeof(struct peersim_info); i < sizeof(struct peersim_info) + 64; i++)
		CHECK(buf[i] == 0, "tail byte %zu not cleared", i);

	/* a newer in-struct with a non-zero tail: E2BIG, zero tail: fine */
	{
		char *mem = map_anon(page_size(), PROT_READ | PROT_WRITE);
		struct peersim_reg_mr *r = (void *)buf;
		size_t big = sizeof(*r) + 16;

		memset(buf, 0, sizeof(buf));
		r->addr = (uintptr_t)mem;
		r->length = page_size();
		r->access = PEERSIM_ACCESS_WRITE;
		buf[sizeof(*r) + 3] = 1;
		CHECK_ERR(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, big), buf), E2BIG);
		CHECK(peersim_live_mrs(fd) == before, "E2BIG registered an MR");
		buf[sizeof(*r) + 3] = 0;
		CHECK_OK(ioctl(fd, PSIM_IOC_SIZED(_IOC_READ | _IOC_WRITE, 0x01, big), buf));
		CHECK(r->handle > 0 && r->path == PEERSIM_PATH_GUP, "handle %u path %u",
		      r->handle, r->path);
		CHECK_OK(peersim_dereg_mr(fd, r->handle));
		munmap(mem, page_size());
	}
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	close(fd);
}

/* Every number of our magic, every direction, odd sizes: never a crash. */
void ioctl_sweep(void)
{
	int fd = peersim_test_open();
	static char buf[16384];
	const unsigned int sizes[] = { 0, 1, 7, 8, 15, 33, 100, 4095 };
	uint64_t before = peersim_live_mrs(fd);

	for (unsigned int nr = 0; nr < 256; nr++)
		for (unsigned int d = 0; d < 4; d++)
			for (unsigned int s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
				long r;

				memset(buf, 0, sizes[s]);	/* INFO writes into it */
				r = ioctl(fd, PSIM_IOC_SIZED(d, nr, sizes[s]), buf);

				/* zeroed: only INFO and CLIENTS (count 0) can succeed */
				if (r == 0)
					CHECK((nr == 0 && d == _IOC_READ) ||
					      (nr == 7 && d == (_IOC_READ | _IOC_WRITE)),
					      "nr %u dir %u size %u accepted", nr, d, sizes[s]);
			}
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	close(fd);
}

void bad_flags_and_reserved(void)
{
	int fd = peersim_test_open();
	char *mem = map_anon(page_size(), PROT_READ | PROT_WRITE);
	struct peersim_reg_mr r = { .addr = (uintptr_t)mem, .length = page_size() };
	struct peersim_mr_handle h = { .handle = 1, .reserved = 1 };
	struct peersim_mr_info mi = { .handle = 1, .reserved = 1 };
	struct peersim_clients cl = { .reserved = 1 };
	struct peersim_reg_mr ok;
	struct peersim_dma d;
	uint64_t before = peersim_live_mrs(fd);

	r.access = 1U << 1;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_MR, &r), EINVAL);
	r.access = 1U << 31;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_MR, &r), EINVAL);
	r.access = PEERSIM_ACCESS_WRITE;
	r.reserved = 1;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_REG_MR, &r), EINVAL);
	CHECK(peersim_live_mrs(fd) == before, "refused request registered an MR");

	CHECK_OK(peersim_reg_mr(fd, mem, page_size(), PEERSIM_ACCESS_WRITE, &ok));
	h.handle = ok.handle;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DEREG_MR, &h), EINVAL);
	mi.handle = ok.handle;
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_MR_INFO, &mi), EINVAL);
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_CLIENTS, &cl), EINVAL);
	d = (struct peersim_dma){ .handle = ok.handle, .flags = 1, .length = 1,
				  .buf = (uintptr_t)mem };
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DMA_WRITE, &d), EINVAL);
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DMA_READ, &d), EINVAL);
	d.flags = 1U << 5;	/* unknown; (1: VMAP is for dma-buf MRs only) */
	CHECK_ERR(ioctl(fd, PEERSIM_IOC_DMA_WRITE, &d), EINVAL);
	CHECK_OK(peersim_dereg_mr(fd, ok.handle));
	CHECK(peersim_live_mrs(fd) == before, "MRs left behind");
	munmap(mem, page_size());
	close(fd);
}

void reg_bad_ranges(void)
{
	int fd = peersim_test_open();
	char *mem = map_anon(page_size(), PROT_READ | PROT_WRITE);
	uint64_t before = peersim_live_mrs(fd);

	CHECK_ERR(peersim_reg_mr(fd, mem, 0, PEERSIM_ACCESS_WRITE, NULL), EINVAL);
	CHECK_ERR(peersim_reg_mr(fd, (void *)(uintptr_t)-4096, 8192, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_mr(fd, (void *)(uintptr_t)-100, 50, 0, NULL), EINVAL);
	CHECK_ERR(peersim_reg_mr(fd, mem, UINT64_MAX, 0, NULL), EINVAL);
	CHECK(peersim_live_mrs(fd) == before, "refused request registered an MR");
	munmap(mem, page_size());
	close(fd);
}
