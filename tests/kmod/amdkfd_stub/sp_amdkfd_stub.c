// SPDX-License-Identifier: GPL-2.0
/*
 * sp_amdkfd_stub - a peer-memory client named "amdkfd" that claims nothing
 *
 * ROCm's amdgpu DKMS driver (not Debian's or mainline's amdgpu) registers
 * a PeerDirect client named "amdkfd", version "1.0", when it is built
 * against a peer-memory core. RCCL, GASNet-EX and others look for exactly
 * /sys/kernel/mm/memory_peers/amdkfd/version. strixpeer can take that name
 * (peer_client_name=amdkfd); when ROCm's client already holds it, a core
 * that publishes memory_peers refuses strixpeer's registration, and one
 * that does not (OFED on 6.12 and later) registers both and asks them in
 * registration order. This module plays ROCm's client for those cases
 * against sp_peersim (tests/guest/peer-names-guest.sh) and against OFED's real
 * core (tests/vm/guest-suite.sh, built by tests/vm/build-realcore.sh): it
 * registers "amdkfd" / "1.0" with the invalidate callback, as ROCm's does,
 * and declines every range, as ROCm's does for memory that is not a KFD
 * buffer object (here there are none). Its "asked" parameter counts the
 * ranges a core offered it, so a test can tell it was asked.
 *
 * What it does not reproduce: claiming KFD BOs, pinning and DMA-mapping
 * VRAM/GTT, invalidation when a BO is freed or evicted, the
 * amdgpu_amdkfd interfaces ROCm's client calls. The callbacks after
 * acquire() are never reached (acquire() never claims); they fail loudly
 * if a core calls them anyway.
 */
#include <linux/errno.h>
#include <linux/module.h>
#include <linux/printk.h>
#include <linux/sysfs.h>

#include "peer_mem_abi.h"

static void *stub_handle;
static invalidate_peer_memory stub_invalidate;
static atomic_t stub_asked = ATOMIC_INIT(0);

static int stub_asked_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&stub_asked));
}

static const struct kernel_param_ops stub_asked_ops = {
	.get = stub_asked_get,
};
module_param_cb(asked, &stub_asked_ops, NULL, 0444);
MODULE_PARM_DESC(asked, "Ranges a core offered this client's acquire() (it declines them all)");

static int stub_acquire(unsigned long addr, size_t size, void *priv,
			char *peer_mem_name, void **client_context)
{
	atomic_inc(&stub_asked);
	return 0;	/* not a KFD buffer object: not ours */
}

static int stub_get_pages(unsigned long addr, size_t size, int write,
			  int force, struct sg_table *sg_head,
			  void *client_context, u64 core_context)
{
	WARN_ONCE(1, "sp_amdkfd_stub: get_pages without a claim\n");
	return -EINVAL;
}

static int stub_dma_map(struct sg_table *sg_head, void *client_context,
			struct device *dma_device, int dmasync, int *nmap)
{
	WARN_ONCE(1, "sp_amdkfd_stub: dma_map without a claim\n");
	return -EINVAL;
}

static int stub_dma_unmap(struct sg_table *sg_head, void *client_context,
			  struct device *dma_device)
{
	return 0;
}

static void stub_put_pages(struct sg_table *sg_head, void *client_context)
{
}

static unsigned long stub_get_page_size(void *client_context)
{
	return PAGE_SIZE;
}

static void stub_release(void *client_context)
{
}

static struct peer_memory_client stub_client = {
	.name = "amdkfd",
	.version = "1.0",
	.acquire = stub_acquire,
	.get_pages = stub_get_pages,
	.dma_map = stub_dma_map,
	.dma_unmap = stub_dma_unmap,
	.put_pages = stub_put_pages,
	.get_page_size = stub_get_page_size,
	.release = stub_release,
};

static int __init stub_init(void)
{
	stub_handle = ib_register_peer_memory_client(&stub_client,
						     &stub_invalidate);
	if (!stub_handle) {
		pr_err("sp_amdkfd_stub: the core refused client 'amdkfd'\n");
		return -EBUSY;
	}
	pr_info("sp_amdkfd_stub: peer-memory client 'amdkfd' registered\n");
	return 0;
}

static void __exit stub_exit(void)
{
	ib_unregister_peer_memory_client(stub_handle);
}

module_init(stub_init);
module_exit(stub_exit);
MODULE_DESCRIPTION("Test stand-in for ROCm's amdkfd peer-memory client");
MODULE_LICENSE("GPL");
