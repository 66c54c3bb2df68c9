// SPDX-License-Identifier: MIT
/*
 * The ends of a registration raced against real NIC traffic, through the
 * real peer-memory core (OFED 25.10's, ../shared/peermem) and the rxe that
 * asks it as mlx5 does (tests/kmod/rxe-peer/). A target process maps an
 * sp_gpusim BO as ROCm does (tests/lib/gpusim.h), registers it with a plain
 * ibv_reg_mr() on rxe1 and connects an RC QP; this process streams RDMA
 * WRITEs into it from rxe0 while a thread keeps trying to evict the BO
 * (TTM-like: refused while pinned). Then the registration ends under the
 * traffic, at a random moment:
 *   - hipFree() in the target (the range goes PROT_NONE: implicit import
 *     ends, the core invalidates, rxe fences the MR);
 *   - ibv_dereg_mr() in the target;
 *   - the target is killed (its mm goes first, then its verbs objects).
 * The stream must end in an error completion, the BO must become movable,
 * and gpusim's check of every moved-away backing must count no write after
 * its move (no DMA after invalidation). exit_invalidates_surviving_mr is the
 * exit cause on its own: the MR outlives its dead registrant (its verbs fd
 * passed on), is invalidated, and the NIC is refused. rmmod strixpeer is
 * refused (never blocks) while a registration carries traffic.
 *
 * tests/guest/peer_move.c has the same races against peersim's simulated
 * HCA, with the exporter's move notification and legacy core semantics,
 * which this fixture does not have.
 */
#include "peer_util.h"
#include "gpusim.h"
#include "rdma_pair.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define KiB	1024ULL
#define BO_LEN	(1 * MiB)
#define CHUNK	(64 * KiB)

/*
 * The target's commands, one byte each: F and D are acknowledged with the
 * same byte, S with the verbs fd passed back (sp_send_fd()).
 */
enum { CMD_HIPFREE = 'F', CMD_DEREG = 'D', CMD_SEND_FD = 'S' };

struct target {
	pid_t pid;
	int sock;
	struct conn_info ci;
};

/*
 * The target process: the BO mapped at @va as libhsakmt maps it, registered
 * on rxe1, its QP connected to the initiator's (retry_cnt 6: bounded), then
 * commands until the socket closes. CHECK failures print and exit non-zero.
 */
static void __attribute__((noreturn)) bo_target_main(int sock, int gfd, uint64_t mmap_offset,
						  uint8_t *va)
{
	struct conn_info me, peer;
	struct sp_rc t;
	char c;

	node_open(&t, dev_name("SP_RDMA_TARGET", "rxe1"));
	sp_rocm_map(va, BO_LEN, gfd, mmap_offset);
	t.buf = va;
	t.len = BO_LEN;
	t.mr = ibv_reg_mr(t.pd, va, BO_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ);
	CHECK(t.mr, "target: ibv_reg_mr on the BO mapping: %s", strerror(errno));
	me = node_info(&t);
	CHECK(write(sock, &me, sizeof(me)) == sizeof(me), "target: write");
	CHECK(read(sock, &peer, sizeof(peer)) == sizeof(peer), "target: read");
	node_connect_opts(&t, &me, &peer, 14, 6);
	while (read(sock, &c, 1) == 1) {
		if (c == CMD_HIPFREE) {
			sp_rocm_free(va, BO_LEN);
		} else if (c == CMD_DEREG) {
			CHECK_OK(ibv_dereg_mr(t.mr));
			t.mr = NULL;
		} else if (c == CMD_SEND_FD) {
			sp_send_fd(sock, t.ctx->cmd_fd);
			continue;
		}
		CHECK(write(sock, &c, 1) == 1, "target: ack");
	}
	_exit(0);
}

static void target_cmd(struct target *tg, char c)
{
	char ack = 0;

	CHECK(write(tg->sock, &c, 1) == 1, "command %c: %s", c, strerror(errno));
	CHECK(read(tg->sock, &ack, 1) == 1 && ack == c, "target did not do %c (died?)", c);
}

