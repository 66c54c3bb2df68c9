// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: what UCX decides for ROCm (hipMalloc) memory on its
 * IB devices (gpudirect.ucx). Read from UCX's code, not tried on hardware:
 *  - before 1.23 (openucx/ucx at 9466d104, 2026-08-21,
 *    src/uct/ib/base/ib_md.c uct_ib_md_open_common): with
 *    UCX_IB_GPU_DIRECT_RDMA=try (the default) ROCm memory counts as
 *    registrable whenever /dev/kfd exists, and UCX then calls plain
 *    ibv_reg_mr on it, which pins GPU (TTM) memory only through a
 *    peer-memory client; its ROCm dma-buf route is off
 *    (UCX_ROCM_COPY_DMABUF=no in src/uct/rocm/copy/rocm_copy_md.c);
 *  - 1.23 and later (PR #11934, merged 2026-09-09; v1.23.x backport
 *    #11957): dma-buf by default when the kernel test of
 *    src/uct/rocm/base/rocm_base.c passes (CONFIG_DMABUF_MOVE_NOTIFY=y and
 *    CONFIG_PCI_P2PDMA=y in the kernel config, else dma_buf_move_notify and
 *    pci_p2pdma in /proc/kallsyms) and the IB device takes dma-buf MRs
 *    (uct_ib_md_check_dmabuf: ibv_reg_dmabuf_mr(fd -1) fails with EBADF);
 *    peer memory as the fallback. The PR's review notes that
 *    rocm_copy's DMABUF default becomes "try", decided by that kernel
 *    heuristic (uct_rocm_base_is_dmabuf_supported) alone, so a failing
 *    hsa_amd_portable_export_dmabuf() at run time would be a registration
 *    error, not a fallback.
 * UCX's version comes from the first line of libucx0's Debian changelog
 * (/usr/share/doc/libucx0/changelog.Debian.gz: "ucx (1.16.0+ds-5) ...", read
 * with zlib; the package database itself is dpkg's to read), or from ucx.pc.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "doctor.h"

/* UCX's version as major * 100 + minor (1.23 -> 123), its text in @text; 0 when unknown */
static int ucx_version(const struct dr_ctx *c, char *text, size_t len)
{
	static const char *const pcs[] = {
		"/usr/lib/x86_64-linux-gnu/pkgconfig/ucx.pc", "/usr/lib64/pkgconfig/ucx.pc",
		"/usr/lib/pkgconfig/ucx.pc",
	};
	char line[512];
	unsigned int a = 0, b = 0;
	FILE *f;

	text[0] = 0;
	f = dr_fopen(c, "/usr/share/doc/libucx0/changelog.Debian.gz");	/* a regular file */
	if (f) {
		int fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
		gzFile z;

		fclose(f);
		z = fd < 0 ? NULL : gzdopen(fd, "rb");
		if (!z && fd >= 0)
			close(fd);
		if (z && gzgets(z, line, sizeof(line)) && !gzdirect(z) &&
		    sscanf(line, "ucx (%u.%u", &a, &b) == 2)
			dr_fmt(text, len, "%u.%u (libucx0's Debian changelog)", a, b);
		if (z)
			gzclose(z);
	}
	for (size_t i = 0; !text[0] && i < sizeof(pcs) / sizeof(pcs[0]); i++) {
		f = dr_fopen(c, "%s", pcs[i]);
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "Version: %u.%u", &a, &b) == 2) {
				dr_fmt(text, len, "%u.%u (%s)", a, b, pcs[i]);
				break;
			}
		fclose(f);
	}
	if (!text[0] || a > 99 || b > 99)
		return 0;
	return (int)(a * 100 + b);
}

