#!/usr/bin/env bash
# /v2/search latency on the docs crawl's index: crawls PAGES pages of the toolchain's
# documentation into an index (with vectors), serves it with `trawl serve --search-index`,
# and times QUERIES x RUNS searches through the API (p50/p95), beside `trawl search` over the
# same index (a process a query, the model loaded each time). Results:
# bench/out/api-search.json.
#
#   PAGES=2000 RUNS=5 bench/api/search.sh     (TRAWL_BENCH_PROFILE=debug: the test build)
set -euo pipefail
cd "$(dirname "$0")/../.."
profile="${TRAWL_BENCH_PROFILE:-release}"
if [ "$profile" = release ]; then
  cargo build --release --locked -p trawl -p trawl-testsite
else
  cargo build --locked -p trawl -p trawl-testsite
fi
bin="target/$profile"
. bench/serve-docs.sh
out=bench/out/api-search
mkdir -p "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
serve_docs "$port" "$out/access.jsonl"
if [ ! -d "$out/crawl/index" ] || [ "${RECRAWL:-0}" = 1 ]; then
  "$bin/trawl" crawl "http://127.0.0.1:$port/std/index.html" --allow-private --delay 0 \
    --max-pages "${PAGES:-2000}" --no-warc --out "$out/crawl" --overwrite --progress none
fi
python3 bench/api/search.py --trawl "$bin/trawl" --index "$out/crawl/index" --runs "${RUNS:-5}" \
  --out "$out" | tee bench/out/api-search.json
