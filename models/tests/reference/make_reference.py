#!/usr/bin/env python3
"""Independent reference for kiln-models' MiniLM test: runs sentence-transformers (PyTorch, CPU)
on sentences.json and writes what it gives.

    python3 make_reference.py MODEL_DIR      # writes token_ids.json, embeddings.npy, pooled.npy

MODEL_DIR is the all-MiniLM-L6-v2 directory (scripts/fetch-minilm.sh puts it in
build/models/all-MiniLM-L6-v2). Needs sentence-transformers, torch and numpy; runs offline.
The outputs are committed; CI checks Kiln against them without PyTorch.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

here = os.path.dirname(os.path.abspath(__file__))
model_dir = sys.argv[1]
sentences = json.load(open(os.path.join(here, "sentences.json"), encoding="utf-8"))

torch.manual_seed(0)
model = SentenceTransformer(model_dir, device="cpu")
model.eval()
assert model.max_seq_length == 256, model.max_seq_length

# Token ids exactly as encode() tokenizes (strip, truncation at max_seq_length), unpadded.
features = model.tokenize(sentences)
ids = []
for row, mask in zip(features["input_ids"].tolist(), features["attention_mask"].tolist()):
    ids.append([t for t, m in zip(row, mask) if m == 1])

# batch_size=4: batches of different lengths, padded, as a user's call would be.
emb = model.encode(sentences, batch_size=4, convert_to_numpy=True, normalize_embeddings=False)
# The pipeline without its Normalize module: mean-pooled, not normalised.
pooled_model = SentenceTransformer(modules=[model[0], model[1]], device="cpu")
pooled = pooled_model.encode(sentences, batch_size=4, convert_to_numpy=True)

np.save(os.path.join(here, "embeddings.npy"), emb.astype(np.float32))
np.save(os.path.join(here, "pooled.npy"), pooled.astype(np.float32))
with open(os.path.join(here, "token_ids.json"), "w", encoding="utf-8") as f:
    json.dump(
        {
            "generator": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
            "ids": ids,
        },
        f,
        indent=0,
    )
print(f"{len(sentences)} sentences; lengths {[len(i) for i in ids]}; norms {np.linalg.norm(emb, axis=1).round(4).tolist()}")
