#!/usr/bin/env python3
"""Writes the cross-language conformance vectors: for every op of kiln_core::ops::op_table() (and
custom kernels) at least three cases (typical, edge, larger than a workgroup), each with its
inputs and the expected output computed here with numpy in float64 (never through Kiln) and
rounded to the output dtype, plus a tolerance.

    gen.py --out tests/conformance/out [--seed N]

Writes OUT/manifest.json (the canonical manifest), OUT/manifest.txt (the same cases in a
line format for the C, Elixir and Julia runners; see FORMAT.md) and OUT/data/*.bin (raw
little-endian tensors) and OUT/data/*.wgsl (custom kernel sources).
"""

import argparse
import json
import math
import os
import shutil
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32, "bool": np.bool_}
LE = {"f32": "<f4", "f16": "<f2", "i32": "<i4", "u32": "<u4", "bool": "|b1"}


def op_names():
    """kiln-core's op table (kiln_core::ops::op_table), as `kiln-gen` writes it to ops.json."""
    return [o["name"] for o in json.load(open(os.path.join(HERE, "ops.json")))["ops"]]


# ---------------------------------------------------------------------------------------------
# The independent reference for the Philox random generator (Random123 philox4x32_R(10)).

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK = np.uint64(0xFFFFFFFF)


def philox_stream(seed, n):
    """Words 0..n-1 of the stream: element e is word e % 4 of the block for counter (e/4,0,0,0)."""
    blocks = (n + 3) // 4
    c0 = np.arange(blocks, dtype=np.uint64)
    c1 = np.zeros(blocks, np.uint64)
    c2 = np.zeros(blocks, np.uint64)
    c3 = np.zeros(blocks, np.uint64)
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0 = M0 * c0
        p1 = M1 * c2
        h0, l0 = p0 >> np.uint64(32), p0 & MASK
        h1, l1 = p1 >> np.uint64(32), p1 & MASK
        c0, c1, c2, c3 = h1 ^ c1 ^ np.uint64(k0), l1, h0 ^ c3 ^ np.uint64(k1), l0
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    words = np.stack([c0, c1, c2, c3], axis=1).reshape(-1)[:n]
    return words.astype(np.uint32)


def _philox_kat():
    """Random123 kat_vectors for philox4x32 10 (counter 0, key 0)."""
    w = philox_stream(0, 4)
    assert [int(v) for v in w] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8], [hex(v) for v in w]


def uniform_ref(n, dtype, seed, low, high):
    lo = np.float32(low)
    span = np.float32(high - low)
    if dtype == "f16":
        h = np.float16(high)
        cap = np.nextafter(h, np.float16(-np.inf)) if float(h) >= high else h
        cap = np.float32(cap)
    else:
        h = np.float32(high)
        cap = np.nextafter(h, np.float32(-np.inf)) if float(h) >= high else h
    cap = max(np.float32(cap), lo)
    w = philox_stream(seed, n)
    u = ((w >> np.uint32(8)).astype(np.float64) / float(1 << 24)).astype(np.float32)
    # v = min(f32(span * u) + low, cap): multiply and add rounded separately, in float32
    # (core keeps them unfused so that every device gives the same bits).
    t = (np.float32(span) * u).astype(np.float32)
    v = np.minimum((t + np.float32(lo)).astype(np.float32), np.float32(cap))
    return v.astype(NP[dtype])


def normal_ref(n, dtype, seed, mean, std):
    m = n + (n % 2)
    w = philox_stream(seed, m).astype(np.float64)
    w0, w1 = w[0::2], w[1::2]
    u1 = (np.floor(w0 / 256.0) + 1.0) / float(1 << 24)
    th = 2.0 * math.pi * (np.floor(w1 / 256.0) / float(1 << 24) - 0.5)
    r = np.sqrt(-2.0 * np.log(u1))
    z = np.stack([r * np.cos(th), r * np.sin(th)], axis=1).reshape(-1)[:n]
    mf, sf = float(np.float32(mean)), float(np.float32(std))
    return mf + sf * z


# ---------------------------------------------------------------------------------------------
# numpy references (float64) for the rest of the op set.

def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x.astype(np.float64)


def limit_at_neg_inf(f):
    """gelu, gelu_tanh, silu: their limit -0 at -inf (the formulas give -inf * 0 = NaN there)."""
    return lambda x: np.where(x == -np.inf, -0.0, f(x))


def maximum_ref(a, b):
    """numpy's maximum: NaN if either is NaN, else the larger; on a tie (-0, +0) the second
    operand (numpy 2's result; the Array API leaves the sign of zero there open)."""
    return np.where(np.isnan(a) | np.isnan(b), np.nan, np.where(a > b, a, b))


def minimum_ref(a, b):
    return np.where(np.isnan(a) | np.isnan(b), np.nan, np.where(a < b, a, b))


UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: maximum_ref(x, np.zeros_like(x)),
    "gelu": limit_at_neg_inf(lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))),
    "gelu_tanh": limit_at_neg_inf(lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))),
    "silu": limit_at_neg_inf(lambda x: x / (1.0 + np.exp(-x))),
}
# Input ranges where each unary op is well defined.
UNARY_RANGE = {"log": (0.05, 6.0), "sqrt": (0.0, 9.0), "rsqrt": (0.05, 9.0), "exp": (-6.0, 6.0)}

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "maximum": maximum_ref,
    "minimum": minimum_ref,
    "eq": lambda a, b: (a == b).astype(np.float64),
    "ne": lambda a, b: (a != b).astype(np.float64),
    "lt": lambda a, b: (a < b).astype(np.float64),
    "le": lambda a, b: (a <= b).astype(np.float64),
    "gt": lambda a, b: (a > b).astype(np.float64),
    "ge": lambda a, b: (a >= b).astype(np.float64),
}
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}

# Special values (IEEE 754 / the Array API standard's special cases): signed zeros, infinities,
# NaN, the largest finite values, the smallest normals and subnormals, negative bases for pow.
# The runners tell -0 from +0 and need NaN where NaN is expected.
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)
UNARY_SPECIALS = {
    "f32": [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-3, -1e-3, 1e-10, -1e-10, 10.0, -10.0,
            88.0, -88.0, 100.0, -100.0, 1.5707964, 3.1415927, -4.712389, 1e10, -1e10, 7.93e14, 1e30, -1e30, 3e38, -3e38,
            F32_MAX, -F32_MAX, F32_TINY, -F32_TINY, 1e-40, -1e-40, 1.4e-45, -1.4e-45],
    "f16": [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-3, -1e-3, 10.0, -10.0, 11.0, 12.0,
            -20.0, 100.0, -100.0, 1000.0, 65504.0, -65504.0, 6.103515625e-05, -6.103515625e-05, 5.96e-08, -5.96e-08, 1e-06],
}
# Binary operands: no subnormals (a GPU may read them as zero in arithmetic, which WGSL allows;
# the core tests cover them where the device keeps them).
BINARY_SPECIALS = {
    "f32": [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, -2.5, 33.0, -33.0,
            1e4, -7.0, F32_MAX, -F32_MAX, F32_TINY, 1e10, 16777215.0, -16777215.0, 16777216.0],
    "f16": [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, -2.5, 33.0, -33.0,
            -7.0, 65504.0, -65504.0, 6.103515625e-05, 2049.0, -2049.0],
}


