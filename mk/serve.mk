# kiln serve (serve/, docs/DESIGN.md "kiln serve"): included by the top-level Makefile.
#   make serve-test   kiln-serve's tests on lavapipe: every endpoint against the CPU reference,
#                     bad input, tenant isolation, quotas, an infinite loop, metrics, graceful
#                     shutdown, and a 10 s load test (both phases, with its bound)
#   make serve-load   the load test for SERVE_LOAD_SECONDS (default 60) through `kiln serve-load`
#                     (SERVE_LOAD_CLIENTS well-behaved clients, default 8): throughput, p50/p99,
#                     errors, lost; then with a flooding tenant and an infinite-loop kernel
#   make serve-replicas  three `kiln serve` replicas behind HAProxy (deploy/haproxy/haproxy.cfg,
#                     Debian's haproxy, installed if missing): a load test across them, one
#                     replica killed mid-run (scripts/serve-replicas.py says what is checked)
#   make serve-fuzz   the cargo-fuzz target of the request parsers (serve/fuzz, nightly) for
#                     FUZZ_SECONDS (default 60 here); prints executions and findings

SERVE_LOAD_SECONDS ?= 60
SERVE_LOAD_CLIENTS ?= 8
# FUZZ_SECONDS from the command line or the environment wins; mk/fuzz.mk's default does not.
SERVE_FUZZ_SECONDS := $(if $(filter command line environment,$(origin FUZZ_SECONDS)),$(FUZZ_SECONDS),60)

.PHONY: serve-test serve-load serve-fuzz serve-replicas

# Release, like every other suite: one build of wgpu serves them all (a debug build is a second
# one, minutes on CI). The by-name dispatcher's conformance tests run in rust-test.
serve-test: deps
	$(CARGO) test --release -p kiln-serve

serve-load: cli
	$(KILN) serve-load --seconds $(SERVE_LOAD_SECONDS) --clients $(SERVE_LOAD_CLIENTS)

serve-replicas: cli
	@scripts/ensure-deps.sh haproxy
	python3 scripts/serve-replicas.py --kiln $(KILN)

# -s none: no sanitizer (kiln-core's wgpu stack under ASan builds for many minutes on 2 cores;
# the target hunts panics, which need none). Findings land in serve/fuzz/artifacts/request/.
serve-fuzz:
	cd serve/fuzz && cargo +nightly fuzz build -s none request
	cd serve/fuzz && mkdir -p corpus/request && cargo +nightly fuzz run -s none request corpus/request -- \
		-max_total_time=$(SERVE_FUZZ_SECONDS) -max_len=4096 2>&1 | tee /tmp/kiln-serve-fuzz.log | grep -E "^#|Done|crash|panick|ERROR" | tail -5
	@findings=$$(ls serve/fuzz/artifacts/request 2>/dev/null | wc -l); \
		execs=$$(grep -oE "Done [0-9]+ runs" /tmp/kiln-serve-fuzz.log | grep -oE "[0-9]+"); \
		echo "serve-fuzz: $${execs:-?} executions in $(SERVE_FUZZ_SECONDS) s, $$findings findings (serve/fuzz/artifacts/request)"; \
		test "$$findings" = 0

TEST_TARGETS += serve-test
