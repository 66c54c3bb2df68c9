// SPDX-License-Identifier: MIT
/*
 * Built inside the provisioning VM against the installed libstrixpeer-dev
 * (pkg-config strixpeer), not the tree: allocates a 2 MiB strixpeer buffer,
 * writes and reads it back through the mapping, frees it.
 * Exit 0 on success; on failure prints "provision-alloc: <step>: <errno
 * name>: <message>" and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <strixpeer.h>

static int fail(const char *step, int ret)
{
	const char *name = ret == -EACCES ? "EACCES" : ret == -EPERM ? "EPERM" :
			   ret == -ENOENT ? "ENOENT" : "other";

	printf("provision-alloc: %s: %s: %s\n", step, name, sp_errmsg());
	return 1;
}

int main(void)
{
	const size_t size = 2 << 20;
	struct sp_dev *dev;
	struct sp_buf *buf;
	unsigned char *p;
	size_t i;
	int ret;

	ret = sp_dev_open(NULL, &dev);
	if (ret < 0)
		return fail("open", ret);
	ret = sp_buf_alloc(dev, size, SP_NODE_DEFAULT, 0, &buf);
	if (ret < 0)
		return fail("alloc", ret);
	p = sp_buf_addr(buf);
	memset(p, 0x5a, size);
	for (i = 0; i < size; i++)
		if (p[i] != 0x5a)
			return fail("verify", -EIO);
	ret = sp_buf_free(buf);
	if (ret < 0)
		return fail("free", ret);
	sp_dev_close(dev);
	printf("provision-alloc: ok (library %s)\n", sp_lib_version());
	return 0;
}
