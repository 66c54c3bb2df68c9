// SPDX-License-Identifier: MIT
/*
 * libstrixpeer: sp_reg_mr(), registering a range with a NIC by the best
 * of three kernel paths (plain ibv_reg_mr, ibv_reg_dmabuf_mr, PeerDirect
 * through an import or a claimed GPU mapping), with a registration cache;
 * sp_gem_dmabuf(), the dma-buf of a GPU range (STRIXPEER_IOC_GEM_DMABUF).
 *
 * The cache is a list on the sp_dev (registrations are few and long
 * lived). An entry is shared while it is in the list; it leaves the list
 * when its memory goes (sp_buf_free/unmap, sp_import_free: dev->drop_range)
 * and is then deregistered by its last user. An entry of a GPU range
 * registered through its dma-buf remembers which dma-buf it was (inode
 * number and offset); a hit asks the module again, so a range whose
 * mapping now shows another object is registered anew. Not thread-safe,
 * like the rest of an sp_dev.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "strixpeer.h"
#include "uapi/strixpeer.h"
#include "internal.h"

struct sp_mr {
	struct sp_dev *dev;
	pid_t pid;		/* dev->pid, readable after sp_dev_close() */
	struct sp_mr *next;
	struct ibv_pd *pd;
	uintptr_t start;
	size_t length;
	int access;
	unsigned int refs;	/* sp_reg_mr() references not dropped yet */
	int cached;		/* in dev->mrs: may be handed out again */
	int keep;		/* stays cached without users (our memory) */
	enum sp_reg_path path;
	struct ibv_mr *mr;
	int gem;		/* a GPU range (no buffer, no import): */
	uint64_t gem_ino;	/* ... its dma-buf when registered */
	uint64_t gem_off;
};

static int sp_overlaps(const struct sp_mr *m, uintptr_t start, size_t len)
{
	return m->start < start + len && start < m->start + m->length;
}

static int sp_gem_ioctl(const struct sp_dev *dev, uintptr_t start, size_t len,
			unsigned int flags, struct strixpeer_gem_dmabuf *g);

/* A GPU range's entry: the same dma-buf at the same offset is mapped there. */
static int sp_gem_same(const struct sp_mr *m)
{
	struct strixpeer_gem_dmabuf g;

	return !sp_gem_ioctl(m->dev, m->start, m->length, STRIXPEER_GEM_DMABUF_NO_FD, &g) &&
	       g.ino == m->gem_ino && g.offset == m->gem_off;
}

static void sp_unlink(struct sp_mr *m)
{
	struct sp_mr **pp;

	for (pp = &m->dev->mrs; *pp; pp = &(*pp)->next) {
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	}
	m->cached = 0;
}

/*
 * Deregisters and frees. In a forked child (sp_dev_close() of an inherited
 * device) only our memory goes: the verbs context is the parent's, and a
 * deregistration through it would take the MR away from the parent.
 */
static int sp_mr_destroy(struct sp_mr *m)
{
	int ret = getpid() == m->pid ? ibv_dereg_mr(m->mr) : 0;

	free(m);
	return ret ? -ret : 0;
}

/* The memory under [start, start + len) goes: nothing may reuse its MRs. */
static void sp_drop_range(struct sp_dev *dev, uintptr_t start, size_t len)
{
	struct sp_mr *m = dev->mrs, *next;

	for (; m; m = next) {
		next = m->next;
		if (!sp_overlaps(m, start, len))
			continue;
		sp_unlink(m);
		dev->reg_dropped++;
		if (!m->refs)
			sp_mr_destroy(m);
	}
}

/* sp_dev_close(): every registration goes, used or not. */
static void sp_drop_all(struct sp_dev *dev)
{
	while (dev->mrs) {
		struct sp_mr *m = dev->mrs;

		sp_unlink(m);
		sp_mr_destroy(m);
	}
}

/* [start, start + len) lies inside [base, base + size). */
static int sp_inside(const void *base, size_t size, uintptr_t start, size_t len)
{
	uintptr_t a = (uintptr_t)base;

	return start >= a && start - a <= size && len <= size - (start - a);
}

