/* SPDX-License-Identifier: MIT */
/*
 * doctor-test's gpudirect cases: the peer-memory core and where it comes
 * from, the route per NIC, strixpeer's client, UCX's and RCCL's decisions.
 * Included once, by doctor-test.c, after dt.h.
 */
#include <zlib.h>
#ifndef SP_DOCTOR_TEST_DT_GPUDIRECT_H
#define SP_DOCTOR_TEST_DT_GPUDIRECT_H

/* mlx4 (ConnectX-3) takes host buffers only: never "GPU registration works" */
static void connectx3_gpu_paths_host_buffers_only(void)
{
	struct dr_ctx *c = run("oculink-cx3");
	const struct dr_result *r = expect(c, "gpudirect.nic", "mlx4_0", DR_INFO, "strixpeer buffers");

	summary_has(r, "host buffers only");
	summary_has(r, "not tried on hardware");
	summary_has(expect(c, "gpudirect.ucx", NULL, DR_INFO, NULL), "fails on every one");
	dr_ctx_free(c);
	c = run("healthy");
	summary_has(expect(c, "gpudirect.nic", "mlx5_0", DR_INFO, NULL), "PeerDirect");
	dr_ctx_free(c);
}

static void peer_client_named_strixpeer(void)
{
	struct dr_ctx *c = run("peer-strixpeer");

	expect(c, "gpudirect.client", "strixpeer", DR_WARN, "peer_client_name=amdkfd");
	expect(c, "gpudirect.core", NULL, DR_PASS, NULL);
	dr_ctx_free(c);
}

static void peer_client_named_amdkfd(void)
{
	struct dr_ctx *c = run("peer-amdkfd");

	expect(c, "gpudirect.client", "amdkfd", DR_PASS, NULL);
	dr_ctx_free(c);
}

static void peer_client_clash_with_rocm(void)
{
	struct dr_ctx *c = run("peer-clash");
	const struct dr_result *r = expect(c, "gpudirect.client", "amdkfd", DR_FAIL, "amdgpu-dkms");

	summary_has(r, "1.0");
	dr_ctx_free(c);
}

/* RCCL's view of the healthy node: a client in sysfs, a 6.18 config with both options */
static void rccl_healthy_peermem_and_dmabuf(void)
{
	struct dr_ctx *c = run("healthy");
	const struct dr_result *r;

	r = expect(c, "gpudirect.rccl_peermem", NULL, DR_PASS, NULL);
	summary_has(r, "/sys/kernel/mm/memory_peers/amdkfd/version");
	CHECK(!strcmp(obs_str(r, "client"), "amdkfd"), "client %s", obs_str(r, "client"));
	r = expect(c, "gpudirect.rccl_dmabuf", NULL, DR_PASS, NULL);
	CHECK(!strcmp(obs_str(r, "source"), "/boot/config-6.18.4-amd64"), "source %s",
	      obs_str(r, "source"));
	CHECK(obs_bool(r, "move_notify") && obs_bool(r, "p2pdma"), "both options");
	/* peer memory is preferred over dma-buf (rocm-systems PR #3607) */
	r = expect(c, "gpudirect.rccl", NULL, DR_INFO, "NCCL_NET_GDR_LEVEL=PHB");
	CHECK(!strcmp(obs_str(r, "route"), "peermem"), "route %s", obs_str(r, "route"));
	CHECK(!strcmp(obs_str(r, "route_if_pr11886"), "peermem"), "if merged %s",
	      obs_str(r, "route_if_pr11886"));
	CHECK(!strcmp(obs_str(r, "env"), "NCCL_NET_GDR_LEVEL=PHB"), "env %s", obs_str(r, "env"));
	summary_has(r, "not tried on hardware");
	dr_ctx_free(c);
}

/*
 * OFED's core on >= 6.4: in kallsyms, no memory_peers sysfs: RCCL as merged
 * sees no peer memory (dma-buf), the probe of PR #11886, if merged, would
 * find strixpeer's client; with no core neither
 */
