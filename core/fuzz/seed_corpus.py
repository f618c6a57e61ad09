#!/usr/bin/env python3
"""Writes the seed corpus of the WGSL fuzz targets from the kernels the repository already has.

Sources: every shaders/*.wgsl (templates rendered with plain defaults: a placeholder left over
makes a seed that does not parse, which still gives the fuzzer its tokens), and the WGSL inside
string literals of the Rust, C and Python tests and of cli/src (any literal with `@compute`), each
also as the body of its entry point alone (the target wraps such an input in an entry point).
Each seed is named by the SHA-1 of its bytes, so rerunning adds nothing twice.

    core/fuzz/seed_corpus.py OUT_DIR   (run from the repository root)
"""

import hashlib
import pathlib
import re
import sys

# What the built-in templates most often hold: the element type, no `enable`, and the one-line
# blocks the ops fill in (an unknown placeholder becomes nothing).
DEFAULTS = {"T": "f32", "ENABLE": "", "A": "f32", "O": "f32", "ACC": "f32", "XT": "f32", "WT": "f32"}
PLACEHOLDER = re.compile(r"\{\{([A-Z0-9_]+)\}\}")

RUST_RAW = re.compile(r'r(#*)"(.*?)"\1', re.S)
RUST_STR = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)
PY_TRIPLE = re.compile(r'(?:"""|\'\'\')(.*?)(?:"""|\'\'\')', re.S)
C_STR_RUN = re.compile(r'(?:"(?:[^"\\\n]|\\.)*"\s*)+')
C_STR = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def unescape(s: str) -> str:
    return s.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\\\", "\\")


def render(template: str) -> str:
    return PLACEHOLDER.sub(lambda m: DEFAULTS.get(m.group(1), ""), template)


def literals(path: pathlib.Path):
    text = path.read_text(errors="replace")
    if path.suffix == ".rs":
        for m in RUST_RAW.finditer(text):
            yield m.group(2)
        for m in RUST_STR.finditer(text):
            yield unescape(m.group(1))
    elif path.suffix == ".py":
        for m in PY_TRIPLE.finditer(text):
            yield m.group(1)
    elif path.suffix in (".c", ".h"):
        for run in C_STR_RUN.finditer(text):
            yield unescape("".join(C_STR.findall(run.group(0))))


def entry_body(kernel: str):
    """The statements of the first @compute function (between its braces), or None."""
    at = kernel.find("@compute")
    open_brace = kernel.find("{", kernel.find(")", kernel.find("fn ", at)) if at >= 0 else -1)
    if at < 0 or open_brace < 0:
        return None
    depth = 0
    for i in range(open_brace, len(kernel)):
        depth += {"{": 1, "}": -1}.get(kernel[i], 0)
        if depth == 0:
            return kernel[open_brace + 1 : i].strip("\n")
    return None


def seeds(root: pathlib.Path):
    for p in sorted((root / "shaders").glob("*.wgsl")):
        yield render(p.read_text())
    for pattern in ("core/tests/*.rs", "cli/src/*.rs", "tests/c/*.c", "py/tests/*.py"):
        for p in sorted(root.glob(pattern)):
            for lit in literals(p):
                if "@compute" in lit:
                    # format!() strings double their braces.
                    kernel = lit.replace("{{", "{").replace("}}", "}") if "{{" in lit and "}}" in lit else lit
                    yield kernel
                    # The body alone: the target wraps an input without `@compute` in an entry
                    # point, so mutations of it stay among statements.
                    body = entry_body(kernel)
                    if body and "@compute" not in body:
                        yield body


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for s in seeds(pathlib.Path(".")):
        data = s.encode()
        name = out / hashlib.sha1(data).hexdigest()
        if not name.exists():
            name.write_bytes(data)
            written += 1
    print(f"seed_corpus: {written} new seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
