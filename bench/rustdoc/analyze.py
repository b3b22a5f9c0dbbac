"""Summarizes bench/rustdoc/run.sh: pages/s (median of runs), coverage of the site's HTML
files, robots.txt compliance from the server's access log, and the ratio to wget."""
import json
import os
import statistics
import sys
from urllib.parse import unquote, urljoin, urlsplit

docs, out, runs, wget_s, server = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]

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
    """Access log entries as dicts with target, status, start_us, end_us: the test site
    writes JSON lines, nginx `$msec $request_time $status $request_uri`."""
    entries = []
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                entries.append(json.loads(line))
            else:
                msec, rtime, status, target = line.split(" ", 3)
                end = int(float(msec) * 1e6)
                entries.append({"target": target, "status": int(status),
                                "start_us": end - int(float(rtime) * 1e6), "end_us": end})
    return entries


def reachable():
    """An independent oracle for the whole site: breadth-first over the files on disk,
    following every href="..." to an HTML page that robots.txt allows."""
    seen, queue = {"/"}, ["/"]
    while queue:
        path = queue.pop()
        f = path + "index.html" if path.endswith("/") else path
        try:
            text = open(os.path.join(docs, f.lstrip("/")), encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for chunk in text.split('href="')[1:]:
            href = chunk.split('"', 1)[0].replace("&amp;", "&")
            t = urlsplit(urljoin("http://docs.invalid" + path, href))
            if t.netloc != "docs.invalid":
                continue
            p = unquote(t.path)
            if (p.endswith(".html") or p.endswith("/")) and not disallowed(p) and p not in seen:
                seen.add(p)
                queue.append(p)
    return {p for p in seen
            if os.path.isfile(os.path.join(docs, (p + "index.html" if p.endswith("/") else p).lstrip("/")))}


reach = reachable()
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
        # The same path and query requested twice (query variants are distinct URLs).
        "duplicate_requests": len(entries) - len({e["target"] for e in entries}),
        "html_fetched": len(fetched & allowed_html),
        "html_on_disk_allowed": len(allowed_html),
        "coverage_of_files": round(len(fetched & allowed_html) / len(allowed_html), 4),
        "reachable_pages": len(reach),
        "coverage_of_reachable": round(len(fetched & reach) / len(reach), 4),
        "reachable_missed_examples": sorted(reach - fetched)[:5],
        "robots_disallowed_fetched": len(bad),
        "robots_blocked_in_report": rep["robots_blocked"],
        "errors": rep["errors"],
        "cpu_percent": cpu,
        "max_rss_kib": int(rss),
    })

median = statistics.median(r["pages_per_s"] for r in rows)
summary = {"server": server, "runs": rows, "trawl_median_pages_per_s": median, "html_files": len(html),
           "html_files_disallowed": len(html) - len(allowed_html)}
if os.path.exists(os.path.join(out, "access-wget.jsonl")):
    wlog = log(os.path.join(out, "access-wget.jsonl"))
    w_pages = sum(1 for e in wlog if unquote(urlsplit(e["target"]).path).endswith((".html", "/")))
    # The span of its requests at the server: no start-up or disk flush counted.
    span_s = (max(e["end_us"] for e in wlog) - min(e["start_us"] for e in wlog)) / 1e6
    w_rate = w_pages / span_s
    wfetched = {unquote(urlsplit(e["target"]).path) for e in wlog}
    summary.update({"wget_coverage_of_reachable": round(len(wfetched & reach) / len(reach), 4),
                    "wget_requests": len(wlog), "wget_elapsed_s": round(span_s, 2), "wget_wall_s": round(float(wget_s), 2) if wget_s else None,
                    "wget_html_pages": w_pages,
                    "wget_pages_per_s": round(w_rate, 1), "ratio_trawl_to_wget": round(median / w_rate, 2)})
json.dump(summary, open(os.path.join(out, "rustdoc.json"), "w"), indent=2)

print(f"server: {server}; {len(html)} HTML files, {len(reach)} reachable by links from / (robots.txt applied)")
print(f"{'run':>3} {'pages':>7} {'secs':>7} {'pages/s':>8} {'reachable':>10} {'disallowed fetched':>19} {'dup req':>8} {'cpu':>5} {'rss MiB':>8}")
for r in rows:
    print(f"{r['run']:>3} {r['pages']:>7} {r['elapsed_s']:>7} {r['pages_per_s']:>8} {r['coverage_of_reachable']:>10} "
          f"{r['robots_disallowed_fetched']:>19} {r['duplicate_requests']:>8} {r['cpu_percent']:>5} {r['max_rss_kib'] // 1024:>8}")
print(f"trawl median: {median} pages/s")
if "wget_pages_per_s" in summary:
    print(f"wget -r: {summary['wget_pages_per_s']} pages/s ({summary['wget_elapsed_s']} s, reachable coverage "
          f"{summary['wget_coverage_of_reachable']}); trawl/wget = {summary['ratio_trawl_to_wget']}x")
if any(r["robots_disallowed_fetched"] for r in rows):
    sys.exit("FAIL: a robots-disallowed path was fetched")
