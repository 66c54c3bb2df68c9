// SPDX-License-Identifier: MIT
/*
 * libstrixpeer-preload.so: GPU memory for unmodified verbs programs on
 * kernels without a peer-memory core.
 *
 *   LD_PRELOAD=libstrixpeer-preload.so ib_write_bw ...
 *
 * It defines ibv_reg_mr, ibv_reg_mr_iova and ibv_reg_mr_iova2, which the
 * dynamic linker then binds a program's (and its libraries') calls to
 * before libibverbs' own. Each calls libibverbs' function first and
 * returns its result, untouched, unless that failed with EFAULT - what
 * the kernel says for pages it cannot pin, such as a hipMalloc() pointer's
 * (TTM's PFN mappings). Only then does it ask strixpeer's module for the
 * dma-buf of the range (STRIXPEER_IOC_GEM_DMABUF: GPU memory this process
 * mapped and holds) and register that with ibv_reg_dmabuf_mr(), on NICs
 * whose driver has dma-buf MRs. The MR it returns is an ordinary one:
 * ibv_dereg_mr() releases it; its addr is the registered address, as
 * ibv_reg_mr() gives it. When the module is not loaded, the range is not
 * GPU memory or the NIC has no dma-buf MRs, the caller gets the original
 * EFAULT.
 *
 * What it cannot reach: calls resolved with dlsym() on libibverbs'
 * handle (RCCL's ibvwrap loads libibverbs with dlopen() and dlsym()s each
 * verb: interposition never sees them - RCCL has its own dma-buf route),
 * statically linked libibverbs, and registrations a library makes inside
 * libibverbs itself. STRIXPEER_PRELOAD_DEBUG=1 says on stderr what it did
 * for each range it handled.
 *
 * Thread-safe: the device is opened once (per process: a forked child,
 * whose parent's fd the module refuses, opens its own), the rest is
 * per-call state.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "uapi/strixpeer.h"

/* verbs.h makes these macros; the functions are what programs link to */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define SP_EXPORT __attribute__((visibility("default")))

typedef struct ibv_mr *(*reg_mr_fn)(struct ibv_pd *, void *, size_t, int);
typedef struct ibv_mr *(*reg_mr_iova_fn)(struct ibv_pd *, void *, size_t, uint64_t, int);
typedef struct ibv_mr *(*reg_mr_iova2_fn)(struct ibv_pd *, void *, size_t, uint64_t,
					  unsigned int);

static reg_mr_fn real_reg_mr;
static reg_mr_iova_fn real_reg_mr_iova;
static reg_mr_iova2_fn real_reg_mr_iova2;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
static int debug;

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static int dev_fd = -1;
static pid_t dev_pid;

/* libibverbs' own versions, as a program built against rdma-core binds them. */
static void resolve(void)
{
	const char *d = getenv("STRIXPEER_PRELOAD_DEBUG");

	debug = d && *d && *d != '0';
	real_reg_mr = (reg_mr_fn)dlvsym(RTLD_NEXT, "ibv_reg_mr", "IBVERBS_1.1");
	if (!real_reg_mr)
		real_reg_mr = (reg_mr_fn)dlsym(RTLD_NEXT, "ibv_reg_mr");
	real_reg_mr_iova = (reg_mr_iova_fn)dlvsym(RTLD_NEXT, "ibv_reg_mr_iova", "IBVERBS_1.7");
	real_reg_mr_iova2 = (reg_mr_iova2_fn)dlvsym(RTLD_NEXT, "ibv_reg_mr_iova2",
						    "IBVERBS_1.8");
	if (debug)
		fprintf(stderr, "strixpeer-preload: ibv_reg_mr %p, ibv_reg_mr_iova %p, ibv_reg_mr_iova2 %p\n",
			(void *)real_reg_mr, (void *)real_reg_mr_iova, (void *)real_reg_mr_iova2);
}

