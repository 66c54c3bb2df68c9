# SPDX-License-Identifier: GPL-2.0
#
# strixpeer top-level Makefile.
#
#   make              module (if kernel headers are found), library, CLI, tests
#   make module       strixpeer.ko against KDIR (default: the running kernel)
#   make user         libstrixpeer, strixpeerctl and the test programs
#   make demo         boot a VM, RDMA-write into a strixpeer buffer, show it
#   make check        the whole test suite (host checks + one VM per kernel)
#   make bench        strixpeerctl bench + perftest calibration in the VM, per
#                     kernel; results in build/bench/ (docs/performance.md)
#   make deps         install the Debian/Ubuntu packages the above need
#   make install      install library, header, pkg-config file, CLI, man pages,
#                     bash completion (install-lib: the same without building tests)
#   make dkms-install copy the module sources to /usr/src/strixpeer-VERSION, build
#                     and install with DKMS for KVER (default: the running kernel)
#   make dkms-remove  remove that again, for every kernel
#   make deb          Debian packages in build/deb/ (strixpeer-dkms, libstrixpeer1,
#                     libstrixpeer-dev, strixpeer-utils)

VERSION := $(shell cat VERSION)
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build

B := build
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
DESTDIR ?=

CC ?= cc
CFLAGS ?= -O2 -g
LDFLAGS ?=
# strixpeerctl finds the library beside it in build/; packages pass CLI_RPATH=
CLI_RPATH ?= -Wl,-rpath,'$$ORIGIN'
SP_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 \
	-Wmissing-prototypes -Wstrict-prototypes -Iinclude \
	-DSP_LIB_VERSION='"$(VERSION)"' -D_FORTIFY_SOURCE=2
SONAME := libstrixpeer.so.1
LIB_SO := $(B)/$(SONAME).0.0

NL_CFLAGS := $(shell pkg-config --cflags libnl-genl-3.0 2>/dev/null || echo -I/usr/include/libnl3)
NL_LIBS := $(shell pkg-config --libs libnl-genl-3.0 2>/dev/null || echo -lnl-genl-3 -lnl-3)

LIB_SRC := user/lib/libstrixpeer.c user/lib/ctl.c user/lib/reg.c \
	user/lib/bench.c user/lib/bench_rdma.c
LIB_OBJ := $(patsubst user/lib/%.c,$(B)/lib/%.o,$(LIB_SRC))
LIB_HDR := include/strixpeer.h include/uapi/strixpeer.h user/lib/internal.h \
	user/lib/bench.h
