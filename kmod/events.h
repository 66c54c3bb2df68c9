/* SPDX-License-Identifier: GPL-2.0 */
/*
 * strixpeer - what the mechanisms (buffers, exports, imports, the
 * PeerDirect client) report, and the one sink they report to.
 *
 * The mechanisms describe an event as plain values (struct sp_event, no
 * pointer into their objects, nothing that walks pages) and hand it to
 * sp_event_emit(). A reporter - the generic netlink family in netlink.c -
 * installs itself as the sink; it calls down into the mechanisms for its
 * queries, they never call up into it.
 */
#ifndef _STRIXPEER_EVENTS_H
#define _STRIXPEER_EVENTS_H

#include <linux/types.h>

struct device;

/**
 * struct sp_event_buf - a buffer as an event shows it (a snapshot)
 * @id: node-wide id
 * @pid: tgid of the allocating process
 * @size: bytes
 * @page_size: the page size backing every byte
 * @node: NUMA node
 * @nr_chunks: physically contiguous runs
 * @map_count: live VMAs
 * @exports: live dma-bufs
 * @attachments: devices attached to them
 */
struct sp_event_buf {
	u32 id;
	u32 pid;
	u64 size;
	u64 page_size;
	u32 node;
	u32 nr_chunks;
	u32 map_count;
	u32 exports;
	u32 attachments;
};

/**
 * struct sp_event - one event
 * @cmd: STRIXPEER_CMD_*_NTF
 * @pid: the process the event is about (0: none to report)
 * @has_buf: @buf is set
 * @buf: the buffer concerned
 * @limit: STRIXPEER_LIMIT_* (limit events)
 * @size: bytes requested (limit) or registered (peer); 0: not reported
 * @peer: STRIXPEER_PEER_* (peer events)
 * @import_id: the import concerned (peer events)
 * @reason: STRIXPEER_INVAL_* (peer invalidations; 0: none)
 * @export: STRIXPEER_EXPORT_* (export events)
 * @device: the importer's device name (export attach/detach), or NULL
 */
struct sp_event {
	u8 cmd;
	u32 pid;
	bool has_buf;
	struct sp_event_buf buf;
	u32 limit;
	u64 size;
	u32 peer;
	u32 import_id;
	u32 reason;
	u32 export;
	const char *device;
};

/*
 * The sink: called in process context, may sleep; must not take any lock
 * of the mechanisms (it is called with some of them held - see each
 * caller). NULL (the default) drops events.
 */
typedef void (*sp_event_sink_fn)(const struct sp_event *ev);
void sp_events_set_sink(sp_event_sink_fn sink);
void sp_event_emit(const struct sp_event *ev);

/*
 * Helpers for the mechanisms: build a struct sp_event from the values they
 * pass (a buffer as the snapshot its owner filled, sp_buf_snapshot()) and
 * emit it. None of them looks into a mechanism's objects.
 */
void sp_event_buf(const struct sp_event_buf *eb, u8 cmd);
void sp_event_limit(u32 limit, u64 size);
void sp_event_peer(u32 pid, u32 import_id, u32 what, u64 size, u32 reason);
void sp_event_export(const struct sp_event_buf *eb, u32 what,
		     const struct device *dev);

#endif /* _STRIXPEER_EVENTS_H */
