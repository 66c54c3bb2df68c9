// SPDX-License-Identifier: MIT
/*
 * strixpeer-fuzz: the process and fd ops. fork, kill -9 in the middle of
 * alloc/map/export/import, the execve chain carrying non-CLOEXEC fds
 * (exec_child(), run by main() for --exec-child), SCM_RIGHTS, threads
 * sharing one device fd, closing and opening device fds.
 */
#include "fuzz.h"

/* ---- processes and fds ------------------------------------------------------------ */

void reap_kids(struct wstate *w, bool block)
{
	for (int i = 0; i < NKIDS; i++) {
		if (w->kids[i] <= 0)
			continue;
		if (block) {	/* the end of the phase: kill -9 once more */
			kill(w->kids[i], SIGKILL);
			waitpid(w->kids[i], NULL, 0);
			w->kids[i] = 0;
		} else if (waitpid(w->kids[i], NULL, WNOHANG) != 0) {
			w->kids[i] = 0;
		}
	}
}

static int kid_slot(struct wstate *w)
{
	reap_kids(w, false);
	for (int i = 0; i < NKIDS; i++)
		if (w->kids[i] == 0)
			return i;
	return -1;
}

/* The exec chain: argv = exe --exec-child SEED DEPTH; fds inherited. */
int exec_child(uint64_t seed, int depth)
{
	struct rng r = { seed };
	struct strixpeer_buf_alloc a = { .node = STRIXPEER_NODE_DEFAULT };
	int fd, inherited = 0;
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;

	/* every inherited fd: the device ones must refuse us (EACCES), dma-bufs work */
	while (dir && (e = readdir(dir))) {
		int f = atoi(e->d_name);
		struct strixpeer_version v;

		if (f > 2 && f != dirfd(dir) && ioctl(f, STRIXPEER_IOC_VERSION, &v) == 0)
			inherited++;
	}
	if (dir)
		closedir(dir);
	fd = open(dev_path, O_RDWR);	/* not CLOEXEC: the next image inherits it */
	a.size = (below(&r, 2) + 1) * 2 * MiB;
	if (fd >= 0 && ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a) == 0) {
		struct strixpeer_buf_export ex = { .handle = a.handle, .flags = STRIXPEER_EXPORT_RDWR };

		if (one_in(&r, 2))
			mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)a.mmap_offset);
		ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &ex);	/* not CLOEXEC */
	}
	if (depth > 0) {
		char s[32], d[16];

		snprintf(s, sizeof(s), "%" PRIu64, rnd(&r));
		snprintf(d, sizeof(d), "%d", depth - 1);
		execl(self_exe, self_exe, "--exec-child", s, d, (char *)NULL);
	}
	usleep((useconds_t)below(&r, 300000));
	(void)inherited;
	return 0;
}

struct thr {
	int fd;
	uint64_t seed;
	uint32_t handles[8];
};

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	struct rng r = { t->seed };
	uint32_t mine[8];
	int nmine = 0;

	for (int i = 0; i < 16; i++) {
		uint32_t h = one_in(&r, 2) && nmine ? mine[below(&r, (uint64_t)nmine)] : t->handles[below(&r, 8)];

		switch (below(&r, 6)) {
		case 0: {
			struct strixpeer_buf_alloc a = { .size = (below(&r, 512) + 1) * PAGE,
							 .node = STRIXPEER_NODE_DEFAULT };

			if (nmine < 8 && ioctl(t->fd, STRIXPEER_IOC_BUF_ALLOC, &a) == 0)
				mine[nmine++] = a.handle;
			break;
		}
		case 1: {
			struct strixpeer_buf_free f = { .handle = h };

			ioctl(t->fd, STRIXPEER_IOC_BUF_FREE, &f);
			break;
		}
		case 2: {
			struct strixpeer_buf_info in = { .handle = h };

			if (ioctl(t->fd, STRIXPEER_IOC_BUF_INFO, &in) == 0 && in.size && in.size <= 64 * MiB) {
				char *p = mmap(NULL, in.size, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd,
					       (off_t)in.mmap_offset);

				if (p != MAP_FAILED) {
					touch(p, true, 1);
					munmap(p, in.size);
				}
			}
			break;
		}
		case 3: {
			struct strixpeer_buf_export e = { .handle = h, .flags = STRIXPEER_EXPORT_CLOEXEC };

			if (ioctl(t->fd, STRIXPEER_IOC_BUF_EXPORT, &e) == 0)
				close(e.fd);
			break;
		}
		case 4: {
			struct strixpeer_unimport u = { .handle = (uint32_t)below(&r, 8) };

			ioctl(t->fd, STRIXPEER_IOC_UNIMPORT, &u);
			break;
		}
		default:
			sched_yield();
			break;
		}
		__atomic_add_fetch(&sh->calls[C_IOCTL], 1, __ATOMIC_RELAXED);
	}
	for (int i = 0; i < nmine; i++) {
		struct strixpeer_buf_free f = { .handle = mine[i] };

		ioctl(t->fd, STRIXPEER_IOC_BUF_FREE, &f);
	}
	return NULL;
}

