#!/usr/bin/env python3
"""`trawl search` against the index bench/scale/index.sh left, as a user runs it: one
process a query, text mode (the index is built with --no-embed), top 10.

    search_latency.py TRAWL INDEX PAGES_JSONL [QUERIES [CHUNKS]]

Queries: two words drawn (seeded) from the text of pages spread over PAGES_JSONL, so
each one has answers. Prints JSON: wall per query (process start to exit) p50/p95/max,
peak RSS of the search processes, hits per query, the index's chunks and bytes per chunk
on disk (the LanceDB tables, over CHUNKS rows when given; the indexer's state file is
reported apart).
"""

import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

trawl, index, pages = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 50
chunks = int(sys.argv[5]) if len(sys.argv) > 5 else 0
rng = random.Random(20261207)

size = os.path.getsize(pages)
words = []
with open(pages, "rb") as f:
    while len(words) < n:
        f.seek(rng.randrange(size))
        f.readline()
        line = f.readline()
        if not line:
            continue
        text = json.loads(line).get("text") or ""
        tokens = [w for w in re.findall(r"[A-Za-z]{5,}", text)]
        if len(tokens) >= 2:
            words.append(" ".join(rng.sample(tokens, 2)))


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, x)) for x in files)
    return total


walls, rss, hits = [], [], []
for q in words:
    t = time.perf_counter()
    p = subprocess.run(
        ["/usr/bin/time", "-f", "%M", trawl, "search", "--index", index, "--mode", "text",
         "--json", "-k", "10", q],
        capture_output=True, text=True,
    )
    walls.append((time.perf_counter() - t) * 1000)
    if p.returncode != 0:
        sys.exit(f"search {q!r} failed: {p.stderr[-2000:]}")
    rss.append(int(p.stderr.strip().splitlines()[-1]) / 1024)
    hits.append(sum(1 for l in p.stdout.splitlines() if l.startswith("{")))

walls.sort()
tables = sum(du(os.path.join(index, d)) for d in os.listdir(index) if d.endswith(".lance"))
state = os.path.join(index, ".trawl-state.db")
print(json.dumps({
    "queries": len(walls),
    "p50_ms": round(statistics.median(walls), 1),
    "p95_ms": round(walls[int(0.95 * (len(walls) - 1))], 1),
    "max_ms": round(walls[-1], 1),
    "peak_rss_mib": round(max(rss), 1),
    "median_hits": statistics.median(hits),
    "tables_bytes": tables,
    "chunks": chunks,
    "bytes_per_chunk": round(tables / chunks, 1) if chunks else None,
    "state_file_bytes": os.path.getsize(state) if os.path.exists(state) else 0,
}, indent=2))
