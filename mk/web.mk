# The browser (web/: kiln-core on wasm32 + WebGPU, the kiln.js package): included by the
# top-level Makefile. Everything it needs is installed on first use, on a fresh Debian machine:
# the rustup target, wasm-bindgen-cli at the version web/Cargo.toml pins (built once, kept
# under $(KILN_TOOLS_CACHE)/tools/, outside the clone), chromium and chromium-driver from apt.
#   make web-check    kiln-core type-checks for wasm32-unknown-unknown
#   make web-pkg      builds the package: web/pkg/ (wasm-bindgen output, git-ignored) + web/js/
#   make web-test     the package's tests and the demo page in headless Chromium (SwiftShader),
#                     SmolLM2's greedy tokens in a page against llama.cpp's (110-145 s here);
#                     the demo's screenshot goes to build/web/demo.png, the models demo's
#                     (web/demo/models.html, the tiny decoder in its chat box) to build/web/models-demo.png
#   make web-models-reference  the native run of the models the page test loads (MiniLM, a tiny
#                     decoder), on lavapipe (Mesa's Vulkan ICD; SwiftShader's where there is none),
#                     another adapter than the page's SwiftShader: build/web/models-reference/
#   make web-types    web/js/kiln.d.ts through `tsc --noEmit --strict` with a typed usage file
#                     (web/types/); TypeScript at a pinned version, npm-installed once under
#                     $(KILN_TOOLS_CACHE)/tools/ (node and npm from the system: skipped with a message without)
#   make web-opt      wasm-opt -O on the package's wasm (binaryen at a pinned version from npm,
#                     kept under $(KILN_TOOLS_CACHE)/tools/; skipped with a message where npm is missing)
#   make web-serve    serves the repository on http://localhost:8000 (demo: /web/demo/)
#   make web-lint     rustfmt and clippy -D warnings on web/ and on kiln-core for wasm32 (part of
#                     make lint: web/ is a workspace of its own, which lint-rust does not see)
# The browser column of the conformance suite runs in `make conformance` (mk/conformance.mk).

WASM_TARGET := wasm32-unknown-unknown
WASM_BINDGEN_VERSION := 0.2.130
WASM_BINDGEN := $(KILN_TOOLS_CACHE)/tools/wasm-bindgen-$(WASM_BINDGEN_VERSION)/bin/wasm-bindgen
# web/ is a workspace of its own: its builds go to the repository's target/, or to
# $CARGO_TARGET_DIR where that is set (absolute), as the other crates' do.
WEB_TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
WEB_WASM := $(WEB_TARGET_DIR)/$(WASM_TARGET)/release/kiln_web.wasm

TSC_VERSION := 5.9.3
TSC := $(KILN_TOOLS_CACHE)/tools/typescript-$(TSC_VERSION)/node_modules/.bin/tsc
BINARYEN_VERSION := 123.0.0
WASM_OPT := $(KILN_TOOLS_CACHE)/tools/binaryen-$(BINARYEN_VERSION)/node_modules/.bin/wasm-opt

.PHONY: web-target web-browser web-check web-pkg web-test web-models-reference web-serve web-lint web-types web-opt

web-target:
	@rustup target list --installed 2>/dev/null | grep -qx '$(WASM_TARGET)' || rustup target add $(WASM_TARGET)

# Without --locked: the CLI's own lock pins a crate version the registry no longer serves.
# --debug: it builds in about half the time of a release build and runs on one ~2 MB module.
$(WASM_BINDGEN):
	$(CARGO) install --debug wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --root $(KILN_TOOLS_CACHE)/tools/wasm-bindgen-$(WASM_BINDGEN_VERSION)

$(TSC):
	npm install --silent --no-save --no-audit --no-fund --prefix $(KILN_TOOLS_CACHE)/tools/typescript-$(TSC_VERSION) typescript@$(TSC_VERSION)

web-types:
	@if ! command -v npm >/dev/null; then echo "web-types: skipped: no npm/node on the PATH"; else \
		$(MAKE) --no-print-directory $(TSC) && $(TSC) -p web/types/tsconfig.json && echo "web-types: kiln.d.ts passes tsc --strict ($(TSC_VERSION))"; fi

$(WASM_OPT):
	npm install --silent --no-save --no-audit --no-fund --prefix $(KILN_TOOLS_CACHE)/tools/binaryen-$(BINARYEN_VERSION) binaryen@$(BINARYEN_VERSION)

