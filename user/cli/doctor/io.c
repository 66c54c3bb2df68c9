// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: reading files under the sysroot.
 *
 * Attributes are read whole into a caller's buffer; one that does not fit
 * (a garbage or huge file) is -EFBIG, never truncated into something that
 * parses. Reads never block: a FIFO or a device where an attribute should
 * be is refused (-EINVAL).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"

static int vpath(const struct dr_ctx *c, char *out, size_t len, const char *fmt, va_list ap)
{
	size_t n = strlen(c->sysroot);
	int m;

	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(out, c->sysroot, n);
	m = vsnprintf(out + n, len - n, fmt, ap);
	if (m < 0 || (size_t)m >= len - n)
		return -ENAMETOOLONG;
	return 0;
}

/* @ret = vpath() of the calling function's format and arguments */
#define FORMAT_PATH(c, out, len, fmt, ret)				\
	do {								\
		va_list ap_;						\
									\
		va_start(ap_, fmt);					\
		ret = vpath(c, out, len, fmt, ap_);			\
		va_end(ap_);						\
	} while (0)

int dr_path(const struct dr_ctx *c, char *out, size_t len, const char *fmt, ...)
{
	int ret;

	FORMAT_PATH(c, out, len, fmt, ret);
	return ret;
}

/* Opens a regular file (sysfs, procfs and fixtures alike) without blocking. */
static int open_regular(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int err = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;

		close(fd);
		return err;
	}
	return fd;
}

static int read_path(const char *path, char *buf, size_t len)
{
	size_t got = 0;
	int fd, ret = 0;

	if (len < 2)
		return -EINVAL;
	buf[0] = '\0';
	fd = open_regular(path);
	if (fd < 0)
		return fd;
	for (;;) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got == len) {	/* does not fit: too big to be a value */
			ret = -EFBIG;
			break;
		}
	}
	close(fd);
	if (ret) {
		buf[0] = '\0';
		return ret;
	}
	buf[got] = '\0';
	while (got > 0 && isspace((unsigned char)buf[got - 1]))
		buf[--got] = '\0';
	/* a NUL inside is not text */
	if (strlen(buf) != got) {
		buf[0] = '\0';
		return -EINVAL;
	}
	/* no terminal control sequences from a tree into the report */
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t')
			*p = '?';
	return 0;
}

int dr_read(const struct dr_ctx *c, char *buf, size_t len, const char *fmt, ...)
{
	char path[PATH_MAX];
	int ret;

	FORMAT_PATH(c, path, sizeof(path), fmt, ret);
	return ret ? ret : read_path(path, buf, len);
}

/* Decimal, or hex with 0x; surrounding blanks allowed, nothing else. */
int dr_parse_u64(const char *s, uint64_t *v)
{
	unsigned long long x;
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -EINVAL;
	*v = x;
	return 0;
}

/*
 * "<number><suffix>..." (e.g. "8.0 GT/s PCIe" with " GT/s", "56 Gb/sec
 * (4X FDR)" with " Gb/sec") -> the number times 1000, rounded; 0 for
 * anything else.
 */
unsigned int dr_parse_milli(const char *s, const char *suffix)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v <= 0 || v > 1000000 || strncmp(end, suffix, strlen(suffix)))
		return 0;
	return (unsigned int)(v * 1000 + 0.5);
}

int dr_parse_s64(const char *s, int64_t *v)
{
	long long x;
	char *end;

	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -EINVAL;
	*v = x;
	return 0;
}

int dr_read_u64(const struct dr_ctx *c, uint64_t *v, const char *fmt, ...)
{
	char path[PATH_MAX], buf[64];
	int ret;

	FORMAT_PATH(c, path, sizeof(path), fmt, ret);
	if (!ret)
		ret = read_path(path, buf, sizeof(buf));
	return ret ? ret : dr_parse_u64(buf, v);
}

int dr_read_s64(const struct dr_ctx *c, int64_t *v, const char *fmt, ...)
{
	char path[PATH_MAX], buf[64];
	int ret;

	FORMAT_PATH(c, path, sizeof(path), fmt, ret);
	if (!ret)
		ret = read_path(path, buf, sizeof(buf));
	return ret ? ret : dr_parse_s64(buf, v);
}

