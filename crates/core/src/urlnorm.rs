//! URL normalization: one spelling per resource, so the seen-set catches variants.
//!
//! `url::Url` already lower-cases scheme and host, drops default ports and resolves dot
//! segments; on top of that we drop fragments and empty queries, normalize percent-encoding
//! and remove tracking parameters.

use url::Url;

/// Query parameters removed by default: analytics tags that never change the content.
/// A trailing `*` matches a prefix.
pub const DEFAULT_TRACKING_PARAMS: &[&str] = &[
    "utm_*", "gclid", "fbclid", "msclkid", "dclid", "yclid", "mc_cid", "mc_eid", "_ga", "_gl",
    "igshid", "ref_src",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("unparsable URL: {0}")]
    Parse(String),
    #[error("unsupported scheme {0:?} (only http and https are fetched)")]
    Scheme(String),
    #[error("URL has no host")]
    NoHost,
}

/// Normalizes URLs with a fixed list of removable query parameters.
#[derive(Debug, Clone)]
pub struct Normalizer {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl Default for Normalizer {
    fn default() -> Self {
        Self::new(DEFAULT_TRACKING_PARAMS.iter().copied())
    }
}

impl Normalizer {
    pub fn new<'a>(params: impl IntoIterator<Item = &'a str>) -> Self {
        let mut exact = Vec::new();
        let mut prefixes = Vec::new();
        for p in params {
            let p = p.to_ascii_lowercase();
            match p.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_string()),
                None => exact.push(p),
            }
        }
        Self { exact, prefixes }
    }

    fn is_tracking(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        self.exact.contains(&name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }

    /// Parses `raw` (relative to `base` when given) and normalizes it.
    pub fn parse(&self, raw: &str, base: Option<&Url>) -> Result<Url, UrlError> {
        let raw = raw.trim();
        let url = match base {
            Some(b) => b.join(raw),
            None => Url::parse(raw),
        }
        .map_err(|e| UrlError::Parse(format!("{raw:?}: {e}")))?;
        self.normalize(url)
    }

    pub fn normalize(&self, mut url: Url) -> Result<Url, UrlError> {
        match url.scheme() {
            "http" | "https" => {}
            other => return Err(UrlError::Scheme(other.to_string())),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(UrlError::NoHost);
        }
        url.set_fragment(None);
        let _ = url.set_username("");
        let _ = url.set_password(None);

        let path = normalize_percent(url.path());
        if path != url.path() {
            url.set_path(&path);
        }
        match url.query() {
            None => {}
            Some("") => url.set_query(None),
            Some(q) => {
                let kept: Vec<&str> = q
                    .split('&')
                    .filter(|pair| !pair.is_empty())
                    .filter(|pair| {
                        let name = pair.split('=').next().unwrap_or("");
                        !self.is_tracking(&percent_decode_lossy(name))
                    })
                    .collect();
                if kept.is_empty() {
                    url.set_query(None);
                } else {
                    let q2 = normalize_percent(&kept.join("&"));
                    if q2 != q {
                        url.set_query(Some(&q2));
                    }
                }
            }
        }
        Ok(url)
    }
}

/// `host[:port]`: the unit of politeness.
pub fn host_key(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => String::new(),
    }
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Decodes escapes of unreserved characters and upper-cases the hex of the others
/// (RFC 3986 section 6.2.2).
fn normalize_percent(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex_val(b[i + 1]), hex_val(b[i + 2]))
        {
            let v = h * 16 + l;
            if is_unreserved(v) {
                out.push(v as char);
            } else {
                out.push('%');
                out.push(b[i + 1].to_ascii_uppercase() as char);
                out.push(b[i + 2].to_ascii_uppercase() as char);
            }
            i += 3;
            continue;
        }
        // Safe: we only split at ASCII bytes, so multi-byte characters pass through whole.
        let ch_len = utf8_len(b[i]);
        out.push_str(&s[i..(i + ch_len).min(s.len())]);
        i += ch_len;
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xFF => 4,
        _ => 1,
    }
}

fn percent_decode_lossy(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex_val(b[i + 1]), hex_val(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> String {
        Normalizer::default().parse(s, None).unwrap().to_string()
    }

    #[test]
    fn normalizes_the_usual_variants() {
        assert_eq!(
            n("HTTP://Example.COM:80/a/./b/../c#frag"),
            "http://example.com/a/c"
        );
        assert_eq!(n("https://example.com:443/?"), "https://example.com/");
        assert_eq!(
            n("http://example.com/%7euser/%2f%41"),
            "http://example.com/~user/%2FA"
        );
        assert_eq!(
            n("http://example.com/p?utm_source=x&id=3&fbclid=y&UTM_Medium=z"),
            "http://example.com/p?id=3"
        );
        assert_eq!(
            n("http://example.com/p?utm_source=x"),
            "http://example.com/p"
        );
        assert_eq!(
            n("http://user:pw@example.com:8080/"),
            "http://example.com:8080/"
        );
        assert_eq!(
            n("http://example.com/ü%C3%BC"),
            "http://example.com/%C3%BC%C3%BC"
        );
    }

    #[test]
    fn rejects_what_cannot_be_fetched() {
        let norm = Normalizer::default();
        assert!(matches!(
            norm.parse("mailto:a@b.c", None),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(
            norm.parse("javascript:void(0)", None),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(
            norm.parse("not a url", None),
            Err(UrlError::Parse(_))
        ));
    }

    #[test]
    fn resolves_relative_links() {
        let base = Url::parse("http://h/docs/a/index.html").unwrap();
        let norm = Normalizer::default();
        assert_eq!(
            norm.parse("../b.html", Some(&base)).unwrap().as_str(),
            "http://h/docs/b.html"
        );
        assert_eq!(
            norm.parse("?q=1#x", Some(&base)).unwrap().as_str(),
            "http://h/docs/a/index.html?q=1"
        );
    }

    #[test]
    fn host_key_keeps_non_default_ports() {
        assert_eq!(
            host_key(&Url::parse("http://a.b:8080/x").unwrap()),
            "a.b:8080"
        );
        assert_eq!(host_key(&Url::parse("https://a.b:443/x").unwrap()), "a.b");
    }

    #[test]
    fn percent_handling_never_panics_on_odd_input() {
        for s in ["%", "%4", "%zz", "a%", "%%41", "é%", "%C3"] {
            let _ = normalize_percent(s);
            let _ = percent_decode_lossy(s);
        }
    }
}
