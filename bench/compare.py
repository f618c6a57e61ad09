"""Prints the side-by-side table of a kiln bench JSON and a torch_bench JSON (same run)."""

import json
import sys

kiln, torch_ = (json.load(open(p)) for p in sys.argv[1:3])
native = {r["op"]: r for r in torch_["results"]}
print(f"device: {kiln['device']} | driver: {kiln['driver']} | torch {torch_['torch']} on {torch_['device']}")
print()
print("| op | size | Kiln | PyTorch CUDA | ratio (Kiln/native) | wall-clock ratio | PyTorch backend |")
print("|---|---|---:|---:|---:|---:|---|")


def fig(r):
    if r.get("tflops"):
        return r["tflops"], f"{r['tflops']:.2f} TFLOP/s"
    if r.get("gbps"):
        g = r["gbps"]
        return g, (f"{g:.0f} GB/s" if g >= 100 else f"{g:.1f} GB/s")
    if r.get("tokens_per_s"):
        return r["tokens_per_s"], f"{r['tokens_per_s']:.0f} tokens/s"
    if r.get("sentences_per_s") and r["sentences_per_s"] > 1 / r["seconds"] + 1e-9:
        return r["sentences_per_s"], f"{r['sentences_per_s']:.0f} sentences/s"
    if r.get("us_per_op"):
        return 1.0 / r["us_per_op"], f"{r['us_per_op']:.1f} µs/op"
    return 1.0 / r["seconds"], f"{r['seconds'] * 1e3:.3f} ms"


def wall_ratio(k, n):
    """Native wall seconds over Kiln's, where both sides kept a wall-clock figure."""
    if k.get("wall_seconds") and n.get("wall_seconds"):
        return f"{n['wall_seconds'] / k['wall_seconds']:.2f}"
    return "—"


phases = []
for r in kiln["results"]:
    if "seconds" not in r:
        # Breakdown rows (latency_phases) have no figure to compare: listed after the table.
        phases.append(r)
        continue
    kv, ks = fig(r)
    # A Kiln row may name the baseline rows it is compared with (the LLM rows: PyTorch's f16
    # and f32 runs of the same model against Kiln's quantized one).
    for other in r.get("compare_to", [r["op"]]):
        n = native.get(other)
        label = r["op"] if other == r["op"] else f"{r['op']} vs {other}"
        if n is None:
            print(f"| {label} | {r['size']} | {ks} | — | — | — | — |")
            continue
        nv, ns = fig(n)
        # The backend torch_bench.py saw (SDPA kernel, model attention implementation).
        backend = n.get("backend", "—")
        print(f"| {label} | {r['size']} | {ks} | {ns} | {kv / nv:.2f} | {wall_ratio(r, n)} | {backend} |")

for r in phases:
    parts = ", ".join(f"{k.removesuffix('_seconds')} {v * 1e6:.1f} µs" for k, v in r.items() if k.endswith("_seconds"))
    print(f"\n{r['op']} ({r['size']}): {parts}")

mem = [
    (r, other, native.get(other))
    for r in kiln["results"]
    if r.get("peak_gpu_bytes") is not None
    for other in r.get("compare_to", [r["op"]])
]
if mem:
    print()
    print("| op | Kiln peak GPU memory | PyTorch peak GPU memory |")
    print("|---|---:|---:|")
    for r, other, n in mem:
        label = r["op"] if other == r["op"] else f"{r['op']} vs {other}"
        theirs = f"{n['peak_gpu_bytes'] / 2**20:.1f} MiB" if n and n.get("peak_gpu_bytes") is not None else "—"
        print(f"| {label} | {r['peak_gpu_bytes'] / 2**20:.1f} MiB | {theirs} |")
