// SPDX-License-Identifier: MIT
/*
 * strixpeer's PeerDirect client under another name, as stacks that cannot
 * be changed need it: released RCCL, GASNet-EX, LCI and ctran decide
 * GPU-direct by /sys/kernel/mm/memory_peers/amdkfd/version only, so
 * strixpeer is loaded with peer_client_name=amdkfd ("RCCL mode").
 *
 * Run by tests/guest/peer-names-guest.sh against the simulated peer-memory core
 * (sp_peersim), in two states:
 *   SP_PEER_NAME=amdkfd SP_PEER_HOLDER=strixpeer
 *	strixpeer holds the name: its directory and version are there, the
 *	core lists it once, netlink says PeerDirect is active, and a GPU
 *	buffer's registration is claimed under that name and carries data;
 *   SP_PEER_NAME=amdkfd SP_PEER_HOLDER=other
 *	another client (ROCm's, played by sp_amdkfd_stub) held the name
 *	first: strixpeer loaded without PeerDirect, netlink gives the reason
 *	naming the client, nothing is claimed, and buffers still work.
 * Both on a core with /sys/kernel/mm/memory_peers (memory_peers_sysfs=1:
 * OFED built where mm_kobj is exported). On a core without (OFED on 6.12
 * and later, the default there), names are not compared:
 *   SP_PEER_NAME=amdkfd SP_PEER_HOLDER=both
 *	the other client registered first and strixpeer second, both as
 *	amdkfd, in that order; no memory_peers directory; PeerDirect is
 *	active and a GPU buffer the other client declines is strixpeer's.
 */
#include "sp_test.h"
#include "dmabuf_util.h"
#include "peersim.h"

#include <sys/stat.h>

#define REG_LEN (4 * MiB)

static const char *name(void)
{
	const char *n = getenv("SP_PEER_NAME");

	return n && *n ? n : "strixpeer";
}

static int held_by_strixpeer(void)
{
	const char *h = getenv("SP_PEER_HOLDER");

	return !h || strcmp(h, "other") != 0;
}

/* Both clients registered under one name (a core without sysfs). */
static int both(void)
{
	const char *h = getenv("SP_PEER_HOLDER");

	return h && !strcmp(h, "both");
}

/*
 * The core's entries named @n, in registration order: how many, and the
 * flags of the first two (flags[1] is left alone when there is one).
 */
static unsigned int core_clients_named(const char *n, uint32_t flags[2])
{
	struct peersim_client cl[16];
	uint32_t count = 16;
	unsigned int found = 0;
	int fd = peersim_test_open();

	CHECK_OK(peersim_clients(fd, cl, &count));
	for (uint32_t i = 0; i < count && i < 16; i++) {
		if (strcmp(cl[i].name, n))
			continue;
		if (found < 2)
			flags[found] = cl[i].flags;
		found++;
	}
	close(fd);
	return found;
}

/* The exact check released RCCL makes, and who owns the directory. */
static void test_memory_peers_version_file(void)
{
	char path[256], line[64] = "", mine[32];
	uint32_t flags[2] = { 0, 0 };
	int sysfs = peersim_has_sysfs();
	struct sp_version v;
	struct stat st;
	FILE *f;

	CHECK(sysfs == 0 || sysfs == 1, "memory_peers_sysfs reads %d", sysfs);
	if (both()) {
		/* names are not compared, and nothing is published */
		CHECK(!sysfs, "SP_PEER_HOLDER=both on a core with sysfs");
		CHECK(stat("/sys/kernel/mm/memory_peers", &st) < 0 && errno == ENOENT,
		      "/sys/kernel/mm/memory_peers exists on a core without sysfs");
		CHECK(core_clients_named(name(), flags) == 2, "the core does not list '%s' twice",
		      name());
		CHECK(!(flags[0] & PEERSIM_CLIENT_EX) && (flags[1] & PEERSIM_CLIENT_EX),
		      "'%s' is not the other client's then strixpeer's (flags %#x, %#x)", name(),
		      flags[0], flags[1]);
		tap_diag("two clients named %s, the other's first; RCCL finds no "
			 "memory_peers/%s/version here and decides by its probe", name(), name());
		return;
	}
	CHECK(sysfs, "this case needs a core with sysfs (memory_peers_sysfs=1)");
	snprintf(path, sizeof(path), "/sys/kernel/mm/memory_peers/%s/version", name());
	f = fopen(path, "re");
	CHECK(f, "%s: %s", path, strerror(errno));
	CHECK(fgets(line, sizeof(line), f) && line[0] != '\n', "%s is empty", path);
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	CHECK(core_clients_named(name(), flags) == 1, "the core does not list '%s' once", name());
	CHECK_OK(sp_dev_version(sp_test_dev(), &v));
	snprintf(mine, sizeof(mine), "%u.%u.%u", v.module_major, v.module_minor, v.module_patch);
	if (held_by_strixpeer()) {
		/* strixpeer registers the extended form; ROCm's client does not */
		CHECK(flags[0] & PEERSIM_CLIENT_EX, "'%s' is not strixpeer's registration", name());
		CHECK(!strcmp(line, mine), "version '%s', strixpeer is %s", line, mine);
		if (strcmp(name(), "strixpeer"))
			CHECK(stat("/sys/kernel/mm/memory_peers/strixpeer", &st) < 0 && errno == ENOENT,
			      "memory_peers/strixpeer exists too");
	} else {
		CHECK(!(flags[0] & PEERSIM_CLIENT_EX), "'%s' is strixpeer's, not the other client's",
		      name());
		tap_diag("memory_peers/%s/version is the other client's: %s", name(), line);
	}
}

