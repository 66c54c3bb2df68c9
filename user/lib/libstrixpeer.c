// SPDX-License-Identifier: MIT
/*
 * libstrixpeer: open /dev/strixpeer with a version handshake, allocate,
 * map, query and free buffers, read the module's counters.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "strixpeer.h"
#include "uapi/strixpeer.h"
#include "internal.h"

/*
 * The feature bits have three spellings: SP_FEAT_* (this library's API), the
 * ioctl ABI's STRIXPEER_FEAT_* and the netlink spec's STRIXPEER_FEATURE_*
 * (generated); the version ioctl and the info reply carry the same word.
 */
#define SP_FEAT_SAME(n) \
	_Static_assert(SP_FEAT_##n == STRIXPEER_FEAT_##n && \
		       SP_FEAT_##n == (uint64_t)STRIXPEER_FEATURE_##n, "feature bit " #n)
SP_FEAT_SAME(BUFFERS);
SP_FEAT_SAME(NUMA);
SP_FEAT_SAME(PEERDIRECT);
SP_FEAT_SAME(DMABUF_EXPORT);
SP_FEAT_SAME(DMABUF_IMPORT);
SP_FEAT_SAME(GEM_DMABUF);
#undef SP_FEAT_SAME
_Static_assert(SP_ALLOC_HUGE_ONLY == STRIXPEER_ALLOC_HUGE_ONLY, "alloc flags");
_Static_assert(SP_ALLOC_ALLOW_SMALL == STRIXPEER_ALLOC_ALLOW_SMALL, "alloc flags");
_Static_assert((SP_ALLOC_UNMAPPED & STRIXPEER_ALLOC_FLAGS) == 0, "alloc flags");
_Static_assert(SP_EXPORT_CLOEXEC == STRIXPEER_EXPORT_CLOEXEC, "export flags");
_Static_assert(SP_EXPORT_RDWR == STRIXPEER_EXPORT_RDWR, "export flags");

#define SP_SYSFS_STATS	"/sys/class/misc/strixpeer/stats"

/* Oldest module ABI minor this library works with (per major). */
static const unsigned int sp_abi_minor_min;

static __thread char sp_errbuf[512];

int sp_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sp_errbuf, sizeof(sp_errbuf), fmt, ap);
	va_end(ap);
	return -err;
}

const char *sp_lib_version(void)
{
	return SP_LIB_VERSION;
}

const char *sp_errmsg(void)
{
	return sp_errbuf[0] ? sp_errbuf : "no error";
}

static int sp_handshake(struct sp_dev *dev, const char *path)
{
	struct strixpeer_version v;

	memset(&v, 0, sizeof(v));
	if (ioctl(dev->fd, STRIXPEER_IOC_VERSION, &v) < 0) {
		int err = errno;

		if (err == ENOTTY)
			return sp_fail(EPROTONOSUPPORT,
				       "%s does not answer the strixpeer version ioctl: not a strixpeer device, or a module too old for libstrixpeer %s",
				       path, SP_LIB_VERSION);
		return sp_fail(err, "%s: version ioctl: %s", path, strerror(err));
	}
	if (v.abi_major > STRIXPEER_ABI_MAJOR)
		return sp_fail(EPROTONOSUPPORT,
			       "strixpeer module ABI %u.%u is newer than libstrixpeer %s understands (%u.x): update libstrixpeer",
			       v.abi_major, v.abi_minor, SP_LIB_VERSION,
			       STRIXPEER_ABI_MAJOR);
	if (v.abi_major < STRIXPEER_ABI_MAJOR ||
	    v.abi_minor < sp_abi_minor_min)
		return sp_fail(EPROTONOSUPPORT,
			       "strixpeer module ABI %u.%u is too old for libstrixpeer %s (needs %u.%u or newer): update the strixpeer module",
			       v.abi_major, v.abi_minor, SP_LIB_VERSION,
			       STRIXPEER_ABI_MAJOR, sp_abi_minor_min);

	dev->ver.abi_major = v.abi_major;
	dev->ver.abi_minor = v.abi_minor;
	dev->ver.module_major = (v.module_version >> 16) & 0xff;
	dev->ver.module_minor = (v.module_version >> 8) & 0xff;
	dev->ver.module_patch = v.module_version & 0xff;
	dev->ver.features = v.features;
	dev->ver.page_sizes = v.page_sizes;
	return 0;
}

