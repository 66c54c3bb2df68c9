// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor against fake node trees (host test, TAP; built with
 * ASan and UBSan): one tree per situation from tests/doctor/mkfixtures.sh,
 * each asserting the exact status of the check it is about and that the
 * advice names the fix; broken trees (garbage, huge and unreadable
 * attributes) give SKIP/INFO and never a crash; then the command line:
 * JSON valid for every tree (validated with python3's json module),
 * exit codes, bad --sysroot/--only, --compare of reports, valgrind.
 *
 *   doctor-test [FIXTURE_DIR]   (run from the repository root; default
 *                                build/doctor-fixtures, regenerated)
 */
#include "tap.h"

#include <limits.h>
#include <sys/stat.h>

#include "doctor.h"

static char fx[PATH_MAX] = "build/doctor-fixtures";
static const char *ctl = "build/strixpeerctl";
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void no_wait(void *arg)
{
	(void)arg;
}

static struct dr_ctx *run_hook(const char *fixture, void (*hook)(void *), void *arg)
{
	struct dr_ctx *c = calloc(1, sizeof(*c));
	char root[PATH_MAX];
	int ret;

	CHECK(c, "calloc");
	dr_ctx_init(c);
	if (strchr(fixture, '/'))
		snprintf(root, sizeof(root), "%s", fixture);
	else
		dr_fmt(root, sizeof(root), "%s/%s", fx, fixture);
	ret = dr_ctx_set_sysroot(c, root);
	CHECK(ret == 0, "sysroot %s: %s", root, strerror(-ret));
	CHECK(!c->live, "a fixture must not count as the live system");
	c->between_samples = hook;
	c->hook_arg = arg;
	dr_run(c);
	return c;
}

static struct dr_ctx *run(const char *fixture)
{
	return run_hook(fixture, no_wait, NULL);
}

static const struct dr_result *find(const struct dr_ctx *c, const char *id, const char *subj)
{
	for (size_t i = 0; i < c->nres; i++)
		if (!strcmp(c->res[i].id, id) && (!subj || !strcmp(c->res[i].subject, subj)))
			return &c->res[i];
	tap_fail(__FILE__, __LINE__, "find", "no result %s%s%s", id, subj ? " for " : "",
		 subj ? subj : "");
}

/* The result must have @st, and its advice (or summary) must contain @text. */
static const struct dr_result *expect(const struct dr_ctx *c, const char *id, const char *subj,
				      enum dr_status st, const char *advice)
{
	const struct dr_result *r = find(c, id, subj);

	CHECK(r->status == st, "%s %s: status %s, expected %s (%s)", id, r->subject,
	      dr_status_name(r->status), dr_status_name(st), r->summary);
	if (advice)
		CHECK(r->advice && strstr(r->advice, advice),
		      "%s %s: advice does not name \"%s\": %s", id, r->subject, advice,
		      r->advice ? r->advice : "(none)");
	if (st >= DR_WARN)
		CHECK(r->advice && r->advice[0], "%s %s is %s without advice", id, r->subject,
		      dr_status_name(st));
	return r;
}

static void summary_has(const struct dr_result *r, const char *text)
{
	CHECK(strstr(r->summary, text), "%s %s: summary lacks \"%s\": %s", r->id, r->subject,
	      text, r->summary);
}

static int64_t obs_int(const struct dr_result *r, const char *key)
{
	const struct dr_val *v = dr_get(r, key);

	CHECK(v && v->type == DR_V_INT, "%s %s: no integer \"%s\" observed", r->id, r->subject, key);
	return v->i;
}

static const char *obs_str(const struct dr_result *r, const char *key)
{
	const struct dr_val *v = dr_get(r, key);

	CHECK(v && v->type == DR_V_STR, "%s %s: no string \"%s\" observed", r->id, r->subject, key);
	return v->s;
}

static bool obs_bool(const struct dr_result *r, const char *key)
{
	const struct dr_val *v = dr_get(r, key);

	CHECK(v && v->type == DR_V_BOOL, "%s %s: no boolean \"%s\" observed", r->id, r->subject, key);
	return v->i;
}

static void no_warn_or_fail(const struct dr_ctx *c)
{
	for (size_t i = 0; i < c->nres; i++)
		CHECK(c->res[i].status < DR_WARN, "%s %s is %s: %s", c->res[i].id, c->res[i].subject,
		      dr_status_name(c->res[i].status), c->res[i].summary);
}

static void healthy_two_port_node_all_pass(void)
{
	struct dr_ctx *c = run("healthy");

	no_warn_or_fail(c);
	CHECK(dr_exit_status(c) == 0, "exit %d", dr_exit_status(c));
	expect(c, "rdma.port", "mlx5_0/1", DR_PASS, NULL);
	expect(c, "rdma.port", "mlx5_1/1", DR_PASS, NULL);
	expect(c, "pcie.link", "mlx5_0 0000:01:00.0", DR_PASS, NULL);
	CHECK(obs_int(expect(c, "mtu.roce", "mlx5_1/1", DR_PASS, NULL), "rdma_mtu") == 4096, "mtu");
	expect(c, "memory.memlock", NULL, DR_PASS, NULL);
	expect(c, "gpu.driver", NULL, DR_PASS, NULL);
	expect(c, "gpu.kernel", NULL, DR_PASS, NULL);
	expect(c, "gpu.carveout", NULL, DR_PASS, NULL);
	expect(c, "gpu.gtt", NULL, DR_PASS, NULL);
	expect(c, "gpudirect.client", "amdkfd", DR_PASS, NULL);
	expect(c, "counters.errors", "mlx5_0/1", DR_PASS, NULL);
	expect(c, "strixpeer.module", NULL, DR_PASS, NULL);
	expect(c, "strixpeer.install", "6.18.4-amd64", DR_PASS, NULL);
	expect(c, "strixpeer.install", "6.18.3-amd64", DR_PASS, NULL);
	expect(c, "strixpeer.device", NULL, DR_PASS, NULL);
	/* GPU and NIC meet at the host bridge: the RCCL setting, as information */
	expect(c, "gpudirect.rccl_level", NULL, DR_INFO, "NCCL_NET_GDR_LEVEL=PHB");
	/* what needs the live system says so */
	summary_has(expect(c, "strixpeer.abi", NULL, DR_SKIP, NULL), "live");
	dr_ctx_free(c);
}

/* The seed: ConnectX-3 (Gen3 x8) trained x4 behind an M.2/Oculink adapter. */
static void connectx3_x4_behind_oculink(void)
{
	struct dr_ctx *c = run("oculink-cx3");
	const struct dr_result *r = expect(c, "pcie.link", "mlx4_0 0000:03:00.0", DR_WARN, "x8");

	summary_has(r, "8.0 GT/s x4");
	summary_has(r, "31.504 Gb/s");
	summary_has(r, "slot/adapter");
	summary_has(r, "0000:00:01.2");
	summary_has(r, "Oculink");
	CHECK(obs_int(r, "usable_mbps") == 31504 && obs_int(r, "port_rate_mbps") == 56000,
	      "usable %lld port %lld", (long long)obs_int(r, "usable_mbps"),
	      (long long)obs_int(r, "port_rate_mbps"));
	CHECK(obs_int(r, "slot_max_width") == 4, "slot width");
	expect(c, "rdma.port", "mlx4_0/1", DR_PASS, NULL);
	CHECK(dr_exit_status(c) == 1, "exit %d", dr_exit_status(c));
	dr_ctx_free(c);
}

/* ConnectX-7 (Gen5 x16, NDR) at Gen4 x4 behind Oculink: works, slower: WARN */
static void connectx7_x4_behind_oculink_is_warn(void)
{
	struct dr_ctx *c = run("oculink-cx7");
	const struct dr_result *r = expect(c, "pcie.link", "mlx5_0 0000:03:00.0", DR_WARN, "x16");

	summary_has(r, "16.0 GT/s x4");
	summary_has(r, "63.012 Gb/s");
	CHECK(obs_int(r, "usable_mbps") == 63012 && obs_int(r, "port_rate_mbps") == 400000,
	      "usable %lld port %lld", (long long)obs_int(r, "usable_mbps"),
	      (long long)obs_int(r, "port_rate_mbps"));
	for (size_t i = 0; i < c->nres; i++)
		CHECK(strcmp(c->res[i].check, "pcie") || c->res[i].status != DR_FAIL,
		      "pcie FAIL: %s", c->res[i].summary);
	dr_ctx_free(c);
}

/* Accepted findings: from the sysroot's doctor.conf and from --accept. */
static void accepted_warn_is_info_still_printed(void)
{
	struct dr_ctx *c = run("oculink-cx7-accepted");
	const struct dr_result *r;

	CHECK(dr_accept_file(c, "/etc/strixpeer/doctor.conf") == 0, "doctor.conf");
	dr_apply_accepted(c);
	r = expect(c, "pcie.link", "mlx5_0 0000:03:00.0", DR_INFO, NULL);
	summary_has(r, "63.012 Gb/s");
	summary_has(r, "accepted: pcie.link=0000:03:00.0");
	CHECK(dr_get(r, "accepted"), "no accepted value");
	dr_ctx_free(c);
	/* another subject is not accepted; the id alone accepts every one */
	c = run("oculink-cx7");
	dr_accept_add(c, "pcie.link=0000:99:00.0");
	dr_apply_accepted(c);
	expect(c, "pcie.link", "mlx5_0 0000:03:00.0", DR_WARN, NULL);
	dr_accept_add(c, "pcie.link");
	dr_apply_accepted(c);
	expect(c, "pcie.link", "mlx5_0 0000:03:00.0", DR_INFO, NULL);
	dr_ctx_free(c);
	/* the command line: exit 0 once the only WARN is accepted */
	CHECK(sh("%s doctor --sysroot %s/oculink-cx7 --only pcie > /dev/null", ctl, fx) == 1,
	      "not WARN");
	CHECK(sh("%s doctor --sysroot %s/oculink-cx7 --only pcie --accept pcie.link > /dev/null",
		 ctl, fx) == 0, "--accept");
	CHECK(sh("%s doctor --sysroot %s/oculink-cx7-accepted --only pcie > /dev/null", ctl, fx) == 0,
	      "doctor.conf");
	CHECK(sh("%s doctor --sysroot %s/oculink-cx7-accepted --only pcie | grep -q 'accepted: pcie.link'",
		 ctl, fx) == 0, "accepted finding not printed");
}

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

static void pcie_switch_uplink_is_the_bottleneck(void)
{
	struct dr_ctx *c = run("pcie-switch");
	const struct dr_result *r = expect(c, "pcie.link", "mlx5_0 0000:12:00.0", DR_WARN,
					   "0000:10:00.0");

	summary_has(r, "bridge 0000:10:00.0 runs at 8.0 GT/s x4");
	CHECK(obs_int(r, "usable_mbps") == 31504 && obs_int(r, "port_rate_mbps") == 40000, "numbers");
	dr_ctx_free(c);
}

static void pcie_downgraded_but_enough_is_info(void)
{
	struct dr_ctx *c = run("pcie-enough");

	expect(c, "pcie.link", "mlx5_0 0000:01:00.0", DR_INFO, "nothing lost");
	dr_ctx_free(c);
}

static void ib_port_init_without_sm(void)
{
	struct dr_ctx *c = run("ib-no-sm");
	const struct dr_result *r = expect(c, "rdma.port", "mlx4_0/1", DR_FAIL, "opensm");

	CHECK(strstr(r->advice, "needed even back to back"), "%s", r->advice);
	summary_has(r, "sm_lid 0x0");
	CHECK(dr_exit_status(c) == 2, "exit %d", dr_exit_status(c));
	dr_ctx_free(c);
}

static void ib_port_polling_no_cable(void)
{
	struct dr_ctx *c = run("ib-polling");

	expect(c, "rdma.port", "mlx4_0/1", DR_FAIL, "cable");
	dr_ctx_free(c);
}

static void roce_mtu_1500_warns(void)
{
	struct dr_ctx *c = run("mtu-1500");
	const struct dr_result *r = expect(c, "mtu.roce", "mlx5_0/1", DR_WARN,
					   "ip link set enp1s0f0np0 mtu 9000");

	CHECK(obs_int(r, "rdma_mtu") == 1024 && obs_int(r, "netdev_mtu") == 1500, "mtus");
	CHECK(strstr(r->advice, "switch"), "advice does not mention the switch: %s", r->advice);
	dr_ctx_free(c);
}

static void roce_mtu_9000_passes(void)
{
	struct dr_ctx *c = run("mtu-9000");
	const struct dr_result *r = expect(c, "mtu.roce", "mlx5_0/1", DR_PASS, NULL);

	CHECK(obs_int(r, "rdma_mtu") == 4096, "rdma mtu %lld", (long long)obs_int(r, "rdma_mtu"));
	dr_ctx_free(c);
}

/* 4176 = 4096 + 80 is enough for Soft-RoCE, not for hardware RoCE (+96) */
static void mtu_overhead_rxe_80_hw_96(void)
{
	struct dr_ctx *c = run("mtu-edge");

	CHECK(obs_int(expect(c, "mtu.roce", "rxe0/1", DR_PASS, NULL), "rdma_mtu") == 4096, "rxe");
	CHECK(obs_int(expect(c, "mtu.roce", "mlx5_0/1", DR_WARN, "4192"), "rdma_mtu") == 2048,
	      "mlx5");
	dr_ctx_free(c);
}

static void memlock_64k_fails(void)
{
	struct dr_ctx *c = run("memlock-64k");
	const struct dr_result *r = expect(c, "memory.memlock", NULL, DR_FAIL, "memlock unlimited");

	CHECK(strstr(r->advice, "LimitMEMLOCK=infinity") && strstr(r->advice, "--ulimit memlock=-1"),
	      "advice lacks the service/container fixes: %s", r->advice);
	summary_has(r, "64 KiB");
	dr_ctx_free(c);
}

/* what services and containers get: systemd's default, drop-ins, docker, containerd */
static void memlock_services_and_containers(void)
{
	struct dr_ctx *c = run("services-default"), *c2;
	const struct dr_result *r, *m;

	r = expect(c, "memory.services", "", DR_WARN, "LimitMEMLOCK=infinity in the unit");
	summary_has(r, "8 MiB");
	summary_has(r, "systemd's default");
	CHECK(strstr(r->advice, "DefaultLimitMEMLOCK=infinity under [Manager] in /etc/systemd/system.conf.d/memlock.conf"),
	      "%s", r->advice);
	CHECK(obs_int(r, "memlock") == 8 << 20 && !strcmp(obs_str(r, "default_limit_memlock"), ""),
	      "observed");
	dr_ctx_free(c);
	/* the same recipe text as memory.memlock's */
	c = run("memlock-64k");
	c2 = run("services-default");
	m = find(c, "memory.memlock", NULL);
	r = find(c2, "memory.services", "");
	CHECK(m->advice && strstr(m->advice, r->advice), "memlock: %s / services: %s", m->advice,
	      r->advice);
	dr_ctx_free(c2);
	dr_ctx_free(c);
	c = run("services-dropin");
	r = expect(c, "memory.services", "", DR_PASS, NULL);
	CHECK(!strcmp(obs_str(r, "source"), "/etc/systemd/system.conf.d/memlock.conf"), "source %s",
	      obs_str(r, "source"));
	CHECK(dr_get(r, "memlock")->type == DR_V_NULL, "unlimited is null");
	dr_ctx_free(c);
	c = run("docker-default");
	expect(c, "memory.services", "", DR_WARN, NULL);
	r = expect(c, "memory.services", "docker", DR_WARN, "--ulimit memlock=-1:-1");
	CHECK(strstr(r->advice, "\"default-ulimits\": {\"memlock\": {\"Name\": \"memlock\", \"Soft\": -1, \"Hard\": -1}}"),
	      "%s", r->advice);
	summary_has(r, "8 MiB");
	r = expect(c, "memory.services", "containerd", DR_WARN, "systemctl edit containerd");
	CHECK(obs_int(r, "memlock") == 8 << 20, "containerd memlock");
	dr_ctx_free(c);
	c = run("docker-ulimits");
	r = expect(c, "memory.services", "docker", DR_PASS, NULL);
	CHECK(dr_get(r, "memlock")->type == DR_V_NULL, "docker -1 is null");
	r = expect(c, "memory.services", "containerd", DR_INFO, NULL);
	CHECK(obs_int(r, "memlock") == 2LL << 30, "2G soft");
	summary_has(r, "/etc/systemd/system/containerd.service.d/memlock.conf");
	dr_ctx_free(c);
	c = run("healthy");
	expect(c, "memory.services", "", DR_PASS, NULL);
	dr_ctx_free(c);
}

static void memlock_unlimited_passes(void)
{
	struct dr_ctx *c = run("memlock-unlimited");

	expect(c, "memory.memlock", NULL, DR_PASS, NULL);
	dr_ctx_free(c);
}

static void strix_halo_on_6_12_too_old(void)
{
	struct dr_ctx *c = run("strix-6.12");

	summary_has(expect(c, "gpu.kernel", NULL, DR_WARN, "6.18.4"), "gfx1151");
	dr_ctx_free(c);
}

static void strix_halo_96g_carveout(void)
{
	struct dr_ctx *c = run("strix-96g");
	const struct dr_result *r = expect(c, "gpu.carveout", NULL, DR_WARN, "512 MB");

	CHECK(strstr(r->advice, "pages_limit"), "advice lacks ttm.pages_limit: %s", r->advice);
	summary_has(r, "96 GiB");
	expect(c, "gpu.kernel", NULL, DR_PASS, NULL);
	dr_ctx_free(c);
}

static void other_apu_carveout(void)
{
	struct dr_ctx *c = run("phoenix-8g");

	summary_has(expect(c, "gpu.carveout", "0000:c5:00.0 AMD APU", DR_WARN, "512 MB"), "8 GiB");
	for (size_t i = 0; i < c->nres; i++)
		CHECK(strcmp(c->res[i].id, "gpu.kernel"), "gfx1151 rule applied to a Phoenix APU");
	dr_ctx_free(c);
}

static void amdgpu_gttsize_deprecated(void)
{
	struct dr_ctx *c = run("gttsize");

	expect(c, "gpu.gttsize", NULL, DR_WARN, "ttm.pages_limit");
	expect(c, "gpu.gtt", NULL, DR_WARN, "amdgpu.gttsize");
	dr_ctx_free(c);
}

static void amd_iommu_off_warns(void)
{
	struct dr_ctx *c = run("amd-iommu-off");

	summary_has(expect(c, "iommu.mode", NULL, DR_WARN, "iommu=pt"), "amd_iommu=off");
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
	r = expect(c, "gpudirect.rccl", NULL, DR_INFO, "NCCL_NET_GDR_LEVEL=PHB");
	CHECK(!strcmp(obs_str(r, "route"), "dma-buf"), "route %s", obs_str(r, "route"));
	CHECK(!strcmp(obs_str(r, "env"), "NCCL_NET_GDR_LEVEL=PHB"), "env %s", obs_str(r, "env"));
	summary_has(r, "not tried on hardware");
	dr_ctx_free(c);
}

/* OFED's core on >= 6.4: in kallsyms, no memory_peers sysfs; RCCL probes */
static void rccl_core_without_sysfs_probes(void)
{
	struct dr_ctx *c = run("rccl-core-no-sysfs");
	const struct dr_result *r = expect(c, "gpudirect.rccl_peermem", NULL, DR_INFO, NULL);

	summary_has(r, "no memory_peers sysfs");
	summary_has(r, "probe alone");
	CHECK(!obs_bool(r, "found") && obs_bool(r, "kallsyms_peer_api"), "core, no sysfs");
	dr_ctx_free(c);
	c = run("rccl-no-core");
	r = expect(c, "gpudirect.rccl_peermem", NULL, DR_INFO, NULL);
	summary_has(r, "probe fails");
	CHECK(!obs_bool(r, "kallsyms_peer_api"), "no core");
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

/* UCX with /dev/kfd: PASS with a peer client, WARN without one, INFO without /dev/kfd */
static void ucx_needs_a_peer_client(void)
{
	struct dr_ctx *c = run("healthy");
	const struct dr_result *r;

	r = expect(c, "gpudirect.ucx", NULL, DR_PASS, NULL);
	summary_has(r, "read from UCX's code, not tried on hardware");
	CHECK(obs_bool(r, "kfd") && obs_bool(r, "peer_client"), "observed");
	dr_ctx_free(c);
	c = run("rccl-no-core");
	r = expect(c, "gpudirect.ucx", NULL, DR_WARN, "UCX_IB_GPU_DIRECT_RDMA=no");
	summary_has(r, "registrations of hipMalloc memory fail");
	CHECK(strstr(r->advice, "UCX_ROCM_COPY_DMABUF=y") && strstr(r->advice, "strixpeer buffers"),
	      "%s", r->advice);
	CHECK(!obs_bool(r, "peer_client"), "no client");
	dr_ctx_free(c);
	c = run("rccl-core-no-sysfs");
	summary_has(expect(c, "gpudirect.ucx", NULL, DR_INFO, "strixpeerctl status"),
		    "cannot be told from files");
	dr_ctx_free(c);
	c = run("no-gpu");
	r = expect(c, "gpudirect.ucx", NULL, DR_INFO, NULL);
	summary_has(r, "no /dev/kfd");
	CHECK(!obs_bool(r, "kfd"), "kfd");
	dr_ctx_free(c);
}

/* host buffers only (ConnectX-3): the failing dma-buf test is no WARN */
static void rccl_host_staging_on_mlx4(void)
{
	struct dr_ctx *c = run("oculink-cx3");
	const struct dr_result *r = expect(c, "gpudirect.rccl", NULL, DR_INFO, NULL);

	CHECK(strcmp(obs_str(r, "route"), "dma-buf"), "route %s", obs_str(r, "route"));
	dr_ctx_free(c);
}

static void rxe_over_one_lane_thunderbolt(void)
{
	struct dr_ctx *c = run("tb-one-lane");
	const struct dr_result *r = expect(c, "thunderbolt.link", "rxe_tb0/1", DR_WARN, "lane");

	CHECK(obs_int(r, "rx_lanes") == 1 && obs_int(r, "lane_gbps") == 20, "lanes/speed");
	summary_has(r, "not the link's");
	expect(c, "pcie.link", "rxe_tb0", DR_SKIP, NULL);
	/* found by its bus although udev renamed it */
	expect(c, "thunderbolt.link", "usb4net1", DR_INFO, "rdma link add rxe_usb4net1 type rxe netdev usb4net1");
	dr_ctx_free(c);
}

static void rxe_on_down_netdev_fails(void)
{
	struct dr_ctx *c = run("rxe-down");

	expect(c, "rdma.port", "rxe0/1", DR_FAIL, "ip link set veth0 up");
	dr_ctx_free(c);
}

static void module_missing_fails_with_advice(void)
{
	struct dr_ctx *c = run("no-module");

	expect(c, "strixpeer.module", NULL, DR_FAIL, "strixpeer-dkms");
	expect(c, "strixpeer.install", "6.18.4-amd64", DR_FAIL, "strixpeer-dkms");
	expect(c, "strixpeer.device", NULL, DR_SKIP, NULL);
	expect(c, "gpudirect.client", NULL, DR_SKIP, NULL);
	dr_ctx_free(c);
}

static void kernel_update_without_dkms_build(void)
{
	struct dr_ctx *c = run("kernel-update");

	expect(c, "strixpeer.install", "6.18.5-amd64", DR_WARN, "dkms autoinstall -k 6.18.5-amd64");
	expect(c, "strixpeer.install", "6.18.4-amd64", DR_PASS, NULL);
	dr_ctx_free(c);
	c = run("kernel-update-noheaders");
	expect(c, "strixpeer.install", "6.18.5-amd64", DR_WARN, "linux-headers-6.18.5-amd64");
	dr_ctx_free(c);
}

static void device_node_0600_refuses_users(void)
{
	struct dr_ctx *c = run("dev-0600");

	expect(c, "strixpeer.device", NULL, DR_FAIL, "udev rule");
	dr_ctx_free(c);
}

/* --- error counters: the hook changes the tree between the two samples --- */

struct ctr_change {
	const char *root;
	const char *file;	/* below the root */
	const char *value;
};

static void write_file(const char *root, const char *file, const char *value)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, file);
	f = fopen(path, "w");
	CHECK(f, "%s: %s", path, strerror(errno));
	fprintf(f, "%s\n", value);
	fclose(f);
}

