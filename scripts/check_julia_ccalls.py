#!/usr/bin/env python3
"""Static check of the Julia package against the C header (no Julia needed).

Every `@ccall libkiln.<name>(args...)::Ret` in julia/src must name a function declared in
include/kiln.h, with the same number of arguments, and each argument and the return type must
be a Julia type that matches the C type (table below). Every Julia mirror of a C struct
(`struct KilnMemoryStats ... end` etc.) must have the C struct's fields, in order, with
matching types. A `@ccall` the checker cannot parse is an error, not a skip.

    scripts/check_julia_ccalls.py --header include/kiln.h julia/src
    scripts/check_julia_ccalls.py --self-test
"""
import argparse
import os
import re
import sys

# ---------------------------------------------------------------------------------------------
# C side
# ---------------------------------------------------------------------------------------------

SCALARS = {
    "KilnStatus": {"UInt32", "Cuint"},
    "KilnDType": {"UInt32", "Cuint"},
    "uint32_t": {"UInt32", "Cuint"},
    "int32_t": {"Int32", "Cint"},
    "uint64_t": {"UInt64", "Culonglong"},
    "int64_t": {"Int64", "Clonglong"},
    "size_t": {"Csize_t", "UInt"},
    "ptrdiff_t": {"Cptrdiff_t", "Int"},
    "bool": {"Bool"},
    "double": {"Cdouble", "Float64"},
    "float": {"Cfloat", "Float32"},
    "char": {"Cchar", "UInt8", "Int8"},
}
OPAQUE_OR_STRUCT = re.compile(r"^Kiln[A-Za-z]+$")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def norm_ctype(t):
    """'const struct KilnTensor *const *' -> ('KilnTensor', 2) plus constness (ignored)."""
    t = t.replace("struct ", " ").replace("enum ", " ")
    depth = t.count("*")
    base = re.sub(r"\bconst\b", " ", t.replace("*", " ")).split()
    if len(base) != 1:
        raise ValueError(f"cannot read C type {t!r}")
    return base[0], depth


def parse_header(text):
    """Function prototypes and struct definitions of kiln.h."""
    src = strip_comments(text)
    src = re.sub(r"^\s*#.*$", " ", src, flags=re.M)
    funcs = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(kiln_\w+)\s*\(([^)]*)\)\s*;", src):
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
        args = []
        if params and params != "void":
            for p in params.split(","):
                p = " ".join(p.split())
                pm = re.match(r"^(.*?[\s\*])(\w+)$", p)
                if not pm:
                    raise ValueError(f"{name}: cannot read parameter {p!r}")
                args.append((pm.group(2), norm_ctype(pm.group(1))))
        funcs[name] = (norm_ctype(ret), args)
    structs = {}
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", src, flags=re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            fm = re.match(r"^(.*?)\s+(\w+)(?:\[(\d+)\])?$", decl)
            if not fm:
                raise ValueError(f"struct {m.group(1)}: cannot read field {decl!r}")
            fields.append((fm.group(2), norm_ctype(fm.group(1)), int(fm.group(3)) if fm.group(3) else None))
        structs[m.group(1)] = fields
    return funcs, structs


# ---------------------------------------------------------------------------------------------
# Julia side
# ---------------------------------------------------------------------------------------------


def strip_julia_comments(text):
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("#=", i):
            j = text.find("=#", i + 2)
            i = n if j < 0 else j + 2
        elif text[i] == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            # copy strings verbatim (a '#' inside a string is not a comment)
            q = '"""' if text.startswith('"""', i) else '"'
            j = i + len(q)
            while j < n and not text.startswith(q, j):
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + len(q)])
            i = j + len(q)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def balanced(text, i, open_ch, close_ch):
    """Index just past the bracket that closes text[i] == open_ch."""
    assert text[i] == open_ch
    j = i
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    while j < len(text):
        c = text[j]
        if c == '"':
            j += 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
        elif c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            if not stack or stack.pop() != c:
                raise ValueError(f"unbalanced {c!r}")
            if not stack:
                return j + 1
        j += 1
    raise ValueError("unterminated bracket")


