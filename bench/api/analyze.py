"""Medians of bench/api/run.sh's rounds (one JSON object a line on stdin)."""
import json
import statistics
import sys

pages, profile = int(sys.argv[1]), sys.argv[2]
rows = [json.loads(l) for l in sys.stdin if l.strip()]
crawl = statistics.median(r["crawl_s"] for r in rows)
api_total = statistics.median(r["api"]["total_s"] for r in rows)
api_crawl = statistics.median(r["api"]["crawl_s"] for r in rows)
read = statistics.median(r["api"]["read_s"] for r in rows)
lines = statistics.median(r["crawl_lines"] for r in rows)
docs = statistics.median(r["api"]["docs_read"] for r in rows)
print(json.dumps({
    "profile": profile, "limit": pages, "runs": len(rows),
    "trawl_crawl": {"median_s": crawl, "pages": lines, "pages_per_s": round(lines / crawl, 1)},
    "api": {"median_total_s": api_total, "median_crawl_s": api_crawl, "median_read_s": read,
            "docs": docs, "pages_per_s": round(docs / api_total, 1)},
    "api_vs_crawl_time_ratio": round(api_total / crawl, 3),
    # Each round's own ratio: the two crawls of a round share the machine's state.
    "api_vs_crawl_time_ratio_per_round_median": round(
        statistics.median(r["api"]["total_s"] / r["crawl_s"] for r in rows), 3),
    "rounds": rows,
}, indent=2))