static void change(void *arg)
{
	const struct ctr_change *ch = arg;

	write_file(ch->root, ch->file, ch->value);
}

/* A private copy of a fixture (the cases run in parallel forks' order). */
static void copy_fixture(const char *name, char *out, size_t len)
{
	char cmd[PATH_MAX * 2 + 64];

	dr_fmt(out, len, "%s/.copy-%s-%d", fx, name, getpid());
	dr_fmt(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s/%s' '%s'", out, fx, name, out);
	CHECK(system(cmd) == 0, "%s", cmd);
}

static void remove_copy(const char *dir)
{
	char cmd[PATH_MAX + 16];

	dr_fmt(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "%s", cmd);
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

/* A copy of @fixture whose /etc/os-release is @osrel ("" for none). */
static struct dr_ctx *run_on_os(const char *fixture, const char *osrel, char *root, size_t len)
{
	char dir[PATH_MAX + 8];
	struct dr_ctx *c;

	copy_fixture(fixture, root, len);
	if (osrel[0]) {
		dr_fmt(dir, sizeof(dir), "%s/etc", root);
		CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "%s: %s", dir, strerror(errno));
		write_file(root, "etc/os-release", osrel);
	}
	c = run(root);
	return c;
}

#define OS_FEDORA "NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=43"
#define OS_UBUNTU "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\""
#define OS_DEBIAN "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian"

static void advice_follows_the_distribution(void)
{
	static const struct {
		const char *os, *headers, *group, *sm;
	} want[] = {
		{ OS_DEBIAN, "apt install linux-headers-6.18.5-amd64", "adduser <user> rdma", "apt install opensm" },
		{ OS_UBUNTU, "apt install linux-headers-6.18.5-amd64", "adduser <user> rdma", "apt install opensm" },
		{ OS_FEDORA, "dnf install kernel-devel-6.18.5-amd64", "usermod -aG rdma <user>", "dnf install opensm" },
		{ "", "or dnf install kernel-devel-6.18.5-amd64 (Fedora)", "usermod -aG rdma <user> (adduser", "or dnf install opensm (Fedora)" },
	};
	char root[PATH_MAX];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct dr_ctx *c = run_on_os("kernel-update-noheaders", want[i].os, root, sizeof(root));
		const struct dr_result *r = expect(c, "strixpeer.install", "6.18.5-amd64", DR_WARN,
						   want[i].headers);

		if (strstr(want[i].os, "fedora"))
			CHECK(!strstr(r->advice, "apt "), "apt advice on Fedora: %s", r->advice);
		dr_ctx_free(c);
		remove_copy(root);
		c = run_on_os("dev-0600", want[i].os, root, sizeof(root));
		expect(c, "strixpeer.device", NULL, DR_FAIL, want[i].group);
		dr_ctx_free(c);
		remove_copy(root);
		c = run_on_os("ib-no-sm", want[i].os, root, sizeof(root));
		expect(c, "rdma.port", "mlx4_0/1", DR_FAIL, want[i].sm);
		dr_ctx_free(c);
		remove_copy(root);
	}
}

