/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl's objects, one file each, and the printers more than one of
 * them uses. strixpeerctl.c dispatches to these; none calls another's
 * command.
 */
#ifndef SP_CLI_H
#define SP_CLI_H

#include <stdbool.h>

struct sp_config;
struct sp_counters;
struct sp_ctl;

/* status.c */
int cmd_status(int argc, char **argv);
int cmd_version(int argc, char **argv);
extern const char status_usage[], version_usage[];
/* buf.c */
int cmd_buf(int argc, char **argv);
extern const char buf_usage[];
/* stats.c; print_counters(): @all adds the PeerDirect and dma-buf counters */
int cmd_stats(int argc, char **argv);
extern const char stats_usage[];
void print_counters(const struct sp_counters *c, bool all);
void print_peer_pins(const struct sp_counters *c);
/* config.c */
int cmd_config(int argc, char **argv);
extern const char config_usage[];
void print_config(const struct sp_config *cfg);
void print_peer_limit(const struct sp_config *cfg);
/* monitor.c */
int cmd_monitor(int argc, char **argv);
extern const char monitor_usage[];
/* gpu.c: ROCm's runtime through user/gpu/hiprt.c's table */
int cmd_gpu(int argc, char **argv);
extern const char gpu_usage[];
/* bench.c: its own options ("bench --help"); the report follows -j */
int cmd_bench(int argc, char **argv);

#endif
