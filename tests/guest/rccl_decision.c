// SPDX-License-Identifier: MIT
/*
 * What RCCL concludes about GPU Direct RDMA on this node, decided the way
 * RCCL decides it. Read from RCCL's code (ROCm/rocm-systems projects/rccl),
 * not run against RCCL itself:
 *
 *  - as merged: src/transport/net_ib/gdr.cc at 484e896e
 *    (ibGdrSupportInitOnce) with src/misc/gdr_peermem.cc at 0d92d17d
 *    (ncclIbScanPeerMemClients): /sys/kernel/mm/memory_peers,
 *    /sys/kernel/memory_peers, /sys/memory_peers in that order; the first
 *    entry (not starting with '.') that has a "version" file is a
 *    peer-memory client, whatever its name, and means peer memory; no
 *    kallsyms test any more (PR #9540). PR #3607: peer memory is preferred;
 *    without it dma-buf, when RCCL's kernel test passes (kernel config
 *    CONFIG_DMABUF_MOVE_NOTIFY=y and CONFIG_PCI_P2PDMA=y, or with no config
 *    the kallsyms symbols dma_buf_move_notify and pci_p2pdma) and the NIC
 *    takes dma-buf MRs (ibv_reg_dmabuf_mr(fd -1) fails with EBADF, not
 *    EOPNOTSUPP/EPROTONOSUPPORT: gdr.cc ibDmaBufSupportInitOnce);
 *    otherwise data is staged through host memory;
 *  - if the open PR #11886 is merged: when the scan finds no client, a
 *    probe (src/misc/gdr_probe.cc at 5090d876 on the PR's branch): a 4 KiB
 *    GPU buffer (hipMalloc), a PD, ibv_reg_mr() with LOCAL_WRITE |
 *    REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC, or with relaxed ordering
 *    ibv_reg_mr_iova2(iova = addr) with IBV_ACCESS_RELAXED_ORDERING added,
 *    on device 0; peer memory when the registration succeeds.
 *  RCCL_FORCE_ENABLE_GDRDMA and RCCL_FORCE_ENABLE_DMABUF are not modelled.
 *
 * The GPU buffer is a vgem BO mapped as libhsakmt maps a hipMalloc one (a
 * PROT_NONE aperture, the BO MAP_SHARED | MAP_FIXED over it, then
 * MADV_DONTFORK: tests/lib/gpusim.h); vgem BOs here come in 16 KiB, so the
 * probe registers the first 4 KiB of one. Both arms of the probe run on
 * every device (they must agree). The expectation comes from the caller,
 * as the route RCCL must take, if PR #11886 is merged, in the situation
 * tests/vm/guest-suite.sh set up; the merged code's route must agree with
 * it (peermem exactly when the scan finds a client):
 *
 *   SP_RCCL_EXPECT=peermem|probe|host rccl_decision
 */
#include "gpusim.h"

#include <dirent.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <sys/utsname.h>

#define PROBE_LEN	4096
#define RCCL_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static const char *const peer_dirs[] = {
	"/sys/kernel/mm/memory_peers", "/sys/kernel/memory_peers", "/sys/memory_peers",
};

/* gdr_peermem.cc's scan; the client found (dir/name) in @found, or 0. */
static int scan_peer_clients(char *found, size_t len)
{
	for (size_t i = 0; i < sizeof(peer_dirs) / sizeof(peer_dirs[0]); i++) {
		DIR *d = opendir(peer_dirs[i]);
		struct dirent *e;

		if (!d)
			continue;
		while ((e = readdir(d))) {
			char v[PATH_MAX];

			if (e->d_name[0] == '.')
				continue;
			if (snprintf(v, sizeof(v), "%s/%s/version", peer_dirs[i], e->d_name) >=
			    (int)sizeof(v) || access(v, F_OK))
				continue;
			snprintf(found, len, "%s/%s", peer_dirs[i], e->d_name);
			closedir(d);
			return 1;
		}
		closedir(d);
	}
	return 0;
}

