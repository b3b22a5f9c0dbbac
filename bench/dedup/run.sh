#!/usr/bin/env bash
# The page gates judged from the crawl's own output: the toolchain's documentation crawled
# twice with the defaults (the MinHash gate) and with `--dedup-method simhash`, each crawl's
# pages.jsonl read by dedup_eval against the default crawl's texts; the embedded gates'
# bytes a page in memory and in gate.db; then the Redis gates at N pages (default
# 1,000,000) for bytes per page and check latency.
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
cargo build --release --locked -p trawl-store --example gate_cost
cargo build --release --locked -p trawl-cluster --example redis_gate_bench
bin=$PWD/target/release
# shellcheck source=../serve-docs.sh
source bench/serve-docs.sh
serve_docs 18097 "$OUT/access.jsonl"
# The defaults, then the SimHash gate; `--gate-in-memory 0` moves each gate to its file
# from the first page (the path a crawl past 50,000 pages takes), for its cost.
for run in default simhash default-file; do
  case $run in
    default) flags=() ;;
    simhash) flags=(--dedup-method simhash) ;;
    default-file) flags=(--gate-in-memory 0) ;;
  esac
  /usr/bin/time -f "%M" -o "$OUT/$run.rss" \
    "$bin/trawl" crawl http://127.0.0.1:18097/ --allow-private --delay 0 --concurrency 64 \
    --no-index --no-warc --render never "${flags[@]}" --out "$OUT/$run" \
    > "$OUT/$run.log" 2>&1
  echo "$run: $(grep -o 'crawled .*pages/s)' "$OUT/$run.log"), peak RSS $(( $(cat "$OUT/$run.rss") / 1024 )) MiB"
done
echo "== the default crawl (MinHash), then the gates replayed over its texts"
"$bin/examples/dedup_eval" "$OUT/default/pages.jsonl" --replay | tee "$OUT/eval-default.txt"
for run in simhash default-file; do
  echo "== $run, judged on the default crawl's texts"
  "$bin/examples/dedup_eval" "$OUT/$run/pages.jsonl" "$OUT/default/pages.jsonl" | tee "$OUT/eval-$run.txt"
done
echo "== the embedded gates' bytes a page, 1,000,000 pages"
for mode in memory file min-memory min-file; do
  "$bin/examples/gate_cost" "$mode" 1000000 "$OUT" | tail -2 | tee -a "$OUT/gate-cost.txt"
done
for method in simhash minhash; do
  echo "== Redis gate, $method, $N pages, 8 clients"
  "$bin/examples/redis_gate_bench" "$N" 8 redis://127.0.0.1:6379 "$method" 2>/dev/null \
    | tee "$OUT/redis-$method.txt"
done
