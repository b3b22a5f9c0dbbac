//! The scenario routes.

use std::io::Write;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use bytes::Bytes;
use tower_http::services::ServeDir;

use crate::{Robots, Shared};

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn page(title: &str, paragraphs: &str, links: &[String]) -> Response {
    let links: String = links
        .iter()
        .map(|l| format!("<li><a href=\"{l}\">{l}</a></li>"))
        .collect();
    html(format!(
        "<!doctype html><html><head><title>{title}</title></head><body>\
         <nav><a href=\"/\">Home</a></nav><main><h1>{title}</h1>{paragraphs}<ul>{links}</ul></main>\
         <footer>Test site footer</footer></body></html>"
    ))
}

pub(crate) fn router(s: Shared) -> Router {
    let mut r = Router::new()
        .route("/page/{n}", get(chain_page))
        .route("/blog/{n}", get(blog_page))
        .route("/private/{*rest}", get(private))
        .route("/redirect/chain/{n}", get(redirect_chain))
        .route("/redirect/long/{n}", get(redirect_long))
        .route(
            "/redirect/loop/a",
            get(|| async { Redirect::permanent("/redirect/loop/b") }),
        )
        .route(
            "/redirect/loop/b",
            get(|| async { Redirect::temporary("/redirect/loop/a") }),
        )
        .route("/redirect/offsite", get(redirect_offsite))
        .route(
            "/redirect/disallowed",
            get(|| async { Redirect::to("/private/target") }),
        )
        .route("/retry/{name}", get(retry))
        .route("/unavailable/{name}", get(unavailable))
        .route("/slow", get(slow))
        .route("/huge", get(huge))
        .route("/bomb", get(bomb))
        .route("/farm/{n}", get(farm))
        .route("/gzip-page", get(gzip_page))
        .route("/charset/latin1", get(latin1))
        .route("/charset/meta", get(meta_charset))
        .route("/charset/sjis", get(sjis))
        .route("/binary.bin", get(binary))
        .route("/sitemap.xml", get(sitemap_index))
        .route("/sitemap-pages.xml.gz", get(sitemap_gz))
        .route("/sitemap.txt", get(sitemap_txt))
        .route("/sm/{n}", get(sm_page))
        .route("/feed.rss", get(rss))
        .route("/feed.atom", get(atom))
        .route("/feeds/{n}", get(feed_item))
        .route("/trap/cal/{year}", get(calendar))
        .route("/trap/deep/", get(deep))
        .route("/trap/deep/{*rest}", get(deep))
        .route("/dup/{name}", get(dup))
        .route("/changing/{name}", get(crate::changing::changing))
        .route("/scenarios", get(scenarios_index))
        .merge(crate::js::router())
        .merge(crate::policy::router())
        .merge(crate::docs::router());
    if !matches!(s.cfg.robots, Robots::FromDir) {
        r = r.route("/robots.txt", get(robots));
    }
    if s.cfg.dir.is_none() {
        r = r.route("/", get(home));
    }
    let r = match &s.cfg.dir {
        Some(dir) => r.fallback_service(ServeDir::new(dir)),
        None => r,
    };
    r.with_state(s)
}

