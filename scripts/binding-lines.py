#!/usr/bin/env python3
"""The hand-written binding code, counted as issue 33's table counts it (`wc -l` of the same
files), next to the issue's numbers: how much is still written by hand per binding.

    scripts/binding-lines.py [--root DIR]

Each row lists its files (globs); a line inside a generated region of a hand-written file (between
`BEGIN GENERATED (kiln gen)` and `END GENERATED (kiln gen)`) is counted as generated, not hand,
and whole generated files (`*_gen.*`, `ops.json`) are left out. Prints a Markdown table (today's
hand lines, generated-region lines, the issue's count and the difference) and the total.
"""

import argparse
import glob
import os

BEGIN, END = "BEGIN GENERATED (kiln gen)", "END GENERATED (kiln gen)"

# (row, the count, files). The issue counted the Elixir NIF's op files (every native
# file but the NIF's machinery: lib.rs, session.rs, kernel.rs and the generated ones).
ROWS = [
    ("ffi-c/src/ops.rs", 1020, ["ffi-c/src/ops.rs"]),
    ("py/src/ops.rs + scan.rs + sort.rs", 1166, ["py/src/ops.rs", "py/src/scan.rs", "py/src/sort.rs"]),
    ("nif-elixir native op files + native.ex + kiln.ex", 1891,
     ["nif-elixir/native/src/creation.rs", "nif-elixir/native/src/elementwise.rs", "nif-elixir/native/src/linalg.rs",
      "nif-elixir/native/src/quant.rs", "nif-elixir/lib/kiln/native.ex", "nif-elixir/lib/kiln.ex"]),
    ("julia/src/Kiln.jl + sorting.jl", 1649, ["julia/src/Kiln.jl", "julia/src/sorting.jl"]),
    ("web/src/ops.rs", 430, ["web/src/ops.rs"]),
    ("core/src/ops/by_name.rs", 322, ["core/src/ops/by_name.rs"]),
    ("the five conformance runners", 1827,
     ["cli/src/conformance.rs", "tests/conformance/c_runner.c", "tests/conformance/py_runner.py",
      "tests/conformance/ex_runner.exs", "tests/conformance/jl_runner.jl"]),
]


def count(path):
    """(hand lines, generated-region lines) of one file."""
    hand = gen = 0
    inside = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if END in line:
                inside = False
            if inside:
                gen += 1
            else:
                hand += 1
            if BEGIN in line:
                inside = True
    return hand, gen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = ap.parse_args()
    print("| place | hand lines | in generated regions | issue 33 | change |")
    print("|---|---:|---:|---:|---:|")
    total = [0, 0, 0]
    for row, then, patterns in ROWS:
        hand = gen = 0
        for p in patterns:
            files = glob.glob(os.path.join(args.root, p))
            if not files:
                raise SystemExit(f"binding-lines: {p} is not in the tree (update ROWS)")
            for f in files:
                h, g = count(f)
                hand, gen = hand + h, gen + g
        print(f"| {row} | {hand} | {gen} | {then} | {hand - then:+d} |")
        total = [total[0] + hand, total[1] + gen, total[2] + then]
    print(f"| **total** | **{total[0]}** | {total[1]} | {total[2]} | **{total[0] - total[2]:+d}** |")


if __name__ == "__main__":
    main()