def split_top(s, sep=","):
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        if c == '"':
            j = i + 1
            while j < len(s) and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            cur.append(s[i : j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts]


def split_typeassert(arg):
    """'expr::Type' -> (expr, Type), splitting at the last top-level '::'."""
    depth, last = 0, -1
    for i, c in enumerate(arg):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and arg.startswith("::", i):
            last = i
    if last < 0:
        raise ValueError(f"argument {arg!r} has no ::Type")
    return arg[:last].strip(), arg[last + 2 :].strip()


def parse_ccalls(text, path):
    """Every @ccall in a Julia source: (line, name, [julia arg types], julia return type)."""
    src = strip_julia_comments(text)
    calls, errors = [], []
    for m in re.finditer(r"@ccall\b", src):
        line = src.count("\n", 0, m.start()) + 1
        where = f"{path}:{line}"
        try:
            i = m.end()
            while src[i] in " \t":
                i += 1
            nm = re.compile(r"libkiln\.(\w+)\(").match(src, i)
            if not nm:
                raise ValueError("expected `@ccall libkiln.<function>(...)::<type>`")
            open_at = nm.end() - 1
            close_at = balanced(src, open_at, "(", ")")
            inner = src[open_at + 1 : close_at - 1]
            if re.search(r";", inner):
                raise ValueError("varargs (;) are not used with libkiln")
            args = [split_typeassert(a)[1] for a in split_top(inner)] if inner.strip() else []
            rm = re.compile(r"\s*::\s*").match(src, close_at)
            if not rm:
                raise ValueError("missing ::ReturnType")
            j = rm.end()
            k = j
            while k < len(src) and (src[k].isalnum() or src[k] in "_."):
                k += 1
            if k < len(src) and src[k] == "{":
                k = balanced(src, k, "{", "}")
            ret = src[j:k].strip()
            if not ret:
                raise ValueError("missing ::ReturnType")
            calls.append((where, nm.group(1), [" ".join(a.split()) for a in args], ret))
        except (ValueError, IndexError) as e:
            errors.append(f"{where}: cannot parse @ccall: {e}")
    return calls, errors


def parse_julia_structs(text):
    src = strip_julia_comments(text)
    out = {}
    for m in re.finditer(r"^\s*struct\s+(Kiln\w+)\s*\n(.*?)^\s*end\b", src, flags=re.S | re.M):
        fields = []
        for line in m.group(2).splitlines():
            line = line.strip()
            if not line:
                continue
            fm = re.match(r"^(\w+)::(.+)$", line)
            if not fm:
                fields = None
                break
            fields.append((fm.group(1), fm.group(2).replace(" ", "")))
        if fields is not None:
            out[m.group(1)] = fields
    return out


# ---------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------


OPAQUE = set()  # filled from the header: `typedef struct X X;` without a body


def _pointee(base, depth):
    """Julia spellings of the type found after `depth` more dereferences."""
    if depth == 0:
        if base == "void":
            return {"Cvoid"}
        if base in SCALARS:
            return SCALARS[base]
        if OPAQUE_OR_STRUCT.match(base):
            return {base}
        return set()
    return {f"Ptr{{{t}}}" for t in _pointee(base, depth - 1)}


def julia_types_for(ctype, role):
    """Julia spellings accepted for a C type. role: 'arg', 'ret' or 'field'."""
    base, depth = ctype
    if depth == 0:
        if base == "void":
            return {"Cvoid", "Nothing"} if role == "ret" else set()
        if base in SCALARS:
            return SCALARS[base]
        if role == "field" and OPAQUE_OR_STRUCT.match(base) and base not in OPAQUE:
            return {base}
        return set()
    inner = _pointee(base, depth - 1)
    out = {f"Ptr{{{t}}}" for t in inner}
    if role == "arg":
        # Ref{T} for out-parameters and by-reference values; never a Ref to an opaque type
        # or to void.
        out |= {f"Ref{{{t}}}" for t in inner if t not in OPAQUE and t != "Cvoid"}
    if base == "char" and depth == 1 and role in ("arg", "ret"):
        out.add("Cstring")
    return out


def check(header_text, julia_sources, require_all=False):
    errors = []
    funcs, cstructs = parse_header(header_text)
    OPAQUE.clear()
    OPAQUE.update(re.findall(r"typedef\s+struct\s+(\w+)\s+\1\s*;", strip_comments(header_text)))
    if not funcs:
        return ["no kiln_* prototypes found in the header"], {}
    used = {}
    for path, text in julia_sources:
        calls, perrs = parse_ccalls(text, path)
        errors += perrs
        for where, name, args, ret in calls:
            used[name] = used.get(name, 0) + 1
            if name not in funcs:
                errors.append(f"{where}: {name} is not declared in kiln.h")
                continue
            (cret, cargs) = funcs[name]
            if len(args) != len(cargs):
                errors.append(f"{where}: {name} takes {len(cargs)} arguments in kiln.h, @ccall passes {len(args)}")
                continue
            want = julia_types_for(cret, "ret")
            if ret not in want:
                errors.append(f"{where}: {name} returns {cret[0]}{'*' * cret[1]}; @ccall says {ret} (expected one of {sorted(want)})")
            for k, (jt, (pname, ct)) in enumerate(zip(args, cargs)):
                want = julia_types_for(ct, "arg")
                if jt not in want:
                    errors.append(f"{where}: {name} argument {k + 1} ({pname}) is {ct[0]}{' ' + '*' * ct[1] if ct[1] else ''} "
                                  f"in kiln.h; @ccall says {jt} (expected one of {sorted(want)})")
        for sname, jfields in parse_julia_structs(text).items():
            if sname not in cstructs:
                continue
            cf = cstructs[sname]
            if len(cf) != len(jfields):
                errors.append(f"{path}: struct {sname} has {len(jfields)} fields, kiln.h has {len(cf)}")
                continue
            for (jn, jt), (cn, ct, arr) in zip(jfields, cf):
                if jn != cn:
                    errors.append(f"{path}: struct {sname}: field {jn} where kiln.h has {cn}")
                if arr is not None:
                    want = {f"NTuple{{{arr},{t}}}" for t in julia_types_for(ct, "field")}
                else:
                    want = julia_types_for(ct, "field")
                if jt not in want:
                    errors.append(f"{path}: struct {sname}.{jn} is {jt}, kiln.h needs one of {sorted(want)}")
    if require_all:
        for name in sorted(set(funcs) - set(used)):
            errors.append(f"kiln.h declares {name} but no @ccall in the Julia package uses it")
    return errors, {"functions": len(funcs), "used": used}


# ---------------------------------------------------------------------------------------------
# Self-test: the checker must catch each kind of mistake.
# ---------------------------------------------------------------------------------------------

SELF_HEADER = """
typedef struct KilnTensor KilnTensor;
typedef struct KilnMemoryStats { uint64_t a; char name[4]; } KilnMemoryStats;
KilnStatus kiln_add(const struct KilnTensor *a,
                    const struct KilnTensor *b,
                    struct KilnTensor **out);
size_t kiln_last_error_message(char *buf, size_t len);
KilnStatus kiln_sum(const struct KilnTensor *x, const ptrdiff_t *axes, size_t naxes, bool keepdims, struct KilnTensor **out);
KilnStatus kiln_concat(const struct KilnTensor *const *tensors, size_t n, ptrdiff_t axis, struct KilnTensor **out);
void kiln_tensor_free(struct KilnTensor *t);
KilnStatus kiln_memory_stats(KilnMemoryStats *out);
"""

SELF_GOOD = """
struct KilnMemoryStats
    a::UInt64
    name::NTuple{4,UInt8}
end
f(a, b, out) = @ccall libkiln.kiln_add(a::Ptr{KilnTensor}, b::Ptr{KilnTensor}, out::Ref{Ptr{KilnTensor}})::UInt32
g(buf, n) = @ccall libkiln.kiln_last_error_message(buf::Ptr{UInt8}, n::Csize_t)::Csize_t  # a comment with @ccall
h(x, ax, out) = @ccall libkiln.kiln_sum(x::Ptr{KilnTensor}, ax::Ptr{Cptrdiff_t}, length(ax)::Csize_t, true::Bool, out::Ref{Ptr{KilnTensor}})::UInt32
c(p, out) = @ccall libkiln.kiln_concat(p::Ptr{Ptr{KilnTensor}}, length(p)::Csize_t, Cptrdiff_t(0)::Cptrdiff_t, out::Ref{Ptr{KilnTensor}})::UInt32
fr(t) = @ccall libkiln.kiln_tensor_free(t::Ptr{KilnTensor})::Cvoid
m(r) = @ccall libkiln.kiln_memory_stats(r::Ref{KilnMemoryStats})::UInt32
"""

SELF_BAD = [
    ("unknown function", "@ccall libkiln.kiln_nope(x::Ptr{KilnTensor})::UInt32"),
    ("argument count", "@ccall libkiln.kiln_add(a::Ptr{KilnTensor}, out::Ref{Ptr{KilnTensor}})::UInt32"),
    ("argument type", "@ccall libkiln.kiln_add(a::Ptr{KilnTensor}, b::Ptr{Cvoid}, out::Ref{Ptr{KilnTensor}})::UInt32"),
    ("pointer depth", "@ccall libkiln.kiln_add(a::Ptr{KilnTensor}, b::Ptr{KilnTensor}, out::Ptr{KilnTensor})::UInt32"),
    ("scalar width", "@ccall libkiln.kiln_last_error_message(b::Ptr{UInt8}, n::UInt32)::Csize_t"),
    ("return type", "@ccall libkiln.kiln_last_error_message(b::Ptr{UInt8}, n::Csize_t)::UInt32"),
    ("axes type", "@ccall libkiln.kiln_sum(x::Ptr{KilnTensor}, ax::Ptr{Int32}, n::Csize_t, k::Bool, o::Ref{Ptr{KilnTensor}})::UInt32"),
    ("bool as int", "@ccall libkiln.kiln_sum(x::Ptr{KilnTensor}, ax::Ptr{Cptrdiff_t}, n::Csize_t, k::Cint, o::Ref{Ptr{KilnTensor}})::UInt32"),
    ("array of handles", "@ccall libkiln.kiln_concat(p::Ptr{KilnTensor}, n::Csize_t, a::Cptrdiff_t, o::Ref{Ptr{KilnTensor}})::UInt32"),
    ("unparseable", "@ccall kiln_add(a::Ptr{KilnTensor})::UInt32"),
    ("missing return type", "@ccall libkiln.kiln_tensor_free(t::Ptr{KilnTensor})"),
    ("struct field", "struct KilnMemoryStats\n    a::UInt32\n    name::NTuple{4,UInt8}\nend\n"),
    ("struct array length", "struct KilnMemoryStats\n    a::UInt64\n    name::NTuple{5,UInt8}\nend\n"),
]


def self_test():
    errs, _ = check(SELF_HEADER, [("good.jl", SELF_GOOD)])
    if errs:
        print("self-test: the good sample was rejected:\n  " + "\n  ".join(errs))
        return 1
    failed = 0
    for what, snippet in SELF_BAD:
        errs, _ = check(SELF_HEADER, [("bad.jl", snippet)])
        if not errs:
            print(f"self-test: the checker missed: {what}: {snippet}")
            failed += 1
    if failed:
        return 1
    print(f"self-test: 1 good sample accepted, {len(SELF_BAD)} bad samples rejected")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--header", default="include/kiln.h")
    ap.add_argument("--require-all", action="store_true", help="fail when a header function is never called")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("src", nargs="?", default="julia/src")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    rc = self_test()
    if rc:
        return rc
    with open(a.header) as f:
        header = f.read()
    sources = []
    for root, _, files in os.walk(a.src):
        for fn in sorted(files):
            if fn.endswith(".jl"):
                p = os.path.join(root, fn)
                with open(p) as f:
                    sources.append((p, f.read()))
    if not sources:
        print(f"check_julia_ccalls: no .jl files under {a.src}")
        return 1
    errors, info = check(header, sources, a.require_all)
    if errors:
        print("check_julia_ccalls: FAILED")
        for e in errors:
            print("  " + e)
        return 1
    n = sum(info["used"].values())
    unused = sorted(set(parse_header(header)[0]) - set(info["used"]))
    print(f"check_julia_ccalls: {n} @ccall sites, {len(info['used'])} of {info['functions']} kiln.h functions, "
          f"all match the header (arity and C types)")
    if unused:
        print("  not called from Julia: " + ", ".join(unused))
    return 0


if __name__ == "__main__":
    sys.exit(main())
