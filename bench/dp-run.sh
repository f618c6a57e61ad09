#!/usr/bin/env bash
# Issue 35's scaling table in one run, on a machine with several GPUs (nvidia-h200-x2 / -x4):
# `kiln bench --filter dp` (device-to-device copy next to upload and readback, MiniLM-shaped
# encode and SmolLM2-shaped batched generation on 1, 2, 4 GPUs, ratios to one GPU), with a
# SmolLM2-shaped random GGUF written there (bench/anchors/make_gguf.py: no model files carried).
#
#   bench/dp-run.sh KILN ANCHORS
#     KILN     the kiln binary, or kiln.xz
#     ANCHORS  the folder bench/anchors/prepare.sh made (smol_meta.pkl, gguf-*.whl; make_gguf.py
#              is taken from there, else from bench/anchors)
#   env: OUT (where dp.json goes), REPS (default 5), QUICK=1 (small sizes: a software adapter),
#        DEVICES=0,1 (adapter indices; default every GPU), PYTHON (default python3, with numpy),
#        MINILM=DIR (a folder with all-MiniLM-L6-v2's tokenizer.json, 466 KB: the MiniLM-shaped
#        model then tokenizes as the real one; with model.safetensors too, the real model)
set -eu
K=$1; A=$2; W=/tmp/kiln-dp; mkdir -p $W
PY=${PYTHON:-python3}
case $K in *.xz) xz -dc "$K" > $W/kiln && chmod +x $W/kiln; K=$W/kiln ;; esac
MG=$A/make_gguf.py; [ -f "$MG" ] || MG=$(cd "$(dirname "$0")" && pwd)/anchors/make_gguf.py
$PY -m pip install -q --no-deps --target $W/site "$A"/gguf-*.whl >/dev/null 2>&1
[ -f $W/smol.gguf ] || PYTHONPATH=$W/site $PY "$MG" smol "$A/smol_meta.pkl" $W/smol.gguf
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null || true
"$K" devices
args=(--filter dp --reps "${REPS:-5}" --smollm2 $W/smol.gguf --json "${OUT:-/tmp}/dp.json")
[ -n "${QUICK:-}" ] && args+=(--quick)
[ -n "${DEVICES:-}" ] && args+=(--devices "$DEVICES")
[ -n "${MINILM:-}" ] && args+=(--minilm "$MINILM")
"$K" bench "${args[@]}"
