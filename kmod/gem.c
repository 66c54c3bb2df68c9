// SPDX-License-Identifier: GPL-2.0
/*
 * GEM mapping recognition: which GPU buffer object (and which dma-buf of
 * it) a range of a process's address space maps. Two users:
 *  - zero-change mode (import.c, sp_import_from_gem()): a registration of a
 *    GPU range that the peer-memory core offers strixpeer's client;
 *  - STRIXPEER_IOC_GEM_DMABUF: a process asks for a dma-buf fd of its own
 *    GPU range, for ibv_reg_dmabuf_mr() on kernels without a peer-memory
 *    core (libstrixpeer's sp_reg_mr() and sp_gem_dmabuf()).
 * Both go through sp_gem_lookup(); nothing here keeps state.
 *
 * What a GEM mapping is, and why the object and the offset can be read
 * off it:
 *  - vma->vm_file->f_op->mmap == drm_gem_mmap: DRM's GEM mmap made the VMA
 *    on a DRM device file (card or render node), so vm_file->private_data
 *    is that file's struct drm_file.
 *  - drm_gem_mmap() maps an object only from its start: it looks the
 *    object up by the mapping's offset in the device's offset manager
 *    (exact match), so vm_pgoff is the object's fake offset, and stays
 *    fake-offset based when the VMA is split (munmap of its head, mprotect
 *    of a part, MAP_FIXED over a part) or moved (mremap). This holds for
 *    amdgpu (TTM keeps the fake offset since 2019) and vgem (the shmem
 *    helpers stopped subtracting it around 2021) on every kernel we build
 *    for. The DRM fake-offset space starts at 4 GiB (2^20 pages), and a
 *    large object's offset may lie below its page count: the number alone
 *    says nothing, so no reading of it is guessed at.
 *  - drm_gem_mmap_obj() stores the object in vm_private_data (TTM stores
 *    its buffer object, whose first member is the GEM object) and holds a
 *    reference for the VMA. A driver could store something else there, so
 *    the object is looked up again by vm_pgoff in the device's offset
 *    manager and must be the very one in vm_private_data; then
 *    vm_pgoff - drm_vma_node_start() is the page offset in the object.
 *  - An object mapped through its dma-buf (dma_buf_mmap(), e.g. an
 *    imported object's mmap) has the dma-buf file as vm_file and an
 *    exporter-defined vm_pgoff: not a GEM mapping, never recognised here.
 *  - A range may span several VMAs (a BO mapped in pieces, or split by
 *    mprotect) if they are adjacent and map consecutive offsets of the
 *    same object; a hole or another kind of mapping is -ENOENT, another
 *    object (or other offsets of the same one) -EXDEV.
 * The object's dma-buf is its registered export (obj->dma_buf), made here
 * as DRM's PRIME export path makes it when there is none yet, so that the
 * exporter's move notification reaches every attachment and a later PRIME
 * export returns the same dma-buf. An object without GEM handles cannot be
 * exported that way (DRM refuses too). Callers hold the dma-buf, never the
 * bare object.
 *
 * Locking: the VMAs are read under the mm's mmap_lock (read), the offset
 * manager under its own lookup lock, the export under the DRM device's
 * object_name_lock (as DRM's PRIME export), after mmap_lock is dropped.
 */
#include <linux/dma-buf.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/mm.h>

#if IS_ENABLED(CONFIG_DRM)
#include <drm/drm_device.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_prime.h>
#include <drm/drm_vma_manager.h>
#endif

#include <uapi/strixpeer.h>

#include "strixpeer.h"

#if IS_ENABLED(CONFIG_DRM)
static char sp_gem_drivers[128] = "amdgpu,vgem";
module_param_string(claim_gem_drivers, sp_gem_drivers, sizeof(sp_gem_drivers),
		    0444);
MODULE_PARM_DESC(claim_gem_drivers,
		 "DRM drivers whose GEM mappings zero-change mode claims and GEM_DMABUF resolves, comma separated (default amdgpu,vgem)");

static bool sp_gem_driver_known(const struct drm_device *dev)
{
	const char *name = dev->driver->name, *p = sp_gem_drivers;
	size_t len = strlen(name);

	while (*p) {
		size_t n = strcspn(p, ",");

		if (n == len && !strncmp(p, name, n))
			return true;
		p += n;
		p += *p == ',';
	}
	return false;
}

