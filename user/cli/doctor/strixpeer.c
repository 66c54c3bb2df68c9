// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the strixpeer check, strixpeer itself. Module
 * loaded and its version against the library's, the ABI handshake (live
 * only), what keeps it in use, the module installed (DKMS) for the running kernel and for every other installed
 * kernel, looked up with libkmod in each kernel's module directory under
 * the sysroot, and the device node's permissions against the caller.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <libkmod.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "doctor.h"
#include "../holders.h"
#include "strixpeer.h"

struct installed {
	bool found;
	char path[PATH_MAX];
	char version[64];
	char srcversion[64];
	int err;		/* lookup failed: -errno */
};

static void kmod_quiet(void *data, int priority, const char *file, int line,
		       const char *fn, const char *format, va_list args)
{
	(void)data;
	(void)priority;
	(void)file;
	(void)line;
	(void)fn;
	(void)format;
	(void)args;
}

/* strixpeer.ko in /lib/modules/<kver> under the sysroot, through libkmod. */
static void lookup_module(struct dr_ctx *c, const char *kver, struct installed *in)
{
	char dir[PATH_MAX], cfg1[PATH_MAX], cfg2[PATH_MAX];
	const char *cfg[3] = { cfg1, cfg2, NULL };
	struct kmod_list *list = NULL, *l;
	struct kmod_ctx *ctx;
	int ret;

	memset(in, 0, sizeof(*in));
	if (dr_path(c, dir, sizeof(dir), "/lib/modules/%s", kver) ||
	    dr_path(c, cfg1, sizeof(cfg1), "/etc/modprobe.d") ||
	    dr_path(c, cfg2, sizeof(cfg2), "/lib/modprobe.d")) {
		in->err = -ENAMETOOLONG;
		return;
	}
	if (!dr_exists(c, "/lib/modules/%s/modules.dep.bin", kver)) {
		in->err = -ENOENT;
		return;
	}
	ctx = kmod_new(dir, cfg);
	if (!ctx) {
		in->err = -ENOMEM;
		return;
	}
	kmod_set_log_fn(ctx, kmod_quiet, NULL);
	ret = kmod_module_new_from_lookup(ctx, "strixpeer", &list);
	if (ret < 0)
		in->err = ret;
	kmod_list_foreach(l, list) {
		struct kmod_module *mod = kmod_module_get_module(l);
		struct kmod_list *info = NULL, *i;
		const char *path = kmod_module_get_path(mod);

		if (!in->found && path && !strcmp(kmod_module_get_name(mod), "strixpeer")) {
			in->found = true;
			snprintf(in->path, sizeof(in->path), "%s", path + strlen(c->sysroot));
			if (kmod_module_get_info(mod, &info) >= 0) {
				kmod_list_foreach(i, info) {
					const char *k = kmod_module_info_get_key(i);
					const char *v = kmod_module_info_get_value(i);

					if (!strcmp(k, "version"))
						snprintf(in->version, sizeof(in->version), "%s", v);
					else if (!strcmp(k, "srcversion"))
						snprintf(in->srcversion, sizeof(in->srcversion), "%s", v);
				}
				kmod_module_info_free_list(info);
			}
		}
		kmod_module_unref(mod);
	}
	kmod_module_unref_list(list);
	kmod_unref(ctx);
}

/* A kernel is installed when its module tree has modules (not just DKMS leftovers). */
static bool kernel_installed(struct dr_ctx *c, const char *kver)
{
	return dr_exists(c, "/lib/modules/%s/kernel", kver) ||
	       dr_exists(c, "/lib/modules/%s/modules.order", kver) ||
	       dr_exists(c, "/boot/vmlinuz-%s", kver);
}

