/* SPDX-License-Identifier: GPL-2.0 */
/*
 * strixpeer - the peer-memory client ABI, as offered by MLNX_OFED /
 * DOCA-OFED's ib_uverbs and by Ubuntu's linux-nvidia kernels ("RDMA/core:
 * Introduce peer memory interface"); Ubuntu's generic kernels dropped it
 * at 6.8, Debian's and Fedora's never had it. Mainline has no header for
 * it, so the layout is declared here from the ABI's description; it must
 * match the core's byte for byte (see the BUILD_BUG_ONs in peer.c).
 */
#ifndef _STRIXPEER_PEER_MEM_H
#define _STRIXPEER_PEER_MEM_H

#include <linux/scatterlist.h>
#include <linux/types.h>

#define SP_PEER_NAME_MAX	64
#define SP_PEER_VERSION_MAX	16

struct device;

/*
 * The callbacks, in ABI order. Return conventions: acquire() 1 = the range
 * is ours, 0 = not ours, -errno; the others 0 or -errno.
 */
struct peer_memory_client {
	char name[SP_PEER_NAME_MAX];
	char version[SP_PEER_VERSION_MAX];
	int (*acquire)(unsigned long addr, size_t size,
		       void *peer_mem_private_data, char *peer_mem_name,
		       void **client_context);
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context,
			 u64 core_context);
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
};

/*
 * The extended form: recognised by the core when version[15] != 0 and
 * ex_size covers flags.
 */
struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

/*
 * After the client calls the invalidate callback, the core does not call
 * dma_unmap()/put_pages() for that registration: the client unmaps itself.
 */
#define PEER_MEM_INVALIDATE_UNMAPS	(1U << 0)

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* _STRIXPEER_PEER_MEM_H */