/* gdr.cc's dma-buf test on one device: 1 when ibv_reg_dmabuf_mr(fd -1) fails with EBADF */
static int nic_dmabuf(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr;
	int e;

	CHECK(pd, "ibv_alloc_pd on %s: %s", ibv_get_device_name(ctx->device), strerror(errno));
	errno = 0;
	mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
	e = errno;
	if (mr)
		CHECK_OK(ibv_dereg_mr(mr));
	CHECK_OK(ibv_dealloc_pd(pd));
	return !mr && e != EOPNOTSUPP && e != EPROTONOSUPPORT;
}

/* RCCL's kernel test: the first readable config, else kallsyms; @src names it */
static int kernel_dmabuf(char *src, size_t len)
{
	static const char *const tmpl[] = {
		"/boot/config-%s", "/usr/src/linux-%s/.config", "/usr/src/linux/.config",
		"/usr/lib/modules/%s/config", "/usr/lib/ostree-boot/config-%s",
		"/usr/lib/kernel/config-%s", "/usr/src/linux-headers-%s/.config",
		"/lib/modules/%s/build/.config", "/proc/kallsyms",
	};
	const char *want[2] = { "CONFIG_DMABUF_MOVE_NOTIFY=y", "CONFIG_PCI_P2PDMA=y" };
	struct utsname u;
	char line[512];
	int got = 0;
	FILE *f = NULL;

	CHECK_OK(uname(&u));
	/* /proc/config.gz first, read through zcat as RCCL reads it */
	if (!access("/proc/config.gz", R_OK)) {
		f = popen("zcat /proc/config.gz 2>/dev/null", "r");
		CHECK(f, "zcat /proc/config.gz: %s", strerror(errno));
		snprintf(src, len, "/proc/config.gz");
		while (fgets(line, sizeof(line), f))
			got |= (strstr(line, want[0]) ? 1 : 0) | (strstr(line, want[1]) ? 2 : 0);
		/* zcat failing (not gzip, truncated) sends RCCL to the next path */
		if (pclose(f) == 0)
			return got == 3;
		f = NULL;
		got = 0;
	}
	for (size_t i = 0; i < sizeof(tmpl) / sizeof(tmpl[0]) && !f; i++) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(src, len, tmpl[i], u.release);
#pragma GCC diagnostic pop
		f = fopen(src, "r");
	}
	CHECK(f, "no kernel config and no /proc/kallsyms");
	if (!strcmp(src, "/proc/kallsyms")) {
		want[0] = "dma_buf_move_notify";
		want[1] = "pci_p2pdma";
	}
	while (fgets(line, sizeof(line), f))
		got |= (strstr(line, want[0]) ? 1 : 0) | (strstr(line, want[1]) ? 2 : 0);
	fclose(f);
	return got == 3;
}

/* gdr_probe.cc on one device, one arm; 1 when the registration succeeds. */
static int probe(struct ibv_context *ctx, void *buf, int relaxed, int *err)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr;

	CHECK(pd, "ibv_alloc_pd on %s: %s", ibv_get_device_name(ctx->device), strerror(errno));
	errno = 0;
	if (relaxed)
		mr = ibv_reg_mr_iova2(pd, buf, PROBE_LEN, (uintptr_t)buf,
				      RCCL_ACCESS | IBV_ACCESS_RELAXED_ORDERING);
	else
		mr = ibv_reg_mr(pd, buf, PROBE_LEN, RCCL_ACCESS);
	*err = mr ? 0 : errno;
	if (mr)
		CHECK_OK(ibv_dereg_mr(mr));
	CHECK_OK(ibv_dealloc_pd(pd));
	return mr != NULL;
}