/*
 * The GEM object @vma maps and the byte offset in it of @vma->vm_start,
 * or NULL when @vma is not a GEM mapping of a listed driver (see above).
 * *@handle is set when the DRM file the mapping was made through holds a
 * handle of the object now. The VMA holds the object; no reference is
 * taken.
 * Context: mmap_lock held.
 */
static struct drm_gem_object *sp_gem_vma_object(struct vm_area_struct *vma,
						u64 *start_off, bool *handle)
{
	struct drm_vma_offset_manager *mgr;
	struct drm_vma_offset_node *node;
	struct drm_gem_object *obj = NULL;
	struct drm_file *dfile;
	struct drm_device *dev;

	mmap_assert_locked(vma->vm_mm);
	if (!vma->vm_file || vma->vm_file->f_op->mmap != drm_gem_mmap)
		return NULL;
	dfile = vma->vm_file->private_data;
	dev = dfile->minor->dev;
	if (!sp_gem_driver_known(dev) || !dev->vma_offset_manager)
		return NULL;
	mgr = dev->vma_offset_manager;
	drm_vma_offset_lock_lookup(mgr);
	node = drm_vma_offset_lookup_locked(mgr, vma->vm_pgoff, vma_pages(vma));
	if (node) {
		obj = container_of(node, struct drm_gem_object, vma_node);
		if (obj == vma->vm_private_data)
			*start_off = (u64)(vma->vm_pgoff - drm_vma_node_start(node)) <<
				     PAGE_SHIFT;
		else
			obj = NULL;	/* not what the driver keeps there */
	}
	drm_vma_offset_unlock_lookup(mgr);
	/* the VMA's reference keeps the object and its node */
	if (obj)
		*handle = drm_vma_node_is_allowed(&obj->vma_node, dfile);
	return obj;
}

/*
 * The object that [@start, @end) of @mm maps, in one VMA or several
 * adjacent ones mapping consecutive offsets of it, with a reference, and
 * the byte offset of @start in it; an ERR_PTR if there is none (-ENOENT:
 * a hole or a mapping that is not a listed driver's GEM mapping; -EXDEV:
 * another object or other offsets of it; -EACCES with @need_handle, when
 * the file of one of the mappings holds no handle of the object). @r->ro
 * is set when one of those VMAs is not writable (no VM_WRITE): GUP refuses
 * a writable pin of a shared mapping there, FOLL_FORCE or not, so a
 * writable registration must fail too.
 */
static struct drm_gem_object *sp_gem_range(struct mm_struct *mm,
					   unsigned long start,
					   unsigned long end, bool need_handle,
					   struct sp_gem_range *r)
{
	struct drm_gem_object *obj = NULL, *cur;
	struct vm_area_struct *vma;
	unsigned long a = start;
	u64 next = 0, voff;
	bool handle;
	int err;

	mmap_read_lock(mm);
	while (a < end) {
		vma = vma_lookup(mm, a);
		cur = vma ? sp_gem_vma_object(vma, &voff, &handle) : NULL;
		err = -ENOENT;
		if (!cur)
			goto none;
		err = -EXDEV;
		voff += a - vma->vm_start;
		if (!obj) {
			obj = cur;
			r->offset = voff;
		} else if (cur != obj || voff != next) {
			goto none;
		}
		err = -EACCES;
		if (need_handle && !handle)
			goto none;
		if (!(vma->vm_flags & VM_WRITE))
			r->ro = true;
		next = voff + (min(end, vma->vm_end) - a);
		a = vma->vm_end;
	}
	drm_gem_object_get(obj);
	mmap_read_unlock(mm);
	return obj;
none:
	mmap_read_unlock(mm);
	return ERR_PTR(err);
}

/*
 * The object's dma-buf, with a reference, by drm_gem_prime_handle_to_dmabuf()'s
 * rules: an imported object's is the one it was imported from (its pages
 * are the exporter's: the driver's own export ops must not serve them);
 * else obj->dma_buf, or a new export registered as DRM registers one (the
 * object's export callback, then obj->dma_buf holds a reference that DRM
 * drops when the object's last handle goes).
 */
