#!/usr/bin/env python3
"""Kiln Python benchmark (not a test).

1. Per-op Python overhead: the time of one ``kiln.<op>(...)`` call from Python minus the time of
   the same kiln-core call made in a Rust loop (``kiln._kiln._bench_core``), on tiny tensors so
   that the GPU work queued by each call is negligible next to the call itself. Target: < 10 µs.
2. numpy round trip: upload (``kiln.asarray(ndarray)``) and readback (``t.numpy()``) bandwidth.

Usage: python py/bench/bench.py [--iters N] [--sizes-mib 1,16,256] [--json out.json]
"""

import argparse
import json
import time

import kiln
import numpy as np


def per_call(fn, iters, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        kiln.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        dt = time.perf_counter() - t0
        kiln.synchronize()
        best = min(best, dt / iters)
    return best


def core_call(op, a, b, iters, repeats=5):
    return min(kiln._kiln._bench_core(op, a, b, iters) for _ in range(repeats))


def overhead(iters):
    a = kiln.asarray(np.ones((4, 4), np.float32))
    b = kiln.asarray(np.ones((4, 4), np.float32))
    cases = [
        ("add", "kiln.add(a, b)", lambda: kiln.add(a, b), b),
        ("add", "a + b", lambda: a + b, b),
        ("mul", "a * b", lambda: a * b, b),
        ("add_scalar", "a + 1.0", lambda: a + 1.0, None),
        ("exp", "kiln.exp(a)", lambda: kiln.exp(a), None),
        ("sum", "kiln.sum(a)", lambda: kiln.sum(a), None),
        ("softmax", "kiln.softmax(a, axis=-1)", lambda: kiln.softmax(a, axis=-1), None),
        ("matmul", "a @ b", lambda: a @ b, b),
        ("reshape", "kiln.reshape(a, (-1,))", lambda: kiln.reshape(a, (-1,)), None),
    ]
    rows = []
    for op, label, fn, other in cases:
        fn()  # compile the pipeline once
        py = per_call(fn, iters)
        core = core_call(op, a, other, iters)
        rows.append(dict(op=label, python_us=py * 1e6, core_us=core * 1e6, overhead_us=(py - core) * 1e6))
    return rows


def latency(iters):
    """One tiny op followed by synchronize (submit + wait), from Python; PyTorch beside it when
    it is installed with CUDA."""
    a = kiln.asarray(np.ones(1024, np.float32))
    b = a + 1.0
    kiln.synchronize()
    rows = []

    def kiln_step():
        kiln.add(a, a)
        kiln.synchronize()

    rows.append(dict(what="kiln: add + synchronize", us=per_call(kiln_step, iters) * 1e6))
    try:
        import torch

        if torch.cuda.is_available():
            x = torch.ones(1024, device="cuda")

            def torch_step():
                torch.add(x, x)
                torch.cuda.synchronize()

            for _ in range(100):
                torch_step()
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(iters):
                    torch_step()
                best = min(best, (time.perf_counter() - t0) / iters)
            rows.append(dict(what="torch: add + cuda.synchronize", us=best * 1e6))
    except ImportError:
        pass
    del b
    return rows


def bandwidth(sizes_mib):
    rows = []
    for mib in sizes_mib:
        n = mib * (1 << 20) // 4
        host = np.random.default_rng(0).random(n, dtype=np.float32)
        t = kiln.asarray(host)
        kiln.synchronize()
        reps = max(3, min(20, 256 // max(mib, 1)))
        up = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            t = kiln.asarray(host)
            kiln.synchronize()
            up = min(up, time.perf_counter() - t0)
        down = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            out = t.numpy()
            down = min(down, time.perf_counter() - t0)
        assert out[-1] == host[-1] and out[0] == host[0]
        nbytes = host.nbytes
        rows.append(dict(mib=mib, upload_gbs=nbytes / up / 1e9, readback_gbs=nbytes / down / 1e9,
                         upload_ms=up * 1e3, readback_ms=down * 1e3))
        del t, out
        kiln.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--sizes-mib", default="1,16,64")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dev = kiln.default_device()
    print(f"kiln {kiln.__version__} on {dev.name} ({dev.backend}, {dev.device_type}); numpy {np.__version__}")
    print()
    print("Per-op overhead (tiny 4x4 f32 tensors; best of 5 runs of", args.iters, "calls)")
    print(f"{'call':28s} {'python µs':>10s} {'core µs':>10s} {'overhead µs':>12s}")
    ov = overhead(args.iters)
    for r in ov:
        print(f"{r['op']:28s} {r['python_us']:10.2f} {r['core_us']:10.2f} {r['overhead_us']:12.2f}")
    worst = max(r["overhead_us"] for r in ov)
    print(f"worst overhead: {worst:.2f} µs (target < 10 µs): {'OK' if worst < 10 else 'OVER'}")
    print()
    print("Latency of one tiny op + synchronize")
    lat = latency(max(100, args.iters // 4))
    for r in lat:
        print(f"{r['what']:34s} {r['us']:10.2f} µs")
    print()
    print("numpy round trip (f32; upload = asarray + synchronize, readback = .numpy())")
    print(f"{'MiB':>6s} {'upload GB/s':>12s} {'readback GB/s':>14s} {'upload ms':>10s} {'readback ms':>12s}")
    bw = bandwidth([int(s) for s in args.sizes_mib.split(",") if s])
    for r in bw:
        print(f"{r['mib']:6d} {r['upload_gbs']:12.2f} {r['readback_gbs']:14.2f} {r['upload_ms']:10.2f} {r['readback_ms']:12.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev.as_dict(), overhead=ov, latency=lat, bandwidth=bw), f, indent=2)


if __name__ == "__main__":
    main()
