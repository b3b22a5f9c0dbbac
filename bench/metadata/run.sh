#!/usr/bin/env bash
# Metadata benchmark: title, author and publication date found by trawl's extractor beside
# trafilatura 2.3.1 and htmldate 1.11 (default and original_date modes), on WCXB's rows and
# on htmldate's MediaCloud set (200 news pages in a dozen languages), in one run.
#
#   bench/metadata/run.sh [SHARED_BENCH_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=$(cd "${1:-$ROOT/../shared/bench}" && pwd)
OUT=${2:-$ROOT/target/metadata-bench}
mkdir -p "$OUT"
if [ ! -x .xbench/bin/python ]; then
  python3 -m venv .xbench
  .xbench/bin/pip install -q -U pip
  .xbench/bin/pip install -q -r "$B/extraction/requirements.txt"
fi
cargo build --release --locked -p trawl-extract --example meta_eval
for set in extraction/wcxb metadata/dates-mediacloud; do
  name=$(basename "$set")
  target/release/examples/meta_eval "$B/$set" "$OUT/$name.trawl.jsonl"
  .xbench/bin/python bench/metadata/score.py "$B/$set" "$OUT/$name.trawl.jsonl" \
    --json "$OUT/$name.json" | tee "$OUT/$name.md"
done
