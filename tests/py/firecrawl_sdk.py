"""Drives `trawl serve` with the real firecrawl-py and langchain-firecrawl, as their users
call them. Environment: FIRECRAWL_API_URL (trawl serve), FIRECRAWL_API_KEY, SITE (the
fixture site's origin; `POST SITE/__set` with a body replaces /changing). Prints one
line per check and exits 1 if any failed."""

import os
import urllib.request
import uuid

from checks import check, expect, finish
from firecrawl import Firecrawl
from firecrawl.v2.types import PaginationConfig
from firecrawl.v2.utils.error_handler import BadRequestError, FirecrawlError

API = os.environ["FIRECRAWL_API_URL"]
KEY = os.environ.get("FIRECRAWL_API_KEY")
SITE = os.environ["SITE"].rstrip("/")
fc = Firecrawl(api_key=KEY, api_url=API)


def set_changing(text):
    req = urllib.request.Request(SITE + "/__set", data=text.encode(), method="POST")
    urllib.request.urlopen(req, timeout=10).read()


def scrape_default():
    doc = fc.scrape(SITE + "/")
    expect("Welcome" in (doc.markdown or ""), f"markdown: {doc.markdown!r}")
    expect("Footer text" not in doc.markdown, "main content only by default")
    m = doc.metadata
    expect(m.source_url == SITE + "/", f"source_url {m.source_url}")
    expect(m.status_code == 200, f"status {m.status_code}")
    expect(m.title == "Home", f"title {m.title!r}")
    expect(m.description == "About Home", f"description {m.description!r}")


def scrape_formats():
    doc = fc.scrape(SITE + "/", formats=["markdown", "html", "rawHtml", "links"], only_main_content=False)
    expect("Footer text" in doc.markdown, "the whole page when only_main_content=False")
    expect("<h1>" in (doc.html or ""), f"html: {doc.html!r}")
    expect("<script" not in doc.html, "cleaned html has no scripts")
    expect("<script" in (doc.raw_html or ""), "rawHtml is the page as served")
    expect(SITE + "/a" in (doc.links or []), f"links: {doc.links}")


def scrape_tags():
    doc = fc.scrape(SITE + "/a", formats=["markdown"], include_tags=["#lead"], only_main_content=False)
    expect("Lead paragraph of A" in doc.markdown, doc.markdown)
    expect("Second paragraph of A" not in doc.markdown, doc.markdown)
    doc = fc.scrape(SITE + "/a", formats=["markdown"], exclude_tags=["#lead"], only_main_content=False)
    expect("Lead paragraph of A" not in doc.markdown and "Second paragraph of A" in doc.markdown, doc.markdown)


def scrape_missing():
    doc = fc.scrape(SITE + "/missing")
    expect(doc.metadata.status_code == 404, f"status {doc.metadata.status_code}")


def scrape_bad_url():
    try:
        fc.scrape("notaurl")
    except BadRequestError as e:
        expect(getattr(e, "status_code", 400) == 400, f"status {e}")
        return
    raise AssertionError("no BadRequestError")


def scrape_robots_blocked():
    try:
        fc.scrape(SITE + "/private/secret")
    except FirecrawlError as e:
        expect(getattr(e, "status_code", None) == 403, f"status {getattr(e, 'status_code', None)}")
        return
    raise AssertionError("a page robots.txt disallows was scraped")


def crawl_limit():
    job = fc.crawl(SITE + "/", limit=3, poll_interval=1, timeout=120)
    expect(job.status == "completed", f"status {job.status}")
    urls = [d.metadata.source_url for d in job.data]
    expect(len(urls) == 3 and len(set(urls)) == 3, f"urls {urls}")
    expect(all(u.startswith(SITE) for u in urls), f"urls {urls}")
    expect(all(d.markdown for d in job.data), "every doc has markdown")
    expect(job.total == job.completed == 3, f"total {job.total} completed {job.completed}")


def crawl_pages():
    started = fc.start_crawl(SITE + "/", limit=6)
    expect(started.id and started.url, "id and url")
    import time
    deadline = time.time() + 120
    while True:
        st = fc.get_crawl_status(started.id)
        if st.status != "scraping" or time.time() > deadline:
            break
        time.sleep(1)
    expect(st.status == "completed", f"status {st.status}")
    expect(len(st.data) == st.completed == st.total, f"{len(st.data)} docs, {st.completed}/{st.total}")
    expect(st.completed >= 6, f"completed {st.completed}")
    # One page at a time: `next` leads to the rest.
    page = fc.get_crawl_status(started.id, pagination_config=PaginationConfig(auto_paginate=False))
    expect(len(page.data) <= 100, "a page holds at most 100")
    errors = fc.get_crawl_errors(started.id)
    expect(isinstance(errors.errors, list), "errors parse")
    expect(fc.cancel_crawl(started.id) is False, "a finished crawl cannot be cancelled")
    try:
        fc.get_crawl_status(str(uuid.uuid4()))
    except FirecrawlError as e:
        expect(getattr(e, "status_code", None) == 404, f"unknown id: {e}")
    else:
        raise AssertionError("an unknown id answered")


