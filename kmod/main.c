// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer - RDMA-registrable unified CPU/GPU memory for AMD Strix Halo.
 *
 * This file: the /dev/strixpeer misc device, its ioctl dispatcher
 * (extensible structs, see include/uapi/strixpeer.h) and the module's
 * init and exit. The counters and their sysfs files are stats.c's, the
 * limits' module parameters params.c's.
 */
#include <linux/device.h>
#include <linux/dma-buf.h>
#include <linux/fcntl.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/nodemask.h>
#include <linux/sched/mm.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/topology.h>
#include <linux/uaccess.h>

#include <uapi/strixpeer.h>

#include "strixpeer.h"

/**
 * sp_file_get_buf() - look up a buffer of a file and take a reference
 * @f: file state
 * @handle: buffer handle
 *
 * Context: takes and releases @f->bufs' xa_lock.
 * Return: the buffer (drop with sp_buf_put()) or NULL.
 */
static struct sp_buf *sp_file_get_buf(struct sp_file *f, u32 handle)
{
	struct sp_buf *buf;

	xa_lock(&f->bufs);
	buf = xa_load(&f->bufs, handle);
	if (buf)
		kref_get(&buf->ref);	/* the xarray's reference keeps it alive */
	xa_unlock(&f->bufs);
	return buf;
}

/**
 * sp_file_erase_buf() - remove a handle of a file
 * @f: file state
 * @handle: buffer handle
 * @expect: the buffer the handle must name, or NULL for any
 *
 * Clears the buffer's @handle (what netlink and fdinfo report) with it.
 *
 * Context: takes and releases @f->bufs' xa_lock.
 * Return: the buffer removed (the handle's reference is now the caller's),
 * or NULL (or, with @expect, whatever else the handle named: then nothing
 * was removed).
 */
static struct sp_buf *sp_file_erase_buf(struct sp_file *f, u32 handle,
					struct sp_buf *expect)
{
	struct sp_buf *buf;

	xa_lock(&f->bufs);
	buf = xa_load(&f->bufs, handle);
	if (buf && (!expect || buf == expect)) {
		__xa_erase(&f->bufs, handle);
		WRITE_ONCE(buf->handle, 0);
	}
	xa_unlock(&f->bufs);
	return buf;
}

static int sp_resolve_node(u32 requested, int *node)
{
	int nid;

	if (requested != STRIXPEER_NODE_DEFAULT) {
		if (requested >= nr_node_ids)
			return -EINVAL;
		nid = requested;
	} else {
		nid = READ_ONCE(sp_default_node);
		if (nid == NUMA_NO_NODE)
			nid = numa_mem_id();
	}
	if (nid < 0 || nid >= nr_node_ids || !node_state(nid, N_MEMORY))
		return -EINVAL;
	*node = nid;
	return 0;
}

static int sp_ioctl_version(struct sp_file *f, void *data)
{
	struct strixpeer_version *v = data;

	v->abi_major = STRIXPEER_ABI_MAJOR;
	v->abi_minor = STRIXPEER_ABI_MINOR;
	v->module_version = (SP_VERSION_MAJOR << 16) | (SP_VERSION_MINOR << 8) |
			    SP_VERSION_PATCH;
	v->features = SP_FEATURES;
	if (sp_peer_active())
		v->features |= STRIXPEER_FEAT_PEERDIRECT;
	v->page_sizes = SP_PAGE_SIZES;
	return 0;
}

/*
 * BUF_ALLOC and IMPORT keep a reference on what they made until their
 * result was copied out (commit drops it) or could not be (undo ends the
 * handle - only if it still names that object: another thread may have
 * freed it and got the same handle for something new meanwhile).
 */
struct sp_alloc_req {
	struct strixpeer_buf_alloc u;	/* first: what is copied in and out */
	struct sp_buf *buf;
};

struct sp_import_req {
	struct strixpeer_import u;	/* first: what is copied in and out */
	struct sp_import *imp;
};

