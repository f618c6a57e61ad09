# Lint gates: included by the top-level Makefile; `.ci/run` runs `make lint` before `make test`.
#   make lint         every gate below
#   make lint-rust    rustfmt (rustfmt.toml) and clippy with warnings as errors, on the workspace
#   make lint-elixir  mix format --check-formatted in nif-elixir/
#   make lint-python  ruff (ruff.toml) on py/, tests/, bench/ and scripts/
#   make lint-cycles  no import cycle among core's modules (scripts/core-cycles.py; three slipped
#                     in while it was only a script)
#   make lint-env     every KILN_* variable the code reads has a README settings row
#                     (scripts/check_env_knobs.py; eleven had none)
# Generated files are checked by gen-check instead (the Rust ones carry #[rustfmt::skip]).

RUFF_VERSION ?= 0.17.6

.PHONY: lint lint-rust lint-elixir lint-python lint-cycles lint-env

lint: lint-rust lint-elixir lint-python lint-cycles lint-env

lint-cycles:
	python3 scripts/core-cycles.py

lint-env:
	python3 scripts/check_env_knobs.py

lint-rust: deps
	@command -v rustup >/dev/null && { rustup component list --installed | grep -q '^clippy' && \
		rustup component list --installed | grep -q '^rustfmt' || rustup component add clippy rustfmt; } || true
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

lint-elixir:
	@scripts/ensure-deps.sh elixir
	cd nif-elixir && mix format --check-formatted

lint-python: py-venv
	@$(PY_PYTHON) -m ruff --version 2>/dev/null | grep -q "$(RUFF_VERSION)" || $(PY_PYTHON) -m pip install -q "ruff==$(RUFF_VERSION)"
	$(PY_PYTHON) -m ruff check py tests bench scripts
