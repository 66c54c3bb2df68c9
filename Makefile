# SPDX-License-Identifier: GPL-2.0
#
# strixpeer top-level Makefile.
#
#   make              module (if kernel headers are found), library, CLI, tests
#   make module       strixpeer.ko against KDIR (default: the running kernel)
#   make user         libstrixpeer, strixpeerctl and the test programs
#   make examples     examples/ (UCX, Open MPI, PeerDirect flow) in build/examples/
#   make demo         boot a VM, RDMA-write into a strixpeer buffer, show it
#   make check        the whole test suite (host checks + one VM per kernel)
#   make fuzz         the fuzzer (tests/fuzz/) in the debug kernel's VM (else 6.12's)
#                     for FUZZ_SECONDS (default 600); FUZZ_SEED, FUZZ_PHASES optional
#   make bench        strixpeerctl bench + perftest calibration in the VM, per
#                     kernel; results in build/bench/ (docs/performance.md)
#   make deps         install the packages the above need (apt on Debian/Ubuntu;
#                     dnf on Fedora: building and packaging only)
#   make install      install library, header, pkg-config and CMake files, CLI,
#                     man pages, bash completion, systemd units (install-lib: the same without
#                     building tests); PREFIX=/usr/local, DESTDIR= as usual
#   make uninstall    remove what install put there (same PREFIX, DESTDIR)
#   make dkms-install copy the module sources to /usr/src/strixpeer-VERSION, build
#                     and install with DKMS for KVER (default: the running kernel;
#                     only KVER's module is replaced)
#   make dkms-remove  remove that again, for every kernel
#   make deb          Debian packages in build/deb/ (strixpeer-dkms, libstrixpeer1,
#                     libstrixpeer-dev, strixpeer-utils, and the source package)
#   make rpm          RPMs in build/rpm/ (rpm/strixpeer.spec: strixpeer, -dkms,
#                     -utils, libstrixpeer, -devel, -static, and the source RPM)

VERSION := $(shell cat VERSION)
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build

B := build
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
# The library directory as autotools and meson choose it: lib on Debian and
# Ubuntu (their compiler names a multiarch triplet; /usr/lib and
# /usr/local/lib are searched), lib64 where the system's own libraries are
# in a real /usr/lib64 (Fedora, RHEL, openSUSE), lib elsewhere (Arch, whose
# /usr/lib64 is a link). LIBDIR= overrides it.
LIBDIR ?= $(PREFIX)/$(SYS_LIB)
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
DESTDIR ?=

CC ?= cc
CFLAGS ?= -O2 -g
LDFLAGS ?=
# build/strixpeerctl finds the library beside it in build/. The installed one
# ($(B)/install/strixpeerctl) finds it in LIBDIR: through the dynamic linker's
# own search path for the system's directories, else through its RUNPATH.
CLI_RPATH ?= -Wl,-rpath,'$$ORIGIN'
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
LIB64_DIR ?= /usr/lib64
SYS_LIB := $(if $(MULTIARCH),lib,$(if $(shell test -d $(LIB64_DIR) && test ! -L $(LIB64_DIR) && echo y),lib64,lib))
SYS_LIBDIRS := /lib /usr/lib /lib64 /usr/lib64 $(if $(MULTIARCH),/lib/$(MULTIARCH) /usr/lib/$(MULTIARCH))
CLI_INSTALL_RPATH ?= $(if $(filter $(SYS_LIBDIRS),$(LIBDIR)),,-Wl,-rpath,$(LIBDIR))
OBJCOPY ?= objcopy
SP_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 \
	-Wmissing-prototypes -Wstrict-prototypes -Iinclude \
	-DSP_LIB_VERSION='"$(VERSION)"' \
	$(if $(findstring _FORTIFY_SOURCE,$(CFLAGS) $(CPPFLAGS)),,-D_FORTIFY_SOURCE=2)
SONAME := libstrixpeer.so.1
LIB_SO := $(B)/$(SONAME).0.0

NL_CFLAGS := $(shell pkg-config --cflags libnl-genl-3.0 2>/dev/null || echo -I/usr/include/libnl3)
NL_LIBS := $(shell pkg-config --libs libnl-genl-3.0 2>/dev/null || echo -lnl-genl-3 -lnl-3)