static int sp_ioctl_buf_alloc(struct sp_file *f, void *data)
{
	struct sp_alloc_req *req = data;
	struct strixpeer_buf_alloc *a = &req->u;
	unsigned long max = READ_ONCE(sp_max_buf_size);
	struct sp_buf *buf;
	bool huge_only;
	u64 size;
	int node;
	u32 id;
	int ret;

	if ((a->flags & ~STRIXPEER_ALLOC_FLAGS) || a->reserved || !a->size)
		return -EINVAL;
	if ((a->flags & STRIXPEER_ALLOC_FLAGS) == STRIXPEER_ALLOC_FLAGS)
		return -EINVAL;
	huge_only = (a->flags & STRIXPEER_ALLOC_HUGE_ONLY) ||
		    (!(a->flags & STRIXPEER_ALLOC_ALLOW_SMALL) &&
		     READ_ONCE(sp_require_huge));

	size = round_up(a->size, huge_only ? PMD_SIZE : PAGE_SIZE);
	if (a->size > max || size > max || size < a->size) {
		/* What would have been pinned: the size rounded to its pages. */
		pr_info_ratelimited("strixpeer: %s[%d]: %llu-byte buffer (%llu bytes asked, in %s pages) refused: above max_buf_size (%lu)\n",
				    current->comm, task_pid_nr(current),
				    size < a->size ? a->size : size, a->size,
				    huge_only ? "2 MiB" : "4 KiB", max);
		atomic64_inc(&sp_stats.fail_max_buf_size);
		sp_event_limit(STRIXPEER_LIMIT_MAX_BUF_SIZE, a->size);
		return -EFBIG;
	}
	ret = sp_resolve_node(a->node, &node);
	if (ret)
		return ret;

	buf = sp_buf_create(size, node, huge_only);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	/*
	 * Announced as soon as it exists, before anything below can fail:
	 * its release announces BUF_FREED whatever the outcome, and every
	 * BUF_FREED has its BUF_CREATED.
	 */
	sp_buf_event(buf, STRIXPEER_CMD_BUF_CREATED_NTF);

	/*
	 * Once in the xarray, another thread may free the handle at once:
	 * the creation reference stays ours (req->buf) until commit or undo.
	 */
	kref_get(&buf->ref);
	xa_lock(&f->bufs);
	ret = __xa_alloc(&f->bufs, &id, buf, XA_LIMIT(1, SP_MAX_HANDLE),
			 GFP_KERNEL_ACCOUNT);
	if (!ret)
		WRITE_ONCE(buf->handle, id);	/* before a BUF_FREE can clear it */
	xa_unlock(&f->bufs);
	if (ret) {
		sp_buf_put(buf);
		sp_buf_put(buf);
		return ret == -EBUSY ? -EMFILE : ret;
	}
	req->buf = buf;
	a->size = size;
	a->handle = id;
	a->mmap_offset = (u64)id << SP_COOKIE_SHIFT;
	return 0;
}

static void sp_ioctl_buf_alloc_commit(struct sp_file *f, void *data)
{
	struct sp_alloc_req *req = data;

	sp_buf_put(req->buf);
}

/* Undo a BUF_ALLOC whose result could not be copied back to user space. */
static void sp_ioctl_buf_alloc_undo(struct sp_file *f, void *data)
{
	struct sp_alloc_req *req = data;

	if (sp_file_erase_buf(f, req->u.handle, req->buf) == req->buf)
		sp_buf_put(req->buf);	/* the handle's reference */
	sp_buf_put(req->buf);
}

static int sp_ioctl_buf_free(struct sp_file *f, void *data)
{
	struct strixpeer_buf_free *fr = data;
	struct sp_buf *buf;

	if (fr->flags)
		return -EINVAL;
	buf = sp_file_erase_buf(f, fr->handle, NULL);
	if (!buf)
		return -ENOENT;
	sp_buf_put(buf);
	return 0;
}

static int sp_ioctl_buf_info(struct sp_file *f, void *data)
{
	struct strixpeer_buf_info *info = data;
	struct sp_buf *buf;

	if (info->flags || info->reserved)
		return -EINVAL;
	buf = sp_file_get_buf(f, info->handle);
	if (!buf)
		return -ENOENT;
	info->size = buf->size;
	info->mmap_offset = (u64)info->handle << SP_COOKIE_SHIFT;
	info->page_size = buf->page_size;
	info->node = buf->node;
	info->nr_chunks = buf->nr_chunks;
	info->map_count = atomic_read(&buf->map_count);
	sp_buf_put(buf);
	return 0;
}

/*
 * BUF_EXPORT in three steps, so that a result that cannot be copied back
 * loses nothing: reserve the fd and make the dma-buf here, install the fd
 * only after the copy (sp_ioctl_buf_export_commit), or give both back
 * (sp_ioctl_buf_export_undo).
 */
