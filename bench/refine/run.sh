#!/usr/bin/env bash
# trawl-refine against its peers on this machine, in one run:
# - the line renderer against mineru-webkit 0.1.6 (CPU per page, on the shared extraction
#   pages and the Common Crawl sample; the Python side's times come from
#   scripts/refine-reference.py, which the test command runs);
# - the candle backend against llama.cpp's server (llama-cpp-python) on the same GGUF
#   (SmolLM2-135M-Instruct Q4_1), the same prompts, greedy, one thread each.
#
#   bench/refine/run.sh [PAGES] [MAX_NEW_TOKENS]     # defaults 6 and 32 (pages of at most 2,000 characters)
set -euo pipefail
cd "$(dirname "$0")/../.."
pages="${1:-6}"; max_new="${2:-32}"
out=target/refine-bench; mkdir -p "$out"
ref="$(ls -t target/refine-parity/reference-*.jsonl 2>/dev/null | head -1 || true)"
if [ -z "$ref" ]; then
  [ -x .venv-mineru/bin/python3 ] || { echo "run ./scripts/test.sh --no-run first (it installs mineru-webkit)"; exit 1; }
  ref=target/refine-parity/reference-bench.jsonl
  .venv-mineru/bin/python3 scripts/refine-reference.py "$ref" --jobs 2
fi
gguf="${TRAWL_TEST_GGUF:-$HOME/.cache/trawl/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -f "$gguf" ] || ./scripts/fetch-smollm2.sh "$gguf"
cargo build -q --release -p trawl-refine --example refine_bench
bin=target/release/examples/refine_bench
echo "== render (median CPU per page)"
taskset -c 0 "$bin" render "$ref" | tee "$out/render.json"
echo "== candle, 1 thread"
RAYON_NUM_THREADS=1 taskset -c 0 "$bin" candle "$gguf" "$ref" "$pages" "$max_new" | tee "$out/candle.json"
echo "== llama.cpp server (llama-cpp-python), 1 thread"
port=18093
taskset -c 0 .venv-llama/bin/python3 -m llama_cpp.server --model "$gguf" --host 127.0.0.1 --port $port \
  --n_ctx 4096 --n_threads 1 --n_threads_batch 1 > "$out/llama-server.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf "127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.5; done
"$bin" openai "http://127.0.0.1:$port/v1" "$ref" "$pages" "$max_new" | tee "$out/llama-cpp.json"
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
c, l = (json.load(open(f"{d}/{n}.json")) for n in ("candle", "llama-cpp"))
r = json.load(open(f"{d}/render.json"))
print(f"render: trawl {r['trawl_median_ms']:.2f} ms vs mineru-webkit {r['mineru_webkit_median_ms']:.0f} ms per page (median), {r['speedup_median']:.0f}x")
print(f"end-to-end tokens/s: candle {c['tokens_per_s_end_to_end']:.0f} vs llama.cpp {l['tokens_per_s_end_to_end']:.0f} ({c['tokens_per_s_end_to_end']/l['tokens_per_s_end_to_end']:.2f}x)")
print(f"median s/page: candle {c['median_s_per_page']:.2f} vs llama.cpp {l['median_s_per_page']:.2f}; candle decode {c['median_decode_tokens_per_s']:.1f} tok/s, prefill {c['median_prefill_tokens_per_s']:.0f} tok/s")
PY
