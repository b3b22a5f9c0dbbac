#!/usr/bin/env bash
# The vector index at scale: ROWS chunks grown from the real chunks' embeddings the way the
# product grows its index (see crates/index/examples/index_bench/scale.rs), QUERIES held-out
# real chunks as queries. Writes bench/out/index/scale-ROWS.json; the table is removed after
# (KEEP=1 keeps it). FRESH=24,48 also measures indexes built anew over the whole table.
#
#   bench/index/scale.sh [ROWS] [QUERIES]     (default 1000000 and 200)
#   BIN=/path/to/release bench/index/scale.sh  (a build made elsewhere; default target/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
rows="${1:-1000000}"
queries="${2:-200}"
bin="${BIN:-target/release}"
out=bench/out/index
./scripts/fetch-model.sh >/dev/null
[ -x "$bin/examples/index_bench" ] || cargo build --release --locked -p trawl-index --example index_bench
bench/index/chunks.sh "$bin"
echo "chunks: $(wc -l < "$out/chunks-all.jsonl")" >&2
/usr/bin/time -v "$bin/examples/index_bench" search "$out/chunks-all.jsonl" "$out/scale-db" "$rows" "$queries" \
  > "$out/scale-$rows.json" 2> "$out/scale-$rows.time"
grep -E "Maximum resident|Elapsed" "$out/scale-$rows.time" >&2
[ "${KEEP:-0}" = 1 ] || rm -rf "$out/scale-db"
python3 -m json.tool "$out/scale-$rows.json"