static const struct sp_buf *sp_find_buf(const struct sp_dev *dev,
					uintptr_t start, size_t len)
{
	const struct sp_buf *b;

	for (b = dev->bufs; b; b = b->next)
		if (b->addr && sp_inside(b->addr, b->size, start, len))
			return b;
	return NULL;
}

static const struct sp_import *sp_find_import(const struct sp_dev *dev,
					      uintptr_t start, size_t len)
{
	const struct sp_import *i;

	for (i = dev->imports; i; i = i->next)
		if (sp_inside(i->addr, i->length, start, len))
			return i;
	return NULL;
}

/* Why each path failed, for the error message. */
struct sp_why {
	char plain[160];
	char dmabuf[160];
	char peer[224];
};

static void sp_say(char *dst, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void sp_say(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, n, fmt, ap);
	va_end(ap);
}

/* Devices without dma-buf MRs (rxe, older drivers) answer like this. */
static int sp_unsupported(int err)
{
	return err == EOPNOTSUPP || err == ENOSYS || err == EPROTONOSUPPORT;
}

static struct ibv_mr *sp_try_dmabuf(struct ibv_pd *pd, int fd,
				    uint64_t offset, uintptr_t start,
				    size_t len, int access, struct sp_why *why)
{
	struct ibv_mr *mr;

	if (fd < 0) {
		sp_say(why->dmabuf, sizeof(why->dmabuf),
		       "no dma-buf fd of the range could be had");
		return NULL;
	}
	mr = ibv_reg_dmabuf_mr(pd, offset, len, start, fd, access);
	/*
	 * rdma-core sets mr->addr to the dma-buf offset; the MR's iova is
	 * @start, and callers advertise mr->addr to their peers as on the
	 * other paths (an RDMA op to the offset gets a remote access error).
	 */
	if (mr)
		mr->addr = (void *)start;
	if (!mr) {
		int err = errno;

		sp_say(why->dmabuf, sizeof(why->dmabuf),
		       "ibv_reg_dmabuf_mr: %s%s", strerror(err),
		       sp_unsupported(err) ?
		       " (this device cannot register dma-bufs)" : "");
		errno = err;
	}
	return mr;
}

/* Registrations the import's PeerDirect client holds now (-1: unknown). */
static int sp_import_regs(const struct sp_import *imp)
{
	struct strixpeer_import_info ii;

	memset(&ii, 0, sizeof(ii));
	ii.handle = imp->handle;
	if (ioctl(imp->dev->fd, STRIXPEER_IOC_IMPORT_INFO, &ii) < 0)
		return -1;
	return (int)ii.registrations;
}

static void sp_peer_unavailable(const struct sp_dev *dev, struct sp_why *why)
{
	struct sp_info info = { .size = sizeof(info) };
	struct sp_ctl *ctl;

	if (dev->ver.features & SP_FEAT_PEERDIRECT) {
		sp_say(why->peer, sizeof(why->peer),
		       "the kernel pinned nothing and no PeerDirect client claimed the range");
		return;
	}
	/* The module says why in its netlink info; best effort. */
	memset(&info, 0, sizeof(info));
	if (!sp_ctl_open(&ctl)) {
		sp_ctl_info(ctl, &info);
		sp_ctl_close(ctl);
	}
	sp_say(why->peer, sizeof(why->peer),
	       "strixpeer's PeerDirect client is not active%s%s",
	       info.peerdirect_reason[0] ? ": " : "",
	       info.peerdirect_reason);
}

/*
 * A range inside an import: the dma-buf first, then ibv_reg_mr(), which
 * ib_core serves by pinning or, for pages it cannot pin, by asking the
 * peer-memory clients (strixpeer's claims ranges of live imports).
 */
static struct ibv_mr *sp_reg_import(const struct sp_import *imp,
				    struct ibv_pd *pd, uintptr_t start,
				    size_t len, int access, unsigned int flags,
				    enum sp_reg_path *path, struct sp_why *why)
{
	struct ibv_mr *mr = NULL;
	int before, err;

