# Surfaces generated from kiln-core's tables (gen/, the `kiln-gen` developer tool, not shipped):
# the op table with its typed arguments (core/src/ops/table.rs + the unary/binary lines of
# core/src/ops/elementwise/table.rs), the error table (core/src/error.rs) and the dtype table
# (core/src/dtype.rs). Included by the top-level Makefile.
#   make gen        write them into the repository (whole files, and the marked regions of
#                   hand-written files), then regenerate include/kiln.h (make c-header)
#   make gen-check  write them under build/gen and fail, naming each file, where a committed one
#                   differs from a fresh one (part of `make test`); kiln-gen's own tests first
#                   (among them: a restatement of the session limits that lacks a field fails)
# Both also check the bindings' restatements of the session limits against kiln-core
# (gen/src/mirrors.rs), naming the file that lacks a field.

GEN_OUT := build/gen
KILN_GEN := target/$(PROFILE)/kiln-gen

.PHONY: gen gen-check gen-tool

gen-tool:
	$(CARGO) build --release -p kiln-gen

gen: gen-tool
	$(KILN_GEN)
	$(MAKE) --no-print-directory c-header

gen-check: gen-tool
	$(CARGO) test --release -p kiln-gen
	@rm -rf $(GEN_OUT) && mkdir -p $(GEN_OUT)
	$(KILN_GEN) --out $(GEN_OUT)
	@fail=0; for f in $$($(KILN_GEN) --list); do \
		if ! diff -u "$$f" "$(GEN_OUT)/$$f" >&2; then \
			echo "gen-check: $$f differs from a fresh 'kiln-gen': run 'make gen' and commit it" >&2; fail=1; \
		fi; \
	done; \
	if [ $$fail = 0 ]; then echo "gen-check: every generated file is up to date"; fi; exit $$fail

TEST_TARGETS += gen-check
