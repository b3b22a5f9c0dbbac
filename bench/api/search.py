"""Latency of /v2/search through `trawl serve --search-index INDEX`, beside `trawl search`
over the same index, one run: every query of QUERIES asked RUNS times (the first round
loads the model and is reported apart). Prints a JSON object with p50/p95 in ms."""
import argparse
import json
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

QUERIES = [
    "insert a key into a hash map", "read a whole file into a string", "spawn a thread and join it",
    "sort a vector by a key", "iterator map filter collect", "convert a string to an integer",
    "reference counted pointer shared ownership", "mutex lock poisoning", "format a float with precision",
    "split a string on whitespace", "environment variables of the process", "current time since the epoch",
    "binary heap priority queue", "open a TCP connection", "path join and extension",
    "option unwrap or default", "error trait source chain", "slice binary search",
    "deque push front pop back", "channel send receive between threads",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))], 1)


def ask(api, q):
    req = urllib.request.Request(api + "/v2/search", data=json.dumps({"query": q, "limit": 5}).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        body = json.loads(r.read())
    return (time.perf_counter() - t0) * 1000, [w["url"] for w in body["data"]["web"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trawl", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    port = free_port()
    data = tempfile.mkdtemp(prefix="trawl-search-bench-")
    server = subprocess.Popen([a.trawl, "serve", "--listen", f"127.0.0.1:{port}", "--data", data,
                               "--search-index", a.index], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(api + "/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        first, _ = ask(api, QUERIES[0])
        lat, hits = [], {}
        for _ in range(a.runs):
            for q in QUERIES:
                ms, urls = ask(api, q)
                lat.append(ms)
                hits[q] = urls
        cli = []
        for q in QUERIES[:5]:
            t0 = time.perf_counter()
            res = subprocess.run([a.trawl, "search", q, "--index", a.index, "-k", "20", "--json"],
                                 check=True, capture_output=True, text=True)
            cli.append((time.perf_counter() - t0) * 1000)
            pages = []
            for line in res.stdout.splitlines():
                u = json.loads(line)["url"]
                if u not in pages and len(pages) < 5:
                    pages.append(u)
            if pages != hits[q]:
                print(f"warning: {q!r}: the CLI's pages {pages} are not the API's {hits[q]}", flush=True)
        print(json.dumps({
            "queries": len(QUERIES), "runs": a.runs, "first_query_ms": round(first, 1),
            "api_p50_ms": pct(lat, 50), "api_p95_ms": pct(lat, 95), "api_mean_ms": round(statistics.mean(lat), 1),
            "cli_p50_ms": pct(cli, 50), "cli_over_api_p50": round(pct(cli, 50) / pct(lat, 50), 1),
        }, indent=2))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