# After web-pkg: optimises web/pkg/kiln_web_bg.wasm in place (the tests then run the optimised one);
# web/pkg/.wasm-opt-done, newer than wasm-bindgen's output, says it already is.
web-opt: web-pkg
	@if [ web/pkg/.wasm-opt-done -nt web/pkg/kiln_web.js ]; then echo "web-opt: web/pkg/kiln_web_bg.wasm is already optimised"; \
	elif ! command -v npm >/dev/null; then echo "web-opt: skipped: no npm/node on the PATH (wasm left as built)"; else \
		$(MAKE) --no-print-directory $(WASM_OPT) && before=$$(stat -c %s web/pkg/kiln_web_bg.wasm) && \
		$(WASM_OPT) -O --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals \
			web/pkg/kiln_web_bg.wasm -o web/pkg/kiln_web_bg.opt.wasm && mv web/pkg/kiln_web_bg.opt.wasm web/pkg/kiln_web_bg.wasm && \
		touch web/pkg/.wasm-opt-done && \
		echo "web-opt: wasm-opt -O: $$before -> $$(stat -c %s web/pkg/kiln_web_bg.wasm) bytes"; fi

web-browser:
	@command -v chromedriver >/dev/null && command -v chromium >/dev/null || { \
		sudo=""; [ "$$(id -u)" -ne 0 ] && sudo=sudo; export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq chromium chromium-driver >/dev/null; }

web-check: web-target
	$(CARGO) check --target $(WASM_TARGET) -p kiln-core

# wasm-bindgen (and web-opt's wasm-opt after it, ~2 min here) run only when cargo wrote a new
# module: web/pkg/kiln_web.js, which only wasm-bindgen writes, is their stamp.
web-pkg: web-target $(WASM_BINDGEN)
	cd web && $(CARGO) build --release --target $(WASM_TARGET) --target-dir $(WEB_TARGET_DIR)
	@if [ web/pkg/kiln_web.js -nt $(WEB_WASM) ] && [ -f web/pkg/kiln_web_bg.wasm ]; then \
		echo "web-pkg: web/pkg is up to date with $(WEB_WASM)"; else \
		echo "$(WASM_BINDGEN) --target web --weak-refs --out-dir web/pkg $(WEB_WASM)"; \
		$(WASM_BINDGEN) --target web --weak-refs --out-dir web/pkg $(WEB_WASM) || exit 1; fi
	@echo "web-pkg: web/pkg/kiln_web_bg.wasm is $$(stat -c %s web/pkg/kiln_web_bg.wasm) bytes"

# Native on lavapipe, the page on Chromium's SwiftShader: two adapters that must give the same
# bits (every kernel fixes its arithmetic order: docs/DESIGN.md). lavapipe also runs it ~6x faster
# (12 s against 76 s here). Without a lavapipe ICD: SwiftShader's, which ships in the chromium
# package (searched for when the recipe runs: web-browser may just have installed it).
web-models-reference: web-browser minilm
	@icd=; for f in /usr/share/vulkan/icd.d/lvp_icd.$$(uname -m).json /usr/share/vulkan/icd.d/lvp_icd.json \
		/usr/lib/chromium/vk_swiftshader_icd.json /usr/lib/chromium-browser/vk_swiftshader_icd.json; do \
		[ -f "$$f" ] && icd=$$f && break; done; \
	[ -n "$$icd" ] || { echo "web-models-reference: neither lavapipe's nor SwiftShader's Vulkan ICD found"; exit 1; }; \
	echo "web-models-reference: native on $$icd"; \
	VK_DRIVER_FILES=$$icd KILN_WEB_REFERENCE_DIR=$(abspath build/web/models-reference) KILN_MINILM_DIR=$(abspath $(MINILM_DIR)) \
		$(CARGO) test --release -p kiln-models --test web_reference

web-test: web-opt web-browser web-types web-models-reference smollm2
	scripts/web-test.py unit nogpu models models-demo=build/web/models-demo.png smollm2 demo=build/web/demo.png

web-lint: web-target
	cd web && $(CARGO) fmt --check
	$(CARGO) clippy --target $(WASM_TARGET) -p kiln-core -- -D warnings
	cd web && $(CARGO) clippy --release --target $(WASM_TARGET) --target-dir $(WEB_TARGET_DIR) -- -D warnings

lint: web-lint

web-serve: web-pkg
	python3 -m http.server 8000 --bind 127.0.0.1

TEST_TARGETS += web-check web-test