static void target_wait(struct target *tg, int want_sig)
{
	int st = 0;

	CHECK(waitpid(tg->pid, &st, 0) == tg->pid, "waitpid: %s", strerror(errno));
	if (want_sig)
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == want_sig, "target status %#x", st);
	else
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "target status %#x (see above)", st);
	tg->pid = 0;
}

/* The initiator: host memory on rxe0, registered as any host buffer. */
struct initiator {
	struct sp_rc i;
	uint8_t *host;
};

/* A target mapping @b at @va, and @in connected to it. */
static void pair_up(struct target *tg, struct initiator *in, struct sp_rocm_bo *b, uint8_t *va)
{
	struct conn_info ii;
	int sv[2];

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	fflush(stdout);
	tg->pid = fork();
	CHECK(tg->pid >= 0, "fork: %s", strerror(errno));
	if (tg->pid == 0) {
		close(sv[0]);
		bo_target_main(sv[1], b->gfd, b->mmap_offset, va);
	}
	close(sv[1]);
	tg->sock = sv[0];
	memset(in, 0, sizeof(*in));
	node_open(&in->i, dev_name("SP_RDMA_INITIATOR", "rxe0"));
	in->host = aligned_alloc(4096, BO_LEN);
	CHECK(in->host, "host buffer");
	memset(in->host, 0xd5, BO_LEN);
	in->i.buf = in->host;
	in->i.len = BO_LEN;
	in->i.mr = ibv_reg_mr(in->i.pd, in->host, BO_LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(in->i.mr, "ibv_reg_mr on host memory: %s", strerror(errno));
	CHECK(read(tg->sock, &tg->ci, sizeof(tg->ci)) == sizeof(tg->ci),
	      "the target did not register (see above)");
	ii = node_info(&in->i);
	CHECK(write(tg->sock, &ii, sizeof(ii)) == sizeof(ii), "write");
	node_connect_opts(&in->i, &ii, &tg->ci, 14, 6);
}

static void initiator_close(struct initiator *in)
{
	CHECK_OK(ibv_dereg_mr(in->i.mr));
	in->i.mr = NULL;
	sp_rc_close(&in->i);
	free(in->host);
}

/* One signalled WRITE of @len bytes at @off into the target's MR. */
static struct ibv_wc write_one(struct initiator *in, const struct target *tg, uint64_t off,
			       uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(in->host + off), .length = len,
			       .lkey = in->i.mr->lkey };
	char why[256];

	CHECK(sp_rc_post(&in->i, IBV_WR_RDMA_WRITE, &sge, tg->ci.addr + off, tg->ci.rkey, 1,
			 IBV_SEND_SIGNALED, why, sizeof(why)) == 0, "%s", why);
	return node_wait_any(&in->i);
}

/* The first WRITE, seen through this process's own view of the BO. */
static void first_write_seen(struct initiator *in, const struct target *tg, const uint8_t *view)
{
	struct ibv_wc wc;

	sp_fill(in->host, 8192, 0, 5);
	wc = write_one(in, tg, 0, 8192);
	CHECK(wc.status == IBV_WC_SUCCESS, "first WRITE: %s", ibv_wc_status_str(wc.status));
	CHECK(sp_verify(view, 8192, 0, 5) < 0, "first WRITE not seen through the BO");
}

/* --- the NIC's stream and the exporter's evictions ------------------------- */

struct stream {
	struct initiator *in;
	const struct target *tg;
	volatile int stop, done;
	unsigned long ok;
	enum ibv_wc_status status;
};

