#!/usr/bin/env bash
# On the GPU machine: runs the carried kiln binary and the PyTorch baseline in one command and
# prints the side-by-side table. Builds nothing. Usage: bench/run.sh [--quick] [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
quick=""
[ "${1:-}" = "--quick" ] && { quick="--quick"; shift; }
out="${1:-${OUT:-/tmp}}"
KILN="${KILN:-target/release/kiln}"
"$KILN" devices
"$KILN" bench $quick --json "$out/kiln.json"
python3 bench/torch_bench.py $quick --json "$out/torch.json" > /dev/null
python3 bench/compare.py "$out/kiln.json" "$out/torch.json" | tee "$out/table.md"