async fn robots(State(s): State<Shared>) -> Response {
    let served = s
        .robots_served
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    match &s.cfg.robots {
        Robots::FailFirst { status, times, .. } if served < *times => StatusCode::from_u16(*status)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
        Robots::FailFirst { then, .. } => (
            [(header::CONTENT_TYPE, "text/plain")],
            then.replace("{origin}", &s.origin),
        )
            .into_response(),
        Robots::Body(b) => (
            [(header::CONTENT_TYPE, "text/plain")],
            b.replace("{origin}", &s.origin),
        )
            .into_response(),
        Robots::Status(code) => StatusCode::from_u16(*code)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
        Robots::FromDir => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn home(State(s): State<Shared>) -> Response {
    page(
        "Home",
        "<p>The test site's home page links to the first page of a chain.</p>",
        &[
            "/page/1".to_string(),
            "/private/secret".to_string(),
            format!("{}/elsewhere", s.origin.replace("127.0.0.1", "localhost")),
        ],
    )
}

async fn scenarios_index() -> Response {
    let links: Vec<String> = [
        "/redirect/chain/3",
        "/redirect/loop/a",
        "/redirect/long/12",
        "/redirect/offsite",
        "/redirect/disallowed",
        "/slow",
        "/huge",
        "/bomb",
        "/gzip-page",
        "/charset/latin1",
        "/charset/meta",
        "/charset/sjis",
        "/binary.bin",
        "/trap/cal/2024?m=1",
        "/trap/deep/",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    page("Scenarios", "<p>Every scenario, one link each.</p>", &links)
}

/// A chain of posts whose text repeats two paragraphs of the site's own around one of its
/// own: boilerplate that extraction keeps, for the per-host line filter.
async fn blog_page(State(s): State<Shared>, Path(n): Path<u32>) -> Response {
    if n == 0 || n > s.cfg.pages {
        return StatusCode::NOT_FOUND.into_response();
    }
    let next = if n < s.cfg.pages {
        format!(
            "<p>Read on: <a href=\"/blog/{}\">the next post</a> in this series, whenever you are ready.</p>",
            n + 1
        )
    } else {
        String::new()
    };
    page(
        &format!("Post {n}"),
        &format!(
            "<p>Every post on this blog is written by volunteers, and we welcome corrections.</p>\
             <p>Post {n} is about topic number {n}, told in a paragraph of its own words.</p>\
             <p>Subscribe to our newsletter for a weekly round-up of everything we publish.</p>{next}"
        ),
        &[],
    )
}

async fn chain_page(State(s): State<Shared>, Path(n): Path<u32>) -> Response {
    if n == 0 || n > s.cfg.pages {
        return StatusCode::NOT_FOUND.into_response();
    }
    let mut links = vec![
        // Variants of this page that normalization must fold into one URL.
        format!("/page/{n}#section"),
        format!("/page/{n}?utm_source=test&utm_medium=x"),
        format!("{}/page/{n}", s.origin.replace("http://", "HTTP://")),
        "mailto:someone@example.org".to_string(),
        "/private/from-page".to_string(),
    ];
    if n < s.cfg.pages {
        links.push(format!("/page/{}", n + 1));
    }
    page(
        &format!("Page {n}"),
        &format!(
            "<p>This is page number {n} of the chain. It has a paragraph of real words so that extraction finds it.</p>"
        ),
        &links,
    )
}

/// Each private page says which it is: two pages with one text would be exact copies, and
/// which of them a crawl keeps would depend on the order they arrive in.
async fn private(Path(rest): Path<String>) -> Response {
    page(
        "Private",
        &format!("<p>robots.txt disallows this page, /private/{rest}.</p>"),
        &[],
    )
}

async fn redirect_chain(Path(n): Path<u32>) -> Response {
    if n == 0 {
        Redirect::to("/page/1").into_response()
    } else {
        Redirect::permanent(&format!("/redirect/chain/{}", n - 1)).into_response()
    }
}

/// A chain of its own (ends at `/page/2`), so it shares no hop with `/redirect/chain/N`.
async fn redirect_long(Path(n): Path<u32>) -> Response {
    if n == 0 {
        Redirect::to("/page/2").into_response()
    } else {
        Redirect::permanent(&format!("/redirect/long/{}", n - 1)).into_response()
    }
}

async fn redirect_offsite(State(s): State<Shared>) -> Response {
    Redirect::to(&format!(
        "{}/page/1",
        s.origin.replace("127.0.0.1", "localhost")
    ))
    .into_response()
}

/// Counts requests per scenario key; returns this request's number (1 for the first).
fn bump(s: &Shared, key: String) -> u32 {
    let mut hits = s.hits.lock().unwrap_or_else(|e| e.into_inner());
    let c = hits.entry(key).or_default();
    *c += 1;
    *c
}

/// First request: 429 with `Retry-After: 1`; later ones: a page.
async fn retry(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    let n = bump(&s, format!("retry/{name}"));
    if n == 1 {
        let mut resp = StatusCode::TOO_MANY_REQUESTS.into_response();
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        resp
    } else {
        page("Retried", "<p>Served after backing off.</p>", &[])
    }
}

/// First request: 503 with `Retry-After` as an HTTP date 2 s ahead; later ones: a page.
async fn unavailable(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    let n = bump(&s, format!("unavailable/{name}"));
    if n == 1 {
        let at = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2));
        let mut resp = StatusCode::SERVICE_UNAVAILABLE.into_response();
        if let Ok(v) = HeaderValue::from_str(&at) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    } else {
        page("Back", "<p>Available again.</p>", &[])
    }
}

async fn slow(State(s): State<Shared>) -> Response {
    bump(&s, "slow".into());
    tokio::time::sleep(Duration::from_secs(s.cfg.slow_secs)).await;
    page("Slow", "<p>Finally.</p>", &[])
}

async fn huge(State(s): State<Shared>) -> Response {
    let total = s.cfg.huge_bytes;
    let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
    let n = total.div_ceil(chunk.len());
    let head = Bytes::from_static(b"<html><body><p>");
    let stream = futures_util::stream::iter(
        std::iter::once(head)
            .chain(std::iter::repeat_n(chunk, n))
            .map(Ok::<_, std::io::Error>),
    );
    (
        [(header::CONTENT_TYPE, "text/html")],
        Body::from_stream(stream),
    )
        .into_response()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

async fn bomb(State(s): State<Shared>) -> Response {
    let size = s.cfg.bomb_bytes;
    let body = s
        .bomb
        .get_or_init(|| {
            // Concatenated gzip members of 1 MiB of zeros each: cheap to build, and a
            // decoder that follows members (as HTTP clients do) inflates all of them.
            let member = gzip(&vec![0u8; 1024 * 1024]);
            Bytes::from(member.repeat((size / (1024 * 1024)).max(1)))
        })
        .clone();
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    (h, body).into_response()
}

/// A hostile host's page: gzip that inflates to `farm_bytes` of HTML, its first part
/// `farm_links` links to other farm pages, the rest one paragraph of words. Built once, as
/// concatenated gzip members (the padding member repeated), so serving it costs nothing.
async fn farm(State(s): State<Shared>) -> Response {
    let body = s
        .farm
        .get_or_init(|| {
            let mut head =
                String::from("<html><head><title>Farm</title></head><body><main><h1>Farm</h1><ul>");
            for j in 0..s.cfg.farm_links {
                head.push_str(&format!("<li><a href=\"/farm/{j}\">farm {j}</a></li>"));
            }
            head.push_str("</ul><p>");
            let words = "grow the farm with many more words ";
            let pad = words.repeat((s.cfg.farm_bytes / 8 / words.len()).clamp(32, 1 << 15));
            let members = s.cfg.farm_bytes.saturating_sub(head.len()) / pad.len();
            let mut body = gzip(head.as_bytes());
            body.extend(gzip(pad.as_bytes()).repeat(members.max(1)));
            body.extend(gzip(b"</p></main></body></html>"));
            Bytes::from(body)
        })
        .clone();
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    (h, body).into_response()
}

async fn gzip_page() -> Response {
    let body = gzip(b"<html><head><title>Compressed</title></head><body><p>Gzip encoded page body.</p></body></html>");
    (
        [
            (header::CONTENT_TYPE, "text/html"),
            (header::CONTENT_ENCODING, "gzip"),
        ],
        body,
    )
        .into_response()
}

async fn latin1() -> Response {
    let body = b"<html><head><title>Latin-1</title></head><body><p>Caf\xe9 cr\xe8me br\xfbl\xe9e \xe0 la fran\xe7aise.</p></body></html>".to_vec();
    (
        [(header::CONTENT_TYPE, "text/html; charset=ISO-8859-1")],
        body,
    )
        .into_response()
}

async fn meta_charset() -> Response {
    let body = b"<html><head><meta charset=\"windows-1252\"><title>Meta</title></head><body><p>\x93Smart quotes\x94 \x96 na\xefve caf\xe9.</p></body></html>".to_vec();
    ([(header::CONTENT_TYPE, "text/html")], body).into_response()
}

async fn sjis() -> Response {
    let text = "<html><head><title>日本語</title></head><body><p>日本語のテキストです。これはテストのページです。東京都の天気は晴れです。</p></body></html>";
    let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(text);
    let bytes = bytes.into_owned();
    ([(header::CONTENT_TYPE, "text/html")], bytes).into_response()
}

async fn binary() -> Response {
    let body: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
    ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
}

async fn sitemap_index(State(s): State<Shared>) -> Response {
    let o = &s.origin;
    (
        [(header::CONTENT_TYPE, "application/xml")],
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>{o}/sitemap-pages.xml.gz</loc></sitemap>
  <sitemap><loc>{o}/sitemap.txt</loc></sitemap>
</sitemapindex>"#
        ),
    )
        .into_response()
}

async fn sitemap_gz(State(s): State<Shared>) -> Response {
    let o = &s.origin;
    let xml = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>{o}/sm/1</loc></url><url><loc>{o}/sm/2</loc></url><url><loc>{o}/sm/3</loc></url>
</urlset>"#
    );
    (
        [(header::CONTENT_TYPE, "application/gzip")],
        gzip(xml.as_bytes()),
    )
        .into_response()
}

