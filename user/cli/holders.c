// SPDX-License-Identifier: MIT
/*
 * Who holds strixpeer's buffers and the module: a scan of /proc.
 *
 * The kernel cannot list the processes that hold a file, but each object
 * describes itself: a /dev/strixpeer file's /proc/PID/fdinfo/FD lists the
 * buffers its handles hold ("strixpeer-buf: handle id size"), netlink
 * gives each buffer's live dma-bufs by inode number, and /proc/PID/fd and
 * /proc/PID/maps give the inode of every open file and mapping. So the
 * holders of a buffer are:
 *   - the processes with a /dev/strixpeer fd whose fdinfo lists it;
 *   - the processes mapping it through /dev/strixpeer: maps shows the
 *     mmap offset, handle << 40; it names the buffer when the process
 *     also has the file open with that handle (after BUF_FREE or close
 *     the handle is gone and the mapping is reported unattributed);
 *   - the processes with an fd or a mapping of one of its dma-bufs;
 *   - for a buffer made with allocator=shmem, every process mapping it,
 *     through /dev/strixpeer or a dma-buf alike: the mapping maps the
 *     buffer's shmem file, which maps shows as "/strixpeer:<id> (deleted)"
 *     and which names the buffer itself.
 * A dma-buf alive with none of those is held where no /proc shows it: an
 * fd in flight in a unix socket (sent, not yet received), or the kernel
 * (an importer: an MR, a GPU import). Only root sees every process's
 * fds and maps; the others are counted as unreadable.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "holders.h"
#include "print.h"

#define SP_COOKIE_SHIFT	40	/* kmod/strixpeer.h: mmap offset = handle << 40 */

static void hold_add(struct sp_holders *h, const struct sp_hold *x)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct sp_hold *v = reallocarray(h->v, cap, sizeof(*v));

		if (!v) {
			fputs("strixpeerctl: out of memory\n", stderr);
			exit(1);
		}
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++] = *x;
}

static void read_comm(int pid, char *comm, size_t size)
{
	char path[64];
	FILE *f;

	snprintf(comm, size, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(comm, (int)size, f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
}

/* The buffers a /dev/strixpeer fd's handles hold, from its fdinfo. */
static void scan_fdinfo(struct sp_holders *h, struct sp_hold *x)
{
	char path[96], line[256];
	unsigned int handle, id;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", x->pid, x->fd);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "strixpeer-buf: %u %u", &handle, &id) == 2) {
			x->handle = handle;
			x->buf_id = id;
			hold_add(h, x);
		}
	fclose(f);
}

static void scan_fds(struct sp_holders *h, int pid, const char *comm,
		     const struct stat *dev)
{
	char path[64], fdpath[352], link[128];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir) {
		if (errno == EACCES || errno == EPERM)
			h->unreadable++;
		return;
	}
	while ((d = readdir(dir))) {
		struct sp_hold x = { .pid = pid };
		struct stat st;
		ssize_t n;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		x.fd = atoi(d->d_name);
		snprintf(x.comm, sizeof(x.comm), "%s", comm);
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, d->d_name);
		if (stat(fdpath, &st))
			continue;
		if (dev && S_ISCHR(st.st_mode) && st.st_rdev == dev->st_rdev) {
			x.kind = SP_HOLD_FD;
			h->dev_fds++;
			/* a file with no handle still holds the module */
			x.buf_id = 0;
			hold_add(h, &x);
			scan_fdinfo(h, &x);
			continue;
		}
		n = readlink(fdpath, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (!strstr(link, "dmabuf"))
			continue;
		x.kind = SP_HOLD_DMABUF_FD;
		x.ino = st.st_ino;
		hold_add(h, &x);
	}
	closedir(dir);
}

/*
 * A shmem-backed buffer's mapping: maps names its file
 * "/strixpeer:<id> (deleted)" (kmod/shmem.c).
 */
static bool shmem_buf_id(const char *path, uint32_t *id)
{
	unsigned long v;
	char *end;

	if (strncmp(path, "/strixpeer:", 11) || !isdigit((unsigned char)path[11]))
		return false;
	errno = 0;
	v = strtoul(path + 11, &end, 10);
	if (errno || !v || v > UINT32_MAX || strncmp(end, " (deleted)", 10))
		return false;
	*id = (uint32_t)v;
	return true;
}

