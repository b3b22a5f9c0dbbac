#!/usr/bin/env python3
"""`trawl search` against the index bench/scale/index.sh left, as a user runs it: one
process a query, text mode (the index is built with --no-embed), top 10; then the same
queries through `trawl serve --search-index INDEX` (POST /v2/search, limit 3: 12 chunks
asked), a server that keeps the index open between queries. Each query is asked once
(after one other query has opened the index), so what each reads of the index is new.

    search_latency.py TRAWL INDEX PAGES_JSONL [QUERIES [CHUNKS]]

Queries: two words drawn (seeded) from the text of pages spread over PAGES_JSONL, so
each one has answers. Prints JSON: wall per query (process start to exit) p50/p95/max,
peak RSS of the search processes, the server's p50/p95/max and peak RSS, hits per query, the index's chunks and bytes per chunk
on disk (the LanceDB tables, over CHUNKS rows when given; the indexer's state file is
reported apart).
"""

import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

trawl, index, pages = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 50
chunks = int(sys.argv[5]) if len(sys.argv) > 5 else 0
rng = random.Random(20261207)

size = os.path.getsize(pages)
words = []
with open(pages, "rb") as f:
    while len(words) < n + 1:
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


first, words = words[0], words[1:]


def served(queries):
    """Wall per query through `trawl serve`, and the server's peak RSS in MiB."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tempfile.mkdtemp(prefix="trawl-scale-search-")
    server = subprocess.Popen([trawl, "serve", "--listen", f"127.0.0.1:{port}", "--data", data,
                               "--search-index", index],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api = f"http://127.0.0.1:{port}"

    def ask(q):
        req = urllib.request.Request(api + "/v2/search",
                                     data=json.dumps({"query": q, "limit": 3}).encode(),
                                     headers={"content-type": "application/json"}, method="POST")
        t = time.perf_counter()
        with urllib.request.urlopen(req, timeout=300) as r:
            r.read()
        return (time.perf_counter() - t) * 1000

    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(api + "/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        opened = ask(first)
        out = [ask(q) for q in queries]
        with open(f"/proc/{server.pid}/status") as f:
            hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
        return opened, out, hwm / 1024
    finally:
        server.terminate()
        server.wait()


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
opened, api, api_rss = served(words)
api.sort()
tables = sum(du(os.path.join(index, d)) for d in os.listdir(index) if d.endswith(".lance"))
state = os.path.join(index, ".trawl-state.db")
print(json.dumps({
    "queries": len(walls),
    "p50_ms": round(statistics.median(walls), 1),
    "p95_ms": round(walls[int(0.95 * (len(walls) - 1))], 1),
    "max_ms": round(walls[-1], 1),
    "peak_rss_mib": round(max(rss), 1),
    "served_first_query_ms": round(opened, 1),
    "served_p50_ms": round(statistics.median(api), 1),
    "served_p95_ms": round(api[int(0.95 * (len(api) - 1))], 1),
    "served_max_ms": round(api[-1], 1),
    "served_peak_rss_mib": round(api_rss, 1),
    "median_hits": statistics.median(hits),
    "tables_bytes": tables,
    "chunks": chunks,
    "bytes_per_chunk": round(tables / chunks, 1) if chunks else None,
    "state_file_bytes": os.path.getsize(state) if os.path.exists(state) else 0,
}, indent=2))