static void check_install(struct dr_ctx *c, const char *running, bool loaded,
			  const char *libver, struct installed *run_in)
{
	char **kvers = NULL;
	int n = dr_list(c, &kvers, "/lib/modules"), kernels = 0;

	for (int i = 0; i < n; i++) {
		bool is_running = !strcmp(kvers[i], running);
		struct installed in;
		struct dr_result *r;

		if (!is_running && !kernel_installed(c, kvers[i]))
			continue;
		kernels++;
		lookup_module(c, kvers[i], &in);
		if (is_running)
			*run_in = in;
		if (in.err == -ENOENT && !in.found) {
			r = dr_add(c, DR_C_STRIXPEER, "install", kvers[i], is_running ? DR_WARN : DR_SKIP,
				   "no module index for %s (modules.dep.bin missing)", kvers[i]);
			dr_advise(r, "depmod %s", kvers[i]);
			continue;
		}
		if (in.found) {
			r = dr_add(c, DR_C_STRIXPEER, "install", kvers[i], DR_PASS,
				   "strixpeer %s installed for %s%s (%s)", in.version[0] ? in.version : "?",
				   kvers[i], is_running ? ", the running kernel" : "", in.path);
			dr_str(r, "path", in.path);
			dr_str(r, "version", in.version);
			if (in.version[0] && strcmp(in.version, libver)) {
				r->status = DR_WARN;
				dr_set_summary(r, "%s; the library is %s", r->summary, libver);
				dr_advise(r, "install the same release of module and library (strixpeer-dkms and libstrixpeer1 %s, or make dkms-install from the same checkout)",
					  libver);
			}
			continue;
		}
		r = dr_add(c, DR_C_STRIXPEER, "install", kvers[i], DR_WARN,
			   "no strixpeer module for %s", kvers[i]);
		if (is_running) {
			r->status = loaded ? DR_WARN : DR_FAIL;
			dr_set_summary(r, "no strixpeer module installed for the running kernel %s%s",
				       kvers[i], loaded ? " (the loaded one was loaded by hand and is lost at reboot)" : "");
		} else {
			dr_set_summary(r, "kernel %s is installed but has no strixpeer module: booting it leaves the node without strixpeer (a kernel update without a DKMS build)",
				       kvers[i]);
		}
		if (!dr_exists(c, "/lib/modules/%s/build", kvers[i])) {
			char hdr[256];

			dr_os_headers(c, hdr, sizeof(hdr), kvers[i]);
			dr_advise(r, "%s (DKMS then builds strixpeer for it)", hdr);
		}
		if (dr_exists(c, "/var/lib/dkms/strixpeer"))
			dr_advise(r, "dkms autoinstall -k %s", kvers[i]);
		else
			dr_advise(r, "install strixpeer-dkms (or make dkms-install KVER=%s)", kvers[i]);
	}
	dr_list_free(kvers, n);
	if (!kernels)
		dr_add(c, DR_C_STRIXPEER, "install", "", DR_SKIP,
		       "no kernel module directory in /lib/modules");
}

/* Can the caller (uid, groups from /proc/self/status) read and write @st? */
static bool caller_can_rw(struct dr_ctx *c, const struct stat *st, unsigned int *uid_out)
{
	char line[512], *save = NULL, *w;
	unsigned int uid = 0, gid = 0;
	FILE *f = dr_fopen(c, "/proc/self/status");
	bool in_group = false;
	int lines = 0;

	*uid_out = 0;
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f) && lines++ < 256) {
		if (sscanf(line, "Uid: %u", &uid) == 1)
			*uid_out = uid;
		else if (sscanf(line, "Gid: %u", &gid) == 1)
			in_group |= gid == st->st_gid;
		else if (!strncmp(line, "Groups:", 7))
			for (w = strtok_r(line + 7, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save))
				in_group |= strtoul(w, NULL, 10) == st->st_gid;
	}
	fclose(f);
	if (uid == 0)
		return true;
	if (uid == st->st_uid)
		return (st->st_mode & 0600) == 0600;
	if (in_group)
		return (st->st_mode & 060) == 060;
	return (st->st_mode & 06) == 06;
}

/* Name of a group in the sysroot's /etc/group. */
static void group_name(struct dr_ctx *c, unsigned int gid, char *out, size_t len)
{
	FILE *f = dr_fopen(c, "/etc/group");
	char line[1024];
	int lines = 0;

	snprintf(out, len, "%u", gid);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && lines++ < 10000) {
		char *name = strtok(line, ":"), *x, *id;

		x = name ? strtok(NULL, ":") : NULL;
		id = x ? strtok(NULL, ":") : NULL;
		if (id && strtoul(id, NULL, 10) == gid) {
			snprintf(out, len, "%s", name);
			break;
		}
	}
	fclose(f);
}