int sp_dev_open(const char *path, struct sp_dev **devp)
{
	struct sp_dev *dev;
	int ret;

	if (!path)
		path = STRIXPEER_DEVICE_PATH;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return sp_fail(ENOMEM, "out of memory");
	dev->fd = open(path, O_RDWR | O_CLOEXEC);
	if (dev->fd < 0) {
		int err = errno;

		free(dev);
		if (err == ENOENT)
			return sp_fail(err, "%s does not exist: is the strixpeer module loaded? (modprobe strixpeer)",
				       path);
		if (err == EACCES || err == EPERM)
			return sp_fail(err, "no permission to open %s: run as root or join the group that owns it",
				       path);
		return sp_fail(err, "cannot open %s: %s", path, strerror(err));
	}
	dev->pid = getpid();
	ret = sp_handshake(dev, path);
	if (ret) {
		close(dev->fd);
		free(dev);
		return ret;
	}
	*devp = dev;
	return 0;
}

void sp_dev_close(struct sp_dev *dev)
{
	if (!dev)
		return;
	if (dev->drop_all)
		dev->drop_all(dev);
	while (dev->imports)
		sp_import_free(dev->imports);
	while (dev->bufs)
		sp_buf_free(dev->bufs);
	close(dev->fd);
	free(dev);
}

int sp_dev_fd(const struct sp_dev *dev)
{
	return dev->fd;
}

int sp_dev_version(const struct sp_dev *dev, struct sp_version *ver)
{
	*ver = dev->ver;
	return 0;
}

static int sp_alloc_error(int err, size_t size, int node)
{
	switch (err) {
	case EFBIG:
		return sp_fail(err, "%zu-byte buffer refused: larger than the module's max_buf_size (/sys/module/strixpeer/parameters/max_buf_size)",
			       size);
	case ENOSPC:
		return sp_fail(err, "%zu-byte buffer refused: all buffers together would exceed the module's max_pinned_bytes (strixpeerctl config show)",
			       size);
	case EMFILE:
		return sp_fail(err, "no free buffer handle on this device fd");
	case EDQUOT:
		return sp_fail(err, "%zu-byte buffer refused: it would exceed your RLIMIT_MEMLOCK (ulimit -l), which bounds all buffers of your user together (CAP_IPC_LOCK lifts it)",
			       size);
	case ENOMEM:
		return sp_fail(err, "not enough free memory for a %zu-byte buffer with the requested page size on node %d (or your memory cgroup's limit reached)",
			       size, node);
	case EINVAL:
		/* size 0 and contradictory flags were refused before the ioctl */
		if (node == SP_NODE_DEFAULT)
			return sp_fail(err, "%zu-byte buffer refused: the module's default node (default_node, or the caller's node) is not online or has no memory",
				       size);
		return sp_fail(err, "%zu-byte buffer refused: NUMA node %d is not online or has no memory",
			       size, node);
	case EINTR:
		return sp_fail(err, "allocation interrupted by a signal");
	default:
		return sp_fail(err, "buffer allocation failed: %s", strerror(err));
	}
}

