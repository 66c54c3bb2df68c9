// SPDX-License-Identifier: MIT
/*
 * PeerDirect tests: imports of real dma-bufs (vgem, udmabuf, the system
 * dma-heap), registered through the simulated PeerDirect core + HCA
 * (tests/kmod/peersim_core.c + peersim_hca.c, /dev/sp_peersim), which asks strixpeer's client
 * exactly as ib_core would: only after pinning failed.
 *
 *   peer          strixpeer built against the simulated core's symbols and
 *                 loaded after sp_peersim (semantics: whatever sp_peersim
 *                 was loaded with; the diag line says which)
 *   peer noapi    strixpeer built without the peer-memory API
 */
/* The cases, a file per section, are in tests/guest/peer/; here the table and main. */
#include "peer/peer.h"

static const struct tap_case with_client[] = {
	TAP_CASE(client_registered),
	TAP_CASE(import_errors),
	TAP_CASE(gup_first),
	TAP_CASE(data_vgem_4k),
	TAP_CASE(data_vgem_1m_unaligned),
	TAP_CASE_T(data_vgem_64m, 300),
	TAP_CASE(data_udmabuf_4k),
	TAP_CASE_T(data_udmabuf_64m_unaligned, 300),
	TAP_CASE(data_heap_4k),
	TAP_CASE_T(data_heap_64m_unaligned, 300),
	TAP_CASE_T(segments_64m, 120),
	TAP_CASE(declines),
	TAP_CASE(other_process),
	TAP_CASE(zero_change_vgem),
	TAP_CASE(zero_change_off),
	TAP_CASE(invalidate_unimport),
	TAP_CASE(invalidate_close),
	TAP_CASE(invalidate_munmap),
	TAP_CASE(invalidate_exit),
	TAP_CASE(kill_mid_registration),
	TAP_CASE(counters),
	TAP_CASE(events),
	TAP_CASE(read_only_dmabuf),
	TAP_CASE_T(pin_bound_memlock, 180),
	TAP_CASE_T(pin_bound_param, 120),
	TAP_CASE_T(pin_bound_root, 120),
};

static const struct tap_case without_api[] = {
	TAP_CASE(noapi_reports_reason),
	TAP_CASE(noapi_imports_work),
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "noapi"))
		return tap_run(without_api, sizeof(without_api) / sizeof(without_api[0]));
	return tap_run(with_client, sizeof(with_client) / sizeof(with_client[0]));
}
