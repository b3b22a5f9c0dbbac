#!/usr/bin/env bash
# Corpus benchmark: trawl ingest + export against datatrove's equivalent pipeline on the
# same WARC data, in one run, CPU time counted (documents per CPU-second, one core each).
#
#   bench/corpus/run.sh [COPIES]
#
# The input is Common Crawl's excerpt (shared/data/warc/commoncrawl, 16 HTML responses of
# real sites in several languages) repeated COPIES times (default 750: about 100 MB) as one
# multi-member gzip WARC. Both sides extract every response; trawl's SimHash gate then
# marks the repeats as copies, which datatrove has no step for (so trawl writes fewer rows).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
COPIES=${1:-750}
OUT=${OUT:-$ROOT/target/corpus-bench}
SRC=${CC_EXCERPT:-$ROOT/../shared/data/warc/commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz}
rm -rf "$OUT"
mkdir -p "$OUT/warc"
if [ -n "${WARC_DIR:-}" ]; then
  # Archives of your own instead (for instance a crawl's: bench/out/crawl-1/warc).
  for f in "$WARC_DIR"/*.warc.gz; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$OUT/warc/"; done
else
  for _ in $(seq "$COPIES"); do cat "$SRC"; done > "$OUT/warc/cc-repeated.warc.gz"
fi
ls -lL "$OUT"/warc/* >&2

if [ ! -x .xbench/bin/python ]; then python3 -m venv .xbench; fi
.xbench/bin/python -c "import datatrove, warcio, spacy, cchardet, magic, orjson, lxml_html_clean" 2>/dev/null ||
  .xbench/bin/pip install -q "datatrove[processing]" warcio spacy faust-cchardet python-magic orjson lxml_html_clean

cargo build --release --locked -p trawl
pin() { if command -v taskset >/dev/null; then taskset -c 0 "$@"; else "$@"; fi; }
cpu() { awk '{print $1 + $2}' "$1"; }

echo "== trawl ingest + export (one core)" >&2
pin /usr/bin/time -f "%U %S %e %M" -o "$OUT/time-ingest.txt" \
  target/release/trawl ingest "$OUT"/warc/*.warc.gz --out "$OUT/trawl" --threads 1
pin /usr/bin/time -f "%U %S %e %M" -o "$OUT/time-export.txt" \
  target/release/trawl export --from "$OUT/trawl" --format jsonl --out "$OUT/trawl/corpus.jsonl"

echo "== datatrove (one task, one worker)" >&2
pin /usr/bin/time -f "%U %S %e %M" -o "$OUT/time-datatrove.txt" \
  .xbench/bin/python bench/corpus/datatrove_pipeline.py "$OUT/warc" "$OUT/datatrove" > "$OUT/datatrove.log" 2>&1

python3 - "$OUT" <<'PY'
import json, sys, glob
out = sys.argv[1]
t = lambda f: [float(x) for x in open(f"{out}/{f}").read().split()]
ing, exp, dt = t("time-ingest.txt"), t("time-export.txt"), t("time-datatrove.txt")
rep = json.load(open(f"{out}/trawl/report.json"))
docs = rep["records"].get("response", 0)
trawl_cpu = ing[0] + ing[1] + exp[0] + exp[1]
trawl_out = sum(1 for _ in open(f"{out}/trawl/corpus.jsonl"))
dt_cpu = dt[0] + dt[1]
dt_out = sum(sum(1 for _ in open(f)) for f in glob.glob(f"{out}/datatrove/output/*.jsonl"))
r = {
  "responses": docs,
  "trawl": {"cpu_s": trawl_cpu, "wall_s": ing[2] + exp[2], "docs_per_cpu_s": docs / trawl_cpu,
            "rows_out": trawl_out, "peak_rss_mib": max(ing[3], exp[3]) / 1024},
  "datatrove": {"cpu_s": dt_cpu, "wall_s": dt[2], "docs_per_cpu_s": docs / dt_cpu, "rows_out": dt_out,
                "peak_rss_mib": dt[3] / 1024},
}
r["ratio"] = r["trawl"]["docs_per_cpu_s"] / r["datatrove"]["docs_per_cpu_s"]
json.dump(r, open(f"{out}/result.json", "w"), indent=1)
print(json.dumps(r, indent=1))
print(f"trawl {r['trawl']['docs_per_cpu_s']:.0f} docs/CPU-s, datatrove {r['datatrove']['docs_per_cpu_s']:.1f}: {r['ratio']:.1f}x")
PY
