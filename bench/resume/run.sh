#!/usr/bin/env bash
# kill -9 of an embedded crawl of the toolchain's documentation at random moments, resumed
# each time, against one uninterrupted crawl of the same site: the final pages.jsonl (every
# page once), index (each chunk once, the same pages) and WARC files (readable by warcio).
#
#   bench/resume/run.sh [KILLS]      (default 5; TRAWL_KILL_SEED fixes the moments)
#
# Needs target/release/{trawl,trawl-testsite} and the test venv (.venv: warcio, lancedb).
set -euo pipefail
cd "$(dirname "$0")/../.."
kills="${1:-5}"
bin="${TRAWL_BIN:-target/release}"
out="${TRAWL_BENCH_OUT:-/tmp/trawl-resume-bench}"
rm -rf "$out"; mkdir -p "$out"
. bench/serve-docs.sh
port=18097
serve_docs "$port" "$out/access.jsonl"
args=("http://127.0.0.1:$port/" --allow-private --delay 0 --concurrency 64 --no-embed --progress none)

start=$(ms_now)
"$bin/trawl" crawl "${args[@]}" --out "$out/reference" 2>"$out/reference.log"
ref_ms=$(( $(ms_now) - start ))
ref_requests=$(wc -l < "$out/access.jsonl")

seed="${TRAWL_KILL_SEED:-$RANDOM}"
echo "kill schedule seed: $seed"
RANDOM=$seed
: > "$out/kills.txt"
# Each resumed run's start and end (µs, the server log's clock): its requests are told
# apart from the other runs'.
: > "$out/runs.txt"
us_now() { echo $(( $(date +%s%N) / 1000 )); }
start=$(ms_now)
for i in $(seq 1 "$kills"); do
  # A moment between 2 s and 2 + reference/kills seconds into this run.
  span=$(( ref_ms / kills ))
  ms=$(( 2000 + (RANDOM * 32768 + RANDOM) % (span > 1 ? span : 1) ))
  run_start=$(us_now)
  "$bin/trawl" crawl "${args[@]}" --out "$out/killed" --resume 2>>"$out/killed.log" &
  pid=$!
  sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
  if kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    lines=$(wc -l < "$out/killed/pages.jsonl" 2>/dev/null || echo 0)
    echo "kill $i at ${ms} ms: $lines lines in pages.jsonl" | tee -a "$out/kills.txt"
  else
    wait "$pid" || true
    echo "run $i finished before its kill at ${ms} ms" | tee -a "$out/kills.txt"
  fi
  echo "$run_start $(us_now)" >> "$out/runs.txt"
done
run_start=$(us_now)
"$bin/trawl" crawl "${args[@]}" --out "$out/killed" --resume 2>>"$out/killed.log" || true
echo "$run_start $(us_now)" >> "$out/runs.txt"
killed_ms=$(( $(ms_now) - start ))
all_requests=$(wc -l < "$out/access.jsonl")

.venv/bin/python3 bench/resume/compare.py "$out/reference" "$out/killed" \
  "$ref_requests" "$((all_requests - ref_requests))" "$ref_ms" "$killed_ms" \
  "$out/access.jsonl" "$out/runs.txt"
