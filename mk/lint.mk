# Lint gates: included by the top-level Makefile; `.ci/run` runs `make lint` before `make test`.
#   make lint         every gate below
#   make lint-rust    rustfmt (rustfmt.toml) and clippy with warnings as errors, on the workspace
#   make lint-elixir  mix format --check-formatted in nif-elixir/
#   make lint-python  ruff (ruff.toml) on py/, tests/, bench/ and scripts/
#   make lint-cycles  no import cycle among core's modules (scripts/core-cycles.py; three slipped
#                     in while it was only a script)
#   make lint-env     every KILN_* variable the code reads has a README settings row
#                     (scripts/check_env_knobs.py; eleven had none)
#   make lint-hakari  workspace-hack/ is what `cargo hakari generate` makes of today's
#                     dependencies (skipped with a message where cargo-hakari is not installed:
#                     `cargo install cargo-hakari --locked`, ~7 min, is not worth a CI run)
#   make lint-binding-lines  the hand-written binding code against issue 33's table
#                     (scripts/binding-lines.py, under a second; fails when a counted file moved)
# Generated files are checked by gen-check instead (the Rust ones carry #[rustfmt::skip]).

RUFF_VERSION ?= 0.17.6

.PHONY: lint lint-rust lint-elixir lint-python lint-cycles lint-env lint-hakari lint-binding-lines

lint: lint-rust lint-elixir lint-python lint-cycles lint-env lint-hakari lint-k8s lint-binding-lines

lint-binding-lines:
	python3 scripts/binding-lines.py

# deploy/k8s against the Kubernetes schemas (PyPI's kubernetes-validate, which ships them; a venv
# per version in the tools cache: ~20 s the first time, under 2 s after), strict: an unknown
# field is an error. HAProxy's file is checked by `make serve-replicas`, which runs it.
KUBERNETES_VALIDATE_VERSION := 1.37.0
KUBERNETES_VALIDATE := $(KILN_TOOLS_CACHE)/kubernetes-validate-$(KUBERNETES_VALIDATE_VERSION)
lint-k8s:
	@scripts/ensure-deps.sh venv
	@test -x $(KUBERNETES_VALIDATE)/bin/kubernetes-validate || { python3 -m venv $(KUBERNETES_VALIDATE) && \
		$(KUBERNETES_VALIDATE)/bin/pip install -q "kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION)"; }
	$(KUBERNETES_VALIDATE)/bin/kubernetes-validate --strict --quiet deploy/k8s/*.yaml
	@echo "lint-k8s: deploy/k8s/*.yaml valid against Kubernetes $(KUBERNETES_VALIDATE_VERSION)'s schemas"

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
	cd nif-elixir && $(CURDIR)/scripts/mix format --check-formatted

lint-python: py-venv
	@$(PY_PYTHON) -m ruff --version 2>/dev/null | grep -q "$(RUFF_VERSION)" || $(PY_PYTHON) -m pip install -q "ruff==$(RUFF_VERSION)"
	$(PY_PYTHON) -m ruff check py tests bench scripts

# Without the workspace-hack's feature pins, each `cargo -p X` selection rebuilt wgpu, naga and
# kiln-core with its own feature set (c-rust-test alone: 173 s on the 2-core CI machine).
lint-hakari:
	@if $(CARGO) hakari --version >/dev/null 2>&1; then \
		$(CARGO) hakari generate --diff && echo "lint-hakari: workspace-hack/ is up to date"; \
	else echo "lint-hakari: skipped: cargo-hakari is not installed"; fi
