#!/usr/bin/env bash
# trawl at scale on a synthetic web: the embedded crawl, the cluster and Scrapy, one after
# the other on the same web, in one run.
#
#   bench/scale/run.sh [PAGES] [--million] [--only embedded,cluster,scrapy]
#
# PAGES defaults to 100,000 (a few minutes); --million crawls 1,000,000. The web:
# `trawl-testsite --web PAGES --hosts 20`, 20 hosts on 127.1.0.1 to 127.1.0.20 (see
# crates/testsite/src/web), started afresh for each side so its counters judge that side
# alone: every page fetched once, never two requests in flight to one host, nothing under
# robots.txt's /private/ fetched. Each side crawls from the 20 roots with `--delay 0` and
# one request in flight per host (trawl's default), without an index:
# - embedded: `trawl crawl --no-index`, one process; CPU and peak RSS from /usr/bin/time,
#   RSS sampled every second beside the pages written so far (is memory flat?);
# - cluster: a frontier, two fetchers, two extractors and an indexer without an index,
#   over a nats-server (JetStream file store) and a redis-server of the benchmark's own;
#   CPU of every process from /proc, Redis commands and memory, NATS messages and
#   JetStream bytes once the crawl drained;
# - scrapy: bench/scale/scrapy_crawl.py (Scrapy from PyPI in target/scale-venv), the same
#   politeness (CONCURRENT_REQUESTS_PER_IP = 1, no delay, robots.txt obeyed).
# The server's CPU is given for each side. Results: bench/out/scale/summary.json.
# BIN=DIR runs the binaries in DIR instead of a release build; EXTRACTOR_WORKERS=N gives
# each cluster extractor N workers (default 1); REDIS_SHARDS=N shards the crawl's per-host
# state across N redis-servers (default 1; TRAWL_REDIS_STATE_URLS); EMBEDDED_ARGS="..." adds
# options to the embedded crawl (say `--gate-in-memory 10000000`: the whole dedup gate in
# memory, as before it moved to a file past 200,000 pages).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
. bench/scale/lib.sh
pages=100000
only="embedded,cluster,scrapy"
while [ $# -gt 0 ]; do
  case "$1" in
    --million) pages=1000000 ;;
    --only) only="$2"; shift ;;
    *) pages="$1" ;;
  esac
  shift
done
hosts=20
out=$ROOT/bench/out/scale
web_port=18400; nats_port=14334; nats_http=18224; redis_port=16391
rm -rf "$out"; mkdir -p "$out"

if [ -z "${BIN:-}" ]; then
  # The same package set as bench/cluster: one release build serves every benchmark.
  cargo build --release --locked --workspace --bins --examples
  BIN=$ROOT/target/release
fi
tick=$(getconf CLK_TCK)
cpu_of() { awk -v t="$tick" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / t }' "/proc/$1/stat"; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# The web for one side; its stats are written when it is stopped.
web_start() {
  "$BIN/trawl-testsite" --web "$pages" --hosts "$hosts" --port "$web_port" \
    --seeds "$out/seeds.txt" --stats "$out/web-$1.json" 2>"$out/web-$1.log" &
  web=$!
  pids+=("$web")
  wait_port 127.1.0.1 "$web_port"; wait_port "127.1.0.$hosts" "$web_port"
}
web_stop() { # side -> writes web-SIDE-cpu
  cpu_of "$web" > "$out/web-$1-cpu"
  kill -TERM "$web"; wait "$web" 2>/dev/null || true
}
common=(--allow-private --delay 0 --urls "$out/seeds.txt")

# One crawler process on a fresh web: SIDE, the file it writes its pages to, the command.
# Wall, CPU and peak RSS from /usr/bin/time; RSS sampled against the output's growth.
crawl_one() {
  local side=$1 pages_file=$2; shift 2
  echo "scale: $side, $pages pages" >&2
  web_start "$side"
  /usr/bin/time -f "%e %U %S %M" -o "$out/time-$side.txt" "$@" 2>"$out/$side.log" &
  local crawl=$!
  sleep 0.5
  # The crawler is /usr/bin/time's child.
  local child
  child=$(pgrep -P "$crawl" | head -1 || true)
  sample "${child:-$crawl}" "$pages_file" "$out/rss-$side.txt" &
  wait "$crawl"
  web_stop "$side"
}

if [[ $only == *embedded* ]]; then
  crawl_one embedded "$out/embedded/pages.jsonl" \
    "$BIN/trawl" crawl "${common[@]}" --no-index --progress none --out "$out/embedded" \
    ${EMBEDDED_ARGS:-}
