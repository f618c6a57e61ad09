# Cross-language conformance (tests/conformance/): included by the top-level Makefile.
#   make conformance              generate the vectors (numpy in the py venv, fixed seed), run the
#                                 Rust, C, Python, Elixir, Julia (scripts/julia, installed on
#                                 first use) and JavaScript (kiln.js in headless Chromium, mk/web.mk)
#                                 runners, each through its own binding, then compare.py: fails
#                                 unless every case passes everywhere with identical digests and
#                                 every binding exposes every op of kiln_core::ops::op_table()
#   make conformance-vectors      only the vectors (tests/conformance/out, git-ignored)
#   make conformance-break-check  show that a binding with two arguments swapped fails the suite,
#                                 naming the op and the language (the working tree is untouched)

CONF_DIR  := tests/conformance
CONF_OUT  := $(CONF_DIR)/out
CONF_RES  := $(CONF_OUT)/results
CONF_SEED ?= 20240611
CONF_PY   := .venv-py/bin/python
CONF_LIB  := $(abspath target/release)
CONF_CC   ?= $(CC)

.PHONY: conformance conformance-vectors conformance-runners conformance-break-check

conformance-vectors: py-venv
	$(CONF_PY) $(CONF_DIR)/gen.py --out $(CONF_OUT) --seed $(CONF_SEED)

# Each runner writes $(CONF_RES)/<language>.json; one that fails to build or crashes leaves no
# file, which compare.py reports (so the runners are allowed to fail here, compare.py is not).
conformance-runners: cli c-lib py-install elixir-deps elixir-nif julia web-pkg web-browser conformance-vectors
	rm -rf $(CONF_RES) && mkdir -p $(CONF_RES) build/conformance
	-$(KILN) conformance $(CONF_OUT)/manifest.json $(CONF_RES)/rust.json
	-$(CONF_CC) -std=c11 -Wall -Wextra -O2 -Iinclude $(CONF_DIR)/c_runner.c -o build/conformance/c_runner \
		-L$(CONF_LIB) -lkiln -Wl,-rpath,$(CONF_LIB) -lm -ldl \
		&& build/conformance/c_runner $(CONF_OUT)/manifest.txt $(CONF_RES)/c.json
	-$(CONF_PY) $(CONF_DIR)/py_runner.py $(CONF_OUT)/manifest.json $(CONF_RES)/python.json
	-cd nif-elixir && KILN_NIF_SKIP_CARGO=1 $(MIX) run ../$(CONF_DIR)/ex_runner.exs ../$(CONF_OUT)/manifest.txt ../$(CONF_RES)/elixir.json
	-KILN_LIB=$(CONF_LIB)/libkiln.so $(JULIA) --startup-file=no $(CONF_DIR)/jl_runner.jl $(CONF_OUT)/manifest.txt $(CONF_RES)/julia.json
	-scripts/web-test.py conformance $(CONF_RES)/javascript.json

conformance: conformance-runners
	$(CONF_PY) $(CONF_DIR)/compare.py --manifest $(CONF_OUT)/manifest.json --results $(CONF_RES) \
		--header include/kiln.h --julia-src julia/src

conformance-break-check: cli c-lib py-venv elixir-deps elixir-nif julia conformance-vectors
	PY=$(CONF_PY) CC=$(CONF_CC) JULIA=$(JULIA) $(CONF_DIR)/break_check.sh

TEST_TARGETS += conformance conformance-break-check