/* rdma-core's release from libibverbs' file name; irdma below 50 is WARN, per distribution */
static void rdma_core_version_irdma(void)
{
	static const struct {
		const char *os, *advice, *not;
	} want[] = {
		{ OS_DEBIAN, "Debian 13 (trixie)", "dnf " },
		{ OS_UBUNTU, "Ubuntu 24.04", "dnf " },
		{ "", "dnf upgrade rdma-core libibverbs on Fedora", NULL },
	};
	char root[PATH_MAX];
	const struct dr_result *r;
	struct dr_ctx *c = run("rdma-irdma-44");

	r = expect(c, "rdma.core_version", NULL, DR_WARN, "rdma-core 50 or newer");
	summary_has(r, "rdma-core 44.0");
	summary_has(r, "irdma0");
	summary_has(r, "Unknown completion");
	CHECK(!strcmp(obs_str(r, "version"), "44.0") && obs_int(r, "release") == 44 &&
	      obs_bool(r, "irdma"), "observed");
	CHECK(!strcmp(obs_str(r, "library"), "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"),
	      "library %s", obs_str(r, "library"));
	dr_ctx_free(c);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		c = run_on_os("rdma-irdma-44", want[i].os, root, sizeof(root));
		r = expect(c, "rdma.core_version", NULL, DR_WARN, want[i].advice);
		CHECK(!want[i].not || !strstr(r->advice, want[i].not), "%s", r->advice);
		dr_ctx_free(c);
		remove_copy(root);
	}
	/* Fedora: /usr/lib64, the linked file (not the stale one), dnf */
	c = run_on_os("rdma-irdma-fedora", OS_FEDORA, root, sizeof(root));
	r = expect(c, "rdma.core_version", NULL, DR_WARN, "dnf upgrade rdma-core libibverbs");
	CHECK(!strstr(r->advice, "apt "), "apt on Fedora: %s", r->advice);
	CHECK(obs_int(r, "release") == 48 &&
	      !strcmp(obs_str(r, "library"), "/usr/lib64/libibverbs.so.1.14.48.0"), "%s",
	      obs_str(r, "library"));
	dr_ctx_free(c);
	remove_copy(root);
	/* 56 with irdma, 44 without: the number, as information */
	c = run("rdma-irdma-56");
	summary_has(expect(c, "rdma.core_version", NULL, DR_INFO, NULL), "rdma-core 56.1");
	dr_ctx_free(c);
	c = run("rdma-mlx5-44");
	r = expect(c, "rdma.core_version", NULL, DR_INFO, NULL);
	summary_has(r, "rdma-core 44.0");
	CHECK(!obs_bool(r, "irdma"), "irdma");
	dr_ctx_free(c);
	c = run("rdma-no-verbs");
	expect(c, "rdma.core_version", NULL, DR_SKIP, NULL);
	dr_ctx_free(c);
}