def conv2d_ref(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    ph, pw = padding
    dh, dw = dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    out = np.zeros((n, o, max(oh, 0), max(ow, 0)))
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
                wt = w[g * og:(g + 1) * og, :, i, j]  # [og, cg]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wt)
    if b is not None:
        out += b[None, :, None, None]
    return out


def pool_ref(x, kernel, stride, padding, kind):
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = stride
    ph, pw = padding
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    fillv = -np.inf if kind == "max" else 0.0
    xp = np.full((n, c, h + 2 * ph, w + 2 * pw), fillv)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    wins = np.stack([xp[:, :, i: i + sh * (oh - 1) + 1: sh, j: j + sw * (ow - 1) + 1: sw] for i in range(kh) for j in range(kw)])
    return wins.max(axis=0) if kind == "max" else wins.sum(axis=0) / (kh * kw)


def softmax_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def rope_ref(x, pos_offset, base):
    L, D = x.shape[-2], x.shape[-1]
    h = D // 2
    out = x.copy()
    if h == 0 or L == 0:
        return out
    pos = (pos_offset + np.arange(L, dtype=np.float64))[:, None]
    theta = pos * np.power(float(base), -2.0 * np.arange(h, dtype=np.float64) / D)[None, :]
    s, c = np.sin(theta), np.cos(theta)
    x0, x1 = x[..., :h], x[..., h:2 * h]
    out[..., :h] = x0 * c - x1 * s
    out[..., h:2 * h] = x1 * c + x0 * s
    return out


def attention_ref(q, k, v, causal, scale):
    d = q.shape[-1]
    sc = (1.0 / math.sqrt(d)) if scale is None else float(np.float32(scale))
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * sc
    if causal:
        lq, lk = s.shape[-2], s.shape[-1]
        mask = np.arange(lk)[None, :] > np.arange(lq)[:, None]
        s = np.where(mask, -np.inf, s)
    return np.matmul(softmax_ref(s, -1), v)


def gather_ref(x, axis, index):
    ax = axis % x.ndim
    idx = list(np.indices(index.shape, sparse=True))
    idx[ax] = index.astype(np.int64)
    return x[tuple(idx)]


# ---------------------------------------------------------------------------------------------
# Case building

class Gen:
    def __init__(self, out, seed):
        self.out = out
        self.rng = np.random.default_rng(seed)
        self.cases = []
        self.data = os.path.join(out, "data")

    def rand(self, shape, dtype="f32", lo=-2.0, hi=2.0):
        if dtype in ("i32", "u32"):
            return self.rng.integers(int(lo), int(hi) + 1, size=shape).astype(NP[dtype])
        return self.rng.uniform(lo, hi, size=shape).astype(NP[dtype])

    def write(self, name, arr, dtype):
        path = os.path.join(self.data, name)
        np.ascontiguousarray(arr, dtype=LE[dtype]).tofile(path)
        return "data/" + name

    def case(self, cid, op, params, inputs, expected, out_dtype, tol):
        """inputs: list of (name, array, dtype); expected: float64 values (rounded here)."""
        assert all(c["id"] != cid for c in self.cases), cid
        ins = []
        for name, arr, dt in inputs:
            arr = np.asarray(arr)
            ins.append({"name": name, "dtype": dt, "shape": list(arr.shape), "file": self.write(f"{cid}.{name}.bin", arr, dt)})
        exp = np.asarray(expected)
        if out_dtype in ("i32", "u32", "bool"):
            e = exp.astype(NP[out_dtype])
        else:
            with np.errstate(over="ignore"):  # past the dtype's range: inf, as intended
                e = exp.astype(np.float64).astype(NP[out_dtype])
        atol, rtol = tol
        self.cases.append({
            "id": cid,
            "op": op,
            "params": params,
            "inputs": ins,
            "expected": {"dtype": out_dtype, "shape": list(e.shape), "file": self.write(f"{cid}.expected.bin", e, out_dtype)},
            "atol": float(atol),
            "rtol": float(rtol),
        })


def ftol(dt, scale=1.0):
    return (1e-5 * scale, 1e-5 * scale) if dt == "f32" else ((0.0, 0.0) if dt in ("i32", "u32", "bool") else (2e-3 * scale, 2e-3 * scale))


def f64(a):
    return np.asarray(a).astype(np.float64)


def build(g):
    # ---- creation
    for cid, shape, dt in [("typical", [3, 5], "f32"), ("edge_empty", [0, 4], "f32"), ("large_i32", [1031], "i32"), ("edge_f16", [7], "f16")]:
        g.case(f"zeros.{cid}", "zeros", {"shape": shape, "dtype": dt}, [], np.zeros(shape), dt, (0, 0))
        g.case(f"ones.{cid}", "ones", {"shape": shape, "dtype": dt}, [], np.ones(shape), dt, (0, 0))
    for cid, shape, dt, v in [("typical", [4, 6], "f32", 2.5), ("edge_scalar", [], "f32", -1.25), ("large_u32", [3, 1, 257], "u32", 7.0),
                              ("edge_f16", [13], "f16", 0.333), ("neg_i32", [5], "i32", -3.0)]:
        g.case(f"full.{cid}", "full", {"shape": shape, "dtype": dt, "value": v}, [], np.full(shape, v), dt, ftol(dt) if dt == "f16" else (0, 0))
    for cid, (a, b, s, dt) in {"typical": (0.0, 10.0, 1.0, "f32"), "edge_empty": (5.0, 5.0, 1.0, "f32"), "neg_step_i32": (10.0, -7.0, -3.0, "i32"),
                               "large": (-3.0, 600.0, 0.5, "f32"), "f16": (0.0, 2.0, 0.125, "f16"), "u32": (2.0, 1031.0, 1.0, "u32")}.items():
        n = max(int(math.ceil((b - a) / s)), 0)
        want = a + np.arange(n, dtype=np.float64) * s
        g.case(f"arange.{cid}", "arange", {"start": a, "stop": b, "step": s, "dtype": dt}, [], want, dt, ftol(dt))

    # ---- random (counter-based: expected values from the numpy Philox above)
    for cid, shape, dt, seed, lo, hi in [("typical", [4, 8], "f32", 42, 0.0, 1.0), ("edge_one", [1], "f32", 0, -3.0, 5.5),
                                          ("large_prime", [1031], "f32", (1 << 40) + 7, -1.0, 1.0), ("edge_f16", [3, 7], "f16", 7, 2.0, 3.0),
                                          ("edge_empty", [0], "f32", 1, 0.0, 1.0), ("narrow", [2, 129], "f32", 123456789, 1e-3, 2e-3)]:
        n = int(np.prod(shape))
        want = uniform_ref(n, dt, seed, lo, hi).reshape(shape)
        tol = (0.0, 0.0) if dt == "f32" else ftol(dt)  # f32 is bit-exact
        g.case(f"random_uniform.{cid}", "random_uniform", {"shape": shape, "dtype": dt, "seed": seed, "low": lo, "high": hi}, [], f64(want), dt, tol)
    for cid, shape, dt, seed, m, s in [("typical", [4, 8], "f32", 42, 0.0, 1.0), ("edge_odd", [7], "f32", 3, 2.0, 0.5),
                                        ("large", [3, 345], "f32", (1 << 33) + 1, -1.0, 3.0), ("edge_f16", [2, 5], "f16", 9, 0.0, 1.0),
                                        ("edge_empty", [2, 0], "f32", 5, 0.0, 1.0)]:
        n = int(np.prod(shape))
        want = normal_ref(n, dt, seed, m, s).reshape(shape)
        tol = (2e-5 * (s + 1.0), 1e-5) if dt == "f32" else (2e-3 * (s + 1.0), 2e-3)
        g.case(f"random_normal.{cid}", "random_normal", {"shape": shape, "dtype": dt, "seed": seed, "mean": m, "std": s}, [], want, dt, tol)

    # ---- unary
    for op, f in UNARY.items():
        lo, hi = UNARY_RANGE.get(op, (-3.0, 3.0))
        for cid, shape, dt in [("typical", [6, 7], "f32"), ("edge_empty", [0], "f32"), ("edge_one", [1], "f32"),
                               ("large_prime", [3, 1, 257], "f32"), ("edge_f16", [13, 17], "f16")]:
            x = g.rand(shape, dt, lo, hi)
            sc = 4.0 if op in ("gelu", "gelu_tanh", "tanh", "exp", "sigmoid", "silu", "sin", "cos") else 1.0
            atol, rtol = ftol(dt, sc)
            if op == "exp":
                rtol = max(rtol, 2e-5 if dt == "f32" else 2e-3)
            g.case(f"{op}.{cid}", op, {}, [("x", x, dt)], f(f64(x)), dt, (atol, rtol))
        if op in ("neg", "abs", "relu"):
            x = g.rand([5, 9], "i32", -50, 50)
            g.case(f"{op}.i32", op, {}, [("x", x, "i32")], f(f64(x)), "i32", (0, 0))
        for dt, vals in UNARY_SPECIALS.items():
            x = np.array(vals, dtype=NP[dt])
            with np.errstate(all="ignore"):
                want = f(f64(x))
            sc = 4.0 if op in ("gelu", "gelu_tanh", "tanh", "exp", "sigmoid", "silu", "sin", "cos") else 1.0
            g.case(f"{op}.special_{dt}", op, {}, [("x", x, dt)], want, dt, ftol(dt, sc))

    # ---- binary and comparisons
    for op, f in BINARY.items():
        cmp_ = op in COMPARE
        lo, hi = ((0.2, 3.0) if op == "pow" else (-3.0, 3.0))
        shapes = [("typical", [5, 6], [5, 6], "f32"), ("edge_broadcast", [3, 1, 7], [4, 1], "f32"),
                  ("edge_empty", [0, 3], [1, 3], "f32"), ("large_prime", [1031], [1031], "f32"), ("edge_f16", [13, 17], [17], "f16")]
        for cid, sa, sb, dt in shapes:
            a = g.rand(sa, dt, lo, hi)
            b = g.rand(sb, dt, (0.5 if op in ("div",) else lo), hi)
            if op == "pow":
                b = g.rand(sb, dt, -2.0, 2.0)
            if op == "div":
                b = (b * np.where(g.rng.random(sb) < 0.5, -1, 1)).astype(NP[dt])
            if cmp_ or op in ("maximum", "minimum"):
                # Quantised values so that equal elements occur.
                a = (np.round(f64(a))).astype(NP[dt])
                b = (np.round(f64(b))).astype(NP[dt])
            want = f(f64(a), f64(b))
            out_dt = "bool" if cmp_ else dt
            sc = 4.0 if op in ("pow", "div") else 1.0
            g.case(f"{op}.{cid}", op, {}, [("a", a, dt), ("b", b, dt)], want, out_dt, ftol(out_dt, sc))
        # The scalar forms, scalar on the right and on the left (argument order matters).
        a = g.rand([4, 9], "f32", lo, hi)
        s = 1.5 if op != "pow" else 0.5
        if cmp_:
            a = np.round(f64(a)).astype(np.float32)
            s = 1.0
        out_dt = "bool" if cmp_ else "f32"
        g.case(f"{op}.scalar", op, {"scalar": s, "scalar_first": False}, [("a", a, "f32")], f(f64(a), s), out_dt, ftol(out_dt, 4.0))
        a2 = g.rand([4, 9], "f32", 0.5, 3.0) if op in ("div", "pow") else a
        g.case(f"{op}.scalar_first", op, {"scalar": s if op != "pow" else 2.0, "scalar_first": True}, [("a", a2, "f32")],
               f(np.float64(s if op != "pow" else 2.0), f64(a2)), out_dt, ftol(out_dt, 4.0))
        if op in ("add", "sub", "mul", "maximum", "minimum", "lt", "eq"):
            a = g.rand([6, 5], "i32", -100, 100)
            b = g.rand([5], "i32", -100, 100)
            out_dt = "bool" if cmp_ else "i32"
            g.case(f"{op}.i32", op, {}, [("a", a, "i32"), ("b", b, "i32")], f(f64(a), f64(b)), out_dt, (0, 0))
        # Every pair of special values: a as a column against b as a row.
        for dt, vals in BINARY_SPECIALS.items():
            v = np.array(vals, dtype=NP[dt])
            a, b = v.reshape(-1, 1), v
            with np.errstate(all="ignore"):
                want = f(f64(a), f64(b))
            out_dt = "bool" if cmp_ else dt
            g.case(f"{op}.special_{dt}", op, {}, [("a", a, dt), ("b", b, dt)], want, out_dt, ftol(out_dt, 4.0))

    # ---- integer division is numpy's floor division (x // 0 = 0, i32 min // -1 wraps)
    i32min = -2 ** 31
    a = np.array([7, -7, 7, -7, 5, -5, 0, i32min, i32min, 2 ** 31 - 1, -1, 6, -6], np.int32)
    b = np.array([2, 2, -2, -2, 0, 0, 0, -1, 1, -1, 3, 3, 3], np.int32)
    with np.errstate(all="ignore"):
        g.case("div.i32_floor", "div", {}, [("a", a, "i32"), ("b", b, "i32")], np.floor_divide(a, b), "i32", (0, 0))
        a, b = g.rand([4, 257], "i32", -100000, 100000), g.rand([257], "i32", -5, 5)
        g.case("div.i32_floor_large", "div", {}, [("a", a, "i32"), ("b", b, "i32")], np.floor_divide(a, b), "i32", (0, 0))
        a = np.array([7, 0, 2 ** 32 - 1, 9, 2 ** 31], np.uint32)
        b = np.array([2, 0, 0, 10, 3], np.uint32)
        g.case("div.u32", "div", {}, [("a", a, "u32"), ("b", b, "u32")], np.floor_divide(a, b), "u32", (0, 0))
        a = np.array([7, -7, 0, 9], np.int32)
        g.case("div.i32_scalar", "div", {"scalar": -2.0, "scalar_first": False}, [("a", a, "i32")], np.floor_divide(a, np.int32(-2)), "i32", (0, 0))
        # ---- integer power: numpy's, wrapping modulo 2^32
        a = np.array([0, 0, 2, -2, -3, 3, 7, 5, i32min, -1], np.int32)
        b = np.array([0, 5, 10, 3, 3, 40, 0, 31, 2, 7], np.int32)
        g.case("pow.i32", "pow", {}, [("a", a, "i32"), ("b", b, "i32")], np.power(a, b), "i32", (0, 0))
        a = np.array([0, 3, 2, 4000000000, 1], np.uint32)
        b = np.array([0, 40, 32, 2, 2 ** 32 - 1], np.uint32)
        g.case("pow.u32", "pow", {}, [("a", a, "u32"), ("b", b, "u32")], np.power(a, b), "u32", (0, 0))
    # A negative integer exponent, which numpy refuses: Kiln's documented rule, the integer
    # part of 1 / x^|y| (1 for x = 1, +-1 for x = -1, else 0).
    a = np.array([1, -1, -1, 2, -2, 0, 7], np.int32)
    b = np.array([-3, -3, -4, -1, -1, -1, -2], np.int32)
    g.case("pow.i32_negative_exponent", "pow", {}, [("a", a, "i32"), ("b", b, "i32")], np.array([1, -1, 1, 0, 0, 0, 0]), "i32", (0, 0))
    # Negative bases with whole exponents (and a fractional one: NaN), the scalar forms too.
    a = np.array([-2.0, -2.0, -3.0, -1.5, -0.0, -0.0, 0.0, np.nan, 1.0, -8.0], np.float32)
    b = np.array([3.0, 2.0, 3.0, -2.0, 3.0, -3.0, 0.0, 0.0, np.nan, 1.0 / 3.0], np.float32)
    with np.errstate(all="ignore"):
        g.case("pow.negative_base", "pow", {}, [("a", a, "f32"), ("b", b, "f32")], np.power(f64(a), f64(b)), "f32", ftol("f32"))
        g.case("pow.scalar_square_negative", "pow", {"scalar": 2.0, "scalar_first": False}, [("a", a, "f32")], np.power(f64(a), 2.0), "f32", ftol("f32"))
        g.case("pow.scalar_cube_negative", "pow", {"scalar": 3.0, "scalar_first": False}, [("a", a, "f32")], np.power(f64(a), 3.0), "f32", ftol("f32"))
        g.case("pow.scalar_first_negative", "pow", {"scalar": -2.0, "scalar_first": True}, [("a", a, "f32")], np.power(-2.0, f64(a)), "f32", ftol("f32"))
    # where: a NaN condition is true (numpy's truthiness), -0 false.
    c = np.array([np.nan, 0.0, -0.0, 1.0, -np.inf], np.float32)
    a, b = g.rand([5], "f32"), g.rand([5], "f32")
    g.case("where.nan_cond", "where", {}, [("cond", c, "f32"), ("a", a, "f32"), ("b", b, "f32")], np.where(c != 0, f64(a), f64(b)), "f32", (0, 0))

    # ---- where
    for cid, sc_, sa, sb, dt in [("typical", [4, 5], [4, 5], [4, 5], "f32"), ("edge_broadcast", [3, 1], [1, 7], [7], "f32"),
                                 ("edge_empty", [0, 2], [0, 2], [2], "f32"), ("large", [1031], [1031], [1], "f32"), ("edge_f16", [5, 3], [5, 3], [3], "f16")]:
        c = (g.rng.random(sc_) < 0.5).astype(np.uint32)
        a, b = g.rand(sa, dt), g.rand(sb, dt)
        g.case(f"where.{cid}", "where", {}, [("cond", c, "u32"), ("a", a, dt), ("b", b, dt)], np.where(c != 0, f64(a), f64(b)), dt, (0, 0))
    c = g.rand([9], "i32", -2, 2)
    a, b = g.rand([9], "i32", -9, 9), g.rand([9], "i32", -9, 9)
    g.case("where.i32_cond", "where", {}, [("cond", c, "i32"), ("a", a, "i32"), ("b", b, "i32")], np.where(c != 0, f64(a), f64(b)), "i32", (0, 0))

    # ---- cast
    x = g.rand([4, 6], "f32", -100.0, 100.0)
    g.case("cast.typical_f32_i32", "cast", {"dtype": "i32"}, [("x", x, "f32")], np.trunc(f64(x)), "i32", (0, 0))
    x = g.rand([1031], "i32", -100000, 100000)
    g.case("cast.large_i32_f32", "cast", {"dtype": "f32"}, [("x", x, "i32")], f64(x), "f32", (0, 0))
    x = g.rand([13, 3], "f32", -4.0, 4.0)
    g.case("cast.edge_f32_f16", "cast", {"dtype": "f16"}, [("x", x, "f32")], f64(x), "f16", ftol("f16"))
    x = g.rand([0], "u32", 0, 9)
    g.case("cast.edge_empty_u32_f32", "cast", {"dtype": "f32"}, [("x", x, "u32")], f64(x), "f32", (0, 0))
    x = g.rand([7], "f32", -3.0, 3.0)
    g.case("cast.same_dtype", "cast", {"dtype": "f32"}, [("x", x, "f32")], f64(x), "f32", (0, 0))

    # ---- matmul
    for cid, sa, sb, dt in [("typical", [8, 12], [12, 5], "f32"), ("edge_vec_mat", [7], [7, 3], "f32"), ("edge_mat_vec", [4, 7], [7], "f32"),
                            ("edge_batch_broadcast", [2, 1, 3, 5], [4, 5, 6], "f32"), ("edge_empty_k", [3, 0], [0, 4], "f32"),
                            ("large", [37, 70], [70, 41], "f32"), ("edge_f16", [9, 16], [16, 11], "f16")]:
        a, b = g.rand(sa, dt, -1, 1), g.rand(sb, dt, -1, 1)
        k = sa[-1]
        tol = (1e-6 * (k + 1), 1e-5) if dt == "f32" else (1e-3 + 2e-5 * k, 2e-3)
        g.case(f"matmul.{cid}", "matmul", {}, [("a", a, dt), ("b", b, dt)], np.matmul(f64(a), f64(b)), dt, tol)

    # ---- reductions
    red = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}
    for op, f in red.items():
        for cid, shape, axes, keep, dt in [("typical", [5, 7], [1], False, "f32"), ("edge_neg_axes_keep", [3, 4, 5], [-1, 0], True, "f32"),
                                           ("all", [6, 5], None, False, "f32"), ("large", [3, 1031], [-1], False, "f32"),
                                           ("edge_f16", [4, 13], [0], True, "f16"), ("edge_one", [1], None, True, "f32"),
                                           ("i32", [7, 9], [0], False, "i32")]:
            x = g.rand(shape, dt, -50, 50) if dt == "i32" else g.rand(shape, dt)
            if op == "mean" and dt == "i32":
                continue
            ax = None if axes is None else tuple(axes)
            want = f(f64(x), axis=ax, keepdims=keep)
            n = int(np.prod(shape)) if axes is None else int(np.prod([shape[a] for a in axes]))
            atol, rtol = ftol(dt)
            if op == "sum" and dt != "i32":
                atol += (1.2e-7 if dt == "f32" else 1e-3) * n * 2
            g.case(f"{op}.{cid}", op, {"axes": axes, "keepdims": keep}, [("x", x, dt)], want, dt, (atol, rtol))
    for cid, shape, axes, keep, ddof, dt in [("typical", [5, 7], [1], False, 0, "f32"), ("edge_ddof1_neg", [4, 6, 3], [-2], True, 1, "f32"),
                                             ("all", [9, 4], None, False, 0, "f32"), ("large", [2, 777], [1], False, 1, "f32"),
                                             ("edge_f16", [3, 11], [1], False, 0, "f16")]:
        x = g.rand(shape, dt)
        ax = None if axes is None else tuple(axes)
        want = np.var(f64(x), axis=ax, ddof=ddof, keepdims=keep)
        atol, rtol = ftol(dt, 4.0)
        g.case(f"var.{cid}", "var", {"axes": axes, "keepdims": keep, "ddof": ddof}, [("x", x, dt)], want, dt, (atol, rtol))
    for op, f in (("argmax", np.argmax), ("argmin", np.argmin)):
        for cid, shape, axis, keep, dt in [("typical", [5, 7], 1, False, "f32"), ("flat", [4, 6], None, False, "f32"),
                                           ("edge_neg_axis_keep", [3, 4, 5], -2, True, "f32"), ("large", [2, 1031], -1, False, "f32"),
                                           ("edge_f16", [6, 9], 0, False, "f16"), ("i32", [4, 10], 1, True, "i32")]:
            x = g.rand(shape, dt, -1000, 1000) if dt == "i32" else g.rand(shape, dt)
            if dt == "i32":
                x = g.rng.permutation(np.arange(-20, 20)).astype(np.int32).reshape(shape)
            if dt == "f16":
                x = (g.rng.permutation(54) / 8.0 - 3).astype(np.float16).reshape(shape)  # no ties
            want = f(f64(x), axis=axis, keepdims=keep)
            g.case(f"{op}.{cid}", op, {"axis": axis, "keepdims": keep}, [("x", x, dt)], want, "i32", (0, 0))

    # ---- normalisation
    for op in ("softmax", "log_softmax"):
        for cid, shape, axis, dt in [("typical", [4, 9], -1, "f32"), ("edge_axis0", [5, 3], 0, "f32"), ("edge_one", [1], 0, "f32"),
                                     ("large", [3, 1031], 1, "f32"), ("edge_f16", [6, 17], -1, "f16"), ("middle_axis", [2, 7, 3], -2, "f32")]:
            x = g.rand(shape, dt, -4, 4)
            s = softmax_ref(f64(x), axis)
            want = s if op == "softmax" else np.log(s)
            g.case(f"{op}.{cid}", op, {"axis": axis}, [("x", x, dt)], want, dt, ftol(dt, 4.0))
    for cid, shape, w, b, eps, dt in [("typical", [4, 16], True, True, 1e-5, "f32"), ("edge_no_affine", [3, 7], False, False, 1e-5, "f32"),
                                      ("edge_one", [5, 1], True, False, 1e-3, "f32"), ("large", [3, 1031], True, True, 1e-5, "f32"),
                                      ("edge_f16", [2, 24], True, True, 1e-3, "f16")]:
        x = g.rand(shape, dt, -3, 3)
        n = shape[-1]
        ins = [("x", x, dt)]
        ww = g.rand([n], dt, 0.5, 1.5) if w else None
        bb = g.rand([n], dt, -1, 1) if b else None
        if w:
            ins.append(("weight", ww, dt))
        if b:
            ins.append(("bias", bb, dt))
        xf = f64(x)
        m = xf.mean(-1, keepdims=True)
        v = ((xf - m) ** 2).mean(-1, keepdims=True)
        y = (xf - m) / np.sqrt(v + float(np.float32(eps)))
        if w:
            y = y * f64(ww)
        if b:
            y = y + f64(bb)
        g.case(f"layer_norm.{cid}", "layer_norm", {"eps": eps}, ins, y, dt, ftol(dt, 8.0))
    for cid, shape, w, eps, dt in [("typical", [4, 16], True, 1e-6, "f32"), ("edge_no_weight", [3, 5], False, 1e-6, "f32"),
                                   ("edge_one", [1, 1], True, 1e-5, "f32"), ("large", [2, 1031], True, 1e-6, "f32"), ("edge_f16", [3, 20], True, 1e-3, "f16")]:
        x = g.rand(shape, dt, -3, 3)
        n = shape[-1]
        ins = [("x", x, dt)]
        ww = g.rand([n], dt, 0.5, 1.5) if w else None
        if w:
            ins.append(("weight", ww, dt))
        xf = f64(x)
        y = xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + float(np.float32(eps)))
        if w:
            y = y * f64(ww)
        g.case(f"rms_norm.{cid}", "rms_norm", {"eps": eps}, ins, y, dt, ftol(dt, 8.0))
    for cid, shape, w, b, dt in [("typical", [2, 3, 4, 5], True, True, "f32"), ("edge_2d_no_affine", [5, 3], False, False, "f32"),
                                 ("edge_weight_only", [1, 2, 7], True, False, "f32"), ("large", [2, 4, 17, 19], True, True, "f32"),
                                 ("edge_f16", [2, 3, 6], True, True, "f16")]:
        c = shape[1]
        x = g.rand(shape, dt, -3, 3)
        mean, var = g.rand([c], dt, -1, 1), g.rand([c], dt, 0.2, 2.0)
        ins = [("x", x, dt), ("mean", mean, dt), ("var", var, dt)]
        ww = g.rand([c], dt, 0.5, 1.5) if w else None
        bb = g.rand([c], dt, -1, 1) if b else None
        if w:
            ins.append(("weight", ww, dt))
        if b:
            ins.append(("bias", bb, dt))
        bshape = [1, c] + [1] * (len(shape) - 2)
        eps = 1e-5
        y = (f64(x) - f64(mean).reshape(bshape)) / np.sqrt(f64(var).reshape(bshape) + float(np.float32(eps)))
        if w:
            y = y * f64(ww).reshape(bshape)
        if b:
            y = y + f64(bb).reshape(bshape)
        g.case(f"batch_norm.{cid}", "batch_norm", {"eps": eps}, ins, y, dt, ftol(dt, 8.0))

    # ---- convolution and pooling
    for cid, xs, ws, bias, st, pd, dl, gr, dt in [
        ("typical", [1, 3, 8, 8], [4, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], 1, "f32"),
        ("edge_stride_dilation_groups", [2, 4, 9, 7], [6, 2, 2, 3], False, [2, 1], [0, 2], [2, 1], 2, "f32"),
        ("edge_1x1", [1, 1, 1, 1], [1, 1, 1, 1], True, [1, 1], [0, 0], [1, 1], 1, "f32"),
        ("large", [2, 3, 19, 23], [8, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], 1, "f32"),
        ("edge_f16", [1, 2, 6, 6], [3, 2, 3, 3], True, [1, 1], [0, 0], [1, 1], 1, "f16"),
        # Past 2^22 multiply-adds: im2col + matmul inside Kiln.
        ("large_matmul", [2, 16, 30, 29], [24, 16, 3, 3], True, [1, 1], [1, 1], [1, 1], 1, "f32"),
        ("large_matmul_f16", [2, 16, 30, 29], [24, 16, 3, 3], True, [2, 1], [1, 0], [1, 2], 1, "f16"),
    ]:
        x, w = g.rand(xs, dt, -1, 1), g.rand(ws, dt, -1, 1)
        ins = [("x", x, dt), ("w", w, dt)]
        b = g.rand([ws[0]], dt, -1, 1) if bias else None
        if bias:
            ins.append(("bias", b, dt))
        want = conv2d_ref(f64(x), f64(w), None if b is None else f64(b), st, pd, dl, gr)
        taps = ws[1] * ws[2] * ws[3]
        tol = (2e-6 * (taps + 1), 1e-5) if dt == "f32" else (2e-3 + 2e-5 * taps, 2e-3)
        g.case(f"conv2d.{cid}", "conv2d", {"stride": st, "padding": pd, "dilation": dl, "groups": gr}, ins, want, dt, tol)
    for op, kind in (("max_pool2d", "max"), ("avg_pool2d", "avg")):
        for cid, xs, k, st, pd, dt in [("typical", [1, 2, 8, 8], [2, 2], [2, 2], [0, 0], "f32"),
                                       ("edge_pad_odd", [2, 3, 7, 5], [3, 3], [2, 1], [1, 1], "f32"),
                                       ("edge_1x1", [1, 1, 1, 1], [1, 1], [1, 1], [0, 0], "f32"),
                                       ("large", [2, 4, 23, 29], [3, 3], [1, 1], [1, 1], "f32"),
                                       ("edge_f16", [1, 2, 6, 6], [2, 3], [2, 2], [0, 1], "f16")]:
            x = g.rand(xs, dt, -3, 3)
            want = pool_ref(f64(x), k, st, pd, kind)
            tol = (0, 0) if kind == "max" else ftol(dt, 4.0)
            g.case(f"{op}.{cid}", op, {"kernel": k, "stride": st, "padding": pd}, [("x", x, dt)], want, dt, tol)

    # ---- movement
    for cid, xs, new, dt in [("typical", [4, 6], [3, 8], "f32"), ("edge_infer", [2, 3, 5], [-1, 5], "f32"), ("edge_scalar", [1], [], "f32"),
                             ("large_i32", [1031], [1031, 1], "i32"), ("edge_f16", [6, 2], [3, 4], "f16")]:
        x = g.rand(xs, dt, -9, 9)
        g.case(f"reshape.{cid}", "reshape", {"shape": new}, [("x", x, dt)], f64(x).reshape(new), dt, (0, 0))
    for cid, xs, axes, dt in [("typical", [3, 4], [1, 0], "f32"), ("edge_neg_axes", [2, 3, 5], [-1, 0, -2], "f32"),
                              ("edge_one", [1, 1], [1, 0], "f32"), ("large", [4, 5, 67], [2, 0, 1], "f32"), ("edge_f16", [3, 2, 7, 2], [3, 1, 0, 2], "f16")]:
        x = g.rand(xs, dt)
        g.case(f"permute.{cid}", "permute", {"axes": axes}, [("x", x, dt)], np.transpose(f64(x), axes), dt, (0, 0))
    for cid, xs, a0, a1, dt in [("typical", [3, 4], 0, 1, "f32"), ("edge_neg", [2, 3, 5], -1, 0, "f32"), ("edge_same", [4, 2], 1, 1, "f32"),
                                ("large", [7, 300], 0, 1, "f32"), ("edge_f16_u32", [3, 2, 5], -3, -2, "u32")]:
        x = g.rand(xs, dt, 0, 99) if dt == "u32" else g.rand(xs, dt)
        g.case(f"transpose.{cid}", "transpose", {"axis0": a0, "axis1": a1}, [("x", x, dt)], np.swapaxes(f64(x), a0, a1), dt, (0, 0))
    for cid, shapes, axis, dt in [("typical", [[2, 3], [4, 3]], 0, "f32"), ("edge_neg_axis_three", [[2, 1], [2, 5], [2, 0]], -1, "f32"),
                                  ("edge_one", [[1]], 0, "f32"), ("large", [[3, 400], [3, 331]], 1, "f32"), ("edge_f16", [[2, 3, 2], [2, 1, 2]], 1, "f16")]:
        xs = [g.rand(s, dt) for s in shapes]
        g.case(f"concat.{cid}", "concat", {"axis": axis}, [(f"x{i}", x, dt) for i, x in enumerate(xs)],
               np.concatenate([f64(x) for x in xs], axis=axis), dt, (0, 0))
    for cid, xs, axis, start, stop, step, dt in [("typical", [10, 4], 0, 2, 8, 1, "f32"), ("edge_neg_clamp", [5, 9], -1, -7, 100, 3, "f32"),
                                                 ("edge_empty", [6], 0, 4, 2, 1, "f32"), ("large", [2, 1031], 1, 1, 1030, 2, "f32"),
                                                 ("edge_f16", [3, 7], 1, -100, -2, 2, "f16")]:
        x = g.rand(xs, dt)
        sl = [slice(None)] * len(xs)
        sl[axis] = slice(start, stop, step)
        g.case(f"slice.{cid}", "slice", {"axis": axis, "start": start, "stop": stop, "step": step}, [("x", x, dt)], f64(x)[tuple(sl)], dt, (0, 0))
    for cid, xs, axis, idx, idt, dt in [("typical", [6, 4], 0, [5, 0, 2, 2], "i32", "f32"), ("edge_neg_axis_u32", [3, 7], -1, [6, 1], "u32", "f32"),
                                        ("edge_empty", [4, 3], 0, [], "i32", "f32"), ("large", [3, 9], 1, list(range(9)) * 40, "i32", "f32"),
                                        ("edge_f16", [5, 2], 0, [4, 4, 0], "u32", "f16"),
                                        # numpy counts a negative index from the end: -1 the last, -n the first.
                                        ("edge_negative", [4, 5], 1, [-1, -5, 0, -2, 4], "i32", "f32")]:
        x = g.rand(xs, dt)
        i = np.array(idx, dtype=NP[idt])
        g.case(f"index_select.{cid}", "index_select", {"axis": axis}, [("x", x, dt), ("indices", i, idt)], np.take(f64(x), i.astype(np.int64), axis=axis), dt, (0, 0))
    for cid, xs, axis, ishape, idt, dt in [("typical", [4, 5], 0, [3, 5], "i32", "f32"), ("edge_neg_axis_smaller", [3, 6], -1, [2, 4], "u32", "f32"),
                                           ("edge_one", [1], 0, [1], "i32", "f32"), ("large", [3, 400], 1, [3, 401], "i32", "f32"),
                                           ("edge_f16", [2, 3, 4], 1, [2, 5, 4], "i32", "f16"),
                                           # issue 28: take_along_axis read -1 as 0. Indices in [-n, n), as numpy allows.
                                           ("edge_negative", [4, 5], 1, [4, 7], "i32", "f32"),
                                           ("edge_negative_axis0", [3, 2, 4], 0, [5, 2, 4], "i32", "f32")]:
        x = g.rand(xs, dt)
        ax = axis % len(xs)
        lo = -xs[ax] if cid.startswith("edge_negative") else 0
        index = g.rng.integers(lo, xs[ax], size=ishape).astype(NP[idt])
        want = np.take_along_axis(f64(x), index.astype(np.int64), axis=axis) if lo else gather_ref(f64(x), axis, index)
        g.case(f"gather.{cid}", "gather", {"axis": axis}, [("x", x, dt), ("index", index, idt)], want, dt, (0, 0))

    # ---- nn
    for cid, v, _d, ishape, idt, dt in [("typical", [10, 8], None, [5], "i32", "f32"), ("edge_2d_ids_u32", [7, 3], None, [2, 3], "u32", "f32"),
                                       ("edge_empty", [4, 2], None, [0], "i32", "f32"), ("large", [50, 33], None, [40], "i32", "f32"),
                                       ("edge_f16", [6, 4], None, [3, 1], "i32", "f16")]:
        w = g.rand(v, dt)
        ids = g.rng.integers(0, v[0], size=ishape).astype(NP[idt])
        g.case(f"embedding.{cid}", "embedding", {}, [("weight", w, dt), ("ids", ids, idt)], f64(w)[ids.astype(np.int64)], dt, (0, 0))
    for cid, xs, pos, base, dt in [("typical", [4, 8], 0, 10000.0, "f32"), ("edge_offset_batch", [2, 3, 5, 6], 7, 500.0, "f32"),
                                   ("edge_one_row", [1, 2], 3, 10000.0, "f32"), ("large", [2, 40, 64], 11, 10000.0, "f32"), ("edge_f16", [3, 16], 2, 10000.0, "f16")]:
        x = g.rand(xs, dt)
        tol = (2e-4, 1e-4) if dt == "f32" else (4e-3, 4e-3)
        g.case(f"rope.{cid}", "rope", {"pos_offset": pos, "base": base}, [("x", x, dt)], rope_ref(f64(x), pos, float(np.float32(base))), dt, tol)
    for cid, qs, ks, vs, causal, scale, dt in [("typical", [2, 5, 8], [2, 7, 8], [2, 7, 4], False, None, "f32"),
                                               ("edge_causal_scale", [1, 2, 6, 4], [1, 2, 6, 4], [1, 2, 6, 3], True, 0.3, "f32"),
                                               ("edge_one", [1, 1], [1, 1], [1, 1], False, None, "f32"),
                                               ("large", [2, 70, 16], [2, 90, 16], [2, 90, 16], True, None, "f32"),
                                               ("edge_f16", [3, 4, 8], [3, 5, 8], [3, 5, 8], False, None, "f16"),
                                               # 2^16 scores and 64 keys or more: q kT, masked softmax, p v inside Kiln.
                                               ("large_matmul", [2, 300, 16], [2, 260, 16], [2, 260, 20], True, None, "f32"),
                                               ("large_matmul_f16", [300, 16], [260, 16], [260, 8], False, 0.5, "f16")]:
        q, k, v = g.rand(qs, dt, -1, 1), g.rand(ks, dt, -1, 1), g.rand(vs, dt, -1, 1)
        tol = (2e-5, 1e-4) if dt == "f32" else (4e-3, 4e-3)
        g.case(f"attention.{cid}", "attention", {"causal": causal, "scale": scale}, [("q", q, dt), ("k", k, dt), ("v", v, dt)],
               attention_ref(f64(q), f64(k), f64(v), causal, scale), dt, tol)

    # ---- custom kernels (Kernel::new + dispatch; the output binding is written in place)
    saxpy = """struct P { a: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < p.n) { y[i] = p.a * x[i] + y[i]; }
}
"""
    for cid, n in [("typical", 100), ("edge_one", 1), ("large_prime", 1031)]:
        x, y = g.rand([n]), g.rand([n])
        a = np.float32(2.5 if cid != "edge_one" else -0.75)
        uni = np.array([a], "<f4").tobytes() + np.array([n], "<u4").tobytes()
        path = os.path.join(g.data, f"kernel.saxpy_{cid}.wgsl")
        open(path, "w").write(saxpy)
        want = f64(np.float32(a) * x) + f64(y)
        g.case(f"kernel.saxpy_{cid}", "kernel", {"source": f"data/kernel.saxpy_{cid}.wgsl", "entry": "saxpy",
                                                 "workgroups": [(n + 63) // 64, 1, 1], "uniforms": uni.hex(), "output": 1},
               [("x", x, "f32"), ("y", y, "f32")], want, "f32", (1e-6, 1e-6))
    scan = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(8, 8)
fn mix2d(@builtin(global_invocation_id) gid: vec3<u32>) {
    let w = 37u;
    if (gid.x < w && gid.y < 19u) {
        let i = gid.y * w + gid.x;
        out[i] = (a[i] ^ (b[i] << 3u)) + gid.y * 1000u + gid.x;
    }
}
"""
    open(os.path.join(g.data, "kernel.mix2d.wgsl"), "w").write(scan)
    a, b = g.rng.integers(0, 1 << 28, size=[19, 37]).astype(np.uint32), g.rng.integers(0, 1 << 20, size=[19, 37]).astype(np.uint32)
    o = np.zeros([19, 37], np.uint32)
    yy, xx = np.indices([19, 37])
    want = ((a.astype(np.int64) ^ ((b.astype(np.int64) << 3) & 0xFFFFFFFF)) + yy * 1000 + xx) & 0xFFFFFFFF
    g.case("kernel.mix2d_u32_2d", "kernel", {"source": "data/kernel.mix2d.wgsl", "entry": "mix2d", "workgroups": [5, 3, 1], "uniforms": None, "output": 2},
           [("a", a, "u32"), ("b", b, "u32"), ("out", o, "u32")], want, "u32", (0, 0))


# ---------------------------------------------------------------------------------------------
# Writers

def fmt_float(v):
    r = repr(float(v))
    if r in ("inf", "-inf", "nan"):
        raise ValueError("non-finite parameter")
    return r


def txt_param(key, v):
    if v is None:
        return f"p {key} n"
    if isinstance(v, bool):
        return f"p {key} b {int(v)}"
    if isinstance(v, int):
        return f"p {key} i {v}"
    if isinstance(v, float):
        return f"p {key} f {fmt_float(v)}"
    if isinstance(v, str):
        assert v and not any(c.isspace() for c in v), v
        return f"p {key} s {v}"
    if isinstance(v, list):
        assert all(isinstance(x, int) and not isinstance(x, bool) for x in v), (key, v)
        return f"p {key} I {len(v)}" + "".join(f" {x}" for x in v)
    raise TypeError(f"{key}: {v!r}")


def write_txt(path, ops, cases):
    lines = ["kiln-conformance 1", f"ops {len(ops)} " + " ".join(ops)]
    for c in cases:
        lines.append(f"case {c['id']} {c['op']}")
        for k, v in c["params"].items():
            lines.append(txt_param(k, v))
        for i in c["inputs"]:
            lines.append(f"in {i['name']} {i['dtype']} {len(i['shape'])}" + "".join(f" {d}" for d in i["shape"]) + f" {i['file']}")
        e = c["expected"]
        lines.append(f"out {e['dtype']} {len(e['shape'])}" + "".join(f" {d}" for d in e["shape"]) + f" {e['file']} {fmt_float(c['atol'])} {fmt_float(c['rtol'])}")
        lines.append("end")
    lines.append(f"cases {len(cases)}")
    open(path, "w").write("\n".join(lines) + "\n")


def build_added(g, seed):
    """Cases of ops added after the suite's digests were first recorded. They draw from a stream
    of their own (the seed + 1) and come after every other case, so the inputs, and therefore the
    digests, of the earlier cases stay byte-identical when an op is added here."""
    rng = np.random.default_rng(seed + 1)

    def rand(shape, dt, lo, hi):
        return rng.uniform(lo, hi, size=shape).astype(NP[dt])

    # ---- floor (unary, float only): exact, so every case has zero tolerance.
    for cid, shape, dt in [("typical", [6, 7], "f32"), ("edge_empty", [0], "f32"), ("edge_one", [1], "f32"),
                           ("large_prime", [3, 1, 257], "f32"), ("edge_f16", [13, 17], "f16")]:
        x = rand(shape, dt, -8.0, 8.0)
        g.case(f"floor.{cid}", "floor", {}, [("x", x, dt)], np.floor(f64(x)), dt, (0, 0))
    for dt, vals in UNARY_SPECIALS.items():
        x = np.array(vals, dtype=NP[dt])
        g.case(f"floor.special_{dt}", "floor", {}, [("x", x, dt)], np.floor(f64(x)), dt, (0, 0))
    x = np.array([8388607.5, -8388607.5, 8388608.0, -4194303.75, 0.999999940, -0.999999940, 1.0000001, -1.0000001], np.float32)
    g.case("floor.edge_whole", "floor", {}, [("x", x, "f32")], np.floor(f64(x)), "f32", (0, 0))

    # ---- quant (GGUF q4_0 / q4_1 / q8_0 weights): a stream of their own again (seed + 2), so
    # that the cases above keep their inputs.
    build_quant(g, np.random.default_rng(seed + 2))
    # ---- the Array API's float functions: a stream of their own again (seed + 3).
    build_array_api(g, np.random.default_rng(seed + 3))
    # ---- bool: a stream of its own (seed + 4).
    build_bool(g, np.random.default_rng(seed + 4))
    # ---- searching, sorting and sets: a stream of their own (seed + 5).
    build_sort(g, np.random.default_rng(seed + 5))
    # ---- scans (cumulative_sum / cumulative_prod), then the bitwise ops: a stream of their own
    # (seed + 6).
    rng6 = np.random.default_rng(seed + 6)
    build_scan(g, rng6)
    build_bitwise(g, rng6)
    build_stats(g, rng6)
    build_diff(g, rng6)
    build_linalg(g, rng6)
    # ---- quant in Q5_0 / Q5_1 / the K formats, from ggml's own C output: a stream of its own
    # (seed + 7).
    build_quant_ggml(g, np.random.default_rng(seed + 7))
    # ---- topk: a stream of its own (seed + 8).
    build_topk(g, np.random.default_rng(seed + 8))


def awkward_values(rng, pools, shape, dt, steps):
    """Values of `dt` drawn from `pools[dt]` (special values, few distinct ones: ties show), a
    third of the float ones replaced by multiples of 1/`steps` in [-4, 4]."""
    pool = np.array(pools[dt], dtype=np.float64 if dt in ("f32", "f16") else np.int64)
    picked = pool[rng.integers(0, len(pool), size=shape)]
    if dt in ("f32", "f16"):
        noise = np.round(rng.uniform(-4, 4, size=shape) * steps) / steps
        picked = np.where(rng.integers(0, 3, size=shape) == 0, noise, picked)
    with np.errstate(over="ignore"):
        return np.asarray(picked).astype(NP[dt])


def stable_order(x, axis, desc):
    """numpy's stable argsort; descending as array-api-strict's: the reverse of the ascending sort
    of the reversed row, so ties keep index order (and NaNs come first)."""
    if not desc:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)


def build_topk(g, rng):
    """topk: numpy's stable argsort (descending as array-api-strict's: ties in index order, NaNs
    first) cut to k, both outputs (param `output`: 0 values, 1 indices). Inputs mix NaN, ±inf,
    ±0 and few distinct values, so ties and the NaN order show; k = 0, 1, n; empty axes and
    batches; every axis (negative ones too); rows past the sort's 512-pair block."""
    pools = {"f32": [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, 3e38],
             "f16": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 65504.0, 6e-8],
             "i32": [0, -1, 1, -2147483648, 2147483647], "u32": [0, 1, 2147483648, 4294967295], "bool": [0, 1]}

    def awkward(shape, dt):
        return awkward_values(rng, pools, shape, dt, 2)

    shapes = [("typical", [6, 9], -1, 3), ("axis0", [13, 17], 0, 5), ("k_all", [5, 7], 1, 7), ("k0", [4, 6], -1, 0),
              ("edge_empty", [0], 0, 0), ("edge_empty_rows", [2, 0, 3], 2, 1), ("edge_one", [1], 0, 1),
              ("mid_axis", [3, 5, 4], -2, 2), ("large_prime", [3, 1031], 1, 10), ("block", [2, 700], -1, 600)]
    for dt in ("f32", "f16", "i32", "u32", "bool"):
        for cid, shape, axis, k in shapes:
            if dt != "f32" and cid not in ("typical", "axis0", "large_prime"):
                continue
            x = awkward(shape, dt)
            for largest in (True, False):
                idx = np.take(stable_order(x, axis, largest), np.arange(k), axis=axis)
                outs = [(np.take_along_axis(x, idx, axis=axis), dt), (idx, "i32")]
                params = {"k": k, "axis": axis, "largest": largest}
                for out, (arr, odt) in enumerate(outs):
                    tag = f"{cid}_{dt}{'' if largest else '_smallest'}_{out}"
                    g.case(f"topk.{tag}", "topk", dict(params, output=out), [("x", x, dt)], arr, odt, (0, 0))


