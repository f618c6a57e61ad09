#!/usr/bin/env python3
"""Fails when include/kiln.h declares a name outside Kiln's prefixes.

Every typedef, struct and enum tag, enumerator, macro and function the header declares must
start with `Kiln`, `kiln_` or `KILN_`: a C program shares one namespace with every library it
links, and cbindgen exports whatever Rust alias a signature names (the header once gained a bare
`typedef struct KilnTensor **Out;`). Parameter and struct member names are not checked (they
are not in the program's namespace).

    scripts/check_header_names.py [include/kiln.h]

Prints each offending line (`kiln.h:LINE: 'NAME' ... : the line`) and exits 1, or says how many
names it checked.
"""

import re
import sys

PREFIXES = ("Kiln", "kiln_", "KILN_")
# Names the header may declare without the prefix: none today. Add one only with the reason.
ALLOWED: set[str] = set()

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|\d[\w.]*|\S')
C_KEYWORDS = set(
    "const volatile restrict struct enum union typedef extern static inline void char short int long "
    "float double signed unsigned bool _Bool".split()
)


def strip_comments(text: str) -> str:
    """Comments become spaces (newlines kept, so line numbers hold)."""

    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.S)


def tokens(text: str):
    """(token, line) pairs of the C code, preprocessor lines left out."""
    line = 1
    for raw in text.split("\n"):
        if not raw.lstrip().startswith("#"):
            for m in TOKEN.finditer(raw):
                yield m.group(0), line
        line += 1


def macros(text: str):
    for n, raw in enumerate(text.split("\n"), 1):
        m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)", raw)
        if m:
            yield m.group(1), n, "macro"


def declarations(toks):
    """(name, line, kind) of what each top-level declaration introduces."""
    i, n = 0, len(toks)
    while i < n:
        tok, line = toks[i]
        # extern "C" { ... }: its braces are not a scope of names.
        if tok == "extern" and i + 2 < n and toks[i + 1][0] == '"C"' and toks[i + 2][0] == "{":
            i += 3
            continue
        if tok in ("}", ";"):
            i += 1
            continue
        # One declaration: up to the ';' at depth 0.
        start, depth = i, 0
        while i < n and not (toks[i][0] == ";" and depth == 0):
            depth += toks[i][0] in "({[" and 1 or 0
            depth -= toks[i][0] in ")}]" and 1 or 0
            i += 1
        yield from names_of(toks[start:i])
        i += 1


def names_of(decl):
    words = [t for t, _ in decl]
    is_typedef = words and words[0] == "typedef"
    depth, j = 0, 0
    body_end = None
    # Tags (`struct X`, `enum X`) and enumerators inside an enum's braces.
    while j < len(decl):
        t, line = decl[j]
        if t in ("struct", "enum", "union") and depth == 0 and j + 1 < len(decl):
            tag, tline = decl[j + 1]
            if IDENT.fullmatch(tag):
                yield tag, tline, f"{t} tag"
            if t == "enum":
                k = next((k for k in range(j + 1, len(decl)) if decl[k][0] == "{"), None)
                if k is not None:
                    d, expect = 0, True
                    for tt, tl in decl[k:]:
                        if tt in "({[":
                            d += 1
                            continue
                        if tt in ")}]":
                            d -= 1
                            if d == 0:
                                break
                            continue
                        if d == 1 and expect and IDENT.fullmatch(tt):
                            yield tt, tl, "enumerator"
                            expect = False
                        elif d == 1 and tt == ",":
                            expect = True
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if depth == 0:
                body_end = j
        j += 1
    rest = decl[body_end + 1 :] if body_end is not None else decl
    if is_typedef:
        # typedef R (*Name)(...);  or  typedef ... Name;
        for k in range(len(rest) - 2):
            if rest[k][0] == "(" and rest[k + 1][0] == "*" and IDENT.fullmatch(rest[k + 2][0]):
                yield rest[k + 2][0], rest[k + 2][1], "typedef"
                return
        idents = [(t, ln) for t, ln in rest if IDENT.fullmatch(t)]
        if idents:
            yield idents[-1][0], idents[-1][1], "typedef"
        return
    if body_end is None:
        # A function: the identifier before its first '('; else a variable: the last identifier.
        for k, (t, _) in enumerate(rest):
            if t == "(":
                if k > 0 and IDENT.fullmatch(rest[k - 1][0]) and rest[k - 1][0] not in C_KEYWORDS:
                    yield rest[k - 1][0], rest[k - 1][1], "function"
                return
        # A forward declaration (`struct X`) names only its tag; anything else declares a variable.
        if [t for t, _ in rest][:1] in (["struct"], ["enum"], ["union"]) and len(rest) == 2:
            return
        idents = [(t, ln) for t, ln in rest if IDENT.fullmatch(t) and t not in C_KEYWORDS]
        if idents:
            yield idents[-1][0], idents[-1][1], "variable"


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "include/kiln.h"
    with open(path, encoding="utf-8") as f:
        source = f.read()
    lines = source.split("\n")
    code = strip_comments(source)
    found = list(macros(code)) + list(declarations(list(tokens(code))))
    bad = [(name, line, kind) for name, line, kind in found if not name.startswith(PREFIXES) and name not in ALLOWED]
    for name, line, kind in sorted(set(bad), key=lambda b: b[1]):
        print(
            f"{path}:{line}: {kind} {name!r} lacks the Kiln/kiln_/KILN_ prefix: {lines[line - 1].strip()}",
            file=sys.stderr,
        )
    if bad:
        print(
            "check_header_names: rename it in ffi-c (or keep a Rust-only alias out of the exported signatures)",
            file=sys.stderr,
        )
        return 1
    print(f"check_header_names: {len(set(n for n, _, _ in found))} names in {path}, every one prefixed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