static void scan_maps(struct sp_holders *h, int pid, const char *comm,
		      const struct stat *dev)
{
	char path[64], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off, ino;
		struct sp_hold x = { .pid = pid, .fd = -1 };
		unsigned int maj, min;
		int pos = 0;

		if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu %n", &start,
			   &end, &off, &maj, &min, &ino, &pos) < 6 || !pos)
			continue;
		snprintf(x.comm, sizeof(x.comm), "%s", comm);
		if (dev && ino == (unsigned long long)dev->st_ino &&
		    makedev(maj, min) == dev->st_dev) {
			x.kind = SP_HOLD_MAP;
			x.handle = (uint32_t)(off >> SP_COOKIE_SHIFT);
			hold_add(h, &x);
		} else if (shmem_buf_id(line + pos, &x.buf_id)) {
			x.kind = SP_HOLD_MAP;	/* named: no handle to resolve */
			hold_add(h, &x);
		} else if (strstr(line + pos, "dmabuf")) {
			x.kind = SP_HOLD_DMABUF_MAP;
			x.ino = ino;
			hold_add(h, &x);
		}
	}
	fclose(f);
}

int sp_holders_scan(struct sp_holders *h)
{
	struct stat dev, *devp = &dev;
	struct dirent *d;
	DIR *proc;

	memset(h, 0, sizeof(*h));
	if (stat("/dev/strixpeer", &dev) || !S_ISCHR(dev.st_mode))
		devp = NULL;
	proc = opendir("/proc");
	if (!proc)
		return -errno;
	while ((d = readdir(proc))) {
		char comm[32];
		int pid;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		pid = atoi(d->d_name);
		read_comm(pid, comm, sizeof(comm));
		scan_fds(h, pid, comm, devp);
		scan_maps(h, pid, comm, devp);
	}
	closedir(proc);
	/* A mapping names its buffer when its process holds that handle. */
	for (size_t i = 0; i < h->n; i++) {
		struct sp_hold *m = &h->v[i];

		if (m->kind != SP_HOLD_MAP || m->buf_id)
			continue;
		for (size_t j = 0; j < h->n; j++) {
			struct sp_hold *o = &h->v[j];

			if (o->kind == SP_HOLD_FD && o->pid == m->pid &&
			    o->buf_id && o->handle == m->handle) {
				if (m->buf_id && m->buf_id != o->buf_id) {
					m->buf_id = 0;	/* two files: ambiguous */
					break;
				}
				m->buf_id = o->buf_id;
			}
		}
	}
	return 0;
}

void sp_holders_free(struct sp_holders *h)
{
	free(h->v);
	memset(h, 0, sizeof(*h));
}

bool sp_hold_matches(const struct sp_hold *x, const struct sp_buf_entry *e)
{
	switch (x->kind) {
	case SP_HOLD_FD:
	case SP_HOLD_MAP:
		return x->buf_id && x->buf_id == e->id;
	case SP_HOLD_DMABUF_FD:
	case SP_HOLD_DMABUF_MAP:
		for (uint32_t i = 0; i < e->nr_dmabuf_inos; i++)
			if (e->dmabuf_inos[i] == x->ino)
				return true;
		return false;
	}
	return false;
}

bool sp_dmabuf_held(const struct sp_holders *h, uint64_t ino)
{
	for (size_t i = 0; i < h->n; i++)
		if ((h->v[i].kind == SP_HOLD_DMABUF_FD ||
		     h->v[i].kind == SP_HOLD_DMABUF_MAP) && h->v[i].ino == ino)
			return true;
	return false;
}

const char *sp_hold_kind_name(enum sp_hold_kind k)
{
	switch (k) {
	case SP_HOLD_FD:
		return "fd";
	case SP_HOLD_MAP:
		return "mapping";
	case SP_HOLD_DMABUF_FD:
		return "dmabuf-fd";
	case SP_HOLD_DMABUF_MAP:
		return "dmabuf-mapping";
	}
	return "?";
}

/* One holder as a JSON object, as buf show and status print it. */
void pr_hold(const struct sp_hold *x)
{
	pr_obj_open(NULL);
	pr_u64("pid", NULL, (uint64_t)x->pid);
	pr_str("comm", NULL, x->comm);
	pr_str("kind", NULL, sp_hold_kind_name(x->kind));
	if (x->fd >= 0)
		pr_u64("fd", NULL, (uint64_t)x->fd);
	if (x->kind == SP_HOLD_DMABUF_FD || x->kind == SP_HOLD_DMABUF_MAP)
		pr_u64("dmabuf_ino", NULL, x->ino);
	pr_obj_close();
}
