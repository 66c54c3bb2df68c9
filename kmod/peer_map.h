/* SPDX-License-Identifier: GPL-2.0 */
/*
 * strixpeer - the pinned, shared dma-buf mappings of the PeerDirect client
 * (peer_map.c), as peer.c uses them. Only built with the peer-memory API.
 */
#ifndef _STRIXPEER_PEER_MAP_H
#define _STRIXPEER_PEER_MAP_H

#include <linux/completion.h>
#include <linux/list.h>
#include <linux/types.h>
#include <linux/uidgid.h>

struct dma_buf;
struct dma_buf_attachment;
struct device;
struct sg_table;
struct user_struct;

enum sp_map_state { SP_MAP_CREATING, SP_MAP_READY, SP_MAP_FAILED };

/**
 * struct sp_peer_map - a pinned mapping of one dma-buf for one device,
 *	shared by every registration of that dma-buf for that device
 * @node: in sp_peer_maps while new registrations may use it
 *	(sp_peer_maps_lock)
 * @users: registrations using it, plus one while it is made
 *	(sp_peer_maps_lock)
 * @dmabuf: our reference on the dma-buf
 * @dev: the NIC's device
 * @state: set by the maker before @made completes, constant after
 * @error: why making it failed (SP_MAP_FAILED)
 * @made: completed once @state is READY or FAILED
 * @attach: our dynamic attachment (importer_priv is this map)
 * @pinned: dma_buf_pin() succeeded (resv)
 * @sgt: the exporter's mapping (resv; constant while READY)
 * @moved: the exporter announced a move of the pinned buffer (written
 *	under resv, read without it: no new registration uses the map)
 * @charged: bytes charged for the pin (the whole dma-buf), 0 once
 *	uncharged (sp_peer_maps_lock)
 * @uid: real uid of the process that made the map: charged in
 *	sp_peer_users until the pin goes
 * @user: whose locked_vm carries @charged (a reference), NULL when the
 *	maker had CAP_IPC_LOCK
 */
struct sp_peer_map {
	struct list_head node;
	unsigned int users;
	struct dma_buf *dmabuf;
	struct device *dev;
	enum sp_map_state state;
	int error;
	struct completion made;
	struct dma_buf_attachment *attach;
	bool pinned;
	struct sg_table *sgt;
	bool moved;
	u64 charged;
	kuid_t uid;
	struct user_struct *user;
};

/* peer_map.c says how each is used and under which locks. */
struct sp_peer_map *sp_peer_map_get(struct dma_buf *dmabuf, struct device *dev);
void sp_peer_map_put(struct sp_peer_map *m);
bool sp_peer_maps_idle(void);

#endif /* _STRIXPEER_PEER_MAP_H */