struct sp_export_req {
	struct strixpeer_buf_export u;	/* first: what is copied in and out */
	struct dma_buf *dmabuf;
};

static int sp_ioctl_buf_export(struct sp_file *f, void *data)
{
	struct sp_export_req *req = data;
	struct strixpeer_buf_export *e = &req->u;
	struct dma_buf *dmabuf;
	struct sp_buf *buf;
	int fd;

	if ((e->flags & ~STRIXPEER_EXPORT_FLAGS) || e->reserved)
		return -EINVAL;
	buf = sp_file_get_buf(f, e->handle);
	if (!buf)
		return -ENOENT;
	fd = get_unused_fd_flags((e->flags & STRIXPEER_EXPORT_CLOEXEC) ?
				 O_CLOEXEC : 0);
	if (fd < 0) {
		sp_buf_put(buf);
		return fd;
	}
	dmabuf = sp_export_create(buf, e->flags);
	sp_buf_put(buf);
	if (IS_ERR(dmabuf)) {
		put_unused_fd(fd);
		return PTR_ERR(dmabuf);
	}
	e->fd = fd;
	req->dmabuf = dmabuf;
	return 0;
}

static void sp_ioctl_buf_export_commit(struct sp_file *f, void *data)
{
	struct sp_export_req *req = data;

	fd_install(req->u.fd, req->dmabuf->file);
}

static void sp_ioctl_buf_export_undo(struct sp_file *f, void *data)
{
	struct sp_export_req *req = data;

	put_unused_fd(req->u.fd);
	dma_buf_put(req->dmabuf);
}

static int sp_ioctl_import(struct sp_file *f, void *data)
{
	struct sp_import_req *req = data;
	struct strixpeer_import *imp = &req->u;

	if (imp->flags)
		return -EINVAL;
	return sp_import_create(f, imp->dmabuf_fd, imp->offset, imp->length,
				imp->va, &imp->handle, &imp->id, &req->imp);
}

static void sp_ioctl_import_commit(struct sp_file *f, void *data)
{
	struct sp_import_req *req = data;

	sp_import_put(req->imp);
}

/* Undo an IMPORT whose result could not be copied back to user space. */
static void sp_ioctl_import_undo(struct sp_file *f, void *data)
{
	struct sp_import_req *req = data;

	sp_import_destroy(f, req->u.handle, req->imp, STRIXPEER_INVAL_UNIMPORT);
	sp_import_put(req->imp);
}

static int sp_ioctl_unimport(struct sp_file *f, void *data)
{
	struct strixpeer_unimport *u = data;

	if (u->flags)
		return -EINVAL;
	return sp_import_destroy(f, u->handle, NULL, STRIXPEER_INVAL_UNIMPORT);
}

static int sp_ioctl_import_info(struct sp_file *f, void *data)
{
	struct strixpeer_import_info *info = data;

	if (info->flags || info->reserved)
		return -EINVAL;
	return sp_import_info(f, info);
}

/**
 * struct sp_ioctl_desc - one ioctl
 * @cmd: the command as this module knows it (direction, current size)
 * @min_size: size of the struct's first ABI version; smaller is refused
 * @fn: handler, works on a kernel copy of the struct
 * @undo: reverts @fn when its result cannot be copied back (optional)
 * @commit: makes @fn's result visible once it was copied back (optional)
 */
struct sp_ioctl_desc {
	unsigned int cmd;
	unsigned int min_size;
	int (*fn)(struct sp_file *f, void *data);
	void (*undo)(struct sp_file *f, void *data);
	void (*commit)(struct sp_file *f, void *data);
};

#define SP_IOCTL(_cmd, _type, _fn)					\
	[_IOC_NR(_cmd)] = { .cmd = _cmd, .min_size = sizeof(_type),	\
			    .fn = _fn }
#define SP_IOCTL_UNDO(_cmd, _type, _fn, _undo, _commit)			\
	[_IOC_NR(_cmd)] = { .cmd = _cmd, .min_size = sizeof(_type),	\
			    .fn = _fn, .undo = _undo, .commit = _commit }