int sp_buf_alloc(struct sp_dev *dev, size_t size, int node,
		 unsigned int flags, struct sp_buf **bufp)
{
	struct strixpeer_buf_alloc a;
	struct sp_buf *buf;
	int ret;

	if (flags & ~(STRIXPEER_ALLOC_FLAGS | SP_ALLOC_UNMAPPED))
		return sp_fail(EINVAL, "unknown flags 0x%x", flags);
	if (node < SP_NODE_DEFAULT)
		return sp_fail(EINVAL, "invalid NUMA node %d", node);
	if (!size)
		return sp_fail(EINVAL, "a buffer cannot be 0 bytes");
	if ((flags & STRIXPEER_ALLOC_FLAGS) == STRIXPEER_ALLOC_FLAGS)
		return sp_fail(EINVAL, "SP_ALLOC_HUGE_ONLY and SP_ALLOC_ALLOW_SMALL contradict each other: pass one of them (or neither for the module's require_huge)");
	buf = calloc(1, sizeof(*buf));
	if (!buf)
		return sp_fail(ENOMEM, "out of memory");

	memset(&a, 0, sizeof(a));
	a.size = size;
	a.node = node == SP_NODE_DEFAULT ? STRIXPEER_NODE_DEFAULT : (uint32_t)node;
	a.flags = flags & STRIXPEER_ALLOC_FLAGS;
	if (ioctl(dev->fd, STRIXPEER_IOC_BUF_ALLOC, &a) < 0) {
		ret = sp_alloc_error(errno, size, node);
		free(buf);
		return ret;
	}
	buf->dev = dev;
	buf->export_fd = -1;
	buf->handle = a.handle;
	buf->size = a.size;
	buf->mmap_offset = a.mmap_offset;
	buf->next = dev->bufs;
	dev->bufs = buf;

	if (!(flags & SP_ALLOC_UNMAPPED)) {
		ret = sp_buf_map(buf);
		if (ret) {
			char msg[sizeof(sp_errbuf)];

			memcpy(msg, sp_errbuf, sizeof(msg));
			sp_buf_free(buf);
			memcpy(sp_errbuf, msg, sizeof(msg));
			return ret;
		}
	}
	*bufp = buf;
	return 0;
}

int sp_buf_map(struct sp_buf *buf)
{
	void *addr;

	if (buf->addr)
		return sp_fail(EBUSY, "buffer %u is already mapped", buf->handle);
	addr = mmap(NULL, buf->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		    buf->dev->fd, (off_t)buf->mmap_offset);
	if (addr == MAP_FAILED) {
		int err = errno;

		return sp_fail(err, "mapping buffer %u (%zu bytes) failed: %s",
			       buf->handle, buf->size, strerror(err));
	}
	buf->addr = addr;
	return 0;
}

int sp_buf_unmap(struct sp_buf *buf)
{
	if (!buf->addr)
		return sp_fail(EINVAL, "buffer %u is not mapped", buf->handle);
	if (buf->dev->drop_range)
		buf->dev->drop_range(buf->dev, (uintptr_t)buf->addr, buf->size);
	munmap(buf->addr, buf->size);
	buf->addr = NULL;
	return 0;
}

void *sp_buf_addr(const struct sp_buf *buf)
{
	return buf->addr;
}

size_t sp_buf_size(const struct sp_buf *buf)
{
	return buf->size;
}

int sp_buf_query(const struct sp_buf *buf, struct sp_buf_info *info)
{
	struct strixpeer_buf_info bi;

	memset(&bi, 0, sizeof(bi));
	bi.handle = buf->handle;
	if (ioctl(buf->dev->fd, STRIXPEER_IOC_BUF_INFO, &bi) < 0) {
		int err = errno;

		return sp_fail(err, "querying buffer %u failed: %s",
			       buf->handle, strerror(err));
	}
	info->handle = bi.handle;
	info->node = (int)bi.node;
	info->size = bi.size;
	info->page_size = bi.page_size;
	info->nr_chunks = bi.nr_chunks;
	info->map_count = bi.map_count;
	info->mmap_offset = bi.mmap_offset;
	return 0;
}