/* GTT against the node's RAM: TTM's default half is WARN, the fix per distribution */
static void gpu_gtt_against_ram(void)
{
	static const struct {
		const char *os, *advice, *not;
	} want[] = {
		{ OS_DEBIAN, "update-grub", "grubby" },
		{ OS_UBUNTU, "update-initramfs -u", "grubby" },
		{ OS_FEDORA, "grubby --update-kernel=ALL --args=\"ttm.pages_limit=28573696\"", "update-grub" },
		{ "", "Fedora: grubby", NULL },
	};
	char root[PATH_MAX];
	const struct dr_result *r;
	struct dr_ctx *c = run("gtt-default");

	r = expect(c, "gpu.gtt", NULL, DR_WARN, "ttm.pages_limit=28573696");
	summary_has(r, "GTT 61.0 GiB");
	summary_has(r, "RAM 125 GiB");
	summary_has(r, "carve-out 512 MiB");
	summary_has(r, "49%");
	CHECK(strstr(r->advice, "amdgpu.gttsize is deprecated"), "%s", r->advice);
	CHECK(obs_int(r, "gtt_total") == 64000000LL * 1024 && obs_int(r, "mem_total") == 131072000LL * 1024 &&
	      obs_int(r, "vram_total") == 512LL << 20 && obs_int(r, "suggested_gtt") == 109LL << 30,
	      "observed");
	dr_ctx_free(c);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		c = run_on_os("gtt-default", want[i].os, root, sizeof(root));
		r = expect(c, "gpu.gtt", NULL, DR_WARN, want[i].advice);
		CHECK(!want[i].not || !strstr(r->advice, want[i].not), "%s", r->advice);
		dr_ctx_free(c);
		remove_copy(root);
	}
	/* the healthy node's 100 GiB: 80% of its memory */
	c = run("healthy");
	r = expect(c, "gpu.gtt", NULL, DR_PASS, NULL);
	summary_has(r, "80%");
	CHECK(!dr_get(r, "suggested_gtt"), "suggestion on a good GTT");
	dr_ctx_free(c);
	/* amdgpu not bound: SKIP; no AMD GPU: no GTT result at all */
	c = run("gpu-no-amdgpu");
	expect(c, "gpu.driver", NULL, DR_FAIL, "amdgpu");
	summary_has(expect(c, "gpu.gtt", NULL, DR_SKIP, NULL), "mem_info_gtt_total missing");
	dr_ctx_free(c);
	c = run("no-gpu");
	expect(c, "gpu.amd", NULL, DR_SKIP, NULL);
	for (size_t i = 0; i < c->nres; i++)
		CHECK(strcmp(c->res[i].id, "gpu.gtt"), "gpu.gtt without a GPU");
	dr_ctx_free(c);
}