async fn sitemap_txt(State(s): State<Shared>) -> Response {
    let o = &s.origin;
    (
        [(header::CONTENT_TYPE, "text/plain")],
        format!("{o}/sm/4\n{o}/sm/5\n"),
    )
        .into_response()
}

async fn sm_page(Path(n): Path<u32>) -> Response {
    page(
        &format!("Sitemap page {n}"),
        "<p>Only a sitemap links here.</p>",
        &[],
    )
}

async fn rss(State(s): State<Shared>) -> Response {
    let o = &s.origin;
    (
        [(header::CONTENT_TYPE, "application/rss+xml")],
        format!(
            r#"<?xml version="1.0"?><rss version="2.0"><channel><title>Test feed</title><link>{o}/</link><description>d</description>
<item><title>One</title><link>{o}/feeds/1</link></item><item><title>Two</title><link>{o}/feeds/2</link></item>
</channel></rss>"#
        ),
    )
        .into_response()
}

async fn atom(State(s): State<Shared>) -> Response {
    let o = &s.origin;
    (
        [(header::CONTENT_TYPE, "application/atom+xml")],
        format!(
            r#"<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>Atom</title><id>urn:x</id><updated>2024-01-01T00:00:00Z</updated>
<entry><title>Three</title><id>urn:3</id><updated>2024-01-01T00:00:00Z</updated><link rel="alternate" href="{o}/feeds/3"/></entry></feed>"#
        ),
    )
        .into_response()
}

