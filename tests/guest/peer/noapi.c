// SPDX-License-Identifier: MIT
/* peer: strixpeer built without the peer-memory API */
#include "peer.h"

/* ---- built without the peer-memory API --------------------------------- */

void noapi_reports_reason(void)
{
	int fd = sp_test_open();
	struct strixpeer_version v = { 0 };
	struct sp_info info = { .size = sizeof(info) };
	struct sp_ctl *ctl;

	CHECK_OK(ioctl(fd, STRIXPEER_IOC_VERSION, &v));
	CHECK(!(v.features & STRIXPEER_FEAT_PEERDIRECT), "PeerDirect claimed without the API");
	CHECK(v.features & STRIXPEER_FEAT_DMABUF_IMPORT, "no import feature");
	CHECK(sp_ctl_open(&ctl) == 0, "sp_ctl_open: %s", sp_errmsg());
	CHECK(sp_ctl_info(ctl, &info) == 0, "info: %s", sp_errmsg());
	CHECK(strstr(info.peerdirect_reason, "built without the peer-memory API"),
	      "reason \"%s\"", info.peerdirect_reason);
	tap_diag("reason: %s", info.peerdirect_reason);
	sp_ctl_close(ctl);
	close(fd);
}

void noapi_imports_work(void)
{
	struct sp_dev *dev = sp_test_dev();
	struct sp_import *imp;
	struct sp_import_info ii;
	struct sp_xbuf x;

	sp_xbuf_new(SP_EXP_VGEM, 1 * MiB, 0, &x);
	CHECK(sp_import_dmabuf(dev, x.fd, 0, 1 * MiB, x.map, &imp) == 0, "import: %s",
	      sp_errmsg());
	CHECK(sp_import_query(imp, &ii) == 0 && ii.length == 1 * MiB && !ii.unmapped,
	      "query: %s", sp_errmsg());
	CHECK(sp_import_dmabuf(dev, x.fd, 0, 4096, x.map, &imp) == -EEXIST, "overlap accepted");
	CHECK(strstr(sp_errmsg(), "overlaps"), "message \"%s\"", sp_errmsg());
	munmap(x.map, x.len);
	x.map = NULL;
	for (int i = 0; i < 600 && sp_import_query(imp, &ii) == 0 && !ii.unmapped; i++)
		usleep(100000);
	CHECK(ii.unmapped, "import not ended 60 s after munmap");
	CHECK(sp_import_free(imp) == 0, "free: %s", sp_errmsg());
	sp_dev_close(dev);
	sp_xbuf_free(&x);
	check_all_released();
}
