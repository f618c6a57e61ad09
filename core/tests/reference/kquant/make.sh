#!/bin/sh
# Rebuilds the K-quant / Q5 reference vectors from ggml's own C: untars the trimmed llama.cpp
# source (build/anchors/llamacpp-src.tgz, or $LLAMACPP_SRC), compiles ggml-quants.c with
# ggml_ref.c as ggml-base is built on x86-64 (-O2, no -march: SSE2 arithmetic, no FMA
# contraction), and writes rows.f32 and FMT.q / FMT.f32 here.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=${LLAMACPP_SRC:-$here/../../../../build/anchors/llamacpp-src.tgz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$src" -C "$tmp"
g="$tmp/ggml"
gcc -O2 -std=c11 -D_GNU_SOURCE -DNDEBUG -I"$g/include" -I"$g/src" -I"$g/src/ggml-cpu" \
    -ffunction-sections -fdata-sections -Wl,--gc-sections \
    "$here/ggml_ref.c" "$g/src/ggml-quants.c" -lm -o "$tmp/ggml_ref"
cd "$here" && "$tmp/ggml_ref"
