/* SPDX-License-Identifier: MIT */
/*
 * strixpeerctl doctor: what is wrong with this RDMA node, and does RDMA into
 * strixpeer memory work on it.
 *
 * The checks (DR_CHECKS below, one file each named after the check, with
 * pci.c's shared PCI helpers and route.c, stack.c, ucx.c under gpudirect)
 * read files only, each of them under ctx->sysroot, so that each check runs
 * against a fake tree in the tests (tests/doctor/). What files cannot show
 * (the verbs device, the module's ABI handshake, the dma-buf MR probe) is
 * asked only when ctx->live is set (sysroot "/"), in live.c, rdmatest.c
 * and peertest.c.
 * core.c runs the checks; their results are built in result.c and printed
 * once, as text or JSON (report.c).
 */
#ifndef SP_DOCTOR_H
#define SP_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* In order of severity: the worst result decides the exit status. */
enum dr_status { DR_PASS, DR_INFO, DR_SKIP, DR_WARN, DR_FAIL, DR_NSTATUS };

/* Exit status: 0 no WARN/FAIL, 1 WARN, 2 FAIL, 3 doctor could not run. */
#define DR_EXIT_USAGE 3

/* STRS: an array of strings, in s one per line; NULL: JSON null (unlimited) */
enum dr_vtype { DR_V_STR, DR_V_INT, DR_V_BOOL, DR_V_NULL, DR_V_STRS };

/* One observed value: a JSON member of the result's "observed" object. */
struct dr_val {
	char *key;
	enum dr_vtype type;
	char *s;
	int64_t i;
};

struct dr_result {
	const char *check;	/* check name, as --only takes it */
	char *id;		/* "<check>.<what>" */
	char *subject;		/* "mlx4_0/1", "0000:03:00.0", or "" */
	enum dr_status status;
	char *summary;		/* what it saw, with the numbers */
	char *advice;		/* the fix (NULL when there is nothing to do) */
	struct dr_val *vals;
	size_t nvals;
};

/*
 * The checks, registered once: X(ENUM, name), in the order they run. The
 * name is what --only takes, the prefix of the check's finding ids, and
 * its file (name.c) defines dr_check_<name>(). This generates enum
 * dr_check, dr_check_names[] (result.c), core.c's checks[] and the
 * prototypes below.
 */
#define DR_CHECKS(X)			\
	X(RDMA, rdma)			\
	X(PCIE, pcie)			\
	X(MTU, mtu)			\
	X(MEMORY, memory)		\
	X(NUMA, numa)			\
	X(IOMMU, iommu)			\
	X(GPU, gpu)			\
	X(GPUDIRECT, gpudirect)		\
	X(THUNDERBOLT, thunderbolt)	\
	X(COUNTERS, counters)		\
	X(STRIXPEER, strixpeer)

#define DR_CHECK_ENUM(up, name) DR_C_##up,
enum dr_check {
	DR_CHECKS(DR_CHECK_ENUM)
	DR_NCHECKS,
	DR_C_COMPARE = DR_NCHECKS,	/* doctor compare's results; not a check */
	DR_C_RDMATEST,			/* --rdma-test's results */
};
#undef DR_CHECK_ENUM

extern const char *const dr_check_names[DR_C_RDMATEST + 1];

/* One RDMA port, as found in /sys/class/infiniband (rdma.c). */
struct dr_port {
	char dev[64];		/* mlx4_0, rxe0 */
	unsigned int port;
	char link_layer[16];	/* InfiniBand, Ethernet, Unknown, "" */
	int state;		/* 4: ACTIVE; -1 unreadable */
	int phys;		/* 5: LinkUp; -1 unreadable */
	char state_text[32], phys_text[48];
	unsigned int rate_mbps;	/* 0: unknown */
	char rate_text[48];
	char netdev[64];	/* RoCE/rxe/IPoIB netdev, "" if none found */
	bool rxe;		/* Soft-RoCE (has "parent") */
	char pci[256];		/* PCI device path under /sys/devices, "" if none */
	char fw_ver[64];
	char hca_type[64];
};