def numpy_divmod(f):
    """numpy's float remainder / floor_divide in the operands' own dtype (numpy computes float32
    with npy_divmodf and float16 through it), then float64 for the case file."""
    def ref(a, b, dt):
        with np.errstate(all="ignore"):
            return f(np.asarray(a).astype(NP[dt]), np.asarray(b).astype(NP[dt])).astype(np.float64)
    return ref


def nextafter_ref(a, b, dt):
    """numpy's nextafter in the dtype's steps, with C99's and the standard's `b` where a == b
    (numpy's float16 loop gives `a` there: nextafter(0, -0) = +0 instead of -0)."""
    a, b = np.broadcast_arrays(np.asarray(a).astype(NP[dt]), np.asarray(b).astype(NP[dt]))
    return np.where(a == b, b, np.nextafter(a, b)).astype(np.float64)


# The functions added for the Array API: the unary ones with their numpy reference, input range,
# and whether the result is exact (rounding ops) rather than within a few ULP.
AA_UNARY = {
    "asin": (np.arcsin, (-0.99, 0.99), False), "acos": (np.arccos, (-0.99, 0.99), False),
    "atan": (np.arctan, (-8.0, 8.0), False), "tan": (np.tan, (-1.4, 1.4), False), "sinh": (np.sinh, (-6.0, 6.0), False),
    "cosh": (np.cosh, (-6.0, 6.0), False), "asinh": (np.arcsinh, (-8.0, 8.0), False),
    "acosh": (np.arccosh, (1.0, 30.0), False), "atanh": (np.arctanh, (-0.99, 0.99), False),
    "log1p": (np.log1p, (-0.9, 8.0), False), "expm1": (np.expm1, (-6.0, 6.0), False),
    "log2": (np.log2, (0.01, 50.0), False), "log10": (np.log10, (0.01, 50.0), False),
    "ceil": (np.ceil, (-8.0, 8.0), True), "trunc": (np.trunc, (-8.0, 8.0), True),
    "round": (np.round, (-8.0, 8.0), True), "sign": (np.sign, (-3.0, 3.0), True),
    "reciprocal": (np.reciprocal, (0.1, 8.0), False), "square": (np.square, (-8.0, 8.0), False),
}
AA_INT_UNARY = ("ceil", "trunc", "round", "sign", "square", "floor")
# Binary: (reference(a, b, dtype) in float64, range of a, range of b, exact?).
AA_BINARY = {
    "atan2": (lambda a, b, dt: np.arctan2(f64(a), f64(b)), (-3.0, 3.0), (-3.0, 3.0), False),
    "hypot": (lambda a, b, dt: np.hypot(f64(a), f64(b)), (-3.0, 3.0), (-3.0, 3.0), False),
    "logaddexp": (lambda a, b, dt: np.logaddexp(f64(a), f64(b)), (-5.0, 5.0), (-5.0, 5.0), False),
    "copysign": (lambda a, b, dt: np.copysign(f64(a), f64(b)), (-3.0, 3.0), (-3.0, 3.0), True),
    "nextafter": (lambda a, b, dt: nextafter_ref(a, b, dt), (-3.0, 3.0), (-3.0, 3.0), True),
    "remainder": (numpy_divmod(np.remainder), (-20.0, 20.0), (-3.0, 3.0), False),
    "floor_divide": (numpy_divmod(np.floor_divide), (-20.0, 20.0), (-3.0, 3.0), False),
}


