#!/usr/bin/env bash
# Rendered pages per second and browser memory per tab: `trawl crawl --render auto` over
# the test site's script-built pages (`/js/bench/N`, each an empty app root filled from a
# fetched JSON), beside Chromium's own `--dump-dom` (one headless process per page, no
# interception) on the same pages with the same parallelism, in one run.
#
#   bench/render/run.sh            # 200 pages, 1, 2 and 4 tabs, 3 runs each (~5 minutes)
#   PAGES=100 TABS="2" RUNS=1 bench/render/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
chrome="$(./scripts/chromium.sh)"
cargo build -q -p trawl -p trawl-testsite
exec python3 bench/render/drive.py --trawl target/debug/trawl --site target/debug/trawl-testsite \
  --chromium "$chrome" --pages "${PAGES:-200}" --tabs ${TABS:-1 2 4} --runs "${RUNS:-3}" \
  --out target/render-bench