static struct dma_buf *sp_gem_dmabuf(struct drm_gem_object *obj)
{
	struct drm_device *dev = obj->dev;
	struct dma_buf *dmabuf;

	mutex_lock(&dev->object_name_lock);
	dmabuf = obj->import_attach ? obj->import_attach->dmabuf : obj->dma_buf;
	if (dmabuf) {
		get_dma_buf(dmabuf);
	} else if (!obj->handle_count) {
		/* nobody would drop obj->dma_buf's reference: DRM refuses too */
		dmabuf = ERR_PTR(-ENOENT);
	} else {
		dmabuf = obj->funcs->export ? obj->funcs->export(obj, O_RDWR) :
					      drm_gem_prime_export(obj, O_RDWR);
		if (!IS_ERR(dmabuf)) {
			obj->dma_buf = dmabuf;
			get_dma_buf(dmabuf);
		}
	}
	mutex_unlock(&dev->object_name_lock);
	return dmabuf;
}

int sp_gem_lookup(struct mm_struct *mm, unsigned long start, unsigned long end,
		  bool need_handle, struct sp_gem_range *r)
{
	struct drm_gem_object *obj;
	struct dma_buf *dmabuf;

	r->dmabuf = NULL;
	r->offset = 0;
	r->ro = false;
	if (!PAGE_ALIGNED(start) || !PAGE_ALIGNED(end) || end <= start)
		return -EINVAL;
	obj = sp_gem_range(mm, start, end, need_handle, r);
	if (IS_ERR(obj))
		return PTR_ERR(obj);
	dmabuf = sp_gem_dmabuf(obj);
	drm_gem_object_put(obj);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	r->dmabuf = dmabuf;
	return 0;
}
#else
int sp_gem_lookup(struct mm_struct *mm, unsigned long start, unsigned long end,
		  bool need_handle, struct sp_gem_range *r)
{
	r->dmabuf = NULL;
	return -EOPNOTSUPP;	/* no DRM: no GEM mapping can exist */
}
#endif

/*
 * GEM_DMABUF in three steps, as BUF_EXPORT (main.c): the fd is reserved
 * and the dma-buf referenced here, the fd installed only once the result
 * was copied back (commit), or both given back (undo).
 */
int sp_ioctl_gem_dmabuf(struct sp_file *f, void *data)
{
	struct sp_gem_dmabuf_req *req = data;
	struct strixpeer_gem_dmabuf *g = &req->u;
	unsigned long start, end;
	struct sp_gem_range r;
	int fd = -1, ret;

	if ((g->flags & ~STRIXPEER_GEM_DMABUF_FLAGS) || g->reserved ||
	    !g->size || g->addr + g->size < g->addr ||
	    g->addr + g->size > TASK_SIZE)
		return -EINVAL;
	start = g->addr & PAGE_MASK;
	end = PAGE_ALIGN(g->addr + g->size);
	if (!(g->flags & STRIXPEER_GEM_DMABUF_NO_FD)) {
		fd = get_unused_fd_flags((g->flags & STRIXPEER_GEM_DMABUF_CLOEXEC) ?
					 O_CLOEXEC : 0);
		if (fd < 0)
			return fd;
	}
	ret = sp_gem_lookup(f->mm, start, end, true, &r);
	if (ret) {
		if (fd >= 0)
			put_unused_fd(fd);
		return ret;
	}
	g->fd = fd;
	g->offset = r.offset + (g->addr - start);
	g->ino = file_inode(r.dmabuf->file)->i_ino;
	g->out_flags = r.ro ? STRIXPEER_GEM_DMABUF_READ_ONLY : 0;
	req->dmabuf = r.dmabuf;
	return 0;
}

void sp_ioctl_gem_dmabuf_commit(struct sp_file *f, void *data)
{
	struct sp_gem_dmabuf_req *req = data;

	if (req->u.fd >= 0)
		fd_install(req->u.fd, req->dmabuf->file);
	else
		dma_buf_put(req->dmabuf);
}

void sp_ioctl_gem_dmabuf_undo(struct sp_file *f, void *data)
{
	struct sp_gem_dmabuf_req *req = data;

	if (req->u.fd >= 0)
		put_unused_fd(req->u.fd);
	dma_buf_put(req->dmabuf);
}
