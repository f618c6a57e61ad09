# The C ABI (ffi-c/, include/kiln.h), its C tests (tests/c/) and the Julia package (julia/).
# Included by the top-level Makefile.
#
#   make c-lib             build target/release/libkiln.{so,a}
#   make c-rust-test       unit tests of the FFI boundary (cargo test -p kiln-ffi)
#   make c-header          regenerate include/kiln.h with cbindgen
#   make c-header-check    fail when the committed include/kiln.h differs from a fresh one, or
#                          declares a name without the Kiln/kiln_/KILN_ prefix
#   make c-compile-check   kiln.h as C11 and as C++17 with -Wall -Wextra -Werror (-pedantic)
#   make c-test            install into build/c/prefix, build tests/c against it with
#                          pkg-config, run them, then run them again under valgrind memcheck
#                          (test_hostile: issue 19's hostile-input suite; `build/c/bin/test_hostile
#                          NAME` runs one of its tests)
#   make julia-check       every @ccall in julia/src against include/kiln.h (static)
#   (make julia-test is in mk/julia.mk)
#   make install PREFIX=…  lib/libkiln.{so,a}, include/kiln.h, lib/pkgconfig/kiln.pc

CC ?= cc
CXX ?= c++
PYTHON ?= python3
PREFIX ?= /usr/local
DESTDIR ?=
CBINDGEN_VERSION ?= 0.29.4
CBINDGEN ?= $(shell command -v cbindgen 2>/dev/null || echo $(or $(CARGO_HOME),$(HOME)/.cargo)/bin/cbindgen)
C_BUILD := build/c
C_PREFIX := $(abspath $(C_BUILD)/prefix)
KILN_LIBDIR := target/$(PROFILE)
C_WARN := -Wall -Wextra -Werror -pedantic
# C only (GCC 14's default; g++ refuses the flag): a tensor array passed without a cast.
C_ONLY_WARN := -Werror=incompatible-pointer-types
C_TESTS := test_kiln test_threads test_hostile test_session test_session_many test_metrics test_dispatch_types test_two_devices example
VALGRIND_FLAGS := --error-exitcode=99 --leak-check=full --show-leak-kinds=definite \
	--errors-for-leak-kinds=definite --undef-value-errors=no --num-callers=30 \
	--suppressions=tests/c/valgrind.supp --gen-suppressions=all
# Libraries a static libkiln.a needs (from `rustc --print native-static-libs`).
KILN_STATIC_LIBS := -ldl -lgcc_s -lutil -lrt -lpthread -lm -lc

.PHONY: c-rust-test c-lib c-header c-header-check c-compile-check c-test c-test-run c-valgrind \
	julia-check install cbindgen-tool

TEST_TARGETS += c-header-check c-compile-check c-rust-test c-test julia-check

c-lib:
	$(CARGO) build --release -p kiln-ffi

# The boundary's own unit tests (panic -> KILN_ERR_PANIC, per-thread messages, pointer checks).
c-rust-test:
	$(CARGO) test --release -p kiln-ffi --lib

# cbindgen is installed with cargo when missing (crates.io must be reachable then).
cbindgen-tool:
	@if ! [ -x "$(CBINDGEN)" ] || ! "$(CBINDGEN)" --version | grep -q "$(CBINDGEN_VERSION)"; then \
		echo "installing cbindgen $(CBINDGEN_VERSION)"; \
		$(CARGO) install cbindgen --locked --version $(CBINDGEN_VERSION); \
	fi

c-header: cbindgen-tool
	"$(CBINDGEN)" --quiet --config ffi-c/cbindgen.toml --crate kiln-ffi --output include/kiln.h ffi-c

c-header-check: cbindgen-tool
	@mkdir -p $(C_BUILD)
	"$(CBINDGEN)" --quiet --config ffi-c/cbindgen.toml --crate kiln-ffi --output $(C_BUILD)/kiln.h.fresh ffi-c
	@if ! diff -u include/kiln.h $(C_BUILD)/kiln.h.fresh; then \
		echo "c-header-check: include/kiln.h is out of date: run 'make c-header' and commit it" >&2; exit 1; \
	fi
	@echo "c-header-check: include/kiln.h is up to date"
	@$(PYTHON) scripts/check_header_names.py include/kiln.h