bool dr_exists(const struct dr_ctx *c, const char *fmt, ...)
{
	char path[PATH_MAX];
	int ret;

	FORMAT_PATH(c, path, sizeof(path), fmt, ret);
	return !ret && access(path, F_OK) == 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of a directory in version order; the count, or -errno. */
int dr_list(const struct dr_ctx *c, char ***names, const char *fmt, ...)
{
	char path[PATH_MAX];
	struct dirent *e;
	char **v = NULL;
	int n = 0, cap = 0;
	DIR *d;
	int ret;

	*names = NULL;
	FORMAT_PATH(c, path, sizeof(path), fmt, ret);
	if (ret)
		return ret;
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			char **nv;

			cap = cap ? cap * 2 : 16;
			nv = realloc(v, (size_t)cap * sizeof(*v));
			if (!nv) {
				dr_list_free(v, n);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = dr_strdup(e->d_name);
	}
	closedir(d);
	if (n)
		qsort(v, (size_t)n, sizeof(*v), cmp_names);
	*names = v;
	return n;
}

void dr_list_free(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/*
 * The canonical path of a file (sysfs links resolved), as a path inside
 * the sysroot ("/sys/devices/..."). -EXDEV when it leads out of it.
 */
int dr_resolve(const struct dr_ctx *c, char *out, size_t len, const char *fmt, ...)
{
	char path[PATH_MAX], real[PATH_MAX];
	size_t n = strlen(c->sysroot);
	int ret;

	FORMAT_PATH(c, path, sizeof(path), fmt, ret);
	if (ret)
		return ret;
	if (!realpath(path, real))
		return -errno;
	if (n && (strncmp(real, c->sysroot, n) || (real[n] && real[n] != '/')))
		return -EXDEV;
	if (strlen(real + n) + 1 > len)
		return -ENAMETOOLONG;
	strcpy(out, real[n] ? real + n : "/");
	return 0;
}

/* The last component of a symlink's target (a driver's name, say). */
int dr_link_name(const struct dr_ctx *c, char *out, size_t len, const char *fmt, ...)
{
	char path[PATH_MAX], target[PATH_MAX];
	const char *base;
	ssize_t n;
	int ret;

	FORMAT_PATH(c, path, sizeof(path), fmt, ret);
	if (ret)
		return ret;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (strlen(base) + 1 > len)
		return -ENAMETOOLONG;
	strcpy(out, base);
	return 0;
}

FILE *dr_fopen(const struct dr_ctx *c, const char *fmt, ...)
{
	char path[PATH_MAX];
	FILE *f;
	int fd;

	FORMAT_PATH(c, path, sizeof(path), fmt, fd);
	if (fd)
		return NULL;
	fd = open_regular(path);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

int dr_kallsyms(struct dr_ctx *c)
{
	char line[512];
	int bits = 0;
	FILE *f;

	if (c->kallsyms_read)
		return c->kallsyms;
	f = dr_fopen(c, "/proc/kallsyms");
	if (!f) {
		bits = -errno;
	} else {
		while (fgets(line, sizeof(line), f)) {
			char type, name[256];

			if (strstr(line, "dma_buf_move_notify"))
				bits |= DR_KS_MOVE_NOTIFY;
			if (strstr(line, "pci_p2pdma"))
				bits |= DR_KS_P2PDMA;
			if (strstr(line, "dma_buf_invalidate_mappings"))
				bits |= DR_KS_INVALIDATE;
			if (sscanf(line, "%*s %c %255s", &type, name) == 2 &&
			    (type == 't' || type == 'T') &&
			    !strcmp(name, "ib_register_peer_memory_client"))
				bits |= DR_KS_PEER_API;
		}
		fclose(f);
	}
	c->kallsyms = bits;
	c->kallsyms_read = true;
	return bits;
}

/* Words for the errors a read gives, as a check reports them. */
const char *dr_errstr(int err)
{
	switch (err) {
	case -EFBIG:
		return "too large for a value (garbage?)";
	case -EINVAL:
		return "unreadable or not a number/word this check knows";
	case -ENOENT:
		return "missing";
	case -EISDIR:
		return "a directory where a file should be";
	default:
		return strerror(-err);
	}
}

/*
 * Is @param on the kernel command line? Words are matched whole, a value
 * ("param=value") is copied to @val. 1 found, 0 not, -errno unreadable.
 */
int dr_cmdline_has(const struct dr_ctx *c, const char *param, char *val, size_t len)
{
	char line[DR_ATTR_MAX], *save = NULL, *w;
	size_t n = strlen(param);
	int ret = dr_read(c, line, sizeof(line), "/proc/cmdline");

	if (ret)
		return ret;
	for (w = strtok_r(line, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (!strcmp(w, "--"))
			break;	/* the rest is init's */
		if (strncmp(w, param, n) || (w[n] && w[n] != '='))
			continue;
		if (val && len) {
			snprintf(val, len, "%s", w[n] == '=' ? w + n + 1 : "");
		}
		return 1;
	}
	return 0;
}

int dr_kernel_release(const struct dr_ctx *c, char *out, size_t len)
{
	return dr_read(c, out, len, "/proc/sys/kernel/osrelease");
}

/*
 * Compares the leading "a.b.c" of two kernel releases numerically
 * ("6.12.117+deb12-amd64" > "6.12.9"); missing parts count as 0.
 */
int dr_kver_cmp(const char *a, const char *b)
{
	for (int i = 0; i < 3; i++) {
		unsigned long x = 0, y = 0;

		if (isdigit((unsigned char)*a))
			x = strtoul(a, (char **)&a, 10);
		if (isdigit((unsigned char)*b))
			y = strtoul(b, (char **)&b, 10);
		if (x != y)
			return x < y ? -1 : 1;
		if (*a == '.')
			a++;
		else
			a = "";
		if (*b == '.')
			b++;
		else
			b = "";
	}
	return 0;
}

/* snprintf() for text that may be cut short (names in subjects, say). */
void dr_fmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, len, fmt, ap);
	va_end(ap);
}

/* One os-release variable's value, unquoted, or "" */
static void os_var(const char *text, const char *var, char *out, size_t len)
{
	size_t n = strlen(var);
	const char *p;

	out[0] = 0;
	for (p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		const char *v, *e;

		if (strncmp(p, var, n) || p[n] != '=')
			continue;
		v = p + n + 1;
		if (*v == '"' || *v == '\'')
			v++;
		e = v + strcspn(v, "\"'\n");
		dr_fmt(out, len, "%.*s", (int)(e - v), v);
		return;
	}
}

static bool os_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	const char *p;

	for (p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' '))
			return true;
	return false;
}