def build_array_api(g, rng):
    def rand(shape, dt, lo, hi):
        if dt in ("i32", "u32"):
            return rng.integers(int(lo), int(hi) + 1, size=shape).astype(NP[dt])
        return rng.uniform(lo, hi, size=shape).astype(NP[dt])

    for op, (f, (lo, hi), exact) in AA_UNARY.items():
        for cid, shape, dt in [("typical", [6, 7], "f32"), ("edge_empty", [0], "f32"), ("edge_one", [1], "f32"),
                               ("large_prime", [3, 1, 257], "f32"), ("edge_f16", [13, 17], "f16")]:
            x = rand(shape, dt, lo, hi)
            g.case(f"{op}.{cid}", op, {}, [("x", x, dt)], f(f64(x)), dt, (0, 0) if exact else ftol(dt, 4.0))
        for dt, vals in UNARY_SPECIALS.items():
            x = np.array(vals, dtype=NP[dt])
            with np.errstate(all="ignore"):
                want = f(f64(x))
            g.case(f"{op}.special_{dt}", op, {}, [("x", x, dt)], want, dt, (0, 0) if exact else ftol(dt, 4.0))
    # The rounding ops, sign and square on integers (the rounding ops leave them as they are).
    for op in AA_INT_UNARY:
        f = np.floor if op == "floor" else AA_UNARY[op][0]
        x = np.array([0, 1, -1, 7, -7, 46341, -46341, 2 ** 31 - 1, -2 ** 31], np.int32)
        with np.errstate(all="ignore"):
            g.case(f"{op}.i32", op, {}, [("x", x, "i32")], f(x).astype(np.int64).astype(np.int32), "i32", (0, 0))
        x = rand([257], "u32", 0, 2 ** 32 - 1)
        g.case(f"{op}.u32", op, {}, [("x", x, "u32")], f(x).astype(np.uint32), "u32", (0, 0))
    # Round half to even at every tie the f32 binades hold, and the boundaries of the exact path.
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 8388606.5, 8388607.5, -8388607.5, 4194302.5, 0.49999997, 1.4999999],
                 np.float32)
    g.case("round.ties_to_even", "round", {}, [("x", x, "f32")], np.round(f64(x)), "f32", (0, 0))
    # Where log(1 + x) and exp(x) - 1 lose everything.
    x = np.array([1e-10, -1e-10, 1e-7, -3e-6, 2 ** -24, 1e-30], np.float32)
    g.case("log1p.tiny", "log1p", {}, [("x", x, "f32")], np.log1p(f64(x)), "f32", (0.0, 4e-7))
    g.case("expm1.tiny", "expm1", {}, [("x", x, "f32")], np.expm1(f64(x)), "f32", (0.0, 4e-7))

    for op, (f, ra, rb, exact) in AA_BINARY.items():
        for cid, sa, sb, dt in [("typical", [5, 6], [5, 6], "f32"), ("edge_broadcast", [3, 1, 7], [4, 1], "f32"),
                                ("edge_empty", [0, 3], [1, 3], "f32"), ("large_prime", [1031], [1031], "f32"),
                                ("edge_f16", [13, 17], [17], "f16")]:
            a, b = rand(sa, dt, *ra), rand(sb, dt, *rb)
            g.case(f"{op}.{cid}", op, {}, [("a", a, dt), ("b", b, dt)], f(a, b, dt), dt, (0, 0) if exact else ftol(dt, 4.0))
        a = rand([4, 9], "f32", *ra)
        g.case(f"{op}.scalar", op, {"scalar": 1.5, "scalar_first": False}, [("a", a, "f32")], f(a, np.float32(1.5), "f32"),
               "f32", (0, 0) if exact else ftol("f32", 4.0))
        g.case(f"{op}.scalar_first", op, {"scalar": -2.5, "scalar_first": True}, [("a", a, "f32")],
               f(np.float32(-2.5), a, "f32"), "f32", (0, 0) if exact else ftol("f32", 4.0))
        for dt, vals in BINARY_SPECIALS.items():
            v = np.array(vals, dtype=NP[dt])
            with np.errstate(all="ignore"):
                want = f(v.reshape(-1, 1), v, dt)
            g.case(f"{op}.special_{dt}", op, {}, [("a", v.reshape(-1, 1), dt), ("b", v, dt)], want, dt,
                   (0, 0) if exact else ftol(dt, 4.0))
    # clip: minimum(maximum(x, min), max), NaN from x or a bound; bounds broadcast to x's shape.
    def clip_ref(x, lo, hi):
        x, lo, hi = f64(x), f64(lo), f64(hi)
        m = np.where(np.isnan(x) | np.isnan(lo), np.nan, np.maximum(x, lo))
        return np.where(np.isnan(m) | np.isnan(hi), np.nan, np.minimum(m, hi))
    for cid, sx, sl, sh, dt in [("typical", [6, 7], [6, 7], [6, 7], "f32"), ("edge_broadcast", [4, 7], [7], [4, 1], "f32"),
                                ("edge_empty", [0, 3], [3], [1], "f32"), ("large_prime", [1031], [1], [1031], "f32"),
                                ("edge_f16", [13, 17], [17], [13, 1], "f16")]:
        x, lo = rand(sx, dt, -3.0, 3.0), rand(sl, dt, -2.0, 0.0)
        hi = rand(sh, dt, 0.0, 2.0)
        g.case(f"clip.{cid}", "clip", {}, [("x", x, dt), ("min", lo, dt), ("max", hi, dt)], clip_ref(x, lo, hi), dt, (0, 0))
    x = np.array(UNARY_SPECIALS["f32"], np.float32)
    g.case("clip.special_f32", "clip", {}, [("x", x, "f32"), ("min", np.float32([-1.0]), "f32"), ("max", np.float32([np.inf]), "f32")],
           clip_ref(x, -1.0, np.inf), "f32", (0, 0))
    x = np.float32([0.0, 1.0, 2.0, 3.0, np.nan, -0.0])
    lo = np.float32([np.nan, 0.0, 0.0, 0.0, 0.0, 0.0])
    hi = np.float32([5.0, np.nan, 5.0, 1.0, 5.0, 5.0])
    g.case("clip.nan_bounds", "clip", {}, [("x", x, "f32"), ("min", lo, "f32"), ("max", hi, "f32")], clip_ref(x, lo, hi), "f32", (0, 0))
    x = rand([4, 9], "f32", -2.0, 2.0)
    g.case("clip.scalar", "clip", {"min": -0.5, "max": 0.75}, [("x", x, "f32")], clip_ref(x, -0.5, 0.75), "f32", (0, 0))

    # Integer remainder and floor division: numpy's signs, x % 0 == x // 0 == 0.
    i32min = -2 ** 31
    a = np.array([7, -7, 7, -7, 5, -5, 0, i32min, i32min, 2 ** 31 - 1, -1, 6], np.int32)
    b = np.array([2, 2, -2, -2, 0, 0, 0, -1, 1, -1, 3, 3], np.int32)
    with np.errstate(all="ignore"):
        g.case("remainder.i32", "remainder", {}, [("a", a, "i32"), ("b", b, "i32")], np.where(b == 0, 0, np.remainder(a, b)), "i32", (0, 0))
        g.case("floor_divide.i32", "floor_divide", {}, [("a", a, "i32"), ("b", b, "i32")], np.floor_divide(a, b), "i32", (0, 0))
        a = np.array([7, 0, 2 ** 32 - 1, 9, 2 ** 31], np.uint32)
        b = np.array([2, 0, 0, 10, 3], np.uint32)
        g.case("remainder.u32", "remainder", {}, [("a", a, "u32"), ("b", b, "u32")], np.where(b == 0, 0, np.remainder(a, b)), "u32", (0, 0))
        g.case("floor_divide.u32", "floor_divide", {}, [("a", a, "u32"), ("b", b, "u32")], np.floor_divide(a, b), "u32", (0, 0))
        a = rand([4, 257], "i32", -100000, 100000)
        b = rand([257], "i32", -7, 7)
        g.case("remainder.i32_large", "remainder", {}, [("a", a, "i32"), ("b", b, "i32")], np.where(b == 0, 0, np.remainder(a, b)), "i32", (0, 0))
        a = np.array([7, -7, 0, 9], np.int32)
        g.case("clip.i32_scalar", "clip", {"min": -3.0, "max": 4.0}, [("x", a, "i32")], np.clip(a, -3, 4), "i32", (0, 0))
        g.case("remainder.i32_scalar", "remainder", {"scalar": -2.0, "scalar_first": False}, [("a", a, "i32")],
               np.remainder(a, np.int32(-2)), "i32", (0, 0))


