// SPDX-License-Identifier: MIT
/*
 * ucx_put - UCX (UCP) puts and gets into a strixpeer buffer on another node
 *
 *   target:    ucx_put -l [PORT]             (default port 13377)
 *   initiator: ucx_put HOST [PORT [MAXSIZE]] (default 64 MiB)
 *
 * The target allocates a strixpeer buffer, ucp_mem_map()s it in place
 * (address + length: UCX registers the pages, allocates nothing), packs its
 * rkey and sends worker address, buffer address and rkey over a TCP
 * connection (the out-of-band channel). For every size from 4 KiB to
 * MAXSIZE (x4) the initiator ucp_put_nbx()es a pattern from its own
 * strixpeer buffer into the target's, the target checks every byte and
 * writes another pattern, the initiator ucp_get_nbx()es that back and
 * checks every byte. Both then print what strixpeer reports of their
 * buffer ("pinned by a NIC registration"); the initiator prints its
 * endpoint's lanes (transport/device). Exit status 0: every byte arrived.
 *
 * UCX_PUT_MEM=memalign: both sides use memalign()ed memory instead of a
 * strixpeer buffer - plain host memory to compare with, or GPU memory when
 * an LD_PRELOAD allocator makes it so (the test suite's hipMalloc
 * stand-in, with libstrixpeer-preload.so registering it for UCX).
 *
 * On a cluster (two Strix Halo nodes, ConnectX over RoCE; README "Run it
 * on a cluster"):
 *   cc -O2 ucx_put.c $(pkg-config --cflags --libs strixpeer ucx) -o ucx_put
 *   nodeB$ UCX_TLS=rc,self UCX_NET_DEVICES=mlx5_0:1 ./ucx_put -l
 *   nodeA$ UCX_TLS=rc,self UCX_NET_DEVICES=mlx5_0:1 ./ucx_put nodeB
 * "rc_verbs/mlx5_0:1" (or rc_mlx5) in the lane lines is the RDMA path.
 */
#include <malloc.h>
#include <poll.h>
#include <string.h>
#include <strixpeer.h>
#include <ucp/api/ucp.h>
#include "example.h"