int sp_buf_free(struct sp_buf *buf)
{
	struct strixpeer_buf_free fr;
	struct sp_buf **pp;
	int ret = 0;

	if (!buf)
		return 0;
	for (pp = &buf->dev->bufs; *pp; pp = &(*pp)->next) {
		if (*pp == buf) {
			*pp = buf->next;
			break;
		}
	}
	if (buf->addr) {
		if (buf->dev->drop_range)
			buf->dev->drop_range(buf->dev, (uintptr_t)buf->addr,
					     buf->size);
		munmap(buf->addr, buf->size);
	}
	if (buf->export_fd >= 0)
		close(buf->export_fd);
	memset(&fr, 0, sizeof(fr));
	fr.handle = buf->handle;
	if (ioctl(buf->dev->fd, STRIXPEER_IOC_BUF_FREE, &fr) < 0) {
		int err = errno;

		ret = sp_fail(err, "freeing buffer %u failed: %s", buf->handle,
			      strerror(err));
	}
	free(buf);
	return ret;
}

int sp_buf_export(struct sp_buf *buf, unsigned int flags, int *fdp)
{
	struct strixpeer_buf_export e;
	struct sp_dev *dev = buf->dev;

	if (dev->ver.abi_major == 1 && dev->ver.abi_minor < 2)
		return sp_fail(EOPNOTSUPP, "the loaded strixpeer module (ABI %u.%u) cannot export dma-bufs: update it to ABI 1.2 or later",
			       dev->ver.abi_major, dev->ver.abi_minor);
	if (flags & ~(unsigned int)STRIXPEER_EXPORT_FLAGS)
		return sp_fail(EINVAL, "unknown export flags 0x%x", flags);
	memset(&e, 0, sizeof(e));
	e.handle = buf->handle;
	e.flags = flags;
	if (ioctl(dev->fd, STRIXPEER_IOC_BUF_EXPORT, &e) < 0) {
		int err = errno;

		if (err == EMFILE || err == ENFILE)
			return sp_fail(err, "exporting buffer %u: no free file descriptor (ulimit -n)",
				       buf->handle);
		if (err == EACCES)
			return sp_fail(err, "this strixpeer device was opened by another process");
		return sp_fail(err, "exporting buffer %u as a dma-buf failed: %s",
			       buf->handle, strerror(err));
	}
	*fdp = e.fd;
	return 0;
}

int sp_import_dmabuf(struct sp_dev *dev, int dmabuf_fd, uint64_t offset,
		     size_t length, void *addr, struct sp_import **impp)
{
	struct strixpeer_import ioc;
	struct sp_import *imp;
	long page = sysconf(_SC_PAGESIZE);

	if (dev->ver.abi_major == 1 && dev->ver.abi_minor < 1)
		return sp_fail(EOPNOTSUPP, "the loaded strixpeer module (ABI %u.%u) cannot import dma-bufs: update it to ABI 1.1 or later",
			       dev->ver.abi_major, dev->ver.abi_minor);
	if (!length || (offset | length | (uintptr_t)addr) % (uint64_t)page)
		return sp_fail(EINVAL, "import of %zu bytes at %p, dma-buf offset %" PRIu64 ": address, offset and length must be non-zero multiples of the page size (%ld)",
			       length, addr, offset, page);
	imp = calloc(1, sizeof(*imp));
	if (!imp)
		return sp_fail(ENOMEM, "out of memory");
	/* Our own fd of the dma-buf, for sp_reg_mr()'s ibv_reg_dmabuf_mr(). */
	imp->dmabuf_fd = fcntl(dmabuf_fd, F_DUPFD_CLOEXEC, 3);
	memset(&ioc, 0, sizeof(ioc));
	ioc.dmabuf_fd = dmabuf_fd;
	ioc.offset = offset;
	ioc.length = length;
	ioc.va = (uintptr_t)addr;
	if (ioctl(dev->fd, STRIXPEER_IOC_IMPORT, &ioc) < 0) {
		int err = errno;

		if (imp->dmabuf_fd >= 0)
			close(imp->dmabuf_fd);
		free(imp);
		switch (err) {
		case EBADF:
			return sp_fail(err, "fd %d is not an open dma-buf", dmabuf_fd);
		case ERANGE:
			return sp_fail(err, "dma-buf fd %d has no bytes [%" PRIu64 ", %" PRIu64 "): it is smaller",
				       dmabuf_fd, offset, offset + length);
		case EEXIST:
			return sp_fail(err, "[%p, +%zu) overlaps a range this process already imported",
				       addr, length);
		case EACCES:
			return sp_fail(err, "this strixpeer device was opened by another process");
		default:
			return sp_fail(err, "import of dma-buf fd %d failed: %s",
				       dmabuf_fd, strerror(err));
		}
	}
	imp->dev = dev;
	imp->handle = ioc.handle;
	imp->id = ioc.id;
	imp->addr = addr;
	imp->length = length;
	imp->offset = offset;
	imp->next = dev->imports;
	dev->imports = imp;
	*impp = imp;
	return 0;
}