LIB_SRC := user/lib/libstrixpeer.c user/lib/ctl.c user/lib/reg.c user/lib/compat.c
LIB_OBJ := $(patsubst user/lib/%.c,$(B)/lib/%.o,$(LIB_SRC))
# The static library: the same sources without symbol versions, linked into
# one object whose only global symbols are the API's (the version script's).
STATIC_OBJ := $(patsubst user/lib/%.c,$(B)/static/%.o,$(LIB_SRC))
PUB_HDR := include/strixpeer.h include/strixpeer/ctl.h include/strixpeer/reg.h
UAPI_HDR := include/uapi/strixpeer.h include/uapi/strixpeer_nl.h
LIB_HDR := $(PUB_HDR) $(UAPI_HDR) user/lib/internal.h
# One RC queue pair's bring-up (user/rdma/): a static archive for
# strixpeerctl (doctor, bench) and the test programs, never the library.
# rc.o needs libibverbs only, rc_cm.o and link.o (the two-node connection
# doctor and bench share) librdmacm too.
RDMA_SRC := user/rdma/rc.c user/rdma/rc_cm.c user/rdma/link.c user/rdma/link_io.c user/rdma/link_msg.c
RDMA_OBJ := $(patsubst user/rdma/%.c,$(B)/sprdma/%.o,$(RDMA_SRC))
RDMA_HDR := user/rdma/rc.h user/rdma/link.h user/rdma/link_int.h
RDMA_A := $(B)/sprdma/libsprdma.a
# strixpeerctl bench's measuring (user/bench/): a static archive of its
# own, linked into strixpeerctl only; it uses libstrixpeer's public API,
# librdmacm for the RDMA figures and libm for the statistics.
# DRM dumb buffers without libdrm (user/drm/): a static archive for bench
# and the tests (test library, fuzzer, the gpualloc preload), never the library;
# position-independent and hidden, so that the preload links it too and
# exports nothing of it.
DRM_SRC := user/drm/spdrm.c
DRM_HDR := user/drm/spdrm.h
DRM_A := $(B)/spdrm/libspdrm.a
BENCH_SRC := user/bench/bench.c user/bench/mem.c user/bench/bench_rdma.c user/bench/bench_conn.c \
	user/bench/report.c user/bench/util.c user/bench/plot.c
BENCH_OBJ := $(patsubst user/bench/%.c,$(B)/spbench/%.o,$(BENCH_SRC))
BENCH_HDR := user/bench/bench.h user/bench/bench_int.h user/bench/bench_conn.h user/bench/plot.h \
	user/compat/pagemap_scan.h
BENCH_A := $(B)/spbench/libspbench.a
BENCH_LIBS := -lrdmacm -libverbs -lm
# strixpeerctl: a dispatcher, one file per object, util.c for what they share
CLI_SRC := user/cli/strixpeerctl.c user/cli/util.c user/cli/print.c user/cli/holders.c \
	user/cli/status.c user/cli/buf.c user/cli/stats.c user/cli/config.c \
	user/cli/monitor.c user/cli/bench.c user/cli/gpu.c user/cli/gpu_proof.c user/cli/gpu_numbers.c \
	user/gpu/hiprt.c user/gpu/proof.c user/gpu/facts.c user/gpu/numbers.c user/gpu/kinds.c \
	user/gpu/peer.c
CLI_HDR := user/cli/cli.h user/cli/util.h user/cli/print.h user/cli/holders.h user/cli/gpu_cli.h \
	user/gpu/hiprt.h user/gpu/proof.h user/gpu/proof_int.h
