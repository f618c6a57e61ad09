"""The same ops at the same sizes as `kiln bench`, through PyTorch CUDA (the native baseline).

Timing matches kiln's: warm-up, then the median over reps of a timed loop; two input sets
alternate. The figure is GPU time from a CUDA event pair around the loop (Kiln: timestamp
queries around its passes); the wall clock to the final torch.cuda.synchronize() is kept as
`wall_seconds`. TF32 is off for f32 matmul.
"""

import json
import os
import sys
import time

import numpy as np
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
# cuDNN times its algorithms on first use of a shape and keeps the fastest: without this, its
# heuristic picked a 1.6 TFLOP/s kernel for the grouped f16 row.
torch.backends.cudnn.benchmark = True
dev = "cuda"
quick = "--quick" in sys.argv
reps = 5
name_filter = sys.argv[sys.argv.index("--filter") + 1] if "--filter" in sys.argv else None


def wanted(name):
    """As `kiln bench --filter`: only benchmarks whose name contains the filter."""
    return name_filter is None or name_filter in name


def rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    return torch.rand(shape, generator=g, device=dev, dtype=dtype) * 2 - 1


def pair(shape, dtype=torch.float32, seed=0):
    return [rand(shape, dtype, seed), rand(shape, dtype, seed + 1)]


WARM_SECONDS = 0.1


def time_op(f):
    """(GPU seconds per call from a CUDA event pair around the loop, wall seconds per call)."""
    for i in range(2):
        f(i)
    torch.cuda.synchronize()
    t = time.perf_counter()
    f(0)
    torch.cuda.synchronize()
    one = time.perf_counter() - t
    iters = int(min(200, max(3, 0.05 / max(one, 1e-6))))
    # As kiln bench: WARM_SECONDS of untimed calls, so the GPU's clocks are up after idle phases.
    t = time.perf_counter()
    while time.perf_counter() - t < WARM_SECONDS:
        for i in range(iters):
            f(i)
        torch.cuda.synchronize()
    gpu, wall = [], []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        start.record()
        for i in range(iters):
            f(i)
        end.record()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t) / iters)
        gpu.append(start.elapsed_time(end) * 1e-3 / iters)
    return float(np.median(gpu)), float(np.median(wall))


def attention_benches(quick):
    """Attention as models lay it out, [batch, heads, seq, dim] (4-D: with 3-D inputs SDPA takes
    its unfused math path). The same rows as `kiln bench`: causal prefill at two lengths, and
    decode (one query against a 4096-long KV cache; counted in GB/s of K and V read)."""
    F = torch.nn.functional
    out = []
    for dt, sfx in [(torch.float32, ""), (torch.float16, "_f16")]:
        for name, (b, h, seq, d) in [
            ("attention_causal", (2, 2, 128, 64) if quick else (8, 8, 1024, 64)),
            ("attention_causal_long", (1, 2, 512, 64) if quick else (4, 16, 4096, 64)),
        ]:
            q = pair([b, h, seq, d], dt, 23)
            k, v = rand([b, h, seq, d], dt, 25), rand([b, h, seq, d], dt, 27)
            out.append(
                (
                    name + sfx,
                    f"{b}x{h}x{seq}x{d}",
                    0,
                    4.0 * b * h * seq * seq * d / 2,
                    lambda i, q=q, k=k, v=v: F.scaled_dot_product_attention(q[i % 2], k, v, is_causal=True),
                )
            )
        b, h, lk, d = (2, 2, 512, 64) if quick else (8, 8, 4096, 64)
        q = pair([b, h, 1, d], dt, 29)
        k, v = rand([b, h, lk, d], dt, 31), rand([b, h, lk, d], dt, 33)
        out.append(
            (
                "attention_decode" + sfx,
                f"{b}x{h}x1x{d} kv {lk}",
                2.0 * b * h * lk * d * q[0].element_size(),
                0,
                lambda i, q=q, k=k, v=v: F.scaled_dot_product_attention(q[i % 2], k, v),
            )
        )
    return out


def sdpa_backend(f):
    """The SDPA backend PyTorch ran for `f`, from the kernel names the profiler saw, and the
    backends that accept these inputs (each forced alone through `sdpa_kernel`)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        f(0)
        torch.cuda.synchronize()
    names = " ".join(e.key for e in prof.key_averages()).lower()
    ran = "math"
    for key, backend in [("flash", "flash"), ("cudnn", "cudnn"), ("fmha", "efficient"), ("efficient", "efficient")]:
        if key in names:
            ran = backend
            break
    accepted = []
    for b in [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]:
        try:
            with sdpa_kernel([b]):
                f(0)
            torch.cuda.synchronize()
            accepted.append(b.name.lower())
        except RuntimeError:
            pass
    return f"{ran} (accepts {'/'.join(accepted)})"


def main_kernel(f):
    """The CUDA kernel that took most of `f`'s GPU time (profiler), shortened: shows which
    library path a matmul or conv row ran (cuBLAS/cuDNN, tensor cores or not)."""
    from torch.profiler import ProfilerActivity, profile

    f(0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        f(0)
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    if not kernels:
        return "?"
    top = max(kernels, key=lambda e: e.self_device_time_total)
    return top.key if len(top.key) <= 60 else top.key[:57] + "..."


def channels_last_conv(xs, w, **kw):
    """The same conv as a row's, on channels_last copies of its inputs."""
    xl = [t.to(memory_format=torch.channels_last) for t in xs]
    wl = w.to(memory_format=torch.channels_last)
    return lambda i: torch.nn.functional.conv2d(xl[i % 2], wl, **kw)


