// SPDX-License-Identifier: MIT
/*
 * strixpeerctl monitor [-t]: the module's events as they happen, one line
 * (or one JSON object) each.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "print.h"
#include "strixpeer.h"
#include "util.h"

const char monitor_usage[] = "strixpeerctl [-j] [-t] monitor [-t]\n";

static const char *const limit_names[] = {
	[SP_LIMIT_MAX_BUF_SIZE] = "max_buf_size",
	[SP_LIMIT_MAX_PINNED_BYTES] = "max_pinned_bytes",
	[SP_LIMIT_MEMLOCK] = "memlock",
	[SP_LIMIT_NO_MEMORY] = "no_memory",
	[SP_LIMIT_MAX_PEER_PINNED_PER_USER] = "max_peer_pinned_per_user",
};

/* "?" for a limit this strixpeerctl does not know (a newer module's) */
static const char *limit_name(enum sp_limit limit)
{
	unsigned int i = (unsigned int)limit;

	return i < sizeof(limit_names) / sizeof(limit_names[0]) && limit_names[i] ?
	       limit_names[i] : "?";
}

static int print_event(const struct sp_event *ev, void *arg)
{
	static const char *const types[] = {
		[SP_EVENT_BUF_CREATED] = "buf-created",
		[SP_EVENT_BUF_FREED] = "buf-freed",
		[SP_EVENT_LIMIT] = "limit",
		[SP_EVENT_CONFIG] = "config",
		[SP_EVENT_PEER] = "peer",
		[SP_EVENT_EXPORT] = "export",
	};
	static const char *const export_names[] = {
		[SP_EXPORT_CREATE] = "create",
		[SP_EXPORT_ATTACH] = "attach",
		[SP_EXPORT_DETACH] = "detach",
		[SP_EXPORT_RELEASE] = "release",
	};
	static const char *const peer_names[] = {
		[SP_PEER_CLAIM] = "claim",
		[SP_PEER_MAP] = "map",
		[SP_PEER_INVALIDATE] = "invalidate",
	};
	static const char *const reason_names[] = {
		[SP_INVAL_UNIMPORT] = "unimport",
		[SP_INVAL_CLOSE] = "close",
		[SP_INVAL_UNMAP] = "unmap",
		[SP_INVAL_EXIT] = "exit",
		[SP_INVAL_MOVE] = "move",
	};
	unsigned int pe = (unsigned int)ev->peer, why = (unsigned int)ev->reason;
	const char *peer = pe < 4 && peer_names[pe] ? peer_names[pe] : "?";
	const char *reason = why < 6 && reason_names[why] ? reason_names[why] : NULL;
	unsigned int ex = (unsigned int)ev->export_event;
	const char *export = ex < 5 && export_names[ex] ? export_names[ex] : "?";
	struct timespec now;

	(void)arg;
	if (cli_timestamps)
		clock_gettime(CLOCK_REALTIME, &now);
	if (!cli_json) {
		if (cli_timestamps) {
			struct tm tm;
			char when[64];

			localtime_r(&now.tv_sec, &tm);
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
			printf("[%s.%06ld", when, now.tv_nsec / 1000);
			strftime(when, sizeof(when), "%z", &tm);
			printf("%.3s:%s] ", when, when + 3);
		}
		switch (ev->type) {
		case SP_EVENT_BUF_CREATED:
		case SP_EVENT_BUF_FREED:
			printf("%s id %u pid %u size %" PRIu64 " node %u page %" PRIu64 "\n",
			       types[ev->type], ev->buf->id, ev->buf->pid, ev->buf->bytes,
			       ev->buf->node, ev->buf->page_size);
			break;
		case SP_EVENT_LIMIT:
			printf("limit %s pid %u size %" PRIu64 "\n",
			       limit_name(ev->limit), ev->pid, ev->bytes);
			break;
		case SP_EVENT_CONFIG:
			printf("config pid %u max_buf_size %" PRIu64 " max_pinned_bytes %" PRIu64
			       " default_node %d require_huge %s\n", ev->pid,
			       ev->config->max_buf_size, ev->config->max_pinned_bytes,
			       ev->config->default_node, ev->config->require_huge ? "yes" : "no");
			break;
		case SP_EVENT_PEER:
			printf("peer %s import %u pid %u size %" PRIu64 "%s%s\n", peer,
			       ev->import_id, ev->pid, ev->bytes, reason ? " reason " : "",
			       reason ? reason : "");
			break;
		case SP_EVENT_EXPORT:
			printf("export %s buf %u pid %u exports %u attachments %u%s%s\n",
			       export, ev->buf->id, ev->pid, ev->buf->exports,
			       ev->buf->attachments, ev->device[0] ? " device " : "",
			       ev->device);
			break;
		}
		fflush(stdout);
		return 0;
	}
	/* -j: one JSON object per line */
	pr_init(true, false);
	pr_obj_open(NULL);
	if (cli_timestamps) {
		char when[32];

		/* seconds since the epoch, as a number with microseconds */
		snprintf(when, sizeof(when), "%lld.%06ld", (long long)now.tv_sec,
			 now.tv_nsec / 1000);
		pr_number("timestamp", "timestamp", when);
	}
	pr_str("event", "event", types[ev->type]);
	if (ev->type == SP_EVENT_BUF_CREATED || ev->type == SP_EVENT_BUF_FREED) {
		pr_obj_open("buf");
		pr_u64("id", "id", ev->buf->id);
		pr_u64("pid", "pid", ev->buf->pid);
		pr_u64("size", "size", ev->buf->bytes);
		pr_u64("node", "node", ev->buf->node);
		pr_u64("page_size", "page size", ev->buf->page_size);
		pr_obj_close();
	} else if (ev->type == SP_EVENT_LIMIT) {
		pr_str("limit", "limit", limit_name(ev->limit));
		pr_u64("pid", "pid", ev->pid);
		pr_u64("size", "size", ev->bytes);
	} else if (ev->type == SP_EVENT_PEER) {
		pr_str("peer", "peer", peer);
		pr_u64("import", "import", ev->import_id);
		pr_u64("pid", "pid", ev->pid);
		pr_u64("size", "size", ev->bytes);
		if (reason)
			pr_str("reason", "reason", reason);
	} else if (ev->type == SP_EVENT_EXPORT) {
		pr_str("export", "export", export);
		pr_u64("buf", "buf", ev->buf->id);
		pr_u64("pid", "pid", ev->pid);
		pr_u64("exports", "exports", ev->buf->exports);
		pr_u64("attachments", "attachments", ev->buf->attachments);
		if (ev->device[0])
			pr_str("device", "device", ev->device);
	} else {
		pr_u64("pid", "pid", ev->pid);
		pr_obj_open("config");
		print_config(ev->config);
		pr_obj_close();
	}
	pr_obj_close();
	pr_done();
	return 0;
}

/* monitor [-t] (or strixpeerctl -t monitor, as ip -t monitor) */
int cmd_monitor(int argc, char **argv)
{
	struct sp_ctl *ctl;
	int ret;

	if (argc >= 1 && (!strcmp(argv[0], "-t") || !strcmp(argv[0], "--timestamp"))) {
		cli_timestamps = true;
		argc--;
		argv++;
	}
	if (argc)
		return bad_usage("monitor", "unexpected argument \"%s\"", argv[0]);
	if (open_ctl(&ctl))
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = sp_ctl_monitor_ex(ctl, SP_MONITOR_PEER | SP_MONITOR_EXPORT,
				print_event, NULL);
	sp_ctl_close(ctl);
	return ret < 0 ? fail() : 0;
}
