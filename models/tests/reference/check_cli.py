#!/usr/bin/env python3
"""`kiln embed` end to end: texts on stdin (one per line) -> --out .npy, compared with the
sentence-transformers reference rows (cosine >= 0.9999, max |diff| <= 1e-4).

    python3 check_cli.py KILN MODEL_DIR OUT_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np

kiln, model, out_dir = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
sentences = json.load(open(os.path.join(here, "sentences.json"), encoding="utf-8"))
want = np.load(os.path.join(here, "embeddings.npy"))
# One line each: the short sentences without newlines inside (the 256-token one costs ~15 s on
# lavapipe and is covered by the Rust test).
rows = [i for i, s in enumerate(sentences) if "\n" not in s and len(s) < 200]
os.makedirs(out_dir, exist_ok=True)
out = os.path.join(out_dir, "embed.npy")
stdin = "".join(sentences[i] + "\n" for i in rows)
subprocess.run([kiln, "embed", "--model", model, "--batch-size", "4", "--out", out], input=stdin.encode(), check=True)
got = np.load(out)
assert got.shape == (len(rows), want.shape[1]) and got.dtype == np.float32, (got.shape, got.dtype)
bad = []
for j, i in enumerate(rows):
    cos = float(got[j] @ want[i] / (np.linalg.norm(got[j]) * np.linalg.norm(want[i])))
    maxd = float(np.abs(got[j] - want[i]).max())
    print(f"kiln embed sentence {i:2}: cosine {cos:.8f} max|diff| {maxd:.2e}")
    if not (cos >= 0.9999 and maxd <= 1e-4):
        bad.append(i)
assert not bad, f"sentences {bad} differ from sentence-transformers"
# Texts as arguments, printed as JSON lines.
args = [kiln, "embed", "--model", model, sentences[0], sentences[1]]
lines = subprocess.run(args, check=True, capture_output=True).stdout.decode().splitlines()
printed = np.array([json.loads(line) for line in lines], dtype=np.float32)
assert printed.shape == (2, want.shape[1]) and np.abs(printed - want[:2]).max() <= 1e-4, printed.shape
print(f"kiln embed: {len(rows)} sentences from stdin and 2 from arguments match sentence-transformers")