# Values where truth matters: zeros of both signs, NaN of both signs, infinities, subnormals.
TRUTHY = {
    "f32": [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-40, -1.4e-45, 1.0, -2.5, F32_MAX],
    "f16": [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 5.96e-08, 1.0, -2.5, 65504.0],
    "i32": [0, 0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 7],
    "u32": [0, 0, 1, 2 ** 32 - 1, 2],
    "bool": [False, True],
}

LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}
PREDICATES = {"logical_not": np.logical_not, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
              "signbit": lambda x: np.signbit(x) if x.dtype != np.bool_ else np.zeros(x.shape, bool)}


def build_scan(g, rng):
    """cumulative_sum / cumulative_prod: awkward shapes and axes, runs longer than one block of
    the kernel (1024), integers that wrap (numpy's in the dtype itself), a dtype that casts
    first, include_initial, and the special values (NaN, inf - inf, 0 * inf, the sign of zero)."""

    def vals(shape, dt, lo, hi):
        if dt in ("i32", "u32"):
            return rng.integers(int(lo), int(hi) + 1, size=shape).astype(NP[dt])
        if dt == "bool":
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        return rng.uniform(lo, hi, size=shape).astype(NP[dt])

    def want(op, x, axis, odt, init):
        f = np.cumulative_sum if op == "cumulative_sum" else np.cumulative_prod
        ax = 0 if axis is None else axis
        with np.errstate(all="ignore"):
            if odt in ("i32", "u32"):
                return f(x.astype(NP[odt]), axis=ax, dtype=NP[odt], include_initial=init)
            return f(x.astype(NP[odt]).astype(np.float64), axis=ax, include_initial=init)

    sp = {"f32": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, -0.0, -0.0, 0.5], "f16": [np.nan, np.inf, -0.0, -0.0, 2.0, -np.inf, 0.0]}
    for op, lo, hi in (("cumulative_sum", -1.0, 1.0), ("cumulative_prod", 0.99, 1.01)):
        for cid, shape, dt, axis, init, odt in [("typical", [4, 8], "f32", 1, False, None), ("edge_empty", [0], "f32", None, False, None),
                                                ("edge_one", [1], "f32", None, True, None), ("edge_empty_axis", [2, 0, 3], "i32", 1, True, None),
                                                ("axis0_prime", [3, 1, 257], "f32", 0, False, None), ("large_blocks", [2, 2053], "f32", -1, True, None),
                                                ("f16", [13, 17], "f16", 1, True, None), ("i32_wrap", [3, 1031], "i32", 1, False, None),
                                                ("u32_wrap", [1500], "u32", None, True, None), ("dtype_i32_f32", [5, 7], "i32", 0, False, "f32"),
                                                ("dtype_bool_i32", [6, 9], "bool", -1, False, "i32")]:
            wrap = cid.endswith("_wrap")
            x = vals(shape, dt, -2e9 if dt == "i32" and wrap else (0 if dt == "u32" else (-50 if dt == "i32" else lo)),
                     2e9 if wrap else (50 if dt == "i32" else hi))
            out = odt or dt
            n = shape[0 if axis is None else axis] if shape else 1
            tol = ftol(out, 1.0 + n / 64.0)
            g.case(f"{op}.{cid}", op, {"axis": axis, "dtype": odt, "include_initial": init}, [("x", x, dt)],
                   want(op, x, axis, out, init), out, tol)
        for dt, v in sp.items():
            x = np.stack([rng.permutation(np.array(v, dtype=NP[dt])) for _ in range(3)], axis=1)
            g.case(f"{op}.special_{dt}", op, {"axis": 0, "dtype": None, "include_initial": False}, [("x", x, dt)],
                   want(op, x, 0, dt, False), dt, ftol(dt))


