#!/usr/bin/env bash
# The index benchmarks' real chunks: the toolchain's eight books (the Rust book, the reference,
# Cargo's, Rust by Example, ...) from its local documentation, crawled text-only by trawl, every
# chunk of the index sorted by id (a fixed sample), one JSON object a line, in
# bench/out/index/chunks-all.jsonl.
#
#   bench/index/chunks.sh [BIN_DIR]     (default target/release: trawl, trawl-testsite)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-target/release}"
out=bench/out/index
docs="$(rustc --print sysroot)/share/doc/rust/html"
port=18121
py=.venv/bin/python3
[ -x "$py" ] || { echo "run scripts/test.sh once first (it makes .venv with lancedb)" >&2; exit 1; }
mkdir -p "$out"
[ -s "$out/chunks-all.jsonl" ] && exit 0
"$bin/trawl-testsite" --dir "$docs" --port "$port" --log /dev/null &
site=$!
trap 'kill $site 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
rm -rf "$out/crawl"
seeds=()
for book in book reference cargo rust-by-example nomicon rustc edition-guide embedded-book; do
  seeds+=("http://127.0.0.1:$port/$book/")
done
"$bin/trawl" crawl "${seeds[@]}" \
  --scope prefix --allow-private --delay 0 --concurrency 16 --no-embed --progress none --out "$out/crawl"
"$py" - "$out/crawl/index" > "$out/chunks-all.jsonl.part" <<'PY'
import json, sys, lancedb
t = lancedb.connect(sys.argv[1]).open_table("chunks")
rows = t.to_arrow().select(["id", "text"]).to_pylist()
rows.sort(key=lambda r: r["id"])
for r in rows:
    print(json.dumps({"text": r["text"]}))
PY
mv "$out/chunks-all.jsonl.part" "$out/chunks-all.jsonl"