#define PORT0 "sys/class/infiniband/mlx5_0/ports/1/"

static void counters_growth(const char *file, const char *before, const char *after,
			    enum dr_status st, const char *advice)
{
	char root[PATH_MAX];
	struct ctr_change ch = { root, file, after };
	struct dr_ctx *c;

	copy_fixture("healthy", root, sizeof(root));
	write_file(root, file, before);
	c = run_hook(root, change, &ch);
	expect(c, "counters.errors", "mlx5_0/1", st, advice);
	expect(c, "counters.errors", "mlx5_1/1", DR_PASS, NULL);
	dr_ctx_free(c);
	remove_copy(root);
}

static void counters_symbol_errors_growing_warn(void)
{
	counters_growth(PORT0 "counters/symbol_error", "3", "9", DR_WARN, "cable");
}

static void counters_sequence_errors_growing_warn(void)
{
	counters_growth(PORT0 "hw_counters/out_of_sequence", "10", "250", DR_WARN, "lossless");
}

static void counters_link_downed_growing_fail(void)
{
	counters_growth(PORT0 "counters/link_downed", "1", "2", DR_FAIL, "link went down");
}

static void counters_saturated_fail(void)
{
	counters_growth(PORT0 "counters/symbol_error", "65535", "65535", DR_FAIL, "perfquery -R");
}

static void counters_unchanged_pass(void)
{
	counters_growth(PORT0 "counters/symbol_error", "7", "7", DR_PASS, NULL);
}

/* --- broken trees ----------------------------------------------------------- */

