#!/usr/bin/env python3
"""The comparison step of the conformance suite.

    compare.py --manifest OUT/manifest.json --results OUT/results [--header include/kiln.h]
               [--julia-src julia/src] [--julia-skipped]

Reads each language's results (rust.json, c.json, python.json, elixir.json, julia.json,
javascript.json: the browser package in headless Chromium), prints
a table (cases, passed, failed, missing ops, identical digests) and fails unless every case
passes in every language that can run here, every case's output digest is identical across
languages, and every binding exposes every op of kiln_core::ops::op_table() (and custom
kernels). Static exposure checks, beside the ones the runners make at run time: every op has
a `kiln_<op>` in kiln.h (C), and a `kiln_<op>` @ccall in julia/src (Julia, which wraps the C
ABI). Each problem is printed naming the op and the language.

A case may report "unsupported" (with its reason) where the language's adapter lacks what the
case needs (the browser's SwiftShader has no shader-f16): it is not a failure, and it takes no
part in that case's digest comparison.

Digests are compared among the languages that ran on the same adapter: a results file may name
its adapter ("adapter"; the native runners share the process's default one and name none). A
language on another adapter (JavaScript: the browser's SwiftShader) must give the native
languages' digest too: the kernels use no builtin whose precision WGSL leaves to the
implementation (shaders/elementwise_special.wgsl). One exception, reported as its own status and
never as a pass: WGSL lets an adapter flush subnormal operands and results of float arithmetic;
where the results file says its adapter does ("flushes_subnormals", probed by the runner) and a
differing case has a subnormal f32 in its inputs or expected output, the case is counted as
"adapter flushes subnormals" (listed by name), not as a failure.
"""

import argparse
import array
import json
import os
import re
import sys

LANGS = [
    ("rust", "Rust"),
    ("c", "C"),
    ("python", "Python"),
    ("elixir", "Elixir"),
    ("julia", "Julia"),
    ("javascript", "JavaScript"),
]
OK_STATUS = ("pass", "missing", "unsupported")


def c_symbols(op):
    return ["kiln_kernel_compile", "kiln_kernel_dispatch"] if op == "kernel" else [f"kiln_{op}"]


def static_c(header, ops):
    if not os.path.exists(header):
        return None, f"{header} not found"
    text = open(header).read()
    missing = [op for op in ops if not all(re.search(rf"\b{s}\s*\(", text) for s in c_symbols(op))]
    return missing, None


def static_julia(src, ops):
    if not os.path.isdir(src):
        return None, f"{src} not found"
    text = ""
    for dirpath, _, files in os.walk(src):
        for f in files:
            if f.endswith(".jl"):
                text += open(os.path.join(dirpath, f)).read()
    # A literal kiln_<op> (@ccall libkiln.kiln_add(...), ccall((:kiln_add, lib), ...)), or, for
    # wrappers generated in a loop (@eval over Symbol("kiln_", op)), the op as a quoted symbol.
    generated = re.search(r'Symbol\(\s*"kiln_"|:kiln_\$|"kiln_\$', text) is not None

    # Unary and binary ops may go through the generic entry points with the op's name as a
    # string: kiln_unary("exp", ...), kiln_binary("add", ...), kiln_binary_scalar.
    generic = re.search(r"\bkiln_(unary|binary|binary_scalar)\b", text) is not None

    def has(op):
        if all(re.search(rf"\b{s}\b", text) for s in c_symbols(op)):
            return True
        if generic and re.search(rf'"{op}"', text):
            return True
        return generated and op != "kernel" and re.search(rf":{op}\b", text) is not None

    return [op for op in ops if not has(op)], None