fi

if [[ $only == *cluster* ]]; then
  echo "scale: cluster, $pages pages" >&2
  web_start cluster
  mkdir -p "$out/cluster" "$out/nats"
  printf 'listen: 127.0.0.1:%s\nhttp: 127.0.0.1:%s\nmax_payload: 8MB\njetstream { store_dir: "%s" }\n' \
    "$nats_port" "$nats_http" "$out/nats" > "$out/nats.conf"
  nats-server -c "$out/nats.conf" > "$out/nats.log" 2>&1 &
  nats=$!
  shards=${REDIS_SHARDS:-1}; redis_pids=(); state_urls=()
  for i in $(seq 0 $((shards - 1))); do
    redis-server --port $((redis_port + i)) --bind 127.0.0.1 --save "" --appendonly no > /dev/null &
    redis_pids+=($!)
    [ "$i" -gt 0 ] && state_urls+=("redis://127.0.0.1:$((redis_port + i))")
  done
  pids+=("$nats" "${redis_pids[@]}")
  wait_port 127.0.0.1 "$nats_port"
  for i in $(seq 0 $((shards - 1))); do wait_port 127.0.0.1 $((redis_port + i)); done
  export TRAWL_NATS_URL="nats://127.0.0.1:$nats_port" TRAWL_REDIS_URL="redis://127.0.0.1:$redis_port"
  TRAWL_REDIS_STATE_URLS=$(IFS=,; echo "${state_urls[*]}"); export TRAWL_REDIS_STATE_URLS
  export TRAWL_CRAWL=scale TRAWL_OUT="$out/cluster" TRAWL_LOG=warn
  svc=(); names=()
  port=19300
  for s in frontier fetcher fetcher extractor extractor indexer; do
    conc=8; [ "$s" = fetcher ] && conc=32; [ "$s" = extractor ] && conc=${EXTRACTOR_WORKERS:-1}
    port=$((port + 1))
    TRAWL_METRICS_ADDR="127.0.0.1:$port" TRAWL_CONCURRENCY=$conc "$BIN/trawl-$s" 2>"$out/$s-$port.log" &
    svc+=($!); names+=("$s")
  done
  pids+=("${svc[@]}")
  start=$(date +%s.%N)
  "$BIN/trawl" submit "${common[@]}" --wait --wait-timeout 7200 > "$out/submit.txt"
  c_wall=$(calc "$(date +%s.%N) - $start")
  c_cpu=0; parts=""
  for i in "${!svc[@]}"; do
    c=$(cpu_of "${svc[$i]}"); c_cpu=$(calc "$c_cpu + $c"); parts="$parts ${names[$i]}=$c"
  done
  c=$(cpu_of "$nats"); c_cpu=$(calc "$c_cpu + $c"); parts="$parts nats=$c"
  for i in "${!redis_pids[@]}"; do
    c=$(cpu_of "${redis_pids[$i]}"); c_cpu=$(calc "$c_cpu + $c"); parts="$parts redis$i=$c"
    # Node 0 also keeps the crawl's unsharded keys (counters, gate, page archive).
    redis-cli -p $((redis_port + i)) INFO commandstats > "$out/redis-commands-$i.txt"
    redis-cli -p $((redis_port + i)) INFO memory > "$out/redis-memory-$i.txt"
  done
  curl -fsS "http://127.0.0.1:$nats_http/varz" > "$out/nats-varz.json"
  curl -fsS "http://127.0.0.1:$nats_http/jsz" > "$out/nats-jsz.json"
  printf '{"wall_s": %s, "cpu_s": %s, "cpu_by_process": "%s"}\n' "$c_wall" "$c_cpu" "${parts# }" > "$out/cluster.json"
  kill -TERM "${svc[@]}"; wait "${svc[@]}" 2>/dev/null || true
  kill "$nats" "${redis_pids[@]}"; wait "$nats" "${redis_pids[@]}" 2>/dev/null || true
  web_stop cluster
fi

if [[ $only == *scrapy* ]]; then
  venv=$ROOT/target/scale-venv
  if ! "$venv/bin/python3" -c "import scrapy" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "scrapy==2.19.0"
  fi
  crawl_one scrapy "$out/scrapy.jsonl" \
    "$venv/bin/python3" bench/scale/scrapy_crawl.py "$out/seeds.txt" "$out/scrapy.jsonl" 64
fi

python3 bench/scale/summary.py "$out" "$pages" > "$out/summary.json"
cat "$out/summary.json"
