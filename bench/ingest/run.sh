#!/usr/bin/env bash
# Distributed ingest against the local one, same archives, same run: `trawl ingest` (one
# process, all cores) beside `trawl submit --archives` to two `trawl-ingester` replicas and
# one `trawl-indexer` over NATS and Redis on loopback. Wall time, CPU-seconds of every
# process (the services', nats-server's and redis-server's), documents and copies of each.
#
#   bench/ingest/run.sh [ARCHIVES] [COPIES]
#
# The archives are Common Crawl's excerpt (shared/data/warc/commoncrawl: 50 records, 16 of
# them HTML responses of real sites) repeated COPIES times each (default 8 archives of 200
# copies: 25,600 responses), every record under a fresh id (make_archives.py). BIN=DIR runs
# the binaries in DIR instead of a release build.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ARCHIVES=${1:-8}
COPIES=${2:-200}
OUT=${OUT:-$ROOT/target/ingest-bench}
SRC=${CC_EXCERPT:-$ROOT/../shared/data/warc/commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz}
rm -rf "$OUT"
mkdir -p "$OUT"
python3 bench/ingest/make_archives.py "$SRC" "$ARCHIVES" "$COPIES" "$OUT/archives"
ls "$OUT"/archives/*.warc.gz > "$OUT/archives.txt"
./scripts/services.sh >&2
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p trawl -p trawl-ingester-bin -p trawl-indexer-bin
  BIN=$ROOT/target/release
fi
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
server_ticks() { local t=0; for p in $(pgrep -x nats-server) $(pgrep -x redis-server); do t=$((t + $(ticks "$p"))); done; echo $t; }

echo "== trawl ingest (local, all cores)" >&2
/usr/bin/time -f "%U %S %e %M" -o "$OUT/time-local.txt" \
  "$BIN/trawl" ingest "$OUT"/archives/*.warc.gz --out "$OUT/local" > /dev/null

echo "== trawl submit --archives: 2 ingesters, 1 indexer" >&2
tag=$(date +%s%N | tail -c 9)
export TRAWL_CRAWL=bi$tag TRAWL_QUEUE_PREFIX=bq$tag TRAWL_OUT=$OUT/cluster TRAWL_LOG=warn
mkdir -p "$TRAWL_OUT"
pids=()
TRAWL_METRICS_ADDR=127.0.0.1:19281 "$BIN/trawl-ingester" 2> "$OUT/ingester-1.log" & pids+=($!)
TRAWL_METRICS_ADDR=127.0.0.1:19282 "$BIN/trawl-ingester" 2> "$OUT/ingester-2.log" & pids+=($!)
TRAWL_METRICS_ADDR=127.0.0.1:19283 "$BIN/trawl-indexer" 2> "$OUT/indexer.log" & pids+=($!)
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
sleep 1
s0=$(server_ticks)
t0=$(date +%s.%N)
"$BIN/trawl" submit --archives "$OUT/archives.txt" --wait --wait-timeout 1800 > "$OUT/status.txt"
t1=$(date +%s.%N)
s1=$(server_ticks)
svc=0; for p in "${pids[@]}"; do svc=$((svc + $(ticks "$p"))); done
echo "$svc $((s1 - s0)) $(echo "$t1 - $t0" | bc)" > "$OUT/cluster.txt"
kill "${pids[@]}"; wait 2>/dev/null || true

python3 - "$OUT" "$(getconf CLK_TCK)" <<'PY'
import json, sys, glob
out, hz = sys.argv[1], int(sys.argv[2])
u, s, wall, rss = [float(x) for x in open(f"{out}/time-local.txt").read().split()]
svc, servers, cwall = [float(x) for x in open(f"{out}/cluster.txt").read().split()]
def lines(pattern):
    rows = [json.loads(l) for f in glob.glob(pattern) for l in open(f)]
    return len(rows), sum(1 for r in rows if r.get("duplicate_of"))
ld, lc = lines(f"{out}/local/pages.jsonl")
cd, cc = lines(f"{out}/cluster/pages*.jsonl")
status = json.loads(open(f"{out}/status.txt").read().split("\n", 1)[1])
r = {
  "local": {"documents": ld, "copies": lc, "wall_s": wall, "cpu_s": u + s,
            "docs_per_s": ld / wall, "docs_per_cpu_s": ld / (u + s)},
  "cluster": {"documents": cd, "copies": cc, "wall_s": cwall, "services_cpu_s": svc / hz,
              "nats_redis_cpu_s": servers / hz, "docs_per_s": cd / cwall,
              "docs_per_cpu_s": cd / ((svc + servers) / hz),
              "archives": status["archives"]["stages"]},
}
r["cpu_per_doc_ratio"] = r["local"]["docs_per_cpu_s"] / r["cluster"]["docs_per_cpu_s"]
json.dump(r, open(f"{out}/result.json", "w"), indent=1)
print(json.dumps(r, indent=1))
print(f"local {r['local']['docs_per_s']:.0f} docs/s, {r['local']['docs_per_cpu_s']:.0f}/CPU-s; "
      f"cluster {r['cluster']['docs_per_s']:.0f} docs/s, {r['cluster']['docs_per_cpu_s']:.0f}/CPU-s "
      f"({r['cpu_per_doc_ratio']:.2f}x the CPU a document)")
PY
