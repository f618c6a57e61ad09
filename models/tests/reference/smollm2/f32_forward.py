"""SmolLM2's forward pass in numpy (float64) on the GGUF's weights dequantized with the gguf
package, written independently of Kiln and of llama.cpp: RoPE applied llama.cpp's way (adjacent
pairs, on the Q/K rows as the converter permuted them), grouped-query attention, SwiGLU, tied
output. It writes logits_<name>_f64.npy for the prompts named on the command line (default:
capital), from the token ids in reference.json.

This separates the two sources of difference from llama.cpp: Kiln and this script both use the
exact dequantized weights with unrounded activations, so they should agree to float32 rounding;
llama.cpp's CPU path rounds activations to 8 bits before each quantized dot product, which is
what remains between it and both of them.

Usage: python f32_forward.py FILE.gguf [NAME...]   (needs `pip install gguf numpy`)
"""

import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

HERE = Path(__file__).parent


def main() -> None:
    reader = GGUFReader(sys.argv[1])
    names = sys.argv[2:] or ["capital"]
    w = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64) for t in reader.tensors}

    def meta(key):
        return reader.fields[key].contents()

    n_layers = int(meta("llama.block_count"))
    n_head = int(meta("llama.attention.head_count"))
    n_kv = int(meta("llama.attention.head_count_kv"))
    dim = int(meta("llama.embedding_length"))
    hd = dim // n_head
    eps = float(meta("llama.attention.layer_norm_rms_epsilon"))
    base = float(meta("llama.rope.freq_base"))

    def rms(x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g

    def rope(x):  # x [L, heads, hd]; llama.cpp's normal mode rotates (2i, 2i+1)
        pos = np.arange(x.shape[0])[:, None]
        theta = pos * base ** (-2.0 * np.arange(hd // 2) / hd)
        cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out

    ref = json.loads((HERE / "reference.json").read_text())
    for p in ref["prompts"]:
        if p["name"] not in names:
            continue
        ids = p["ids"]
        n = len(ids)
        h = w["token_embd.weight"][ids]
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for i in range(n_layers):
            b = f"blk.{i}."
            x = rms(h, w[b + "attn_norm.weight"])
            q = rope((x @ w[b + "attn_q.weight"].T).reshape(n, n_head, hd))
            k = rope((x @ w[b + "attn_k.weight"].T).reshape(n, n_kv, hd))
            v = (x @ w[b + "attn_v.weight"].T).reshape(n, n_kv, hd)
            out = np.empty((n, n_head, hd))
            for hh in range(n_head):
                kv = hh // (n_head // n_kv)
                s = q[:, hh] @ k[:, kv].T / np.sqrt(hd) + mask
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                out[:, hh] = (s / s.sum(axis=-1, keepdims=True)) @ v[:, kv]
            h = h + out.reshape(n, dim) @ w[b + "attn_output.weight"].T
            x = rms(h, w[b + "ffn_norm.weight"])
            g = x @ w[b + "ffn_gate.weight"].T
            u = x @ w[b + "ffn_up.weight"].T
            h = h + (g / (1 + np.exp(-g)) * u) @ w[b + "ffn_down.weight"].T
        logits = rms(h[-1], w["output_norm.weight"]) @ w["token_embd.weight"].T
        np.save(HERE / f"logits_{p['name']}_f64.npy", logits.astype(np.float32))
        lc = np.load(HERE / f"logits_{p['name']}.npy")
        print(
            p["name"],
            f"vs llama.cpp: max |diff| {np.abs(logits - lc).max():.4f}, mean {np.abs(logits - lc).mean():.4f}",
        )


if __name__ == "__main__":
    main()
