"""Drives `trawl serve` through the rest of Firecrawl's surface with the real firecrawl-py:
search over the server's own indexes, the team figures, maxAge, parse, crawl webhooks,
monitors, and the v1 client. Run in phases (argv[1]) around restarts of the server:

  one    search, team, maxAge, parse, a crawl's webhook, v1, a monitor's first check
  two    the fixture changes; the monitor's second check (its deliveries refused)
  three  after a restart: the monitor and its checks are there, every event delivered

Environment: FIRECRAWL_API_URL, FIRECRAWL_API_KEY, SITE (the fixture: `POST /__set`
replaces /changing, `POST|DELETE /__wiki/NAME` writes or removes a wiki page), HOOKS (the
test's webhook receiver: `/hook`, its attempts at `/log`, and a SearXNG-compatible
`/search`), STATE (a file the phases share)."""

import json
import os
import sys
import time
import urllib.request

from checks import check, expect, finish
from firecrawl import Firecrawl, V1FirecrawlApp

API = os.environ["FIRECRAWL_API_URL"]
KEY = os.environ.get("FIRECRAWL_API_KEY")
SITE = os.environ["SITE"].rstrip("/")
HOOKS = os.environ["HOOKS"].rstrip("/")
STATE = os.environ["STATE"]
fc = Firecrawl(api_key=KEY, api_url=API)
v1 = V1FirecrawlApp(api_key=KEY, api_url=API)


def load():
    try:
        with open(STATE) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def save(**kv):
    s = load()
    s.update(kv)
    with open(STATE, "w") as f:
        json.dump(s, f)


def http(method, url, body=None):
    req = urllib.request.Request(url, data=body.encode() if body is not None else None, method=method)
    return urllib.request.urlopen(req, timeout=10).read()


def attempts():
    return json.loads(http("GET", HOOKS + "/log"))


def wait_for(what, fn, secs=90):
    deadline = time.time() + secs
    while True:
        v = fn()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def wait_check(monitor_id, check_id):
    def done():
        c = fc.get_monitor_check(monitor_id, check_id)
        return c if c.status not in ("queued", "running") else None

    return wait_for(f"check {check_id}", done, secs=180)


# ---- phase one ------------------------------------------------------------------------


def search_local():
    started = fc.start_crawl(SITE + "/", limit=10)
    job = wait_for("the crawl", lambda: (lambda j: j if j.status != "scraping" else None)(fc.get_crawl_status(started.id)))
    expect(job.status == "completed", f"crawl {job.status}")
    # The job's index is what /v2/search reads: the river page comes first.
    res = fc.search("rivers carry water from the mountains", limit=3)
    urls = [r.url for r in res.web]
    expect(urls and urls[0] == SITE + "/a", f"first hit {urls}")
    expect(len(urls) == len(set(urls)), f"one result per page {urls}")
    expect(all(r.title for r in res.web), "titles")
    expect(all(r.description for r in res.web), "descriptions")
    print("SEARCH_JOB " + json.dumps(started.id), flush=True)
    print("SEARCH_URLS " + json.dumps(urls), flush=True)


def search_more():
    res = fc.search("mountains summits plates", limit=1)
    expect(len(res.web) == 1 and res.web[0].url == SITE + "/b", f"{[r.url for r in res.web]}")
    res = fc.search("rivers mountains weather", limit=5, exclude_domains=["127.0.0.1"])
    expect(all("127.0.0.1" not in r.url for r in res.web or []), "excludeDomains")
    # Web results come from the configured backend, fused with the index's.
    res = fc.search("fresh news rivers", limit=10)
    urls = [r.url for r in res.web]
    expect("https://news.example.org/today" in urls, f"web results {urls}")
    expect(SITE + "/a" in urls, f"local results too {urls}")
    # scrapeOptions: each hit is scraped into a document.
    res = fc.search("weather diary hailstorm", limit=1, scrape_options={"formats": ["markdown"]})
    doc = res.web[0]
    expect("hailstorm" in (doc.markdown or ""), f"scraped hit {doc}")
    try:
        fc.search("   ")
        raise AssertionError("an empty query was accepted")
    except (ValueError, Exception) as e:  # the SDK refuses it first
        expect("empty" in str(e).lower() or "query" in str(e).lower(), str(e))


