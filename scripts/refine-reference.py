#!/usr/bin/env python3
"""ReScraper's page rendering (cxcscmu/ReScraper lib/render.py: webkit_txt) over the shared
extraction benchmark pages and the HTML responses of the Common Crawl sample, written as JSON
Lines {"id", "html", "text"}: the reference trawl-refine's `render_lines` is compared with
(tests/refine.rs). The page string each side renders is the one written here.

usage: refine-reference.py OUT.jsonl [--jobs N]
"""
import glob, gzip, json, os, re, sys, time
from multiprocessing import Pool

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")


def webkit_txt(html):
    # As render.py does it, minus its dripper patch (it touches code the txt path never runs).
    from bs4 import BeautifulSoup
    from webpage_converter.convert import convert_html_to_structured_data
    raw = convert_html_to_structured_data(html, output_format="txt")
    t = BeautifulSoup(raw, "html.parser").get_text(separator=" ")
    t = re.sub(r"\|+", " ", t); t = re.sub(r"^[\s\-\|]+$", "", t, flags=re.M); t = re.sub(r"\\([\$\*\[\]_`#])", r"\1", t)
    return "\n".join(l for l in (re.sub(r"\s+", " ", x).strip() for x in t.split("\n")) if l)


def pages():
    bench = os.path.join(SHARED, "bench", "extraction")
    for path in sorted(glob.glob(os.path.join(bench, "*", "html", "*.html"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            yield os.path.relpath(path, bench), f.read()
    from warcio.archiveiterator import ArchiveIterator
    for path in sorted(glob.glob(os.path.join(SHARED, "data", "warc", "commoncrawl", "*.warc.gz"))):
        with open(path, "rb") as f:
            for i, rec in enumerate(ArchiveIterator(f)):
                if rec.rec_type != "response" or rec.http_headers is None:
                    continue
                ctype = rec.http_headers.get_header("Content-Type") or ""
                if "html" not in ctype.lower():
                    continue
                body = rec.content_stream().read()
                yield f"{os.path.basename(path)}#{i}", body.decode("utf-8", errors="replace")


def one(item):
    pid, html = item
    t0 = time.process_time()
    try:
        text, error = webkit_txt(html), None
    except Exception as e:  # the converter raises on some pages; ReScraper drops those
        text, error = None, repr(e)[:300]
    return {"id": pid, "html": html, "text": text, "error": error, "cpu_s": time.process_time() - t0}


def main():
    out = sys.argv[1]
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 2
    # A temporary file of this process's own: a second run never writes into it.
    tmp = f"{out}.{os.getpid()}.part"
    rendered = 0
    with open(tmp, "w") as f, Pool(jobs) as pool:
        for row in pool.imap(one, pages(), chunksize=4):
            rendered += row["text"] is not None
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
    if rendered == 0:
        # Every page failed (the package did not import?): nothing worth keeping.
        os.remove(tmp)
        sys.exit("refine-reference: the converter rendered no page")
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