static void rccl_core_without_sysfs_probes(void)
{
	struct dr_ctx *c = run("rccl-core-no-sysfs");
	const struct dr_result *r = expect(c, "gpudirect.rccl_peermem", NULL, DR_INFO, NULL);

	summary_has(r, "no memory_peers sysfs");
	summary_has(r, "PR #11886");
	summary_has(r, "PR #9540");
	CHECK(!obs_bool(r, "found") && obs_bool(r, "kallsyms_peer_api"), "core, no sysfs");
	r = find(c, "gpudirect.rccl", NULL);
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf"), "route %s", obs_str(r, "route"));
	CHECK(!strcmp(obs_str(r, "route_if_pr11886"), "peermem (probe)"), "if merged %s",
	      obs_str(r, "route_if_pr11886"));
	dr_ctx_free(c);
	c = run("rccl-no-core");
	r = expect(c, "gpudirect.rccl_peermem", NULL, DR_INFO, NULL);
	summary_has(r, "would fail too");
	CHECK(!obs_bool(r, "kallsyms_peer_api"), "no core");
	r = find(c, "gpudirect.rccl", NULL);
	CHECK(!strcmp(obs_str(r, "route_if_pr11886"), obs_str(r, "route")), "probe %s, route %s",
	      obs_str(r, "route_if_pr11886"), obs_str(r, "route"));
	dr_ctx_free(c);
}

/* 7.1: no CONFIG_DMABUF_MOVE_NOTIFY line, dma_buf_invalidate_mappings only */
static void rccl_kernel_7_1_dmabuf_forced(void)
{
	struct dr_ctx *c = run("rccl-kernel-7.1");
	const struct dr_result *r;

	r = expect(c, "gpudirect.rccl_dmabuf", NULL, DR_WARN, "RCCL_FORCE_ENABLE_DMABUF=1");
	summary_has(r, "CONFIG_DMABUF_MOVE_NOTIFY=y");
	summary_has(r, "dma_buf_invalidate_mappings");
	CHECK(!obs_bool(r, "kernel_ok") && obs_bool(r, "p2pdma"), "move-notify missing only");
	r = expect(c, "gpudirect.rccl", NULL, DR_INFO, "RCCL_FORCE_ENABLE_DMABUF=1 NCCL_NET_GDR_LEVEL=PHB");
	dr_ctx_free(c);
	/* no readable config: RCCL's kallsyms fallback */
	c = run("rccl-kallsyms-only");
	r = expect(c, "gpudirect.rccl_dmabuf", NULL, DR_PASS, NULL);
	CHECK(!strcmp(obs_str(r, "source"), "/proc/kallsyms"), "source %s", obs_str(r, "source"));
	dr_ctx_free(c);
}

/* /proc/config.gz read with zlib, as RCCL reads it with zcat; a truncated one is skipped */
static void rccl_config_gz(void)
{
	struct dr_ctx *c = run("rccl-config-gz");
	const struct dr_result *r;

	r = expect(c, "gpudirect.rccl_dmabuf", NULL, DR_PASS, NULL);
	CHECK(!strcmp(obs_str(r, "source"), "/proc/config.gz"), "source %s", obs_str(r, "source"));
	CHECK(obs_bool(r, "kernel_ok") && obs_bool(r, "move_notify") && obs_bool(r, "p2pdma"),
	      "config.gz bits");
	summary_has(r, "/proc/config.gz");
	dr_ctx_free(c);
	c = run("rccl-config-gz-truncated");
	r = expect(c, "gpudirect.rccl_dmabuf", NULL, DR_WARN, "RCCL_FORCE_ENABLE_DMABUF=1");
	CHECK(!strcmp(obs_str(r, "source"), "/boot/config-6.18.4-amd64"), "source %s",
	      obs_str(r, "source"));
	CHECK(obs_bool(r, "move_notify") && !obs_bool(r, "p2pdma"), "boot config bits");
	dr_ctx_free(c);
}

/* A private copy of @fixture whose libucx0 Debian changelog says @version. */
static struct dr_ctx *run_with_ucx(const char *fixture, const char *version, char *root, size_t len)
{
	char path[PATH_MAX + 64];
	gzFile z;
	static const char *const dirs[] = { "usr", "usr/share", "usr/share/doc", "usr/share/doc/libucx0" };