def team():
    c = fc.get_concurrency()
    expect(c.max_concurrency == 32 and c.concurrency >= 0, f"{c}")
    q = fc.get_queue_status()
    expect(q.max_concurrency == 4, f"{q}")
    expect(q.jobs_in_queue == q.active_jobs_in_queue + q.waiting_jobs_in_queue, f"{q}")
    expect(q.most_recent_success is not None, f"a crawl completed: {q}")
    before = fc.get_credit_usage()
    fc.scrape(SITE + "/c", max_age=0)
    after = wait_for(
        "the scrape's credit",
        lambda: (lambda u: u if u.remaining_credits < before.remaining_credits else None)(fc.get_credit_usage()),
    )
    expect(before.remaining_credits - after.remaining_credits == 1, f"{before} {after}")
    hist = fc.v2.get_credit_usage_historical()
    expect(hist.periods and hist.periods[-1].creditsUsed >= 5, f"{hist}")


def max_age():
    http("POST", SITE + "/__set", "Cached version one.")
    first = fc.scrape(SITE + "/changing", max_age=600000)
    expect("Cached version one" in first.markdown, first.markdown)
    expect(first.metadata.cache_state == "miss", f"{first.metadata.cache_state}")
    http("POST", SITE + "/__set", "Cached version two.")
    hit = wait_for(
        "the cached copy",
        lambda: (lambda d: d if d.metadata.cache_state == "hit" else None)(fc.scrape(SITE + "/changing", max_age=600000)),
        secs=10,
    )
    expect("Cached version one" in hit.markdown, f"answered from the cache: {hit.markdown}")
    fresh = fc.scrape(SITE + "/changing", max_age=0)
    expect("Cached version two" in fresh.markdown, fresh.markdown)
    # Change tracking always goes to the site.
    ct = fc.scrape(SITE + "/changing", formats=["markdown", "changeTracking"], max_age=600000)
    expect("Cached version two" in ct.markdown, ct.markdown)


def parse():
    html = b"<html><head><title>Uploaded</title></head><body><main><h1>An uploaded page</h1>" \
        b"<p>This file never was on the web: it came in a multipart upload, to be read.</p></main></body></html>"
    doc = fc.parse(html, filename="upload.html", content_type="text/html")
    expect("An uploaded page" in (doc.markdown or ""), f"{doc.markdown!r}")
    expect(doc.metadata.title == "Uploaded", f"{doc.metadata}")
    md = fc.parse(b"# Notes\n\nPlain notes in Markdown.\n", filename="notes.md", content_type="text/markdown")
    expect("Plain notes" in md.markdown, md.markdown)
    try:
        fc.parse(b"\x00\x01\x02\xff", filename="blob.bin", content_type="application/octet-stream")
        raise AssertionError("an unknown file was accepted")
    except Exception as e:  # noqa: BLE001
        expect("not a file trawl reads" in str(e), str(e))


def crawl_webhook():
    http("POST", HOOKS + "/mode", "first")
    job = fc.start_crawl(SITE + "/blog/post-1", limit=2,
                         webhook={"url": HOOKS + "/hook", "metadata": {"run": "surface"}})

    def events():
        mine = [a for a in attempts() if a["body"].get("id") == job.id and a["status"] == 200]
        types = [a["type"] for a in mine]
        return mine if "crawl.completed" in types else None

    mine = wait_for("the crawl's events", events)
    types = [a["type"] for a in mine]
    # A refused delivery comes again later: the order of arrival is not the events'.
    expect(types.count("crawl.started") == 1 and types.count("crawl.completed") == 1, f"{types}")
    expect(types.count("crawl.page") == 2, f"{types}")
    expect(all(a["signed"] for a in mine), "signed")
    expect(all(a["body"]["metadata"] == {"run": "surface"} for a in mine), "metadata")
    pages = [a["body"]["data"][0]["metadata"]["sourceURL"] for a in mine if a["type"] == "crawl.page"]
    expect(sorted(pages) == [SITE + "/blog/post-1", SITE + "/blog/post-2"], f"{pages}")
    # The refused first delivery came again under its id.
    refused = [a for a in attempts() if a["status"] == 500]
    expect(refused and any(a["id"] == refused[0]["id"] for a in mine), f"{refused}")


