#!/usr/bin/env bash
# Crawl throughput through the API against `trawl crawl`, same site, same run: the
# toolchain's documentation served on loopback by trawl-testsite, RUNS rounds (medians
# reported) of (a) `trawl crawl --max-pages N` and (b) `trawl serve` + POST /v2/crawl with
# `limit: N`, polled every 0.5 s until completed, then every result page read through
# `next` (what an SDK's crawl() does). Both with no delay, 16 requests in flight, no index.
# Results: bench/out/api.json.
#
#   bench/api/run.sh [RUNS] [PAGES]      (TRAWL_BENCH_PROFILE=debug: the test build)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
pages="${2:-3000}"
profile="${TRAWL_BENCH_PROFILE:-release}"
port="${TRAWL_BENCH_PORT:-18096}"
api_port=$((port + 1))
out=bench/out
mkdir -p "$out"
if [ "$profile" = release ]; then
  cargo build --release --locked -p trawl -p trawl-testsite
else
  cargo build --locked -p trawl -p trawl-testsite
fi
bin="target/$profile"
# shellcheck source=../serve-docs.sh
source bench/serve-docs.sh
serve_docs "$port" "$out/access-api.jsonl"
site="http://127.0.0.1:$port/"

rows=()
for i in $(seq 1 "$runs"); do
  rm -rf "$out/api-crawl-$i" "$out/api-serve-$i"
  t0=$(ms_now)
  "$bin/trawl" crawl "$site" --allow-private --delay 0 --concurrency 16 --max-pages "$pages" \
    --out "$out/api-crawl-$i" --progress none --no-index --no-warc 2>/dev/null
  t1=$(ms_now)
  crawled=$(wc -l < "$out/api-crawl-$i/pages.jsonl")

  "$bin/trawl" serve --listen "127.0.0.1:$api_port" --data "$out/api-serve-$i" --allow-private \
    --delay 0 --job-concurrency 16 --no-warc 2>/dev/null &
  api=$!
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$api_port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  r=$(python3 bench/api/drive.py "http://127.0.0.1:$api_port" "$site" "$pages")
  kill "$api"; wait "$api" 2>/dev/null || true
  rows+=("{\"run\": $i, \"crawl_s\": $(( t1 - t0 ))e-3, \"crawl_lines\": $crawled, \"api\": $r}")
done
printf '%s\n' "${rows[@]}" | python3 bench/api/analyze.py "$pages" "$profile" > "$out/api.json"
cat "$out/api.json"
