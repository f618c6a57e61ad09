# Elixir binding (nif-elixir/): included by the top-level Makefile.
#   make elixir-deps   Erlang/OTP from apt when missing, then Kiln's pinned Elixir (1.18.4, built
#                      once into $(KILN_TOOLS_CACHE) by scripts/mix: Nx 0.11 needs Elixir 1.17+)
#   make elixir-nif    build the Rustler NIF (cargo, release) into nif-elixir/priv/kiln_nif.so
#   make elixir-test   run the ExUnit suite (MIX_ENV=test) with that toolchain
#   make nx-suite      Nx 0.11's own tests and doctests with Kiln.Backend as the default backend:
#                      passed / failed / excluded counts and the pass rate (nif-elixir/nx-suite/)
# Nx comes from the vendored upstream sources (offline, the default) or, with KILN_NX=hex, from
# hex.pm by version (`mix deps.get` first): see scripts/mix.

ELIXIR_DIR      ?= nif-elixir
CARGO           ?= cargo
CARGO_TARGET_DIR ?= $(CURDIR)/target
ELIXIR_NIF_SRC  := $(CARGO_TARGET_DIR)/release/libkiln_nif.so
ELIXIR_NIF      := $(ELIXIR_DIR)/priv/kiln_nif.so
# Every mix call goes through the wrapper (the pinned toolchain, its own MIX_HOME).
MIX             := $(CURDIR)/scripts/mix
export MIX

.PHONY: elixir-deps elixir-nif elixir-test nx-suite

elixir-deps:
	@scripts/ensure-deps.sh elixir
	@echo "elixir: $$($(MIX) --version 2>/dev/null | tail -n 1)"
	@if [ "$${KILN_NX:-vendor}" = hex ]; then cd $(ELIXIR_DIR) && $(MIX) deps.get; fi

elixir-nif:
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) $(CARGO) build -p kiln-nif --release
	@mkdir -p $(ELIXIR_DIR)/priv
	cp $(ELIXIR_NIF_SRC) $(ELIXIR_NIF).tmp && mv -f $(ELIXIR_NIF).tmp $(ELIXIR_NIF)

# The mix compile step (Mix.Tasks.Compile.KilnNif) would run cargo again; the library is fresh
# from elixir-nif, so it only copies.
elixir-test: elixir-deps elixir-nif
	cd $(ELIXIR_DIR) && MIX_ENV=test KILN_NIF_SKIP_CARGO=1 CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) $(MIX) test
TEST_TARGETS += elixir-test

# Nx's test/ folder, unmodified, from the vendored sources (Nx's hex package has no tests, so with
# KILN_NX=hex this is skipped, saying so), copied into build/nx-suite with the runner's mix.exs
# (nif-elixir/nx-suite/: run.exs, the exclusion list and the counting formatter stay in the tree).
# NX_SUITE_FILES=test/nx/lin_alg_test.exs runs only the files named; NX_SUITE_ARGS=--reference runs
# them on Nx.BinaryBackend (what fails there is not about Kiln).
# 49-57 s on lavapipe with build/nx-suite warm (Nx's tests compile in ~20 s of it), 78 s on a
# fresh one (Nx and its deps compile too); fails below the 90% floor (KilnNxSuite.Formatter).
NX_SUITE_DIR := build/nx-suite
nx-suite: elixir-deps elixir-nif
	@if [ "$${KILN_NX:-vendor}" != vendor ]; then \
	  echo "nx-suite: skipped: KILN_NX=$${KILN_NX} (Nx's tests come from its vendored sources: KILN_NX=vendor)"; \
	  exit 0; fi; \
	eval "$$($(MIX) --env)"; \
	mkdir -p $(NX_SUITE_DIR) && rm -rf $(NX_SUITE_DIR)/test; \
	cp -r "$$KILN_NX_VENDOR/nx-0.11.0/test" $(NX_SUITE_DIR)/test; \
	cp $(ELIXIR_DIR)/nx-suite/mix.exs $(NX_SUITE_DIR)/mix.exs; \
	cd $(NX_SUITE_DIR) && MIX_ENV=test KILN_NIF_SKIP_CARGO=1 CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) \
	  $(MIX) run $(CURDIR)/$(ELIXIR_DIR)/nx-suite/run.exs $(NX_SUITE_ARGS) $(NX_SUITE_FILES)
TEST_TARGETS += nx-suite
