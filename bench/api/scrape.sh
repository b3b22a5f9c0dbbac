#!/usr/bin/env bash
# Scrapes/s through /v2/scrape with and without the browser, beside `trawl crawl` over the
# same pages, one run (see scrape.py). Results: bench/out/api-scrape.json.
#
#   PAGES=100 CLIENTS=2 RUNS=3 bench/api/scrape.sh     (TRAWL_BENCH_PROFILE=debug: the test build)
set -euo pipefail
cd "$(dirname "$0")/../.."
profile="${TRAWL_BENCH_PROFILE:-release}"
chrome="$(./scripts/chromium.sh)"
if [ "$profile" = release ]; then
  cargo build --release --locked -p trawl -p trawl-testsite
else
  cargo build --locked -p trawl -p trawl-testsite
fi
mkdir -p bench/out/api-scrape
python3 bench/api/scrape.py --trawl "target/$profile/trawl" --site "target/$profile/trawl-testsite" \
  --chromium "$chrome" --pages "${PAGES:-100}" --clients "${CLIENTS:-2}" --runs "${RUNS:-3}" \
  --out bench/out/api-scrape | tee bench/out/api-scrape.json
