/* SPDX-License-Identifier: MIT */
/* What the files of tests/guest/peer.c's program share (tests/guest/peer/). */
#ifndef SP_GUEST_PEER_H
#define SP_GUEST_PEER_H

#include "peer_util.h"
#include "gpusim.h"

#include <grp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* peer/data.c: imports, the data path, declines, zero-change */
void client_registered(void);
void import_errors(void);
void gup_first(void);
void data_vgem_4k(void);
void data_vgem_1m_unaligned(void);
void data_vgem_64m(void);
void data_udmabuf_4k(void);
void data_udmabuf_64m_unaligned(void);
void data_heap_4k(void);
void data_heap_64m_unaligned(void);
void segments_64m(void);
void declines(void);
void other_process(void);
void zero_change_vgem(void);
void zero_change_off(void);

/* peer/invalidate.c: invalidation, kills mid-registration, counters, events, read-only */
void invalidate_unimport(void);
void invalidate_close(void);
void invalidate_munmap(void);
void invalidate_exit(void);
void kill_mid_registration(void);
void counters(void);
void events(void);
void read_only_dmabuf(void);

/* peer/pins.c: the per-user bound on peer pins */
void pin_bound_memlock(void);
void pin_bound_param(void);
void pin_bound_root(void);

/* peer/noapi.c: strixpeer built without the peer-memory API */
void noapi_reports_reason(void);
void noapi_imports_work(void);

#endif /* SP_GUEST_PEER_H */
