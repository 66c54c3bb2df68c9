// SPDX-License-Identifier: MIT
/*
 * Self-test of sp_peersim.ko, the simulated PeerDirect core + HCA
 * (tests/kmod/), on its own: everything here needs no peer-memory client.
 * Malformed requests first, then registrations through the GUP path with
 * "DMA" checked against what the CPU sees, then lifetime and privileges,
 * then dma-buf MRs of vgem (and udmabuf where the kernel has it) checked
 * against the exporter's CPU mapping.
 *
 * Expects the module loaded (skips otherwise); loads nothing itself. Some
 * cases read max_seg_size to check segmenting; load the module with e.g.
 * max_seg_size=65536 to make coalescing limits visible.
 */
/* The cases, a file per section, are in tests/guest/peersim_selftest/; here the table and main. */
#include "peersim_selftest/peersim_selftest.h"

long page_size(void)
{
	return sysconf(_SC_PAGESIZE);
}

/* An anonymous private mapping, populated. */
void *map_anon(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	CHECK(p != MAP_FAILED, "mmap %zu: %s", len, strerror(errno));
	return p;
}

/* The module's max_seg_size as the device reports it. */
uint64_t max_seg(int fd)
{
	struct peersim_info info;

	CHECK_OK(peersim_info(fd, &info));
	return info.max_seg_size;
}

static const struct tap_case cases[] = {
	TAP_CASE(info_reports_abi),
	TAP_CASE(unknown_ioctls_enotty),
	TAP_CASE(ioctl_sizes),
	TAP_CASE(ioctl_sweep),
	TAP_CASE(bad_flags_and_reserved),
	TAP_CASE(reg_bad_ranges),
	TAP_CASE(unmapped_and_prot_none_refused),
	TAP_CASE(pfn_mapping_refused),
	TAP_CASE(gup_4k),
	TAP_CASE(gup_1m_unaligned),
	TAP_CASE_T(gup_segments, 120),
	TAP_CASE(read_only_mr),
	TAP_CASE(dma_bounds),
	TAP_CASE(dereg_then_use),
	TAP_CASE(handles_per_fd),
	TAP_CASE(close_frees_all),
	TAP_CASE(fd_passing),
	TAP_CASE_T(dereg_during_dma, 120),
	TAP_CASE(unprivileged_open_refused),
	TAP_CASE(memlock_limit),
	TAP_CASE(clients_match_sysfs),
	TAP_CASE(dmabuf_vgem_dynamic),
	TAP_CASE(dmabuf_vgem_pinned),
	TAP_CASE(dmabuf_udmabuf_dynamic),
	TAP_CASE(dmabuf_udmabuf_pinned),
	TAP_CASE(dmabuf_unaligned),
	TAP_CASE(dmabuf_bad_requests),
	TAP_CASE(dmabuf_fd_closed),
	TAP_CASE(dmabuf_dereg_then_usable),
	TAP_CASE(dmabuf_close_releases),
	TAP_CASE_T(dmabuf_dereg_during_dma, 120),
};

TAP_MAIN(cases)
