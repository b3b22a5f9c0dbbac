//! When a page needs a browser: the rule the extractor applies to each fetched HTML page
//! under `--render auto`, from what one parse found (no browser involved).
//!
//! A page is rendered when both hold:
//! - **(A)** its main content has fewer than `max_chars` visible characters
//!   ([`RENDER_MAX_CHARS`] by default, `--render-max-chars`): server-rendered pages, however
//!   many scripts they load, have their text already and never reach the browser;
//! - **(B)** it carries a sign of client-side rendering, checked in this order (the first
//!   is the reason recorded):
//!   1. `empty_app_root`: an application root (`#root`, `#app`, `#__next`, `#__nuxt`,
//!      `[data-reactroot]`, `[ng-version]`, ...) with no text in it;
//!   2. `noscript_notice`: a `<noscript>` asking for JavaScript;
//!   3. `hydration_data`: framework state for the browser (`__NEXT_DATA__`,
//!      `window.__NUXT__`, `ng-state`, ...);
//!   4. `script_shell`: fewer than 50 visible characters in the whole body and a script;
//!   5. `no_links`: no link at all and a script loaded from a file (a shell hides the
//!      site's links too, which a crawler needs more than the text).
//!
//! A page short on text with none of these (an empty 200, a stub) is left as it is, and so
//! is a page with a `<meta http-equiv=refresh>`: a redirect stub (rustdoc writes 15,000 of
//! them, each with a script repeating the redirect) whose target the crawl follows.

use crate::content::Shell;

/// Main-content characters under which a page is a candidate for rendering.
pub const RENDER_MAX_CHARS: usize = 200;

/// Visible characters of the body below which a page with a script is a shell.
const SHELL_BODY_CHARS: u32 = 50;

/// Why the page at hand needs rendering, or `None`: rule (A) on `text` (the extracted
/// main content), then the signs (B) in `shell`.
pub fn render_reason(text: &str, shell: &Shell, max_chars: usize) -> Option<&'static str> {
    let chars = text.chars().filter(|c| !c.is_whitespace()).count();
    if chars >= max_chars || shell.refresh {
        return None;
    }
    if shell.empty_root {
        Some("empty_app_root")
    } else if shell.js_notice {
        Some("noscript_notice")
    } else if shell.hydration {
        Some("hydration_data")
    } else if shell.body_chars < SHELL_BODY_CHARS && shell.scripts > 0 {
        Some("script_shell")
    } else if shell.anchors == 0 && shell.script_srcs > 0 {
        Some("no_links")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use url::Url;

    use super::*;

    fn reason(html: &str) -> Option<&'static str> {
        let d = crate::extract_html(html, &Url::parse("http://h/p").unwrap());
        render_reason(&d.text, &d.shell, RENDER_MAX_CHARS)
    }

    const ARTICLE: &str = "<p>Server-rendered documentation says what it has to say in the \
        markup itself, with sentences long enough to be the main content of the page, so a \
        crawler reads it without running a single script, however many the page loads.</p>\
        <p>A second paragraph says more of the same, as the pages of a documentation site \
        do, one topic after another.</p>";

    #[test]
    fn shells_are_rendered() {
        assert_eq!(
            reason(
                r#"<body><div id="root"></div><script src="/static/js/main.3f9a1c.js"></script></body>"#
            ),
            Some("empty_app_root")
        );
        assert_eq!(
            reason(
                "<body><noscript>You need to enable JavaScript to run this app.</noscript>\
                <div class=container></div><script src=/app.js></script></body>"
            ),
            Some("noscript_notice")
        );
        assert_eq!(
            reason(
                r#"<body><div id="page">Loading…</div>
                <script>window.__NUXT__={data:[{}]}</script></body>"#
            ),
            Some("hydration_data")
        );
        assert_eq!(
            reason("<body><div class=x>Loading</div><script>render()</script></body>"),
            Some("script_shell")
        );
        assert_eq!(
            reason(
                "<body><h1>A title over an empty box that the scripts loaded below fill in once they run</h1>\
                <div class=content></div><script src=/bundle.js></script></body>"
            ),
            Some("no_links")
        );
    }

    #[test]
    fn server_rendered_pages_are_not() {
        let scripts: String = (0..8)
            .map(|i| format!("<script src=\"/assets/js/chunk.{i}.js\" defer></script>"))
            .collect();
        // Docusaurus-like: many scripts, an app root full of text.
        let docs = format!(
            "<body><div id=\"__docusaurus\"><nav><a href=/docs>Docs</a></nav><main>{ARTICLE}</main></div>{scripts}</body>"
        );
        assert_eq!(reason(&docs), None);
        // Next.js server-rendered: hydration data and the article in the root.
        let next = format!(
            r#"<body><div id="__next"><article>{ARTICLE}</article></div>
            <script id="__NEXT_DATA__" type="application/json">{{"props":{{}}}}</script>{scripts}</body>"#
        );
        assert_eq!(reason(&next), None);
        // A redirect stub, as rustdoc writes them.
        assert_eq!(
            reason(
                r#"<head><meta http-equiv="refresh" content="0;URL=macro.eprintln.html"></head>
                <body><p>Redirecting to <a href="macro.eprintln.html">macro.eprintln.html</a>...</p>
                <script>location.replace("macro.eprintln.html" + location.search);</script></body>"#
            ),
            None
        );
        // An empty 200 and a stub with no scripts.
        assert_eq!(reason(""), None);
        assert_eq!(reason("<body><p>Moved.</p></body>"), None);
    }

    #[test]
    fn a_discourse_topic_reads_from_its_noscript() {
        let posts: String = (1..=3)
            .map(|i| {
                format!(
                    "<div class=\"topic-body crawler-post\" itemprop=\"comment\"><div class=post itemprop=text>\
                     <p>Reply {i}: the borrow checker rejects this because the closure captures the \
                     vector by reference while the loop pushes to it; clone it first or collect.</p></div></div>"
                )
            })
            .collect();
        let html = format!(
            r#"<html><head><title>Borrowing in closures - help - Rust Users</title>
            <meta name="generator" content="Discourse 3.4"></head><body>
            <section id="main"></section>
            <noscript data-path="/t/borrowing/1234"><header><a href="/">Rust Users</a></header>
            <div id="main-outlet" class="wrap" role="main"><h1>Borrowing in closures</h1>{posts}</div>
            <footer class="noscript-footer-nav"><p>Powered by Discourse, best viewed with JavaScript enabled</p></footer>
            </noscript><script src="/assets/discourse.js"></script></body></html>"#
        );
        let d = crate::extract_html(&html, &Url::parse("http://h/t/borrowing/1234").unwrap());
        assert!(d.text.contains("Reply 2: the borrow checker"), "{}", d.text);
        assert!(!d.text.contains("best viewed"), "{}", d.text);
        assert_eq!(render_reason(&d.text, &d.shell, RENDER_MAX_CHARS), None);
    }
}
