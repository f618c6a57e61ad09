#!/usr/bin/env python3
"""Every `KILN_*` environment variable the Rust code reads has a row in README.md's settings
table: a knob nobody can find is a knob nobody can turn off when it misbehaves.

    scripts/check_env_knobs.py [repo root]

A read is a string literal "KILN_..." passed to `env_*` (env.rs, platform), `var` or `var_os` (the
std and Kiln readers). A row is a table line starting with "| `KILN_NAME". Exits 1 listing
the variables without a row.
"""

import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOURCES = ["core/src", "cli/src", "models/src", "serve/src", "ffi-c/src", "py/src", "nif-elixir/native/src"]
READ = re.compile(r"\b(?:env_\w+|var|var_os)\(\s*\"(KILN_[A-Z0-9_]+)\"")

read = {}
for top in SOURCES:
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(d, f)
                for name in READ.findall(open(path, encoding="utf-8").read()):
                    read.setdefault(name, os.path.relpath(path, ROOT))

readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
rows = set(re.findall(r"^\| `(KILN_[A-Z0-9_]+)", readme, re.M))
missing = sorted(n for n in read if n not in rows)
for n in missing:
    print(f"README.md has no settings row for {n} (read in {read[n]})")
print(f"env knobs: {len(read)} read, {len(missing)} without a README row")
sys.exit(1 if missing else 0)