static void check_device(struct dr_ctx *c, bool loaded)
{
	char path[PATH_MAX], grp[64];
	struct dr_result *r;
	unsigned int uid;
	struct stat st;

	if (dr_path(c, path, sizeof(path), "/dev/strixpeer") || stat(path, &st) < 0) {
		if (!loaded) {
			dr_add(c, DR_C_STRIXPEER, "device", "/dev/strixpeer", DR_SKIP,
			       "not present: the module is not loaded");
			return;
		}
		r = dr_add(c, DR_C_STRIXPEER, "device", "/dev/strixpeer", DR_FAIL,
			   "strixpeer is loaded but /dev/strixpeer does not exist");
		dr_advise(r, "udevadm trigger --subsystem-match=misc, and check that udev runs (containers: bind-mount /dev/strixpeer)");
		return;
	}
	group_name(c, st.st_gid, grp, sizeof(grp));
	r = dr_add(c, DR_C_STRIXPEER, "device", "/dev/strixpeer", DR_PASS, "%s%s, mode %04o, owner uid %u, group %s",
		   S_ISCHR(st.st_mode) ? "character device" : "not a character device",
		   "", (unsigned int)(st.st_mode & 07777), (unsigned int)st.st_uid, grp);
	dr_int(r, "mode", st.st_mode & 07777);
	dr_str(r, "group", grp);
	if (!caller_can_rw(c, &st, &uid)) {
		r->status = DR_FAIL;
		dr_set_summary(r, "%s: uid %u may not open it, so it cannot allocate strixpeer buffers",
			       r->summary, uid);
		char add[160];

		dr_os_addgroup(c, add, sizeof(add), (st.st_mode & 060) ? grp : "rdma");
		if (!(st.st_mode & 060))
			dr_advise(r, "install the udev rule (strixpeer-dkms ships /lib/udev/rules.d/60-strixpeer.rules: group rdma, mode 0660), udevadm trigger, then %s and log in again",
				  add);
		else
			dr_advise(r, "%s and log in again", add);
	} else {
		dr_set_summary(r, "%s: this caller (uid %u) may open it", r->summary, uid);
	}
}

/*
 * Live only: what keeps the module in use, so that an rmmod (a DKMS
 * upgrade's) that would fail says who to stop. Open /dev/strixpeer files
 * (fds and mappings, from /proc), live dma-bufs of buffers and PeerDirect
 * registrations each hold a module reference.
 */
static void check_in_use(struct dr_ctx *c)
{
	struct sp_counters sc = { .size = sizeof(sc) };
	struct sp_holders h;
	struct dr_result *r;
	struct sp_ctl *ctl;
	char who[512] = "";
	size_t len = 0;
	int64_t refcnt;

	if (dr_read_s64(c, &refcnt, "/sys/module/strixpeer/refcnt"))
		return;
	if (sp_ctl_open(&ctl) == 0) {
		if (sp_ctl_stats(ctl, &sc) < 0)
			memset(&sc, 0, sizeof(sc));
		sp_ctl_close(ctl);
	}
	sp_holders_scan(&h);
	for (size_t i = 0; i < h.n && len < sizeof(who); i++) {
		const struct sp_hold *x = &h.v[i];

		if (x->kind == SP_HOLD_FD && !x->buf_id)
			len += (size_t)snprintf(who + len, sizeof(who) - len, "%spid %d (%s) fd %d",
						len ? ", " : "", x->pid, x->comm, x->fd);
		else if (x->kind == SP_HOLD_MAP)
			len += (size_t)snprintf(who + len, sizeof(who) - len, "%spid %d (%s) mapping",
						len ? ", " : "", x->pid, x->comm);
	}
	if (!refcnt) {
		dr_add(c, DR_C_STRIXPEER, "in_use", "", DR_PASS,
		       "not in use: rmmod strixpeer would succeed");
	} else {
		r = dr_add(c, DR_C_STRIXPEER, "in_use", "", DR_INFO,
			   "in use (refcount %lld), rmmod strixpeer would fail: /dev/strixpeer held by %s; %llu dma-bufs of buffers alive; %llu PeerDirect registrations%s",
			   (long long)refcnt, who[0] ? who : "no process seen",
			   (unsigned long long)sc.dmabuf_exports,
			   (unsigned long long)sc.peer_registrations,
			   h.unreadable ? "; some processes not readable (run as root to see all)" : "");
		dr_advise(r, "stop those processes (strixpeerctl buf show names each buffer's holders) before rmmod or a DKMS upgrade");
		dr_int(r, "refcnt", refcnt);
		dr_int(r, "open_fds", h.dev_fds);
		dr_int(r, "dmabufs_alive", (int64_t)sc.dmabuf_exports);
		dr_int(r, "peer_registrations", (int64_t)sc.peer_registrations);
		dr_int(r, "unreadable_processes", h.unreadable);
		dr_str(r, "holders", who);
	}
	sp_holders_free(&h);
}

