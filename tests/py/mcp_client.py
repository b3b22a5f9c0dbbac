"""Drives `trawl mcp` with the official MCP client (PyPI `mcp`) through every tool.

  mcp_client.py http URL        streamable HTTP at URL; API (the same server's Firecrawl
                                API) makes the monitor whose changes the `changes` tool reads
  mcp_client.py stdio TRAWL     `TRAWL mcp --data $DATA --allow-private` as the client's
                                child; WATCH is a `trawl watch` directory for `changes`

SITE is the fixture site (`POST /__set` replaces /changing). Prints a line per check and
exits 1 if any failed."""

import asyncio
import json
import os
import sys
import time
import urllib.request

from checks import check, expect, finish
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

SITE = os.environ["SITE"].rstrip("/")
TOOLS = {"scrape", "map", "crawl", "crawl_status", "batch_scrape", "batch_status", "search",
         "changes", "extract", "extract_status"}


async def call(s, name, args):
    r = await s.call_tool(name, args)
    if r.is_error:
        raise AssertionError(f"{name}: {r.content[0].text}")
    return r.structured_content


async def wait_job(s, tool, job_id):
    deadline = time.time() + 120
    while True:
        st = await call(s, tool, {"id": job_id, "limit": 2})
        if st["status"] != "scraping":
            return st
        if time.time() > deadline:
            raise AssertionError(f"{tool} {job_id} still scraping")
        await asyncio.sleep(0.5)


async def checks(s, results):
    async def run(name, coro):
        try:
            await coro
            results.append((name, None))
        except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
            results.append((name, e))

    async def tools():
        listed = {t.name for t in (await s.list_tools()).tools}
        expect(listed == TOOLS, f"{listed}")

    async def scrape():
        first = await call(s, "scrape", {"url": SITE + "/a", "maxChars": 40})
        expect(len(first["markdown"]) == 40 and first["nextOffset"] == 40, f"{first}")
        rest = await call(s, "scrape", {"url": SITE + "/a", "offset": first["nextOffset"], "maxChars": 100000})
        whole = first["markdown"] + rest["markdown"]
        expect("rivers carry water" in whole and rest["nextOffset"] is None, whole)
        expect(first["metadata"]["title"] == "Page A", f"{first['metadata']}")
        bad = await s.call_tool("scrape", {"url": "not a url"})
        expect(bad.is_error and "not an absolute" in bad.content[0].text, f"{bad}")

    async def map_():
        m = await call(s, "map", {"url": SITE + "/"})
        expect(SITE + "/a" in m["links"] and m["total"] >= 5, f"{m}")

    async def crawl_and_search():
        started = await call(s, "crawl", {"url": SITE + "/", "limit": 6})
        st = await wait_job(s, "crawl_status", started["id"])
        expect(st["status"] == "completed" and len(st["documents"]) == 2, f"{st}")
        expect(st["nextSkip"] == 2 and os.path.exists(st["pagesFile"]), f"{st}")
        more = await call(s, "crawl_status", {"id": started["id"], "skip": 2, "limit": 100})
        expect(len(more["documents"]) == st["completed"] - 2 and more["nextSkip"] is None, f"{more}")
        found = await call(s, "search", {"query": "rivers carry water from the mountains", "limit": 3})
        expect(found["results"][0]["url"] == SITE + "/a", f"{found}")

    async def batch():
        b = await call(s, "batch_scrape", {"urls": [SITE + "/b", SITE + "/c"]})
        st = await wait_job(s, "batch_status", b["id"])
        expect(st["status"] == "completed" and st["completed"] == 2, f"{st}")
        urls = sorted(d["url"] for d in st["documents"])
        expect(urls == [SITE + "/b", SITE + "/c"], f"{urls}")

    async def extract():
        # No model is configured here: the tool says so, as the API does.
        r = await s.call_tool("extract", {"urls": [SITE + "/product"], "prompt": "the price"})
        expect(r.is_error and "LLM_NOT_CONFIGURED" in r.content[0].text, f"{r}")
        st = await s.call_tool("extract_status", {"id": "not-an-id"})
        expect(st.is_error, f"{st}")

    for name, coro in [("tools are listed", tools()), ("scrape, in parts", scrape()), ("map", map_()),
                       ("crawl, its status, search", crawl_and_search()), ("batch scrape", batch()),
                       ("extract without a model", extract())]:
        await run(name, coro)


def api(method, path, body=None):
    base = os.environ["API"]
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=30).read())


def set_changing(text):
    urllib.request.urlopen(urllib.request.Request(SITE + "/__set", data=text.encode(), method="POST"), timeout=10).read()


def monitor_check(mid):
    run = api("POST", f"/v2/monitor/{mid}/run", {})["data"]
    deadline = time.time() + 120
    while api("GET", f"/v2/monitor/{mid}/checks/{run['id']}")["data"]["status"] == "running":
        if time.time() > deadline:
            raise AssertionError("the monitor's check did not end")
        time.sleep(0.3)
    return run["id"]


async def monitor_changes(s, results):
    try:
        set_changing("Monitored through MCP, version one.")
        mid = api("POST", "/v2/monitor", {"name": "mcp", "schedule": {"text": "daily"},
                                          "targets": [{"type": "scrape", "urls": [SITE + "/changing", SITE + "/b"]}]})["data"]["id"]
        monitor_check(mid)
        set_changing("Monitored through MCP, version two.")
        second = monitor_check(mid)
        ch = await call(s, "changes", {"monitorId": mid})
        expect(ch["checkId"] == second, f"{ch}")
        pages = {p["url"]: p for p in ch["pages"]}
        expect(list(pages) == [SITE + "/changing"], f"only the changed page: {list(pages)}")
        expect("+Monitored through MCP, version two." in pages[SITE + "/changing"]["diff"]["text"], f"{pages}")
        results.append(("changes of a monitor", None))
    except Exception as e:  # noqa: BLE001
        results.append(("changes of a monitor", e))


async def watch_changes(s, results):
    try:
        ch = await call(s, "changes", {"crawlDir": os.environ["WATCH"], "limit": 10})
        changed = [e["url"] for e in ch["events"] if e["type"] == "page.changed"]
        expect(changed == [SITE + "/wiki/one"], f"{ch}")
        diff = next(e for e in ch["events"] if e["type"] == "page.changed")["diff"]["text"]
        expect("lightships" in diff, diff)
        results.append(("changes of a re-crawl", None))
    except Exception as e:  # noqa: BLE001
        results.append(("changes of a re-crawl", e))


def report(results):
    for name, err in results:
        def outcome(err=err):
            if err is not None:
                raise err
        check(name, outcome)


async def main():
    mode, target = sys.argv[1], sys.argv[2]
    results = []
    if mode == "http":
        async with streamable_http_client(target) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                expect(init.server_info.name == "trawl", f"{init.server_info}")
                await checks(s, results)
                await monitor_changes(s, results)
    else:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "")}
        for k in ("TRAWL_MODEL_DIR", "XDG_CACHE_HOME", "TRAWL_LOG"):
            if os.environ.get(k):
                env[k] = os.environ[k]
        params = StdioServerParameters(command=target, env=env,
                                       args=["mcp", "--data", os.environ["DATA"], "--allow-private", "--delay", "0"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                expect(init.server_info.name == "trawl", f"{init.server_info}")
                await checks(s, results)
                await watch_changes(s, results)
    report(results)


if __name__ == "__main__":
    asyncio.run(main())
    finish()
