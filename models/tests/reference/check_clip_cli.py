#!/usr/bin/env python3
"""`kiln embed` on a CLIP folder end to end: the reference images as uint8 .npy files (--image)
and the reference texts -> --out .npy, compared with transformers' rows (clip/, made by
make_clip_reference.py): cosine >= 0.9999, max |diff| <= 1e-4, normalised as kiln embed's
default.

    python3 check_clip_cli.py KILN OUT_DIR
"""

import json
import os
import subprocess
import sys

import numpy as np

kiln, out_dir = sys.argv[1:3]
ref_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clip")
ref = json.load(open(os.path.join(ref_dir, "reference.json"), encoding="utf-8"))
flat = np.load(os.path.join(ref_dir, "images.npy"))
os.makedirs(out_dir, exist_ok=True)
args, at = [], 0
for name, (h, w, c) in zip(ref["images"], ref["shapes"]):
    path = os.path.join(out_dir, f"{name}.npy")
    np.save(path, flat[at : at + h * w * c].reshape(h, w, c))
    at += h * w * c
    args += ["--image", path]
out = os.path.join(out_dir, "clip.npy")
texts = ref["texts"][:3]
subprocess.run([kiln, "embed", "--model", os.path.join(ref_dir, "model"), "--out", out, *args, *texts], check=True)
got = np.load(out)
want = np.concatenate([np.load(os.path.join(ref_dir, "image_embeds.npy")), np.load(os.path.join(ref_dir, "text_embeds.npy"))[:3]])
want /= np.linalg.norm(want, axis=1, keepdims=True)
assert got.shape == want.shape and got.dtype == np.float32, (got.shape, got.dtype)
for i, (g, w) in enumerate(zip(got, want)):
    cos, d = float(g @ w / np.linalg.norm(g) / np.linalg.norm(w)), float(np.abs(g - w).max())
    assert cos >= 0.9999 and d <= 1e-4, (i, cos, d)
print(f"kiln embed (CLIP): {len(got)} rows ({len(ref['images'])} images, 3 texts) match transformers")