struct dr_ctx {
	char sysroot[4096];	/* "" for "/" */
	bool live;		/* sysroot is "/": devices may be opened */
	unsigned int only;	/* bit per enum dr_check; 0: all */
	char *only_ids;		/* ",pcie.link,": --only's check ids (NULL: none) */
	unsigned int only_whole;	/* checks --only names whole ("pcie") */
	char **accept;		/* accepted findings: "ID" or "ID=SUBJECT" */
	size_t naccept;
	unsigned int interval_ms;	/* between the two counter samples */
	/* called between the two counter samples (tests change files there) */
	void (*between_samples)(void *arg);
	void *hook_arg;
	/* facts about the node, reported once ("node" in JSON) */
	struct dr_result node;
	struct dr_result *res;
	size_t nres, cap;
	struct dr_port *ports;
	size_t nports;
	bool scanned;
	/* /proc/kallsyms, read once (dr_kallsyms): DR_KS_* bits or -errno */
	int kallsyms;
	bool kallsyms_read;
};

/* core.c: the context, --only, accepted findings; dr_run() below */
void dr_ctx_init(struct dr_ctx *c);
int dr_ctx_set_sysroot(struct dr_ctx *c, const char *sysroot);
void dr_ctx_free(struct dr_ctx *c);
bool dr_want(const struct dr_ctx *c, enum dr_check check);
int dr_parse_only(const char *list, unsigned int *mask);
int dr_parse_only_ids(struct dr_ctx *c, const char *list);
void dr_filter_only(struct dr_ctx *c);
void dr_accept_add(struct dr_ctx *c, const char *spec);
int dr_accept_file(struct dr_ctx *c, const char *path);
void dr_apply_accepted(struct dr_ctx *c);

