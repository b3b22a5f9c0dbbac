"""Drives `trawl serve`'s formats that need a model or a browser with the real firecrawl-py:
json and summary (llama.cpp's server behind them), /v2/extract, a JS-only page, waitFor,
actions (a click that reveals text, scrape, executeJavascript, screenshot), full-page and
mobile screenshots, and a batch job with actions. Environment: FIRECRAWL_API_URL,
FIRECRAWL_API_KEY, SITE. Prints one line per check, `SHOT <url> <width> <height>` and
`MOBILE <url>` for the Rust side to decode, and exits 1 if any check failed."""

import json
import os
import urllib.request

from checks import check, expect, finish
from firecrawl import Firecrawl
from firecrawl.v2.types import JsonFormat, ScreenshotFormat
from firecrawl.v2.utils.error_handler import FirecrawlError

API = os.environ["FIRECRAWL_API_URL"]
KEY = os.environ.get("FIRECRAWL_API_KEY")
SITE = os.environ["SITE"].rstrip("/")
fc = Firecrawl(api_key=KEY, api_url=API)

PRODUCT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
    "required": ["name", "price"],
}


def fits_product(v):
    expect(isinstance(v, dict), f"an object: {v!r}")
    expect(isinstance(v.get("name"), str), f"name is a string: {v!r}")
    expect(isinstance(v.get("price"), (int, float)) and not isinstance(v.get("price"), bool),
           f"price is a number: {v!r}")


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.headers.get("content-type"), r.read()


def json_format():
    doc = fc.scrape(SITE + "/product", formats=["markdown", JsonFormat(type="json", schema=PRODUCT,
                    prompt="The product's name and its price in dollars.")])
    fits_product(doc.json)
    print(f"JSON {json.dumps(doc.json)}", flush=True)
    expect("Widget Pro" in doc.markdown, doc.markdown)


def json_prompt_only():
    doc = fc.scrape(SITE + "/product", formats=[{"type": "json", "prompt": "Give the product's name as the key name."}])
    expect(isinstance(doc.json, dict), f"an object: {doc.json!r}")


def summary_format():
    doc = fc.scrape(SITE + "/product", formats=["summary"])
    expect(isinstance(doc.summary, str) and len(doc.summary.strip()) > 10, f"summary: {doc.summary!r}")
    print(f"SUMMARY {doc.summary!r}", flush=True)
    expect(doc.markdown is None, "only the formats asked")


def bad_schema():
    try:
        fc.scrape(SITE + "/product", formats=[JsonFormat(type="json", schema={"type": "objekt"})])
    except FirecrawlError as e:
        expect("schema" in str(e), str(e))
        return
    raise AssertionError("an invalid schema was accepted")


def extract():
    r = fc.extract(urls=[SITE + "/product"], prompt="The product's name and price.", schema=PRODUCT,
                   show_sources=True, poll_interval=1, timeout=300)
    expect(r.status == "completed", f"status {r.status}: {r.error}")
    fits_product(r.data)
    print(f"EXTRACT {json.dumps(r.data)}", flush=True)
    expect(r.sources and SITE + "/product" in r.sources.get("name", []), f"sources {r.sources}")


def extract_bad_url():
    try:
        fc.extract(urls=["not a url"], prompt="x")
    except FirecrawlError as e:
        expect("URL" in str(e) or "url" in str(e), str(e))
        return
    raise AssertionError("a bad URL was accepted")


def js_page_by_the_rule():
    doc = fc.scrape(SITE + "/app", formats=["markdown"])
    expect("Rendered by JavaScript" in doc.markdown, f"markdown: {doc.markdown!r}")


def js_page_wait_for():
    doc = fc.scrape(SITE + "/app", formats=["markdown"], wait_for=1000)
    expect("Rendered by JavaScript" in doc.markdown, f"markdown: {doc.markdown!r}")


