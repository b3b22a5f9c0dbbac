//! URLs from sitemaps (XML, sitemap index, plain text, gzip) and RSS/Atom feeds.

use std::io::Read;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Listing {
    pub pages: Vec<String>,
    /// Nested sitemaps of a sitemap index.
    pub sitemaps: Vec<String>,
    /// Set when parsing stopped early; what came before is kept.
    pub error: Option<String>,
    /// A sitemap's `<lastmod>` per page URL (RFC 3339), where it has one.
    pub lastmod: std::collections::BTreeMap<String, String>,
}

/// Decoded size allowed for a gzip sitemap (the protocol's own limit is 50 MB).
pub const MAX_SITEMAP_BYTES: usize = sitemapo::record::BYTE_LIMIT;

fn gunzip_if_needed(body: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if body.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(body)
            .take(MAX_SITEMAP_BYTES as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("corrupt gzip sitemap: {e}"))?;
        if out.len() > MAX_SITEMAP_BYTES {
            return Err(format!(
                "gzip sitemap decodes past {MAX_SITEMAP_BYTES} bytes"
            ));
        }
        Ok(out.into())
    } else {
        Ok(body.into())
    }
}

pub fn parse_sitemap(body: &[u8]) -> Listing {
    parse_with(body, |bytes, out| {
        for record in sitemapo::Parser::new(bytes) {
            match record {
                Ok(sitemapo::Record::Entry(e)) => {
                    let url = e.location.to_string();
                    if let Some(m) = e.modified {
                        out.lastmod.insert(url.clone(), m.to_string());
                    }
                    out.pages.push(url);
                }
                Ok(sitemapo::Record::Sitemap(s)) => out.sitemaps.push(s.location.to_string()),
                Err(e) => {
                    out.error = Some(format!("sitemap parse stopped: {e}"));
                    break;
                }
            }
        }
    })
}

pub fn parse_feed(body: &[u8]) -> Listing {
    parse_with(body, |bytes, out| match feed_rs::parser::parse(bytes) {
        Ok(feed) => {
            for entry in feed.entries {
                // Prefer the alternate (HTML) link; fall back to the first one.
                let link = entry
                    .links
                    .iter()
                    .find(|l| l.rel.as_deref().is_none_or(|r| r == "alternate"))
                    .or(entry.links.first());
                if let Some(l) = link {
                    out.pages.push(l.href.clone());
                }
            }
        }
        Err(e) => out.error = Some(format!("feed parse: {e}")),
    })
}

/// Undoes gzip when the body is gzip, then lets `parse` fill the listing.
fn parse_with(body: &[u8], parse: impl FnOnce(&[u8], &mut Listing)) -> Listing {
    let mut out = Listing::default();
    match gunzip_if_needed(body) {
        Ok(bytes) => parse(&bytes, &mut out),
        Err(e) => out.error = Some(e),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn xml_index_text_and_gzip_sitemaps() {
        let xml =
            br#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <url><loc>http://h/a</loc></url><url><loc>http://h/b</loc></url></urlset>"#;
        assert_eq!(parse_sitemap(xml).pages, vec!["http://h/a", "http://h/b"]);
        let dated = br#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <url><loc>http://h/a</loc><lastmod>2026-11-30</lastmod></url>
            <url><loc>http://h/b</loc><lastmod>not a date</lastmod></url></urlset>"#;
        let l = parse_sitemap(dated);
        assert_eq!(l.pages.len(), 2);
        assert_eq!(
            l.lastmod.get("http://h/a").map(String::as_str),
            Some("2026-11-30T00:00:00Z")
        );
        assert_eq!(
            l.lastmod.get("http://h/b"),
            None,
            "an unreadable date is no date"
        );
        let idx = br#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <sitemap><loc>http://h/s1.xml.gz</loc></sitemap></sitemapindex>"#;
        assert_eq!(parse_sitemap(idx).sitemaps, vec!["http://h/s1.xml.gz"]);
        assert_eq!(
            parse_sitemap(b"http://h/x\nhttp://h/y\n").pages,
            vec!["http://h/x", "http://h/y"]
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(xml).unwrap();
        assert_eq!(parse_sitemap(&gz.finish().unwrap()).pages.len(), 2);
    }

    #[test]
    fn rss_and_atom() {
        let rss = br#"<rss version="2.0"><channel><title>t</title><item><link>http://h/post1</link></item></channel></rss>"#;
        assert_eq!(parse_feed(rss).pages, vec!["http://h/post1"]);
        let atom = br#"<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>x</id><updated>2024-01-01T00:00:00Z</updated>
            <entry><title>e</title><id>y</id><updated>2024-01-01T00:00:00Z</updated><link rel="alternate" href="http://h/post2"/></entry></feed>"#;
        assert_eq!(parse_feed(atom).pages, vec!["http://h/post2"]);
    }

    #[test]
    fn hostile_input_gives_errors_not_panics() {
        assert!(
            parse_feed(b"<rss><channel><item>").error.is_some()
                || parse_feed(b"<rss><channel><item>").pages.is_empty()
        );
        assert!(parse_feed(b"\x1f\x8bgarbage").error.is_some());
        let _ = parse_sitemap(b"<urlset><url><loc>");
        let _ = parse_sitemap(&[0xff; 100]);
    }
}