# strixpeerctl gpu (user/cli/gpu.c): ROCm's runtime is dlopen()ed
# (user/gpu/hiprt.c), never linked
GPU_LIBS := -ldl
# strixpeerctl doctor (user/cli/doctor/): checks that read files only, the
# live probes and --rdma-test; libkmod finds modules, librdmacm connects --peer
DOCTOR_SRC := $(wildcard user/cli/doctor/*.c)
DOCTOR_LIBS := -lkmod -lrdmacm -libverbs -lz
CLI_SRC += $(DOCTOR_SRC)
CLI_HDR += user/cli/doctor/doctor.h
TEST_SRC := $(wildcard tests/guest/*.c)
TEST_BIN := $(patsubst tests/guest/%.c,$(B)/tests/%,$(TEST_SRC))
TEST_HDR := $(wildcard tests/lib/*.h) user/compat/pagemap_scan.h
# The test programs' library (tests/lib/, with user/drm/'s DRM helper): each
# helper compiled once, into build/tests/libsptest.a, and again with the
# sanitizers (build/asan/).
TESTLIB_SRC := $(wildcard tests/lib/*.c)
TESTLIB_A := $(B)/tests/libsptest.a
TESTLIB_ASAN_A := $(B)/asan/libsptest.a
# AddressSanitizer and UBSan: the asan/ test programs, doctor-test,
# bench-plot-test (they compile the library's sources in, not libstrixpeer.a)
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=all $(SP_CFLAGS) $(NL_CFLAGS) -U_FORTIFY_SOURCE

.PHONY: all user lib module module-clean deps check check-host check-one demo install install-lib clean \
	dkms-install dkms-remove deb rpm uninstall bench fuzz netlink-gen FORCE

all: module user examples

# The sanitizer build of the test programs that need no verbs device.
ASAN_TESTS := abi lifetime limits netlink rdma_regmr
ASAN_BIN := $(patsubst %,$(B)/asan/%,$(ASAN_TESTS))

user: lib $(TEST_BIN) $(ASAN_BIN)

# What 'make install' installs (the Debian packages build this).
lib: $(LIB_SO) $(B)/libstrixpeer-preload.so $(B)/libstrixpeer.a $(B)/strixpeerctl $(B)/install/strixpeerctl \
	$(B)/strixpeer.pc $(B)/strixpeerConfig.cmake $(B)/strixpeerConfigVersion.cmake

module:
	@if [ -f "$(KDIR)/Makefile" ]; then \
		$(MAKE) -C "$(KDIR)" M="$(CURDIR)" modules; \
	else \
		echo "strixpeer: no kernel build directory at $(KDIR):"; \
		echo "  install linux-headers-$(KVER) or pass KDIR=<kernel build dir>; module not built"; \
	fi

module-clean:
	@if [ -f "$(KDIR)/Makefile" ]; then $(MAKE) -C "$(KDIR)" M="$(CURDIR)" clean; fi

$(B) $(B)/tests $(B)/lib $(B)/static $(B)/spbench $(B)/sprdma $(B)/install:
	mkdir -p $@

$(B)/lib/%.o: user/lib/%.c $(LIB_HDR) | $(B)/lib
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -fPIC -c -o $@ $<

$(LIB_SO): $(LIB_OBJ) user/lib/libstrixpeer.map
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) \
		-Wl,--version-script=user/lib/libstrixpeer.map -o $@ $(LIB_OBJ) $(NL_LIBS) \
		-libverbs
	ln -sf $(SONAME).0.0 $(B)/$(SONAME)
	ln -sf $(SONAME).0.0 $(B)/libstrixpeer.so

$(B)/static/%.o: user/lib/%.c $(LIB_HDR) | $(B)/static
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -fPIC -c -o $@ $<

# The API's names, from the version script.
$(B)/api.syms: user/lib/libstrixpeer.map | $(B)
	sed -n 's/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/\1/p' $< > $@

$(B)/libstrixpeer.a: $(STATIC_OBJ) $(B)/api.syms
	$(CC) -r -nostdlib -o $(B)/static/strixpeer.o $(STATIC_OBJ)
	$(OBJCOPY) --keep-global-symbols=$(B)/api.syms $(B)/static/strixpeer.o
	rm -f $@
	ar rcs $@ $(B)/static/strixpeer.o

$(B)/sprdma/%.o: user/rdma/%.c $(RDMA_HDR) | $(B)/sprdma
	$(CC) $(CFLAGS) $(SP_CFLAGS) -c -o $@ $<

$(RDMA_A): $(RDMA_OBJ)
	rm -f $@
	ar rcs $@ $(RDMA_OBJ)

$(B)/spdrm/%.o: user/drm/%.c $(DRM_HDR)
	@mkdir -p $(B)/spdrm
	$(CC) $(CFLAGS) $(SP_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(DRM_A): $(patsubst user/drm/%.c,$(B)/spdrm/%.o,$(DRM_SRC))
	rm -f $@
	ar rcs $@ $^

$(B)/spbench/%.o: user/bench/%.c $(BENCH_HDR) $(RDMA_HDR) $(DRM_HDR) $(PUB_HDR) | $(B)/spbench
	$(CC) $(CFLAGS) $(SP_CFLAGS) -Iuser -c -o $@ $<

$(BENCH_A): $(BENCH_OBJ)
	rm -f $@
	ar rcs $@ $(BENCH_OBJ)

$(B)/strixpeerctl: $(CLI_SRC) $(CLI_HDR) $(LIB_HDR) $(BENCH_HDR) $(BENCH_A) $(RDMA_HDR) $(RDMA_A) \
		$(DRM_A) $(LIB_SO)
	$(CC) $(CFLAGS) $(SP_CFLAGS) -Iuser $(LDFLAGS) -o $@ $(CLI_SRC) $(BENCH_A) $(RDMA_A) $(DRM_A) \
		-L$(B) -lstrixpeer $(CLI_RPATH) $(DOCTOR_LIBS) $(BENCH_LIBS) $(GPU_LIBS)

# The installation directories, remembered: what embeds them is rebuilt when
# they change (make; sudo make install PREFIX=/usr).
INSTALL_VARS := $(PREFIX) $(LIBDIR) $(INCLUDEDIR) $(CLI_INSTALL_RPATH)
$(B)/install/vars: FORCE | $(B)/install
	@echo '$(INSTALL_VARS)' | cmp -s - $@ || echo '$(INSTALL_VARS)' > $@

$(B)/install/strixpeerctl: $(CLI_SRC) $(CLI_HDR) $(LIB_HDR) $(BENCH_HDR) $(BENCH_A) $(RDMA_HDR) \
		$(RDMA_A) $(DRM_A) $(LIB_SO) $(B)/install/vars
	$(CC) $(CFLAGS) $(SP_CFLAGS) -Iuser $(LDFLAGS) -o $@ $(CLI_SRC) $(BENCH_A) $(RDMA_A) $(DRM_A) \
		-L$(B) -lstrixpeer $(CLI_INSTALL_RPATH) $(DOCTOR_LIBS) $(BENCH_LIBS) $(GPU_LIBS)

SUBST_DIRS = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g'

$(B)/strixpeer.pc: user/lib/strixpeer.pc.in VERSION $(B)/install/vars
	$(SUBST_DIRS) $< > $@

$(B)/strixpeerConfig.cmake: user/lib/strixpeerConfig.cmake.in VERSION $(B)/install/vars
	$(SUBST_DIRS) $< > $@

$(B)/strixpeerConfigVersion.cmake: user/lib/strixpeerConfigVersion.cmake.in VERSION
	$(SUBST_DIRS) $< > $@

$(B)/tests/lib/%.o: tests/lib/%.c $(TEST_HDR) $(LIB_HDR) $(RDMA_HDR) $(DRM_HDR)
	@mkdir -p $(B)/tests/lib
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -Itests/lib -Iuser -c -o $@ $<

$(TESTLIB_A): $(patsubst tests/lib/%.c,$(B)/tests/lib/%.o,$(TESTLIB_SRC)) \
		$(patsubst user/drm/%.c,$(B)/spdrm/%.o,$(DRM_SRC))
	rm -f $@
	ar rcs $@ $^

$(B)/asan/lib/%.o: tests/lib/%.c $(TEST_HDR) $(LIB_HDR) $(RDMA_HDR) $(DRM_HDR)
	@mkdir -p $(B)/asan/lib
	$(CC) $(ASAN_CFLAGS) -Itests/lib -Iuser -c -o $@ $<

$(B)/asan/drm/%.o: user/drm/%.c $(DRM_HDR)
	@mkdir -p $(B)/asan/drm
	$(CC) $(ASAN_CFLAGS) -c -o $@ $<

$(TESTLIB_ASAN_A): $(patsubst tests/lib/%.c,$(B)/asan/lib/%.o,$(TESTLIB_SRC)) \
		$(patsubst user/drm/%.c,$(B)/asan/drm/%.o,$(DRM_SRC))
	rm -f $@
	ar rcs $@ $^

# Test programs link the static library, so they run anywhere (VM included).
# A program of several files is tests/guest/NAME.c (its case table and main)
# with the rest in tests/guest/NAME/ (*.c, and NAME.h for what they share).
.SECONDEXPANSION:
$(B)/tests/%: tests/guest/%.c $$(wildcard tests/guest/$$*/*.[ch]) $(TEST_HDR) $(LIB_HDR) \
		$(RDMA_HDR) $(TESTLIB_A) $(B)/libstrixpeer.a $(RDMA_A) | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -Itests/lib -Iuser -o $@ $< \
		$(wildcard tests/guest/$*/*.c) $(TESTLIB_A) $(B)/libstrixpeer.a $(RDMA_A) -libverbs \
		$(NL_LIBS) -lpthread

# tests/guest/rdma_link.c: user/rdma/link.c's connections (librdmacm)
$(B)/tests/rdma_link: tests/guest/rdma_link.c $(TEST_HDR) $(LIB_HDR) $(RDMA_HDR) $(TESTLIB_A) \
		$(B)/libstrixpeer.a $(RDMA_A) | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -Itests/lib -Iuser -o $@ $< $(TESTLIB_A) \
		$(B)/libstrixpeer.a $(RDMA_A) -lrdmacm -libverbs $(NL_LIBS) -lpthread

# tests/guest/tensor_slab.c runs examples/tensor_slab.c's data path (librdmacm)
$(B)/tests/tensor_slab: tests/guest/tensor_slab.c examples/tensor_slab.c examples/example.h \
		$(TEST_HDR) $(LIB_HDR) $(TESTLIB_A) $(B)/libstrixpeer.a $(RDMA_A) | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -Itests/lib -Iuser -o $@ $< $(TESTLIB_A) \
		$(B)/libstrixpeer.a $(RDMA_A) -lrdmacm -libverbs $(NL_LIBS) -lpthread

# tests/abi/: a program built against the 1.0 header and linked against the
# 1.0 library (a stub of tests/abi/1.0/libstrixpeer.map's symbols, as glibc
# links its compat tests), run against build/libstrixpeer.so.1 (its rpath)
ABI10 := tests/abi/1.0
ABI10_HDR := $(ABI10)/include/strixpeer.h $(ABI10)/include/strixpeer/ctl.h \
	$(ABI10)/include/strixpeer/reg.h
user: $(B)/tests/abi_compat
$(B)/abi-1.0/libstrixpeer.so: $(ABI10)/libstrixpeer.map
	@mkdir -p $(B)/abi-1.0
	sed -n 's/^[[:space:]]*\(sp_[a-z0-9_]*\);.*/void \1(void); void \1(void) {}/p' $< \
		> $(B)/abi-1.0/stub.c
	$(CC) -shared -fPIC -Wl,-soname,$(SONAME) -Wl,--version-script=$< -o $@ $(B)/abi-1.0/stub.c
$(B)/tests/abi_compat: tests/abi/abi_compat.c $(ABI10_HDR) tests/lib/tap.h \
		$(B)/abi-1.0/libstrixpeer.so $(LIB_SO) $(TESTLIB_A) | $(B)/tests
	$(CC) $(CFLAGS) -I$(ABI10)/include -Itests/lib -o $@ $< $(TESTLIB_A) -L$(B)/abi-1.0 -lstrixpeer \
		-Wl,-rpath,'$$ORIGIN/..'

# libstrixpeer-preload.so (user/preload/): LD_PRELOAD interposer for
# unmodified verbs programs; links libibverbs only, exports the three
# ibv_reg_mr* functions and nothing else.
PRELOAD_SO := $(B)/libstrixpeer-preload.so
$(PRELOAD_SO): user/preload/preload.c $(UAPI_HDR)
	$(CC) $(CFLAGS) $(SP_CFLAGS) -fPIC -shared -fvisibility=hidden \
		-Wl,-z,defs -Wl,-z,now -o $@ $< -libverbs -lpthread

# The suite's stand-in for hipMalloc under unmodified programs (test only).
GPUALLOC_SO := $(B)/tests/libspgpualloc.so
user: $(GPUALLOC_SO)
$(GPUALLOC_SO): tests/preload/gpualloc.c $(DRM_HDR) $(DRM_A) | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) -Iuser -fPIC -shared -fvisibility=hidden -o $@ $< $(DRM_A) -lpthread