void dr_os_var(const struct dr_ctx *c, const char *var, char *out, size_t len)
{
	char text[DR_ATTR_MAX];

	out[0] = 0;
	if (dr_read(c, text, sizeof(text), "/etc/os-release") < 0 &&
	    dr_read(c, text, sizeof(text), "/usr/lib/os-release") < 0)
		return;
	os_var(text, var, out, len);
}

enum dr_os dr_os(const struct dr_ctx *c)
{
	char text[DR_ATTR_MAX], id[128], like[256];

	if (dr_read(c, text, sizeof(text), "/etc/os-release") < 0 &&
	    dr_read(c, text, sizeof(text), "/usr/lib/os-release") < 0)
		return DR_OS_UNKNOWN;
	os_var(text, "ID", id, sizeof(id));
	os_var(text, "ID_LIKE", like, sizeof(like));
	if (os_word(id, "debian") || os_word(id, "ubuntu") || os_word(like, "debian") ||
	    os_word(like, "ubuntu"))
		return DR_OS_DEBIAN;
	if (os_word(id, "fedora") || os_word(like, "fedora") || os_word(id, "rhel") ||
	    os_word(like, "rhel"))
		return DR_OS_FEDORA;
	return DR_OS_UNKNOWN;
}

void dr_os_install(const struct dr_ctx *c, char *out, size_t len, const char *pkg)
{
	switch (dr_os(c)) {
	case DR_OS_DEBIAN:
		dr_fmt(out, len, "apt install %s", pkg);
		break;
	case DR_OS_FEDORA:
		dr_fmt(out, len, "dnf install %s", pkg);
		break;
	default:
		dr_fmt(out, len, "apt install %s (Debian, Ubuntu) or dnf install %s (Fedora)",
		       pkg, pkg);
	}
}

void dr_os_headers(const struct dr_ctx *c, char *out, size_t len, const char *kver)
{
	switch (dr_os(c)) {
	case DR_OS_DEBIAN:
		dr_fmt(out, len, "apt install linux-headers-%s", kver);
		break;
	case DR_OS_FEDORA:
		dr_fmt(out, len, "dnf install kernel-devel-%s", kver);
		break;
	default:
		dr_fmt(out, len, "apt install linux-headers-%s (Debian, Ubuntu) or dnf install kernel-devel-%s (Fedora)",
		       kver, kver);
	}
}

void dr_os_addgroup(const struct dr_ctx *c, char *out, size_t len, const char *group)
{
	switch (dr_os(c)) {
	case DR_OS_DEBIAN:
		dr_fmt(out, len, "adduser <user> %s", group);
		break;
	case DR_OS_FEDORA:
		dr_fmt(out, len, "usermod -aG %s <user>", group);
		break;
	default:
		dr_fmt(out, len, "usermod -aG %s <user> (adduser <user> %s on Debian, Ubuntu)",
		       group, group);
	}
}
