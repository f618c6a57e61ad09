#!/usr/bin/env bash
# Prepares, on this machine, what the GPU machine needs to measure llama.cpp (CUDA and Vulkan)
# beside Kiln without any download there: a trimmed llama.cpp source (from the pinned
# llama-cpp-python sdist on PyPI), the gguf wheel, SmolLM2's metadata and tensor table (for
# random-weight copies of its exact shapes), and the Vulkan shader toolchain as Debian packages
# (glslc and headers; trixie's glslc knows cooperative matrices and integer dot products,
# bookworm's is the fallback where trixie's cannot run).
# Usage: bench/anchors/prepare.sh OUT [SMOLLM2.gguf]   (OUT: a git-ignored folder, carried)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
smol=${2:-$here/../../build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
SDIST=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-0.3.36.tar.gz
SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
curl -sfL -o "$t/src.tgz" "$SDIST"
echo "$SHA  $t/src.tgz" | sha256sum -c --quiet
python3 -m venv "$t/v" && "$t/v/bin/pip" install -q gguf==0.19.0 numpy
"$t/v/bin/python" "$here/dump_meta.py" "$smol" "$out/smol_meta.pkl"
"$t/v/bin/pip" download -q --no-deps -d "$out" gguf==0.19.0
mkdir -p "$t/src" && tar xzf "$t/src.tgz" -C "$t/src"
(cd "$t"/src/*/vendor/llama.cpp && touch LICENSE && mkdir -p app && : > app/CMakeLists.txt &&
  tar czf "$out/llamacpp-src.tgz" --exclude='ggml/src/ggml-sycl' --exclude='ggml/src/ggml-cann' \
    --exclude='ggml/src/ggml-musa' --exclude='ggml/src/ggml-opencl' --exclude='ggml/src/ggml-metal' \
    --exclude='ggml/src/ggml-webgpu' --exclude='ggml/src/ggml-hexagon' --exclude='tools/server' \
    --exclude='tools/ui' --exclude='tools/cli' \
    CMakeLists.txt cmake ggml src include common vendor tools licenses LICENSE app)
for suite in bookworm trixie; do
  mkdir -p "$t/$suite/lists/partial" "$out/debs-$suite"
  echo "deb http://deb.debian.org/debian $suite main" > "$t/$suite/sources.list"
  o="-oDir::Etc::SourceList=$t/$suite/sources.list -oDir::Etc::SourceParts=/dev/null"
  o="$o -oDir::State::Lists=$t/$suite/lists -oAPT::Architecture=amd64 -oAPT::Architectures=amd64"
  apt-get $o update >/dev/null
  pkgs="glslc libshaderc1"
  [ $suite = trixie ] && pkgs="$pkgs libvulkan-dev spirv-headers"
  (cd "$out/debs-$suite" && apt-get $o download $pkgs >/dev/null 2>&1)
done
cp "$here/make_gguf.py" "$here/run-on-device.sh" "$out/"
echo "ready in $out ($(du -sh "$out" | cut -f1)); carry it: bash OUT/run-on-device.sh build, then bench"