/* result.c: results, values, names, memory (calls no other doctor file) */
struct dr_result *dr_add(struct dr_ctx *c, enum dr_check check, const char *what,
			 const char *subject, enum dr_status st, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
void dr_set_summary(struct dr_result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dr_advise(struct dr_result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dr_raise(struct dr_result *r, enum dr_status st);
void dr_str(struct dr_result *r, const char *key, const char *val);
void dr_int(struct dr_result *r, const char *key, int64_t v);
void dr_bool(struct dr_result *r, const char *key, bool v);
void dr_null(struct dr_result *r, const char *key);
void dr_strs(struct dr_result *r, const char *key, char **v, int n);
const struct dr_val *dr_get(const struct dr_result *r, const char *key);
const char *dr_status_name(enum dr_status st);
int dr_status_from_name(const char *name);
int dr_exit_status(const struct dr_ctx *c);
char *dr_strdup(const char *s);
char *dr_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *dr_alloc(size_t n);
void dr_result_free(struct dr_result *r);

/*
 * findings.c: every finding id doctor can report, its worst status and
 * where it is reached (a run on a fixture tree, doctor compare, or only
 * the live system: --rdma-test, doctor peer, the module's handshake).
 */
enum dr_reach { DR_REACH_FIXTURE, DR_REACH_COMPARE, DR_REACH_LIVE };
struct dr_finding {
	const char *id;		/* "<check>.<what>" */
	enum dr_status worst;
	enum dr_reach reach;
	const char *meaning;	/* one line */
};
extern const struct dr_finding dr_findings[];
extern const size_t dr_nfindings;
/* the catalogue's entry for @id, NULL when it has none */
const struct dr_finding *dr_finding(const char *id);

/* io.c: files under the sysroot; every path argument is a format */
#define DR_ATTR_MAX 4096	/* largest attribute read whole */
int dr_path(const struct dr_ctx *c, char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int dr_read(const struct dr_ctx *c, char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int dr_read_u64(const struct dr_ctx *c, uint64_t *v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int dr_read_s64(const struct dr_ctx *c, int64_t *v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
bool dr_exists(const struct dr_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int dr_list(const struct dr_ctx *c, char ***names, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void dr_list_free(char **names, int n);
int dr_resolve(const struct dr_ctx *c, char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int dr_link_name(const struct dr_ctx *c, char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
FILE *dr_fopen(const struct dr_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *dr_errstr(int err);
int dr_parse_u64(const char *s, uint64_t *v);
int dr_parse_s64(const char *s, int64_t *v);
unsigned int dr_parse_milli(const char *s, const char *suffix);
/*
 * What /proc/kallsyms holds, read in one pass the first time a check asks
 * and kept in @c: DR_KS_* bits, or -errno when it cannot be read.
 */
#define DR_KS_PEER_API		0x1	/* t|T ib_register_peer_memory_client */
#define DR_KS_MOVE_NOTIFY	0x2	/* a line containing dma_buf_move_notify */
#define DR_KS_P2PDMA		0x4	/* a line containing pci_p2pdma */
#define DR_KS_INVALIDATE	0x8	/* a line containing dma_buf_invalidate_mappings */
int dr_kallsyms(struct dr_ctx *c);
int dr_cmdline_has(const struct dr_ctx *c, const char *param, char *val, size_t len);
int dr_kernel_release(const struct dr_ctx *c, char *out, size_t len);
int dr_kver_cmp(const char *a, const char *b);
/*
 * The distribution, from the sysroot's /etc/os-release (ID, ID_LIKE): the
 * package manager and names the advice gives. DR_OS_UNKNOWN: both.
 */
enum dr_os { DR_OS_UNKNOWN, DR_OS_DEBIAN, DR_OS_FEDORA };
enum dr_os dr_os(const struct dr_ctx *c);
/* an os-release variable (ID, VERSION_ID, ...), unquoted, "" when unknown */
void dr_os_var(const struct dr_ctx *c, const char *var, char *out, size_t len);
/* "apt install PKG" / "dnf install PKG" / both; PKG the same on both */
void dr_os_install(const struct dr_ctx *c, char *out, size_t len, const char *pkg);
/* the kernel headers DKMS needs: linux-headers-KVER / kernel-devel-KVER */
void dr_os_headers(const struct dr_ctx *c, char *out, size_t len, const char *kver);
/* adding USER to GROUP: adduser / usermod -aG */
void dr_os_addgroup(const struct dr_ctx *c, char *out, size_t len, const char *group);
void dr_fmt(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The checks (DR_CHECKS): dr_check_<name>() in <name>.c adds its results to @c. */
#define DR_CHECK_PROTO(up, name) void dr_check_##name(struct dr_ctx *c);
DR_CHECKS(DR_CHECK_PROTO)
#undef DR_CHECK_PROTO
/* rdma.c: the port scan (once per context) and the port name */
void dr_scan_ports(struct dr_ctx *c);
void dr_port_name(const struct dr_port *p, char *out, size_t len);
/* gpu.c: the AMD GPUs (vendor 1002, display class), for gpudirect.c */
struct dr_gpu {
	char bdf[32];
	char path[256];		/* under /sys/devices */
	uint64_t device;
};
#define DR_MAX_GPUS 8
int dr_find_amd_gpus(struct dr_ctx *c, struct dr_gpu *g, int max);
/*
 * stack.c: what RCCL decides (after gpudirect's other results, whose
 * rccl_level it reads); @dmabuf_nic: 1 a NIC takes dma-buf MRs, 0 none, -1
 * not known (--sysroot); @any_gpu_nic: a NIC driver that can take GPU
 * memory; @client: strixpeer's client 1 registered, 0 not, -1 unknown
 */
void dr_check_rccl(struct dr_ctx *c, int dmabuf_nic, bool any_gpu_nic, int client);
/*
 * The dma-buf kernel test of RCCL (@ucx false) or UCX (@ucx true): 1 when
 * it passes; the file it decided on in @used
 */
int dr_dmabuf_kernel_test(struct dr_ctx *c, bool ucx, char *used, size_t len);
/* ucx.c: gpudirect.ucx, what UCX decides for ROCm memory */
void dr_check_ucx(struct dr_ctx *c, int client, bool no_gpu_nic, bool dmabuf_nic);
/*
 * route.c: where a peer-memory core would come from (kernel flavour from
 * uname -r, OFED's files, /proc/kallsyms) and gpudirect.route, the route
 * GPU memory takes to each NIC with strixpeer and without it.
 */
enum dr_flavour {
	DR_FL_OTHER, DR_FL_UBUNTU_GENERIC, DR_FL_UBUNTU_NVIDIA, DR_FL_FEDORA, DR_FL_DEBIAN,
};
/* GPU memory a NIC driver takes: peer core and dma-buf MRs (mlx5), dma-buf MRs only, none */
enum dr_nic_kind { DR_NIC_UNKNOWN, DR_NIC_PEER_DMABUF, DR_NIC_DMABUF, DR_NIC_HOST };
struct dr_core {
	enum dr_flavour flavour;
	char release[128];	/* uname -r */
	bool ofed;		/* MLNX/DOCA-OFED installed */
	char ofed_path[256];	/* the file that shows it */
	bool kallsyms_api;	/* ib_register_peer_memory_client in /proc/kallsyms */
	bool sysfs;		/* /sys/kernel/mm/memory_peers exists */
};
void dr_core_facts(struct dr_ctx *c, struct dr_core *k);
const char *dr_flavour_name(enum dr_flavour f);
enum dr_nic_kind dr_nic_kind(const struct dr_port *p);
/* where this node would get a core, in @out; true when a step exists that gives one */
bool dr_core_advice(const struct dr_ctx *c, const struct dr_core *k, char *out, size_t len);
/* @client: 1 strixpeer's client registered, 0 not, -1 cannot be told from files */
void dr_check_route(struct dr_ctx *c, const struct dr_core *k, int client);
/* The node facts and every wanted check, in order. */
void dr_run(struct dr_ctx *c);

/* pci.c: PCI helpers the pcie, numa, iommu and gpudirect checks share */
/* the BDF (last component) of a PCI device path */
const char *dr_pci_bdf(const char *path);
/* @path becomes its parent PCI function's; false at the host bridge */
bool dr_pci_parent(char *path);
/* the RDMA devices on the PCI function @pci: "mlx4_0" */
void dr_pci_devs_on(const struct dr_ctx *c, const char *pci, char *out, size_t len);
/* port @i is the first of its PCI function (one result per NIC) */
bool dr_pci_first_port(const struct dr_ctx *c, size_t i);
int dr_pci_common(const char *a, const char *b, char *out, size_t len);

/* live.c: what only the running system can answer (ctx->live) */
int dr_live_dmabuf_probe(const char *dev, char *why, size_t len);
int dr_live_module_abi(char *out, size_t len, char *why, size_t wlen, int *err);
int dr_live_peer_reason(char *out, size_t len);

/* report.c */
/* @pretty < 0: JSON as strixpeerctl's global -j/-p set the printer up */
void dr_print(const struct dr_ctx *c, bool json, int pretty);

/* json.c: a small JSON reader for --compare */
enum dr_jtype { DR_J_NULL, DR_J_BOOL, DR_J_NUM, DR_J_STR, DR_J_ARR, DR_J_OBJ };
struct dr_json {
	enum dr_jtype type;
	char *key;		/* member name inside an object */
	char *s;
	double n;
	bool b;
	struct dr_json *kids;	/* array items / object members */
	size_t nkids;
};
struct dr_json *dr_json_parse(const char *text, size_t len, char *err, size_t errlen);
void dr_json_free(struct dr_json *j);
void dr_json_free_kids(struct dr_json *v);
const struct dr_json *dr_json_get(const struct dr_json *obj, const char *key);
const char *dr_json_str(const struct dr_json *obj, const char *key);

/* compare.c */
int dr_compare(struct dr_ctx *c, int nfiles, char **files);

/* rdmatest.c (dr_rdma_test), peertest.c (dr_serve); rdmatest.h: the rest */
struct dr_rt_opts {
	const char *device;	/* only this device (NULL: every ACTIVE port) */
	const char *peer;	/* --peer HOST */
	const char *port;	/* rdma_cm port, default SP_LINK_PORT_DOCTOR ("18516") */
	const char *bind;	/* --serve address (NULL: any) */
	size_t size;		/* bytes per transfer */
	bool once;		/* --serve: one client, then exit */
};
void dr_rdma_test(struct dr_ctx *c, const struct dr_rt_opts *o);
int dr_serve(const struct dr_rt_opts *o);

/* main.c */
int doctor_main(int argc, char **argv, bool json);

#endif /* SP_DOCTOR_H */
