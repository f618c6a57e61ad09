"""The LLM section of the PyTorch baseline: SmolLM2-135M-Instruct from its Q4_1 GGUF, loaded by
transformers (which dequantizes the weights: f16 here, and f32), eager attention, the way most
people run it, measured as `kiln bench`'s llm section (cli/src/bench_llm.rs) measures Kiln:

- prefill: one forward pass over a 512-token prompt (tokens/s);
- time to first token: a 128-token prompt through prefill to the first greedy token on the host;
- decode: greedy tokens/s at batch 1 after a 128-token prompt, and after 1920 tokens (a
  2048-token context), each step's token read back to the host as a generation loop does;
- the peak GPU memory allocated.

The prompts are the same token ids on both sides (`ids`), so no tokenizer is involved.
"""

import time

import numpy as np
import torch

VOCAB = 49152


def ids(n, salt=0):
    """Prompt token ids: a fixed pattern over the vocabulary (cli/src/bench_llm.rs has the same)."""
    return [(i * 7919 + 13 + salt) % VOCAB for i in range(n)]


def _measure(model, prefill_n, n_decode, contexts, reps):
    """(prefill seconds, time to first token, {context: decode seconds}, peak bytes)."""

    def prefill(tokens):
        x = torch.tensor([tokens], device="cuda")
        out = model(input_ids=x, use_cache=True)
        return out.past_key_values, out.logits[0, -1].argmax()

    def decode(past, nxt, n):
        for _ in range(n):
            out = model(input_ids=nxt.view(1, 1), past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[0, -1].argmax()
            nxt.item()  # the host needs each token (streaming, stop checks)
        return past

    def timed(f, n=reps):
        xs = []
        for _ in range(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            f()
            torch.cuda.synchronize()
            xs.append(time.perf_counter() - t)
        return float(np.median(xs))

    with torch.no_grad():
        prefill(ids(32))  # warm-up
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        pre = timed(lambda: prefill(ids(prefill_n, 1)))
        ttft = timed(lambda: prefill(ids(128, 2))[1].item())
        dec = {}
        for ctx in contexts:
            past, nxt = prefill(ids(ctx, 3))
            decode(past, nxt, 2)  # warm the shapes
            xs = []
            for _ in range(max(1, reps // 2)):
                past, nxt = prefill(ids(ctx, 3))
                torch.cuda.synchronize()
                t = time.perf_counter()
                decode(past, nxt, n_decode)
                xs.append(time.perf_counter() - t)
            dec[ctx] = float(np.median(xs))
        return pre, ttft, dec, torch.cuda.max_memory_allocated()


def bench_llm(gguf_path, quick=False, reps=5):
    import os

    from transformers import AutoModelForCausalLM

    directory, name = os.path.split(os.path.abspath(gguf_path))
    rows = []
    n_decode = 16 if quick else 128
    prefill_n = 64 if quick else 512
    contexts = [128, 256 if quick else 2048]
    for tag, dtype in [("f16", torch.float16), ("f32", torch.float32)]:
        # Peak memory counts from what the process held before the model (see torch_embed.py).
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated()
        model = AutoModelForCausalLM.from_pretrained(
            directory, gguf_file=name, torch_dtype=dtype, attn_implementation="eager"
        )
        model = model.to("cuda").eval()
        pre, ttft, dec, peak = _measure(model, prefill_n, n_decode, contexts, reps)
        peak -= held
        base = {"timer": "wall", "peak_gpu_bytes": peak, "backend": f"transformers eager, {tag} weights"}
        rows.append({"op": f"llm_prefill_{tag}", "size": f"{prefill_n} tokens", "seconds": pre / prefill_n,
                     "tokens_per_s": prefill_n / pre, **base})
        rows.append({"op": f"llm_ttft_{tag}", "size": "128-token prompt", "seconds": ttft, **base})
        for ctx, s in dec.items():
            rows.append({"op": f"llm_decode_ctx{ctx}_{tag}", "size": f"{n_decode} tokens after {ctx}",
                         "seconds": s / n_decode, "tokens_per_s": n_decode / s, **base})
        del model
        torch.cuda.empty_cache()
    return rows


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(bench_llm(sys.argv[1], "--quick" in sys.argv), indent=1))
