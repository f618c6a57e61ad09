#!/usr/bin/env python3
"""Python runner of the conformance suite: every case of manifest.json through `import kiln`
(the PyO3 binding), never through another language.

    py_runner.py MANIFEST.json OUT.json

Writes {"language": "python", "missing_ops": [...], "cases": [{id, op, status, sha256, message}]}.
numpy is used only to read the vector files and to compare; every op runs through kiln.
Written by hand where the Python form is numpy's rather than the row's; the ops whose wrapper
takes the row's arguments are called from ops.json's `python_args` (and `outputs`).
"""

import hashlib
import json
import os
import sys
import traceback

import kiln
import numpy as np

LE = {"f32": "<f4", "f16": "<f2", "i32": "<i4", "u32": "<u4", "bool": "|b1"}

# Each shared op name and the names the Python binding may give it, in order of preference
# (the array-API spellings are the binding's own choice; the semantics must be the core op's).
# transpose(x, axis0, axis1) in kiln-core is numpy's swapaxes; kiln.transpose is numpy's.
# numpy's names for kiln-core's ops, from the op table (tests/conformance/ops.json, written by
# `kiln-gen`), with kiln-core's own name as a fallback and Kernel for custom kernels.
_TABLE = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.json")))["ops"]
ALIASES = {o["name"]: [o["python"], o["name"]] for o in _TABLE}
ALIASES["kernel"] = ["Kernel"]
# The ops whose Python wrapper (generated from their typed row, or written by hand in the row's
# form) is called with their arguments in the row's order ([manifest key, kind, Python keyword or
# None: by position]; kind "tensors" is every input, as a list).
PLAIN = {o["name"]: o["python_args"] for o in _TABLE if "python_args" in o}
# The plain ops giving a named tuple (their wrappers give a Python tuple in its order): the
# case's `output` element is checked.
TUPLES = {o["name"] for o in _TABLE if "outputs" in o}


def resolve(op):
    for name in ALIASES.get(op, [op]):
        f = getattr(kiln, name, None)
        if callable(f):
            return f
    return None


def load(d, spec):
    raw = open(os.path.join(d, spec["file"]), "rb").read()
    return raw, spec["dtype"], tuple(spec["shape"])


def upload(d, spec):
    raw, dt, shape = load(d, spec)
    return kiln.from_bytes(raw, list(shape), dt)


def run(op, f, p, ins, d):
    x = ins[0][1] if ins else None
    get = dict(ins).get
    if op in PLAIN:
        # A list parameter (axes, a pair, a shape) as a tuple, as Python code writes it.
        def arg(k, kind):
            if kind == "tensors":
                return [t for _, t in ins]
            return get(k) if kind == "tensor" else tuple(p[k]) if isinstance(p[k], list) else p[k]

        y = f(*[arg(k, t) for k, t, kw in PLAIN[op] if kw is None], **{kw: arg(k, t) for k, t, kw in PLAIN[op] if kw})
        return y[p["output"]] if op in TUPLES else y
    # Written by hand: the ops whose Python form is not the row's (ops.json gives no python_args).
    if op == "arange":
        return f(float(p["start"]), float(p["stop"]), float(p["step"]), dtype=p["dtype"])
    if op == "clip":
        return f(x, get("min"), get("max")) if len(ins) == 3 else f(x, p["min"], p["max"])
    if op == "tensordot":
        return f(get("a"), get("b"), axes=p["n"] if p["n"] >= 0 else (p["axes1"], p["axes2"]))
    if op == "quant_from_bytes":
        return f(x.tobytes()[: p["nbytes"]], p["format"], p["rows"], p["cols"])
    if op == "searchsorted":
        return f(get("x1"), get("x2"), side="right" if p["right"] else "left")
    if op == "kernel":
        src = open(os.path.join(d, p["source"])).read()
        k = f(src, p["entry"])
        uni = None if p["uniforms"] is None else bytes.fromhex(p["uniforms"])
        k(*[t for _, t in ins], workgroups=tuple(p["workgroups"]), uniforms=uni)
        return ins[p["output"]][1]
    if "scalar" in p:
        s = float(p["scalar"])
        return f(s, x) if p["scalar_first"] else f(x, s)
    if len(ins) == 2:
        return f(get("a"), get("b"))
    if len(ins) == 1:
        return f(x)
    raise ValueError(f"the Python runner has no calling convention for op {op}")


def dtype_name(t):
    return {"float32": "f32", "float16": "f16", "int32": "i32", "uint32": "u32", "bool": "bool"}.get(np.dtype(t.dtype).name, str(t.dtype))


def check(case, d, y):
    raw, dt, shape = load(d, case["expected"])
    got = y.tobytes()
    digest = hashlib.sha256(got).hexdigest()
    if dtype_name(y) != dt or tuple(y.shape) != shape:
        return "fail", digest, f"output {dtype_name(y)} {tuple(y.shape)}, expected {dt} {shape}"
    g = np.frombuffer(got, LE[dt]).astype(np.float64)
    w = np.frombuffer(raw, LE[dt]).astype(np.float64)
    if g.size != w.size:
        return "fail", digest, f"{g.size} bytes-worth of elements, expected {w.size}"
    atol, rtol = case["atol"], case["rtol"]
    with np.errstate(invalid="ignore"):
        ok = (np.isnan(g) & np.isnan(w)) | (g == w) | (np.abs(g - w) <= atol + rtol * np.abs(w))
        # A zero matches only a zero of the same sign (-0 and +0 are different results).
        ok &= ~((g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w)))
    if ok.all():
        return "pass", digest, ""
    i = int(np.argmin(ok))
    return "fail", digest, f"{int((~ok).sum())} of {w.size} elements outside atol {atol} rtol {rtol}; first: element {i}: got {g[i]}, expected {w[i]}"


def main():
    manifest, out = sys.argv[1], sys.argv[2]
    d = os.path.dirname(os.path.abspath(manifest))
    m = json.load(open(manifest))
    ops = m["ops"] + m.get("extra_ops", [])
    fns = {op: resolve(op) for op in ops}
    missing = [op for op in ops if fns[op] is None]
    results = []
    for case in m["cases"]:
        op = case["op"]
        r = {"id": case["id"], "op": op, "status": "", "sha256": "", "message": ""}
        if fns.get(op) is None:
            r.update(status="missing", message=f"op {op} is not exposed by the Python binding (tried {ALIASES.get(op, [op])})")
        else:
            try:
                ins = [(s["name"], upload(d, s)) for s in case["inputs"]]
                f = fns[op]
                # The core `div` on integers is floor division; in the array API `/` is true
                # division, so the binding's `floor_divide` is the core op there when it has one.
                if op == "div" and case["inputs"][0]["dtype"] in ("i32", "u32") and callable(getattr(kiln, "floor_divide", None)):
                    f = kiln.floor_divide
                y = run(op, f, case["params"], ins, d)
                r["status"], r["sha256"], r["message"] = check(case, d, y)
            except Exception as e:  # a binding error is a failed case, not a crashed runner
                r.update(status="error", message=f"{type(e).__name__}: {e}")
                if os.environ.get("KILN_CONFORMANCE_TRACE"):
                    traceback.print_exc()
        results.append(r)
    json.dump({"language": "python", "binding": "kiln (PyO3)", "missing_ops": missing, "cases": results}, open(out, "w"), indent=1)
    npass = sum(r["status"] == "pass" for r in results)
    print(f"conformance (python): {npass}/{len(results)} cases pass; results in {out}")


if __name__ == "__main__":
    main()