c-compile-check:
	@mkdir -p $(C_BUILD)
	$(CC) -std=c11 $(C_WARN) $(C_ONLY_WARN) -Iinclude -c tests/c/header_check.c -o $(C_BUILD)/header_check_c.o
	$(CXX) -std=c++17 $(C_WARN) -Iinclude -c tests/c/header_check.cpp -o $(C_BUILD)/header_check_cpp.o
	@# kiln_kernel_dispatch's tensor-array macro still refuses a non-array (it must not compile).
	@if $(CC) -std=c11 $(C_WARN) $(C_ONLY_WARN) -Iinclude -c tests/c/dispatch_type_error.c -o $(C_BUILD)/dispatch_type_error.o 2>/dev/null; then \
		echo "c-compile-check: tests/c/dispatch_type_error.c compiled: kiln_kernel_dispatch accepts a single tensor" >&2; exit 1; fi
	@echo "c-compile-check: kiln.h compiles cleanly as C11 and C++17"

# Installs into a private prefix, then builds the tests the way a user would:
# `cc app.c $(pkg-config --cflags --libs kiln)`.
c-test: deps
	@scripts/ensure-deps.sh valgrind pkgconfig
	$(MAKE) --no-print-directory install PREFIX=$(C_PREFIX) DESTDIR=
	@mkdir -p $(C_BUILD)/bin
	@for t in $(C_TESTS); do \
		echo "cc tests/c/$$t.c"; \
		PKG_CONFIG_PATH=$(C_PREFIX)/lib/pkgconfig $(CC) -std=c11 $(C_WARN) $(C_ONLY_WARN) -O1 -g tests/c/$$t.c \
			-o $(C_BUILD)/bin/$$t $$(PKG_CONFIG_PATH=$(C_PREFIX)/lib/pkgconfig pkg-config --cflags --libs kiln) \
			-lm -lpthread; \
	done
	$(CC) -std=c11 $(C_WARN) $(C_ONLY_WARN) -O1 tests/c/example.c -o $(C_BUILD)/bin/example_static \
		-I$(C_PREFIX)/include $(C_PREFIX)/lib/libkiln.a $(KILN_STATIC_LIBS)
	$(MAKE) --no-print-directory c-test-run c-valgrind

# Each test's exit status counts (a failing test in the middle used to be masked by the
# loop's last one).
c-test-run:
	@for t in $(C_TESTS) example_static; do \
		echo "== $$t"; env -u LD_LIBRARY_PATH $(C_BUILD)/bin/$$t || { echo "c-test: $$t failed (exit status $$?)" >&2; exit 1; }; \
	done
	@echo "c-test: all C tests passed"

# Memcheck: invalid reads/writes anywhere and definite leaks fail the run; the suppressions
# cover only the Vulkan loader, the driver (Mesa lavapipe) and LLVM.
c-valgrind:
	@for t in example test_kiln test_hostile test_session test_session_many; do \
		echo "== valgrind $$t"; \
		KILN_TEST_QUICK=1 valgrind $(VALGRIND_FLAGS) --log-file=$(C_BUILD)/valgrind-$$t.log $(C_BUILD)/bin/$$t \
			|| { echo "valgrind: errors in $$t (see $(C_BUILD)/valgrind-$$t.log)" >&2; \
			     grep -E "Invalid|definitely|ERROR SUMMARY" $(C_BUILD)/valgrind-$$t.log | head -20 >&2; exit 1; }; \
		grep -E "ERROR SUMMARY|definitely lost" $(C_BUILD)/valgrind-$$t.log; \
	done
	@echo "c-valgrind: no invalid accesses, no definite leaks"

install: c-lib
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 644 include/kiln.h $(DESTDIR)$(PREFIX)/include/kiln.h
	install -m 755 $(KILN_LIBDIR)/libkiln.so $(DESTDIR)$(PREFIX)/lib/libkiln.so
	install -m 644 $(KILN_LIBDIR)/libkiln.a $(DESTDIR)$(PREFIX)/lib/libkiln.a
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)|g' \
		-e 's|@STATIC_LIBS@|$(KILN_STATIC_LIBS)|g' ffi-c/kiln.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kiln.pc
	@echo "installed libkiln, kiln.h and kiln.pc under $(DESTDIR)$(PREFIX)"

julia-check:
	$(PYTHON) scripts/check_julia_ccalls.py --header include/kiln.h julia/src