def click_reveals():
    before = fc.scrape(SITE + "/reveal", formats=["markdown"])
    expect("treasure" not in before.markdown, "the text is not there before the click")
    doc = fc.scrape(SITE + "/reveal", formats=["markdown"], actions=[
        {"type": "click", "selector": "#more"},
        {"type": "wait", "milliseconds": 100},
        {"type": "scrape"},
        {"type": "executeJavascript", "script": "document.querySelectorAll('p').length"},
        {"type": "executeJavascript", "script": "return {title: document.title}"},
        {"type": "screenshot"},
    ])
    expect("treasure is under the old oak tree" in doc.markdown, f"markdown: {doc.markdown!r}")
    a = doc.actions
    expect("oak tree" in a["scrapes"][0]["html"], "the scrape action holds the DOM after the click")
    expect(a["scrapes"][0]["url"] == SITE + "/reveal", a["scrapes"][0]["url"])
    ret = a["javascriptReturns"]
    expect(ret[0]["type"] == "number" and ret[0]["value"] >= 3, f"returns {ret}")
    expect(ret[1] == {"type": "object", "value": {"title": "Reveal"}}, f"returns {ret}")
    ctype, png = fetch(a["screenshots"][0])
    expect(ctype == "image/png" and png[:8] == b"\x89PNG\r\n\x1a\n", f"a PNG: {ctype}")


def failed_action():
    try:
        fc.scrape(SITE + "/reveal", formats=["markdown"], actions=[{"type": "click", "selector": "#nothing"}])
    except FirecrawlError as e:
        expect("no element matches" in str(e), str(e))
        return
    raise AssertionError("a click on nothing succeeded")


def full_page_screenshot():
    doc = fc.scrape(SITE + "/tall", formats=["markdown", ScreenshotFormat(full_page=True)], actions=[
        {"type": "executeJavascript",
         "script": "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"},
    ])
    w, h = doc.actions["javascriptReturns"][0]["value"]
    expect(h > 3000, f"the page is {w}x{h}")
    print(f"SHOT {doc.screenshot} {w} {h}", flush=True)


def mobile_screenshot():
    doc = fc.scrape(SITE + "/tall", formats=["screenshot"], mobile=True)
    print(f"MOBILE {doc.screenshot}", flush=True)


def batch_with_actions():
    job = fc.batch_scrape([SITE + "/reveal", SITE + "/a"], formats=["markdown", "screenshot"],
                          actions=[{"type": "wait", "milliseconds": 50}, {"type": "executeJavascript",
                                   "script": "document.getElementById('more') && document.getElementById('more').click()"}],
                          poll_interval=1, wait_timeout=120)
    expect(job.status == "completed", f"status {job.status}")
    docs = {d.metadata.source_url: d for d in job.data}
    reveal = docs[SITE + "/reveal"]
    expect("treasure" in reveal.markdown, f"markdown: {reveal.markdown!r}")
    ctype, png = fetch(reveal.screenshot)
    expect(png[:8] == b"\x89PNG\r\n\x1a\n", f"a PNG: {ctype}")
    expect(docs[SITE + "/a"].screenshot, "every page has its screenshot")


for name, fn in [
    ("json format with a schema", json_format),
    ("json format with a prompt only", json_prompt_only),
    ("summary format", summary_format),
    ("an invalid schema is a 400", bad_schema),
    ("extract with a schema", extract),
    ("extract refuses a bad URL", extract_bad_url),
    ("a JS-only page rendered by the rule", js_page_by_the_rule),
    ("a JS-only page with waitFor", js_page_wait_for),
    ("a click reveals text; scrape, executeJavascript, screenshot", click_reveals),
    ("a failed action is an error", failed_action),
    ("a full-page screenshot", full_page_screenshot),
    ("a mobile screenshot", mobile_screenshot),
    ("a batch job with actions and screenshots", batch_with_actions),
]:
    check(name, fn)

finish()
