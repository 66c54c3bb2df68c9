// SPDX-License-Identifier: MIT
/* DRM dumb buffers without libdrm (spdrm.h says who uses them). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spdrm.h"

/* Is @name one of the comma-separated @list? */
static int sp_drm_listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
		if (strcspn(p, ",") == n && !strncmp(p, name, n))
			return 1;
	return 0;
}

int sp_drm_find(const char *prefix, int first, const char *drivers, char *drv, size_t len)
{
	for (int i = first; i < first + 64; i++) {
		char path[48], name[64] = "";
		struct sp_drm_version v = { .name_len = sizeof(name) - 1, .name = name };
		int fd;

		snprintf(path, sizeof(path), "/dev/dri/%s%d", prefix, i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (ioctl(fd, SP_DRM_IOCTL_VERSION, &v) == 0 && name[0] &&
		    sp_drm_listed(drivers, name)) {
			if (drv && len)
				snprintf(drv, len, "%s", name);
			return fd;
		}
		close(fd);
	}
	return -1;
}

int sp_drm_dumb_create(int card, uint64_t size, uint32_t pitch, uint32_t *handle,
		       uint64_t *got)
{
	struct sp_drm_create_dumb c = { .width = pitch / 4, .bpp = 32 };

	if (!pitch || pitch % 4 || !size || (size + pitch - 1) / pitch > UINT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	c.height = (uint32_t)((size + pitch - 1) / pitch);
	if (ioctl(card, SP_DRM_IOCTL_MODE_CREATE_DUMB, &c))
		return -1;
	*handle = c.handle;
	if (got)
		*got = c.size;
	return 0;
}

int sp_drm_dumb_offset(int card, uint32_t handle, uint64_t *offset)
{
	struct sp_drm_map_dumb md = { .handle = handle };

	if (ioctl(card, SP_DRM_IOCTL_MODE_MAP_DUMB, &md))
		return -1;
	*offset = md.offset;
	return 0;
}

int sp_drm_prime_export(int card, uint32_t handle, uint32_t flags)
{
	struct sp_drm_prime_handle ph = { .handle = handle, .flags = flags };

	if (ioctl(card, SP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph))
		return -1;
	return ph.fd;
}

int sp_drm_prime_import(int card, int fd, uint32_t *handle)
{
	struct sp_drm_prime_handle ph = { .fd = fd };

	if (ioctl(card, SP_DRM_IOCTL_PRIME_FD_TO_HANDLE, &ph))
		return -1;
	*handle = ph.handle;
	return 0;
}

int sp_drm_gem_release(int card, uint32_t handle)
{
	struct sp_drm_gem_close gc = { .handle = handle };

	return ioctl(card, SP_DRM_IOCTL_GEM_CLOSE, &gc);
}