#define OK(x) do { ucs_status_t s_ = (x); \
	if (s_ != UCS_OK) DIE("ucx_put: %s: %s", #x, ucs_status_string(s_)); } while (0)

struct hello { uint64_t addr, len, worker_len, rkey_len; };
struct cmd { uint64_t len, seed; int64_t bad; };	/* len 0: done */
static ucp_worker_h worker;

static unsigned long missed_wakeups;

/* Progresses UCX, sleeping in poll() rather than spinning, until @req
 * completed (@fd < 0) or @fd is readable. The sleep is bounded (1 s): a
 * wakeup the event fd never delivers (an armed CQ whose completion raised
 * no event) then costs a second instead of the run, and is counted. */
static void wait_for(void *req, int fd)
{
	struct pollfd p[2] = { { .events = POLLIN }, { .fd = fd, .events = POLLIN } };

	if (UCS_PTR_IS_ERR(req))
		DIE("ucx_put: %s", ucs_status_string(UCS_PTR_STATUS(req)));
	OK(ucp_worker_get_efd(worker, &p[0].fd));
	while (fd >= 0 ? !p[1].revents : req && ucp_request_check_status(req) == UCS_INPROGRESS)
		if (!ucp_worker_progress(worker) && ucp_worker_arm(worker) == UCS_OK &&
		    poll(p, 2, 1000) == 0 && ucp_worker_progress(worker))
			missed_wakeups++;
	if (req) {
		OK(ucp_request_check_status(req));
		ucp_request_free(req);
	}
}

/* What strixpeer reports of this process's buffers. */
static int show(const struct sp_buf_entry *e, void *who)
{
	printf("%s: strixpeer buffer %u: %llu bytes, node %u, %s\n", (char *)who, e->id,
	       (unsigned long long)e->bytes, e->node, e->pinned ? "pinned by a NIC registration" :
	       "not registered");
	return 0;
}

int main(int argc, char **argv)
{
	int target = argc > 1 && !strcmp(argv[1], "-l"), fd;
	const char *mem = getenv("UCX_PUT_MEM");
	uint64_t max = argc > 3 ? strtoull(argv[3], NULL, 0) : 64 << 20;
	ucp_params_t cp = { .field_mask = UCP_PARAM_FIELD_FEATURES,
			    .features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP };
	ucp_worker_params_t wp = { 0 };
	ucp_mem_map_params_t mp = { .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
						  UCP_MEM_MAP_PARAM_FIELD_LENGTH };
	ucp_ep_params_t ep_p = { .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS };
	ucp_request_param_t rp = { 0 };
	struct sp_ctl *ctl = NULL;
	struct sp_dev *dev;
	struct sp_buf *buf;
	struct hello h;
	struct cmd c;
	ucp_context_h ctx;
	ucp_address_t *wa;
	ucp_mem_h memh;
	ucp_rkey_h rkey;
	ucp_ep_h ep;
	void *rk;

	if (argc < 2 || !strcmp(argv[1], "-h"))
		DIE("usage: ucx_put -l [PORT] | ucx_put HOST [PORT [MAXSIZE]]");
	if (sp_dev_open(NULL, &dev))
		DIE("ucx_put: strixpeer: %s", sp_errmsg());
	if (mem && !strcmp(mem, "memalign")) {
		buf = NULL;
		mp.address = memalign(4096, max);
		mp.length = max;
		if (!mp.address)
			DIE("ucx_put: memalign of %llu bytes failed", (unsigned long long)max);
	} else {
		if (sp_buf_alloc(dev, max, SP_NODE_DEFAULT, 0, &buf))
			DIE("ucx_put: strixpeer: %s", sp_errmsg());
		mp.address = sp_buf_addr(buf);
		mp.length = sp_buf_size(buf);
	}
	OK(ucp_init(&cp, NULL, &ctx));
	OK(ucp_worker_create(ctx, &wp, &worker));
	OK(ucp_mem_map(ctx, &mp, &memh));	/* registers the buffer with the NIC */
	fd = tcp(target ? NULL : argv[1], argc > 2 ? argv[2] : "13377");
	if (target) {
		OK(ucp_worker_get_address(worker, &wa, &h.worker_len));
		OK(ucp_rkey_pack(ctx, memh, &rk, &h.rkey_len));
		h.addr = (uintptr_t)mp.address;
		h.len = mp.length;
		io(fd, &h, sizeof(h), 1);
		io(fd, wa, h.worker_len, 1);
		io(fd, rk, h.rkey_len, 1);
		for (;;) {	/* the initiator's puts and gets need no CPU here */
			wait_for(NULL, fd);
			io(fd, &c, sizeof(c), 0);
			if (!c.len)
				break;
			c.bad = pattern(mp.address, c.len, c.seed, 1);
			pattern(mp.address, c.len, ~c.seed, 0);
			io(fd, &c, sizeof(c), 1);
		}
		ucp_rkey_buffer_release(rk);
		ucp_worker_release_address(worker, wa);
	} else {
		io(fd, &h, sizeof(h), 0);
		io(fd, wa = malloc(h.worker_len), h.worker_len, 0);
		io(fd, rk = malloc(h.rkey_len), h.rkey_len, 0);
		ep_p.address = wa;
		OK(ucp_ep_create(worker, &ep_p, &ep));
		OK(ucp_ep_rkey_unpack(ep, rk, &rkey));
		for (uint64_t len = 4096; len <= max && len <= h.len; len *= 4) {
			c = (struct cmd){ .len = len, .seed = len * 7919 };
			pattern(mp.address, len, c.seed, 0);
			wait_for(ucp_put_nbx(ep, mp.address, len, h.addr, rkey, &rp), -1);
			wait_for(ucp_ep_flush_nbx(ep, &rp), -1);
			io(fd, &c, sizeof(c), 1);
			io(fd, &c, sizeof(c), 0);	/* the target checked and refilled */
			if (c.bad >= 0)
				DIE("ucx_put: put of %llu bytes: byte %lld wrong at the target",
				    (unsigned long long)len, (long long)c.bad);
			memset(mp.address, 0, len);
			wait_for(ucp_get_nbx(ep, mp.address, len, h.addr, rkey, &rp), -1);
			if ((c.bad = pattern(mp.address, len, ~c.seed, 1)) >= 0)
				DIE("ucx_put: get of %llu bytes: byte %lld wrong", (unsigned long long)len,
				    (long long)c.bad);
			printf("initiator: %llu bytes put and got back, every byte verified\n",
			       (unsigned long long)len);
		}
		ucp_ep_print_info(ep, stdout);
		ucp_rkey_destroy(rkey);
		wait_for(ucp_ep_close_nbx(ep, &rp), -1);
		c.len = 0;
		io(fd, &c, sizeof(c), 1);
		free(wa);
		free(rk);
	}
	if (missed_wakeups)
		printf("%s: %lu waits ended by the 1 s timer with UCX work pending (missed wakeups)\n",
		       target ? "target" : "initiator", missed_wakeups);
	if (sp_ctl_open(&ctl) == 0)
		sp_ctl_bufs(ctl, (uint32_t)getpid(), show, target ? "target" : "initiator");
	sp_ctl_close(ctl);
	ucp_mem_unmap(ctx, memh);
	ucp_worker_destroy(worker);
	ucp_cleanup(ctx);
	if (buf)
		sp_buf_free(buf);
	else
		free(mp.address);
	sp_dev_close(dev);
	return 0;
}