	copy_fixture(fixture, root, len);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		dr_fmt(path, sizeof(path), "%s/%s", root, dirs[i]);
		CHECK(mkdir(path, 0755) == 0 || errno == EEXIST, "%s: %s", path, strerror(errno));
	}
	dr_fmt(path, sizeof(path), "%s/usr/share/doc/libucx0/changelog.Debian.gz", root);
	z = gzopen(path, "wb");
	CHECK(z && gzprintf(z, "ucx (%s) unstable; urgency=medium\n", version) > 0 &&
	      gzclose(z) == Z_OK, "%s", path);
	return run(root);
}

/*
 * UCX with /dev/kfd: before 1.23 plain ibv_reg_mr (a peer client or
 * nothing), from 1.23 dma-buf where its kernel test passes and the NIC
 * takes dma-buf MRs (strixpeer not needed); INFO without /dev/kfd
 */
static void ucx_needs_a_peer_client(void)
{
	struct dr_ctx *c = run("healthy");
	const struct dr_result *r;
	char root[PATH_MAX];

	r = expect(c, "gpudirect.ucx", NULL, DR_PASS, NULL);
	summary_has(r, "read from UCX's code, not tried on hardware");
	CHECK(obs_bool(r, "kfd") && obs_bool(r, "peer_client"), "observed");
	dr_ctx_free(c);
	/* no client, version unknown: 1.23 would take dma-buf, older would fail */
	c = run("rccl-no-core");
	r = expect(c, "gpudirect.ucx", NULL, DR_INFO, "ucx_info -v");
	summary_has(r, "strixpeer is not needed for them on this node");
	CHECK(strstr(r->advice, "UCX_ROCM_COPY_DMABUF=y") && strstr(r->advice, "libstrixpeer-preload"),
	      "%s", r->advice);
	CHECK(!obs_bool(r, "peer_client") && obs_bool(r, "dmabuf_kernel_test"), "no client, test ok");
	dr_ctx_free(c);
	/* the same node with UCX 1.13 (Debian 12's): WARN; with 1.23: PASS */
	c = run_with_ucx("rccl-no-core", "1.13.1-1", root, sizeof(root));
	r = expect(c, "gpudirect.ucx", NULL, DR_WARN, "upgrade UCX to 1.23");
	summary_has(r, "registrations of hipMalloc memory fail");
	CHECK(strstr(r->advice, "UCX_IB_GPU_DIRECT_RDMA=no"), "%s", r->advice);
	dr_ctx_free(c);
	remove_copy(root);
	c = run_with_ucx("rccl-no-core", "1.23.0-1", root, sizeof(root));
	r = expect(c, "gpudirect.ucx", NULL, DR_PASS, NULL);
	summary_has(r, "strixpeer is not needed for UCX on this node");
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf"), "route %s", obs_str(r, "route"));
	CHECK(!strncmp(obs_str(r, "version"), "1.23", 4), "version %s", obs_str(r, "version"));
	dr_ctx_free(c);
	remove_copy(root);
	c = run("rccl-core-no-sysfs");
	summary_has(expect(c, "gpudirect.ucx", NULL, DR_INFO, "ucx_info -v"),
		    "cannot be told from files");
	dr_ctx_free(c);
	c = run("no-gpu");
	r = expect(c, "gpudirect.ucx", NULL, DR_INFO, NULL);
	summary_has(r, "no /dev/kfd");
	CHECK(!obs_bool(r, "kfd"), "kfd");
	dr_ctx_free(c);
}

/*
 * The seed's ConnectX-3 node (host buffers only): no advice that cannot
 * help: no NCCL_NET_GDR_LEVEL=PHB, no OFED, no client name; RCCL, which
 * sees strixpeer's client, is told to turn GPU Direct RDMA off
 */