def has_subnormal_f32(base, spec):
    """Whether an f32 array of the vectors holds a subnormal (exponent bits 0, fraction not)."""
    if spec.get("dtype") != "f32" or not spec.get("file"):
        return False
    words = array.array("I")
    with open(os.path.join(base, spec["file"]), "rb") as f:
        words.frombytes(f.read())
    return any(w & 0x7F800000 == 0 and w & 0x007FFFFF for w in words)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--header", default="include/kiln.h")
    ap.add_argument("--julia-src", default="julia/src")
    ap.add_argument(
        "--julia-skipped", action="store_true", help="julia is not on the PATH: Julia only gets the static checks"
    )
    args = ap.parse_args()

    m = json.load(open(args.manifest))
    ops = m["ops"] + m.get("extra_ops", [])
    cases = [c["id"] for c in m["cases"]]
    op_of = {c["id"]: c["op"] for c in m["cases"]}
    problems = []
    results = {}
    notes = {}
    for key, name in LANGS:
        path = os.path.join(args.results, f"{key}.json")
        if key == "julia" and args.julia_skipped:
            notes[key] = "did not take part: no `julia` on the PATH (static checks only)"
            continue
        if not os.path.exists(path):
            notes[key] = "NO RESULTS: the runner did not run or crashed"
            problems.append(f"{name}: no results ({path}): the {name} runner did not run or crashed")
            continue
        r = json.load(open(path))
        byid = {c["id"]: c for c in r["cases"]}
        results[key] = (r, byid)
        for op in r.get("missing_ops", []):
            problems.append(f"{name}: the binding lacks op `{op}`")
        for cid in cases:
            c = byid.get(cid)
            if c is None:
                problems.append(f"{name}: op `{op_of[cid]}` case {cid}: not run")
            elif c["status"] not in OK_STATUS:
                problems.append(f"{name}: op `{c['op']}` case {cid}: {c['status'].upper()}: {c['message']}")

    # Static exposure checks.
    cm, err = static_c(args.header, ops)
    if err:
        problems.append(f"C: static check: {err}")
    else:
        for op in cm:
            problems.append(f"C: kiln.h lacks op `{op}` ({', '.join(c_symbols(op))})")
    jm, err = static_julia(args.julia_src, ops)
    if err:
        problems.append(f"Julia: static check: {err}: the Julia binding lacks every op")
    else:
        for op in jm:
            problems.append(
                f"Julia: julia/src has no @ccall of {', '.join(c_symbols(op))}: the binding lacks op `{op}`"
            )

    # Digests: per case, the majority digest among the languages on one adapter that produced one.
    def adapter(key):
        return results[key][0].get("adapter", "native")

    native = [key for key in results if adapter(key) == "native"]
    differs = {key: [] for key in results}
    identical_cases = 0
    for cid in cases:
        digs = {
            key: results[key][1][cid]["sha256"]
            for key in native
            if cid in results[key][1] and results[key][1][cid]["sha256"]
        }
        # Languages that could not run the case on their adapter take no part in its comparison.
        taking_part = [key for key in native if results[key][1].get(cid, {}).get("status") != "unsupported"]
        if not digs:
            continue
        counts = {}
        for d in digs.values():
            counts[d] = counts.get(d, 0) + 1
        top = max(counts.values())
        majority = [d for d, n in counts.items() if n == top]
        if len(counts) == 1 and len(digs) == len(taking_part):
            identical_cases += 1
            continue
        for key, d in digs.items():
            if len(counts) > 1 and (d not in majority or len(majority) > 1):
                differs[key].append(cid)
        if len(digs) < len(taking_part):
            for key in taking_part:
                if key not in digs:
                    differs[key].append(cid)
    for key, ids in differs.items():
        name = dict(LANGS)[key]
        for cid in ids:
            problems.append(
                f"{name}: op `{op_of[cid]}` case {cid}: output digest differs from the other languages' (or is absent)"
            )

    # Languages on another adapter: byte-identical cases with the native ones' common digest.
    def native_digest(cid):
        digs = {results[k][1][cid]["sha256"] for k in native if cid in results[k][1] and results[k][1][cid]["sha256"]}
        return digs.pop() if len(digs) == 1 else None

    base = os.path.dirname(os.path.abspath(args.manifest))
    case_of = {c["id"]: c for c in m["cases"]}

    def subnormal_data(cid):
        c = case_of[cid]
        return any(has_subnormal_f32(base, spec) for spec in [*c["inputs"], c["expected"]])

    cross = {}
    for key in results:
        if adapter(key) == "native":
            continue
        r, byid = results[key]
        name = dict(LANGS)[key]
        ran = [cid for cid in cases if byid.get(cid, {}).get("sha256") and native_digest(cid)]
        same = [cid for cid in ran if native_digest(cid) == byid[cid]["sha256"]]
        flushed = []
        for cid in ran:
            if cid in same:
                continue
            if r.get("flushes_subnormals") and subnormal_data(cid):
                flushed.append(cid)
            else:
                problems.append(
                    f"{name}: op `{op_of[cid]}` case {cid}: output digest differs from the native languages' ({adapter(key)})"
                )
        cross[key] = (len(same), len(ran), flushed)

    # Table.
    print()
    print(
        f"Kiln conformance: {len(cases)} cases, {len(ops)} ops (kiln_core::ops::op_table() + custom kernels), seed {m.get('seed')}"
    )
    print(
        f"{'language':<10} {'cases':>6} {'passed':>7} {'failed':>7} {'unsupported':>11} {'missing ops':>12}  identical digests"
    )
    for key, name in LANGS:
        if key not in results:
            print(f"{name:<10} {'-':>6} {'-':>7} {'-':>7} {'-':>11} {'-':>12}  {notes.get(key, '')}")
            continue
        r, byid = results[key]
        n = len(byid)
        npass = sum(c["status"] == "pass" for c in byid.values())
        nuns = sum(c["status"] == "unsupported" for c in byid.values())
        miss = len(r.get("missing_ops", []))
        ident = "yes" if not differs[key] else f"NO ({len(differs[key])} cases differ)"
        if key in cross:
            same, ran_, flushed = cross[key]
            ident = f"{adapter(key)}: {same}/{ran_} cases byte-identical to the native adapter's"
            if flushed:
                ident += f", {len(flushed)} adapter flushes subnormals"
        print(f"{name:<10} {n:>6} {npass:>7} {n - npass - nuns:>7} {nuns:>11} {miss:>12}  {ident}")
        if nuns:
            # The reason without each case's measurement (in parentheses at its end).
            reasons = sorted(
                {re.sub(r" \([^()]*\)$", "", c["message"]) for c in byid.values() if c["status"] == "unsupported"}
            )
            print(f"{'':<10} unsupported on its adapter: {'; '.join(reasons)}")
    static = []
    static.append("C kiln.h: " + ("all ops" if cm == [] else ("missing " + ", ".join(cm) if cm else "not checked")))
    static.append("Julia @ccall: " + ("all ops" if jm == [] else ("missing " + ", ".join(jm) if jm else "not checked")))
    print("static exposure: " + "; ".join(static))
    for key, (_, _, flushed) in cross.items():
        if flushed:
            print(
                f"{dict(LANGS)[key]}: adapter flushes subnormals (subnormal data; not bit for bit): {', '.join(flushed)}"
            )
    ran = [dict(LANGS)[k] for k in native]
    all_ident = identical_cases == len(cases) and len(native) > 1
    print(
        f"identical across languages ({', '.join(ran)}): {'yes' if all_ident else 'no'} ({identical_cases}/{len(cases)} cases)"
    )
    if problems:
        print(f"\nconformance: FAILED ({len(problems)} problems)")
        for p in problems[:200]:
            print("  " + p)
        if len(problems) > 200:
            print(f"  ... and {len(problems) - 200} more")
        sys.exit(1)
    print("\nconformance: all cases pass in every language, digests identical")


if __name__ == "__main__":
    main()