def build_stats(g, rng):
    """prod (integers wrapping in the dtype, dtype= casting first, 1 over an empty axis, special
    values) and std (sqrt of var, NaN over an empty axis)."""
    for cid, shape, dt, axes, keep, odt in [("typical", [4, 8], "f32", [1], False, None), ("f16", [13, 17], "f16", [0], True, None),
                                            ("i32_wrap", [3, 40], "i32", [1], False, None), ("u32_whole", [5, 7], "u32", None, True, None),
                                            ("edge_empty_axis", [2, 0, 3], "f32", [1], False, None), ("edge_no_axes", [3, 4], "i32", [], False, None),
                                            ("large_split", [2, 20011], "f32", [-1], False, None), ("dtype_i32_f32", [6, 5], "i32", [0], False, "f32"),
                                            ("dtype_bool_i32", [4, 9], "bool", None, False, "i32")]:
        if dt == "bool":
            x = rng.integers(0, 2, size=shape).astype(bool)
        elif dt in ("i32", "u32"):
            info = np.iinfo(NP[dt])
            lo, hi = (info.min, info.max) if "wrap" in cid else (-4 if dt == "i32" else 0, 4)
            x = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(NP[dt])
        else:
            x = rng.uniform(0.999, 1.001, size=shape).astype(NP[dt]) if "large" in cid else rng.uniform(-1.5, 1.5, size=shape).astype(NP[dt])
        out = odt or dt
        ax = None if axes is None else tuple(axes)
        with np.errstate(all="ignore"):
            want = np.prod(x.astype(NP[out]), axis=ax, keepdims=keep, dtype=NP[out]) if out in ("i32", "u32") else \
                np.prod(x.astype(NP[out]).astype(np.float64), axis=ax, keepdims=keep)
        n = int(np.prod([shape[a] for a in axes])) if axes is not None else int(np.prod(shape))
        g.case(f"prod.{cid}", "prod", {"axes": axes, "keepdims": keep, "dtype": odt}, [("x", x, dt)], want, out, ftol(out, 1.0 + n / 64.0))
    v = np.array([2.0, np.nan, 0.0, np.inf, -0.0, -3.0, 1.0, -np.inf], np.float32)
    x = v[np.array([[0, 5, 6], [1, 0, 6], [2, 3, 6], [4, 0, 6], [4, 5, 6], [7, 5, 0]])]
    with np.errstate(all="ignore"):
        g.case("prod.special_f32", "prod", {"axes": [1], "keepdims": False, "dtype": None}, [("x", x, "f32")],
               np.prod(x.astype(np.float64), axis=1), "f32", (0, 0))
    for cid, shape, dt, axes, ddof in [("typical", [4, 8], "f32", [1], 0), ("f16", [13, 17], "f16", [0], 1),
                                       ("large", [3, 1031], "f32", [-1], 1), ("whole", [5, 7], "f32", None, 0),
                                       ("edge_empty_axis", [2, 0, 3], "f32", [1], 0), ("edge_one_ddof1", [3, 1], "f32", [1], 1)]:
        x = rng.uniform(-3.0, 3.0, size=shape).astype(NP[dt])
        ax = None if axes is None else tuple(axes)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an empty axis: NaN, as intended
            want = np.std(x.astype(np.float64), axis=ax, ddof=ddof)
        n = int(np.prod([shape[a] for a in axes])) if axes is not None else int(np.prod(shape))
        g.case(f"std.{cid}", "std", {"axes": axes, "keepdims": False, "ddof": ddof}, [("x", x, dt)], want, dt, ftol(dt, 1.0 + n / 64.0))


def build_linalg(g, rng):
    """vecdot (broadcasting, any axis) and tensordot (a count or pairs of axes, empty
    contractions), against float64 numpy; integers small enough to be exact."""

    def vals(shape, dt):
        if dt == "i32":
            return rng.integers(-20, 21, size=shape).astype(np.int32)
        return rng.uniform(-1.0, 1.0, size=shape).astype(NP[dt])

    for cid, s1, s2, axis, dt in [("typical", [4, 8], [4, 8], -1, "f32"), ("broadcast", [3, 1, 257], [5, 257], -1, "f32"),
                                  ("axis0", [13, 17], [13, 17], 0, "f32"), ("f16", [6, 33], [33], -1, "f16"),
                                  ("i32", [7, 9], [9], -1, "i32"), ("edge_empty", [2, 0, 3], [1, 3], -1, "f32"),
                                  ("edge_zero_length", [4, 0], [4, 0], -1, "f32")]:
        a, b = vals(s1, dt), vals(s2, dt)
        want = np.sum(np.multiply(a.astype(np.float64), b.astype(np.float64)), axis=axis)
        k = s1[axis]
        g.case(f"vecdot.{cid}", "vecdot", {"axis": axis}, [("a", a, dt), ("b", b, dt)], want, dt, ftol(dt, 1.0 + k / 16.0))
    for cid, s1, s2, n, a1, a2, dt in [("typical", [3, 4, 5], [4, 5, 6], 2, [], [], "f32"), ("one", [3, 4], [4, 7], 1, [], [], "f32"),
                                       ("outer", [3, 4], [5], 0, [], [], "f32"), ("pairs", [2, 3, 5], [5, 3, 7], -1, [1, 2], [1, 0], "f32"),
                                       ("pairs_negative", [2, 3, 5], [3, 2], -1, [-3, 1], [1, 0], "f32"), ("f16", [6, 33], [33, 5], 1, [], [], "f16"),
                                       ("i32", [4, 9], [9, 3], 1, [], [], "i32"), ("large", [3, 257], [257, 2], 1, [], [], "f32"),
                                       ("edge_empty", [4, 0], [0, 5], 1, [], [], "f32")]:
        a, b = vals(s1, dt), vals(s2, dt)
        axes = n if n >= 0 else (a1, a2)
        want = np.tensordot(a.astype(np.float64), b.astype(np.float64), axes=axes)
        k = int(np.prod(s1[len(s1) - n:])) if n >= 0 else int(np.prod([s1[d] for d in a1]))
        g.case(f"tensordot.{cid}", "tensordot", {"n": n, "axes1": a1, "axes2": a2}, [("a", a, dt), ("b", b, dt)], want, dt,
               ftol(dt, 1.0 + k / 16.0))


def build_diff(g, rng):
    """diff: awkward shapes and axes, n past the axis length, prepend / append, integers that
    wrap, and IEEE subtraction of the special values."""
    for cid, shape, dt, axis, n, pre, app in [("typical", [4, 8], "f32", -1, 1, 0, 0), ("axis0_n2", [13, 17], "f32", 0, 2, 0, 0),
                                              ("prime", [3, 1, 257], "f16", -1, 1, 0, 0), ("i32_wrap", [5, 9], "i32", 1, 1, 0, 0),
                                              ("u32_wrap_prepend", [6, 4], "u32", 0, 1, 2, 0), ("append", [3, 5], "f32", 1, 3, 0, 1),
                                              ("both", [2, 3, 4], "i32", 1, 2, 1, 2), ("edge_n0", [3, 4], "f32", 0, 0, 0, 0),
                                              ("edge_n_past", [5], "f32", 0, 9, 0, 0), ("edge_empty", [0, 3], "f32", 0, 1, 0, 0)]:
        def vals(sh, dt=dt):
            if dt in ("i32", "u32"):
                info = np.iinfo(NP[dt])
                return rng.integers(info.min, info.max, size=sh, endpoint=True, dtype=np.int64).astype(NP[dt])
            return rng.uniform(-5.0, 5.0, size=sh).astype(NP[dt])

        def edge(k, shape=shape, axis=axis):
            sh = list(shape)
            sh[axis] = k
            return vals(sh)

        x = vals(shape)
        ins = [("x", x, dt)]
        parts = [x]
        if pre:
            p = edge(pre)
            ins.append(("prepend", p, dt))
            parts.insert(0, p)
        if app:
            a = edge(app)
            ins.append(("append", a, dt))
            parts.append(a)
        y = np.concatenate(parts, axis=axis)
        with np.errstate(all="ignore"):
            want = np.diff(y, n=n, axis=axis) if dt in ("i32", "u32") else y.astype(np.float64)
            if dt not in ("i32", "u32"):
                for _ in range(n):  # each order rounded to the dtype, as the kernel computes it
                    want = np.diff(want, axis=axis).astype(NP[dt]).astype(np.float64)
        g.case(f"diff.{cid}", "diff", {"axis": axis, "n": n}, ins, want, dt, (0, 0))
    x = np.array([np.inf, np.inf, np.nan, 1.0, -0.0, 0.0, -np.inf, -np.inf, 3.0], np.float32)
    with np.errstate(all="ignore"):
        g.case("diff.special_f32", "diff", {"axis": 0, "n": 1}, [("x", x, "f32")], np.diff(x.astype(np.float64)), "f32", (0, 0))


def build_bitwise(g, rng):
    """The bitwise ops: the whole range of i32 / u32 with the extremes, shift counts inside and
    outside [0, 32) (negative ones for i32: numpy's 0, or -1 for a negative i32 shifted right),
    broadcasting, the scalar forms, and bool (logical) for and / or / xor / invert."""

    def ints(shape, dt):
        info = np.iinfo(NP[dt])
        x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64)
        edges = np.array([info.min, info.max, 0, 1] + ([-1] if dt == "i32" else []), np.int64)
        flat = x.reshape(-1)
        flat[: min(flat.size, edges.size)] = edges[: flat.size]
        return x.astype(NP[dt])

    def counts(shape, dt):
        return rng.integers(-40 if dt == "i32" else 0, 41, size=shape).astype(NP[dt])

    ops = [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor),
           ("bitwise_left_shift", np.left_shift), ("bitwise_right_shift", np.right_shift)]
    for op, f in ops:
        shift = "shift" in op
        for cid, sa, sb, dt in [("typical", [4, 8], [4, 8], "i32"), ("u32", [13, 17], [17], "u32"),
                                ("edge_empty", [0, 3], [3], "i32"), ("large_broadcast", [3, 1, 257], [1, 5, 1], "u32")]:
            a = ints(sa, dt)
            b = counts(sb, dt) if shift else ints(sb, dt)
            g.case(f"{op}.{cid}", op, {}, [("a", a, dt), ("b", b, dt)], f(a, b), dt, (0, 0))
        for dt in ("i32", "u32"):
            a = ints([37], dt)
            sc = 31 if shift else (-0x0F0F0F10 if dt == "i32" else 0xF0F0F0F0)
            g.case(f"{op}.{dt}_scalar", op, {"scalar": float(sc), "scalar_first": False}, [("a", a, dt)],
                   f(a, NP[dt](sc)), dt, (0, 0))
            a2 = counts([29], dt) if shift else ints([29], dt)
            sf = 5 if shift else sc
            g.case(f"{op}.{dt}_scalar_first", op, {"scalar": float(sf), "scalar_first": True}, [("a", a2, dt)],
                   f(NP[dt](sf), a2), dt, (0, 0))
        if not shift:
            a, b = rng.integers(0, 2, size=(6, 7)).astype(bool), rng.integers(0, 2, size=(7,)).astype(bool)
            g.case(f"{op}.bool", op, {}, [("a", a, "bool"), ("b", b, "bool")], f(a, b), "bool", (0, 0))
    for cid, shape, dt in [("typical", [4, 8], "i32"), ("u32", [1031], "u32"), ("edge_empty", [0], "i32")]:
        x = ints(shape, dt)
        g.case(f"bitwise_invert.{cid}", "bitwise_invert", {}, [("x", x, dt)], np.invert(x), dt, (0, 0))
    x = rng.integers(0, 2, size=(5, 9)).astype(bool)
    g.case("bitwise_invert.bool", "bitwise_invert", {}, [("x", x, "bool")], np.invert(x), "bool", (0, 0))


