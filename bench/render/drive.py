"""Drives bench/render/run.sh: trawl's renderer against Chromium's --dump-dom."""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

SENTENCE = "This article exists only after the page's scripts have run"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree(root):
    """Pids of root and its descendants."""
    parent = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = open(f"/proc/{p}/stat").read()
                parent[int(p)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out = set()
    for p in parent:
        cur, seen = p, 0
        while cur and seen < 64:
            if cur == root:
                out.add(p)
                break
            cur, seen = parent.get(cur, 0), seen + 1
    return out


def rss(pid, chromium_only):
    try:
        if chromium_only and "chrom" not in open(f"/proc/{pid}/comm").read():
            return 0
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Peak resident bytes of the Chromium processes below the given roots."""

    def __init__(self, roots):
        super().__init__(daemon=True)
        self.roots, self.peak, self.stop = roots, 0, False

    def run(self):
        while not self.stop:
            total = sum(rss(p, True) for r in list(self.roots) for p in tree(r))
            self.peak = max(self.peak, total)
            time.sleep(0.05)


def trawl_run(args, base, tabs, out):
    shutil.rmtree(out, ignore_errors=True)
    urls = f"{out}.urls"
    with open(urls, "w") as f:
        f.write("".join(f"{base}/js/bench/{i}\n" for i in range(1, args.pages + 1)))
    # Every page a start URL: as many in flight as there are tabs (each also links the next).
    cmd = [args.trawl, "crawl", "--urls", urls, "--allow-private", "--delay", "0",
           "--render", "auto", "--render-concurrency", str(tabs), "--chromium", args.chromium,
           "--max-pages", str(args.pages), "--no-index", "--out", out, "--progress", "none"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = Sampler([p.pid])
    s.start()
    p.wait()
    s.stop = True
    s.join()
    if p.returncode != 0:
        sys.exit(f"trawl crawl failed ({p.returncode}): {' '.join(cmd)}")
    rep = json.load(open(f"{out}/report.json"))
    pages = [json.loads(l) for l in open(f"{out}/pages.jsonl")]
    ok = sum(1 for q in pages if SENTENCE in q.get("text", "") and q.get("render", {}).get("rendered"))
    return {"s": rep["elapsed_s"], "rendered": rep.get("render", {}).get("rendered", 0), "ok": ok,
            "peak": s.peak, "render_ms": rep.get("render", {}).get("ms", 0)}


def dump_dom(args, base, tabs):
    urls = [f"{base}/js/bench/{i}" for i in range(1, args.pages + 1)]
    roots = []
    s = Sampler(roots)
    s.start()

    def one(u):
        p = subprocess.Popen([args.chromium, "--no-sandbox", "--disable-gpu", "--dump-dom",
                              "--virtual-time-budget=5000", "--timeout=15000", u],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        roots.append(p.pid)
        out, _ = p.communicate()
        roots.remove(p.pid)
        return SENTENCE in out

    t = time.monotonic()
    with ThreadPoolExecutor(tabs) as ex:
        ok = sum(ex.map(one, urls))
    took = time.monotonic() - t
    s.stop = True
    s.join()
    return {"s": took, "ok": ok, "peak": s.peak}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trawl", required=True)
    ap.add_argument("--site", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--tabs", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="target/render-bench")
    a = ap.parse_args()
    port = free_port()
    site = subprocess.Popen([a.site, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    version = subprocess.run([a.chromium, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; {a.pages} pages of /js/bench, {a.runs} runs each, medians; {os.cpu_count()} cores")
    rows = []
    try:
        for tabs in a.tabs:
            tr = [trawl_run(a, base, tabs, f"{a.out}/t{tabs}") for _ in range(a.runs)]
            dd = [dump_dom(a, base, tabs) for _ in range(a.runs)]
            med = lambda xs, k: statistics.median(x[k] for x in xs)
            t_ps = statistics.median(x["rendered"] / x["s"] for x in tr)
            d_ps = statistics.median(a.pages / x["s"] for x in dd)
            row = {
                "tabs": tabs,
                "trawl_rendered_per_s": round(t_ps, 2),
                "trawl_rendered_ok": med(tr, "ok"),
                "trawl_peak_mib": round(med(tr, "peak") / 2**20),
                "trawl_mib_per_tab": round(med(tr, "peak") / 2**20 / tabs),
                "trawl_ms_per_page": round(med(tr, "render_ms") / max(1, med(tr, "rendered"))),
                "dump_dom_per_s": round(d_ps, 2),
                "dump_dom_ok": med(dd, "ok"),
                "dump_dom_peak_mib": round(med(dd, "peak") / 2**20),
                "dump_dom_mib_per_page": round(med(dd, "peak") / 2**20 / tabs),
                "ratio": round(t_ps / d_ps, 2) if d_ps else None,
            }
            rows.append(row)
            print(json.dumps(row))
    finally:
        site.kill()
    os.makedirs(a.out, exist_ok=True)
    json.dump(rows, open(f"{a.out}/results.json", "w"), indent=1)


if __name__ == "__main__":
    main()
