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
# --f16: what f16 reaches against the f32 reference. An adapter without SHADER_F16 refuses with
# an error naming it (lavapipe has it, so CI runs the check).
f16_out = os.path.join(out_dir, "embed_f16.npy")
r = subprocess.run([kiln, "embed", "--model", model, "--f16", "--out", f16_out] + sentences[:2], capture_output=True)
if r.returncode != 0:
    assert b"SHADER_F16" in r.stderr, r.stderr.decode()
    print("kiln embed --f16: the adapter has no SHADER_F16; refused as it should")
else:
    got16 = np.load(f16_out)
    for j in range(2):
        cos = float(got16[j] @ want[j] / (np.linalg.norm(got16[j]) * np.linalg.norm(want[j])))
        maxd = float(np.abs(got16[j] - want[j]).max())
        print(f"kiln embed --f16 sentence {j}: cosine {cos:.6f} max|diff| {maxd:.2e}")
        assert got16.dtype == np.float32 and cos >= 0.99999 and maxd <= 1e-3, (cos, maxd)
print(f"kiln embed: {len(rows)} sentences from stdin and 2 from arguments match sentence-transformers")