static void broken_attributes_skip_never_crash(void)
{
	struct dr_ctx *c = run("broken");
	const struct dr_result *r;

	/* state "garbage" */
	summary_has(expect(c, "rdma.port", "mlx5_0/1", DR_SKIP, NULL), "state unreadable");
	/* a 1 MiB rate and an unreadable ndevs/0: the port is still checked */
	r = find(c, "rdma.port", "mlx5_1/1");
	summary_has(r, "rate unreadable");
	/* terminal escapes in an attribute do not reach the report */
	CHECK(dr_get(r, "fw_ver") && !strchr(dr_get(r, "fw_ver")->s, '\033') &&
	      !strchr(dr_get(r, "fw_ver")->s, '\007'), "fw_ver %s", dr_get(r, "fw_ver")->s);
	/* current_link_width "x8?" */
	expect(c, "pcie.link", "mlx5_1 0000:01:00.1", DR_SKIP, NULL);
	/* an MTU with a NUL inside */
	expect(c, "mtu.roce", "mlx5_0/1", DR_SKIP, NULL);
	/* no /proc/self/limits, garbage meminfo, no buddyinfo, node/online "zero" */
	expect(c, "memory.memlock", NULL, DR_SKIP, NULL);
	expect(c, "memory.hugepages", NULL, DR_INFO, NULL);
	expect(c, "memory.free_2m", NULL, DR_SKIP, NULL);
	expect(c, "numa.nodes", NULL, DR_SKIP, NULL);
	/* a 100 kB /proc/cmdline: reported, not parsed */
	summary_has(find(c, "iommu.mode", NULL), "/proc/cmdline");
	/* mem_info_vram_total "lots" */
	expect(c, "gpu.carveout", NULL, DR_SKIP, NULL);
	/* "N/A (no PMA)" counters are left out */
	expect(c, "counters.errors", "mlx5_1/1", DR_PASS, NULL);
	/* the hostname is a FIFO: not read, no hang */
	CHECK(!dr_get(&c->node, "hostname"), "read a FIFO");
	dr_ctx_free(c);
}

static void only_selects_checks(void)
{
	struct dr_ctx c;
	unsigned int mask;

	CHECK(dr_parse_only("mtu,rdma", &mask) == 0 &&
	      mask == ((1U << DR_C_MTU) | (1U << DR_C_RDMA)), "mask %#x", mask);
	CHECK(dr_parse_only("mtu,bogus", &mask) == -EINVAL, "bogus accepted");
	CHECK(dr_parse_only("", &mask) == -EINVAL, "empty accepted");
	/* check ids as printed: pcie.link keeps that id only */
	dr_ctx_init(&c);
	CHECK(dr_parse_only_ids(&c, "pcie.link,mtu") == 0 &&
	      c.only == ((1U << DR_C_PCIE) | (1U << DR_C_MTU)), "ids mask %#x", c.only);
	CHECK(dr_parse_only_ids(&c, "pcie.") == -EINVAL, "\"pcie.\" accepted");
	CHECK(dr_parse_only_ids(&c, "bogus.link") == -EINVAL, "bogus.link accepted");
	dr_ctx_free(&c);
	CHECK(sh("%s doctor -j --sysroot %s/healthy --only rdma.port | python3 -c '"
		 "import json,sys; r=json.load(sys.stdin)[\"checks\"]; "
		 "assert r and all(x[\"id\"] == \"rdma.port\" for x in r), r'", ctl, fx) == 0,
	      "--only rdma.port kept other ids");
	dr_ctx_init(&c);
	CHECK(dr_ctx_set_sysroot(&c, "/nonexistent/sysroot") == -ENOENT, "missing sysroot");
	dr_ctx_free(&c);
}

/* --- the command line ------------------------------------------------------ */

/* Exit status of a shell command. */
static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	CHECK(st != -1 && WIFEXITED(st), "%s: did not exit", cmd);
	return WEXITSTATUS(st);
}

/* Every check object has id, status, observed and advice; exit matches. */
#define VALIDATE \
	"import json,sys\n" \
	"def check(f, rc):\n" \
	" d=json.load(open(f))\n" \
	" assert set(d) == {'node','checks','summary'}, (f, d.keys())\n" \
	" for c in d['checks']:\n" \
	"  assert set(c) == {'id','check','subject','status','summary','observed','advice'}, (f, c)\n" \
	"  assert c['status'] in ('PASS','INFO','WARN','FAIL','SKIP'), (f, c)\n" \
	"  assert c['id'].startswith(c['check'] + '.'), (f, c)\n" \
	"  assert isinstance(c['observed'], dict) and c['summary'], (f, c)\n" \
	"  assert c['status'] not in ('WARN','FAIL') or c['advice'], (f, c)\n" \
	" n={s: sum(c['status'] == s for c in d['checks']) for s in ('PASS','INFO','WARN','FAIL','SKIP')}\n" \
	" assert all(d['summary'][s] == n[s] for s in n), (f, d['summary'], n)\n" \
	" want = 2 if n['FAIL'] else 1 if n['WARN'] else 0\n" \
	" assert d['summary']['exit'] == want == rc, (f, d['summary'], want, rc)\n" \
	" assert json.load(open(f[:-5] + '.pretty.json')) == d, (f, '-p differs')\n" \
	"for a in sys.argv[1:]:\n" \
	"  f, rc = a.rsplit(':', 1); check(f, int(rc))\n"

/*
 * One type per field on every node: over all the fixtures' reports, each
 * node fact and each check id's observed value has one JSON type (a number
 * may also be null: unlimited); lists are arrays of strings; memlock is
 * bytes or null.
 */
#define SCHEMA \
	"import json,sys\n" \
	"def t(v):\n" \
	"  return 'num' if isinstance(v, (int, float)) and not isinstance(v, bool) else " \
	"'null' if v is None else type(v).__name__\n" \
	"seen = {}\n" \
	"def note(where, v, f):\n" \
	"  if isinstance(v, list):\n" \
	"    assert all(isinstance(x, str) for x in v), (f, where, v)\n" \
	"  seen.setdefault(where, {}).setdefault(t(v), f)\n" \
	"for f in sys.argv[1:]:\n" \
	"  d = json.load(open(f))\n" \
	"  for k, v in d['node'].items(): note(('node', k), v, f)\n" \
	"  for c in d['checks']:\n" \
	"    for k, v in c['observed'].items(): note((c['id'], k), v, f)\n" \
	"  m = d['node'].get('memlock', 0)\n" \
	"  assert m is None or t(m) == 'num', (f, m)\n" \
	"  assert isinstance(d['node'].get('peer_clients', []), list), f\n" \
	"bad = {w: ts for w, ts in seen.items() if len(set(ts) - {'null'} if 'num' in ts else ts) > 1}\n" \
	"assert not bad, bad\n" \
	"for w in (('node', 'memlock'), ('memory.memlock', 'soft'), ('memory.memlock', 'hard')):\n" \
	"  assert set(seen.get(w, {})) <= {'num', 'null'}, (w, seen.get(w))\n" \
	"assert set(seen.get(('node', 'peer_clients'), {'list': 0})) == {'list'}, seen.get(('node', 'peer_clients'))\n"

