#!/usr/bin/env bash
# On the GPU machine, after run-on-device.sh build wrote /tmp/lcpp/*.gguf (or with the GGUFs
# written here: pass MAKE=1 and the prepare.sh folder as A): Kiln's side of issue 29's table.
#   kiln-side.sh KILN [KILN_BEFORE]   the decode-relevant correctness tests (TESTS: a folder of
#   carried test binaries, each run if present), the quant_matvec and decode-attention rows with
#   their A/B knobs, then `kiln bench --filter llm` per model, before and after.
set -u
K=$1; B=${2:-}; W=/tmp/lcpp; mkdir -p $W
if [ "${MAKE:-0}" = 1 ]; then
  python3 -m pip install -q --no-deps --target /tmp/site $A/gguf-*.whl >/dev/null 2>&1
  export PYTHONPATH=/tmp/site
  python3 $A/make_gguf.py smol $A/smol_meta.pkl $W/smol.gguf &
  python3 $A/make_gguf.py llama1b q4_0 $A/smol_meta.pkl $W/l1b_q4_0.gguf &
  python3 $A/make_gguf.py llama1b q8_0 $A/smol_meta.pkl $W/l1b_q8_0.gguf &
  wait
fi
for t in ${TESTS:-/nonexistent}/*; do
  [ -x "$t" ] || continue
  echo "== test $(basename $t)"; timeout 120 $t --test-threads 4 2>&1 | grep -E "test result|FAILED|panicked|^test .*(FAIL|ignored)" | head -12
done
echo "== quant_matvec (wide by shape) / strided"
$K bench --filter quant_matvec --reps 5 2>&1 | grep -E "^quant_matvec"
KILN_QUANT_MATVEC=strided $K bench --filter quant_matvec --reps 5 2>&1 | grep -E "^quant_matvec"
echo "== decode attention (one dispatch) / KILN_DECODE_FUSE=0"
$K bench --filter attention_decode --reps 5 2>&1 | grep -E "^attention_decode"
KILN_DECODE_FUSE=0 $K bench --filter attention_decode_gqa --reps 5 2>&1 | grep -E "^attention_decode"
for m in smol l1b_q4_0 l1b_q8_0; do
  echo "== kiln (after) llm $m"; $K bench --filter llm --reps 3 --smollm2 $W/$m.gguf 2>&1 | grep -v XDG
  [ -n "$B" ] && { echo "== kiln (before) llm $m"; $B bench --filter llm --reps 3 --smollm2 $W/$m.gguf 2>&1 | grep -E "^llm_"; }
done
echo "== kiln (after) llm smol, KILN_DECODE_FUSE=0 KILN_QUANT_MATVEC=strided"
KILN_DECODE_FUSE=0 KILN_QUANT_MATVEC=strided $K bench --filter llm --reps 3 --smollm2 $W/smol.gguf 2>&1 | grep -E "^llm_"