static void seed_002_connectx3_no_advice_that_cannot_help(void)
{
	struct dr_ctx *c = run("oculink-cx3");
	const struct dr_result *r = expect(c, "gpudirect.rccl", NULL, DR_WARN, "NCCL_NET_GDR_LEVEL=LOC");

	CHECK(strcmp(obs_str(r, "route"), "dma-buf"), "route %s", obs_str(r, "route"));
	CHECK(!strcmp(obs_str(r, "env"), "NCCL_NET_GDR_LEVEL=LOC"), "env %s", obs_str(r, "env"));
	r = expect(c, "gpudirect.route", "mlx4_0", DR_INFO, "sp_buf_alloc");
	CHECK(!strcmp(obs_str(r, "route"), "host") &&
	      !strcmp(obs_str(r, "route_without_strixpeer"), "host staging"), "routes %s, %s",
	      obs_str(r, "route"), obs_str(r, "route_without_strixpeer"));
	r = expect(c, "gpudirect.client", "strixpeer", DR_PASS, NULL);
	CHECK(!r->advice, "client advice on a node without a peer NIC: %s", r->advice);
	for (size_t i = 0; i < c->nres; i++) {
		const char *a = c->res[i].advice ? c->res[i].advice : "";

		CHECK(strcmp(c->res[i].id, "gpudirect.rccl_level"), "rccl_level for %s",
		      c->res[i].subject);
		CHECK(!strstr(a, "NCCL_NET_GDR_LEVEL=PHB") && !strstr(a, "DOCA-OFED") &&
		      !strstr(a, "peer_client_name"), "%s %s advises: %s", c->res[i].id,
		      c->res[i].subject, a);
	}
	dr_ctx_free(c);
}

/* seed-001: Ubuntu 24.04, linux-hwe-7.0 generic, ConnectX-7: no core anywhere */
static void route_ubuntu_generic_no_core(void)
{
	struct dr_ctx *c = run("ubuntu-hwe-cx7");
	const struct dr_result *r = expect(c, "gpudirect.core", NULL, DR_INFO, "DOCA-OFED for Ubuntu 24.04");

	summary_has(r, "7.0.0-15-generic");
	CHECK(!strcmp(obs_str(r, "kernel_flavour"), "ubuntu-generic") && !obs_bool(r, "ofed") &&
	      !obs_bool(r, "kallsyms_peer_api"), "facts");
	CHECK(strstr(r->advice, "since 6.8") && strstr(r->advice, "linux-nvidia") &&
	      strstr(r->advice, "44425"), "%s", r->advice);
	r = expect(c, "gpudirect.route", "mlx5_0", DR_INFO, "sp_reg_mr()");
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf") &&
	      !strcmp(obs_str(r, "route_without_strixpeer"), "dma-buf"), "route %s",
	      obs_str(r, "route"));
	CHECK(strstr(r->advice, "DOCA-OFED") && strstr(r->advice, "LD_PRELOAD"), "%s", r->advice);
	summary_has(r, "EFAULT");
	/* UCX 1.16 from dpkg: plain ibv_reg_mr without a client */
	r = expect(c, "gpudirect.ucx", NULL, DR_WARN, "UCX_IB_GPU_DIRECT_RDMA=no");
	CHECK(!strncmp(obs_str(r, "version"), "1.16", 4), "version %s", obs_str(r, "version"));
	r = find(c, "gpudirect.rccl", NULL);
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf") &&
	      !strcmp(obs_str(r, "route_if_pr11886"), "dma-buf"), "rccl %s / %s",
	      obs_str(r, "route"), obs_str(r, "route_if_pr11886"));
	summary_has(r, "strixpeer is not needed for RCCL");
	dr_ctx_free(c);
}

/* the same node with DOCA-OFED: OFED's core in ib_uverbs, no sysfs */
static void route_ubuntu_doca_ofed_core(void)
{
	struct dr_ctx *c = run("ubuntu-hwe-cx7-doca");
	const struct dr_result *r = expect(c, "gpudirect.core", NULL, DR_PASS, NULL);
	char root[PATH_MAX];

	CHECK(obs_bool(r, "ofed") && obs_bool(r, "kallsyms_peer_api") &&
	      strstr(obs_str(r, "ofed_path"), "ofa_kernel"), "ofed %s", obs_str(r, "ofed_path"));
	summary_has(r, "no memory_peers sysfs");
	r = expect(c, "gpudirect.route", "mlx5_0", DR_PASS, NULL);
	CHECK(!strcmp(obs_str(r, "route"), "peerdirect") &&
	      !strcmp(obs_str(r, "route_without_strixpeer"), "dma-buf"), "route %s",
	      obs_str(r, "route"));
	summary_has(r, "mori");
	summary_has(expect(c, "gpudirect.client", "strixpeer", DR_INFO, "strixpeerctl status"),
		    "cannot be told from files");
	r = find(c, "gpudirect.rccl", NULL);
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf") &&
	      !strcmp(obs_str(r, "route_if_pr11886"), "peermem (probe)"), "rccl %s / %s",
	      obs_str(r, "route"), obs_str(r, "route_if_pr11886"));
	dr_ctx_free(c);
	/* OFED installed, its ib_uverbs not loaded (kallsyms lists loaded modules only) */
	copy_fixture("ubuntu-hwe-cx7-doca", root, sizeof(root));
	write_file(root, "proc/kallsyms", "ffffffff81000000 T _stext");
	c = run(root);
	r = expect(c, "gpudirect.core", NULL, DR_INFO, "modprobe ib_uverbs");
	CHECK(obs_bool(r, "ofed") && !obs_bool(r, "kallsyms_peer_api"), "ofed, no symbol");
	CHECK(!strstr(r->advice, "install NVIDIA's DOCA-OFED"), "%s", r->advice);
	r = expect(c, "gpudirect.route", "mlx5_0", DR_INFO, "modprobe ib_uverbs");
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf"), "route %s", obs_str(r, "route"));
	dr_ctx_free(c);
	remove_copy(root);
}

