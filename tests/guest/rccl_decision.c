// SPDX-License-Identifier: MIT
/*
 * What RCCL concludes about GPU Direct RDMA on this node, decided the way
 * RCCL decides it (rocm-systems projects/rccl, read from its code):
 *
 *  - src/misc/gdr_peermem.cc: /sys/kernel/mm/memory_peers,
 *    /sys/kernel/memory_peers, /sys/memory_peers in that order; the first
 *    entry (not starting with '.') that has a "version" file is a
 *    peer-memory client, whatever its name: GDR via peermem;
 *  - otherwise src/misc/gdr_probe.cc on every NIC: a 4 KiB GPU buffer
 *    (hipMalloc), a PD, ibv_reg_mr() with LOCAL_WRITE | REMOTE_WRITE |
 *    REMOTE_READ | REMOTE_ATOMIC, or with relaxed ordering enabled
 *    ibv_reg_mr_iova2(iova = addr) with IBV_ACCESS_RELAXED_ORDERING added;
 *    GDR when the registration succeeds;
 *  - otherwise RCCL stages through host memory (RCCL_FORCE_ENABLE_GDRDMA
 *    overrides, not modelled here).
 *
 * The GPU buffer is a vgem BO mapped as libhsakmt maps a hipMalloc one (a
 * PROT_NONE aperture, the BO MAP_SHARED | MAP_FIXED over it, then
 * MADV_DONTFORK: tests/lib/gpusim.h); vgem BOs here come in 16 KiB, so the
 * probe registers the first 4 KiB of one. Both arms of the probe run on
 * every device. The expectation comes from the caller, as the route
 * RCCL must take in the situation tests/vm/guest-suite.sh set up:
 *
 *   SP_RCCL_EXPECT=peermem|probe|host rccl_decision
 */
#include "gpusim.h"

#include <dirent.h>
#include <infiniband/verbs.h>
#include <limits.h>

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
	const char *expect = getenv("SP_RCCL_EXPECT"), *route;
	char client[PATH_MAX] = "";
	struct ibv_device **devs;
	int ndev = 0, all = 1, peermem;
	struct sp_vgem_bo bo;
	uint8_t *at;

	CHECK(expect && (!strcmp(expect, "peermem") || !strcmp(expect, "probe") ||
			 !strcmp(expect, "host")),
	      "SP_RCCL_EXPECT must be peermem, probe or host (is %s)", expect ? expect : "unset");
	peermem = scan_peer_clients(client, sizeof(client));
	printf("# peermem scan: %s\n", peermem ? client : "no client with a version file");

	sp_vgem_bo_new(16384, &bo);
	at = sp_aperture(16384, 2 << 20);
	sp_rocm_map(at, 16384, bo.node, bo.mmap_offset);
	memset(at, 0x5a, PROBE_LEN);
	devs = ibv_get_device_list(&ndev);
	CHECK(devs && ndev > 0, "no RDMA device: %s", strerror(errno));
	for (int i = 0; i < ndev; i++) {
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		int strict, ro, e1, e2;

		CHECK(ctx, "ibv_open_device %s: %s", ibv_get_device_name(devs[i]), strerror(errno));
		strict = probe(ctx, at, 0, &e1);
		ro = probe(ctx, at, 1, &e2);
		printf("# probe on %s: ibv_reg_mr %s%s%s, ibv_reg_mr_iova2 + relaxed ordering %s%s%s\n",
		       ibv_get_device_name(devs[i]), strict ? "succeeds" : "fails",
		       strict ? "" : ": ", strict ? "" : strerror(e1), ro ? "succeeds" : "fails",
		       ro ? "" : ": ", ro ? "" : strerror(e2));
		CHECK(strict == ro, "the probe's two arms disagree on %s",
		      ibv_get_device_name(devs[i]));
		all &= strict;
		ibv_close_device(ctx);
	}
	ibv_free_device_list(devs);
	sp_rocm_free(at, 16384);
	munmap(at, 16384);
	sp_vgem_bo_free(&bo);

	if (peermem && !all)
		printf("# note: the scan alone decides, so RCCL takes GPU Direct RDMA although a NIC above cannot register GPU memory: its registrations will fail there\n");
	route = peermem ? "peermem" : all ? "probe" : "host";
	printf("# RCCL: %s\n", peermem ? "GPU Direct RDMA: a peer-memory client is published" :
	       all ? "GPU Direct RDMA: its probe registered GPU memory on every NIC" :
	       "no GPU Direct RDMA: data is staged through host memory");
	CHECK(!strcmp(route, expect), "RCCL would take route \"%s\", expected \"%s\"", route,
	      expect);
}

static const struct tap_case cases[] = {
	TAP_CASE(rccl_route),
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