	if (!(flags & SP_REG_NO_DMABUF)) {
		mr = sp_try_dmabuf(pd, imp->dmabuf_fd,
				   imp->offset + (start - (uintptr_t)imp->addr),
				   start, len, access, why);
		if (mr) {
			*path = SP_REG_DMABUF;
			return mr;
		}
	} else {
		sp_say(why->dmabuf, sizeof(why->dmabuf), "excluded by SP_REG_NO_DMABUF");
	}
	if ((flags & (SP_REG_NO_PLAIN | SP_REG_NO_PEERDIRECT)) ==
	    (SP_REG_NO_PLAIN | SP_REG_NO_PEERDIRECT)) {
		sp_say(why->plain, sizeof(why->plain), "excluded by SP_REG_NO_PLAIN");
		sp_say(why->peer, sizeof(why->peer), "excluded by SP_REG_NO_PEERDIRECT");
		return NULL;
	}
	before = sp_import_regs(imp);
	mr = ibv_reg_mr(pd, (void *)start, len, access);
	err = errno;
	if (!mr) {
		sp_say(why->plain, sizeof(why->plain),
		       "ibv_reg_mr: %s (the kernel could not pin the pages)",
		       strerror(err));
		sp_peer_unavailable(imp->dev, why);
		errno = err;
		return NULL;
	}
	*path = before >= 0 && sp_import_regs(imp) > before ?
		SP_REG_PEERDIRECT : SP_REG_PLAIN;
	/* ib_core chose; a path the caller excluded is given back. */
	if ((*path == SP_REG_PLAIN && (flags & SP_REG_NO_PLAIN)) ||
	    (*path == SP_REG_PEERDIRECT && (flags & SP_REG_NO_PEERDIRECT))) {
		ibv_dereg_mr(mr);
		if (*path == SP_REG_PLAIN) {
			sp_say(why->plain, sizeof(why->plain), "excluded by SP_REG_NO_PLAIN");
			sp_say(why->peer, sizeof(why->peer),
			       "the kernel pins these pages itself, so no PeerDirect client is asked");
		} else {
			sp_say(why->peer, sizeof(why->peer), "excluded by SP_REG_NO_PEERDIRECT");
			sp_say(why->plain, sizeof(why->plain),
			       "the kernel cannot pin these pages itself");
		}
		errno = EPERM;
		return NULL;
	}
	return mr;
}

/*
 * STRIXPEER_IOC_GEM_DMABUF: 0 and @g filled in, or an errno (nothing
 * said: callers word it).
 */
static int sp_gem_ioctl(const struct sp_dev *dev, uintptr_t start, size_t len,
			unsigned int flags, struct strixpeer_gem_dmabuf *g)
{
	memset(g, 0, sizeof(*g));
	g->addr = start;
	g->size = len;
	g->flags = flags;
	if (dev->ver.abi_major == STRIXPEER_ABI_MAJOR && dev->ver.abi_minor < 3)
		return ENOTTY;
	if (ioctl(dev->fd, STRIXPEER_IOC_GEM_DMABUF, g) < 0)
		return errno;
	return 0;
}

static const char *sp_gem_why(int err)
{
	switch (err) {
	case ENOENT:
		return "the range is not (all) in a GPU buffer's mapping of a driver in the module's claim_gem_drivers";
	case EXDEV:
		return "the range spans two GPU buffers, or parts of one that are not consecutive";
	case EACCES:
		return "this process holds no handle of the GPU buffer any more";
	case ENOTTY:
		return "the loaded strixpeer module predates GEM_DMABUF (module ABI 1.3): load this release's";
	case EOPNOTSUPP:
		return "the kernel has no DRM";
	}
	return strerror(err);
}

