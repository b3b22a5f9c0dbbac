#!/usr/bin/env bash
# The rustdoc crawl (the toolchain's ~48,000-page documentation on loopback) with
# `--render auto` beside `--render never`, alternating in one run: pages the render rule
# sent to the browser (server-rendered documentation should send none) and pages/s, both
# from each crawl's own report.json.
#
#   bench/render/rustdoc.sh [RUNS]     # default 1 pair; BIN=target/release/trawl to use a release build,
#                                      # MAX_PAGES=N to crawl the first N pages only
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-1}"
docs="$(rustc --print sysroot)/share/doc/rust/html"
./scripts/chromium.sh >/dev/null
bin="${BIN:-target/debug/trawl}"
site="$(dirname "$bin")/trawl-testsite"
[ -x "$bin" ] && [ -x "$site" ] || cargo build -q -p trawl -p trawl-testsite
port="${PORT:-18091}"
"$site" --dir "$docs" --port "$port" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
out=target/render-bench/rustdoc
mkdir -p "$out"
for r in $(seq 1 "$runs"); do
  for mode in auto never; do
    rm -rf "$out/$mode-$r"
    "$bin" crawl "http://127.0.0.1:$port/" --allow-private --delay 0 --concurrency 64 \
      --no-index --progress none --render "$mode" --out "$out/$mode-$r" ${MAX_PAGES:+--max-pages "$MAX_PAGES"} >/dev/null 2>&1
    python3 - "$out/$mode-$r" "$mode" <<'PY'
import json, sys
d, mode = sys.argv[1], sys.argv[2]
r = json.load(open(f"{d}/report.json"))
rend = r.get("render") or {}
picked = sum(rend.get("wanted", {}).values())
print(json.dumps({"render": mode, "pages": r["pages"], "elapsed_s": r["elapsed_s"],
                  "pages_per_s": r["pages_per_s"], "picked_by_rule": picked,
                  "rendered": rend.get("rendered", 0), "wanted": rend.get("wanted", {})}))
PY
  done
done