static const struct sp_ioctl_desc sp_ioctls[] = {
	SP_IOCTL(STRIXPEER_IOC_VERSION, struct strixpeer_version,
		 sp_ioctl_version),
	SP_IOCTL_UNDO(STRIXPEER_IOC_BUF_ALLOC, struct strixpeer_buf_alloc,
		      sp_ioctl_buf_alloc, sp_ioctl_buf_alloc_undo,
		      sp_ioctl_buf_alloc_commit),
	SP_IOCTL(STRIXPEER_IOC_BUF_FREE, struct strixpeer_buf_free,
		 sp_ioctl_buf_free),
	SP_IOCTL(STRIXPEER_IOC_BUF_INFO, struct strixpeer_buf_info,
		 sp_ioctl_buf_info),
	SP_IOCTL_UNDO(STRIXPEER_IOC_IMPORT, struct strixpeer_import,
		      sp_ioctl_import, sp_ioctl_import_undo,
		      sp_ioctl_import_commit),
	SP_IOCTL(STRIXPEER_IOC_UNIMPORT, struct strixpeer_unimport,
		 sp_ioctl_unimport),
	SP_IOCTL(STRIXPEER_IOC_IMPORT_INFO, struct strixpeer_import_info,
		 sp_ioctl_import_info),
	SP_IOCTL_UNDO(STRIXPEER_IOC_BUF_EXPORT, struct strixpeer_buf_export,
		      sp_ioctl_buf_export, sp_ioctl_buf_export_undo,
		      sp_ioctl_buf_export_commit),
	SP_IOCTL_UNDO(STRIXPEER_IOC_GEM_DMABUF, struct strixpeer_gem_dmabuf,
		      sp_ioctl_gem_dmabuf, sp_ioctl_gem_dmabuf_undo,
		      sp_ioctl_gem_dmabuf_commit),
};

union sp_ioctl_data {
	struct strixpeer_version version;
	struct sp_alloc_req alloc;
	struct strixpeer_buf_free free;
	struct strixpeer_buf_info info;
	struct sp_import_req import;
	struct strixpeer_unimport unimport;
	struct strixpeer_import_info import_info;
	struct sp_export_req export;
	struct sp_gem_dmabuf_req gem_dmabuf;
};

static long sp_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct sp_file *f = filp->private_data;
	void __user *uarg = (void __user *)arg;
	unsigned int usize = _IOC_SIZE(cmd);
	const struct sp_ioctl_desc *desc;
	union sp_ioctl_data data;
	unsigned int nr = _IOC_NR(cmd);
	unsigned int ksize;
	int ret;

	if (_IOC_TYPE(cmd) != STRIXPEER_IOC_MAGIC || nr >= ARRAY_SIZE(sp_ioctls))
		return -ENOTTY;
	desc = &sp_ioctls[array_index_nospec(nr, ARRAY_SIZE(sp_ioctls))];
	if (!desc->fn || _IOC_DIR(cmd) != _IOC_DIR(desc->cmd))
		return -ENOTTY;
	/* Ownership before anything about the arguments. */
	if (f->mm != current->mm)
		return -EACCES;
	if (usize < desc->min_size)
		return -EINVAL;

	ksize = _IOC_SIZE(desc->cmd);
	BUILD_BUG_ON(sizeof(data) > 80);
	memset(&data, 0, sizeof(data));
	if (_IOC_DIR(cmd) & _IOC_WRITE) {
		/* Zero-fills a smaller struct; -E2BIG on a non-zero newer tail. */
		ret = copy_struct_from_user(&data, ksize, uarg, usize);
		if (ret)
			return ret;
	} else if (usize > ksize) {
		/* Output only: a newer struct's tail must be zero all the same. */
		ret = check_zeroed_user(uarg + ksize, usize - ksize);
		if (ret <= 0)
			return ret ?: -E2BIG;
	}

	ret = desc->fn(f, &data);
	if (ret || !(_IOC_DIR(cmd) & _IOC_READ))
		return ret;

	if (copy_to_user(uarg, &data, min(usize, ksize)) ||
	    (usize > ksize && clear_user(uarg + ksize, usize - ksize))) {
		if (desc->undo)
			desc->undo(f, &data);
		return -EFAULT;
	}
	if (desc->commit)
		desc->commit(f, &data);
	return 0;
}

static int sp_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct sp_file *f = filp->private_data;
	unsigned long handle = vma->vm_pgoff >> (SP_COOKIE_SHIFT - PAGE_SHIFT);
	struct sp_buf *buf;
	int ret;

	if (f->mm != current->mm)
		return -EACCES;
	if (handle > SP_MAX_HANDLE)
		return -EINVAL;
	buf = sp_file_get_buf(f, handle);
	if (!buf)
		return -EINVAL;
	ret = sp_buf_mmap(buf, vma, vma->vm_pgoff & SP_COOKIE_PGOFF_MASK);
	sp_buf_put(buf);
	return ret;
}

