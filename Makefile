# SPDX-License-Identifier: GPL-2.0
#
# strixpeer top-level Makefile.
#
#   make              module (if kernel headers are found), library, CLI, tests
#   make module       strixpeer.ko against KDIR (default: the running kernel)
#   make user         libstrixpeer, strixpeerctl and the test programs
#   make demo         boot a VM, RDMA-write into a strixpeer buffer, show it
#   make check        the whole test suite (host checks + one VM per kernel)
#   make deps         install the Debian/Ubuntu packages the above need
#   make install      install library, header, pkg-config file, CLI, man pages

VERSION := $(shell cat VERSION)
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build

B := build
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
DESTDIR ?=

CC ?= cc
CFLAGS ?= -O2 -g
SP_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 \
	-Wmissing-prototypes -Wstrict-prototypes -Iinclude \
	-DSP_LIB_VERSION='"$(VERSION)"' -D_FORTIFY_SOURCE=2
SONAME := libstrixpeer.so.1
LIB_SO := $(B)/$(SONAME).0.0

NL_CFLAGS := $(shell pkg-config --cflags libnl-genl-3.0 2>/dev/null || echo -I/usr/include/libnl3)
NL_LIBS := $(shell pkg-config --libs libnl-genl-3.0 2>/dev/null || echo -lnl-genl-3 -lnl-3)

LIB_SRC := user/lib/libstrixpeer.c user/lib/ctl.c
LIB_OBJ := $(patsubst user/lib/%.c,$(B)/lib/%.o,$(LIB_SRC))
LIB_HDR := include/strixpeer.h include/uapi/strixpeer.h user/lib/internal.h
CLI_SRC := user/cli/strixpeerctl.c user/cli/print.c
CLI_HDR := user/cli/print.h
TEST_SRC := $(wildcard tests/*.c)
TEST_BIN := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TEST_HDR := $(wildcard tests/*.h)

.PHONY: all user module module-clean deps check demo install clean

all: module user

# The sanitizer build of the test programs that need no verbs device.
ASAN_TESTS := abi lifetime limits netlink
ASAN_BIN := $(patsubst %,$(B)/asan/%,$(ASAN_TESTS))

user: $(LIB_SO) $(B)/libstrixpeer.a $(B)/strixpeerctl $(B)/strixpeer.pc $(TEST_BIN) \
	$(ASAN_BIN)

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
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -fPIC -c -o $@ $<

$(LIB_SO): $(LIB_OBJ) user/lib/libstrixpeer.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) \
		-Wl,--version-script=user/lib/libstrixpeer.map -o $@ $(LIB_OBJ) $(NL_LIBS)
	ln -sf $(SONAME).0.0 $(B)/$(SONAME)
	ln -sf $(SONAME).0.0 $(B)/libstrixpeer.so

$(B)/libstrixpeer.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(B)/strixpeerctl: $(CLI_SRC) $(CLI_HDR) $(LIB_HDR) $(LIB_SO)
	$(CC) $(CFLAGS) $(SP_CFLAGS) -o $@ $(CLI_SRC) -L$(B) -lstrixpeer \
		-Wl,-rpath,'$$ORIGIN'

$(B)/strixpeer.pc: user/lib/strixpeer.pc.in VERSION | $(B)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' $< > $@

# Test programs link the static library, so they run anywhere (VM included).
$(B)/tests/%: tests/%.c $(TEST_HDR) $(LIB_HDR) $(B)/libstrixpeer.a | $(B)/tests
	$(CC) $(CFLAGS) $(SP_CFLAGS) $(NL_CFLAGS) -Itests -o $@ $< $(B)/libstrixpeer.a \
		$(if $(filter rdma_%,$*),-libverbs) $(NL_LIBS) -lpthread

# Library and test compiled together with AddressSanitizer and UBSan.
$(B)/asan/%: tests/%.c $(TEST_HDR) $(LIB_HDR) $(LIB_SRC)
	@mkdir -p $(B)/asan
	$(CC) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
		-fno-sanitize-recover=all $(SP_CFLAGS) $(NL_CFLAGS) -U_FORTIFY_SOURCE \
		-Itests -o $@ $< $(LIB_SRC) $(NL_LIBS) -lpthread

deps:
	./scripts/install-deps.sh

check: deps
	./tests/run-all.sh

demo: deps
	./tests/vm/demo.sh

install: user
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

clean: module-clean
	rm -rf $(B)