/* Ubuntu's linux-nvidia kernel: its own core */
static void route_ubuntu_nvidia_core(void)
{
	struct dr_ctx *c = run("ubuntu-nvidia");
	const struct dr_result *r = expect(c, "gpudirect.core", NULL, DR_PASS, NULL);

	CHECK(!strcmp(obs_str(r, "kernel_flavour"), "ubuntu-nvidia") && !obs_bool(r, "ofed") &&
	      obs_bool(r, "kallsyms_peer_api"), "facts %s", obs_str(r, "kernel_flavour"));
	r = expect(c, "gpudirect.route", "mlx5_0", DR_PASS, NULL);
	CHECK(!strcmp(obs_str(r, "route"), "peerdirect"), "route %s", obs_str(r, "route"));
	dr_ctx_free(c);
}

/* Fedora 43, ConnectX-4 Lx: no core, no OFED advice, dma-buf is the route */
static void route_fedora_no_core(void)
{
	struct dr_ctx *c = run("fedora43-cx4lx");
	const struct dr_result *r = expect(c, "gpudirect.core", NULL, DR_INFO, NULL);

	CHECK(!strcmp(obs_str(r, "kernel_flavour"), "fedora"), "flavour %s",
	      obs_str(r, "kernel_flavour"));
	CHECK(!r->advice, "core advice on Fedora: %s", r->advice);
	r = expect(c, "gpudirect.route", "mlx5_0", DR_INFO, "sp_reg_mr()");
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf"), "route %s", obs_str(r, "route"));
	CHECK(strstr(r->advice, "Fedora") && !strstr(r->advice, "install NVIDIA's DOCA-OFED"),
	      "%s", r->advice);
	summary_has(expect(c, "gpudirect.ucx", NULL, DR_INFO, NULL), "strixpeer is not needed");
	dr_ctx_free(c);
}

/* /proc/kallsyms is read once, in one pass, for gpudirect.core and RCCL's tests alike */
static void kallsyms_read_once(void)
{
	char root[PATH_MAX], path[PATH_MAX + 32];
	struct dr_ctx *c;

	copy_fixture("rccl-kallsyms-only", root, sizeof(root));
	c = run(root);
	CHECK(c->kallsyms_read, "kallsyms not cached");
	CHECK(c->kallsyms == (DR_KS_PEER_API | DR_KS_MOVE_NOTIFY | DR_KS_P2PDMA), "bits %#x",
	      c->kallsyms);
	expect(c, "gpudirect.core", NULL, DR_PASS, NULL);
	CHECK(obs_bool(find(c, "gpudirect.rccl_peermem", NULL), "kallsyms_peer_api"), "peer api");
	/* a second ask does not read the file again */
	dr_fmt(path, sizeof(path), "%s/proc/kallsyms", root);
	CHECK(unlink(path) == 0, "%s: %s", path, strerror(errno));
	CHECK(dr_kallsyms(c) == c->kallsyms && c->kallsyms > 0, "read again: %d", dr_kallsyms(c));
	/* another sysroot: read afresh (now missing: -ENOENT) */
	CHECK(dr_ctx_set_sysroot(c, root) == 0 && dr_kallsyms(c) == -ENOENT, "%d", dr_kallsyms(c));
	dr_ctx_free(c);
	remove_copy(root);
}

#endif /* SP_DOCTOR_TEST_DT_GPUDIRECT_H */
