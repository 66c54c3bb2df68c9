// SPDX-License-Identifier: MIT
/* tests/lib/peer_util.h's functions: the suite's library (build/tests/libsptest.a). */
#include "peer_util.h"

int sim_open(void)
{
	int fd = open(PEERSIM_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		SKIP("%s not present: sp_peersim not loaded", PEERSIM_DEVICE_PATH);
	CHECK(fd >= 0, "open %s: %s", PEERSIM_DEVICE_PATH, strerror(errno));
	return fd;
}

struct peersim_info sim_info(int sim)
{
	struct peersim_info i;

	memset(&i, 0, sizeof(i));
	CHECK_OK(ioctl(sim, PEERSIM_IOC_INFO, &i));
	return i;
}

int sim_reg(int sim, const void *addr, uint64_t len, struct peersim_reg_mr *r)
{
	memset(r, 0, sizeof(*r));
	r->addr = (uintptr_t)addr;
	r->length = len;
	r->access = PEERSIM_ACCESS_WRITE;
	return ioctl(sim, PEERSIM_IOC_REG_MR, r) ? -errno : 0;
}

struct peersim_mr_info sim_mr(int sim, uint32_t handle)
{
	struct peersim_mr_info m;

	memset(&m, 0, sizeof(m));
	m.handle = handle;
	CHECK_OK(ioctl(sim, PEERSIM_IOC_MR_INFO, &m));
	return m;
}

int sim_dma(int sim, unsigned long cmd, uint32_t handle, uint64_t off,
	    void *buf, uint64_t len)
{
	struct peersim_dma d = { .handle = handle, .offset = off, .length = len,
				 .buf = (uintptr_t)buf };

	return ioctl(sim, cmd, &d) ? -errno : 0;
}

void sim_dereg(int sim, uint32_t handle)
{
	struct peersim_mr_handle h = { .handle = handle };

	CHECK_OK(ioctl(sim, PEERSIM_IOC_DEREG_MR, &h));
}

struct peersim_client sim_client(int sim)
{
	struct peersim_client c[8];
	struct peersim_clients cs = { .count = 8, .clients = (uintptr_t)c };

	memset(c, 0, sizeof(c));
	CHECK_OK(ioctl(sim, PEERSIM_IOC_CLIENTS, &cs));
	for (uint32_t i = 0; i < cs.count && i < 8; i++)
		if (!strcmp(c[i].name, "strixpeer"))
			return c[i];
	CHECK(0, "no client named strixpeer among %u", cs.count);
	return c[0];
}

void write_param(const char *path, const char *val)
{
	FILE *f = fopen(path, "we");

	CHECK(f && fputs(val, f) >= 0 && fclose(f) == 0, "write %s: %s", path, strerror(errno));
}

struct sp_peer_counters peer_stats(void)
{
	struct sp_peer_counters c;
	struct sp_ctl *ctl;

	CHECK(sp_ctl_open(&ctl) == 0, "sp_ctl_open: %s", sp_errmsg());
	CHECK(sp_ctl_peer_stats(ctl, &c) == 0, "peer stats: %s", sp_errmsg());
	sp_ctl_close(ctl);
	return c;
}

struct sp_peer_pins peer_pins(void)
{
	struct sp_peer_pins p;
	struct sp_ctl *ctl;

	CHECK(sp_ctl_open(&ctl) == 0, "sp_ctl_open: %s", sp_errmsg());
	CHECK(sp_ctl_peer_pins(ctl, &p) == 0, "peer pins: %s", sp_errmsg());
	sp_ctl_close(ctl);
	return p;
}

int sp_import_raw(int fd, int dmabuf, uint64_t off, uint64_t len, const void *va,
		  struct strixpeer_import *out)
{
	struct strixpeer_import im = { .dmabuf_fd = dmabuf, .offset = off, .length = len,
				       .va = (uintptr_t)va };
	int ret = ioctl(fd, STRIXPEER_IOC_IMPORT, &im);

	if (out)
		*out = im;
	return ret;
}

int sp_unimport_raw(int fd, uint32_t handle)
{
	struct strixpeer_unimport u = { .handle = handle };

	return ioctl(fd, STRIXPEER_IOC_UNIMPORT, &u);
}

void check_all_released(void)
{
	struct sp_peer_counters c = { 0 };

	for (int i = 0; i < 600; i++) {	/* unmap/exit end imports from a worker (60 s) */
		c = peer_stats();
		if (!c.imports && !c.registrations)
			break;
		usleep(100000);
	}
	CHECK(c.imports == 0 && c.registrations == 0, "%llu imports, %llu registrations left",
	      (unsigned long long)c.imports, (unsigned long long)c.registrations);
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sim_write_seen(int sim, uint32_t h, uint8_t *va, uint64_t len,
		    uint32_t seed)
{
	uint8_t *tmp = malloc(len);
	int64_t bad;

	CHECK(tmp, "malloc");
	sp_fill(tmp, len, 0, seed);
	CHECK_OK(sim_dma(sim, PEERSIM_IOC_DMA_WRITE, h, 0, tmp, len));
	bad = sp_verify(va, len, 0, seed);
	CHECK(bad < 0, "NIC write not seen by the CPU at byte %lld of %p+%" PRIu64,
	      (long long)bad, (void *)va, len);
	free(tmp);
}
