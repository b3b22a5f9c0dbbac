//! One HTML page: its main content, metadata and links, all from one parse (see
//! [`crate::content`]).

use trawl_core::PageMeta;
use url::Url;

use crate::content::{self, Options};

/// What one HTML page yields for the crawl and for ingest.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Document {
    pub title: Option<String>,
    pub text: String,
    pub markdown: Option<String>,
    pub meta: PageMeta,
    /// Absolute link targets in document order (not yet normalized or deduplicated).
    pub links: Vec<String>,
    pub canonical: Option<String>,
    pub feeds: Vec<String>,
    /// `(name, content)` of the robots and TDM metas, for
    /// `trawl_core::policy::PagePolicy::read_metas` with the crawler's name.
    pub policy_metas: Vec<(String, String)>,
    /// Signs of client-side rendering, for [`crate::render_reason`].
    pub shell: crate::content::Shell,
}

/// Extracts title, main text, Markdown, metadata and links from a UTF-8 HTML document
/// fetched from `url`. Any input yields a result: broken markup is repaired the way browsers
/// do, and a page with no text yields empty text.
pub fn extract_html(html: &str, url: &Url) -> Document {
    let c = content::extract(html, Some(url), Options::default());
    let l = c.links.unwrap_or_default();
    Document {
        title: c.title,
        text: c.text,
        markdown: c.markdown,
        meta: c.meta,
        links: l.links,
        canonical: l.canonical,
        feeds: l.feeds,
        policy_metas: l.policy_metas,
        shell: c.shell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(html: &str) -> Document {
        extract_html(html, &Url::parse("http://h/dir/page.html").unwrap())
    }

    #[test]
    fn title_text_and_links() {
        let e = ex(
            r#"<html><head><title>A &amp; B</title><base href="/root/"></head><body>
            <nav><a href="/nav">Nav link</a> menu</nav>
            <p>First paragraph with <b>bold</b> text &eacute;.</p><p>Second paragraph, with a sentence.</p>
            <a href="x.html">x</a> <a rel="nofollow" href="/no">no</a> <a href="mailto:a@b">m</a>
            <script>var s = "<p>not text</p>";</script>
            <footer>Footer junk</footer></body></html>"#,
        );
        assert_eq!(e.title.as_deref(), Some("A & B"));
        assert!(
            e.text.contains("First paragraph with bold text é."),
            "{}",
            e.text
        );
        assert!(e.text.contains("Second"));
        assert!(!e.text.contains("Nav link"));
        assert!(!e.text.contains("Footer junk"));
        assert!(!e.text.contains("not text"));
        assert!(e.links.contains(&"http://h/nav".to_string()));
        assert!(e.links.contains(&"http://h/root/x.html".to_string()));
        assert!(!e.links.iter().any(|l| l.ends_with("/no")));
    }

    #[test]
    fn prefers_main_content_when_substantial() {
        let body = "Main content sentence that is long enough to count as the body. ".repeat(3);
        let e = ex(&format!(
            "<body><div>Sidebar words</div><main><h1>Heading</h1><p>{body}</p></main></body>"
        ));
        assert!(e.text.starts_with("Heading\n"));
        assert!(!e.text.contains("Sidebar"));
    }

    #[test]
    fn meta_robots_nofollow_and_refresh() {
        let e = ex(
            r#"<meta name="robots" content="noindex, nofollow"><meta name="description" content="noindex">
            <meta name="googlebot" content="noarchive"><meta http-equiv="X-Robots-Tag" content="noai"><a href="/a">a</a>"#,
        );
        let names: Vec<&str> = e.policy_metas.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["robots", "googlebot", "robots"]);
        assert_eq!(e.links.len(), 1, "links are collected; the stage decides");
        let e = ex(r#"<meta http-equiv="refresh" content="0;URL='../target.html'">"#);
        assert_eq!(e.links, vec!["http://h/target.html".to_string()]);
    }

    #[test]
    fn pre_keeps_whitespace() {
        let e = ex("<pre>fn main() {\n    println!(\"hi\");\n}</pre><p>after</p>");
        assert!(
            e.text.contains("fn main() {\n    println!(\"hi\");\n}"),
            "{}",
            e.text
        );
    }

    #[test]
    fn broken_markup_does_not_panic() {
        for html in [
            "<",
            "<a href=",
            "<title>unterminated",
            "</p></p></div>",
            "<svg><title>x</title>",
            "\u{0}\u{0}<p>",
            "<table><tr><td>a<td>b</table>",
            "<main><main></main>",
        ] {
            let _ = ex(html);
        }
    }
}