static void cli_json_valid_for_every_fixture(void)
{
	static const char *const trees[] = {
		"healthy", "oculink-cx3", "ib-no-sm", "ib-polling", "mtu-1500", "mtu-9000",
		"mtu-edge", "memlock-64k", "memlock-unlimited", "strix-6.12", "strix-96g",
		"gttsize", "amd-iommu-off", "peer-strixpeer", "peer-amdkfd", "peer-clash",
		"tb-one-lane", "no-module", "kernel-update", "dev-0600", "rxe-down", "broken",
		"pcie-switch", "pcie-enough", "phoenix-8g", "oculink-cx7", "oculink-cx7-accepted",
		"rccl-config-gz", "rccl-config-gz-truncated", "rdma-irdma-44", "rdma-irdma-56",
		"rdma-mlx5-44", "rdma-irdma-fedora", "rdma-no-verbs", "gtt-default",
		"gpu-no-amdgpu", "no-gpu", "services-default", "services-dropin", "docker-default",
		"docker-ulimits",
	};
	char py[PATH_MAX], args[4096] = "";
	FILE *f;

	dr_fmt(py, sizeof(py), "%s/.validate-%d.py", fx, getpid());
	f = fopen(py, "w");
	CHECK(f, "%s", py);
	fputs(VALIDATE, f);
	fclose(f);
	for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
		int rc = sh("%s doctor -j --sysroot %s/%s > %s/%s.json 2> %s/%s.err", ctl, fx,
			    trees[i], fx, trees[i], fx, trees[i]);
		size_t l = strlen(args);

		CHECK(rc <= 2, "%s: exit %d", trees[i], rc);
		/* pretty JSON is the same report, and stderr stayed empty */
		CHECK(sh("%s doctor -j -p --sysroot %s/%s > %s/%s.pretty.json", ctl, fx, trees[i],
			 fx, trees[i]) == rc, "%s: -p", trees[i]);
		CHECK(sh("test ! -s %s/%s.err", fx, trees[i]) == 0, "%s wrote to stderr", trees[i]);
		snprintf(args + l, sizeof(args) - l, " %s.json:%d", trees[i], rc);
	}
	CHECK(strlen(args) < sizeof(args) - 1, "the report list does not fit in %zu bytes",
	      sizeof(args));
	/* one python for every report: its start-up was most of the time */
	CHECK(sh("cd %s && python3 .validate-%d.py%s", fx, getpid(), args) == 0,
	      "a report is invalid or inconsistent (the assertion names its file)");
	f = fopen(py, "w");
	CHECK(f, "%s", py);
	fputs(SCHEMA, f);
	fclose(f);
	{
		char files[8192] = "";

		for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
			size_t l = strlen(files);

			snprintf(files + l, sizeof(files) - l, " %s/%s.json", fx, trees[i]);
		}
		CHECK(sh("python3 %s%s", py, files) == 0,
		      "a field has more than one type across the fixtures' reports");
	}
	unlink(py);
}

static void cli_exit_codes_and_text(void)
{
	CHECK(sh("%s doctor --sysroot %s/healthy > /dev/null", ctl, fx) == 0, "healthy");
	CHECK(sh("%s doctor --sysroot %s/mtu-1500 > /dev/null", ctl, fx) == 1, "WARN");
	CHECK(sh("%s doctor --sysroot %s/ib-no-sm > /dev/null", ctl, fx) == 2, "FAIL");
	/* the text report shows the seed's verdict and its fix */
	CHECK(sh("%s doctor --sysroot %s/ib-no-sm | grep -q '^FAIL  rdma.port  *mlx4_0/1: INIT'",
		 ctl, fx) == 0, "text");
	CHECK(sh("%s doctor --sysroot %s/ib-no-sm | grep -q 'fix: no subnet manager: start opensm'",
		 ctl, fx) == 0, "text advice");
	/* --only: just those checks; global -j works as well */
	CHECK(sh("%s -j doctor --only mtu --sysroot %s/mtu-1500 > %s/only.json", ctl, fx, fx) == 1,
	      "--only exit");
	CHECK(sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "assert {c[\"check\"] for c in d[\"checks\"]} == {\"mtu\"}, d' %s/only.json", fx) == 0,
	      "--only");
	/* strixpeerctl's own -j -p reach doctor: indented JSON */
	CHECK(sh("%s -j -p doctor --only mtu --sysroot %s/mtu-1500 | grep -q '^  \"checks\": \\['",
		 ctl, fx) == 0, "global -j -p");
	/* --only leaves the node facts --compare needs */
	CHECK(sh("%s doctor -j --only mtu --sysroot %s/healthy | python3 -c 'import json,sys; "
		 "n=json.load(sys.stdin)[\"node\"]; assert n[\"module\"] and n[\"library\"] and "
		 "n[\"peer_client_name\"] == \"amdkfd\" and n[\"peer_clients\"] == [\"amdkfd\"], n'",
		 ctl, fx) == 0, "node facts");
}

static void cli_bad_input(void)
{
	CHECK(sh("%s doctor --sysroot /nonexistent/x 2>&1 | grep -q 'sysroot /nonexistent/x: No such file'",
		 ctl) == 0, "message");
	CHECK(sh("%s doctor --sysroot /nonexistent/x > /dev/null 2>&1", ctl) == 3, "bad sysroot exit");
	CHECK(sh("%s doctor --sysroot VERSION 2>&1 | grep -q 'Not a directory'", ctl) == 0,
	      "a file as sysroot");
	CHECK(sh("%s doctor --only bogus > /dev/null 2>&1", ctl) == 3, "bad --only");
	CHECK(sh("%s doctor --bogus > /dev/null 2>&1", ctl) == 3, "bad option");
	CHECK(sh("%s doctor extra > /dev/null 2>&1", ctl) == 3, "stray argument");
	CHECK(sh("%s doctor --rdma-test --size 0 > /dev/null 2>&1", ctl) == 3, "bad --size");
	CHECK(sh("%s doctor --serve --compare a b > /dev/null 2>&1", ctl) == 3, "exclusive");
	/* --rdma-test under a sysroot is refused as a SKIP, not attempted */
	CHECK(sh("%s doctor -j --rdma-test --only rdma --sysroot %s/healthy | grep -q "
		 "'\"id\":\"rdmatest.loopback\".*\"status\":\"SKIP\"'", ctl, fx) == 0, "rdma-test");
}