static int sp_open(struct inode *inode, struct file *filp)
{
	struct sp_file *f;

	if (!current->mm)
		return -EPERM;
	f = kzalloc(sizeof(*f), GFP_KERNEL_ACCOUNT);
	if (!f)
		return -ENOMEM;
	xa_init_flags(&f->bufs, XA_FLAGS_ALLOC1);
	xa_init_flags(&f->imports, XA_FLAGS_ALLOC1);
	f->mm = current->mm;
	f->pid = task_tgid_nr(current);
	get_task_comm(f->comm, current);
	mmgrab(f->mm);
	filp->private_data = f;
	return 0;
}

/*
 * Last close of the file: every handle goes. Buffers still mapped live on
 * until their last VMA is closed; imports end, their registrations are
 * invalidated.
 */
static int sp_release(struct inode *inode, struct file *filp)
{
	struct sp_file *f = filp->private_data;
	struct sp_buf *buf;
	unsigned long idx;

	sp_import_release_all(f);

	xa_for_each(&f->bufs, idx, buf) {
		sp_file_erase_buf(f, idx, buf);
		sp_buf_put(buf);
	}
	xa_destroy(&f->bufs);
	mmdrop(f->mm);
	kfree(f);
	return 0;
}

/*
 * /proc/PID/fdinfo/FD of a /dev/strixpeer file: who opened it and what it
 * holds, so that tools can name the processes holding a buffer (the
 * kernel cannot list a file's holders; user space can scan fdinfo):
 *	strixpeer-opener:	<tgid> <comm>	(at open: a hint)
 *	strixpeer-buf:	<handle> <id> <size>	(one line per handle)
 *	strixpeer-import:	<handle> <id>	(one line per import)
 * The file's mappings hold buffers too: /proc/PID/maps names them by
 * mmap offset (handle << SP_COOKIE_SHIFT).
 */
static void sp_show_fdinfo(struct seq_file *m, struct file *filp)
{
	struct sp_file *f = filp->private_data;
	struct sp_import *imp;
	struct sp_buf *buf;
	unsigned long idx;

	seq_printf(m, "strixpeer-opener:\t%d %s\n", f->pid, f->comm);
	/* Entries hold a reference while present; erasing takes the lock. */
	xa_lock(&f->bufs);
	xa_for_each(&f->bufs, idx, buf)
		seq_printf(m, "strixpeer-buf:\t%lu %u %llu\n", idx, buf->id,
			   buf->size);
	xa_unlock(&f->bufs);
	xa_lock(&f->imports);
	xa_for_each(&f->imports, idx, imp)
		seq_printf(m, "strixpeer-import:\t%lu %u\n", idx, imp->id);
	xa_unlock(&f->imports);
}

static const struct file_operations sp_fops = {
	.owner = THIS_MODULE,
	.open = sp_open,
	.release = sp_release,
	.unlocked_ioctl = sp_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = sp_mmap,
	.get_unmapped_area = sp_get_unmapped_area,
	.show_fdinfo = sp_show_fdinfo,
};

static struct miscdevice sp_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "strixpeer",
	.fops = &sp_fops,
	.groups = sp_stats_groups,
	.mode = 0600,
};

static int __init sp_init(void)
{
	int ret;

	sp_stats_init();
	ret = sp_import_init();
	if (ret)
		return ret;
	ret = sp_nl_init();
	if (ret)
		goto out_import;
	ret = sp_peer_init();
	if (ret)
		goto out_nl;
	ret = misc_register(&sp_misc);
	if (ret)
		goto out_peer;
	return 0;

out_peer:
	sp_peer_exit();
out_nl:
	sp_nl_exit();
out_import:
	sp_import_exit();
	return ret;
}

/* No file is open and no registration left: each holds a module reference. */
static void __exit sp_exit(void)
{
	misc_deregister(&sp_misc);
	sp_peer_exit();
	sp_nl_exit();
	sp_import_exit();
	sp_buf_exit();
}

module_init(sp_init);
module_exit(sp_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("strixpeer developers");
MODULE_DESCRIPTION("RDMA-registrable unified memory buffers for AMD Strix Halo");
MODULE_VERSION(SP_VERSION_STR);
