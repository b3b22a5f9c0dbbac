"""Scrapes/s through `trawl serve`'s /v2/scrape, with and without the browser, beside
`trawl crawl` over the same pages in the same run: the test site's server-rendered
`/blog/N` pages and its script-built `/js/bench/N` pages (an empty app root filled from a
fetched JSON, which the render rule sends to the browser). Prints a JSON object."""
import argparse
import json
import socket
import statistics
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

SENTENCE = "This article exists only after the page's scripts have run"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url):
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer")


def scrape(api, url, body):
    req = urllib.request.Request(api + "/v2/scrape", data=json.dumps({"url": url, **body}).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["data"]


def through_api(api, urls, body, clients, want=None):
    t0 = time.time()
    with ThreadPoolExecutor(clients) as ex:
        docs = list(ex.map(lambda u: scrape(api, u, body), urls))
    s = time.time() - t0
    ok = sum(1 for d in docs if want is None or want in (d.get("markdown") or ""))
    return {"s": round(s, 3), "pages_per_s": round(len(urls) / s, 2), "with_text": ok}


def crawl(trawl, urls, out, render, tabs, chromium):
    with open(out + ".urls", "w") as f:
        f.write("".join(u + "\n" for u in urls))
    cmd = [trawl, "crawl", "--urls", out + ".urls", "--allow-private", "--delay", "0", "--max-depth", "0",
           "--render", render, "--render-concurrency", str(tabs), "--chromium", chromium, "--no-index",
           "--no-warc", "--out", out, "--overwrite", "--progress", "none"]
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = time.time() - t0
    lines = sum(1 for _ in open(out + "/pages.jsonl"))
    return {"s": round(s, 3), "pages_per_s": round(lines / s, 2), "lines": lines}


def main():
    ap = argparse.ArgumentParser()
    for a in ("--trawl", "--site", "--chromium", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    sport, aport = free_port(), free_port()
    site = subprocess.Popen([a.site, "--port", str(sport)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{sport}"
    api_url = f"http://127.0.0.1:{aport}"
    server = subprocess.Popen([a.trawl, "serve", "--listen", f"127.0.0.1:{aport}", "--data", a.out + "/serve",
                               "--allow-private", "--delay", "0", "--render-timeout", "30"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**__import__("os").environ, "TRAWL_CHROMIUM": a.chromium,
                                   "TRAWL_RENDER_CONCURRENCY": str(a.clients)})
    try:
        wait_up(base + "/robots.txt")
        wait_up(api_url + "/healthz")
        static = [f"{base}/blog/{i}" for i in range(1, a.pages + 1)]
        js = [f"{base}/js/bench/{i}" for i in range(1, a.pages + 1)]
        runs = []
        for r in range(a.runs):
            runs.append({
                "api_static": through_api(api_url, static, {}, a.clients),
                "api_rendered": through_api(api_url, js, {}, a.clients, SENTENCE),
                "api_forced": through_api(api_url, static, {"waitFor": 1}, a.clients),
                "crawl_static": crawl(a.trawl, static, f"{a.out}/crawl-static", "never", a.clients, a.chromium),
                "crawl_rendered": crawl(a.trawl, js, f"{a.out}/crawl-js", "auto", a.clients, a.chromium),
            })
        med = {k: statistics.median(x[k]["pages_per_s"] for x in runs) for k in runs[0]}
        print(json.dumps({"pages": a.pages, "clients": a.clients, "runs": runs, "median_pages_per_s": med,
                          "api_over_crawl": {"static": round(med["api_static"] / med["crawl_static"], 2),
                                             "rendered": round(med["api_rendered"] / med["crawl_rendered"], 2)}},
                         indent=1))
    finally:
        server.terminate()
        server.wait()
        site.kill()


main()