# The suite's stand-in for ROCm's HIP/HSA runtime under strixpeerctl gpu, on
# sp_gpusim and sp_kfdsim (test only, never installed).
GPURT_SO := $(B)/tests/libspgpurt.so
user: $(GPURT_SO)
$(GPURT_SO): tests/gpurt/standin.c user/gpu/hiprt.h tests/kmod/gpusim_uapi.h tests/kmod/kfdsim_uapi.h $(DRM_HDR) \
		$(DRM_A) | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) -Iuser -fPIC -shared -fvisibility=hidden -Wl,-z,defs \
		-o $@ $< $(DRM_A)

# The fuzzer (tests/fuzz/): raw syscalls and netlink, no library (the DRM
# helper's raw ioctls only).
FUZZ_BIN := $(B)/tests/fuzz
FUZZ_SRC := $(wildcard tests/fuzz/*.c)
user: $(FUZZ_BIN)
$(FUZZ_BIN): $(FUZZ_SRC) $(wildcard tests/fuzz/*.h) $(UAPI_HDR) $(DRM_HDR) $(DRM_A) | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) -Iuser -o $@ $(FUZZ_SRC) $(DRM_A) -lpthread

# Library and test compiled together with AddressSanitizer and UBSan
# (ASAN_CFLAGS).
$(B)/asan/%: tests/guest/%.c $(TEST_HDR) $(LIB_HDR) $(LIB_SRC) $(RDMA_HDR) user/rdma/rc.c \
		$(TESTLIB_ASAN_A)
	@mkdir -p $(B)/asan
	$(CC) $(ASAN_CFLAGS) -Itests/lib -Iuser -o $@ $< $(TESTLIB_ASAN_A) $(LIB_SRC) user/rdma/rc.c \
		-libverbs $(NL_LIBS) -lpthread

# doctor's host test (tests/doctor/): the checks against generated fixture
# trees, built with AddressSanitizer and UBSan
DOCTOR_TEST := $(B)/tests/doctor-test
user: $(DOCTOR_TEST)
$(DOCTOR_TEST): tests/doctor/doctor-test.c $(DOCTOR_SRC) user/cli/doctor/doctor.h \
		user/cli/print.c user/cli/holders.c user/cli/holders.h user/cli/util.c \
		user/cli/util.h $(LIB_HDR) $(LIB_SRC) $(RDMA_HDR) $(RDMA_SRC) tests/lib/tap.h $(wildcard tests/doctor/*.h) \
		$(TESTLIB_ASAN_A) | $(B)/tests
	$(CC) $(ASAN_CFLAGS) \
		-Itests/lib -Iuser -Iuser/cli/doctor -o $@ $< $(DOCTOR_SRC) user/cli/print.c user/cli/holders.c \
		user/cli/util.c $(RDMA_SRC) \
		$(LIB_SRC) $(TESTLIB_ASAN_A) $(NL_LIBS) $(DOCTOR_LIBS) -lpthread

# strixpeerctl bench's plot (tests/bench/): user/bench/ with the library,
# AddressSanitizer and UBSan
BENCH_PLOT_TEST := $(B)/tests/bench-plot-test
user: $(BENCH_PLOT_TEST)
$(BENCH_PLOT_TEST): tests/bench/plot-test.c $(BENCH_SRC) $(BENCH_HDR) $(DRM_HDR) $(LIB_HDR) $(LIB_SRC) \
		$(RDMA_HDR) $(RDMA_SRC) tests/lib/tap.h $(TESTLIB_ASAN_A) | $(B)/tests
	$(CC) $(ASAN_CFLAGS) \
		-Itests/lib -Iuser -Iuser/bench -o $@ $< $(BENCH_SRC) $(LIB_SRC) $(RDMA_SRC) $(TESTLIB_ASAN_A) \
		$(BENCH_LIBS) $(NL_LIBS) -lpthread

# The examples (examples/), built like the tests against the static
# library. An example whose engine is not installed (libucx-dev,
# libopenmpi-dev, librdmacm-dev, libvulkan-dev: make deps) is left out with
# a message.
.PHONY: examples
EX_LIBS := $(B)/libstrixpeer.a -libverbs $(NL_LIBS)
EX_PKG_ucx_put := ucx
EX_PKG_mpi_allreduce := mpi-c
EX_PKG_gpu_import := librdmacm
EX_PKG_tensor_slab := librdmacm
EX_PKG_vulkan_import := vulkan

# hip_*.c need ROCm's HIP/HSA headers and libraries: built by hand (their
# comments say how); tests/host/hip-examples-check.sh compiles them.
EX_SRC := $(filter-out examples/hip_%.c,$(wildcard examples/*.c))
examples: $(patsubst examples/%.c,$(B)/examples/%,$(EX_SRC))

$(B)/examples/%: examples/%.c examples/example.h $(LIB_HDR) $(B)/libstrixpeer.a
	@mkdir -p $(B)/examples
	@if pkg-config --exists $(EX_PKG_$*); then \
		set -x; \
		$(CC) $(CFLAGS) $(SP_CFLAGS) $$(pkg-config --cflags $(EX_PKG_$*)) -o $@ $< \
			$(EX_LIBS) $$(pkg-config --libs $(EX_PKG_$*)); \
	else \
		echo "examples: $* left out: pkg-config finds no $(EX_PKG_$*) (make deps)"; \
	fi

deps:
	./scripts/install-deps.sh

check: deps
	./tests/run-all.sh

# make check-host: the host checks alone (no VM); make check-one KERNEL=6.12
# [TEST="abi ..."] [CASES="case ..."]: rows of the VM suite
# (tests/vm/suite.tab) on one kernel, the kernel's whole plan without TEST,
# without the host checks (docs/testing.md)
check-host: deps
	SP_KERNELS=none SP_PROVISION=0 ./tests/run-all.sh

check-one: deps
	./tests/check-one.sh

demo: deps
	./tests/vm/demo.sh

bench: deps user
	./tests/vm/bench.sh

fuzz: deps
	./tests/vm/fuzz.sh

# include/uapi/strixpeer_nl.h from docs/netlink/strixpeer.yaml, by the
# kernel's YNL generator (Debian's linux-source-6.12; make check compares).
netlink-gen:
	./tests/host/ynl-gen.sh

install: user install-lib

# Everything install-lib puts under DESTDIR: uninstall removes exactly this.
# Each exported function also gets a man page alias (.so link) to the page
# that documents it (scripts/man-aliases.sh), so that 'man sp_buf_alloc' works,
# and man3/libstrixpeer.3 is a .so link to the overview, libstrixpeer(7), so
# that 'man 3 libstrixpeer' still works.
MAN3 := $(notdir $(wildcard docs/man/*.3))
MAN4 := $(notdir $(wildcard docs/man/*.4))
MAN7 := $(notdir $(wildcard docs/man/*.7))
MAN8 := $(notdir $(wildcard docs/man/*.8))
MAN_ALIASES = $(shell scripts/man-aliases.sh docs/man user/lib/libstrixpeer.map)
CMAKEDIR := $(LIBDIR)/cmake/strixpeer
INSTALLED = $(LIBDIR)/$(SONAME).0.0 $(LIBDIR)/$(SONAME) $(LIBDIR)/libstrixpeer.so \
	$(LIBDIR)/libstrixpeer.a $(LIBDIR)/pkgconfig/strixpeer.pc \
	$(LIBDIR)/strixpeer/libstrixpeer-preload.so \
	$(CMAKEDIR)/strixpeerConfig.cmake $(CMAKEDIR)/strixpeerConfigVersion.cmake \
	$(INCLUDEDIR)/strixpeer.h $(INCLUDEDIR)/strixpeer/ctl.h $(INCLUDEDIR)/strixpeer/reg.h \
	$(BINDIR)/strixpeerctl \
	$(addprefix $(MANDIR)/man3/,$(MAN3)) $(addprefix $(MANDIR)/man4/,$(MAN4)) \
	$(addprefix $(MANDIR)/man7/,$(MAN7)) $(addprefix $(MANDIR)/man8/,$(MAN8)) \
	$(MANDIR)/man3/libstrixpeer.3 \
	$(foreach a,$(MAN_ALIASES),$(MANDIR)/man3/$(firstword $(subst :, ,$(a))).3) \
	$(BASHCOMPDIR)/strixpeerctl $(addprefix $(SYSTEMDUNITDIR)/,$(UNITS))

# The systemd units (systemd/): metrics for node-exporter, events to the journal.
UNITS := strixpeer-textfile.service strixpeer-textfile.timer strixpeer-monitor.service

# The dynamic linker's cache, when installing for real (not into DESTDIR).
LDCONFIG = if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; \
	then ldconfig; fi

install-lib: lib
	install -d $(addprefix $(DESTDIR),$(LIBDIR)/pkgconfig $(CMAKEDIR) $(INCLUDEDIR) \
		$(BINDIR) $(MANDIR)/man3 $(MANDIR)/man4 $(MANDIR)/man7 $(MANDIR)/man8 $(BASHCOMPDIR) $(SYSTEMDUNITDIR))
	install -m 0644 $(LIB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SONAME).0.0 $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME).0.0 $(DESTDIR)$(LIBDIR)/libstrixpeer.so
	install -m 0644 $(B)/libstrixpeer.a $(DESTDIR)$(LIBDIR)/
	install -d $(DESTDIR)$(LIBDIR)/strixpeer
	install -m 0644 $(PRELOAD_SO) $(DESTDIR)$(LIBDIR)/strixpeer/
	install -m 0644 $(B)/strixpeer.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 0644 $(B)/strixpeerConfig.cmake $(B)/strixpeerConfigVersion.cmake \
		$(DESTDIR)$(CMAKEDIR)/
	install -m 0644 include/strixpeer.h $(DESTDIR)$(INCLUDEDIR)/
	install -d $(DESTDIR)$(INCLUDEDIR)/strixpeer
	install -m 0644 include/strixpeer/ctl.h include/strixpeer/reg.h $(DESTDIR)$(INCLUDEDIR)/strixpeer/
	install -m 0755 $(B)/install/strixpeerctl $(DESTDIR)$(BINDIR)/
	install -m 0644 $(addprefix docs/man/,$(MAN3)) $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 $(addprefix docs/man/,$(MAN4)) $(DESTDIR)$(MANDIR)/man4/
	install -m 0644 $(addprefix docs/man/,$(MAN7)) $(DESTDIR)$(MANDIR)/man7/
	install -m 0644 $(addprefix docs/man/,$(MAN8)) $(DESTDIR)$(MANDIR)/man8/
	echo ".so man7/libstrixpeer.7" > $(DESTDIR)$(MANDIR)/man3/libstrixpeer.3
	for a in $(MAN_ALIASES); do \
		echo ".so man3/$${a#*:}" > $(DESTDIR)$(MANDIR)/man3/$${a%%:*}.3 || exit 1; done
	install -m 0644 user/cli/strixpeerctl.bash-completion $(DESTDIR)$(BASHCOMPDIR)/strixpeerctl
	sed 's#/usr/bin/strixpeerctl#$(BINDIR)/strixpeerctl#g' systemd/strixpeer-textfile.service \
		> $(DESTDIR)$(SYSTEMDUNITDIR)/strixpeer-textfile.service
	sed 's#/usr/bin/strixpeerctl#$(BINDIR)/strixpeerctl#g' systemd/strixpeer-monitor.service \
		> $(DESTDIR)$(SYSTEMDUNITDIR)/strixpeer-monitor.service
	install -m 0644 systemd/strixpeer-textfile.timer $(DESTDIR)$(SYSTEMDUNITDIR)/
	$(LDCONFIG)

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(LIBDIR)/strixpeer $(DESTDIR)$(INCLUDEDIR)/strixpeer 2>/dev/null
	$(LDCONFIG)

# DKMS from a checkout: the same sources and dkms.conf the strixpeer-dkms
# package installs, in /usr/src/strixpeer-$(VERSION)/.
DKMS_SRC := /usr/src/strixpeer-$(VERSION)
DKMS_FILES := Kbuild VERSION $(wildcard kmod/*.c kmod/*.h) kmod/conftest.sh \
	scripts/dkms-post-build.sh \
	include/uapi/strixpeer.h include/uapi/strixpeer_nl.h

# The boot-time load the packages ship in /usr/lib/modules-load.d/; from a
# checkout it goes to /etc/modules-load.d/ (the admin's directory).
MODULES_LOAD := /etc/modules-load.d/strixpeer.conf

dkms-install:
	@command -v dkms >/dev/null || { echo "dkms not found: apt install dkms (Debian, Ubuntu) or dnf install dkms (Fedora)"; exit 1; }
	@# only KVER's build is removed: other kernels keep their module
	-dkms remove strixpeer/$(VERSION) -k $(KVER) >/dev/null 2>&1
	rm -rf $(DKMS_SRC)
	install -d $(DKMS_SRC)
	tar -cf - $(filter-out kmod/conftest.h,$(DKMS_FILES)) | tar -xf - -C $(DKMS_SRC)
	sed 's/#MODULE_VERSION#/$(VERSION)/' dkms.conf > $(DKMS_SRC)/dkms.conf
	if ! dkms status strixpeer/$(VERSION) | grep -q .; then dkms add strixpeer/$(VERSION); fi
	dkms install strixpeer/$(VERSION) -k $(KVER)
	install -D -m 0644 debian/modules-load.d/strixpeer.conf $(MODULES_LOAD)

dkms-remove:
	@command -v dkms >/dev/null || { echo "dkms not found"; exit 1; }
	if dkms status strixpeer/$(VERSION) | grep -q .; then \
		dkms remove strixpeer/$(VERSION) --all; fi
	rm -rf $(DKMS_SRC) $(MODULES_LOAD)

# The source package and the binary packages, built from a clean copy of the
# tree (tracked files plus untracked ones that are not ignored), so build/
# never leaks into them.
# COPY_TREE: the clean copy into $(1).
COPY_TREE = mkdir -p $(1) && \
	if [ -d .git ] || [ -f .git ]; then \
		git ls-files -z --cached --others --exclude-standard | \
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null | \
		tar -xf - -C $(1); \
	else \
		tar --exclude=./build --exclude='*.o' --exclude='*.ko' --exclude=kmod/conftest.h \
			-cf - . | tar -xf - -C $(1); \
	fi
# build/deb/tree.sha256: the files the packages were built from (the same
# list as COPY_TREE's), hashed; tests/vm/provision.sh reuses packages this
# run's lintian check built from the same tree rather than build them again.
TREE_SHA256 = git ls-files -z --cached --others --exclude-standard 2>/dev/null | \
	xargs -0r sha256sum 2>/dev/null | sha256sum | cut -c1-32
deb:
	rm -rf $(B)/deb
	$(call COPY_TREE,$(B)/deb/strixpeer-$(VERSION))
	cd $(B)/deb/strixpeer-$(VERSION) && dpkg-buildpackage -us -uc \
		> ../build.log 2>&1 || { tail -n 30 ../build.log; exit 1; }
	@if [ -d .git ] || [ -f .git ]; then $(TREE_SHA256) > $(B)/deb/tree.sha256; fi
	@ls $(B)/deb/*.deb

# rpmbuild in build/rpm/ (its _topdir) from a tarball of the clean copy.
# RPM_FLAGS: extra rpmbuild options; on a Debian host the suite passes
# --nodeps (the BuildRequires are Fedora's packages, which dpkg's system
# does not record in rpm's database) and leaves debuginfo out.
RPM_FLAGS ?=
rpm:
	@command -v rpmbuild >/dev/null || { echo "rpmbuild not found: dnf install rpm-build (Fedora) or apt install rpm (Debian)"; exit 1; }
	@grep -qx 'Version: *$(VERSION)' rpm/strixpeer.spec || \
		{ echo "rpm/strixpeer.spec's Version is not VERSION's $(VERSION): update the spec and its %changelog"; exit 1; }
	rm -rf $(B)/rpm
	mkdir -p $(B)/rpm/SOURCES $(B)/rpm/tree
	$(call COPY_TREE,$(B)/rpm/tree/strixpeer-$(VERSION))
	tar -C $(B)/rpm/tree -czf $(B)/rpm/SOURCES/strixpeer-$(VERSION).tar.gz strixpeer-$(VERSION)
	rm -rf $(B)/rpm/tree
	rpmbuild -ba --define '_topdir $(CURDIR)/$(B)/rpm' $(RPM_FLAGS) rpm/strixpeer.spec \
		> $(B)/rpm/build.log 2>&1 || { tail -n 30 $(B)/rpm/build.log; exit 1; }
	@find $(B)/rpm/RPMS $(B)/rpm/SRPMS -name '*.rpm' | sort

clean: module-clean
	rm -rf $(B)
