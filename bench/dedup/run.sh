#!/usr/bin/env bash
# The page gates judged from the crawl's own output: the toolchain's documentation crawled
# twice with the defaults (the SimHash gate) and with `--dedup-method minhash`, each crawl's
# pages.jsonl read by dedup_eval against the default crawl's texts; then the Redis gates at
# N pages (default 1,000,000) for bytes per page and check latency.
#
#   bench/dedup/run.sh [N]
#
# Needs Redis on 127.0.0.1:6379 (scripts/services.sh starts one). Outputs in bench/out/dedup.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-1000000}
OUT=$PWD/bench/out/dedup
rm -rf "$OUT"
mkdir -p "$OUT"
./scripts/services.sh
./scripts/protoc.sh
cargo build --release --locked -p trawl -p trawl-testsite
cargo build --release --locked -p trawl-dedup --example dedup_eval
cargo build --release --locked -p trawl-cluster --example redis_gate_bench
bin=$PWD/target/release
# shellcheck source=../serve-docs.sh
source bench/serve-docs.sh
serve_docs 18097 "$OUT/access.jsonl"
for method in simhash minhash; do
  /usr/bin/time -f "%M" -o "$OUT/$method.rss" \
    "$bin/trawl" crawl http://127.0.0.1:18097/ --allow-private --delay 0 --concurrency 64 \
    --no-index --no-warc --render never --dedup-method "$method" --out "$OUT/$method" \
    > "$OUT/$method.log" 2>&1
  echo "$method: $(grep -o 'crawled .*pages/s)' "$OUT/$method.log"), peak RSS $(( $(cat "$OUT/$method.rss") / 1024 )) MiB"
done
echo "== the default crawl (SimHash), then the same gates replayed over its texts"
"$bin/examples/dedup_eval" "$OUT/simhash/pages.jsonl" --replay | tee "$OUT/eval-simhash.txt"
echo "== --dedup-method minhash, judged on the default crawl's texts"
"$bin/examples/dedup_eval" "$OUT/minhash/pages.jsonl" "$OUT/simhash/pages.jsonl" | tee "$OUT/eval-minhash.txt"
for method in simhash minhash; do
  echo "== Redis gate, $method, $N pages, 8 clients"
  "$bin/examples/redis_gate_bench" "$N" 8 redis://127.0.0.1:6379 "$method" 2>/dev/null \
    | tee "$OUT/redis-$method.txt"
done
