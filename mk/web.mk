# The browser (web/, kiln-core on wasm32 + WebGPU): included by the top-level Makefile.
#   make web-check   kiln-core type-checks for wasm32-unknown-unknown (installs the rustup target)

WASM_TARGET := wasm32-unknown-unknown

.PHONY: web-target web-check

web-target:
	@rustup target list --installed 2>/dev/null | grep -qx '$(WASM_TARGET)' || rustup target add $(WASM_TARGET)

web-check: web-target
	$(CARGO) check --target $(WASM_TARGET) -p kiln-core

TEST_TARGETS += web-check