int sp_gem_dmabuf(struct sp_dev *dev, const void *addr, size_t length,
		  int *fd, uint64_t *offset, unsigned int *out_flags)
{
	struct strixpeer_gem_dmabuf g;
	int err;

	if (!length || (uintptr_t)addr + length < (uintptr_t)addr || !fd || !offset)
		return sp_fail(EINVAL, "dma-buf of %zu bytes at %p: need a non-empty range, fd and offset",
			       length, addr);
	err = sp_gem_ioctl(dev, (uintptr_t)addr, length, STRIXPEER_GEM_DMABUF_CLOEXEC, &g);
	if (err)	/* ENOTTY: an older module */
		return sp_fail(err == ENOTTY ? EOPNOTSUPP : err, "no dma-buf of %zu bytes at %p: %s",
			       length, addr, sp_gem_why(err));
	*fd = g.fd;
	*offset = g.offset;
	if (out_flags)
		*out_flags = g.out_flags & STRIXPEER_GEM_DMABUF_READ_ONLY ? SP_GEM_READ_ONLY : 0;
	return 0;
}

/* Access that writes: refused on a range mapped read-only. */
#define SP_WRITE_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_ATOMIC)

/*
 * A GPU range (a GEM mapping, @g from the probe): the kernel cannot pin
 * it, so ibv_reg_mr() is the PeerDirect path (a peer-memory client claims
 * it: strixpeer's zero-change mode or another client), then the object's
 * dma-buf with ibv_reg_dmabuf_mr().
 */
static struct ibv_mr *sp_reg_gem(struct sp_dev *dev, struct ibv_pd *pd,
				 uintptr_t start, size_t len, int access,
				 unsigned int flags, enum sp_reg_path *path,
				 struct strixpeer_gem_dmabuf *g, struct sp_why *why)
{
	struct ibv_mr *mr;
	int err = 0, fd;

	sp_say(why->plain, sizeof(why->plain),
	       "GPU memory (a GEM mapping): the kernel cannot pin its pages");
	if (flags & SP_REG_NO_PEERDIRECT) {
		sp_say(why->peer, sizeof(why->peer), "excluded by SP_REG_NO_PEERDIRECT");
	} else {
		mr = ibv_reg_mr(pd, (void *)start, len, access);
		if (mr) {
			*path = SP_REG_PEERDIRECT;
			return mr;
		}
		err = errno;
		if (dev->ver.features & SP_FEAT_PEERDIRECT)
			sp_say(why->peer, sizeof(why->peer),
			       "ibv_reg_mr: %s: no peer-memory client claimed the range (claim_gem_mappings off, or this NIC's driver asks no peer)",
			       strerror(err));
		else
			sp_peer_unavailable(dev, why);
	}
	if (flags & SP_REG_NO_DMABUF) {
		sp_say(why->dmabuf, sizeof(why->dmabuf), "excluded by SP_REG_NO_DMABUF");
		errno = err ? err : EPERM;
		return NULL;
	}
	if ((g->out_flags & STRIXPEER_GEM_DMABUF_READ_ONLY) && (access & SP_WRITE_ACCESS)) {
		sp_say(why->dmabuf, sizeof(why->dmabuf),
		       "the range is mapped read-only and a writable registration was asked");
		errno = EACCES;
		return NULL;
	}
	err = sp_gem_ioctl(dev, start, len, STRIXPEER_GEM_DMABUF_CLOEXEC, g);
	if (err) {
		sp_say(why->dmabuf, sizeof(why->dmabuf), "%s", sp_gem_why(err));
		errno = err;
		return NULL;
	}
	fd = g->fd;
	mr = sp_try_dmabuf(pd, fd, g->offset, start, len, access, why);
	err = errno;
	close(fd);	/* the MR holds the dma-buf */
	if (mr) {
		*path = SP_REG_DMABUF;
		return mr;
	}
	errno = err;
	return NULL;
}

/*
 * Anywhere else: a GPU range (sp_reg_gem()); else ibv_reg_mr(), then a
 * strixpeer buffer's own dma-buf.
 */
static struct ibv_mr *sp_reg_other(struct sp_dev *dev, struct ibv_pd *pd,
				   uintptr_t start, size_t len, int access,
				   unsigned int flags, enum sp_reg_path *path,
				   struct strixpeer_gem_dmabuf *g, struct sp_why *why)
{
	const struct sp_buf *b = sp_find_buf(dev, start, len);
	struct ibv_mr *mr;
	int err = 0;