def crawl_include_paths():
    job = fc.crawl(SITE + "/", include_paths=["^/blog/"], limit=10, poll_interval=1, timeout=120, sitemap="skip")
    urls = sorted(d.metadata.source_url for d in job.data)
    expect(urls == [SITE + "/", SITE + "/blog/post-1", SITE + "/blog/post-2"], f"urls {urls}")


def crawl_cancel():
    started = fc.start_crawl(SITE + "/slow/0", limit=50, sitemap="skip")
    expect(fc.cancel_crawl(started.id) is True, "cancelled")
    st = fc.get_crawl_status(started.id)
    expect(st.status == "cancelled", f"status {st.status}")


def map_site():
    links = fc.map(SITE + "/").links
    urls = [l.url for l in links]
    expect(len(urls) == len(set(urls)), f"duplicates in {urls}")
    for path in ["/", "/a", "/b", "/c", "/blog/post-2", "/only-in-sitemap"]:
        expect(SITE + path in urls, f"{path} not in {urls}")
    titled = {l.url: l.title for l in links}
    expect(titled.get(SITE + "/a") == "Page A", f"titles {titled}")
    expect(len(fc.map(SITE + "/", limit=2).links) == 2, "limit 2")
    ranked = [l.url for l in fc.map(SITE + "/", search="blog").links]
    expect(ranked[0].startswith(SITE + "/blog/") and ranked[1].startswith(SITE + "/blog/"), f"ranked {ranked}")
    only = sorted(l.url for l in fc.map(SITE + "/", sitemap="only").links)
    expect(only == sorted(SITE + p for p in ["/", "/a", "/only-in-sitemap", "/blog/post-1"]), f"only {only}")


def batch():
    urls = [SITE + p for p in ["/a", "/b", "/c"]]
    job = fc.batch_scrape(urls, formats=["markdown", "links"], poll_interval=1, wait_timeout=120)
    expect(job.status == "completed", f"status {job.status}")
    got = sorted(d.metadata.source_url for d in job.data)
    expect(got == urls, f"got {got}")
    expect(all(SITE + "/" in (d.links or []) for d in job.data), "links of each page")


def change_tracking():
    tag = str(uuid.uuid4())
    fmt = [{"type": "markdown"}, {"type": "changeTracking", "modes": ["git-diff"], "tag": tag}]
    set_changing("Version one of the page.")
    first = fc.scrape(SITE + "/changing", formats=fmt)
    ct = first.change_tracking
    expect(ct["changeStatus"] == "new" and ct["previousScrapeAt"] is None, f"first {ct}")
    expect(ct["visibility"] == "visible", f"first {ct}")
    second = fc.scrape(SITE + "/changing", formats=fmt).change_tracking
    expect(second["changeStatus"] == "same", f"second {second}")
    set_changing("Version two, now different.")
    third = fc.scrape(SITE + "/changing", formats=fmt).change_tracking
    expect(third["changeStatus"] == "changed", f"third {third}")
    expect("+Version two, now different." in third["diff"]["text"], third["diff"]["text"])


def langchain():
    from langchain_firecrawl import FirecrawlLoader

    docs = FirecrawlLoader(url=SITE + "/", api_key=KEY, api_url=API, mode="scrape").load()
    expect(len(docs) == 1 and "Welcome" in docs[0].page_content, f"scrape {docs}")
    expect(docs[0].metadata["source_url"] == SITE + "/", f"metadata {docs[0].metadata}")
    docs = FirecrawlLoader(url=SITE + "/", api_key=KEY, api_url=API, mode="crawl",
                           params={"limit": 3, "poll_interval": 1, "timeout": 120}).load()
    expect(len(docs) == 3 and all(d.page_content for d in docs), f"crawl {len(docs)} docs")
    expect(all(d.metadata["source_url"].startswith(SITE) for d in docs), "crawl metadata")
    docs = FirecrawlLoader(url=SITE + "/", api_key=KEY, api_url=API, mode="map", params={"limit": 10}).load()
    expect(len(docs) >= 5, f"map {len(docs)} docs")
    expect(any(d.metadata.get("title") == "Page A" for d in docs), "map titles")


def wrong_key():
    if not KEY:
        return
    try:
        Firecrawl(api_key="wrong-" + KEY, api_url=API).scrape(SITE + "/")
    except FirecrawlError as e:
        expect(getattr(e, "status_code", None) == 401, f"status {e}")
        return
    raise AssertionError("a wrong key was accepted")


for name, fn in [
    ("scrape: default", scrape_default),
    ("scrape: formats", scrape_formats),
    ("scrape: include/exclude tags", scrape_tags),
    ("scrape: 404", scrape_missing),
    ("scrape: bad URL", scrape_bad_url),
    ("scrape: robots.txt", scrape_robots_blocked),
    ("crawl: limit", crawl_limit),
    ("crawl: pages, errors, cancel, unknown", crawl_pages),
    ("crawl: include paths", crawl_include_paths),
    ("crawl: cancel", crawl_cancel),
    ("map", map_site),
    ("batch scrape", batch),
    ("change tracking", change_tracking),
    ("langchain loader", langchain),
    ("wrong key", wrong_key),
]:
    check(name, fn)

finish()
