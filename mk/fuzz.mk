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