void dr_check_strixpeer(struct dr_ctx *c)
{
	char running[128] = "", modver[64] = "", srcver[64] = "", abi[128], why[256];
	struct installed run_in = { 0 };
	const char *libver = sp_lib_version();
	struct dr_result *r;
	size_t ri;
	bool loaded;
	int err;

	dr_kernel_release(c, running, sizeof(running));
	loaded = dr_exists(c, "/sys/module/strixpeer/initstate") ||
		 dr_exists(c, "/sys/module/strixpeer/version");
	dr_read(c, modver, sizeof(modver), "/sys/module/strixpeer/version");
	dr_read(c, srcver, sizeof(srcver), "/sys/module/strixpeer/srcversion");

	/* install first: the module result's advice depends on it */
	r = dr_add(c, DR_C_STRIXPEER, "module", "", DR_PASS, "%s", "");
	ri = (size_t)(r - c->res);
	check_install(c, running, loaded, libver, &run_in);
	r = &c->res[ri];	/* check_install's results may have moved c->res */
	if (!loaded) {
		r->status = DR_FAIL;
		dr_set_summary(r, "strixpeer is not loaded (library %s)", libver);
		if (run_in.found)
			dr_advise(r, "modprobe strixpeer (strixpeer-dkms also loads it at boot through /usr/lib/modules-load.d/strixpeer.conf)");
		else {
			char hdr[256], pkg[256];

			dr_os_headers(c, hdr, sizeof(hdr), running[0] ? running : "$(uname -r)");
			dr_os_install(c, pkg, sizeof(pkg), "strixpeer-dkms");
			dr_advise(r, "install it for this kernel (%s; %s; or make dkms-install), then modprobe strixpeer",
				  pkg, hdr);
		}
	} else {
		dr_set_summary(r, "strixpeer %s loaded (library %s)", modver[0] ? modver : "?", libver);
		dr_str(r, "version", modver);
		dr_str(r, "library", libver);
		if (strcmp(modver, libver)) {
			r->status = DR_WARN;
			dr_set_summary(r, "%s: the versions differ", r->summary);
			dr_advise(r, "install module and library of the same release, then rmmod strixpeer && modprobe strixpeer");
		}
		if (run_in.found && run_in.srcversion[0] && srcver[0] &&
		    strcmp(run_in.srcversion, srcver)) {
			dr_raise(r, DR_INFO);
			dr_set_summary(r, "%s; the loaded module is not the one installed for this kernel (loaded by hand, or updated since)",
				       r->summary);
			dr_advise(r, "rmmod strixpeer && modprobe strixpeer runs the installed one");
		}
	}

	if (!c->live) {
		dr_add(c, DR_C_STRIXPEER, "abi", "", DR_SKIP,
		       "the ABI handshake needs the live device (not under --sysroot)");
	} else if (!loaded) {
		dr_add(c, DR_C_STRIXPEER, "abi", "", DR_SKIP, "module not loaded");
	} else if (dr_live_module_abi(abi, sizeof(abi), why, sizeof(why), &err) == 0) {
		r = dr_add(c, DR_C_STRIXPEER, "abi", "", DR_PASS, "library %s and %s agree", libver, abi);
		dr_str(&c->node, "abi", abi);
	} else {
		r = dr_add(c, DR_C_STRIXPEER, "abi", "", err == -EACCES ? DR_SKIP : DR_FAIL, "%s", why);
		if (err == -EPROTONOSUPPORT)
			dr_advise(r, "install module and library of the same release");
	}
	check_device(c, loaded);
	if (c->live && loaded)
		check_in_use(c);
}