	/* a GPU range, as the module sees it (one ioctl, no fd) */
	if (!b && !sp_gem_ioctl(dev, start, len, STRIXPEER_GEM_DMABUF_NO_FD, g))
		return sp_reg_gem(dev, pd, start, len, access, flags, path, g, why);

	sp_say(why->peer, sizeof(why->peer),
	       "no import of this device covers the range (declare it with sp_import_dmabuf())");
	if (!(flags & SP_REG_NO_PLAIN)) {
		mr = ibv_reg_mr(pd, (void *)start, len, access);
		if (mr) {
			*path = SP_REG_PLAIN;
			return mr;
		}
		err = errno;
		sp_say(why->plain, sizeof(why->plain),
		       "ibv_reg_mr: %s%s", strerror(err),
		       err == EFAULT ? " (the pages cannot be pinned: not normal memory, or not mapped)" :
		       err == ENOMEM ? " (RLIMIT_MEMLOCK? ulimit -l)" : "");
	} else {
		sp_say(why->plain, sizeof(why->plain), "excluded by SP_REG_NO_PLAIN");
	}
	if (flags & SP_REG_NO_DMABUF) {
		sp_say(why->dmabuf, sizeof(why->dmabuf), "excluded by SP_REG_NO_DMABUF");
	} else if (!b) {
		sp_say(why->dmabuf, sizeof(why->dmabuf),
		       "the range is not inside a strixpeer buffer or import of this device, so it has no dma-buf");
	} else {
		struct sp_buf *wb = (struct sp_buf *)b;

		if (wb->export_fd < 0 &&
		    sp_buf_export(wb, SP_EXPORT_CLOEXEC | SP_EXPORT_RDWR,
				  &wb->export_fd))
			wb->export_fd = -1;
		mr = sp_try_dmabuf(pd, wb->export_fd, start - (uintptr_t)b->addr,
				   start, len, access, why);
		if (mr) {
			*path = SP_REG_DMABUF;
			return mr;
		}
		err = errno;
	}
	errno = err ? err : EPERM;
	return NULL;
}

int sp_reg_mr(struct sp_dev *dev, struct ibv_pd *pd, void *addr,
	      size_t length, int access, unsigned int flags,
	      struct sp_mr **mrp)
{
	const unsigned int known = SP_REG_NO_PLAIN | SP_REG_NO_DMABUF |
				   SP_REG_NO_PEERDIRECT | SP_REG_NO_CACHE;
	uintptr_t start = (uintptr_t)addr;
	struct strixpeer_gem_dmabuf g;
	const struct sp_import *imp;
	enum sp_reg_path path = 0;
	struct sp_why why;
	struct ibv_mr *mr;
	struct sp_mr *m;

	if (flags & ~known)
		return sp_fail(EINVAL, "unknown sp_reg_mr flags %#x", flags & ~known);
	if (!pd || !length || start + length < start)
		return sp_fail(EINVAL, "registration of %zu bytes at %p: need a protection domain and a non-empty range",
			       length, addr);
	if (getpid() != dev->pid)
		return sp_fail(EACCES, "this strixpeer device was opened by process %d: after fork(), open your own device and verbs context",
			       (int)dev->pid);
	dev->drop_range = sp_drop_range;
	dev->drop_all = sp_drop_all;

	if (!(flags & SP_REG_NO_CACHE)) {
		for (m = dev->mrs; m; m = m->next) {
			if (m->pd == pd && m->start == start &&
			    m->length == length && m->access == access) {
				if (m->gem && !sp_gem_same(m)) {
					/* another object is mapped there now */
					sp_unlink(m);
					dev->reg_dropped++;
					break;
				}
				m->refs++;
				dev->reg_hits++;
				*mrp = m;
				return 1;
			}
		}
	}

