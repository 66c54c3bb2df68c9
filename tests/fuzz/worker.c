// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the worker of one phase. Its set-up (signal guard, the
 * slot arena, exporters, fault injection, dropping privileges) and its loop:
 * the op table, drawn from the PRNG, with the time spent per category.
 */
#include "fuzz.h"

/* ---- the worker's loop --------------------------------------------------- */

static pid_t worker_pid;	/* time is accounted in the worker only, not its children */

void run_ops(struct wstate *w, unsigned long n)
{
	for (unsigned long i = 0; !n || i < n; i++) {
		unsigned long op;

		if (now() > w->deadline)
			break;
		op = __atomic_add_fetch(&sh->op, 1, __ATOMIC_RELAXED);
		if (opt_ops && op > opt_ops)
			break;
		if (w->live_bytes > 4 * w->max_alloc || one_in(&w->r, 400))
			reset_all(w);
		double t = now();
		enum cat c;

		switch (below(&w->r, 20)) {
		case 0: case 1: case 2: case 3: case 4: case 5: op_ioctl(w); c = C_IOCTL; break;
		case 6: op_ioctl_garbage(w); c = C_IOCTL; break;
		case 7: case 8: case 9: op_mmap(w); c = C_MMAP; break;
		case 10: case 11: op_mm(w); c = C_MMAP; break;
		case 12: case 13: case 14: case 15: op_dmabuf(w); c = C_DMABUF; break;
		case 16: case 17: op_netlink(w); c = C_NETLINK; break;
		default: op_proc(w); c = C_PROC; break;	/* the slowest: fork, threads */
		}
		if (getpid() == worker_pid) {
			unsigned long us = (unsigned long)((now() - t) * 1e6);

			__atomic_add_fetch(&sh->usec[c], us, __ATOMIC_RELAXED);
			if (c == C_PROC)
				__atomic_add_fetch(&sh->proc_usec[proc_kind], us, __ATOMIC_RELAXED);
		}
	}
}

void worker(const char *phase, uint64_t seed, double seconds)
{
	struct wstate w;
	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_NODEFER | SA_SIGINFO | SA_ONSTACK };
	static char altstack[65536];
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	char *base;

	memset(&w, 0, sizeof(w));
	worker_pid = getpid();
	w.r.s = seed;
	w.priv = !strstr(phase, "user");
	w.faults = !strncmp(phase, "fault-", 6);
	w.max_alloc = w.priv ? 32 * MiB : opt_memlock;
	w.deadline = now() + seconds;
	w.nl = w.nl_ev = -1;
	for (int i = 0; i < NDEV; i++)
		w.dev[i] = -1;
	for (int i = 0; i < NDB; i++)
		w.d[i].fd = -1;
	/* a signal stack faulted in before any injection: frames never need a new page */
	memset(altstack, 1, sizeof(altstack));
	sigaltstack(&ss, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	scratch_init();
	base = mmap(NULL, (NSLOT + 1) * SLOT_SZ, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		_exit(3);
	w.arena = (char *)(((uintptr_t)base + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	arena_lo = w.arena;
	arena_hi = w.arena + (size_t)NSLOT * SLOT_SZ;
	for (int i = 0; i < NSLOT; i++)
		slot_clear(&w, i);
	/* exporters: opened as root, kept after dropping privileges (a GPU job) */
	w.udmabuf = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	w.heap = open("/dev/dma_heap/system", O_RDWR | O_CLOEXEC);
	w.vgem = open_vgem();
	if (w.udmabuf < 0 || w.heap < 0 || w.vgem < 0)
		printf("fuzz: %s: exporters absent:%s%s%s\n", phase, w.udmabuf < 0 ? " udmabuf" : "",
		       w.heap < 0 ? " dma-heap" : "", w.vgem < 0 ? " vgem" : "");
	close(kmsg);
	/* before dropping privileges: /proc/self/ is root's afterwards; inherited by children */
	if (w.faults && !write_file("/proc/self/make-it-fail", "1"))
		wreport("cannot write /proc/self/make-it-fail: %s", strerror(errno));
	if (!w.priv) {
		struct rlimit rl = { opt_memlock, opt_memlock };

		int tries = 0;

		/* under fault injection these may fail (ENOMEM): try again */
		while (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
		       setresgid(opt_uid, opt_uid, opt_uid) || setresuid(opt_uid, opt_uid, opt_uid)) {
			if (++tries > 1000 || (errno != ENOMEM && errno != EAGAIN)) {
				wreport("worker could not drop privileges: %s", strerror(errno));
				_exit(3);
			}
		}
	}
	run_ops(&w, 0);
	reap_kids(&w, true);
	if (w.faults)
		write_file("/proc/self/make-it-fail", "0");
	reset_all(&w);
	_exit(0);
}