static void cli_compare(void)
{
	/* an MTU mismatch between two nodes is a FAIL */
	CHECK(sh("%s doctor -j --sysroot %s/mtu-1500 > %s/a.json; "
		 "%s doctor -j --sysroot %s/mtu-9000 > %s/b.json; "
		 "%s doctor -j --compare %s/a.json %s/b.json > %s/cmp.json",
		 ctl, fx, fx, ctl, fx, fx, ctl, fx, fx, fx) == 2, "compare exit");
	CHECK(sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "m=[c for c in d[\"checks\"] if c[\"id\"] == \"compare.mtu\"][0]; "
		 "assert m[\"status\"] == \"FAIL\" and \"1024\" in m[\"summary\"] and \"4096\" in m[\"summary\"], m; "
		 "assert \"mtu 9000\" in m[\"advice\"], m' %s/cmp.json", fx) == 0, "compare.mtu");
	CHECK(sh("%s doctor --compare %s/a.json %s/b.json | grep -q '^FAIL  compare.mtu'",
		 ctl, fx, fx) == 0, "text");
	/* the same MTU everywhere: no MTU finding */
	CHECK(sh("%s doctor -j --sysroot %s/healthy > %s/c.json; "
		 "%s doctor -j --compare %s/b.json %s/c.json | grep -q "
		 "'\"id\":\"compare.mtu\",\"check\":\"compare\",\"subject\":\"\",\"status\":\"PASS\"'",
		 ctl, fx, fx, ctl, fx, fx) == 0, "same mtu");
	/* different kernels: a WARN naming both */
	CHECK(sh("%s doctor -j --sysroot %s/strix-6.12 > %s/d.json; "
		 "%s doctor --compare %s/c.json %s/d.json | grep -q '^WARN  compare.kernel.*6.12.38'",
		 ctl, fx, fx, ctl, fx, fx) == 0, "kernels");
	/* bad reports: a clear error, exit 3 */
	CHECK(sh("echo '{\"node\": {}, \"checks\": [' > %s/bad.json; "
		 "%s doctor --compare %s/a.json %s/bad.json 2>&1 | grep -q 'bad.json: not JSON: line 2'",
		 fx, ctl, fx, fx) == 0, "truncated JSON");
	CHECK(sh("%s doctor --compare %s/a.json %s/bad.json > /dev/null 2>&1", ctl, fx, fx) == 3,
	      "exit");
	CHECK(sh("echo '[1,2]' > %s/arr.json; %s doctor --compare %s/a.json %s/arr.json 2>&1 | "
		 "grep -q 'not a report'", fx, ctl, fx, fx) == 0, "not a report");
	CHECK(sh("%s doctor --compare %s/a.json > /dev/null 2>&1", ctl, fx) == 3, "one report");
	CHECK(sh("%s doctor --compare %s/a.json /nonexistent.json > /dev/null 2>&1", ctl, fx) == 3,
	      "missing");
}

static void cli_valgrind_clean(void)
{
	if (sh("command -v valgrind > /dev/null") != 0)
		SKIP("valgrind not installed");
	CHECK(sh("valgrind -q --error-exitcode=99 --suppressions=tests/doctor/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite "
		 "%s doctor --sysroot %s/broken > /dev/null 2> %s/vg1.txt", ctl, fx, fx) != 99,
	      "valgrind: see %s/vg1.txt", fx);
	CHECK(sh("valgrind -q --error-exitcode=99 --suppressions=tests/doctor/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite "
		 "%s doctor -j --compare %s/a.json %s/b.json > /dev/null 2> %s/vg2.txt", ctl, fx, fx,
		 fx) != 99, "valgrind: see %s/vg2.txt", fx);
	/* the live system of the build host (no RDMA device there, usually) */
	CHECK(sh("valgrind -q --error-exitcode=99 --suppressions=tests/doctor/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite "
		 "%s doctor > /dev/null 2> %s/vg3.txt", ctl, fx) != 99, "valgrind: see %s/vg3.txt",
	      fx);
}

static const struct tap_case cases[] = {
	TAP_CASE(healthy_two_port_node_all_pass),
	TAP_CASE(rccl_healthy_peermem_and_dmabuf),
	TAP_CASE(rccl_core_without_sysfs_probes),
	TAP_CASE(rccl_kernel_7_1_dmabuf_forced),
	TAP_CASE(rccl_config_gz),
	TAP_CASE(kallsyms_read_once),
	TAP_CASE(ucx_needs_a_peer_client),
	TAP_CASE(rccl_host_staging_on_mlx4),
	TAP_CASE(connectx3_x4_behind_oculink),
	TAP_CASE(connectx7_x4_behind_oculink_is_warn),
	TAP_CASE(accepted_warn_is_info_still_printed),
	TAP_CASE(connectx3_gpu_paths_host_buffers_only),
	TAP_CASE(pcie_switch_uplink_is_the_bottleneck),
	TAP_CASE(pcie_downgraded_but_enough_is_info),
	TAP_CASE(ib_port_init_without_sm),
	TAP_CASE(ib_port_polling_no_cable),
	TAP_CASE(roce_mtu_1500_warns),
	TAP_CASE(roce_mtu_9000_passes),
	TAP_CASE(mtu_overhead_rxe_80_hw_96),
	TAP_CASE(memlock_64k_fails),
	TAP_CASE(memlock_unlimited_passes),
	TAP_CASE(memlock_services_and_containers),
	TAP_CASE(strix_halo_on_6_12_too_old),
	TAP_CASE(strix_halo_96g_carveout),
	TAP_CASE(other_apu_carveout),
	TAP_CASE(amdgpu_gttsize_deprecated),
	TAP_CASE(amd_iommu_off_warns),
	TAP_CASE(peer_client_named_strixpeer),
	TAP_CASE(peer_client_named_amdkfd),
	TAP_CASE(peer_client_clash_with_rocm),
	TAP_CASE(rxe_over_one_lane_thunderbolt),
	TAP_CASE(rxe_on_down_netdev_fails),
	TAP_CASE(module_missing_fails_with_advice),
	TAP_CASE(kernel_update_without_dkms_build),
	TAP_CASE(device_node_0600_refuses_users),
	TAP_CASE(advice_follows_the_distribution),
	TAP_CASE(rdma_core_version_irdma),
	TAP_CASE(gpu_gtt_against_ram),
	TAP_CASE(counters_symbol_errors_growing_warn),
	TAP_CASE(counters_sequence_errors_growing_warn),
	TAP_CASE(counters_link_downed_growing_fail),
	TAP_CASE(counters_saturated_fail),
	TAP_CASE(counters_unchanged_pass),
	TAP_CASE(broken_attributes_skip_never_crash),
	TAP_CASE(only_selects_checks),
	TAP_CASE_T(cli_json_valid_for_every_fixture, 180),
	TAP_CASE(cli_exit_codes_and_text),
	TAP_CASE(cli_bad_input),
	TAP_CASE(cli_compare),
	TAP_CASE_T(cli_valgrind_clean, 300),
};

int main(int argc, char **argv)
{
	char cmd[PATH_MAX + 64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1)
		snprintf(fx, sizeof(fx), "%s", argv[1]);
	snprintf(cmd, sizeof(cmd), "tests/doctor/mkfixtures.sh '%s' > /dev/null", fx);
	if (system(cmd) != 0) {
		printf("TAP version 13\n1..0 # SKIP could not generate the fixtures (%s)\n", cmd);
		return 1;
	}
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