static void rccl_route(void)
{
	const char *expect = getenv("SP_RCCL_EXPECT"), *route, *merged;
	char client[PATH_MAX] = "", ksrc[PATH_MAX];
	struct ibv_device **devs;
	int ndev = 0, dev0 = 0, all = 1, dmabuf = 1, peermem, kernel;
	struct sp_vgem_bo bo;
	uint8_t *at;

	CHECK(expect && (!strcmp(expect, "peermem") || !strcmp(expect, "probe") ||
			 !strcmp(expect, "host")),
	      "SP_RCCL_EXPECT must be peermem, probe or host (is %s)", expect ? expect : "unset");
	peermem = scan_peer_clients(client, sizeof(client));
	printf("# peermem scan: %s\n", peermem ? client : "no client with a version file");
	kernel = kernel_dmabuf(ksrc, sizeof(ksrc));
	printf("# dma-buf kernel test on %s: %s\n", ksrc, kernel ? "passes" : "fails");

	sp_vgem_bo_new(16384, &bo);
	at = sp_aperture(16384, 2 << 20);
	sp_rocm_map(at, 16384, bo.node, bo.mmap_offset);
	memset(at, 0x5a, PROBE_LEN);
	devs = ibv_get_device_list(&ndev);
	CHECK(devs && ndev > 0, "no RDMA device: %s", strerror(errno));
	for (int i = 0; i < ndev; i++) {
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		int strict, ro, e1, e2, db;

		CHECK(ctx, "ibv_open_device %s: %s", ibv_get_device_name(devs[i]), strerror(errno));
		strict = probe(ctx, at, 0, &e1);
		ro = probe(ctx, at, 1, &e2);
		db = nic_dmabuf(ctx);
		printf("# %s: ibv_reg_mr %s%s%s, ibv_reg_mr_iova2 + relaxed ordering %s%s%s, dma-buf MRs %s\n",
		       ibv_get_device_name(devs[i]), strict ? "succeeds" : "fails",
		       strict ? "" : ": ", strict ? "" : strerror(e1), ro ? "succeeds" : "fails",
		       ro ? "" : ": ", ro ? "" : strerror(e2), db ? "yes" : "no");
		CHECK(strict == ro, "the probe's two arms disagree on %s",
		      ibv_get_device_name(devs[i]));
		if (!i)
			dev0 = strict;
		all &= strict;
		dmabuf &= db;
		ibv_close_device(ctx);
	}
	ibv_free_device_list(devs);
	sp_rocm_free(at, 16384);
	munmap(at, 16384);
	sp_vgem_bo_free(&bo);

	if (peermem && !all)
		printf("# note: the scan alone decides, so RCCL takes GPU Direct RDMA although a NIC above cannot register GPU memory: its registrations will fail there\n");
	if (!peermem && dev0 && !all)
		printf("# note: PR #11886 probes device 0 only; a NIC above cannot register GPU memory\n");
	merged = peermem ? "peermem" : kernel && dmabuf ? "dma-buf" : "host";
	route = peermem ? "peermem" : dev0 ? "probe" : "host";
	printf("# RCCL as merged: %s\n", peermem ? "GPU Direct RDMA: a peer-memory client is published (preferred over dma-buf)" :
	       !strcmp(merged, "dma-buf") ? "GPU Direct RDMA through dma-buf MRs (no peer memory seen)" :
	       "no GPU Direct RDMA: data is staged through host memory");
	printf("# RCCL if PR #11886 is merged: %s\n", peermem ? "the same" :
	       dev0 ? "GPU Direct RDMA: its probe registered GPU memory on device 0 (plain ibv_reg_mr, preferred over dma-buf)" :
	       !strcmp(merged, "dma-buf") ? "the same (its probe failed)" :
	       "no GPU Direct RDMA: its probe failed too");
	CHECK(!strcmp(route, expect), "RCCL (if PR #11886 is merged) would take route \"%s\", expected \"%s\"",
	      route, expect);
	CHECK(!strcmp(expect, "peermem") == !strcmp(merged, "peermem"),
	      "RCCL as merged takes \"%s\", which disagrees with the expected \"%s\"", merged, expect);
}

static const struct tap_case cases[] = {
	TAP_CASE(rccl_route),
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