static void test_netlink_reports_the_name(void)
{
	struct sp_ctl *ctl;
	struct sp_info info = { .size = sizeof(info) };
	char want[96];

	CHECK(sp_ctl_open(&ctl) == 0, "%s", sp_errmsg());
	CHECK(sp_ctl_info(ctl, &info) == 0, "%s", sp_errmsg());
	sp_ctl_close(ctl);
	if (held_by_strixpeer()) {
		CHECK(info.features & SP_FEAT_PEERDIRECT, "PeerDirect inactive: %s",
		      info.peerdirect_reason);
		CHECK(!info.peerdirect_reason[0], "reason '%s' while active", info.peerdirect_reason);
		return;
	}
	CHECK(!(info.features & SP_FEAT_PEERDIRECT), "PeerDirect active though '%s' is taken",
	      name());
	snprintf(want, sizeof(want), "refused client '%s'", name());
	CHECK(strstr(info.peerdirect_reason, want), "reason '%s' does not say \"%s\"",
	      info.peerdirect_reason, want);
	tap_diag("netlink: %s", info.peerdirect_reason);
}

/*
 * A GPU buffer (vgem, mapped through its device: a PFN mapping) declared
 * with sp_import_dmabuf() and registered through the simulated core.
 */
static void test_gpu_registration(void)
{
	/* the per-client counters are in sysfs only; -1 without */
	int64_t before = both() ? -1 : peersim_peer_stat(name(), "num_alloc_mrs");
	struct peersim_reg_mr r;
	struct sp_import *imp;
	struct sp_xbuf x;
	uint8_t *src;
	int fd;

	sp_xbuf_new(SP_EXP_VGEM, REG_LEN, 1, &x);
	fd = peersim_test_open();
	CHECK(sp_import_dmabuf(sp_test_dev(), x.fd, 0, REG_LEN, x.map, &imp) == 0, "%s",
	      sp_errmsg());
	if (!held_by_strixpeer()) {
		CHECK_ERR(peersim_reg_mr(fd, x.map, REG_LEN, PEERSIM_ACCESS_WRITE, &r), EFAULT);
		CHECK(peersim_peer_stat(name(), "num_alloc_mrs") == before,
		      "the other '%s' client took a registration", name());
		goto out;
	}
	CHECK_OK(peersim_reg_mr(fd, x.map, REG_LEN, PEERSIM_ACCESS_WRITE, &r));
	CHECK(r.path == PEERSIM_PATH_PEER && !strcmp(r.client, name()),
	      "path %u, client '%s'", r.path, r.client);
	if (both()) {
		uint32_t flags[2] = { 0, 0 };
		struct peersim_client cl[16];
		uint32_t count = 16, mine = 0, other = 0, seen = 0;
		int cfd = peersim_test_open();

		/* claimed by strixpeer (extended form), not by the first amdkfd */
		CHECK(core_clients_named(name(), flags) == 2, "two '%s' clients", name());
		CHECK_OK(peersim_clients(cfd, cl, &count));
		close(cfd);
		for (uint32_t i = 0; i < count && i < 16; i++) {
			if (strcmp(cl[i].name, name()))
				continue;
			if (seen++ == 0)
				other = cl[i].live_mrs;
			else
				mine = cl[i].live_mrs;
		}
		CHECK(mine == 1 && other == 0, "live MRs: strixpeer's %u, the other's %u", mine,
		      other);
	} else {
		CHECK(peersim_peer_stat(name(), "num_alloc_mrs") == before + 1, "num_alloc_mrs");
	}
	src = malloc(REG_LEN);
	CHECK(src, "malloc");
	sp_fill(src, REG_LEN, 0, 13);
	CHECK_OK(peersim_dma_write(fd, r.handle, 0, src, REG_LEN));
	CHECK(sp_verify(x.map, REG_LEN, 0, 13) < 0, "the GPU mapping does not show the DMA");
	free(src);
	CHECK_OK(peersim_dereg_mr(fd, r.handle));
out:
	CHECK(sp_import_free(imp) == 0, "%s", sp_errmsg());
	close(fd);
	sp_xbuf_free(&x);
}

/* Buffers work whatever happened to the client. */
static void test_buffers_work(void)
{
	struct peersim_reg_mr r;
	struct sp_buf *buf;
	uint8_t *dst;
	int fd = peersim_test_open();

	CHECK(sp_buf_alloc(sp_test_dev(), REG_LEN, SP_NODE_DEFAULT, 0, &buf) == 0, "%s",
	      sp_errmsg());
	sp_fill(sp_buf_addr(buf), REG_LEN, 0, 21);
	CHECK_OK(peersim_reg_mr(fd, sp_buf_addr(buf), REG_LEN, PEERSIM_ACCESS_WRITE, &r));
	CHECK(r.path == PEERSIM_PATH_GUP, "a strixpeer buffer went path %u", r.path);
	dst = malloc(REG_LEN);
	CHECK(dst, "malloc");
	CHECK_OK(peersim_dma_read(fd, r.handle, 0, dst, REG_LEN));
	CHECK(sp_verify(dst, REG_LEN, 0, 21) < 0, "DMA read of a strixpeer buffer");
	free(dst);
	CHECK_OK(peersim_dereg_mr(fd, r.handle));
	CHECK(sp_buf_free(buf) == 0, "%s", sp_errmsg());
	close(fd);
	CHECK_NOTHING_PINNED();
}

static const struct tap_case cases[] = {
	TAP_CASE(test_memory_peers_version_file),
	TAP_CASE(test_netlink_reports_the_name),
	TAP_CASE(test_gpu_registration),
	TAP_CASE(test_buffers_work),
};

TAP_MAIN(cases)
