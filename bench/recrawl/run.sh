#!/usr/bin/env bash
# Re-crawl of the unchanged toolchain documentation against its first crawl, same site,
# same run: wall time, bytes transferred, requests answered 304, pages indexed again
# (must be 0), change events (must be 0) and the crawl store's bytes per URL.
#
#   bench/recrawl/run.sh [extra `trawl crawl` options]   (default: full-text index only)
#
# Needs target/release/{trawl,trawl-testsite} (TRAWL_BIN to use others).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${TRAWL_BIN:-target/release}"
out="${TRAWL_BENCH_OUT:-/tmp/trawl-recrawl-bench}"
rm -rf "$out"; mkdir -p "$out"
. bench/serve-docs.sh
port=18098
serve_docs "$port" "$out/access.jsonl"
args=("http://127.0.0.1:$port/" --allow-private --delay 0 --concurrency 64 --progress none)
[ $# -gt 0 ] || set -- --no-embed

t=$(ms_now)
"$bin/trawl" crawl "${args[@]}" --out "$out/first" "$@" 2>"$out/first.log"
first_ms=$(( $(ms_now) - t ))
first_requests=$(wc -l < "$out/access.jsonl")
t=$(ms_now)
"$bin/trawl" crawl "${args[@]}" --out "$out/second" --since "$out/first" "$@" 2>"$out/second.log"
second_ms=$(( $(ms_now) - t ))

python3 - "$out" "$first_ms" "$second_ms" "$first_requests" <<'PY'
import json, os, sqlite3, sys
out, first_ms, second_ms, first_requests = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
log = [json.loads(l) for l in open(f"{out}/access.jsonl")]
second = log[first_requests:]
def report(d):
    return json.load(open(f"{out}/{d}/report.json"))
def store(d):
    db = f"{out}/{d}/crawl.db"
    n = sqlite3.connect(db).execute("select count(*) from urls").fetchone()[0]
    return os.path.getsize(db), n
r1, r2 = report("first"), report("second")
b1, n1 = store("first")
events = 0
if os.path.exists(f"{out}/second/changes.jsonl"):
    events = sum(1 for _ in open(f"{out}/second/changes.jsonl"))
rows = [
    ("pages", r1["pages"], r2["pages"]),
    ("wall time (s)", first_ms / 1000, second_ms / 1000),
    ("bytes received", r1["bytes"], r2["bytes"]),
    ("requests", first_requests, len(second)),
    ("answered 304", sum(e["status"] == 304 for e in log[:first_requests]), sum(e["status"] == 304 for e in second)),
    ("requests with validators", sum(bool(e.get("if_modified_since") or e.get("if_none_match")) for e in log[:first_requests]),
     sum(bool(e.get("if_modified_since") or e.get("if_none_match")) for e in second)),
    ("pages indexed", (r1.get("index") or {}).get("pages", 0), (r2.get("index") or {}).get("pages", 0)),
    ("change events", 0, events),
]
print("| | first crawl | re-crawl (--since) | ratio |")
print("|---|---|---|---|")
for name, a, b in rows:
    ratio = f"{b / a:.3f}" if isinstance(a, (int, float)) and a else ""
    print(f"| {name} | {a:,} | {b:,} | {ratio} |" if isinstance(a, int) else f"| {name} | {a:.1f} | {b:.1f} | {ratio} |")
print(f"\nre-crawl changes by status: {r2.get('changes')}")
print(f"crawl store: {b1:,} bytes for {n1:,} URLs = {b1 / n1:.0f} bytes/URL (first crawl's crawl.db)")
PY
