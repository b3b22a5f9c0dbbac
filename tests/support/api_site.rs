//! The fixture site of `tests/api.rs` (`trawl serve` against Firecrawl's clients): a home
//! page, three pages, a blog two hops deep, a page only its sitemap lists, one that
//! changes (`POST /__set` replaces it), a 404, an endless chain of slow pages, robots.txt,
//! and a small wiki whose pages are written, changed and removed by the test
//! (`POST /__wiki/NAME` sets a page's text, `DELETE` removes it; `/wiki/` links them all).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};

type Wiki = Arc<Mutex<BTreeMap<String, String>>>;

fn wiki_router(wiki: Wiki) -> Router {
    let index = |State(w): State<Wiki>| async move {
        let links: String = w
            .lock()
            .unwrap()
            .keys()
            .map(|k| format!("<li><a href=\"/wiki/{k}\">{k}</a></li>"))
            .collect();
        Html(page(
            "Wiki",
            false,
            &format!(
                "<h1>Wiki</h1><p>The pages of the wiki, each about one thing.</p><ul>{links}</ul>"
            ),
        ))
    };
    Router::new()
        .route("/wiki/", get(index))
        .route(
            "/wiki/{name}",
            get(
                |State(w): State<Wiki>, UrlPath(name): UrlPath<String>| async move {
                    match w.lock().unwrap().get(&name) {
                        Some(text) => (
                            StatusCode::OK,
                            Html(page(
                                &format!("Wiki {name}"),
                                false,
                                &format!("<h1>{name}</h1><p>{text}</p>"),
                            )),
                        ),
                        None => (
                            StatusCode::NOT_FOUND,
                            Html(page("Not found", false, "<p>No such wiki page.</p>")),
                        ),
                    }
                },
            ),
        )
        .route(
            "/__wiki/{name}",
            post(
                |State(w): State<Wiki>, UrlPath(name): UrlPath<String>, body: String| async move {
                    w.lock().unwrap().insert(name, body);
                    "ok"
                },
            )
            .delete(
                |State(w): State<Wiki>, UrlPath(name): UrlPath<String>| async move {
                    w.lock().unwrap().remove(&name);
                    "ok"
                },
            ),
        )
        .with_state(wiki)
}

/// The fixture site of the SDK checks: a home page, three pages, a blog two hops deep, a
/// page only its sitemap lists, one that changes, a 404, slow pages, robots.txt.
pub struct Fixture {
    addr: SocketAddr,
}

fn page(title: &str, nav: bool, main: &str) -> String {
    let nav = if nav {
        r#"<header><nav><a href="/">Home</a> <a href="/a">A</a> <a href="/b">B</a> <a href="/c">C</a> <a href="/blog/post-1">Blog</a></nav></header>"#
    } else {
        r#"<header><nav><a href="/">Home</a></nav></header>"#
    };
    format!(
        "<!doctype html><html lang=en><head><title>{title}</title>\
         <meta name=description content=\"About {title}\"><script>var tracker = 1;</script></head>\
         <body>{nav}<main>{main}</main><footer><p>Footer text © 2026 the fixture site, \
         all rights reserved.</p></footer></body></html>"
    )
}

fn body_of(path: &str) -> Option<String> {
    let p = |s: &str| format!("<p>{s}</p>");
    Some(match path {
        "" => page(
            "Home",
            true,
            &format!(
                "<h1>Home</h1>{}",
                p(
                    "Welcome to the fixture site. It holds a few pages about rivers, \
                   mountains and the weather, written so that an extractor has a main \
                   content to find on each of them."
                )
            ),
        ),
        "a" => page(
            "Page A",
            true,
            "<h1>Rivers</h1><p id=lead>Lead paragraph of A: rivers carry water from \
             the mountains to the sea, cutting valleys as they go.</p><p>Second paragraph \
             of A: the longest river of the fixture is entirely made up.</p>",
        ),
        "b" => page(
            "Page B",
            true,
            &p(
                "Mountains rise where plates collide; page B counts seven summits \
                above four thousand metres and names none of them.",
            ),
        ),
        "c" => page(
            "Page C",
            true,
            &p(
                "Weather is what the atmosphere does today; page C keeps a diary of \
                rain, fog and one memorable hailstorm in April.",
            ),
        ),
        "blog/post-1" => page(
            "Post one",
            false,
            "<h1>Post one</h1><p>The first post of the blog, about starting a blog, \
             links to the second.</p><p><a href=\"/blog/post-2\">Next post</a></p>",
        ),
        "blog/post-2" => page(
            "Post two",
            false,
            "<p>The second post of the blog is found two hops from the home page, \
             and talks about finishing what one starts.</p>",
        ),
        "only-in-sitemap" => page(
            "Hidden",
            false,
            "<p>No page links here: only the sitemap lists this page, which is about \
             being hard to find.</p>",
        ),
        "private/secret" => page("Secret", false, "<p>robots.txt disallows this page.</p>"),
        // A client-side app: nothing but a root and a script, which writes the text.
        "app" => "<!doctype html><html lang=en><head><title>App</title></head><body>\
                  <div id=\"root\"></div><script src=\"/app.js\"></script></body></html>"
            .into(),
        // Text a click reveals.
        "reveal" => page(
            "Reveal",
            false,
            "<h1>Reveal</h1><p>This page hides its best part until the button below is \
             pressed, as many pages hide their answers behind a click.</p>\
             <button id=more onclick=\"document.getElementById('extra').innerHTML = '<p>The \
             hidden paragraph: revealed by a click, it tells that the treasure is under the \
             old oak tree by the river.</p>'; this.hidden = true\">Show more</button>\
             <div id=extra></div>",
        ),
        // A page taller than any screen.
        "tall" => page(
            "Tall",
            false,
            "<link rel=stylesheet href=\"/tall.css\"><h1>Tall</h1><p>A page three thousand pixels tall, for full-page screenshots.</p>\
             <div style=\"height:3000px;width:600px;background:#c0ffee\"></div><p>The end.</p>",
        ),
        "product" => page(
            "Widget Pro",
            false,
            "<h1>Widget Pro</h1><p>The Widget Pro is a kitchen gadget made by Acme. It \
             costs 42 dollars and ships in two days.</p><p>It slices, dices and \
             remembers birthdays.</p>",
        ),
        _ => return None,
    })
}

