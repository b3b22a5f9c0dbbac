//! Extraction from fetched bytes, with no crawl around it: the main content, Markdown,
//! metadata and links of an HTML page ([`extract`], [`extract_html`], and [`content`] for the
//! options), and the URLs of sitemaps and feeds ([`parse_sitemap`], [`parse_feed`]).
//!
//! Plain functions: no messages, no async runtime. Every call returns: broken markup is
//! repaired the way browsers do, oversized or too deeply nested pages are cut, and a
//! sitemap or feed that cannot be read yields what came before the fault and an error.

pub mod content;
pub mod discovery;
mod html;
mod render_rule;
pub mod tags;

use url::Url;

pub use discovery::{Listing, MAX_SITEMAP_BYTES, parse_feed, parse_sitemap};
pub use html::{Document, extract_html};
pub use render_rule::{RENDER_MAX_CHARS, render_reason};
pub use tags::{BadSelector, check_selectors, filter_tags};

/// Extracts one HTML page from its body as received (after content decoding): the charset
/// comes from a byte-order mark, the `Content-Type` header, a `<meta>` declaration or a
/// guess ([`trawl_body::decode_html`]), then [`extract_html`] on the UTF-8 text. `url` is
/// the page's address (it resolves relative links).
pub fn extract(body: &[u8], url: &Url, content_type: Option<&str>) -> Document {
    let (html, _charset) = trawl_body::decode_html(body, content_type);
    extract_html(&html, url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_decoded_with_their_charset() {
        let url = Url::parse("http://h/p.html").unwrap();
        let latin1 = b"<html><head><title>Caf\xe9</title></head><body><p>Cr\xe8me br\xfbl\xe9e, \
            a sentence long enough to be the page's text.</p></body></html>";
        let d = extract(latin1, &url, Some("text/html; charset=iso-8859-1"));
        assert_eq!(d.title.as_deref(), Some("Café"));
        assert!(d.text.contains("Crème brûlée"), "{}", d.text);
        let utf8 = "<title>Café</title><p>Crème</p>";
        assert_eq!(
            extract(utf8.as_bytes(), &url, None),
            extract_html(utf8, &url)
        );
    }
}