uint32_t sp_import_id(const struct sp_import *imp)
{
	return imp->id;
}

int sp_import_query(const struct sp_import *imp, struct sp_import_info *info)
{
	struct strixpeer_import_info ii;

	memset(&ii, 0, sizeof(ii));
	ii.handle = imp->handle;
	if (ioctl(imp->dev->fd, STRIXPEER_IOC_IMPORT_INFO, &ii) < 0) {
		int err = errno;

		return sp_fail(err, "querying import %u failed: %s", imp->id,
			       strerror(err));
	}
	memset(info, 0, sizeof(*info));
	info->id = ii.id;
	info->addr = (void *)(uintptr_t)ii.va;
	info->length = ii.length;
	info->offset = ii.offset;
	info->dmabuf_size = ii.dmabuf_size;
	info->unmapped = ii.state == STRIXPEER_IMPORT_UNMAPPED;
	info->registrations = ii.registrations;
	return 0;
}

int sp_import_free(struct sp_import *imp)
{
	struct strixpeer_unimport u;
	struct sp_import **pp;
	int ret = 0;

	if (!imp)
		return 0;
	for (pp = &imp->dev->imports; *pp; pp = &(*pp)->next) {
		if (*pp == imp) {
			*pp = imp->next;
			break;
		}
	}
	if (imp->dev->drop_range)
		imp->dev->drop_range(imp->dev, (uintptr_t)imp->addr,
				     imp->length);
	if (imp->dmabuf_fd >= 0)
		close(imp->dmabuf_fd);
	memset(&u, 0, sizeof(u));
	u.handle = imp->handle;
	if (ioctl(imp->dev->fd, STRIXPEER_IOC_UNIMPORT, &u) < 0) {
		int err = errno;

		ret = sp_fail(err, "ending import %u failed: %s", imp->id,
			      strerror(err));
	}
	free(imp);
	return ret;
}

static int sp_read_u64(const char *name, uint64_t *val)
{
	char path[128], line[64];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", SP_SYSFS_STATS, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ok = fgets(line, sizeof(line), f) != NULL &&
	     sscanf(line, "%" SCNu64, val) == 1;
	fclose(f);
	return ok ? 0 : -EIO;
}

int sp_stats_read(struct sp_stats *stats)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
#define SP_FIELD(n) { #n, offsetof(struct sp_stats, n) }
		SP_FIELD(buffers), SP_FIELD(pinned_bytes),
		SP_FIELD(peak_pinned_bytes), SP_FIELD(allocs), SP_FIELD(frees),
		SP_FIELD(fail_nomem), SP_FIELD(fail_memlock), SP_FIELD(mmaps),
#undef SP_FIELD
	};
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		int ret = sp_read_u64(fields[i].name,
				      (uint64_t *)((char *)stats + fields[i].off));

		if (ret == -ENOENT)
			return sp_fail(ENOENT, "%s does not exist: is the strixpeer module loaded?",
				       SP_SYSFS_STATS);
		if (ret)
			return sp_fail(-ret, "reading %s/%s failed: %s",
				       SP_SYSFS_STATS, fields[i].name,
				       strerror(-ret));
	}
	return 0;
}