async fn serve_page(UrlPath(path): UrlPath<String>) -> impl IntoResponse {
    match body_of(&path) {
        Some(b) => (StatusCode::OK, Html(b)),
        None => (
            StatusCode::NOT_FOUND,
            Html(page(
                "Not found",
                false,
                "<p>There is no such page here, sorry.</p>",
            )),
        ),
    }
}

async fn slow(UrlPath(n): UrlPath<u32>) -> impl IntoResponse {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let links: String = (1..=3)
        .map(|k| format!("<a href=\"/slow/{}\">next</a> ", n * 3 + k))
        .collect();
    Html(page(
        &format!("Slow {n}"),
        false,
        &format!("<p>Slow page number {n} of an endless chain, each answered late.</p>{links}"),
    ))
}

impl Fixture {
    pub async fn start() -> Self {
        let changing = Arc::new(Mutex::new(String::from("Version one of the page.")));
        let app = Router::new()
            .route("/", get(|| async { serve_page(UrlPath(String::new())).await }))
            .route(
                "/robots.txt",
                get(|State(o): State<Origin>| async move {
                    format!("User-agent: *\nDisallow: /private/\nSitemap: {}/sitemap.xml\n", o.0)
                }),
            )
            .route(
                "/sitemap.xml",
                get(|State(o): State<Origin>| async move {
                    let urls: String = ["/", "/a", "/only-in-sitemap", "/blog/post-1"]
                        .iter()
                        .map(|p| format!("<url><loc>{}{p}</loc></url>", o.0))
                        .collect();
                    (
                        [("content-type", "application/xml")],
                        format!(
                            "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{urls}</urlset>"
                        ),
                    )
                }),
            )
            .route("/slow/{n}", get(slow))
            .route(
                "/tall.css",
                get(|| async {
                    (
                        [("content-type", "text/css")],
                        "html, body { background: rgb(10, 200, 30); }",
                    )
                }),
            )
            .route(
                "/app.js",
                get(|| async {
                    (
                        [("content-type", "application/javascript")],
                        "setTimeout(function () { document.getElementById('root').innerHTML = \
                         '<h1>Rendered</h1><p>Rendered by JavaScript: this paragraph exists only \
                         once the app has run in a browser, some time after the page loaded.</p>'; \
                         }, 300);",
                    )
                }),
            )
            .route(
                "/changing",
                get(|State(o): State<Origin>| async move {
                    let text = o.1.lock().unwrap().clone();
                    Html(page("Changing", false, &format!("<h1>Changing</h1><p>{text}</p>")))
                }),
            )
            .route(
                "/__set",
                post(|State(o): State<Origin>, body: String| async move {
                    *o.1.lock().unwrap() = body;
                    "ok"
                }),
            )
            .route("/{*path}", get(serve_page));
        let wiki: Wiki = Arc::new(Mutex::new(
            [
                (
                    "one",
                    "The first wiki page tells of lighthouses and the keepers who lived in them.",
                ),
                (
                    "two",
                    "The second wiki page tells of canals, locks and the boats that climb them.",
                ),
                (
                    "three",
                    "The third wiki page tells of windmills grinding grain on windy hills.",
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = app
            .with_state(Origin(format!("http://{addr}"), changing))
            .merge(wiki_router(wiki));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

#[derive(Clone)]
struct Origin(String, Arc<Mutex<String>>);
