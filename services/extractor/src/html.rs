//! A first, fast extractor: one streaming pass with lol_html collects the title, the visible
//! text (preferring `<main>`/`<article>`/`role=main`, skipping scripts, navigation, headers,
//! footers and asides), and the links for the frontier. The scoring extractor replaces the
//! text part; the link part stays streaming.

use std::cell::RefCell;
use std::rc::Rc;

use lol_html::{HtmlRewriter, Settings, element, text};
use url::Url;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extracted {
    pub title: Option<String>,
    pub text: String,
    /// Absolute link targets in document order (not yet normalized or deduplicated).
    pub links: Vec<String>,
    pub canonical: Option<String>,
    pub feeds: Vec<String>,
    /// `<meta name=robots content=nofollow>`: links were not collected.
    pub nofollow: bool,
    pub noindex: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("HTML parse: {0}")]
    Html(String),
}

#[derive(Default)]
struct Acc {
    title: String,
    in_title: bool,
    title_done: bool,
    skip: u32,
    main: u32,
    pre: u32,
    all: String,
    main_text: String,
    pending: String,
    base: Option<String>,
    hrefs: Vec<String>,
    canonical: Option<String>,
    feeds: Vec<String>,
    nofollow: bool,
    noindex: bool,
}

const SKIP: &str = "script, style, noscript, template, svg, nav, header, footer, aside, form, button, select, iframe, object";
const BLOCK: &str = "p, div, br, li, h1, h2, h3, h4, h5, h6, tr, td, th, pre, section, article, main, blockquote, table, ul, ol, dl, dd, dt, figcaption, hr, summary, details";
const MAIN: &str = "main, article, [role=main]";

impl Acc {
    fn push_break(&mut self) {
        for buf in [&mut self.all, &mut self.main_text] {
            if !buf.ends_with('\n') && !buf.is_empty() {
                buf.push('\n');
            }
        }
    }

    fn flush_text(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let decoded = html_escape::decode_html_entities(&self.pending).into_owned();
        self.pending.clear();
        let piece = if self.pre > 0 {
            decoded
        } else {
            collapse(&decoded)
        };
        if piece.is_empty() {
            return;
        }
        let pre = self.pre > 0;
        append(&mut self.all, &piece, pre);
        if self.main > 0 {
            append(&mut self.main_text, &piece, pre);
        }
    }
}

fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    if space {
        out.push(' ');
    }
    out
}

fn append(buf: &mut String, piece: &str, verbatim: bool) {
    let piece = if !verbatim && (buf.is_empty() || buf.ends_with('\n') || buf.ends_with(' ')) {
        piece.trim_start_matches(' ')
    } else {
        piece
    };
    buf.push_str(piece);
}

/// Marks the start and end of preformatted text in the buffers (private-use characters, so
/// they cannot clash with page text; they are removed by [`tidy`]).
const PRE_START: char = '\u{E000}';
const PRE_END: char = '\u{E001}';

/// Trims each line and keeps at most one blank line between paragraphs; preformatted lines
/// are kept as they are.
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    let mut in_pre = false;
    for raw in s.lines() {
        let starts_pre = raw.contains(PRE_START);
        let verbatim = in_pre || starts_pre;
        if let Some(last) = raw.chars().rev().find(|c| *c == PRE_START || *c == PRE_END) {
            in_pre = last == PRE_START;
        }
        let line: String = raw
            .chars()
            .filter(|c| *c != PRE_START && *c != PRE_END)
            .collect();
        let line = if verbatim {
            line.trim_end().to_string()
        } else {
            line.trim().to_string()
        };
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(&line);
    }
    out
}

fn attr(el: &lol_html::html_content::Element, name: &str) -> Option<String> {
    el.get_attribute(name)
        .map(|v| html_escape::decode_html_entities(&v).trim().to_string())
}