const char *const proc_kind_name[9] = {
	"fork", "fork", "kill-9", "exec", "scm_rights", "threads", "threads", "close", "open"
};
int proc_kind;

void op_proc(struct wstate *w)
{
	int k;

	count(C_PROC);
	proc_kind = (int)below(&w->r, 9);
	switch (proc_kind) {
	case 0:
	case 1: {	/* fork: the child uses the inherited fds, maps, handles, then exits or is killed */
		uint64_t seed = rnd(&w->r);
		bool kill_it = one_in(&w->r, 2);
		unsigned int delay = (unsigned int)below(&w->r, 40000);
		pid_t pid;

		k = kid_slot(w);
		if (k < 0)
			return;
		pid = fork();
		if (pid > 0)
			ok(OK_FORK);
		if (pid == 0) {
			w->r.s = seed;
			w->deadline = now() + 1.5;
			/* its own allocations only: bounded, whatever it inherited */
			w->live_bytes = 0;
			w->max_alloc = w->max_alloc < 4 * MiB ? w->max_alloc : 4 * MiB;
			for (int i = 0; i < NKIDS; i++)
				w->kids[i] = 0;
			run_ops(w, 40);
			_exit(0);
		}
		if (pid > 0) {
			w->kids[k] = pid;
			if (kill_it) {
				usleep(delay);
				kill(pid, SIGKILL);
			}
		}
		return;
	}
	case 2: {	/* kill -9 in the middle of alloc/map/export/import */
		unsigned int delay = (unsigned int)below(&w->r, 30000);
		uint64_t seed = rnd(&w->r);
		pid_t pid;

		k = kid_slot(w);
		if (k < 0)
			return;
		pid = fork();
		if (pid == 0) {
			struct rng r = { seed };
			int fd = open(dev_path, O_RDWR | O_CLOEXEC);

			for (int i = 0; i < 12 && fd >= 0; i++) {
				struct strixpeer_buf_alloc a = { .size = (below(&r, 4) + 1) * MiB,
								 .node = STRIXPEER_NODE_DEFAULT };
				struct strixpeer_buf_export e = { .flags = STRIXPEER_EXPORT_RDWR };
				char *p;

				if (ioctl(fd, STRIXPEER_IOC_BUF_ALLOC, &a))
					continue;
				p = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
					 (off_t)a.mmap_offset);
				e.handle = a.handle;
				if (ioctl(fd, STRIXPEER_IOC_BUF_EXPORT, &e) == 0 && p != MAP_FAILED) {
					struct strixpeer_import im = { .dmabuf_fd = e.fd, .length = a.size,
								       .va = (uintptr_t)p };
					struct strixpeer_buf_free f = { .handle = a.handle };

					munmap(p, a.size);
					p = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
					if (p != MAP_FAILED) {
						im.va = (uintptr_t)p;
						ioctl(fd, STRIXPEER_IOC_IMPORT, &im);
					}
					if (one_in(&r, 2))
						ioctl(fd, STRIXPEER_IOC_BUF_FREE, &f);
					if (one_in(&r, 2))
						close(e.fd);
				}
			}
			_exit(0);
		}
		if (pid > 0) {
			usleep(delay);
			kill(pid, SIGKILL);
			w->kids[k] = pid;
		}
		return;
	}
	case 3: {	/* execve chains carrying non-CLOEXEC fds */
		char s[32], d[16];
		uint64_t seed;
		pid_t pid;

		k = kid_slot(w);
		if (k < 0 || !self_exe[0])
			return;
		seed = rnd(&w->r);
		snprintf(s, sizeof(s), "%" PRIu64, seed);
		snprintf(d, sizeof(d), "%d", (int)below(&w->r, 5));
		pid = fork();
		if (pid == 0) {
			/*
			 * Under fault injection the child does the chain's work on
			 * the fds it inherited without exec: loading an image reads
			 * the binary and its libraries over the guest's 9p root, and
			 * an injected failure in the 9p client has left a cached fid
			 * broken for every later process of the guest (debug kernel:
			 * "overlayfs: failed to get metacopy (-22)", then every exec
			 * failing to open libc.so.6 with EINVAL) - the guest's
			 * filesystem, not the module, is what that would test.
			 */
			if (w->faults)
				_exit(exec_child(seed, 0));
			execl(self_exe, self_exe, "--exec-child", s, d, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			w->kids[k] = pid;
		return;
	}
	case 4: {	/* SCM_RIGHTS: the device fd and dma-bufs to a child */
		int sv[2], fds[4], n = 0;
		pid_t pid;

		k = kid_slot(w);
		if (k < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			return;
		pid = fork();
		if (pid == 0) {
			char b[1], cbuf[CMSG_SPACE(sizeof(int) * 4)];
			struct iovec iov = { b, 1 };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
					     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
			struct cmsghdr *c;
			int myfd = open(dev_path, O_RDWR | O_CLOEXEC);

			close(sv[0]);
			if (recvmsg(sv[1], &mh, 0) <= 0)
				_exit(0);
			for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
				int nf = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				int *got = (int *)CMSG_DATA(c);

				for (int i = 0; i < nf; i++) {
					struct strixpeer_buf_alloc a = { .size = 2 * MiB, .node = STRIXPEER_NODE_DEFAULT };
					struct stat st;
					char *p;

					ioctl(got[i], STRIXPEER_IOC_BUF_ALLOC, &a);	/* a passed device fd: EACCES */
					if (fstat(got[i], &st) || st.st_size <= 0 || st.st_size > (off_t)SLOT_SZ)
						continue;
					p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, got[i], 0);
					if (p == MAP_FAILED)
						continue;
					touch(p, true, 2);
					if (myfd >= 0) {
						struct strixpeer_import im = { .dmabuf_fd = got[i],
									       .length = (uint64_t)st.st_size,
									       .va = (uintptr_t)p };

						ioctl(myfd, STRIXPEER_IOC_IMPORT, &im);
					}
				}
			}
			usleep(20000);
			_exit(0);
		}
		close(sv[1]);
		if (pid > 0) {
			char b[1] = { 0 }, cbuf[CMSG_SPACE(sizeof(int) * 4)];
			struct iovec iov = { b, 1 };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
			struct cmsghdr *c;

			w->kids[k] = pid;
			if (w->dev[0] >= 0)
				fds[n++] = w->dev[0];
			for (int i = 0; i < 3; i++) {
				int j = pick_db(w);

				if (j >= 0)
					fds[n++] = w->d[j].fd;
			}
			if (n) {
				memset(cbuf, 0, sizeof(cbuf));
				mh.msg_control = cbuf;
				mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
				c = CMSG_FIRSTHDR(&mh);
				c->cmsg_level = SOL_SOCKET;
				c->cmsg_type = SCM_RIGHTS;
				c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
				memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
			}
			sendmsg(sv[0], &mh, MSG_NOSIGNAL);
			if (one_in(&w->r, 3)) {
				usleep((useconds_t)below(&w->r, 20000));
				kill(pid, SIGKILL);
			}
		}
		close(sv[0]);
		return;
	}
	case 5:
	case 6: {	/* threads sharing one fd; maybe a close racing them */
		int di = pick_dev(w), nt = 2 + (int)below(&w->r, 2);
		pthread_t th[3];
		struct thr t[3];
		bool close_race = one_in(&w->r, 6);

		if (w->dev[di] < 0)
			return;
		for (int i = 0; i < nt; i++) {
			t[i].fd = w->dev[di];
			t[i].seed = rnd(&w->r);
			for (int j = 0; j < 8; j++)
				t[i].handles[j] = pick_handle(w, di);
			if (pthread_create(&th[i], NULL, thread_main, &t[i]))
				nt = i;
		}
		if (close_race) {
			usleep((useconds_t)below(&w->r, 2000));
			close_dev(w, di);
		}
		for (int i = 0; i < nt; i++)
			pthread_join(th[i], NULL);
		/* a thread may have freed any buffer: forget those the kernel no longer knows */
		for (int i = 0; i < NBUF; i++) {
			struct strixpeer_buf_info in = { .handle = w->b[i].handle };

			if (w->b[i].live && w->b[i].dev == di &&
			    ioctl(w->dev[di], STRIXPEER_IOC_BUF_INFO, &in))
				w->b[i].live = false;
		}
		return;
	}
	case 7:	/* close a device fd with its mappings and exports alive */
		close_dev(w, (int)below(&w->r, NDEV));
		return;
	default:	/* open another */
		k = (int)below(&w->r, NDEV);
		if (w->dev[k] < 0)
			w->dev[k] = open(dev_path, O_RDWR | O_CLOEXEC);
		return;
	}
}
