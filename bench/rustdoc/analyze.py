"""Summarizes bench/rustdoc/run.sh: pages/s (median of runs), coverage of the site's HTML
files, robots.txt compliance from the server's access log, and the ratio to wget."""
import json
import os
import statistics
import sys
from urllib.parse import unquote, urlsplit

docs, out, runs, wget_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

disallow = []
for line in open(os.path.join(docs, "robots.txt")):
    line = line.split("#")[0].strip()
    if line.lower().startswith("disallow:"):
        rule = line.split(":", 1)[1].strip()
        if rule:
            disallow.append(rule)


def disallowed(path):
    return any(path.startswith(r) for r in disallow)


html = set()
for root, _, files in os.walk(docs):
    for f in files:
        if f.endswith(".html"):
            html.add("/" + os.path.relpath(os.path.join(root, f), docs))
allowed_html = {p for p in html if not disallowed(p)}


def log(path):
    with open(path) as fh:
        return [json.loads(l) for l in fh if l.strip()]


rows = []
for i in range(1, runs + 1):
    rep = json.load(open(os.path.join(out, f"crawl-{i}", "report.json")))
    entries = log(os.path.join(out, f"access-trawl-{i}.jsonl"))
    paths = [unquote(urlsplit(e["target"]).path) for e in entries]
    fetched = set(paths)
    bad = sorted(p for p in fetched if disallowed(p))
    elapsed, cpu, rss = open(os.path.join(out, f"time-trawl-{i}.txt")).read().split()
    rows.append({
        "run": i,
        "pages": rep["pages"],
        "elapsed_s": rep["elapsed_s"],
        "pages_per_s": rep["pages_per_s"],
        "requests": len(entries),
        "duplicate_requests": len(paths) - len(fetched),
        "html_fetched": len(fetched & allowed_html),
        "html_on_disk_allowed": len(allowed_html),
        "coverage": round(len(fetched & allowed_html) / len(allowed_html), 4),
        "robots_disallowed_fetched": len(bad),
        "robots_blocked_in_report": rep["robots_blocked"],
        "errors": rep["errors"],
        "cpu_percent": cpu,
        "max_rss_kib": int(rss),
    })

median = statistics.median(r["pages_per_s"] for r in rows)
summary = {"runs": rows, "trawl_median_pages_per_s": median, "html_files": len(html),
           "html_files_disallowed": len(html) - len(allowed_html)}
if wget_s:
    wlog = log(os.path.join(out, "access-wget.jsonl"))
    w_pages = sum(1 for e in wlog if e["target"] != "/robots.txt")
    w_rate = w_pages / float(wget_s)
    summary.update({"wget_requests": len(wlog), "wget_elapsed_s": round(float(wget_s), 2),
                    "wget_pages_per_s": round(w_rate, 1), "ratio_trawl_to_wget": round(median / w_rate, 2)})
json.dump(summary, open(os.path.join(out, "rustdoc.json"), "w"), indent=2)

print(f"{'run':>3} {'pages':>7} {'secs':>7} {'pages/s':>8} {'coverage':>9} {'disallowed fetched':>19} {'dup req':>8} {'cpu':>5} {'rss MiB':>8}")
for r in rows:
    print(f"{r['run']:>3} {r['pages']:>7} {r['elapsed_s']:>7} {r['pages_per_s']:>8} {r['coverage']:>9} "
          f"{r['robots_disallowed_fetched']:>19} {r['duplicate_requests']:>8} {r['cpu_percent']:>5} {r['max_rss_kib'] // 1024:>8}")
print(f"trawl median: {median} pages/s")
if wget_s:
    print(f"wget -r: {summary['wget_pages_per_s']} pages/s ({summary['wget_elapsed_s']} s); trawl/wget = {summary['ratio_trawl_to_wget']}x")
if any(r["robots_disallowed_fetched"] for r in rows):
    sys.exit("FAIL: a robots-disallowed path was fetched")
