//! Pages that need JavaScript, for the renderer's tests and benchmark (`/js/...`):
//! - `/js/inline`: an empty body; an inline script writes the article and a link to
//!   `/js/child` after 100 ms;
//! - `/js/shell`: an empty `#root` (a framework-style app) and `/js/app.js`, which fetches
//!   `/js/data.json` and renders it with a link to `/js/child`;
//! - `/js/ssr`: the same article server-rendered, with eight scripts (never rendered);
//! - `/js/never`: a script that keeps requesting `/js/tick` and never settles;
//! - `/js/reach`: a script that fetches `/js/secret` (which the tests' robots.txt
//!   disallows), a path outside the `/js/` prefix (`/outside`) and `/js/data.json`;
//! - `/js/bench/N`: shells like `/js/shell` linking to the next `N`, for throughput.

use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::Shared;

/// The sentence the scripts write; tests look for it in the extracted text.
pub const JS_SENTENCE: &str = "This article exists only after the page's scripts have run, \
     which is why a crawler that reads the markup alone finds nothing here to keep";

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn js(code: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "application/javascript")], code).into_response()
}

fn shell(title: &str, body: &str) -> Response {
    html(format!(
        "<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"
    ))
}

/// The article a script writes: a heading, three paragraphs and a link.
const RENDER_ARTICLE: &str = r#"
function renderArticle(target, title, sentence, next) {
  var a = document.createElement('article');
  var h = document.createElement('h1'); h.textContent = title; a.appendChild(h);
  for (var i = 1; i <= 3; i++) {
    var p = document.createElement('p');
    p.textContent = 'Paragraph ' + i + '. ' + sentence + '.';
    a.appendChild(p);
  }
  var l = document.createElement('a'); l.href = next; l.textContent = 'Next page';
  a.appendChild(l);
  target.appendChild(a);
}
"#;

const APP_JS: &str = r#"
fetch('/js/data.json').then(function (r) { return r.json(); }).then(function (d) {
  renderArticle(document.getElementById('root'), d.title, d.sentence, d.next);
});
"#;

const NEVER_JS: &str = r#"
var n = 0;
setInterval(function () { n++; fetch('/js/tick?n=' + n).catch(function () {}); }, 100);
setInterval(function () {
  var p = document.createElement('p'); p.textContent = 'tick ' + n; document.body.appendChild(p);
}, 150);
"#;

const REACH_JS: &str = r#"
Promise.allSettled([
  fetch('/js/secret'), fetch('/outside'), fetch('/js/data.json')
]).then(function () {
  fetch('/js/data.json').then(function (r) { return r.json(); }).then(function (d) {
    renderArticle(document.getElementById('root'), 'Reach', d.sentence, '/js/child');
  });
});
"#;

pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/js/", get(index))
        .route("/js/inline", get(inline))
        .route("/js/shell", get(app_shell))
        .route("/js/app.js", get(|| async { js(APP_JS) }))
        .route("/js/render.js", get(|| async { js(RENDER_ARTICLE) }))
        .route("/js/data.json", get(data))
        .route("/js/child", get(child))
        .route("/js/ssr", get(ssr))
        .route(
            "/js/chunk/{n}",
            get(|| async { js("window.loaded = (window.loaded || 0) + 1;") }),
        )
        .route("/js/never", get(never))
        .route("/js/never.js", get(|| async { js(NEVER_JS) }))
        .route("/js/tick", get(|| async { "tick" }))
        .route("/js/reach", get(reach))
        .route("/js/reach.js", get(|| async { js(REACH_JS) }))
        .route("/js/bench/{n}", get(bench))
        .route("/js/bench.js", get(|| async { js(BENCH_JS) }))
}

async fn index() -> Response {
    let links: String = ["inline", "shell", "ssr", "never", "reach"]
        .iter()
        .map(|p| format!("<li><a href=\"/js/{p}\">{p}</a></li>"))
        .collect();
    shell(
        "Pages that need JavaScript",
        &format!(
            "<main><h1>Pages that need JavaScript</h1><p>Each page below is built a \
             different way: by an inline script, by an application that fetches its data, \
             on the server, or never finished.</p><ul>{links}</ul></main>"
        ),
    )
}

async fn inline() -> Response {
    let sentence = serde_json::to_string(JS_SENTENCE).unwrap_or_default();
    shell(
        "Inline",
        &format!(
            "<script src=\"/js/render.js\"></script><script>setTimeout(function () {{ \
             renderArticle(document.body, 'Inline', {sentence}, '/js/child'); }}, 100);</script>"
        ),
    )
}

async fn app_shell() -> Response {
    shell(
        "App",
        "<noscript>You need to enable JavaScript to run this app.</noscript>\
         <div id=\"root\"></div><script src=\"/js/render.js\"></script>\
         <script src=\"/js/app.js\"></script>",
    )
}

async fn data() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({"title": "App", "sentence": JS_SENTENCE, "next": "/js/child"})
            .to_string(),
    )
        .into_response()
}

async fn child() -> Response {
    shell(
        "Child",
        "<main><h1>Child</h1><p>A server-rendered page linked from the rendered ones, \
         reached only when the links the scripts write are followed by the crawl.</p></main>",
    )
}

async fn ssr() -> Response {
    let scripts: String = (0..8)
        .map(|i| format!("<script src=\"/js/chunk/{i}\" defer></script>"))
        .collect();
    shell(
        "Server-rendered",
        &format!(
            "<div id=\"root\"><article><h1>Server-rendered</h1><p>{JS_SENTENCE}, except \
             here, where the server wrote it into the markup.</p><p>Second paragraph of the \
             server-rendered article, long enough to be content.</p></article></div>{scripts}"
        ),
    )
}

async fn never() -> Response {
    shell(
        "Never",
        "<div id=\"app\"></div><script src=\"/js/never.js\"></script>",
    )
}

async fn reach() -> Response {
    shell(
        "Reach",
        "<div id=\"root\"></div><script src=\"/js/render.js\"></script>\
         <script src=\"/js/reach.js\"></script>",
    )
}

const BENCH_JS: &str = r#"
var n = parseInt(location.pathname.split('/').pop(), 10);
fetch('/js/data.json').then(function (r) { return r.json(); }).then(function (d) {
  renderArticle(document.getElementById('root'), 'Bench ' + n, d.sentence, '/js/bench/' + (n + 1));
});
"#;

async fn bench(Path(n): Path<u32>) -> Response {
    shell(
        &format!("Bench {n}"),
        "<div id=\"root\"></div><script src=\"/js/render.js\"></script>\
         <script src=\"/js/bench.js\"></script>",
    )
}