CLI_SRC := user/cli/strixpeerctl.c user/cli/print.c user/cli/bench.c
CLI_HDR := user/cli/print.h user/cli/bench.h
TEST_SRC := $(wildcard tests/*.c)
TEST_BIN := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TEST_HDR := $(wildcard tests/*.h)

.PHONY: all user lib module module-clean deps check demo install install-lib clean \
	dkms-install dkms-remove deb bench

all: module user

# The sanitizer build of the test programs that need no verbs device.
ASAN_TESTS := abi lifetime limits netlink rdma_regmr
ASAN_BIN := $(patsubst %,$(B)/asan/%,$(ASAN_TESTS))

user: lib $(TEST_BIN) $(ASAN_BIN)

# What 'make install' installs (the Debian packages build this).
lib: $(LIB_SO) $(B)/libstrixpeer.a $(B)/strixpeerctl $(B)/strixpeer.pc

module:
	@if [ -f "$(KDIR)/Makefile" ]; then \
		$(MAKE) -C "$(KDIR)" M="$(CURDIR)" modules; \
	else \
		echo "strixpeer: no kernel build directory at $(KDIR):"; \
		echo "  install linux-headers-$(KVER) or pass KDIR=<kernel build dir>; module not built"; \
	fi

module-clean:
	@if [ -f "$(KDIR)/Makefile" ]; then $(MAKE) -C "$(KDIR)" M="$(CURDIR)" clean; fi

$(B) $(B)/tests $(B)/lib:
	mkdir -p $@

$(B)/lib/%.o: user/lib/%.c $(LIB_HDR) | $(B)/lib
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -DSP_SYMVER -fPIC -c -o $@ $<

$(LIB_SO): $(LIB_OBJ) user/lib/libstrixpeer.map
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) \
		-Wl,--version-script=user/lib/libstrixpeer.map -o $@ $(LIB_OBJ) $(NL_LIBS) \
		-libverbs -lrdmacm -lm
	ln -sf $(SONAME).0.0 $(B)/$(SONAME)
	ln -sf $(SONAME).0.0 $(B)/libstrixpeer.so

$(B)/libstrixpeer.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(B)/strixpeerctl: $(CLI_SRC) $(CLI_HDR) $(LIB_HDR) $(LIB_SO)
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(LDFLAGS) -o $@ $(CLI_SRC) -L$(B) -lstrixpeer \
		$(CLI_RPATH)

$(B)/strixpeer.pc: user/lib/strixpeer.pc.in VERSION | $(B)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' $< > $@

# Test programs link the static library, so they run anywhere (VM included).
$(B)/tests/%: tests/%.c $(TEST_HDR) $(LIB_HDR) $(B)/libstrixpeer.a | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -Itests -o $@ $< $(B)/libstrixpeer.a \
		-libverbs -lrdmacm -lm $(NL_LIBS) -lpthread

# Library and test compiled together with AddressSanitizer and UBSan.
$(B)/asan/%: tests/%.c $(TEST_HDR) $(LIB_HDR) $(LIB_SRC)
	@mkdir -p $(B)/asan
	$(CC) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
		-fno-sanitize-recover=all $(SP_CFLAGS) $(NL_CFLAGS) -U_FORTIFY_SOURCE \
		-Itests -o $@ $< $(LIB_SRC) -libverbs -lrdmacm -lm $(NL_LIBS) -lpthread

deps:
	./scripts/install-deps.sh

check: deps
	./tests/run-all.sh

demo: deps
	./tests/vm/demo.sh

bench: deps user
	./tests/vm/bench.sh

install: user install-lib

install-lib: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/sbin \
		$(DESTDIR)$(PREFIX)/share/man/man3 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(LIB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SONAME).0.0 $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME).0.0 $(DESTDIR)$(LIBDIR)/libstrixpeer.so
	install -m 0644 $(B)/libstrixpeer.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(B)/strixpeer.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 0644 include/strixpeer.h $(DESTDIR)$(PREFIX)/include/
	install -m 0755 $(B)/strixpeerctl $(DESTDIR)$(PREFIX)/sbin/
	install -m 0644 docs/man/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	install -m 0644 docs/man/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -D -m 0644 user/cli/strixpeerctl.bash-completion \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/strixpeerctl

# DKMS from a checkout: the same sources and dkms.conf the strixpeer-dkms
# package installs, in /usr/src/strixpeer-$(VERSION)/.
DKMS_SRC := /usr/src/strixpeer-$(VERSION)
DKMS_FILES := Kbuild VERSION $(wildcard kmod/*.c kmod/*.h) kmod/conftest.sh \
	include/uapi/strixpeer.h

dkms-install:
	@command -v dkms >/dev/null || { echo "dkms not found (apt install dkms)"; exit 1; }
	-dkms remove strixpeer/$(VERSION) --all >/dev/null 2>&1
	rm -rf $(DKMS_SRC)
	install -d $(DKMS_SRC)
	tar -cf - $(filter-out kmod/conftest.h,$(DKMS_FILES)) | tar -xf - -C $(DKMS_SRC)
	sed 's/#MODULE_VERSION#/$(VERSION)/' dkms.conf > $(DKMS_SRC)/dkms.conf
	dkms add strixpeer/$(VERSION)
	dkms install strixpeer/$(VERSION) -k $(KVER)

dkms-remove:
	@command -v dkms >/dev/null || { echo "dkms not found"; exit 1; }
	if dkms status strixpeer/$(VERSION) | grep -q .; then \
		dkms remove strixpeer/$(VERSION) --all; fi
	rm -rf $(DKMS_SRC)

# Binary packages built from a clean copy of the tree (tracked files plus
# untracked ones that are not ignored), so build/ never leaks into them.
deb:
	rm -rf $(B)/deb
	mkdir -p $(B)/deb/strixpeer-$(VERSION)
	if [ -d .git ] || [ -f .git ]; then \
		git ls-files -z --cached --others --exclude-standard | \
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null | \
		tar -xf - -C $(B)/deb/strixpeer-$(VERSION); \
	else \
		tar --exclude=./build --exclude='*.o' --exclude='*.ko' --exclude=kmod/conftest.h \
			-cf - . | tar -xf - -C $(B)/deb/strixpeer-$(VERSION); \
	fi
	cd $(B)/deb/strixpeer-$(VERSION) && dpkg-buildpackage -b -us -uc \
		> ../build.log 2>&1 || { tail -n 30 ../build.log; exit 1; }
	@ls $(B)/deb/*.deb

clean: module-clean
	rm -rf $(B)
