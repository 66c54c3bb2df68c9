// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - the event sink (see events.h). Building an event costs a
 * few loads and stores: no allocation, no page walk; the sink decides
 * whether anybody listens.
 */
#include <linux/compiler.h>
#include <linux/device.h>
#include <linux/sched.h>

#include <uapi/strixpeer.h>

#include "events.h"

/*
 * Set once by the reporter's init, before the device exists, and cleared
 * by its exit, after the device and the PeerDirect client are gone: no
 * event is emitted while it changes, READ_ONCE() only keeps the compiler
 * honest.
 */
static sp_event_sink_fn sp_event_sink;

/**
 * sp_events_set_sink() - install (or with NULL remove) the event sink
 * @sink: the function every event goes to
 *
 * Context: module init or exit.
 */
void sp_events_set_sink(sp_event_sink_fn sink)
{
	WRITE_ONCE(sp_event_sink, sink);
}

/**
 * sp_event_emit() - hand an event to the sink
 * @ev: the event; read during the call only
 *
 * Context: process context, may sleep.
 */
void sp_event_emit(const struct sp_event *ev)
{
	sp_event_sink_fn sink = READ_ONCE(sp_event_sink);

	if (sink)
		sink(ev);
}

/**
 * sp_event_buf() - a buffer was created or freed
 * @eb: the buffer's snapshot
 * @cmd: STRIXPEER_CMD_BUF_CREATED_NTF or STRIXPEER_CMD_BUF_FREED_NTF
 */
void sp_event_buf(const struct sp_event_buf *eb, u8 cmd)
{
	struct sp_event ev = { .cmd = cmd, .has_buf = true, .buf = *eb };

	sp_event_emit(&ev);
}

/**
 * sp_event_limit() - the caller's allocation was refused by a limit
 * @limit: STRIXPEER_LIMIT_*
 * @size: bytes requested
 */
void sp_event_limit(u32 limit, u64 size)
{
	struct sp_event ev = {
		.cmd = STRIXPEER_CMD_LIMIT_NTF,
		.pid = task_tgid_nr(current),
		.limit = limit,
		.size = size,
	};

	sp_event_emit(&ev);
}

/**
 * sp_event_peer() - what the PeerDirect client did
 * @pid: the importing process
 * @import_id: the import concerned
 * @what: STRIXPEER_PEER_*
 * @size: bytes of the registration
 * @reason: STRIXPEER_INVAL_* for an invalidation, else 0
 */
void sp_event_peer(u32 pid, u32 import_id, u32 what, u64 size, u32 reason)
{
	struct sp_event ev = {
		.cmd = STRIXPEER_CMD_PEER_NTF,
		.pid = pid,
		.peer = what,
		.import_id = import_id,
		.size = size,
		.reason = reason,
	};

	sp_event_emit(&ev);
}

/**
 * sp_event_export() - what happened to one of a buffer's dma-bufs
 * @eb: the buffer's snapshot
 * @what: STRIXPEER_EXPORT_*
 * @dev: the importer's device for ATTACH/DETACH, else NULL
 */
void sp_event_export(const struct sp_event_buf *eb, u32 what,
		     const struct device *dev)
{
	struct sp_event ev = {
		.cmd = STRIXPEER_CMD_EXPORT_NTF,
		.pid = task_tgid_nr(current),
		.has_buf = true,
		.buf = *eb,
		.export = what,
		.device = dev ? dev_name(dev) : NULL,
	};

	sp_event_emit(&ev);
}
