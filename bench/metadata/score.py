"""Scores page metadata (title, author, publication date) from trawl beside trafilatura
and htmldate, on the same pages in the same run.

    score.py SET_DIR TRAWL.jsonl [--json OUT.json]

SET_DIR holds ground_truth.jsonl (html_file, url and the fields that are known: WCXB's
title / author / publish_date, or MediaCloud's date) and the pages. TRAWL.jsonl is what
crates/extract/examples/meta_eval.rs wrote for the same set.

Each field is right, wrong or missing per page. Where the truth is null (MediaCloud's pages
without a date) the right answer is no answer, and any answer is wrong. Where a set has no
value for a field on a page (WCXB's rows without an author), the page is not scored for
that field; answers given there are counted apart ("unscored answers").
"""
import argparse
import json
import re
import sys
import unicodedata
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


def norm_text(s):
    s = unicodedata.normalize("NFKC", s or "").lower()
    return " ".join(re.findall(r"\w+", s))


def names(s):
    """An author field as a set of names: 'By A, B and C' -> {'a', 'b', 'c'}."""
    s = unicodedata.normalize("NFKC", s or "").lower()
    s = re.sub(r"^\s*(by|von|par|por|door|di)\s+", "", s)
    parts = re.split(r"\s*(?:,|;|&|\band\b|\bund\b|\bet\b|\by\b|\bwith\b|\|)\s*", s)
    out = {" ".join(re.findall(r"\w+", p)) for p in parts}
    return {p for p in out if p}


def day(s):
    if not s:
        return None
    m = re.match(r"\s*(\d{4})-(\d{2})-(\d{2})", str(s))
    return "-".join(m.groups()) if m else None


JUDGES = {
    "title": lambda t, p: norm_text(t) == norm_text(p),
    "author": lambda t, p: names(t) == names(p),
    "date": lambda t, p: day(t) == day(p),
}


def peers(html, url):
    import trafilatura
    from htmldate import find_date

    out = {}
    try:
        d = trafilatura.extract_metadata(html, default_url=url)
        out["trafilatura"] = {
            "title": d.title if d else None,
            "author": d.author if d else None,
            "date": d.date if d else None,
        }
    except Exception:  # a peer's crash is its missing answer
        out["trafilatura"] = {}
    for name, kw in (("htmldate", {}), ("htmldate_original", {"original_date": True})):
        try:
            out[name] = {"date": find_date(html, url=url, **kw)}
        except Exception:
            out[name] = {}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("set_dir")
    ap.add_argument("trawl")
    ap.add_argument("--json")
    a = ap.parse_args()
    root = Path(a.set_dir)
    truth = [json.loads(l) for l in open(root / "ground_truth.jsonl")]
    mine = {r["html_file"]: r for r in map(json.loads, open(a.trawl))}
    fields = {"title": "title", "author": "author", "date": "publish_date"}
    if "date" in truth[0]:
        fields = {"date": "date"}
    score = {}
    for row in truth:
        html = (root / row["html_file"]).read_text(encoding="utf-8", errors="replace")
        answers = peers(html, row.get("url"))
        t = mine.get(row["html_file"], {})
        answers["trawl"] = {"title": t.get("title"), "author": t.get("author"),
                            "date": t.get("published")}
        for who, ans in answers.items():
            for field, key in fields.items():
                if field not in ans and who != "trafilatura":
                    continue
                s = score.setdefault(who, {}).setdefault(
                    field, {"right": 0, "wrong": 0, "missing": 0, "unscored_answers": 0})
                want, got = row.get(key), ans.get(field)
                null_truth = key in row and row[key] is None and fields == {"date": "date"}
                if want is None and not null_truth:
                    s["unscored_answers"] += bool(got)
                elif want is None:
                    s["right" if not got else "wrong"] += 1
                elif not got:
                    s["missing"] += 1
                else:
                    s["right" if JUDGES[field](want, got) else "wrong"] += 1
    print(f"## {root.name}: {len(truth)} pages\n")
    print("| extractor | field | right | wrong | missing | unscored answers |")
    print("| --- | --- | --- | --- | --- | --- |")
    for who in ("trawl", "trafilatura", "htmldate", "htmldate_original"):
        for field, s in score.get(who, {}).items():
            print(f"| {who} | {field} | {s['right']} | {s['wrong']} | {s['missing']} "
                  f"| {s['unscored_answers']} |")
    if a.json:
        json.dump(score, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
