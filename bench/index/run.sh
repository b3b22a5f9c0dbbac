#!/usr/bin/env bash
# The index benchmark: embedding throughput of trawl (candle) against sentence-transformers
# (PyTorch) on the same chunks in the same run, LanceDB insert rows/s, and search latency at
# 1 million chunks. Results: bench/out/index.json.
#
#   bench/index/run.sh [CHUNKS] [RUNS]      (default 500 chunks, 3 runs per setting)
set -euo pipefail
cd "$(dirname "$0")/../.."
n_chunks="${1:-500}"
runs="${2:-3}"
rows="${BENCH_ROWS:-1000000}"
out=bench/out/index
mkdir -p "$out"

./scripts/fetch-model.sh >/dev/null
st_py="${ST_PYTHON:-bench/out/stbench/bin/python}"
if [ ! -x "$st_py" ]; then
  python3 -m venv bench/out/stbench
  bench/out/stbench/bin/pip install -q --disable-pip-version-check sentence-transformers
  st_py=bench/out/stbench/bin/python
fi

# One build for every benchmark script: the same package set keeps cargo's feature
# resolution, and so the (long) release build of LanceDB, the same.
cargo build --release --locked --workspace --bins --examples
bench_bin=target/release/examples/index_bench
embed_bin=target/release/examples/embed_bench

bench/index/chunks.sh target/release
head -n "$n_chunks" "$out/chunks-all.jsonl" > "$out/chunks.jsonl"
echo "chunks: $(wc -l < "$out/chunks.jsonl") from $out/crawl" >&2

: > "$out/embed.jsonl"
for threads in 1 2; do
  pin=(); [ "$threads" = 1 ] && pin=(taskset -c 0)
  for i in $(seq 1 "$runs"); do
    for engine in native int8 candle; do
      RAYON_NUM_THREADS=$threads "${pin[@]}" "$embed_bin" embed "$out/chunks.jsonl" 32 "$engine" \
        | sed "s/^{/{\"threads\": $threads, /" >> "$out/embed.jsonl"
    done
    BENCH_THREADS=$threads OMP_NUM_THREADS=$threads "${pin[@]}" "$st_py" bench/index/st_embed.py "$out/chunks.jsonl" 32 2>/dev/null \
      | sed "s/^{/{\"threads\": $threads, /" >> "$out/embed.jsonl"
    tail -4 "$out/embed.jsonl" >&2
  done
done
"$embed_bin" agree "$out/chunks.jsonl" > "$out/agree.json"
cat "$out/agree.json" >&2
"$bench_bin" insert "$out/chunks.jsonl" "$out/insert-db" > "$out/insert.json"
cat "$out/insert.json" >&2
"$bench_bin" search "$out/chunks-all.jsonl" "$out/search-db" "$rows" 200 > "$out/search.json"
rm -rf "$out/search-db"
cat "$out/search.json" >&2

python3 - "$out" > bench/out/index.json <<'PY'
import json, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/embed.jsonl")]
summary = {}
for threads in (1, 2):
    for side in ("trawl (native)", "trawl (int8)", "trawl (candle)", "sentence-transformers"):
        rs = [r for r in runs if r["threads"] == threads and r["impl"].startswith(side)]
        summary[f"{side} {threads} thread(s)"] = {
            "chunks_per_s_median": statistics.median(r["chunks_per_s"] for r in rs),
            "chunks_per_cpu_s_median": statistics.median(r["chunks_per_cpu_s"] for r in rs),
            "runs": len(rs), "impl": rs[0]["impl"],
        }
for threads in (1, 2):
    s = summary[f"sentence-transformers {threads} thread(s)"]["chunks_per_s_median"]
    for engine in ("native", "int8", "candle"):
        t = summary[f"trawl ({engine}) {threads} thread(s)"]["chunks_per_s_median"]
        summary[f"ratio trawl ({engine})/sentence-transformers, {threads} thread(s)"] = t / s
summary["int8_vs_f32"] = json.load(open(f"{out}/agree.json"))
summary["insert"] = json.load(open(f"{out}/insert.json"))
summary["search"] = json.load(open(f"{out}/search.json"))
summary["embed_runs"] = runs
print(json.dumps(summary, indent=2))
PY
grep -v '"embed_runs"' bench/out/index.json | head -40
