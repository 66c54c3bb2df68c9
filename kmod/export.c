// SPDX-License-Identifier: GPL-2.0
/*
 * strixpeer buffers exported as dma-bufs, so that the GPU (amdgpu PRIME
 * import), dma-buf capable NICs (ibv_reg_dmabuf_mr) and any other importer
 * reach the very pages the buffer's mappings show.
 *
 * A strixpeer buffer's pages are allocated, pinned and never moved for the
 * buffer's whole life. So this exporter is "dynamic" only in name: pin()
 * and unpin() have nothing to do, importers of either kind get mappings
 * that stay valid until they unmap them, and move notification
 * (move_notify, 7.x: invalidate_mappings) is never sent.
 *
 * Every dma-buf holds a reference on its buffer (and, through the dma-buf
 * core, one on this module): freeing the handle and closing the fd leave
 * the memory to whoever still holds the dma-buf; the pages go back when
 * the last reference of any kind is dropped.
 *
 * Locking: map_dma_buf/unmap_dma_buf may run with the dma-buf's resv lock
 * held (dynamic importers; 6.2+ always). @exp->lock nests inside it and
 * protects the list of live mappings, which begin/end_cpu_access walk to
 * sync them. Nothing here takes the resv lock.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/iosys-map.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include <uapi/strixpeer.h>

#include "strixpeer.h"

/**
 * struct sp_export - one dma-buf of a buffer (the dma-buf's priv)
 * @buf: the buffer; one reference held until the dma-buf is released
 * @lock: protects @mappings (nests inside the dma-buf's resv lock)
 * @mappings: live struct sp_mapping of every attachment
 * @node: in the buffer's exp_list (its exp_lock)
 * @ino: inode number of the dma-buf's file, what stat() of an fd of it
 *	and /proc/PID/maps show: lets user space find the fds holding it
 */
struct sp_export {
	struct sp_buf *buf;
	struct mutex lock;
	struct list_head mappings;
	struct list_head node;
	u64 ino;
};

/**
 * struct sp_mapping - one map_dma_buf() result
 * @sgt: what the importer gets; DMA addresses for its device
 * @node: in sp_export.mappings
 * @dev: the importer's device
 * @dir: direction it was mapped with
 */
struct sp_mapping {
	struct sg_table sgt;
	struct list_head node;
	struct device *dev;
	enum dma_data_direction dir;
};

/* An export event (STRIXPEER_EXPORT_*) about one of @buf's dma-bufs. */
static void sp_export_event(const struct sp_buf *buf, u32 what,
			    const struct device *dev)
{
	struct sp_event_buf eb;

	sp_buf_snapshot(&eb, buf);
	sp_event_export(&eb, what, dev);
}

static int sp_dmabuf_attach(struct dma_buf *dmabuf,
			    struct dma_buf_attachment *attach)
{
	struct sp_export *exp = dmabuf->priv;

	atomic_inc(&exp->buf->attachments);
	atomic64_inc(&sp_stats.dmabuf_attachments);
	sp_export_event(exp->buf, STRIXPEER_EXPORT_ATTACH, attach->dev);
	return 0;
}

static void sp_dmabuf_detach(struct dma_buf *dmabuf,
			     struct dma_buf_attachment *attach)
{
	struct sp_export *exp = dmabuf->priv;

	atomic_dec(&exp->buf->attachments);
	atomic64_dec(&sp_stats.dmabuf_attachments);
	sp_export_event(exp->buf, STRIXPEER_EXPORT_DETACH, attach->dev);
}

/* The pages are pinned from allocation to release: nothing to do. */
static int sp_dmabuf_pin(struct dma_buf_attachment *attach)
{
	return 0;
}

static void sp_dmabuf_unpin(struct dma_buf_attachment *attach)
{
}

/*
 * The whole buffer for the importer's device: physically contiguous pages
 * merged into one entry each run, no entry longer than the device's
 * dma_get_max_seg_size() (rounded down to whole pages), then DMA mapped.
 */
