"""The embed section of the PyTorch baseline: sentence-transformers on CUDA, the same
sentences and batches as `kiln bench`'s embed section (cli/src/bench_embed.rs): latency of one
16-token sentence, throughput of 256 sentences of 128 tokens, f32 and f16 (model.half()), and
the peak GPU memory allocated during each (torch.cuda.max_memory_allocated). Wall clock around
encode(), tokenization and the copy to numpy included on both sides.
"""

import time

import numpy as np
import torch

# Same list and formula as cli/src/bench_embed.rs: each word is one token of BERT's vocabulary.
WORDS = (
    "with that from were this they which have first also their been when after there into time would what about "
    "said over then other more like back them only some could where just during before made school through than "
    "years most world between down well three year while"
).split()
assert len(WORDS) == 48


def sentence(i, tokens):
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(tokens - 2))


def timed(warm, reps, f):
    for _ in range(warm):
        f()
    xs = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        torch.cuda.synchronize()
        xs.append(time.perf_counter() - t)
    return float(np.median(xs))


def bench_embed(model_dir, quick=False, reps=5):
    from sentence_transformers import SentenceTransformer

    batch, seq = (16, 32) if quick else (256, 128)
    one = [sentence(0, 16)]
    many = [sentence(i, seq) for i in range(batch)]
    rows = []
    for tag in ["f32", "f16"]:
        # Peak memory counts from what the process held before the model (torch_bench's other
        # inputs), so both sides report the model's weights plus its activations.
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated()
        model = SentenceTransformer(model_dir, device="cuda")
        if tag == "f16":
            model.half()
        model.eval()
        lens = [int(m.sum()) for m in model.tokenize([one[0], many[0]])["attention_mask"]]
        assert lens == [16, seq], lens
        attn = getattr(model[0].auto_model.config, "_attn_implementation", "?")

        def enc(m, texts):
            return lambda: m.encode(texts, batch_size=batch, convert_to_numpy=True)

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        s1 = timed(3, max(4 * reps, 10), enc(model, one))
        peak1 = torch.cuda.max_memory_allocated() - held
        torch.cuda.reset_peak_memory_stats()
        sb = timed(1, max(reps, 3), enc(model, many))
        peakb = torch.cuda.max_memory_allocated() - held
        for op, size, s, n, peak in [
            (f"embed_b1_{tag}", "1x16 tokens", s1, 1, peak1),
            (f"embed_b{batch}_{tag}", f"{batch}x{seq} tokens", sb, batch, peakb),
        ]:
            rows.append(
                {
                    "op": op,
                    "size": size,
                    "seconds": s,
                    "timer": "wall",
                    "wall_seconds": s,
                    "sentences_per_s": n / s,
                    "peak_gpu_bytes": peak,
                    "backend": f"attention: {attn}",
                }
            )
        del model
        torch.cuda.empty_cache()
    return rows
