#!/usr/bin/env python3
"""Import cycles in core/src: which module uses which, from every `crate::` and `super::` path.

    scripts/core-cycles.py [--with-tests] [core/src]

Every Rust file is a module (`ops/matmul.rs` is ops::matmul, `ops/mod.rs` is ops). A path
`crate::a::b::c` names the deepest file module it reaches; a name re-exported by lib.rs or by a
directory's mod.rs (`crate::DType`, `crate::ops::permute`) names the file that defines it. Two
graphs are checked: between files, and between the crate's top-level modules (ops/*, reference/*
and device/* folded into one each). A parent's mod.rs declaring and re-exporting its children is
not an edge, and `#[cfg(test)] mod` blocks are left out (a unit test may reach the runtime;
`--with-tests` counts them too). Prints every strongly connected component of more than one module and exits 1 when
there is one.
"""

import os
import re
import sys

WITH_TESTS = "--with-tests" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != "--with-tests"]
ROOT = ARGS[0] if ARGS else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core", "src")
ROOT = os.path.normpath(ROOT)

def strip_tests(src):
    """Drops `#[cfg(test)] mod ... { ... }` blocks: a unit test may use what its module may not."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*mod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{", src)
        if not m:
            return src
        depth, i = 1, m.end()
        while i < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        src = src[:m.start()] + src[i:]


mods = {}  # module path tuple -> source text (comments stripped)
for d, _, files in os.walk(ROOT):
    for f in files:
        if not f.endswith(".rs"):
            continue
        rel = os.path.relpath(os.path.join(d, f), ROOT)[:-3].split(os.sep)
        if rel[-1] in ("mod", "lib"):
            rel = rel[:-1]
        src = open(os.path.join(d, f)).read()
        src = re.sub(r"//[^\n]*", "", src)
        src = re.sub(r'"(\\.|[^"\\])*"', '""', src)
        mods[tuple(rel)] = src if WITH_TESTS else strip_tests(src)

DEF = re.compile(r"\bpub(?:\([a-z]+\))?\s+(?:fn|struct|enum|const|static|type|trait)\s+([A-Za-z_][A-Za-z0-9_]*)")
REEXPORT = re.compile(r"\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);")


def defined_in(parent, name, value=False):
    """The file module under `parent` that defines `name` (following `pub use` re-exports);
    `value`: a function or constant, not a module of that name."""
    if name == "*":
        return parent
    if parent + (name,) in mods and not value:
        return parent + (name,)
    if name in DEF.findall(mods.get(parent, "")):
        return parent
    for m, src in mods.items():
        if m[:-1] == parent and name in DEF.findall(src):
            return m
    for spec in REEXPORT.findall(mods.get(parent, "")):
        for path in expand(spec):
            parts = path.split("::")
            if parts[-1] == name:
                base = parts[1:-1] if parts[0] == "crate" else parts[:-1]
                return resolve(tuple(base) if parts[0] == "crate" else parent + tuple(base), [name], value)
            if parts[-1] == "*":
                base = parts[1:-1] if parts[0] == "crate" else parts[:-1]
                glob = resolve(tuple(base) if parts[0] == "crate" else parent + tuple(base), [], value)
                if glob != parent and name in DEF.findall(mods.get(glob, "")):
                    return glob
    return None


def resolve(base, rest, value=False):
    """The deepest file module that `base::rest...` reaches (`value`: the last segment is called)."""
    cur = base
    for i, seg in enumerate(rest):
        last_value = value and i == len(rest) - 1
        if cur + (seg,) in mods and not last_value:
            cur = cur + (seg,)
            continue
        found = defined_in(cur, seg, last_value)
        return found if found is not None else cur
    return cur


def expand(spec):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    spec = re.sub(r"\s+", "", spec)
    m = re.match(r"^(.*?)\{(.*)\}$", spec)
    if not m:
        return [spec.split(" as ")[0]]
    prefix, body = m.groups()
    out, depth, cur = [], 0, ""
    for ch in body + ",":
        if ch == "," and depth == 0:
            if cur:
                out += [prefix + x for x in expand(cur)]
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    return out


def inline_mods(src):
    """(start, end) of every inline `mod name { ... }` block."""
    spans = []
    for m in re.finditer(r"\bmod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{", src):
        depth, i = 1, m.end()
        while i < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        spans.append((m.start(), i))
    return spans


def paths(src):
    """Every `crate::...` / `super::...` path with its brace groups, as (kind, tail, called,
    inside an inline mod)."""
    spans = inline_mods(src)
    for m in re.finditer(r"\b(crate|super)::", src):
        i, depth = m.end(), 0
        while i < len(src):
            ch = src[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                if depth == 0:
                    break
                depth -= 1
            elif not (ch.isalnum() or ch in "_:*" or (depth and ch in ", \n\t")):
                break
            i += 1
        called = src[i:i + 1] == "("
        inline = any(a <= m.start() < b for a, b in spans)
        yield m.group(1), src[m.end():i].rstrip(":"), called, inline


def uses(mod, src):
    out = set()
    for kind, tail, called, inline in paths(src):
        for path in expand(tail):
            parts = [p for p in path.split("::") if p and p != "self"]
            if not parts:
                continue
            # `super` inside an inline `mod tests { ... }` is the file's own module.
            base = () if kind == "crate" else (mod if inline else mod[:-1])
            t = resolve(base, parts, called)
            if t is not None and t != mod and t != ():
                out.add(t)
    return out


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in list(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def name(m):
    return "::".join(m) or "crate"


files = {}
for m, src in mods.items():
    # A mod.rs declaring and re-exporting its own children is structure, not use.
    files[m] = {t for t in uses(m, src) if not (t[:-1] == m and len(t) == len(m) + 1 and re.search(r"\bmod\s+" + t[-1] + r"\b", src))}
top = {}
for m, ts in files.items():
    if m:
        top.setdefault(m[:1], set()).update(t[:1] for t in ts if t[:1] != m[:1])

bad = 0
for title, graph in (("files", files), ("top-level modules", top)):
    comps = sccs(graph)
    print(f"{title}: {len(graph)} modules, {sum(len(v) for v in graph.values())} edges, {len(comps)} cycle(s)")
    for c in comps:
        bad += 1
        members = set(c)
        edges = sorted(f"{name(a)} -> {name(b)}" for a in c for b in graph[a] if b in members)
        print("  cycle: " + ", ".join(sorted(name(x) for x in c)))
        for e in edges:
            print("    " + e)
sys.exit(1 if bad else 0)