def conv_backend(f, f_nhwc):
    """The kernel cuDNN ran, and channels_last's throughput relative to NCHW (cuDNN's f16 tensor
    core kernels prefer NHWC; Kiln's tensors are NCHW, so NCHW is the row's baseline)."""
    nchw, _ = time_op(f)
    nhwc, _ = time_op(f_nhwc)
    return f"{main_kernel(f)}; NHWC {nchw / nhwc:.2f}x of NCHW"


def backend_of(name, f, nhwc):
    """The backend note of a row (None: the row has none); with f None, only whether it has one."""
    kind = (
        "sdpa"
        if name.startswith("attention")
        else "conv"
        if name in nhwc
        else "kernel"
        if name.startswith("matmul")
        else None
    )
    if f is None or kind is None:
        return kind
    note = {
        "sdpa": lambda: sdpa_backend(f),
        "conv": lambda: conv_backend(f, nhwc[name]),
        "kernel": lambda: main_kernel(f),
    }[kind]
    try:
        return note()
    except Exception as e:  # a note must not cost the row its measurement
        return f"? ({type(e).__name__}: {e})"[:80]


def main():
    out = []
    big = (1 << 18) if quick else (64 << 20)
    rows, cols = (256, 1024) if quick else (16384, 4096)
    mm = 256 if quick else 4096
    x, y = pair([big], seed=1), pair([big], seed=3)
    size = f"{big * 4 >> 20} MiB f32"
    F = torch.nn.functional
    benches = [
        ("relu", size, 8.0 * big, 0, lambda i: torch.relu(x[i % 2])),
        ("exp", size, 8.0 * big, 0, lambda i: torch.exp(x[i % 2])),
        ("gelu", size, 8.0 * big, 0, lambda i: F.gelu(x[i % 2])),
        ("add", size, 12.0 * big, 0, lambda i: x[i % 2] + y[i % 2]),
        ("mul_scalar", size, 8.0 * big, 0, lambda i: x[i % 2] * 1.5),
    ]
    m = pair([rows, cols], seed=5)
    ms, mb = f"{rows}x{cols} f32", 4.0 * rows * cols
    w, b = rand([cols], seed=9), rand([cols], seed=10)
    benches += [
        ("sum_rows", ms, mb, 0, lambda i: m[i % 2].sum(-1)),
        ("sum_all", ms, mb, 0, lambda i: m[i % 2].sum()),
        ("mean_rows", ms, mb, 0, lambda i: m[i % 2].mean(-1)),
        ("max_rows", ms, mb, 0, lambda i: m[i % 2].amax(-1)),
        ("sum_cols", ms, mb, 0, lambda i: m[i % 2].sum(0)),
        ("softmax", ms, 2 * mb, 0, lambda i: torch.softmax(m[i % 2], -1)),
        ("layer_norm", ms, 2 * mb, 0, lambda i: F.layer_norm(m[i % 2], (cols,), w, b, 1e-5)),
        ("rms_norm", ms, 2 * mb, 0, lambda i: F.rms_norm(m[i % 2], (cols,), w, 1e-5)),
    ]
    for dt, name in [(torch.float32, "matmul_f32"), (torch.float16, "matmul_f16")]:
        a, bm = pair([mm, mm], dt, 11), pair([mm, mm], dt, 13)
        benches.append((name, f"{mm}x{mm}x{mm}", 0, 2.0 * mm**3, lambda i, a=a, bm=bm: a[i % 2] @ bm[i % 2]))
    r = 200 if quick else 4000
    ar, bmr = pair([r, r], torch.float16, 11), pair([r, r], torch.float16, 13)
    benches.append(("matmul_f16_ragged", f"{r}x{r}x{r}", 0, 2.0 * r**3, lambda i: ar[i % 2] @ bmr[i % 2]))
    bt, n = (4, 128) if quick else (32, 1024)
    a, bm = pair([bt, n, n], seed=15), pair([bt, n, n], seed=17)
    benches.append(("matmul_batched_f32", f"{bt}x{n}x{n}x{n}", 0, 2.0 * bt * n**3, lambda i: a[i % 2] @ bm[i % 2]))
    a16, bm16 = pair([bt, n, n], torch.float16, 15), pair([bt, n, n], torch.float16, 17)
    benches.append(
        ("matmul_batched_f16", f"{bt}x{n}x{n}x{n}", 0, 2.0 * bt * n**3, lambda i: a16[i % 2] @ bm16[i % 2])
    )
    nhwc = {}  # conv row -> the same conv in channels_last (for the backend note)
    for dt, sfx in [(torch.float32, ""), (torch.float16, "_f16")]:
        nb, c, hw = (2, 16, 14) if quick else (32, 64, 56)
        xc, wc = pair([nb, c, hw, hw], dt, 19), rand([c, c, 3, 3], dt, 21)
        benches.append(
            (
                "conv2d_3x3" + sfx,
                f"{nb}x{c}x{hw}x{hw} k3 p1",
                0,
                2.0 * nb * c * hw * hw * c * 9,
                lambda i, xc=xc, wc=wc: F.conv2d(xc[i % 2], wc, padding=1),
            )
        )
        nhwc["conv2d_3x3" + sfx] = channels_last_conv(xc, wc, padding=1)
        # Other conv shapes, the same rows as cli/src/bench.rs: (name, C, O, kernel, stride, padding, groups).
        for name, ci, o, k, st, pd, g in [
            ("conv2d_1x1", c, 4 * c, 1, 1, 0, 1),
            ("conv2d_3x3_s2", c, 2 * c, 3, 2, 1, 1),
            ("conv2d_3x3_g4", c, c, 3, 1, 1, 4),
            ("conv2d_dw3x3", 2 * c, 2 * c, 3, 1, 1, 2 * c),
        ]:
            xc, wc = pair([nb, ci, hw, hw], dt, 23), rand([o, ci // g, k, k], dt, 25)
            ohw = (hw + 2 * pd - k) // st + 1
            benches.append(
                (
                    name + sfx,
                    f"{nb}x{ci}x{hw}x{hw} o{o} k{k} s{st} p{pd} g{g}",
                    0,
                    2.0 * nb * o * ohw * ohw * (ci // g) * k * k,
                    lambda i, xc=xc, wc=wc, st=st, pd=pd, g=g: F.conv2d(xc[i % 2], wc, stride=st, padding=pd, groups=g),
                )
            )
            nhwc[name + sfx] = channels_last_conv(xc, wc, stride=st, padding=pd, groups=g)
    benches += attention_benches(quick)
    for name, sz, nbytes, flops, f in benches:
        if not wanted(name):
            continue
        s, wall = time_op(f)
        out.append(
            {
                "op": name,
                "size": sz,
                "seconds": s,
                "timer": "gpu",
                "gpu_seconds": s,
                "wall_seconds": wall,
                "gbps": nbytes / s / 1e9 if nbytes else None,
                "tflops": flops / s / 1e12 if flops else None,
                **({"backend": backend_of(name, f, nhwc)} if backend_of(name, None, nhwc) else {}),
            }
        )
    # 1000 dependent tiny ops, then one read.
    samples = []
    for _ in range(max(reps, 3)):
        xs = torch.zeros(256, device=dev)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(1000):
            xs = xs + 1.0
        xs.cpu()
        samples.append((time.perf_counter() - t) / 1000)
    s = float(np.median(samples))
    out.append({"op": "small_ops_1000", "size": "256 f32", "seconds": s, "us_per_op": s * 1e6})
    # One tiny op, then wait for it: the round trip an interactive caller pays.
    xs = torch.zeros(256, device=dev)
    torch.cuda.synchronize()
    samples = []
    for _ in range(200):
        t = time.perf_counter()
        _ys = xs + 1.0
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - t)
    s = float(np.median(samples))
    out.append({"op": "latency_1op", "size": "256 f32", "seconds": s, "us_per_op": s * 1e6})
    n = (1 << 20) if quick else (64 << 20)
    host = np.arange(n, dtype=np.float32)
    up, down = [], []
    for _ in range(reps):
        t = time.perf_counter()
        g = torch.from_numpy(host).to(dev)
        torch.cuda.synchronize()
        up.append(time.perf_counter() - t)
        t = time.perf_counter()
        g.cpu()
        down.append(time.perf_counter() - t)
    for name, s in [("upload", float(np.median(up))), ("readback", float(np.median(down)))]:
        out.append({"op": name, "size": f"{n * 4 >> 20} MiB", "seconds": s, "gbps": 4.0 * n / s / 1e9})
    minilm = sys.argv[sys.argv.index("--minilm") + 1] if "--minilm" in sys.argv else "build/models/all-MiniLM-L6-v2"
    if wanted("embed") and os.path.exists(os.path.join(minilm, "model.safetensors")):
        from torch_embed import bench_embed

        out += bench_embed(minilm, quick, reps)
    if wanted("llm") and "--smollm2" in sys.argv:
        from torch_llm import bench_llm

        out += bench_llm(sys.argv[sys.argv.index("--smollm2") + 1], quick, reps)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": out}
    path = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    if path:
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=2)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