def build_bool(g, rng):
    """The bool dtype: one byte an element in the files (0 or 1), as on every host."""

    def truthy(shape, dt):
        pool = TRUTHY[dt]
        picked = np.array(pool, dtype=np.float64 if dt in ("f32", "f16") else object)[rng.integers(0, len(pool), size=shape)]
        with np.errstate(over="ignore"):
            return np.asarray(picked).astype(NP[dt])

    shapes = [("typical", [5, 6], [5, 6]), ("edge_broadcast", [3, 1, 7], [4, 1]), ("edge_empty", [0, 3], [1, 3]),
              ("edge_one", [1], [1]), ("large_prime", [1031], [1031])]
    for op, f in LOGICAL.items():
        for dt in ("bool", "f32", "i32"):
            for cid, sa, sb in shapes:
                a, b = truthy(sa, dt), truthy(sb, dt)
                g.case(f"{op}.{cid}_{dt}", op, {}, [("a", a, dt), ("b", b, dt)], f(a, b), "bool", (0, 0))
        for dt in ("f16", "u32"):
            a, b = truthy([13, 17], dt), truthy([17], dt)
            g.case(f"{op}.{dt}", op, {}, [("a", a, dt), ("b", b, dt)], f(a, b), "bool", (0, 0))
        a = truthy([4, 9], "bool")
        for s, first in ((1.0, False), (0.0, True)):
            g.case(f"{op}.scalar_{int(s)}_{'first' if first else 'right'}", op, {"scalar": s, "scalar_first": first},
                   [("a", a, "bool")], f(a, bool(s)), "bool", (0, 0))
        a = truthy([4, 9], "f32")
        g.case(f"{op}.scalar_f32", op, {"scalar": 0.0, "scalar_first": False}, [("a", a, "f32")], f(a, 0.0), "bool", (0, 0))
    for op, f in PREDICATES.items():
        for dt in ("f32", "f16", "i32", "u32", "bool"):
            for cid, shape in (("typical", [6, 7]), ("edge_empty", [0]), ("edge_one", [1]), ("large_prime", [3, 1, 257])):
                x = truthy(shape, dt)
                g.case(f"{op}.{cid}_{dt}", op, {}, [("x", x, dt)], f(x), "bool", (0, 0))
        for dt, vals in UNARY_SPECIALS.items():
            x = np.array(vals + [-np.nan], dtype=NP[dt])
            g.case(f"{op}.special_{dt}", op, {}, [("x", x, dt)], f(x), "bool", (0, 0))
    # Comparisons of bool tensors (False < True), and of special values giving bool.
    for op in sorted(COMPARE):  # a set: sorted, so the cases do not depend on PYTHONHASHSEED
        a, b = truthy([6, 5], "bool"), truthy([5], "bool")
        g.case(f"{op}.bool", op, {}, [("a", a, "bool"), ("b", b, "bool")], BINARY[op](f64(a), f64(b)), "bool", (0, 0))
    for op, f in (("maximum", np.maximum), ("minimum", np.minimum)):
        a, b = truthy([6, 5], "bool"), truthy([6, 1], "bool")
        g.case(f"{op}.bool", op, {}, [("a", a, "bool"), ("b", b, "bool")], f(a, b), "bool", (0, 0))
    # all / any, over axes as the other reductions, every dtype; empty runs give the identity.
    for op, f in (("all", np.all), ("any", np.any)):
        for cid, shape, axes, keep, dt in [("typical", [5, 7], [1], False, "bool"), ("edge_neg_axes_keep", [3, 4, 5], [-1, 0], True, "bool"),
                                           ("whole", [6, 5], None, False, "bool"), ("large", [3, 1031], [-1], False, "bool"),
                                           ("f32", [4, 13], [0], True, "f32"), ("f16", [4, 13], [1], False, "f16"),
                                           ("i32", [7, 9], [0], False, "i32"), ("u32", [7, 9], None, True, "u32"),
                                           ("edge_empty_axis", [2, 0, 3], [1], False, "bool"), ("edge_empty_whole", [0], None, False, "f32"),
                                           ("edge_scalar", [], None, False, "bool"), ("edge_no_axes", [3, 4], [], False, "i32")]:
            x = truthy(shape, dt)
            if x.size and rng.integers(0, 2):
                # Mostly true, so that `all` is sometimes true.
                x = np.where(rng.integers(0, 40, size=shape) != 0, np.ones(shape, x.dtype), x)
            ax = None if axes is None else tuple(axes)
            g.case(f"{op}.{cid}", op, {"axes": axes, "keepdims": keep}, [("x", x, dt)], f(x, axis=ax, keepdims=keep), "bool", (0, 0))
    # max / min / argmax of bool.
    x = truthy([5, 9], "bool")
    g.case("max.bool", "max", {"axes": [1], "keepdims": False}, [("x", x, "bool")], np.max(x, axis=1), "bool", (0, 0))
    g.case("min.bool", "min", {"axes": None, "keepdims": True}, [("x", x, "bool")], np.min(x, keepdims=True), "bool", (0, 0))
    g.case("argmax.bool", "argmax", {"axis": 1, "keepdims": False}, [("x", x, "bool")], np.argmax(x, axis=1), "i32", (0, 0))
    # where with a bool condition.
    for cid, sc_, sa, sb, dt in [("bool_cond", [4, 5], [4, 5], [4, 5], "f32"), ("bool_cond_broadcast", [3, 1], [1, 7], [7], "i32"),
                                 ("bool_cond_empty", [0, 2], [0, 2], [2], "f32"), ("bool_cond_bool", [1031], [1031], [1], "bool")]:
        c = truthy(sc_, "bool")
        a, b = truthy(sa, dt), truthy(sb, dt)
        g.case(f"where.{cid}", "where", {}, [("cond", c, "bool"), ("a", a, dt), ("b", b, dt)], np.where(c, a, b), dt, (0, 0))
    # cast to and from bool.
    for dt in ("f32", "f16", "i32", "u32"):
        x = truthy([7, 11], dt)
        g.case(f"cast.{dt}_bool", "cast", {"dtype": "bool"}, [("x", x, dt)], x.astype(bool), "bool", (0, 0))
        b = truthy([3, 1, 257], "bool")
        g.case(f"cast.bool_{dt}", "cast", {"dtype": dt}, [("x", b, "bool")], b.astype(NP[dt]), dt, (0, 0))
    # creation and movement of bool.
    g.case("full.bool", "full", {"shape": [3, 5], "dtype": "bool", "value": 1.0}, [], np.ones([3, 5], bool), "bool", (0, 0))
    g.case("zeros.bool", "zeros", {"shape": [2, 0, 3], "dtype": "bool"}, [], np.zeros([2, 0, 3], bool), "bool", (0, 0))
    x = truthy([4, 6, 5], "bool")
    g.case("permute.bool", "permute", {"axes": [2, 0, 1]}, [("x", x, "bool")], np.transpose(x, (2, 0, 1)), "bool", (0, 0))


def build_sort(g, rng):
    """sort, argsort, searchsorted, count_nonzero, nonzero, unique_*, isin. Inputs mix special
    values (NaN of both signs, ±inf, ±0) with few distinct values, so ties and stability show.
    Ops giving a tuple have one case per element (param `output`)."""
    pools = {
        "f32": [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1e-40, 3e38],
        "f16": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 65504.0, 6e-8],
        "i32": [0, -1, 1, 5, -5, -2147483648, 2147483647],
        "u32": [0, 1, 7, 2147483648, 4294967295],
        "bool": [0, 1],
    }

    def awkward(shape, dt):
        return awkward_values(rng, pools, shape, dt, 4)

    sort_shapes = [("typical", [6, 9], -1), ("axis0", [13, 17], 0), ("edge_empty", [0], 0), ("edge_one", [1], 0),
                   ("edge_empty_rows", [2, 0, 3], 1), ("large_prime", [3, 1031], 1), ("block", [2, 700], -1),
                   ("mid_axis", [3, 5, 4], 1)]
    for dt in ("f32", "f16", "i32", "u32", "bool"):
        for cid, shape, axis in sort_shapes:
            if dt in ("f16", "u32", "bool") and cid not in ("typical", "large_prime", "axis0"):
                continue
            x = awkward(shape, dt)
            for desc in (False, True):
                idx = stable_order(x, axis, desc)
                tag = f"{cid}_{dt}{'_desc' if desc else ''}"
                params = {"axis": axis, "descending": desc}
                g.case(f"argsort.{tag}", "argsort", params, [("x", x, dt)], idx, "i32", (0, 0))
                g.case(f"sort.{tag}", "sort", params, [("x", x, dt)], np.take_along_axis(x, idx, axis=axis), dt, (0, 0))
    # Already sorted and reversed rows.
    x = np.arange(300, dtype=np.float32)
    for cid, v in (("sorted", x), ("reversed", x[::-1].copy())):
        g.case(f"argsort.{cid}", "argsort", {"axis": 0, "descending": False}, [("x", v, "f32")], np.argsort(v, kind="stable"), "i32", (0, 0))
    # searchsorted: x1 sorted (NaNs at the end), probes with exact hits and special values.
    for dt in ("f32", "f16", "i32", "u32"):
        for cid, m, shape2 in (("typical", 20, [4, 5]), ("edge_one", 1, [7]), ("edge_empty_x2", 9, [0]), ("large", 1031, [37])):
            x1 = np.sort(awkward([m], dt), kind="stable")
            x2 = awkward(shape2, dt)
            if x2.size:
                flat = x2.reshape(-1)
                flat[::3] = x1[rng.integers(0, m, size=flat[::3].shape)]
                x2 = flat.reshape(shape2)
            for right in (False, True):
                want = np.searchsorted(x1, x2, side="right" if right else "left")
                g.case(f"searchsorted.{cid}_{dt}{'_right' if right else ''}", "searchsorted", {"right": right},
                       [("x1", x1, dt), ("x2", x2, dt)], want, "i32", (0, 0))
    # count_nonzero and nonzero.
    for dt in ("f32", "i32", "bool", "f16", "u32"):
        for cid, shape, axes, keep in (("typical", [5, 7], [1], False), ("whole", [13, 17], None, False),
                                       ("keep", [3, 4, 5], [0, 2], True), ("edge_empty", [2, 0, 3], [1], False),
                                       ("large", [1031], None, True)):
            x = awkward(shape, dt)
            ax = None if axes is None else tuple(axes)
            g.case(f"count_nonzero.{cid}_{dt}", "count_nonzero", {"axes": axes, "keepdims": keep}, [("x", x, dt)],
                   np.count_nonzero(x, axis=ax, keepdims=keep), "i32", (0, 0))
    for dt in ("f32", "i32", "bool"):
        for cid, shape in (("typical", [5, 7]), ("rank3", [3, 4, 5]), ("edge_empty", [2, 0, 3]), ("edge_one", [1]), ("large", [1031])):
            x = awkward(shape, dt)
            for k, coords in enumerate(np.nonzero(x)):
                g.case(f"nonzero.{cid}_{dt}_{k}", "nonzero", {"output": k}, [("x", x, dt)], coords, "i32", (0, 0))
    # unique_*: NaNs each distinct (numpy's unique_all, the standard's semantics).
    for dt in ("f32", "f16", "i32", "u32", "bool"):
        for cid, shape in (("typical", [6, 7]), ("edge_empty", [0]), ("edge_one", [1]), ("large", [3, 1, 257])):
            if dt in ("f16", "u32", "bool") and cid != "typical":
                continue
            x = awkward(shape, dt)
            u = np.unique_all(x)
            parts = {"unique_all": [(u.values, dt), (u.indices, "i32"), (u.inverse_indices, "i32"), (u.counts, "i32")],
                     "unique_counts": [(u.values, dt), (u.counts, "i32")],
                     "unique_inverse": [(u.values, dt), (u.inverse_indices, "i32")]}
            for op, outs in parts.items():
                for k, (arr, odt) in enumerate(outs):
                    g.case(f"{op}.{cid}_{dt}_{k}", op, {"output": k}, [("x", x, dt)], arr if odt != dt else arr.astype(NP[dt]), odt, (0, 0))
            g.case(f"unique_values.{cid}_{dt}", "unique_values", {}, [("x", x, dt)], u.values.astype(NP[dt]), dt, (0, 0))
    # isin.
    for dt in ("f32", "f16", "i32", "u32", "bool"):
        for cid, s1, s2 in (("typical", [5, 7], [9]), ("edge_empty_x2", [6], [0]), ("edge_empty_x1", [0, 2], [4]),
                            ("x2_2d", [13, 17], [3, 4])):
            if dt in ("f16", "u32", "bool") and cid != "typical":
                continue
            x1, x2 = awkward(s1, dt), awkward(s2, dt)
            for invert in (False, True):
                g.case(f"isin.{cid}_{dt}{'_invert' if invert else ''}", "isin", {"invert": invert},
                       [("x1", x1, dt), ("x2", x2, dt)], np.isin(x1, x2, invert=invert), "bool", (0, 0))


