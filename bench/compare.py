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
    if r.get("us_per_op"):
        return 1.0 / r["us_per_op"], f"{r['us_per_op']:.1f} µs/op"
    return 1.0 / r["seconds"], f"{r['seconds'] * 1e3:.3f} ms"


def wall_ratio(k, n):
    """Native wall seconds over Kiln's, where both sides kept a wall-clock figure."""
    if k.get("wall_seconds") and n.get("wall_seconds"):
        return f"{n['wall_seconds'] / k['wall_seconds']:.2f}"
    return "—"


for r in kiln["results"]:
    n = native.get(r["op"])
    kv, ks = fig(r)
    if n is None:
        print(f"| {r['op']} | {r['size']} | {ks} | — | — | — | — |")
        continue
    nv, ns = fig(n)
    # The SDPA backend torch_bench.py saw (attention rows); other rows record none.
    backend = n.get("backend", "—")
    print(f"| {r['op']} | {r['size']} | {ks} | {ns} | {kv / nv:.2f} | {wall_ratio(r, n)} | {backend} |")