	memset(&why, 0, sizeof(why));
	memset(&g, 0, sizeof(g));
	imp = sp_find_import(dev, start, length);
	if (imp)
		mr = sp_reg_import(imp, pd, start, length, access, flags, &path, &why);
	else
		mr = sp_reg_other(dev, pd, start, length, access, flags, &path, &g, &why);
	if (!mr) {
		int err = errno ? errno : EPERM;

		return sp_fail(err, "cannot register %zu bytes at %p: plain: %s; dma-buf: %s; PeerDirect: %s%s",
			       length, addr, why.plain[0] ? why.plain : "not tried",
			       why.dmabuf[0] ? why.dmabuf : "not tried",
			       why.peer[0] ? why.peer : "not tried",
			       g.ino ? ". GPU memory registers through a NIC whose driver takes dma-buf MRs (mlx5, irdma, bnxt_re, efa), or a peer-memory core (MLNX/DOCA-OFED, Ubuntu's linux-nvidia kernels) with strixpeer's client; on other NICs compute in a strixpeer buffer imported into the GPU (docs/gpu-memory.md)" : "");
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		ibv_dereg_mr(mr);
		return sp_fail(ENOMEM, "out of memory");
	}
	m->dev = dev;
	m->pid = dev->pid;
	m->pd = pd;
	m->start = start;
	m->length = length;
	m->access = access;
	m->refs = 1;
	m->path = path;
	m->mr = mr;
	m->keep = imp || sp_find_buf(dev, start, length);
	m->gem = !m->keep && g.ino;
	m->gem_ino = g.ino;
	m->gem_off = g.offset;
	dev->reg_misses++;
	if (!(flags & SP_REG_NO_CACHE)) {
		m->cached = 1;
		m->next = dev->mrs;
		dev->mrs = m;
	}
	*mrp = m;
	return 0;
}

struct ibv_mr *sp_mr_ibv(const struct sp_mr *mr)
{
	return mr->mr;
}

enum sp_reg_path sp_mr_path(const struct sp_mr *mr)
{
	return mr->path;
}

const char *sp_reg_path_name(enum sp_reg_path path)
{
	switch (path) {
	case SP_REG_PLAIN:
		return "plain";
	case SP_REG_DMABUF:
		return "dmabuf";
	case SP_REG_PEERDIRECT:
		return "peerdirect";
	}
	return "unknown";
}

int sp_dereg_mr(struct sp_mr *mr)
{
	int ret;

	if (!mr)
		return 0;
	if (getpid() != mr->pid)
		return sp_fail(EACCES, "this registration belongs to process %d",
			       (int)mr->pid);
	if (!mr->refs)
		return sp_fail(EINVAL, "registration of %zu bytes at %#lx has no reference left",
			       mr->length, (unsigned long)mr->start);
	if (--mr->refs || (mr->cached && mr->keep))
		return 0;
	if (mr->cached)
		sp_unlink(mr);
	ret = sp_mr_destroy(mr);
	return ret ? sp_fail(-ret, "ibv_dereg_mr: %s", strerror(-ret)) : 0;
}

int sp_reg_cache_flush(struct sp_dev *dev)
{
	struct sp_mr *m = dev->mrs, *next;
	int n = 0, err = 0, ret;

	if (getpid() != dev->pid)
		return sp_fail(EACCES, "this strixpeer device was opened by process %d",
			       (int)dev->pid);
	for (; m; m = next) {
		next = m->next;
		if (m->refs)
			continue;
		sp_unlink(m);
		ret = sp_mr_destroy(m);
		if (ret && !err)
			err = ret;
		n++;
	}
	return err ? sp_fail(-err, "ibv_dereg_mr: %s", strerror(-err)) : n;
}

int sp_reg_cache_stats(const struct sp_dev *dev, struct sp_reg_stats *st)
{
	const struct sp_mr *m;

	memset(st, 0, sizeof(*st));
	st->hits = dev->reg_hits;
	st->misses = dev->reg_misses;
	st->dropped = dev->reg_dropped;
	for (m = dev->mrs; m; m = m->next) {
		st->entries++;
		if (!m->refs)
			st->idle++;
	}
	return 0;
}
