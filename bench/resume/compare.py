"""Compares a crawl killed and resumed with an uninterrupted one (bench/resume/run.sh)."""
import collections, glob, json, sys

import lancedb
from warcio.archiveiterator import ArchiveIterator

ref, killed = sys.argv[1], sys.argv[2]
ref_requests, killed_requests = int(sys.argv[3]), int(sys.argv[4])
ref_s, killed_s = int(sys.argv[5]) / 1000, int(sys.argv[6]) / 1000
access_log, runs_file = sys.argv[7], sys.argv[8]


def pages(d):
    with open(f"{d}/pages.jsonl") as f:
        return [json.loads(line) for line in f]


def warc(d):
    counts = collections.Counter()
    for path in sorted(glob.glob(f"{d}/warc/*.warc.gz")):
        with open(path, "rb") as s:
            for r in ArchiveIterator(s):
                counts[r.rec_type] += 1
    return counts


def index(d):
    db = lancedb.connect(f"{d}/index")
    ids, urls = [], set()
    for name in ("chunks", "chunk_aliases"):
        t = db.open_table(name).to_arrow()
        ids += t.column("id").to_pylist()
        urls |= set(t.column("canonical_url").to_pylist())
    return ids, urls


def indexable(ps):
    """The canonical URLs trawl indexes a crawl's pages under (trawl_index::indexer::wants)."""
    out = set()
    for p in ps:
        if 200 <= p["status"] < 300 and not p.get("error") and not p.get("duplicate_of") \
                and p.get("text", "").strip():
            c = (p.get("meta") or {}).get("canonical") or ""
            out.add(c if c.startswith(("http://", "https://")) else p["final_url"])
    return out


def requests_per_path():
    """The resumed runs' requests: per path in all, and per (run, path)."""
    windows = [tuple(map(int, line.split())) for line in open(runs_file) if line.strip()]
    per_path, per_run = collections.Counter(), collections.Counter()
    with open(access_log) as f:
        for line in f:
            e = json.loads(line)
            run = next((i for i, (a, b) in enumerate(windows) if a <= e["start_us"] <= b), None)
            if run is not None:
                per_path[e["target"]] += 1
                per_run[(run, e["target"])] += 1
    return per_path, per_run


rp, kp = pages(ref), pages(killed)
r_urls = collections.Counter(p["url"] for p in rp)
k_urls = collections.Counter(p["url"] for p in kp)
twice = [u for u, n in k_urls.items() if n > 1]
r_ids, r_index = index(ref)
k_ids, k_index = index(killed)
rw, kw = warc(ref), warc(killed)
report = json.load(open(f"{killed}/report.json"))
per_path, per_run = requests_per_path()
most_path, most = per_path.most_common(1)[0] if per_path else ("", 0)
out = {
    "reference_pages": len(rp),
    "resumed_pages": len(kp),
    "pages_written_twice": len(twice),
    "pages_missing": len(set(r_urls) - set(k_urls)),
    "pages_extra": len(set(k_urls) - set(r_urls)),
    "report_pages": report["pages"],
    "index_chunk_ids": len(k_ids),
    "index_duplicate_ids": len(k_ids) - len(set(k_ids)),
    "index_pages_reference": len(r_index),
    "index_pages_resumed": len(k_index),
    # Which copy of a near-duplicate is kept depends on the order pages arrive in, in any
    # two crawls: each index is checked against its own crawl's kept pages.
    "index_vs_own_pages_reference": len(r_index ^ indexable(rp)),
    "index_vs_own_pages_resumed": len(k_index ^ indexable(kp)),
    "warc_responses_reference": rw["response"],
    "warc_responses_resumed": kw["response"],
    "warc_files_resumed": len(glob.glob(f"{killed}/warc/*.warc.gz")),
    "requests_reference": ref_requests,
    "requests_resumed_all_runs": killed_requests,
    "requests_again": killed_requests - ref_requests,
    # A page in flight at a kill is asked for again once, by the next run; no run asks for
    # one page twice.
    "paths_requested_again": sum(1 for n in per_path.values() if n > 1),
    "most_requests_one_path": [most_path, most],
    "paths_twice_in_one_run": sum(1 for n in per_run.values() if n > 1),
    "seconds_reference": round(ref_s, 1),
    "seconds_resumed_all_runs": round(killed_s, 1),
}
print(json.dumps(out, indent=1))
ok = (not twice and out["pages_missing"] == 0 and out["pages_extra"] == 0
      and out["index_duplicate_ids"] == 0 and out["paths_twice_in_one_run"] == 0
      and out["index_vs_own_pages_resumed"] <= out["index_vs_own_pages_reference"]
      and report["pages"] == len(kp))
sys.exit(0 if ok else 1)