/* WRITEs, one after another, until one fails or stop. */
static void *stream_run(void *arg)
{
	struct stream *s = arg;

	for (unsigned int k = 0; !s->stop; k++) {
		uint64_t off = (uint64_t)(k % (BO_LEN / CHUNK)) * CHUNK;
		struct ibv_wc wc = write_one(s->in, s->tg, off, CHUNK);

		if (wc.status != IBV_WC_SUCCESS) {
			s->status = wc.status;
			break;
		}
		s->ok++;
	}
	s->done = 1;
	return NULL;
}

struct evictor {
	int gfd;
	uint32_t bo;
	volatile int stop;
	unsigned long moves;
	int err;
};

/* The exporter tries to move the BO (GTT <-> SYSTEM), over and over. */
static void *evict_run(void *arg)
{
	struct evictor *e = arg;
	uint32_t moved;

	for (unsigned int k = 0; !e->stop; k++) {
		uint32_t to = k & 1 ? SP_GPUSIM_DOMAIN_GTT : SP_GPUSIM_DOMAIN_SYSTEM;

		if (gpusim_move(e->gfd, e->bo, to, 0, &moved) == 0) {
			e->moves += moved;
		} else if (errno != EBUSY) {
			e->err = errno;
			break;
		}
		usleep((useconds_t)(rand() % 500));
	}
	return NULL;
}

static unsigned int race_rounds(void)
{
	/* the debug kernel (kmemleak, KASAN) runs everything several times slower */
	return access("/sys/kernel/debug/kmemleak", F_OK) == 0 ? 3 : 8;
}

/* Each cause's error completion for the WRITE after the end. */
static int status_expected(enum ibv_wc_status st, int t)
{
	if (st == IBV_WC_REM_ACCESS_ERR)
		return 1;
	/* a killed target's QP is gone too: nobody answers, retries run out */
	return t == 'K' && st == IBV_WC_RETRY_EXC_ERR;
}

/*
 * @t: CMD_HIPFREE, CMD_DEREG, or 'K' (SIGKILL). Rounds of: target up,
 * stream and evictions running, the end at a random moment, the stream
 * refused within 60 s, the target gone, the BO movable; then no stale write.
 */
static void race(int t)
{
	unsigned long ok = 0, moves = 0, nrefused[2] = { 0 };
	unsigned int n = race_rounds();
	struct sp_rocm_bo b;
	uint64_t stale0;
	uint8_t *view;

	srand((unsigned int)getpid());
	sp_rocm_bo_new(&b, BO_LEN, SP_GPUSIM_DOMAIN_GTT);
	sp_rocm_free(b.va, BO_LEN);	/* the target maps it; this view only looks */
	view = mmap(NULL, BO_LEN, PROT_READ, MAP_SHARED, b.gfd, (off_t)b.mmap_offset);
	CHECK(view != MAP_FAILED, "view: %s", strerror(errno));
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	for (unsigned int r = 0; r < n; r++) {
		struct evictor ev = { .gfd = b.gfd, .bo = b.handle };
		struct initiator in;
		struct target tg;
		struct stream s;
		pthread_t st, et;

		pair_up(&tg, &in, &b, b.va);
		first_write_seen(&in, &tg, view);
		s = (struct stream){ .in = &in, .tg = &tg };
		CHECK(pthread_create(&st, NULL, stream_run, &s) == 0, "pthread");
		CHECK(pthread_create(&et, NULL, evict_run, &ev) == 0, "pthread");
		/* a random point in the stream, not a wait for anything */
		usleep((useconds_t)(1000 + rand() % 20000));
		CHECK(!s.done, "round %u: the stream failed before the end: %s after %lu WRITEs", r,
		      ibv_wc_status_str(s.status), s.ok);
		if (t == 'K') {
			kill(tg.pid, SIGKILL);
			target_wait(&tg, SIGKILL);
		} else {
			target_cmd(&tg, (char)t);
		}
		/* the signal: the stream's error completion (at most 60 s) */
		for (int k = 0; k < 6000 && !s.done; k++)
			usleep(10000);
		s.stop = 1;
		if (!s.done)
			tap_diag("round %u: %lu WRITEs and still no refusal 60 s after the end", r,
				 s.ok);
		pthread_join(st, NULL);
		CHECK(s.done && s.status != IBV_WC_SUCCESS,
		      "round %u: the NIC was never refused (%lu WRITEs done)", r, s.ok);
		CHECK(status_expected(s.status, t), "round %u: the stream ended with %s", r,
		      ibv_wc_status_str(s.status));
		nrefused[s.status == IBV_WC_RETRY_EXC_ERR]++;
		/* the registrant goes; the BO must then be free to move */
		if (tg.pid) {
			close(tg.sock);
			target_wait(&tg, 0);
		} else {
			close(tg.sock);
		}
		check_all_released();
		ev.stop = 1;
		pthread_join(et, NULL);
		CHECK(!ev.err, "round %u: MOVE: %s", r, strerror(ev.err));
		CHECK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL) == 0 ||
		      errno != EBUSY, "round %u: still pinned after its registrant went", r);
		initiator_close(&in);
		ok += s.ok;
		moves += ev.moves;
	}
	tap_diag("%u rounds: %lu WRITEs done under evictions, %lu BO moves, refused %lu x remote access, %lu x retries exceeded",
		 n, ok, moves, nrefused[0], nrefused[1]);
	gpusim_check_no_stale(b.gfd, stale0);
	munmap(view, BO_LEN);
	sp_rocm_bo_free(&b);
	check_all_released();
}