void dr_check_ucx(struct dr_ctx *c, int client, bool no_gpu_nic, bool dmabuf_nic)
{
	char ver[160], used[512], peer[192];
	int v = ucx_version(c, ver, sizeof(ver));
	bool kernel, dmabuf;
	struct dr_result *r;

	if (!dr_exists(c, "/dev/kfd")) {
		r = dr_add(c, DR_C_GPUDIRECT, "ucx", "", DR_INFO,
			   "no /dev/kfd: UCX does not count ROCm memory as registrable on its IB devices (read from UCX's code, not tried on hardware)");
		dr_bool(r, "kfd", false);
		dr_bool(r, "peer_client", client == 1);
		return;
	}
	kernel = dr_dmabuf_kernel_test(c, true, used, sizeof(used)) == 1;
	dmabuf = kernel && dmabuf_nic;
	dr_fmt(peer, sizeof(peer), "%s",
	       client == 1 ? "a peer client is registered" :
	       client < 0 ? "whether strixpeer's client registered cannot be told from files (strixpeerctl status says)" :
	       "no peer client is registered");
	r = dr_add(c, DR_C_GPUDIRECT, "ucx", "", DR_PASS, "%s", "");
	dr_bool(r, "kfd", true);
	dr_bool(r, "peer_client", client == 1);
	dr_bool(r, "dmabuf_kernel_test", kernel);
	dr_str(r, "dmabuf_kernel_source", used);
	dr_str(r, "version", ver);
	dr_str(r, "route", dmabuf && (v >= 123 || !v) ? "dma-buf" : client ? "peer memory" : "none");
	if (no_gpu_nic) {
		r->status = DR_INFO;
		dr_set_summary(r, "/dev/kfd exists, so UCX treats ROCm memory as registrable, but no NIC here registers GPU memory (mlx4/rxe/siw): it fails on every one (read from UCX's code, not tried on hardware)");
		dr_advise(r, "give UCX strixpeer buffers (sp_buf_alloc, exported to HIP) rather than hipMalloc memory, or export UCX_IB_GPU_DIRECT_RDMA=no so UCX stages GPU memory through host buffers");
		return;
	}
	if (dmabuf && v >= 123) {
		dr_set_summary(r, "UCX %s registers ROCm memory through dma-buf here (its kernel test passes on %s, the NIC takes dma-buf MRs): strixpeer is not needed for UCX on this node (read from UCX's code, not tried on hardware)",
			       ver, used);
		return;
	}
	if (dmabuf && !v) {
		r->status = client == 1 ? DR_PASS : DR_INFO;
		dr_set_summary(r, "UCX 1.23 and later register ROCm memory through dma-buf here (kernel test passes on %s, the NIC takes dma-buf MRs): strixpeer is not needed for them on this node; UCX before 1.23 calls plain ibv_reg_mr on hipMalloc memory, which needs a peer client (%s); UCX's version is not in a package database here (read from UCX's code, not tried on hardware)",
			       used, peer);
		if (client != 1)
			dr_advise(r, "ucx_info -v; before 1.23: upgrade UCX, or set UCX_ROCM_COPY_DMABUF=y (its dma-buf route, off by default before 1.23), or start the program with LD_PRELOAD=libstrixpeer-preload.so");
		return;
	}
	dr_set_summary(r, "UCX%s%s will call plain ibv_reg_mr on hipMalloc memory (/dev/kfd exists; %s), which succeeds only through a peer-memory client: %s (read from UCX's code, not tried on hardware)",
		       ver[0] ? " " : "", ver,
		       v && v < 123 ? "before 1.23 its dma-buf route is off by default" :
		       kernel ? "the NIC takes no dma-buf MRs, so 1.23's dma-buf route does not apply" :
		       "the kernel test of 1.23's dma-buf route fails", peer);
	if (client == 1)
		return;
	if (client < 0) {
		r->status = DR_INFO;
		dr_advise(r, "strixpeerctl status says whether strixpeer's PeerDirect client registered; if not, export UCX_IB_GPU_DIRECT_RDMA=no");
		return;
	}
	r->status = DR_WARN;
	dr_set_summary(r, "%s; so UCX's registrations of hipMalloc memory fail and its transfers of GPU memory fail or fall back",
		       r->summary);
	if (dmabuf)
		dr_advise(r, "upgrade UCX to 1.23 or later (dma-buf by default), or set UCX_ROCM_COPY_DMABUF=y, or start the program with LD_PRELOAD=libstrixpeer-preload.so (libstrixpeer(7): its ibv_reg_mr registers GPU memory through its dma-buf); else export UCX_IB_GPU_DIRECT_RDMA=no (UCX then stages GPU memory through host buffers)");
	else
		dr_advise(r, "give UCX strixpeer buffers (sp_buf_alloc, exported to HIP), or export UCX_IB_GPU_DIRECT_RDMA=no (UCX then stages GPU memory through host buffers); gpudirect.route names what gives this node a peer-memory core");
}
