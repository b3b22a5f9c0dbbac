#!/usr/bin/env bash
# CPU per page, cluster runtime vs embedded runtime, on the same site, machine and run.
#
#   bench/cluster/run.sh [PAGES] [RUNS]      (default 5000 pages, 3 runs each)
#
# The site: the toolchain's HTML documentation served on loopback by trawl-testsite. Each
# run crawls the first PAGES admitted URLs with `--delay 0 --concurrency 64`, no index
# (the index has its own benchmark, bench/index). Embedded: one `trawl crawl` process, its
# CPU time from /usr/bin/time. Cluster: the four services (one replica each) with a
# nats-server (JetStream, file store) and a redis-server of the benchmark's own, started
# fresh per run; CPU = user + system time of all six processes, read from /proc when the
# crawl has drained (`trawl submit --wait`). Results: bench/out/cluster.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
pages="${1:-5000}"
runs="${2:-3}"
docs="$(rustc --print sysroot)/share/doc/rust/html"
out=bench/out/cluster
site_port=18111; nats_port=14333; nats_http=18223; redis_port=16390
mkdir -p "$out"

# One build for every benchmark script: the same package set keeps cargo's feature
# resolution, and so the (long) release build of LanceDB, the same.
cargo build --release --locked --workspace --bins --examples
bin=target/release
tick=$(getconf CLK_TCK)
cpu_of() { # pid -> CPU seconds (user + system) so far
  awk -v t="$tick" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / t }' "/proc/$1/stat"
}
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
wait_port() { for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 did not open" >&2; exit 1; }

"$bin/trawl-testsite" --dir "$docs" --port "$site_port" --log /dev/null &
site=$!
pids=()
cleanup() { kill "$site" "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_port "$site_port"
seed="http://127.0.0.1:$site_port/"
common=(--allow-private --delay 0 --concurrency 64 --max-pages "$pages")

echo '[' > "$out/runs.json"
for i in $(seq 1 "$runs"); do
  # Embedded.
  rm -rf "$out/embedded-$i"
  /usr/bin/time -f "%e %U %S %M" -o "$out/time-embedded-$i.txt" \
    "$bin/trawl" crawl "$seed" "${common[@]}" --no-index --progress none --out "$out/embedded-$i" 2>/dev/null
  read -r e_wall e_user e_sys e_rss < "$out/time-embedded-$i.txt"
  e_pages=$(wc -l < "$out/embedded-$i/pages.jsonl")

  # Cluster: fresh NATS and Redis of our own, the four services, then submit and wait.
  rm -rf "$out/cluster-$i" "$out/nats-$i"; mkdir -p "$out/cluster-$i" "$out/nats-$i"
  printf 'listen: 127.0.0.1:%s\nhttp: 127.0.0.1:%s\nmax_payload: 8MB\njetstream { store_dir: "%s" }\n' \
    "$nats_port" "$nats_http" "$PWD/$out/nats-$i" > "$out/nats-$i.conf"
  nats-server -c "$out/nats-$i.conf" > "$out/nats-$i.log" 2>&1 &
  nats=$!
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no > /dev/null &
  redis=$!
  wait_port "$nats_port"; wait_port "$redis_port"
  export TRAWL_NATS_URL="nats://127.0.0.1:$nats_port" TRAWL_REDIS_URL="redis://127.0.0.1:$redis_port"
  export TRAWL_CRAWL="bench$i" TRAWL_OUT="$PWD/$out/cluster-$i" TRAWL_LOG=warn
  svc=()
  port=19200
  for s in frontier fetcher extractor indexer; do
    conc=8; [ "$s" = fetcher ] && conc=64; [ "$s" = extractor ] && conc=2
    port=$((port + 1))
    TRAWL_METRICS_ADDR="127.0.0.1:$port" TRAWL_CONCURRENCY=$conc "$bin/trawl-$s" 2>"$out/$s-$i.log" &
    svc+=($!)
  done
  pids=("${svc[@]}" "$nats" "$redis")
  start=$(date +%s.%N)
  "$bin/trawl" submit "$seed" "${common[@]}" --wait --wait-timeout 1800 > "$out/submit-$i.txt"
  c_wall=$(calc "$(date +%s.%N) - $start")
  c_cpu=0; parts=""
  for p in "${svc[@]}" "$nats" "$redis"; do
    c=$(cpu_of "$p"); c_cpu=$(calc "$c_cpu + $c"); parts="$parts $c"
  done
  # The shared state's price per page: Redis commands (a pipelined or scripted batch counts
  # each of its commands; scripts count once, with what they call listed apart), Redis
  # memory once the crawl drained (the seen-set and counters are what is left), NATS
  # messages in and out, and JetStream's stored bytes.
  redis-cli -p "$redis_port" INFO commandstats > "$out/redis-commands-$i.txt"
  redis-cli -p "$redis_port" INFO memory > "$out/redis-memory-$i.txt"
  curl -fsS "http://127.0.0.1:$nats_http/varz" > "$out/nats-varz-$i.json"
  curl -fsS "http://127.0.0.1:$nats_http/jsz" > "$out/nats-jsz-$i.json"
  r_calls=$(awk -F'[=,]' '/^cmdstat_/ { n += $2 } END { print n + 0 }' "$out/redis-commands-$i.txt")
  r_evals=$(awk -F'[=,]' '/^cmdstat_(evalsha|eval):/ { n += $2 } END { print n + 0 }' "$out/redis-commands-$i.txt")
  r_mem=$(awk -F: '/^used_memory:/ { print $2 + 0 }' "$out/redis-memory-$i.txt")
  n_msgs=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["in_msgs"] + v["out_msgs"])' "$out/nats-varz-$i.json")
  js_bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("bytes", 0))' "$out/nats-jsz-$i.json")
  kill -TERM "${svc[@]}"; wait "${svc[@]}" 2>/dev/null || true
  kill "$nats" "$redis"; wait "$nats" "$redis" 2>/dev/null || true
  pids=()
  c_pages=$(cat "$out/cluster-$i"/pages-*.jsonl | wc -l)
  [ "$i" -gt 1 ] && echo ',' >> "$out/runs.json"
  printf '{"run": %s, "embedded": {"pages": %s, "wall_s": %s, "cpu_s": %s, "peak_rss_kb": %s}, "cluster": {"pages": %s, "wall_s": %s, "cpu_s": %s, "cpu_by_process": "%s", "redis_commands": %s, "redis_scripts": %s, "redis_used_memory_bytes": %s, "nats_msgs": %s, "jetstream_bytes": %s}}\n' \
    "$i" "$e_pages" "$e_wall" "$(calc "$e_user + $e_sys")" "$e_rss" "$c_pages" "$c_wall" "$c_cpu" \
    "frontier fetcher extractor indexer nats redis:$parts" "$r_calls" "$r_evals" "$r_mem" "$n_msgs" "$js_bytes" >> "$out/runs.json"
  echo "run $i: embedded $e_pages pages, $(calc "$e_user + $e_sys") CPU-s; cluster $c_pages pages, $c_cpu CPU-s ($parts)" >&2
done
echo ']' >> "$out/runs.json"
python3 - "$out/runs.json" > bench/out/cluster.json <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))
def per_page(side):
    return [r[side]["cpu_s"] * 1000 / r[side]["pages"] for r in runs]
e, c = per_page("embedded"), per_page("cluster")
ratios = [ci / ei for ci, ei in zip(c, e)]
print(json.dumps({
    "runs": runs,
    "embedded_cpu_ms_per_page_median": statistics.median(e),
    "cluster_cpu_ms_per_page_median": statistics.median(c),
    "cluster_over_embedded_median": statistics.median(ratios),
    "redis_commands_per_page_median": statistics.median(
        r["cluster"]["redis_commands"] / r["cluster"]["pages"] for r in runs),
    "redis_scripts_per_page_median": statistics.median(
        r["cluster"]["redis_scripts"] / r["cluster"]["pages"] for r in runs),
    "nats_msgs_per_page_median": statistics.median(
        r["cluster"]["nats_msgs"] / r["cluster"]["pages"] for r in runs),
}, indent=2))
PY
cat bench/out/cluster.json | tail -4