static void race_hipfree_under_traffic(void) { race(CMD_HIPFREE); }
static void race_dereg_under_traffic(void) { race(CMD_DEREG); }
static void race_exit_under_traffic(void) { race('K'); }

/*
 * The exit cause alone: the target passes its verbs fd on and is killed.
 * Its MR and QP live on (this process holds the fd), but the mapping died
 * with the process: the implicit import ends, the core invalidates, the
 * NIC's next WRITE is refused, the BO is unpinned and moves without a stale
 * write; the fd's close then deregisters and releases everything.
 */
static void exit_invalidates_surviving_mr(void)
{
	struct sp_peer_counters c0, c;
	struct initiator in;
	struct sp_rocm_bo b;
	struct target tg;
	struct ibv_wc wc;
	uint64_t stale0;
	uint32_t moved = 0;
	uint8_t *view;
	int vfd;

	sp_rocm_bo_new(&b, BO_LEN, SP_GPUSIM_DOMAIN_GTT);
	sp_rocm_free(b.va, BO_LEN);
	view = mmap(NULL, BO_LEN, PROT_READ, MAP_SHARED, b.gfd, (off_t)b.mmap_offset);
	CHECK(view != MAP_FAILED, "view: %s", strerror(errno));
	stale0 = gpusim_stats(b.gfd, SP_GPUSIM_STATS_DRAIN).stale_writes;
	pair_up(&tg, &in, &b, b.va);
	first_write_seen(&in, &tg, view);
	CHECK(write(tg.sock, &(char){ CMD_SEND_FD }, 1) == 1, "write");
	vfd = sp_recv_fd(tg.sock);
	CHECK_ERR(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT, NULL), EBUSY);
	c0 = peer_stats();
	CHECK(c0.registrations == 1 && c0.imports == 1, "registrations %llu imports %llu",
	      (unsigned long long)c0.registrations, (unsigned long long)c0.imports);
	kill(tg.pid, SIGKILL);
	target_wait(&tg, SIGKILL);
	close(tg.sock);
	/* the signal: the invalidation count (exit ends the import from a worker) */
	c = peer_stats();
	for (int i = 0; i < 3000 && c.invalidations == c0.invalidations; i++) {
		usleep(20000);
		c = peer_stats();
	}
	CHECK(c.invalidations == c0.invalidations + 1,
	      "invalidations %llu -> %llu 60 s after the registrant's exit",
	      (unsigned long long)c0.invalidations, (unsigned long long)c.invalidations);
	CHECK(c.registrations == 1, "the MR should outlive its registrant: registrations %llu",
	      (unsigned long long)c.registrations);
	sp_fill(in.host, 4096, 4096, 77);
	wc = write_one(&in, &tg, 4096, 4096);
	CHECK(wc.status == IBV_WC_REM_ACCESS_ERR,
	      "WRITE into the dead registrant's MR: %s, wanted remote access error",
	      ibv_wc_status_str(wc.status));
	CHECK(sp_verify(view, 8192, 0, 5) < 0, "the BO changed after invalidation");
	CHECK_OK(gpusim_move(b.gfd, b.handle, 0, SP_GPUSIM_MOVE_EVICT | SP_GPUSIM_MOVE_WAIT,
			     &moved));
	CHECK(moved == 1, "the invalidated BO did not move (%u)", moved);
	close(vfd);	/* the last reference: the MR is deregistered now */
	check_all_released();
	initiator_close(&in);
	CHECK(sp_verify(view, 8192, 0, 5) < 0, "bytes lost in the move");
	gpusim_check_no_stale(b.gfd, stale0);
	munmap(view, BO_LEN);
	sp_rocm_bo_free(&b);
}

