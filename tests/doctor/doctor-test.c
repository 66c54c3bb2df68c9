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
#include "dt.h"

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

static void numa_two_nodes_nic_placed(void)
{
	struct dr_ctx *c = run("numa-two-nodes");

	summary_has(expect(c, "numa.nodes", NULL, DR_INFO, NULL), "2 NUMA nodes");
	CHECK(obs_int(expect(c, "numa.nic", "mlx5_0 0000:01:00.0", DR_PASS, "--cpunodebind=0"),
		      "node") == 0, "node 0");
	expect(c, "numa.nic", "mlx5_1 0000:01:00.1", DR_WARN, "numactl");
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

/* --- error counters: the hook changes the tree between the two samples --- */

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

#include "dt-gpudirect.h"
#include "dt-cli.h"
#include "dt-findings.h"

static const struct tap_case cases[] = {
	TAP_CASE(healthy_two_port_node_all_pass),
	TAP_CASE(rccl_healthy_peermem_and_dmabuf),
	TAP_CASE(rccl_core_without_sysfs_probes),
	TAP_CASE(rccl_kernel_7_1_dmabuf_forced),
	TAP_CASE(rccl_config_gz),
	TAP_CASE(kallsyms_read_once),
	TAP_CASE(ucx_needs_a_peer_client),
	TAP_CASE(seed_002_connectx3_no_advice_that_cannot_help),
	TAP_CASE(route_ubuntu_generic_no_core),
	TAP_CASE(route_ubuntu_doca_ofed_core),
	TAP_CASE(route_ubuntu_nvidia_core),
	TAP_CASE(route_fedora_no_core),
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
	TAP_CASE(numa_two_nodes_nic_placed),
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
	TAP_CASE_T(findings_catalogued_emitted_documented, 180),
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
