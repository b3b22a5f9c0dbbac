#!/usr/bin/env bash
# The embedded pipeline with its index on, on the synthetic web: a crawl into an index, a
# `--since` re-crawl into the same index, and a `trawl watch` round over it, each one
# process, RSS sampled every second against the output it writes.
#
#   bench/scale/index.sh [PAGES]        # 100,000 by default; 1000000 for a million
#
# The web: `trawl-testsite --web PAGES --hosts 20` (see README.md), one server for all
# three runs, so the re-crawl finds what the first crawl found. The runs, all with
# `--delay 0 --no-embed` (chunks and the full-text index; vectors for a million pages are
# hours of embedding on two cores, see bench/index for the embedder's rate):
# - crawl: `trawl watch --rounds 1`, the first round of a watch directory (its
#   `gen-00001` and the directory's `index`): a crawl and its index;
# - since: `trawl crawl --since gen-00001 --index W/index`: every page requested again,
#   compared with the first crawl and the index updated;
# - watch: `trawl watch --rounds 1` again, its second round: `gen-00002` compared with
#   `gen-00001`, only the pages whose revisit time has come requested, the rest carried.
# Results: bench/out/scale-index/summary.json (RSS at 10/25/50/75/100% of each run's
# output, pages/s, the growth per page past the tenth and its projection to 10,000,000).
# BIN=DIR runs the binaries in DIR instead of a release build; ARGS="..." adds options to
# every run.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
. bench/scale/lib.sh
pages=${1:-100000}
hosts=20
out=$ROOT/bench/out/scale-index
web_port=18410
rm -rf "$out"; mkdir -p "$out"

if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p trawl --bin trawl -p trawl-testsite --bin trawl-testsite
  BIN=$ROOT/target/release
fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$BIN/trawl-testsite" --web "$pages" --hosts "$hosts" --port "$web_port" \
  --seeds "$out/seeds.txt" 2>"$out/web.log" &
pids+=($!)
wait_port 127.1.0.1 "$web_port"; wait_port "127.1.0.$hosts" "$web_port"

# One run: its name, the pages.jsonl it writes, the command. Wall, CPU and peak RSS from
# /usr/bin/time.
run_one() {
  local name=$1 pages_file=$2; shift 2
  echo "scale-index: $name, $pages pages" >&2
  /usr/bin/time -f "%e %U %S %M" -o "$out/time-$name.txt" "$@" 2>"$out/$name.log" &
  local t=$!
  sleep 0.5
  local child
  child=$(pgrep -P "$t" | head -1 || true)
  sample "${child:-$t}" "$pages_file" "$out/rss-$name.txt" &
  wait "$t"
  echo "$pages_file" > "$out/pages-$name.txt"
}
common=(--allow-private --delay 0 --urls "$out/seeds.txt" --no-embed --progress none ${ARGS:-})
w=$out/watch
run_one crawl "$w/gen-00001/pages.jsonl" "$BIN/trawl" watch "${common[@]}" --out "$w" --rounds 1
run_one since "$out/since/pages.jsonl" "$BIN/trawl" crawl "${common[@]}" \
  --since "$w/gen-00001" --index "$w/index" --out "$out/since"
run_one watch "$w/gen-00002/pages.jsonl" "$BIN/trawl" watch "${common[@]}" --out "$w" --rounds 1
du -sb "$w/index" | cut -f1 > "$out/index-bytes.txt"

python3 bench/scale/index_summary.py "$out" "$pages" > "$out/summary.json"
cat "$out/summary.json"
