#!/usr/bin/env python3
"""Summary of bench/scale/index.sh: per run, wall, pages/s, CPU, peak RSS, RSS at
10/25/50/75/100% of the output, the growth per page past the tenth and what it projects
to at 10,000,000 pages; the index's bytes on disk and its report's counts.

    index_summary.py OUT PAGES
"""

import json
import os
import sys

out, pages = sys.argv[1], int(sys.argv[2])
MIB = 1024.0
TARGET = 10_000_000


def lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def rss_at(samples, total_bytes, frac):
    """The largest RSS (KiB) sampled while the output was at most `frac` of its end."""
    best = 0
    for _, rss, size in samples:
        if size <= total_bytes * frac:
            best = max(best, rss)
    return best


def report(pages_file):
    path = os.path.join(os.path.dirname(pages_file), "report.json")
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return {}
    keep = ("pages", "changes", "index")
    return {k: r[k] for k in keep if k in r}


runs = {}
for name in ("crawl", "since", "watch"):
    try:
        with open(f"{out}/time-{name}.txt") as f:
            wall, user, sys_, peak = f.read().split()[:4]
        with open(f"{out}/pages-{name}.txt") as f:
            pages_file = f.read().strip()
        with open(f"{out}/rss-{name}.txt") as f:
            samples = [tuple(int(x) for x in l.split()) for l in f if l.strip()]
    except (OSError, ValueError):
        continue
    n = lines(pages_file)
    total = os.path.getsize(pages_file) if os.path.exists(pages_file) else 0
    at = {f"{int(p * 100)}%": round(rss_at(samples, total, p) / MIB, 1) for p in (0.1, 0.25, 0.5, 0.75, 1.0)}
    tenth, end = rss_at(samples, total, 0.1), max(rss_at(samples, total, 1.0), int(peak))
    per_page_kib = (end - tenth) / (0.9 * n) if n else 0.0
    runs[name] = {
        "lines": n,
        "wall_s": float(wall),
        "lines_per_s": round(n / float(wall), 1) if float(wall) else None,
        "cpu_s": round(float(user) + float(sys_), 1),
        "peak_rss_mib": round(int(peak) / MIB, 1),
        "rss_mib_at_output": at,
        "peak_over_tenth": round(end / tenth, 2) if tenth else None,
        "growth_bytes_per_line_past_tenth": round(per_page_kib * 1024, 1),
        "projected_peak_mib_at_10m_lines": round((end + per_page_kib * (TARGET - n)) / MIB, 0),
        "report": report(pages_file),
    }

try:
    with open(f"{out}/index-bytes.txt") as f:
        index_bytes = int(f.read().strip())
except (OSError, ValueError):
    index_bytes = None
print(json.dumps({"pages": pages, "index_bytes_on_disk": index_bytes, "runs": runs}, indent=2))
