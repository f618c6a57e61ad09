# Hostile-input fuzzing (cli/src/fuzz.rs): included by the top-level Makefile.
#   make fuzz        both targets for FUZZ_SECONDS each (default 120) with FUZZ_SEED
#   make fuzz-quick  both targets for 20 s each: part of `make test`, so CI attacks every change
# A run fails on a crash, a hang past the timeout, a panic, an INTERNAL error, a result whose size
# disagrees with its shape, or a device that stops working; it prints how many attacks ran.

FUZZ_SECONDS ?= 120
FUZZ_SEED ?= $(shell date +%s)

.PHONY: fuzz fuzz-quick

fuzz: cli
	$(KILN) fuzz wgsl --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED)
	$(KILN) fuzz ops --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED)

# A fixed seed in CI: a failure there replays with the same command.
fuzz-quick: cli
	$(KILN) fuzz wgsl --seconds 20 --seed 1
	$(KILN) fuzz ops --seconds 20 --seed 1

TEST_TARGETS += fuzz-quick

# cargo-fuzz (libFuzzer, coverage-guided) over kiln-core's WGSL sandbox path: core/fuzz/.
#   make fuzz-cargo   build the targets with nightly, seed their corpus from the repository's
#                     kernels (core/fuzz/seed_corpus.py), run each for FUZZ_SECONDS (default 60
#                     here) and print executions, exec/s, coverage and findings (artifact paths)
# Targets: wgsl_sandbox mutates WGSL text (with a token dictionary); wgsl_loops builds kernels
# from the bytes (loops of every form, nested, in helpers), so every input reaches validation.
# Not part of `make test`: the instrumented build of kiln-core and wgpu takes ~20 min from a cold
# cache on the 2-core build machine. The corpus grows in core/fuzz/corpus/ between runs.
# FUZZ_SANITIZER=address adds ASan (the target runs naga, safe Rust: none is the default).
FUZZ_CARGO_TARGETS ?= wgsl_sandbox wgsl_loops
FUZZ_SANITIZER ?= none
FUZZ_CARGO_SECONDS = $(if $(filter command line environment environment override,$(origin FUZZ_SECONDS)),$(FUZZ_SECONDS),60)
FUZZ_CARGO = cargo +nightly fuzz
FUZZ_CARGO_FLAGS = --fuzz-dir core/fuzz -s $(FUZZ_SANITIZER)

.PHONY: fuzz-cargo fuzz-cargo-tool

fuzz-cargo-tool:
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked

fuzz-cargo: fuzz-cargo-tool
	@mkdir -p build/fuzz
	$(FUZZ_CARGO) build $(FUZZ_CARGO_FLAGS)
	@status=0; for t in $(FUZZ_CARGO_TARGETS); do \
		mkdir -p core/fuzz/corpus/$$t; \
		case $$t in \
			wgsl_loops) extra="-max_len=4096 -len_control=0";; \
			*) extra="-dict=$(CURDIR)/core/fuzz/wgsl.dict"; python3 core/fuzz/seed_corpus.py core/fuzz/corpus/$$t || exit 1;; \
		esac; \
		start=$$(date +%s); \
		echo "fuzz-cargo: $$t for $(FUZZ_CARGO_SECONDS) s (log: build/fuzz/$$t.log)"; \
		$(FUZZ_CARGO) run $(FUZZ_CARGO_FLAGS) $$t core/fuzz/corpus/$$t -- \
			-max_total_time=$(FUZZ_CARGO_SECONDS) -timeout=20 -print_final_stats=1 $$extra \
			> build/fuzz/$$t.log 2>&1; \
		python3 core/fuzz/summary.py $$t build/fuzz/$$t.log core/fuzz/artifacts/$$t $$start || status=1; \
	done; exit $$status
