/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The PeerDirect (peer-memory) ABI as the core side sees it.
 *
 * The API is not in mainline Linux: it lives in MLNX_OFED / DOCA-OFED's
 * ib_core and in Ubuntu's linux-nvidia kernels (its generic kernels have
 * none since 6.8). This is sp_peersim's own declaration of it; the layout,
 * the callback signatures and the two exported functions match what
 * clients of those cores are built against, so that a client module
 * linked against sp_peersim's Module.symvers sees the same ABI as on a
 * real core.
 */
#ifndef SP_PEER_MEM_ABI_H
#define SP_PEER_MEM_ABI_H

#include <linux/stddef.h>
#include <linux/types.h>

struct device;
struct sg_table;

#define IB_PEER_MEMORY_NAME_MAX	64
#define IB_PEER_MEMORY_VER_MAX	16

/**
 * struct peer_memory_client - a peer-memory client's registration
 * @name: client name, NUL-terminated; also its sysfs directory under
 *	/sys/kernel/mm/memory_peers/
 * @version: client version string. A non-zero last byte marks the
 *	extended form, struct peer_memory_client_ex.
 * @acquire: does [addr, addr + size) belong to this client? Returns 1 to
 *	claim it (and sets *client_context), 0 if not; anything else is
 *	treated as 0. Called with the core's client-list lock held, in the
 *	registering process's context.
 * @get_pages: pins the range. Modern cores pass sg_head == NULL and
 *	write == 1 (force == !writable); legacy cores pass their own, zeroed
 *	sg_head for the client to fill and write == the MR's write access.
 *	core_context identifies the registration in the invalidate callback.
 * @dma_map: maps the pages for dma_device. Modern cores expect the client
 *	to build the sg table in sg_head here; *nmap receives the number of
 *	mapped entries.
 * @dma_unmap: undoes @dma_map.
 * @put_pages: undoes @get_pages (modern: also frees the sg table).
 * @get_page_size: the page size the client mapped the range with.
 * @release: undoes @acquire; called for every successful claim.
 */
struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
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
 * After the client called the invalidate callback for a registration, the
 * core does not call dma_unmap/put_pages for it: the client cleans up
 * itself. Honoured by modern cores only.
 */
#define PEER_MEM_INVALIDATE_UNMAPS	(1 << 0)

/**
 * struct peer_memory_client_ex - extended registration
 * @client: the plain registration; its version[IB_PEER_MEMORY_VER_MAX - 1]
 *	must be non-zero for the core to look at the fields below
 * @ex_size: sizeof(struct peer_memory_client_ex) as the client knows it;
 *	@flags is read only when ex_size >= offsetofend(..., flags)
 * @flags: PEER_MEM_* flags
 */
struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

/*
 * The core's invalidate callback, handed to clients that ask for it at
 * registration. reg_handle is the value ib_register_peer_memory_client()
 * returned, core_context the value get_pages() received. Always returns 0.
 */
typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* SP_PEER_MEM_ABI_H */
