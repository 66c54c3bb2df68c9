// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: what only the running system answers (never under
 * --sysroot): the dma-buf MR probe, the module's ABI handshake and the
 * PeerDirect reason over netlink.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "strixpeer.h"

/*
 * As NCCL and UCX probe it: ibv_reg_dmabuf_mr() with fd -1 fails with
 * EOPNOTSUPP or EPROTONOSUPPORT where dma-buf MRs are unsupported, and
 * with another error (EBADF) where they are. 1 supported, 0 not, -1 the
 * device could not be opened.
 */
int dr_live_dmabuf_probe(const char *dev, char *why, size_t len)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr;
	int ret = -1, e;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (ctx)
		pd = ibv_alloc_pd(ctx);
	if (!pd) {
		snprintf(why, len, "cannot open %s through libibverbs (%s): dma-buf MR support not probed",
			 dev, strerror(errno ? errno : ENODEV));
		goto out;
	}
	errno = 0;
	mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, IBV_ACCESS_LOCAL_WRITE);
	e = errno;
	if (mr) {
		ibv_dereg_mr(mr);
		e = 0;
	}
	if (e == EOPNOTSUPP || e == EPROTONOSUPPORT) {
		ret = 0;
		snprintf(why, len, "no dma-buf MRs (ibv_reg_dmabuf_mr: %s): NCCL/UCX/RCCL use plain ibv_reg_mr here (GPU memory then needs a peer-memory client)",
			 strerror(e));
	} else {
		ret = 1;
		snprintf(why, len, "dma-buf MRs supported (the fd -1 probe failed with %s, not EOPNOTSUPP)",
			 e ? strerror(e) : "no error");
	}
out:
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	return ret;
}

int dr_live_module_abi(char *out, size_t len, char *why, size_t wlen, int *err)
{
	struct sp_version v;
	struct sp_dev *dev;
	int ret = sp_dev_open(NULL, &dev);

	*err = ret;
	if (ret < 0) {
		snprintf(why, wlen, "opening /dev/strixpeer: %s", sp_errmsg());
		return ret;
	}
	sp_dev_version(dev, &v);
	snprintf(out, len, "module %u.%u.%u (ABI %u.%u)", v.module_major, v.module_minor,
		 v.module_patch, v.abi_major, v.abi_minor);
	sp_dev_close(dev);
	return 0;
}

int dr_live_peer_reason(char *out, size_t len)
{
	struct sp_ctl *ctl;
	struct sp_info info = { .size = sizeof(info) };
	int ret;

	out[0] = '\0';
	ret = sp_ctl_open(&ctl);
	if (ret < 0)
		return ret;
	ret = sp_ctl_info(ctl, &info);
	if (ret == 0)
		snprintf(out, len, "%s", info.peerdirect_reason);
	sp_ctl_close(ctl);
	return ret;
}