/// Extracts title, text and links from a UTF-8 HTML document fetched from `url`.
pub fn extract_html(html: &str, url: &Url) -> Result<Extracted, ExtractError> {
    let acc = Rc::new(RefCell::new(Acc::default()));
    let (a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) = (
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
        acc.clone(),
    );
    let handlers = vec![
        element!("base[href]", move |el| {
            let mut a = a1.borrow_mut();
            if a.base.is_none() {
                a.base = attr(el, "href");
            }
            Ok(())
        }),
        element!("a[href], area[href]", move |el| {
            let rel = el
                .get_attribute("rel")
                .unwrap_or_default()
                .to_ascii_lowercase();
            if !rel.split_whitespace().any(|r| r == "nofollow")
                && let Some(h) = attr(el, "href")
            {
                a2.borrow_mut().hrefs.push(h);
            }
            Ok(())
        }),
        element!("link[rel][href]", move |el| {
            let rel = el
                .get_attribute("rel")
                .unwrap_or_default()
                .to_ascii_lowercase();
            let ty = el
                .get_attribute("type")
                .unwrap_or_default()
                .to_ascii_lowercase();
            let mut a = a3.borrow_mut();
            if rel.split_whitespace().any(|r| r == "canonical") && a.canonical.is_none() {
                a.canonical = attr(el, "href");
            } else if rel.split_whitespace().any(|r| r == "alternate")
                && (ty.contains("rss") || ty.contains("atom"))
                && let Some(h) = attr(el, "href")
            {
                a.feeds.push(h);
            }
            Ok(())
        }),
        element!("meta[name][content]", move |el| {
            let name = el
                .get_attribute("name")
                .unwrap_or_default()
                .to_ascii_lowercase();
            if name == "robots" || name == "trawl" {
                let c = el
                    .get_attribute("content")
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                let mut a = a4.borrow_mut();
                a.nofollow |= c.contains("nofollow") || c.contains("none");
                a.noindex |= c.contains("noindex") || c.contains("none");
            }
            Ok(())
        }),
        element!("meta[http-equiv][content]", move |el| {
            let eq = el.get_attribute("http-equiv").unwrap_or_default();
            if eq.eq_ignore_ascii_case("refresh") {
                let c = attr(el, "content").unwrap_or_default();
                if let Some(i) = c.to_ascii_lowercase().find("url=") {
                    let target = c[i + 4..].trim().trim_matches(|ch| ch == '\'' || ch == '"');
                    if !target.is_empty() {
                        a5.borrow_mut().hrefs.push(target.to_string());
                    }
                }
            }
            Ok(())
        }),
        element!("title", move |el| {
            let first = !a6.borrow().title_done;
            if first && a6.borrow().skip == 0 {
                a6.borrow_mut().in_title = true;
                let a = a6.clone();
                el.on_end_tag(lol_html::end_tag!(move |_| {
                    let mut a = a.borrow_mut();
                    a.in_title = false;
                    a.title_done = true;
                    Ok(())
                }))?;
            }
            Ok(())
        }),
        element!(SKIP, move |el| {
            if el.can_have_content() {
                a7.borrow_mut().flush_text();
                a7.borrow_mut().skip += 1;
                let a = a7.clone();
                el.on_end_tag(lol_html::end_tag!(move |_| {
                    let mut a = a.borrow_mut();
                    a.pending.clear();
                    a.skip = a.skip.saturating_sub(1);
                    Ok(())
                }))?;
            }
            Ok(())
        }),
        element!(MAIN, move |el| {
            if el.can_have_content() {
                a8.borrow_mut().flush_text();
                a8.borrow_mut().main += 1;
                let a = a8.clone();
                el.on_end_tag(lol_html::end_tag!(move |_| {
                    let mut a = a.borrow_mut();
                    a.flush_text();
                    a.main = a.main.saturating_sub(1);
                    Ok(())
                }))?;
            }
            Ok(())
        }),
        element!("pre", move |el| {
            {
                let mut a = a9.borrow_mut();
                a.flush_text();
                a.push_break();
                a.pre += 1;
                a.all.push(PRE_START);
                if a.main > 0 {
                    a.main_text.push(PRE_START);
                }
            }
            let a = a9.clone();
            el.on_end_tag(lol_html::end_tag!(move |_| {
                let mut a = a.borrow_mut();
                a.flush_text();
                a.pre = a.pre.saturating_sub(1);
                a.all.push(PRE_END);
                if a.main > 0 {
                    a.main_text.push(PRE_END);
                }
                a.push_break();
                Ok(())
            }))?;
            Ok(())
        }),
        element!(BLOCK, move |el| {
            let mut a = a10.borrow_mut();
            a.flush_text();
            a.push_break();
            drop(a);
            if el.can_have_content() {
                let a = a10.clone();
                let _ = el.on_end_tag(lol_html::end_tag!(move |_| {
                    let mut a = a.borrow_mut();
                    a.flush_text();
                    a.push_break();
                    Ok(())
                }));
            }
            Ok(())
        }),
    ];
    let mut settings = Settings::new();
    for h in handlers {
        settings = settings.append_element_content_handler(h);
    }
    settings = settings.append_element_content_handler(text!("*", move |t| {
        let mut a = a11.borrow_mut();
        if a.in_title {
            if a.title.len() < 2048 {
                a.title.push_str(t.as_str());
            }
        } else if a.skip == 0 {
            a.pending.push_str(t.as_str());
            if t.last_in_text_node() {
                a.flush_text();
            }
        }
        Ok(())
    }));
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    rewriter
        .write(html.as_bytes())
        .map_err(|e| ExtractError::Html(e.to_string()))?;
    rewriter
        .end()
        .map_err(|e| ExtractError::Html(e.to_string()))?;

    let mut a = acc.borrow_mut();
    a.flush_text();
    let base = a
        .base
        .as_deref()
        .and_then(|b| url.join(b).ok())
        .unwrap_or_else(|| url.clone());
    let resolve = |h: &str| base.join(h).ok().map(|u| u.to_string());
    let main = tidy(&a.main_text);
    let text = if main.chars().count() >= 100 {
        main
    } else {
        tidy(&a.all)
    };
    let title = collapse(&html_escape::decode_html_entities(&a.title))
        .trim()
        .to_string();
    Ok(Extracted {
        title: (!title.is_empty()).then_some(title),
        text,
        links: if a.nofollow {
            Vec::new()
        } else {
            a.hrefs.iter().filter_map(|h| resolve(h)).collect()
        },
        canonical: a.canonical.as_deref().and_then(resolve),
        feeds: a.feeds.iter().filter_map(|h| resolve(h)).collect(),
        nofollow: a.nofollow,
        noindex: a.noindex,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(html: &str) -> Extracted {
        extract_html(html, &Url::parse("http://h/dir/page.html").unwrap()).unwrap()
    }

    #[test]
    fn title_text_and_links() {
        let e = ex(
            r#"<html><head><title>A &amp; B</title><base href="/root/"></head><body>
            <nav><a href="/nav">Nav link</a> menu</nav>
            <p>First paragraph with <b>bold</b> text &eacute;.</p><p>Second</p>
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
        let e = ex(r#"<meta name="robots" content="noindex, nofollow"><a href="/a">a</a>"#);
        assert!(e.nofollow && e.noindex);
        assert!(e.links.is_empty());
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
