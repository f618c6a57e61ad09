#!/usr/bin/env bash
# Shows that the conformance suite catches a broken binding and names the op and the language:
#   1. C: libkiln with kiln_sub's two arguments swapped (break_shim.c, LD_PRELOAD);
#   2. Elixir: a copy of nif-elixir whose Kiln.where/3 swaps its two branches;
#   3. Julia: a copy of julia/ whose Kiln.layer_norm (generated into methods_gen.jl) passes bias
#      and weight to _kiln_layer_norm (the generated @ccall of kiln_layer_norm) in the wrong order
#      (same shapes: wrong numbers, no error).
# Each broken run goes into a scratch results folder next to a correct Rust run; compare.py
# must fail and print "C: op `sub`" / "Elixir: op `where`" / "Julia: op `layer_norm`". The working
# tree is not modified.
# Usage (from the repository root, after the vectors, the kiln CLI, libkiln, the NIF and a
# Julia (scripts/julia, or $JULIA) exist):
#   tests/conformance/break_check.sh
set -euo pipefail
OUT=tests/conformance/out
PY=${PY:-.venv-py/bin/python}
CC=${CC:-cc}
JULIA=${JULIA:-scripts/julia}
SCRATCH=$(mktemp -d /tmp/kiln-break.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$SCRATCH/results" build/conformance
target/release/kiln conformance "$OUT/manifest.json" "$SCRATCH/results/rust.json"

# 1. C with kiln_sub's arguments swapped.
$CC -std=c11 -Wall -Wextra -O2 -Iinclude tests/conformance/c_runner.c -o build/conformance/c_runner \
    -Ltarget/release -lkiln -Wl,-rpath,"$PWD/target/release" -lm -ldl
$CC -std=c11 -Wall -Wextra -O2 -shared -fPIC -Iinclude tests/conformance/break_shim.c -o "$SCRATCH/break_shim.so" -ldl
LD_PRELOAD="$SCRATCH/break_shim.so" build/conformance/c_runner "$OUT/manifest.txt" "$SCRATCH/results/c.json"

# 2. Elixir with Kiln.where's branches swapped (in a copy of the mix project).
# The copy keeps the repository's layout under $SCRATCH: the NIF's source-hash check reads
# nif-elixir/native/src, core/src and shaders relative to the root above nif-elixir/.
mkdir -p "$SCRATCH/nif-elixir/native" "$SCRATCH/core"
cp -r nif-elixir/lib nif-elixir/mix.exs nif-elixir/priv "$SCRATCH/nif-elixir/"
cp -r nif-elixir/native/src "$SCRATCH/nif-elixir/native/"
cp -r core/src "$SCRATCH/core/" && cp -r shaders "$SCRATCH/"
# Nx and its dependencies as the conformance runner just compiled them (unchanged sources:
# mix reuses them rather than spending a minute rebuilding Nx in the copy).
for d in nx complex telemetry; do
    [ -d "nif-elixir/_build/dev/lib/$d" ] && mkdir -p "$SCRATCH/nif-elixir/_build/dev/lib" \
        && cp -rp "nif-elixir/_build/dev/lib/$d" "$SCRATCH/nif-elixir/_build/dev/lib/"
done
"$PY" - "$SCRATCH/nif-elixir/lib/kiln.ex" <<'PYEOF'
import sys
p = sys.argv[1]
s = open(p).read()
old = "out(Native.where_(ref!(cond), ref!(a), ref!(b)))"
assert old in s, "Kiln.where/3 changed: update break_check.sh"
open(p, "w").write(s.replace(old, "out(Native.where_(ref!(cond), ref!(b), ref!(a)))"))
PYEOF
(cd "$SCRATCH/nif-elixir" && KILN_NIF_SKIP_CARGO=1 CARGO_TARGET_DIR="$PWD/../nonexistent" "${MIX:-mix}" run "$OLDPWD/tests/conformance/ex_runner.exs" \
    "$OLDPWD/$OUT/manifest.txt" "$SCRATCH/results/elixir.json")

# 3. Julia with _kiln_layer_norm's weight and bias swapped (in a copy of julia/).
cp -r julia "$SCRATCH/julia"
"$PY" - "$SCRATCH/julia/src/methods_gen.jl" <<'PYEOF'
import sys
p = sys.argv[1]
s = open(p).read()
old = "_kiln_layer_norm(x, weight, bias, eps)"
assert s.count(old) == 1, "Kiln.layer_norm changed: update break_check.sh"
open(p, "w").write(s.replace(old, "_kiln_layer_norm(x, bias, weight, eps)"))
PYEOF
KILN_JL="$SCRATCH/julia" KILN_LIB="$PWD/target/release/libkiln.so" "$JULIA" --startup-file=no \
    tests/conformance/jl_runner.jl "$OUT/manifest.txt" "$SCRATCH/results/julia.json"

set +e
"$PY" tests/conformance/compare.py --manifest "$OUT/manifest.json" --results "$SCRATCH/results" > "$SCRATCH/compare.txt"
rc=$?
set -e
cat "$SCRATCH/compare.txt"
ok=1
[ $rc -ne 0 ] || { echo "break-check: compare.py passed with broken bindings" >&2; ok=0; }
grep -q 'C: op `sub` case sub\.' "$SCRATCH/compare.txt" || { echo "break-check: the C failure of op sub was not named" >&2; ok=0; }
grep -q 'Elixir: op `where` case where\.' "$SCRATCH/compare.txt" || { echo "break-check: the Elixir failure of op where was not named" >&2; ok=0; }
grep -q 'Julia: op `layer_norm` case layer_norm\.' "$SCRATCH/compare.txt" || { echo "break-check: the Julia failure of op layer_norm was not named" >&2; ok=0; }
if grep -E '^  (C|Elixir|Julia): ' "$SCRATCH/compare.txt" | grep -vqE '^  (C: op `sub`|Elixir: op `where`|Julia: op `layer_norm`)'; then
    echo "break-check: ops other than C/sub, Elixir/where, Julia/layer_norm were blamed" >&2; ok=0
fi
[ $ok -eq 1 ] || exit 1
echo "break-check: the suite failed and named C/sub, Elixir/where and Julia/layer_norm, as it should"
