/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the PeerDirect test programs (tests/peer*.c): the simulated
 * PeerDirect core + HCA as the tests drive it (registrations with write
 * access, DMA, the MR's state), strixpeer's imports through the raw ioctls,
 * and the module's PeerDirect counters.
 */
#ifndef SP_PEER_UTIL_H
#define SP_PEER_UTIL_H

#include "dmabuf_util.h"
#include "peersim.h"

#include <time.h>

#define SIM_PARAM(n)	PEERSIM_SYSFS_PARAMS "/" n

int sim_open(void);

struct peersim_info sim_info(int sim);

/* REG_MR; returns 0 or -errno, fills *r. */
int sim_reg(int sim, const void *addr, uint64_t len, struct peersim_reg_mr *r);

struct peersim_mr_info sim_mr(int sim, uint32_t handle);

int sim_dma(int sim, unsigned long cmd, uint32_t handle, uint64_t off,
	    void *buf, uint64_t len);

void sim_dereg(int sim, uint32_t handle);

/* The strixpeer client as the simulated core sees it. */
struct peersim_client sim_client(int sim);

void write_param(const char *path, const char *val);

struct sp_peer_counters peer_stats(void);

/* GPU bytes pinned by PeerDirect: node-wide, the caller's uid's, the bound. */
struct sp_peer_pins peer_pins(void);

int sp_import_raw(int fd, int dmabuf, uint64_t off, uint64_t len, const void *va,
		  struct strixpeer_import *out);

int sp_unimport_raw(int fd, uint32_t handle);

/* Nothing registered, nothing imported, all counters of live objects 0. */
void check_all_released(void);

uint64_t now_ns(void);

/* The NIC writes a pattern into MR @h; the CPU must see it at @va. */
void sim_write_seen(int sim, uint32_t h, uint8_t *va, uint64_t len,
		    uint32_t seed);

#endif /* SP_PEER_UTIL_H */
