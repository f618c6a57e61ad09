# Elixir binding (nif-elixir/): included by the top-level Makefile.
#   make elixir-deps   install Elixir/Erlang from apt when `mix` or `elixir` is missing
#   make elixir-nif    build the Rustler NIF (cargo, release) into nif-elixir/priv/kiln_nif.so
#   make elixir-test   run the ExUnit suite (MIX_ENV=test, offline: no hex packages)

ELIXIR_DIR      ?= nif-elixir
CARGO           ?= cargo
CARGO_TARGET_DIR ?= $(CURDIR)/target
ELIXIR_NIF_SRC  := $(CARGO_TARGET_DIR)/release/libkiln_nif.so
ELIXIR_NIF      := $(ELIXIR_DIR)/priv/kiln_nif.so

.PHONY: elixir-deps elixir-nif elixir-test

elixir-deps:
	@scripts/ensure-deps.sh elixir
	@echo "elixir: $$(elixir --version 2>/dev/null | tail -n 1)"

elixir-nif:
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) $(CARGO) build -p kiln-nif --release
	@mkdir -p $(ELIXIR_DIR)/priv
	cp $(ELIXIR_NIF_SRC) $(ELIXIR_NIF).tmp && mv -f $(ELIXIR_NIF).tmp $(ELIXIR_NIF)

# The mix compile step (Mix.Tasks.Compile.KilnNif) would run cargo again; the library is fresh
# from elixir-nif, so it only copies. MIX_ENV=test, no hex: the project has no dependencies.
elixir-test: elixir-deps elixir-nif
	cd $(ELIXIR_DIR) && MIX_ENV=test KILN_NIF_SKIP_CARGO=1 CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) mix test
TEST_TARGETS += elixir-test
