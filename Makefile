# Kiln: `make demo` and `make test` work on a fresh Debian/Ubuntu machine with Rust installed;
# each installs the system packages it needs (scripts/ensure-deps.sh).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
# One release build serves the tests, the CLI, libkiln, the Python module and the NIF.
PROFILE ?= release
KILN := target/$(PROFILE)/kiln
# Tools built or downloaded at pinned versions (wasm-bindgen-cli, TypeScript, binaryen, Julia)
# live outside the clone, one folder per version, where a CI runner keeps its cache: a fresh
# clone reuses them, a version bump makes a new folder. cbindgen goes to ~/.cargo/bin (cargo's).
KILN_TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kiln
export KILN_TOOLS_CACHE

.PHONY: all demo test deps rust-test cli conformance clean-venvs

all: cli

deps:
	@scripts/ensure-deps.sh vulkan

cli: deps
	$(CARGO) build --release -p kiln-cli

demo: cli
	$(KILN) demo

rust-test: deps
	$(CARGO) test --release -p kiln-core -p kiln-cli

# Each binding adds its own targets in mk/*.mk (TEST_TARGETS += ...); `test` runs every suite.
TEST_TARGETS :=
-include mk/*.mk

# The suites run one after another through scripts/suite-times.sh, which ends the log with a
# table of each suite's wall-clock time (where CI's minutes go), also when one fails.
test:
	@MAKE="$(MAKE)" scripts/suite-times.sh rust-test $(TEST_TARGETS)
	@echo "make test: all suites passed"
