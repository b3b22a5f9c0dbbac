"""Reads what bench/scale/run.sh left in OUT and prints one JSON summary.

    python summary.py OUT PAGES

Every figure comes from the products' own outputs (pages.jsonl, the Scrapy feed), the
processes' CPU and memory, and the synthetic web's own counters.
"""

import glob
import json
import os
import re
import sys
from collections import Counter

out, pages = sys.argv[1], int(sys.argv[2])


def load(path):
    with open(path) as f:
        return json.load(f)


def time_file(path):
    wall, user, sys_, rss = open(path).read().split()[:4]
    return {"wall_s": float(wall), "cpu_s": float(user) + float(sys_), "peak_rss_mib": int(rss) / 1024}


def pages_of(paths):
    """Lines, distinct /p/N pages and their repeats (redirect records aside), statuses,
    near-copies flagged."""
    urls, statuses, dups, lines = Counter(), Counter(), 0, 0
    for p in paths:
        with open(p) as f:
            for line in f:
                r = json.loads(line)
                lines += 1
                statuses[str(r.get("status"))] += 1
                if r.get("duplicate_of"):
                    dups += 1
                # A redirect's own record names its target as final_url: it is a hop of
                # the chain, not a second copy of the page it points at.
                if str(r.get("status", "")).startswith("3"):
                    continue
                u = r.get("final_url") or r.get("url")
                if re.search(r"/p/\d+$", u) or re.search(r"://[^/]+/$", u):
                    urls[u] += 1
    return {
        "lines": lines,
        "distinct_pages": len(urls),
        "pages_written_twice": sum(1 for n in urls.values() if n > 1),
        "status": dict(statuses),
        "flagged_near_copies": dups,
    }


def rss_curve(path):
    """Peak RSS (MiB) seen by each quarter of the run's output bytes."""
    if not os.path.exists(path):
        return None
    rows = [tuple(int(x) for x in l.split()) for l in open(path) if len(l.split()) == 3]
    if not rows:
        return None
    total = max(r[2] for r in rows) or 1
    curve = {}
    for q in (25, 50, 75, 100):
        upto = [r[1] for r in rows if r[2] <= total * q / 100]
        curve[f"{q}%"] = round(max(upto or [0]) / 1024, 1)
    return curve


def web(side):
    path = f"{out}/web-{side}.json"
    if not os.path.exists(path):
        return None
    w = load(path)
    w["server_cpu_s"] = float(open(f"{out}/web-{side}-cpu").read())
    return w


summary = {"pages": pages, "sides": {}}
sides = summary["sides"]

def one_process(side, pages_files):
    """A side that is one crawler process: its time file, pages, RSS curve and web."""
    s = time_file(f"{out}/time-{side}.txt")
    s.update(pages_of(pages_files))
    s["rss_by_output"] = rss_curve(f"{out}/rss-{side}.txt")
    s["web"] = web(side)
    return s


if os.path.exists(f"{out}/time-embedded.txt"):
    sides["embedded"] = one_process("embedded", [f"{out}/embedded/pages.jsonl"])

if os.path.exists(f"{out}/cluster.json"):
    c = load(f"{out}/cluster.json")
    c.update(pages_of(sorted(glob.glob(f"{out}/cluster/pages-*.jsonl"))))
    # One file per Redis node: node 0 keeps the crawl's unsharded keys, the others the
    # per-host state of their shards (REDIS_SHARDS).
    nodes = sorted(glob.glob(f"{out}/redis-commands-*.txt"))
    c["redis_nodes"] = []
    for i in range(len(nodes)):
        stats = open(f"{out}/redis-commands-{i}.txt").read()
        mem = open(f"{out}/redis-memory-{i}.txt").read()
        usec = sum(int(m) for m in re.findall(r"cmdstat_[^:]+:calls=\d+,usec=(\d+)", stats))
        c["redis_nodes"].append({
            "commands": sum(int(m) for m in re.findall(r"cmdstat_[^:]+:calls=(\d+)", stats)),
            "scripts": sum(
                int(m) for m in re.findall(r"cmdstat_(?:evalsha|eval):calls=(\d+)", stats)),
            "command_s": round(usec / 1e6, 2),
            "used_memory_bytes": int(re.search(r"used_memory:(\d+)", mem).group(1)),
        })
    c["redis_commands"] = sum(n["commands"] for n in c["redis_nodes"])
    c["redis_scripts"] = sum(n["scripts"] for n in c["redis_nodes"])
    c["redis_used_memory_bytes"] = sum(n["used_memory_bytes"] for n in c["redis_nodes"])
    varz = load(f"{out}/nats-varz.json")
    c["nats_msgs"] = varz["in_msgs"] + varz["out_msgs"]
    c["jetstream_bytes"] = load(f"{out}/nats-jsz.json").get("bytes", 0)
    c["web"] = web("cluster")
    sides["cluster"] = c

if os.path.exists(f"{out}/time-scrapy.txt"):
    sides["scrapy"] = one_process("scrapy", [f"{out}/scrapy.jsonl"])

for name, s in sides.items():
    fetched = (s.get("web") or {}).get("seen", {}).get("pages_fetched") or s["lines"]
    s["pages_per_s"] = round(fetched / s["wall_s"], 1)
    s["cpu_ms_per_page"] = round(s["cpu_s"] * 1000 / max(fetched, 1), 3)
    if s.get("web"):
        s["server_cpu_ms_per_page"] = round(s["web"]["server_cpu_s"] * 1000 / max(fetched, 1), 3)
if "cluster" in sides:
    c = sides["cluster"]
    fetched = c["web"]["seen"]["pages_fetched"] if c.get("web") else c["lines"]
    c["redis_commands_per_page"] = round(c["redis_commands"] / max(fetched, 1), 2)
    c["redis_scripts_per_page"] = round(c["redis_scripts"] / max(fetched, 1), 2)
    c["nats_msgs_per_page"] = round(c["nats_msgs"] / max(fetched, 1), 2)
    c["jetstream_bytes_per_page"] = round(c["jetstream_bytes"] / max(fetched, 1), 1)
    # Once drained, Redis holds the seen-set (every URL admitted or turned away as seen)
    # and counters: bytes per distinct page fetched is an upper bound per seen URL.
    c["redis_bytes_per_page_after_drain"] = round(c["redis_used_memory_bytes"] / max(fetched, 1), 1)
    if "embedded" in sides:
        c["cpu_per_page_over_embedded"] = round(
            c["cpu_ms_per_page"] / sides["embedded"]["cpu_ms_per_page"], 2)
if "scrapy" in sides and "embedded" in sides:
    summary["embedded_pages_per_s_over_scrapy"] = round(
        sides["embedded"]["pages_per_s"] / sides["scrapy"]["pages_per_s"], 2)
    summary["scrapy_peak_rss_over_embedded"] = round(
        sides["scrapy"]["peak_rss_mib"] / sides["embedded"]["peak_rss_mib"], 2)
print(json.dumps(summary, indent=2))
