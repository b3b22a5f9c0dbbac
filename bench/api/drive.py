"""One crawl through trawl serve's v2 API, timed: POST /v2/crawl, poll until completed,
then read every result page through `next`. Prints a JSON object."""
import json
import sys
import time
import urllib.request

api, site, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])


def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


t0 = time.time()
job = call("POST", api + "/v2/crawl", {"url": site, "limit": limit, "sitemap": "skip"})
while True:
    st = call("GET", job["url"] + "?limit=1")
    if st["status"] != "scraping":
        break
    time.sleep(0.5)
t_done = time.time()
docs, url, pages = 0, job["url"], 0
while url:
    page = call("GET", url)
    docs += len(page["data"])
    pages += 1
    url = page.get("next")
t_read = time.time()
print(json.dumps({
    "status": st["status"], "completed": st["completed"], "docs_read": docs, "result_pages": pages,
    "crawl_s": round(t_done - t0, 3), "read_s": round(t_read - t_done, 3), "total_s": round(t_read - t0, 3),
}))
