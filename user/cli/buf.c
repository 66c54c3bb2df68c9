// SPDX-License-Identifier: MIT
/*
 * strixpeerctl buf show [pid N]: the buffers the module lists to the
 * caller, with the processes that hold them (holders.c's /proc scan).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>

#include "cli.h"
#include "holders.h"
#include "print.h"
#include "strixpeer.h"
#include "util.h"

const char buf_usage[] = "strixpeerctl [-j] buf show [pid PID]\n";

struct buf_list {
	bool any;
	struct sp_holders h;
};

/*
 * The buffer's holders: JSON "holders" (one object each) and
 * "dmabufs_unheld" (inodes of dma-bufs no process has an fd or mapping
 * of); the table's HOLDERS cell says the same in words.
 */
static void print_holders(const struct sp_buf_entry *e, const struct sp_holders *h)
{
	char text[1024] = "";
	size_t len = 0;
	unsigned int mapped = 0;

#define HOLD_APPEND(...) do { \
		if (len < sizeof(text)) \
			len += (size_t)snprintf(text + len, sizeof(text) - len, __VA_ARGS__); \
	} while (0)
	if (cli_json)
		pr_arr_open("holders", NULL);
	for (size_t i = 0; i < h->n; i++) {
		const struct sp_hold *x = &h->v[i];

		if (!sp_hold_matches(x, e))
			continue;
		if (x->kind == SP_HOLD_MAP)
			mapped++;
		if (cli_json) {
			pr_hold(x);
		} else if (x->fd >= 0) {
			HOLD_APPEND("%s%d(%s) %s %d", len ? ", " : "", x->pid,
				    x->comm, sp_hold_kind_name(x->kind), x->fd);
		} else {
			HOLD_APPEND("%s%d(%s) %s", len ? ", " : "", x->pid,
				    x->comm, sp_hold_kind_name(x->kind));
		}
	}
	if (cli_json) {
		pr_arr_close();
		pr_arr_open("dmabufs_unheld", NULL);
	}
	for (uint32_t i = 0; i < e->nr_dmabuf_inos; i++) {
		if (sp_dmabuf_held(h, e->dmabuf_inos[i]))
			continue;
		if (cli_json)
			pr_u64(NULL, NULL, e->dmabuf_inos[i]);
		else
			HOLD_APPEND("%sdma-buf ino %llu: no process holds an fd or mapping of it (in flight in a unix socket, or held by the kernel: an importer such as an MR)",
				    len ? ", " : "", (unsigned long long)e->dmabuf_inos[i]);
	}
	if (cli_json) {
		pr_arr_close();
		/* holders among these are not named: only root sees all */
		pr_u64("unreadable_processes", NULL, h->unreadable);
	}
	if (e->map_count > mapped) {
		if (cli_json)
			pr_u64("mappings_unattributed", NULL, e->map_count - mapped);
		else
			HOLD_APPEND("%s%u mapping(s) not attributed (handle freed, or a process not readable)",
				    len ? ", " : "", e->map_count - mapped);
	}
#undef HOLD_APPEND
	if (!cli_json)
		pr_str("holders", "HOLDERS", len ? text : "-");
}

static int print_buf(const struct sp_buf_entry *e, void *arg)
{
	struct buf_list *l = arg;

	l->any = true;
	pr_obj_open(NULL);
	pr_u64("id", "ID", e->id);
	pr_u64("pid", "PID", e->pid);
	pr_bytes("size", "SIZE", e->bytes);
	pr_u64("node", "NODE", e->node);
	pr_bytes("page_size", "PAGE", e->page_size);
	pr_u64("chunks", "CHUNKS", e->chunks);
	pr_u64("map_count", "MAPS", e->map_count);
	pr_bool("pinned", "PINNED", e->pinned);
	pr_bool("exported", "EXPORTED", e->exported);
	pr_u64("dmabufs", "DMABUFS", e->exports);
	pr_u64("attachments", "ATTACHED", e->attachments);
	pr_str("comm", "COMM", e->comm[0] ? e->comm : "?");
	pr_u64("handle", "HANDLE", e->handle);
	print_holders(e, &l->h);
	pr_obj_close();
	return 0;
}

/* buf show [pid N] */
static int cmd_buf_show(int argc, char **argv)
{
	struct buf_list l = { false };
	struct sp_ctl *ctl;
	uint32_t pid = 0;
	int ret;

	if (argc >= 1 && !strcmp(argv[0], "pid")) {
		char *end;
		unsigned long v;

		if (argc < 2)
			return bad_usage("buf", "\"pid\" needs a process id");
		errno = 0;
		v = strtoul(argv[1], &end, 10);
		if (errno || *end || end == argv[1] || argv[1][0] == '-' || !v || v > UINT32_MAX)
			return bad_usage("buf", "bad pid \"%s\": a process id, 1 or more", argv[1]);
		pid = (uint32_t)v;
		if (extra_args("buf", argc, argv, 2))
			return 2;
	} else if (argc) {
		return bad_usage("buf", "unexpected argument \"%s\"", argv[0]);
	}
	if (open_ctl(&ctl))
		return 1;
	sp_holders_scan(&l.h);
	pr_arr_open(NULL, NULL);
	ret = sp_ctl_bufs(ctl, pid, print_buf, &l);
	pr_arr_close();
	pr_done();
	sp_ctl_close(ctl);
	sp_holders_free(&l.h);
	if (ret < 0)
		return fail();
	if (!cli_json && !l.any)
		printf("no buffers\n");
	if (!cli_json && l.h.unreadable)
		printf("(%u processes' fds and maps not readable: holders among them are not named; run as root to see every holder)\n",
		       l.h.unreadable);
	if (!cli_json && !has_cap(CAP_SYS_ADMIN))
		printf("(yours only: the module lists every user's buffers to CAP_SYS_ADMIN)\n");
	return 0;
}

static const struct cmd buf_cmds[] = {
	{ "show", cmd_buf_show, "list buffers [pid N]", NULL },
	{ NULL, NULL, NULL, NULL },
};

int cmd_buf(int argc, char **argv)
{
	return dispatch(buf_cmds, "buf", buf_usage, argc, argv);
}
