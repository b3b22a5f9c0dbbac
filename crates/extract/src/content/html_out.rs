//! The kept part of a page written back as HTML: Firecrawl's `html` format. Only the
//! elements and the attributes that carry content survive (links, images, table spans,
//! list starts, dates, languages); scripts, styles, forms, hidden and dropped nodes do not.
//! Link and image addresses are made absolute when the page's URL is known.

use std::fmt::Write as _;

use url::Url;

use super::dom::Dom;
use super::tags::Tag;

/// Deeper than this, a subtree is written as its escaped text: the writer recurses.
const MAX_DEPTH: usize = 200;

const ATTRS: [&str; 8] = [
    "href", "src", "alt", "title", "colspan", "start", "datetime", "lang",
];

fn is_void(tag: Tag) -> bool {
    matches!(
        tag,
        Tag::Br | Tag::Hr | Tag::Img | Tag::Wbr | Tag::Col | Tag::Area | Tag::Source
    )
}

struct Writer<'a> {
    dom: &'a Dom,
    dropped: &'a [bool],
    base: Option<&'a Url>,
    out: String,
}

/// The subtrees under `roots`, in order, without the nodes `dropped` marks.
pub fn write(dom: &Dom, roots: &[u32], dropped: &[bool], base: Option<&Url>) -> String {
    let mut w = Writer {
        dom,
        dropped,
        base,
        out: String::new(),
    };
    for &r in roots {
        w.node(r, 0);
    }
    w.out
}

impl Writer<'_> {
    fn dropped(&self, i: u32) -> bool {
        self.dropped.get(i as usize).copied().unwrap_or(true)
    }

    fn node(&mut self, i: u32, depth: usize) {
        if self.dropped(i) {
            return;
        }
        let dom = self.dom;
        let tag = dom.node(i).tag;
        if tag == Tag::Text {
            self.out.push_str(&html_escape::encode_text(dom.text_of(i)));
            return;
        }
        if tag.is_never_content() {
            return;
        }
        if depth > MAX_DEPTH {
            for j in i..dom.subtree_end(i) {
                if dom.node(j).tag == Tag::Text && !self.dropped(j) {
                    self.out.push_str(&html_escape::encode_text(dom.text_of(j)));
                }
            }
            return;
        }
        // The document's own wrappers and unknown elements add nothing but their content.
        let name = match tag {
            Tag::Root | Tag::Html | Tag::Other => "",
            t => t.name(),
        };
        if !name.is_empty() {
            self.open(i, name);
            if is_void(tag) {
                return;
            }
        }
        for c in dom.children(i) {
            self.node(c, depth + 1);
        }
        if !name.is_empty() {
            let _ = write!(self.out, "</{name}>");
        }
    }

    fn open(&mut self, i: u32, name: &str) {
        let _ = write!(self.out, "<{name}");
        for a in ATTRS {
            let Some(v) = self.dom.attr(i, a) else {
                continue;
            };
            let v = match (a, self.base) {
                ("href" | "src", Some(base)) => base
                    .join(v.trim())
                    .map(|u| u.to_string())
                    .unwrap_or_else(|_| v.to_string()),
                _ => v.to_string(),
            };
            // A script address is not content, and would run where the HTML is shown.
            if matches!(a, "href" | "src")
                && v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("javascript:")
            {
                continue;
            }
            let _ = write!(
                self.out,
                " {a}=\"{}\"",
                html_escape::encode_double_quoted_attribute(&v)
            );
        }
        self.out.push('>');
    }
}

#[cfg(test)]
mod tests {
    use crate::content::{Options, extract};
    use url::Url;

    fn html(page: &str, main_content: bool) -> String {
        let url = Url::parse("http://h/dir/p").unwrap();
        let opts = Options {
            html: true,
            main_content,
            ..Options::default()
        };
        extract(page, Some(&url), opts).html.unwrap()
    }

    const PAGE: &str = "<html><head><title>T</title><script>var x=1</script></head><body>\
        <header><nav><a href=/>Home</a> <a href=/about>About</a></nav></header>\
        <main><h1>Title</h1><p>A paragraph of the main content, long enough to be chosen \
        as the page's text by any measure, with <a href=\"rel\" onclick=\"evil()\">a link</a> \
        &amp; an <img src=i.png alt=\"pic\" width=3>.</p><p hidden>secret</p>\
        <form><input name=q></form></main>\
        <footer>Copyright 2026 footer text</footer></body></html>";

    #[test]
    fn main_content_html_keeps_content_elements_and_their_addresses() {
        let h = html(PAGE, true);
        assert!(h.contains("<p>A paragraph of the main content"), "{h}");
        assert!(h.contains("<a href=\"http://h/dir/rel\">a link</a>"), "{h}");
        assert!(
            h.contains("<img src=\"http://h/dir/i.png\" alt=\"pic\">"),
            "{h}"
        );
        assert!(h.contains("&amp; an"), "{h}");
        for gone in [
            "onclick", "secret", "footer", "About", "<input", "var x", "width",
        ] {
            assert!(!h.contains(gone), "{gone} in {h}");
        }
    }

    #[test]
    fn the_whole_page_keeps_navigation_and_footer_but_not_scripts() {
        let h = html(PAGE, false);
        for kept in ["<nav>", "About", "<footer>Copyright", "<h1>Title</h1>"] {
            assert!(h.contains(kept), "{kept} not in {h}");
        }
        for gone in ["var x", "secret", "<input"] {
            assert!(!h.contains(gone), "{gone} in {h}");
        }
        let url = Url::parse("http://h/").unwrap();
        let whole = extract(
            PAGE,
            Some(&url),
            Options {
                main_content: false,
                ..Options::default()
            },
        );
        assert!(whole.text.contains("Copyright 2026"), "{}", whole.text);
        let main = extract(PAGE, Some(&url), Options::default());
        assert!(!main.text.contains("Copyright 2026"), "{}", main.text);
    }

    #[test]
    fn script_addresses_and_deep_nesting_do_not_come_through() {
        let h = html("<p><a href=\"JavaScript:alert(1)\">x</a></p>", false);
        assert!(!h.to_ascii_lowercase().contains("javascript"), "{h}");
        let deep = format!("{}text{}", "<div>".repeat(600), "</div>".repeat(600));
        let h = html(&deep, false);
        assert!(h.contains("text"));
    }
}