static struct sg_table *sp_dmabuf_map(struct dma_buf_attachment *attach,
				      enum dma_data_direction dir)
{
	struct sp_export *exp = attach->dmabuf->priv;
	struct sp_buf *buf = exp->buf;
	unsigned int max_seg = dma_get_max_seg_size(attach->dev);
	struct sp_mapping *m;
	int ret;

	max_seg = round_down(max_seg, PAGE_SIZE);
	if (!max_seg) {
		dev_warn_ratelimited(attach->dev,
				     "strixpeer: cannot map for a device whose segments are below one page\n");
		return ERR_PTR(-EINVAL);
	}
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table_from_pages_segment(&m->sgt, buf->pages,
						buf->nr_pages, 0, buf->size,
						max_seg, GFP_KERNEL);
	if (ret)
		goto out_free;
	/*
	 * Every importer maps the same pages, several at once: skip the
	 * DMA API's implicit sync (and with it its cacheline tracking, which
	 * cannot tell shared pages from a driver bug) and sync explicitly,
	 * as exporters of shared pages do.
	 */
	ret = dma_map_sgtable(attach->dev, &m->sgt, dir, DMA_ATTR_SKIP_CPU_SYNC);
	if (ret)
		goto out_table;
	dma_sync_sgtable_for_device(attach->dev, &m->sgt, dir);
	m->dev = attach->dev;
	m->dir = dir;
	mutex_lock(&exp->lock);
	list_add(&m->node, &exp->mappings);
	mutex_unlock(&exp->lock);
	return &m->sgt;

out_table:
	sg_free_table(&m->sgt);
out_free:
	kfree(m);
	return ERR_PTR(ret);
}

static void sp_dmabuf_unmap(struct dma_buf_attachment *attach,
			    struct sg_table *sgt, enum dma_data_direction dir)
{
	struct sp_export *exp = attach->dmabuf->priv;
	struct sp_mapping *m = container_of(sgt, struct sp_mapping, sgt);

	mutex_lock(&exp->lock);
	list_del(&m->node);
	mutex_unlock(&exp->lock);
	dma_sync_sgtable_for_cpu(attach->dev, sgt, dir);
	dma_unmap_sgtable(attach->dev, sgt, dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(sgt);
	kfree(m);
}

/*
 * DMA_BUF_IOCTL_SYNC: make the devices' view and the CPU's agree. A no-op
 * on cache-coherent x86 with direct DMA; bounce buffers (swiotlb) and
 * non-coherent platforms need it.
 */
static int sp_dmabuf_sync(struct dma_buf *dmabuf, enum dma_data_direction dir,
			  bool for_cpu)
{
	struct sp_export *exp = dmabuf->priv;
	struct sp_mapping *m;

	mutex_lock(&exp->lock);
	list_for_each_entry(m, &exp->mappings, node) {
		if (for_cpu)
			dma_sync_sgtable_for_cpu(m->dev, &m->sgt, dir);
		else
			dma_sync_sgtable_for_device(m->dev, &m->sgt, dir);
	}
	mutex_unlock(&exp->lock);
	return 0;
}

static int sp_dmabuf_begin_cpu(struct dma_buf *dmabuf,
			       enum dma_data_direction dir)
{
	return sp_dmabuf_sync(dmabuf, dir, true);
}

static int sp_dmabuf_end_cpu(struct dma_buf *dmabuf,
			     enum dma_data_direction dir)
{
	return sp_dmabuf_sync(dmabuf, dir, false);
}

/* The same page-by-page mapping as the device's own mmap (GUP works). */
static int sp_dmabuf_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	struct sp_export *exp = dmabuf->priv;

	if (vma->vm_flags & (VM_PFNMAP | VM_IO))
		return -EINVAL;
	return sp_buf_mmap(exp->buf, vma, vma->vm_pgoff);
}

/* The dma-buf core counts vmap users: this runs for the first one only. */
static int sp_dmabuf_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct sp_export *exp = dmabuf->priv;
	void *vaddr;

	vaddr = vmap(exp->buf->pages, exp->buf->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!vaddr)
		return -ENOMEM;
	iosys_map_set_vaddr(map, vaddr);
	return 0;
}

static void sp_dmabuf_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	vunmap(map->vaddr);
}