/* /dev/strixpeer of this process, or -1 (not loaded, no permission). */
static int dev_get(void)
{
	pid_t pid = getpid();
	int fd;

	pthread_mutex_lock(&dev_lock);
	if (dev_fd >= 0 && dev_pid != pid) {
		close(dev_fd);	/* the parent's, inherited: refused by the module */
		dev_fd = -1;
	}
	if (dev_fd < 0) {
		dev_fd = open(STRIXPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		dev_pid = pid;
	}
	fd = dev_fd;
	pthread_mutex_unlock(&dev_lock);
	return fd;
}

/*
 * After libibverbs' EFAULT: the range's dma-buf, registered. Returns the
 * MR, or NULL with errno EFAULT (the original answer) when this cannot
 * help.
 */
static struct ibv_mr *reg_gpu(struct ibv_pd *pd, void *addr, size_t length,
			      uint64_t iova, unsigned int access)
{
	struct strixpeer_gem_dmabuf g;
	struct ibv_mr *mr;
	int fd = dev_get(), err;

	if (fd < 0) {
		if (debug)
			fprintf(stderr, "strixpeer-preload: %p+%zu: EFAULT, and %s: %s\n", addr,
				length, STRIXPEER_DEVICE_PATH, strerror(errno));
		errno = EFAULT;
		return NULL;
	}
	memset(&g, 0, sizeof(g));
	g.addr = (uintptr_t)addr;
	g.size = length;
	g.flags = STRIXPEER_GEM_DMABUF_CLOEXEC;
	if (ioctl(fd, STRIXPEER_IOC_GEM_DMABUF, &g) < 0) {
		if (debug)
			fprintf(stderr, "strixpeer-preload: %p+%zu: EFAULT, and no GPU buffer there: %s\n",
				addr, length, strerror(errno));
		errno = EFAULT;
		return NULL;
	}
	if ((g.out_flags & STRIXPEER_GEM_DMABUF_READ_ONLY) &&
	    (access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_ATOMIC))) {
		/* as the kernel refuses a writable pin of a read-only mapping */
		if (debug)
			fprintf(stderr, "strixpeer-preload: %p+%zu: EFAULT, and the range is mapped read-only\n",
				addr, length);
		close(g.fd);
		errno = EFAULT;
		return NULL;
	}
	mr = ibv_reg_dmabuf_mr(pd, g.offset, length, iova, g.fd, (int)access);
	err = errno;
	close(g.fd);	/* the MR holds the dma-buf */
	if (!mr) {
		if (debug)
			fprintf(stderr, "strixpeer-preload: %p+%zu: ibv_reg_dmabuf_mr: %s\n", addr,
				length, strerror(err));
		errno = EFAULT;
		return NULL;
	}
	/* rdma-core reports the dma-buf offset; ibv_reg_mr() callers expect addr */
	mr->addr = addr;
	if (debug)
		fprintf(stderr, "strixpeer-preload: %p+%zu: registered through its dma-buf (offset %llu), lkey %#x rkey %#x\n",
			addr, length, (unsigned long long)g.offset, mr->lkey, mr->rkey);
	return mr;
}

SP_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct ibv_mr *mr;

	pthread_once(&resolve_once, resolve);
	if (!real_reg_mr) {
		errno = ENOSYS;
		return NULL;
	}
	mr = real_reg_mr(pd, addr, length, access);
	if (mr || errno != EFAULT)
		return mr;
	return reg_gpu(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

SP_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	struct ibv_mr *mr;

	pthread_once(&resolve_once, resolve);
	if (!real_reg_mr_iova) {
		errno = ENOSYS;
		return NULL;
	}
	mr = real_reg_mr_iova(pd, addr, length, iova, access);
	if (mr || errno != EFAULT)
		return mr;
	return reg_gpu(pd, addr, length, iova, (unsigned int)access);
}

SP_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	struct ibv_mr *mr;

	pthread_once(&resolve_once, resolve);
	if (!real_reg_mr_iova2) {
		errno = ENOSYS;
		return NULL;
	}
	mr = real_reg_mr_iova2(pd, addr, length, iova, access);
	if (mr || errno != EFAULT)
		return mr;
	return reg_gpu(pd, addr, length, iova, access);
}