/* While a registration carries traffic, rmmod strixpeer is refused, never blocks. */
static void rmmod_refused_under_traffic(void)
{
	struct sp_rocm_bo b;
	struct initiator in;
	struct target tg;
	struct stream s;
	struct evictor ev;
	pthread_t st, et;
	unsigned long before;
	uint8_t *view;

	sp_rocm_bo_new(&b, BO_LEN, SP_GPUSIM_DOMAIN_GTT);
	sp_rocm_free(b.va, BO_LEN);
	view = mmap(NULL, BO_LEN, PROT_READ, MAP_SHARED, b.gfd, (off_t)b.mmap_offset);
	CHECK(view != MAP_FAILED, "view: %s", strerror(errno));
	pair_up(&tg, &in, &b, b.va);
	first_write_seen(&in, &tg, view);
	s = (struct stream){ .in = &in, .tg = &tg };
	ev = (struct evictor){ .gfd = b.gfd, .bo = b.handle };
	CHECK(pthread_create(&st, NULL, stream_run, &s) == 0, "pthread");
	CHECK(pthread_create(&et, NULL, evict_run, &ev) == 0, "pthread");
	for (int i = 0; i < 20; i++) {
		CHECK_ERR(syscall(SYS_delete_module, "strixpeer", O_NONBLOCK), EWOULDBLOCK);
		usleep((useconds_t)(rand() % 5000));
	}
	/* the signal that traffic flowed beside the refusals: more WRITEs done */
	before = s.ok;
	for (int k = 0; k < 6000 && s.ok == before && !s.done; k++)
		usleep(10000);
	s.stop = 1;
	ev.stop = 1;
	pthread_join(st, NULL);
	pthread_join(et, NULL);
	CHECK(s.status == IBV_WC_SUCCESS, "the stream failed: %s after %lu WRITEs",
	      ibv_wc_status_str(s.status), s.ok);
	CHECK(s.ok > before, "no WRITE completed in 60 s (%lu done)", s.ok);
	CHECK(ev.moves == 0 && !ev.err, "a registered BO moved %lu times (err %d)", ev.moves,
	      ev.err);
	tap_diag("20 rmmods refused beside %lu WRITEs", s.ok);
	close(tg.sock);
	target_wait(&tg, 0);
	initiator_close(&in);
	check_all_released();
	munmap(view, BO_LEN);
	sp_rocm_bo_free(&b);
}

static const struct tap_case cases[] = {
	TAP_CASE(exit_invalidates_surviving_mr),
	TAP_CASE(rmmod_refused_under_traffic),
	TAP_CASE_T(race_hipfree_under_traffic, 600),
	TAP_CASE_T(race_dereg_under_traffic, 600),
	TAP_CASE_T(race_exit_under_traffic, 600),
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