async fn feed_item(Path(n): Path<u32>) -> Response {
    page(&format!("Feed item {n}"), "<p>Linked from a feed.</p>", &[])
}

#[derive(serde::Deserialize)]
struct Month {
    m: Option<u32>,
}

/// An endless calendar: every month links to the next one.
async fn calendar(Path(year): Path<u32>, Query(q): Query<Month>) -> Response {
    let m = q.m.unwrap_or(1);
    let (ny, nm) = if m >= 12 {
        (year + 1, 1)
    } else {
        (year, m + 1)
    };
    page(
        &format!("Calendar {year}-{m}"),
        "<p>Nothing happens this month.</p>",
        &[format!("/trap/cal/{ny}?m={nm}")],
    )
}

/// Every page links one level deeper with a relative link: `/trap/deep/x/x/x/...`.
async fn deep() -> Response {
    page(
        "Deep",
        "<p>Relative links keep nesting.</p>",
        &["x/".to_string()],
    )
}

/// A long article whose words are drawn from a fixed sequence, so copies can differ by one
/// word in 400.
fn article(seed: u32, changed_word: Option<usize>) -> String {
    const WORDS: &[&str] = &[
        "crawler",
        "fetches",
        "pages",
        "politely",
        "and",
        "extracts",
        "their",
        "main",
        "text",
        "before",
        "the",
        "index",
        "stores",
        "chunks",
        "with",
        "embeddings",
        "for",
        "search",
        "every",
        "host",
        "gets",
        "its",
        "own",
        "queue",
        "so",
        "that",
        "no",
        "site",
        "starves",
        "while",
        "robots",
        "rules",
        "are",
        "honoured",
        "on",
        "each",
        "redirect",
        "hop",
    ];
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    let words: Vec<String> = (0..400)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if Some(i) == changed_word {
                "different".to_string()
            } else {
                WORDS[x as usize % WORDS.len()].to_string()
            }
        })
        .collect();
    words
        .chunks(40)
        .map(|c| format!("<p>{}.</p>", c.join(" ")))
        .collect()
}

/// `original`, `copy` (same text, other chrome), `near` (one word changed), `other`.
async fn dup(Path(name): Path<String>) -> Response {
    let body = match name.as_str() {
        "original" => article(1, None),
        "copy" => format!(
            "<aside>Printer-friendly version</aside>{}",
            article(1, None)
        ),
        "near" => article(1, Some(200)),
        "other" => article(2, None),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    page("An article", &body, &[])
}