# ---- quant: ggml's block formats, written here from ggml-common.h and ggml-quants.c's reference
# quantizers (quantize_row_q4_0_ref & co) in numpy float32, independently of Kiln.
QUANT_BLOCK_BYTES = {"q4_0": 18, "q4_1": 20, "q8_0": 34}


def c_int8(v):
    """C's (int8_t)v for float32 v as x86-64 computes it: a truncating 32-bit conversion (NaN and
    out-of-range give 0x80000000) narrowed to 8 bits."""
    v = np.asarray(v, np.float64)
    ok = np.isfinite(v) & (v >= -(2.0**31)) & (v < 2.0**31)
    i = np.where(ok, np.trunc(np.where(ok, v, 0)), -(2.0**31)).astype(np.int64)
    return ((i + 128) % 256) - 128


def quantize_ref(x, fmt):
    """x float32 [rows, cols] (cols a multiple of 32) -> the GGUF bytes (uint8)."""
    f32 = np.float32
    b = np.asarray(x, f32).reshape(-1, 32)
    nb = b.shape[0]
    out = []
    with np.errstate(all="ignore"):
        if fmt == "q4_0":
            a = np.where(np.isnan(b), f32(-1), np.abs(b))
            idx = np.argmax(a, axis=1)  # the first largest |v|: ggml's `amax < fabsf(v)`
            amax = a[np.arange(nb), idx]
            mx = np.where(amax > 0, b[np.arange(nb), idx], f32(0)).astype(f32)
            d = (mx / f32(-8)).astype(f32)
            idv = np.where(d != 0, f32(1) / np.where(d != 0, d, f32(1)), f32(0)).astype(f32)
            q = np.minimum(15, c_int8((b * idv[:, None]).astype(f32) + f32(8.5)))
            qs = (q[:, :16] & 0xFF) | ((q[:, 16:] & 0xFF) << 4)
            out = [d.astype(np.float16).view(np.uint8).reshape(nb, 2), (qs & 0xFF).astype(np.uint8)]
        elif fmt == "q4_1":
            mn = np.where(np.isnan(b), f32(np.finfo(f32).max), b).min(axis=1).astype(f32)
            mx = np.where(np.isnan(b), f32(-np.finfo(f32).max), b).max(axis=1).astype(f32)
            d = ((mx - mn) / f32(15)).astype(f32)
            idv = np.where(d != 0, f32(1) / np.where(d != 0, d, f32(1)), f32(0)).astype(f32)
            v = ((b - mn[:, None]).astype(f32) * idv[:, None]).astype(f32) + f32(0.5)
            q = np.minimum(15, c_int8(v.astype(f32)))
            qs = (q[:, :16] & 0xFF) | ((q[:, 16:] & 0xFF) << 4)
            out = [d.astype(np.float16).view(np.uint8).reshape(nb, 2), mn.astype(np.float16).view(np.uint8).reshape(nb, 2),
                   (qs & 0xFF).astype(np.uint8)]
        else:
            amax = np.zeros(nb, f32)
            for j in range(32):  # C's MAX(a, b) = a > b ? a : b, NaN included
                av = np.abs(b[:, j])
                amax = np.where(amax > av, amax, av).astype(f32)
            d = (amax / f32(127)).astype(f32)
            idv = np.where(d != 0, f32(1) / np.where(d != 0, d, f32(1)), f32(0)).astype(f32)
            v = (b * idv[:, None]).astype(f32).astype(np.float64)
            r = np.trunc(v + np.copysign(0.5, v))  # roundf, exact in float64
            out = [d.astype(np.float16).view(np.uint8).reshape(nb, 2), (c_int8(r) & 0xFF).astype(np.uint8)]
    return np.concatenate(out, axis=1).reshape(-1) if nb else np.zeros(0, np.uint8)


def dequantize_ref(raw, fmt, rows, cols):
    """GGUF bytes -> float32 [rows, cols], as ggml's dequantize_row_* computes."""
    bb = QUANT_BLOCK_BYTES[fmt]
    blk = np.asarray(raw, np.uint8)[: rows * cols // 32 * bb].reshape(-1, bb)
    d = blk[:, 0:2].copy().view(np.float16).astype(np.float32)
    if fmt == "q8_0":
        v = blk[:, 2:].view(np.int8).astype(np.float32) * d
    else:
        qs = blk[:, 4:] if fmt == "q4_1" else blk[:, 2:]
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32)
        if fmt == "q4_0":
            v = (q - np.float32(8)) * d
        else:
            v = q * d + blk[:, 2:4].copy().view(np.float16).astype(np.float32)
    return v.astype(np.float32).reshape(rows, cols)


def as_words(raw):
    """GGUF bytes as the u32 tensor Kiln keeps them in (zero-padded to whole words)."""
    raw = np.asarray(raw, np.uint8)
    pad = (-raw.size) % 4
    return np.concatenate([raw, np.zeros(pad, np.uint8)]).view("<u4")


def quant_weights(rng, rows, cols):
    """Random weights with a constant row (d = 0 for q4_1) and a zero row (d = 0)."""
    w = rng.uniform(-3.0, 3.0, size=(rows, cols)).astype(np.float32)
    if rows > 2:
        w[1, :] = np.float32(0.75)
        w[2, :] = 0
    return w


def build_quant(g, rng):
    """Cases of the quant family (q4_0, q4_1, q8_0)."""
    for fmt in ("q4_0", "q4_1", "q8_0"):
        # quant_from_bytes: the runner uploads the first `nbytes` bytes of input `data`.
        for cid, rows, cols in [("typical", 3, 64), ("edge_one_block", 1, 32), ("edge_empty", 0, 32)]:
            raw = quantize_ref(quant_weights(rng, rows, cols), fmt)
            words = as_words(raw)
            g.case(f"quant_from_bytes.{fmt}_{cid}", "quant_from_bytes", {"format": fmt, "rows": rows, "cols": cols, "nbytes": int(raw.size)},
                   [("data", words, "u32")], words, "u32", (0, 0))
        # quantize: bytes equal ggml's reference quantizer.
        for cid, rows, cols, dt in [("typical", 5, 64, "f32"), ("edge_f16", 3, 96, "f16"), ("edge_empty", 0, 32, "f32")]:
            x = quant_weights(rng, rows, cols).astype(NP[dt])
            g.case(f"quantize.{fmt}_{cid}", "quantize", {"format": fmt}, [("x", x, dt)],
                   as_words(quantize_ref(x.astype(np.float32), fmt)), "u32", (0, 0))
        x = quant_weights(rng, 2, 64)
        x[0, 3], x[0, 40], x[1, 5], x[1, 6] = np.nan, np.inf, -np.inf, -0.0
        g.case(f"quantize.{fmt}_special", "quantize", {"format": fmt}, [("x", x, "f32")], as_words(quantize_ref(x, fmt)), "u32", (0, 0))
        # dequantize: exact.
        for cid, rows, cols in [("typical", 7, 96), ("edge_one_block", 1, 32), ("edge_empty", 0, 64)]:
            raw = quantize_ref(quant_weights(rng, rows, cols), fmt)
            g.case(f"dequantize.{fmt}_{cid}", "dequantize", {"format": fmt, "rows": rows, "cols": cols}, [("w", as_words(raw), "u32")],
                   dequantize_ref(raw, fmt, rows, cols), "f32", (0, 0))
        # quant_matmul: few rows (the matrix-vector kernel), many (the tiled one), f16, batched.
        for cid, xshape, n, dt in [("typical_one_row", [1, 64], 33, "f32"), ("typical_rows", [3, 96], 7, "f32"),
                                   ("large_tiled", [70, 64], 65, "f32"), ("edge_batched", [2, 3, 32], 5, "f32"),
                                   ("edge_f16", [2, 64], 9, "f16"), ("edge_empty", [0, 32], 4, "f32")]:
            k = xshape[-1]
            raw = quantize_ref(quant_weights(rng, n, k), fmt)
            w = dequantize_ref(raw, fmt, n, k).astype(np.float64)
            x = rng.uniform(-2.0, 2.0, size=xshape).astype(NP[dt])
            want = f64(x) @ w.T
            # f32 accumulation in any order: |error| <= (K + 2) 2^-24 sum |x w|.
            scale = float((np.abs(f64(x)) @ np.abs(w).T).max()) if x.size else 0.0
            atol = (k + 2) * 2.0**-24 * scale + 1e-30
            g.case(f"quant_matmul.{fmt}_{cid}", "quant_matmul", {"format": fmt, "n": n}, [("x", x, dt), ("w", as_words(raw), "u32")],
                   want, dt, (atol, 2.0**-11 if dt == "f16" else 0.0))
        # quant_embedding: ids outside [0, V) (negative included) give zeros.
        v, d = 6, 64
        raw = quantize_ref(quant_weights(rng, v, d), fmt)
        table = dequantize_ref(raw, fmt, v, d)
        for cid, ids, dt in [("typical", np.array([[0, 5, 2], [2, 1, 4]]), "i32"), ("edge_out_of_range", np.array([-1, 6, 3, -7]), "i32"),
                             ("edge_u32", np.array([4, 6, 0]), "u32")]:
            want = np.stack([table[i] if 0 <= i < v else np.zeros(d, np.float32) for i in ids.reshape(-1)]).reshape(*ids.shape, d)
            g.case(f"quant_embedding.{fmt}_{cid}", "quant_embedding", {"format": fmt, "d": d},
                   [("w", as_words(raw), "u32"), ("ids", ids.astype(NP[dt]), dt)], want, "f32", (0, 0))


# ---- quant, Q5_0 / Q5_1 / the K formats: not a numpy port but ggml's own C output, the vectors
# in core/tests/reference/kquant (written by ggml-quants.c's quantize_row_*_ref and
# dequantize_row_* over 18 awkward rows of 512 values; make.sh there rebuilds them).
KQUANT_DIR = os.path.join(HERE, "..", "..", "core", "tests", "reference", "kquant")
KQUANT = {"q5_0": (32, 22), "q5_1": (32, 24), "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176),
          "q6_k": (256, 210)}
KQUANT_ROWS, KQUANT_COLS = 18, 512


def build_quant_ggml(g, rng):
    """quantize (bytes equal ggml's, NaN / inf / subnormal rows included), dequantize (exact) and
    quant_matmul (matrix-vector and tiled) cases for each format of KQUANT."""
    x = np.fromfile(os.path.join(KQUANT_DIR, "rows.f32"), "<f4").reshape(KQUANT_ROWS, KQUANT_COLS)
    for fmt, (bl, bb) in KQUANT.items():
        rb = KQUANT_COLS // bl * bb
        q = np.fromfile(os.path.join(KQUANT_DIR, f"{fmt}.q"), np.uint8).reshape(KQUANT_ROWS, rb)
        deq = np.fromfile(os.path.join(KQUANT_DIR, f"{fmt}.f32"), "<f4").reshape(KQUANT_ROWS, KQUANT_COLS)
        g.case(f"quantize.{fmt}_ggml_rows", "quantize", {"format": fmt}, [("x", x, "f32")], as_words(q.reshape(-1)), "u32", (0, 0))
        # Rows whose values are finite (NaN compares unequal in the runners) for dequantize, and
        # of moderate size for the products (one tolerance per case).
        fin = [r for r in range(KQUANT_ROWS) if np.isfinite(deq[r]).all()]
        g.case(f"dequantize.{fmt}_ggml_rows", "dequantize", {"format": fmt, "rows": len(fin), "cols": KQUANT_COLS},
               [("w", as_words(q[fin].reshape(-1)), "u32")], deq[fin], "f32", (0, 0))
        mid = [r for r in fin if np.abs(deq[r]).max() < 100]
        w = deq[mid].astype(np.float64)
        raw = as_words(q[mid].reshape(-1))
        for cid, m in [("one_row", 1), ("rows", 3), ("tiled", 70)]:
            xm = rng.uniform(-2.0, 2.0, size=(m, KQUANT_COLS)).astype(np.float32)
            want = f64(xm) @ w.T
            scale = float((np.abs(f64(xm)) @ np.abs(w).T).max())
            atol = (KQUANT_COLS + 2) * 2.0**-24 * scale + 1e-30
            g.case(f"quant_matmul.{fmt}_ggml_{cid}", "quant_matmul", {"format": fmt, "n": len(mid)}, [("x", xm, "f32"), ("w", raw, "u32")],
                   want, "f32", (atol, 0.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()
    _philox_kat()
    ops = op_names()
    out = args.out
    if os.path.isdir(os.path.join(out, "data")):
        shutil.rmtree(os.path.join(out, "data"))
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    g = Gen(out, args.seed)
    build(g)
    build_added(g, args.seed)
    # Every op of the shared API (and custom kernels) has at least three cases.
    counts = {}
    for c in g.cases:
        counts[c["op"]] = counts.get(c["op"], 0) + 1
    short = [op for op in ops + ["kernel"] if counts.get(op, 0) < 3]
    unknown = sorted(set(counts) - set(ops) - {"kernel"})
    if short or unknown:
        sys.exit(f"gen.py: ops with fewer than 3 cases: {short}; cases for ops not in the op table: {unknown}")
    manifest = {"format": "kiln-conformance", "version": 1, "seed": args.seed, "ops": ops, "extra_ops": ["kernel"], "cases": g.cases}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    write_txt(os.path.join(out, "manifest.txt"), ops + ["kernel"], g.cases)
    print(f"gen.py: {len(g.cases)} cases for {len(ops)} ops + custom kernels (seed {args.seed}) in {out}")


if __name__ == "__main__":
    main()