def v1_routes():
    doc = v1.scrape_url(SITE + "/a", formats=["markdown", "links"])
    expect("rivers carry water" in doc.markdown, doc.markdown)
    expect(SITE + "/b" in doc.links, f"{doc.links}")
    links = v1.map_url(SITE + "/").links
    expect(SITE + "/a" in links and all(isinstance(l, str) for l in links), f"{links}")
    only = v1.map_url(SITE + "/", sitemap_only=True).links
    expect(SITE + "/only-in-sitemap" in only and SITE + "/b" not in only, f"{only}")
    crawl = v1.crawl_url(SITE + "/", limit=3, poll_interval=1)
    expect(crawl.status == "completed" and len(crawl.data) == 3, f"{crawl.status} {len(crawl.data)}")
    started = v1.async_crawl_url(SITE + "/blog/post-1", limit=2)
    st = wait_for("the v1 crawl", lambda: (lambda s: s if s.status == "completed" else None)(v1.check_crawl_status(started.id)))
    expect(st.completed == 2 and st.total == 2 and len(st.data) == 2, f"{st}")
    errs = v1.check_crawl_errors(started.id)
    expect(errs.errors == [] and isinstance(errs.robotsBlocked, list), f"{errs}")
    slow = v1.async_crawl_url(SITE + "/slow/1", limit=200)
    cancelled = v1.cancel_crawl(slow.id)
    expect(cancelled.get("status") == "cancelled", f"{cancelled}")
    batch = v1.batch_scrape_urls([SITE + "/a", SITE + "/b"], formats=["markdown"], poll_interval=1)
    expect(batch.status == "completed" and len(batch.data) == 2, f"{batch}")
    b = v1.async_batch_scrape_urls([SITE + "/c"], formats=["markdown"])
    expect(b.id and not b.invalidURLs, f"{b}")
    bs = wait_for("the v1 batch", lambda: (lambda s: s if s.status == "completed" else None)(v1.check_batch_scrape_status(b.id)))
    expect(len(bs.data) == 1 and "hailstorm" in bs.data[0].markdown, f"{bs}")
    be = v1.check_batch_scrape_errors(b.id)
    expect(be.errors == [], f"{be}")


def monitor_first():
    mon = fc.create_monitor(
        name="fixture",
        schedule={"text": "hourly"},
        targets=[
            {"type": "scrape", "urls": [SITE + "/changing", SITE + "/a"]},
            {"type": "crawl", "url": SITE + "/wiki/", "crawlOptions": {"limit": 20}},
        ],
        webhook={"url": HOOKS + "/hook", "events": ["monitor.page", "monitor.check.completed"]},
    )
    expect(mon.status == "active" and mon.schedule.cron == "0 * * * *", f"{mon}")
    expect(mon.next_run_at is not None and mon.retention_days == 30, f"{mon}")
    http("POST", SITE + "/__set", "Monitored version one.")
    run = fc.run_monitor(mon.id)
    expect(run.trigger == "manual", f"{run}")
    c = wait_check(mon.id, run.id)
    expect(c.status == "completed", f"{c.status} {c.error}")
    got = {p.url: p.status for p in c.pages}
    want = {SITE + p: "new" for p in ["/changing", "/a", "/wiki/", "/wiki/one", "/wiki/two", "/wiki/three"]}
    expect(got == want, f"{got}")
    expect(c.summary.new == 6 and c.summary.total_pages == 6, f"{c.summary}")
    save(monitor=mon.id, first_check=run.id)


