#!/usr/bin/env bash
# Extraction benchmark: trawl's extractor against trafilatura and resiliparse on the two
# benchmark sets, in one run, on the same pages, one core each. Quality and speed are
# computed by the benchmark's own referee (eval.py); trawl runs in-process (no process
# start-up per page) and its predictions go into eval.py's cache beside the peers'.
#
#   bench/extraction/run.sh [BENCH_DIR] [OUT_DIR]
#
# BENCH_DIR defaults to ../shared/bench/extraction, OUT_DIR to target/extraction-bench.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=$(cd "${1:-$ROOT/../shared/bench/extraction}" && pwd)
OUT=${2:-$ROOT/target/extraction-bench}
PEERS=${PEERS:-trafilatura,trafilatura_fast,resiliparse,readability}
mkdir -p "$OUT"

# The Python peers, pinned to the versions the benchmark's README measured.
if [ ! -x .xbench/bin/python ]; then
  python3 -m venv .xbench
  .xbench/bin/pip install -q -U pip
  .xbench/bin/pip install -q -r "$B/requirements.txt"
fi

cargo build --release --locked -p trawl-extract --example extract_eval
version=$(git rev-parse --short HEAD 2>/dev/null || echo dev)
pin() { if command -v taskset >/dev/null; then taskset -c 0 "$@"; else "$@"; fi; }

for set in scrapinghub wcxb; do
  preds="$OUT/extraction-results/$set/preds"   # eval.py's cache layout
  mkdir -p "$preds"
  echo "== $set: peers ($PEERS), one worker on one CPU" >&2
  # --force: the peers' rows come from this run, not from an older cache.
  (cd "$OUT" && "$ROOT/.xbench/bin/python" "$B/eval.py" "$B/$set" -e "$PEERS" -j 1 --force \
     --bootstrap 0 > /dev/null)
  echo "== $set: trawl, in-process, on CPU 0" >&2
  pin target/release/examples/extract_eval "$B/$set" "$preds/trawl.jsonl"
  echo "trawl $version" > "$preds/trawl.jsonl.version"
  group=()
  [ "$set" = wcxb ] && group=(--group-by page_type)
  (cd "$OUT" && "$ROOT/.xbench/bin/python" "$B/eval.py" "$B/$set" -e "$PEERS" \
     --cmd "trawl=unused" "${group[@]}" --json "$OUT/$set.json") | tee "$OUT/$set.md"
done

# Ratios from the same run: trawl's pages per CPU-second over each peer's.
"$ROOT/.xbench/bin/python" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for s in ("scrapinghub", "wcxb"):
    rows = {r["extractor"]: r for r in json.load(open(f"{out}/{s}.json"))["groups"]["all"]}
    t = rows["trawl"]
    metric = "sh_f1" if s == "scrapinghub" else "w_f1"
    print(f"\n{s}: trawl {t['pages_s']:.0f} pages/CPU-s, {metric} {t[metric]:.3f}")
    for name, r in rows.items():
        if name != "trawl":
            print(f"  vs {name:17} {t['pages_s'] / r['pages_s']:6.1f}x faster, "
                  f"{metric} {t[metric] - r[metric]:+.3f} ({r[metric]:.3f})")
PY