/* Last reference to the dma-buf: drop ours on the buffer. */
static void sp_dmabuf_release(struct dma_buf *dmabuf)
{
	struct sp_export *exp = dmabuf->priv;
	struct sp_buf *buf = exp->buf;

	WARN_ON(!list_empty(&exp->mappings));
	spin_lock(&buf->exp_lock);
	list_del(&exp->node);
	spin_unlock(&buf->exp_lock);
	atomic_dec(&buf->exports);
	atomic64_dec(&sp_stats.dmabuf_exports);
	sp_export_event(buf, STRIXPEER_EXPORT_RELEASE, NULL);
	mutex_destroy(&exp->lock);
	kfree(exp);
	sp_buf_put(buf);
}

static const struct dma_buf_ops sp_dmabuf_ops = {
	.attach = sp_dmabuf_attach,
	.detach = sp_dmabuf_detach,
	.pin = sp_dmabuf_pin,
	.unpin = sp_dmabuf_unpin,
	.map_dma_buf = sp_dmabuf_map,
	.unmap_dma_buf = sp_dmabuf_unmap,
	.release = sp_dmabuf_release,
	.begin_cpu_access = sp_dmabuf_begin_cpu,
	.end_cpu_access = sp_dmabuf_end_cpu,
	.mmap = sp_dmabuf_mmap,
	.vmap = sp_dmabuf_vmap,
	.vunmap = sp_dmabuf_vunmap,
};

/**
 * sp_export_create() - a new dma-buf of the whole buffer
 * @buf: buffer, referenced by the caller; the dma-buf takes its own
 * @flags: STRIXPEER_EXPORT_* (RDWR: the file is opened read-write)
 *
 * Context: process context, may sleep.
 * Return: the dma-buf (one reference, drop with dma_buf_put()), or an
 * ERR_PTR().
 */
struct dma_buf *sp_export_create(struct sp_buf *buf, u32 flags)
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct sp_export *exp;
	struct dma_buf *dmabuf;

	exp = kzalloc(sizeof(*exp), GFP_KERNEL_ACCOUNT);
	if (!exp)
		return ERR_PTR(-ENOMEM);
	mutex_init(&exp->lock);
	INIT_LIST_HEAD(&exp->mappings);
	exp->buf = buf;

	info.ops = &sp_dmabuf_ops;
	info.size = buf->size;
	info.flags = (flags & STRIXPEER_EXPORT_RDWR) ? O_RDWR : O_RDONLY;
	info.priv = exp;
	dmabuf = dma_buf_export(&info);
	if (IS_ERR(dmabuf)) {
		mutex_destroy(&exp->lock);
		kfree(exp);
		return dmabuf;
	}
	kref_get(&buf->ref);
	exp->ino = file_inode(dmabuf->file)->i_ino;
	spin_lock(&buf->exp_lock);
	list_add_tail(&exp->node, &buf->exp_list);
	spin_unlock(&buf->exp_lock);
	atomic_inc(&buf->exports);
	atomic64_inc(&sp_stats.dmabuf_exports);
	sp_export_event(buf, STRIXPEER_EXPORT_CREATE, NULL);
	return dmabuf;
}

/**
 * sp_export_inos() - inode numbers of the buffer's live dma-bufs
 * @buf: buffer, referenced by the caller
 * @inos: filled with up to @max inode numbers, oldest dma-buf first
 * @max: room in @inos
 *
 * A dma-buf is listed from its export until its release (its last
 * reference of any kind, an fd, a mapping, an importer, an fd in flight
 * in a unix socket, gone).
 *
 * Context: takes and releases @buf->exp_lock.
 * Return: how many were written.
 */
unsigned int sp_export_inos(struct sp_buf *buf, u64 *inos, unsigned int max)
{
	struct sp_export *exp;
	unsigned int n = 0;

	spin_lock(&buf->exp_lock);
	list_for_each_entry(exp, &buf->exp_list, node) {
		if (n == max)
			break;
		inos[n++] = exp->ino;
	}
	spin_unlock(&buf->exp_lock);
	return n;
}