def monitor_schedule():
    mon = fc.create_monitor(name="every two seconds", schedule={"cron": "*/2 * * * * *"},
                            targets=[{"type": "scrape", "urls": [SITE + "/b"]}])
    checks = wait_for("scheduled checks", lambda: [c for c in fc.list_monitor_checks(mon.id) if c.trigger == "scheduled"], secs=30)
    expect(checks[0].monitor_id == mon.id, f"{checks[0]}")
    paused = fc.update_monitor(mon.id, status="paused")
    expect(paused.status == "paused" and paused.next_run_at is None, f"{paused}")
    n = len(fc.list_monitor_checks(mon.id))
    time.sleep(4)
    expect(len(fc.list_monitor_checks(mon.id)) <= n + 1, "a paused monitor runs no more")
    expect(fc.delete_monitor(mon.id) is True, "deleted")
    try:
        fc.get_monitor(mon.id)
        raise AssertionError("a deleted monitor was found")
    except Exception as e:  # noqa: BLE001
        expect("not found" in str(e).lower(), str(e))
    expect(all(m.id != mon.id for m in fc.list_monitors()), "listed after delete")


# ---- phase two ------------------------------------------------------------------------


def monitor_second():
    st = load()
    http("POST", SITE + "/__set", "Monitored version two, now changed.")
    http("POST", SITE + "/__wiki/two", "The second wiki page now tells of bridges instead.")
    http("DELETE", SITE + "/__wiki/three")
    http("POST", SITE + "/__wiki/four", "A fourth wiki page appears, about harbours and tides.")
    run = fc.run_monitor(st["monitor"])
    c = wait_check(st["monitor"], run.id)
    expect(c.status == "completed", f"{c.status} {c.error}")
    got = {p.url: p.status for p in c.pages}
    want = {
        SITE + "/changing": "changed",
        SITE + "/a": "same",
        # Only its list of links changed, which extraction leaves out as navigation.
        SITE + "/wiki/": "same",
        SITE + "/wiki/one": "same",
        SITE + "/wiki/two": "changed",
        SITE + "/wiki/three": "removed",
        SITE + "/wiki/four": "new",
    }
    expect(got == want, f"{got}")
    changed = {p.url: p for p in c.pages}
    diff = changed[SITE + "/changing"].diff.text
    expect("+Monitored version two" in diff and "-Monitored version one" in diff, diff)
    expect("bridges" in changed[SITE + "/wiki/two"].diff.text, "the crawl's diff")
    only = fc.get_monitor_check(st["monitor"], run.id, status="changed")
    expect(sorted(p.url for p in only.pages) == sorted(u for u, s in want.items() if s == "changed"), f"{only.pages}")
    save(second_check=run.id)


# ---- phase three ------------------------------------------------------------------------


def after_restart():
    st = load()
    mon = fc.get_monitor(st["monitor"])
    expect(mon.status == "active" and mon.last_check_summary.changed == 2, f"{mon}")
    ids = [c.id for c in fc.list_monitor_checks(st["monitor"])]
    expect(st["first_check"] in ids and st["second_check"] in ids, f"{ids}")
    second = fc.get_monitor_check(st["monitor"], st["second_check"], limit=2)
    expect(len(second.pages) == 7, f"pages followed through next: {len(second.pages)}")

    def all_delivered():
        ok = [a for a in attempts() if a["status"] == 200 and a["body"].get("id") == st["monitor"]]
        pages = {a["id"] for a in ok if a["type"] == "monitor.page"}
        done = {a["id"] for a in ok if a["type"] == "monitor.check.completed"}
        return (pages, done) if len(pages) == 13 and len(done) == 2 else None

    pages, done = wait_for("every monitor event", all_delivered, secs=120)
    last = [a for a in attempts() if a["type"] == "monitor.check.completed" and a["status"] == 200][-1]["body"]
    expect(last["checkId"] == st["second_check"] and last["summary"]["removed"] == 1, f"{last}")


PHASES = {
    "one": [
        ("search over the crawled pages", search_local),
        ("search filters, web backend, scrapeOptions", search_more),
        ("team figures", team),
        ("maxAge answers from the cache", max_age),
        ("parse an uploaded file", parse),
        ("a crawl's webhook events", crawl_webhook),
        ("the v1 client", v1_routes),
        ("a monitor's first check", monitor_first),
        ("a monitor's schedule", monitor_schedule),
    ],
    "two": [("a monitor's second check", monitor_second)],
    "three": [("after a restart", after_restart)],
}

if __name__ == "__main__":
    for name, fn in PHASES[sys.argv[1]]:
        check(name, fn)
    finish()
