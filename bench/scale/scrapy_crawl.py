"""The peer: Scrapy crawling the same synthetic web with the same politeness as trawl.

    python scrapy_crawl.py SEEDS_FILE OUT_JSONL [CONCURRENCY]

One request in flight per host (CONCURRENT_REQUESTS_PER_DOMAIN = 1, as trawl's per-host slot:
each host of the web is its own address, so a domain is a host),
no delay (as `--delay 0`), robots.txt obeyed, redirects followed, every link of a page to
one of the seed hosts followed once (Scrapy's fingerprint filter). Scrapy has no spider
trap defence: the synthetic web's query trap (`/search`) is denied by rule here, where
trawl stops it by its query-variant budget. Each page's item is its URL, status, title and
main text (XPath), a lighter extraction than trawl's Markdown.
"""

import sys
from urllib.parse import urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor


class WebSpider(scrapy.Spider):
    name = "web"
    handle_httpstatus_list = [404, 500]

    def __init__(self, seeds, **kw):
        super().__init__(**kw)
        self.start_urls = seeds
        hosts = {urlsplit(s).netloc for s in seeds}
        self.links = LinkExtractor(deny=[r"/search"], unique=True)
        self.hosts = hosts

    def parse(self, response):
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.xpath("//title/text()").get(),
            "text": " ".join(response.xpath("//main//text()").getall()),
        }
        if response.status != 200:
            return
        for link in self.links.extract_links(response):
            if urlsplit(link.url).netloc in self.hosts:
                yield response.follow(link.url, callback=self.parse)


def main():
    seeds = [l.strip() for l in open(sys.argv[1]) if l.strip()]
    out = sys.argv[2]
    concurrency = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    process = CrawlerProcess(
        settings={
            "ROBOTSTXT_OBEY": True,
            "CONCURRENT_REQUESTS": concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
            "DOWNLOAD_DELAY": 0,
            "AUTOTHROTTLE_ENABLED": False,
            "RETRY_ENABLED": False,
            "COOKIES_ENABLED": False,
            "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "WARNING",
            "REACTOR_THREADPOOL_MAXSIZE": 4,
            "FEEDS": {out: {"format": "jsonlines", "overwrite": True}},
            "USER_AGENT": "scrapy-bench",
        }
    )
    process.crawl(WebSpider, seeds=seeds)
    process.start()


if __name__ == "__main__":
    main()
