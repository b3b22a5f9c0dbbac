//! Turning bytes from the wire into a body: content decoding with a cap on the decoded size
//! (a gzip bomb is cut off, not inflated), charset detection for HTML, and whether a body is
//! HTML at all.

pub mod doc_kind;

use std::io::Read;

use encoding_rs::Encoding;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyError {
    #[error("decoded body exceeds the {limit}-byte decompression cap")]
    DecompressionLimit { limit: usize },
    #[error("corrupt {encoding} stream: {message}")]
    Corrupt { encoding: String, message: String },
    #[error("unsupported content encoding {0:?}")]
    UnsupportedEncoding(String),
}

/// Undoes `Content-Encoding` (gzip, deflate, identity), reading at most `limit` bytes out.
pub fn decode_content(
    raw: &[u8],
    encoding: Option<&str>,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let enc = encoding.unwrap_or("identity").trim().to_ascii_lowercase();
    match enc.as_str() {
        "" | "identity" => Ok(raw.to_vec()),
        "gzip" | "x-gzip" => read_capped(flate2::read::MultiGzDecoder::new(raw), limit, "gzip"),
        "deflate" => {
            // Servers send both zlib-wrapped and raw deflate under this name.
            match read_capped(flate2::read::ZlibDecoder::new(raw), limit, "deflate") {
                Err(BodyError::Corrupt { .. }) => {
                    read_capped(flate2::read::DeflateDecoder::new(raw), limit, "deflate")
                }
                other => other,
            }
        }
        other => Err(BodyError::UnsupportedEncoding(other.to_string())),
    }
}

/// The first `keep` decoded bytes and the whole decoded length, failing past `limit` as
/// [`decode_content`] does: the body is still read to its end (a decompression bomb is
/// still one), but memory holds only the part that is kept.
pub fn decode_prefix(
    raw: &[u8],
    encoding: Option<&str>,
    keep: usize,
    limit: usize,
) -> Result<(Vec<u8>, usize), BodyError> {
    let enc = encoding.unwrap_or("identity").trim().to_ascii_lowercase();
    match enc.as_str() {
        "" | "identity" => Ok((raw[..raw.len().min(keep)].to_vec(), raw.len())),
        "gzip" | "x-gzip" => {
            read_prefix(flate2::read::MultiGzDecoder::new(raw), keep, limit, "gzip")
        }
        "deflate" => {
            match read_prefix(flate2::read::ZlibDecoder::new(raw), keep, limit, "deflate") {
                Err(BodyError::Corrupt { .. }) => read_prefix(
                    flate2::read::DeflateDecoder::new(raw),
                    keep,
                    limit,
                    "deflate",
                ),
                other => other,
            }
        }
        other => Err(BodyError::UnsupportedEncoding(other.to_string())),
    }
}

fn read_prefix(
    r: impl Read,
    keep: usize,
    limit: usize,
    name: &str,
) -> Result<(Vec<u8>, usize), BodyError> {
    let corrupt = |e: std::io::Error| BodyError::Corrupt {
        encoding: name.to_string(),
        message: e.to_string(),
    };
    let mut r = r.take(limit as u64 + 1);
    let mut out = Vec::new();
    (&mut r)
        .take(keep as u64)
        .read_to_end(&mut out)
        .map_err(corrupt)?;
    let rest = std::io::copy(&mut r, &mut std::io::sink()).map_err(corrupt)? as usize;
    let total = out.len() + rest;
    if total > limit {
        return Err(BodyError::DecompressionLimit { limit });
    }
    out.shrink_to_fit();
    Ok((out, total))
}

/// Reads a decoder to the end, failing once more than `limit` bytes come out.
pub fn read_capped(r: impl Read, limit: usize, name: &str) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    r.take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| BodyError::Corrupt {
            encoding: name.to_string(),
            message: e.to_string(),
        })?;
    if out.len() > limit {
        return Err(BodyError::DecompressionLimit { limit });
    }
    Ok(out)
}

/// Picks the charset of an HTML body: byte-order mark, then the `Content-Type` header, then
/// a `<meta>` declaration in the first 1024 bytes, then a statistical guess.
pub fn detect_charset(body: &[u8], content_type: Option<&str>) -> &'static Encoding {
    if let Some((enc, _)) = Encoding::for_bom(body) {
        return enc;
    }
    if let Some(enc) = content_type
        .and_then(charset_param)
        .and_then(|l| Encoding::for_label(l.as_bytes()))
    {
        return enc;
    }
    if let Some(enc) = meta_charset(&body[..body.len().min(1024)]) {
        return enc;
    }
    let mut det = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    det.feed(&body[..body.len().min(64 * 1024)], true);
    det.guess(None, chardetng::Utf8Detection::Allow)
}

/// Decodes an HTML body to UTF-8 with the detected charset; malformed sequences become U+FFFD.
pub fn decode_html(body: &[u8], content_type: Option<&str>) -> (String, &'static str) {
    let enc = detect_charset(body, content_type);
    let (text, used, _) = enc.decode(body);
    (text.into_owned(), used.name())
}

/// The media type of a `Content-Type` value: lowercased, without parameters
/// (`"Text/HTML; charset=utf-8"` is `"text/html"`).
pub fn mime_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Whether a response is HTML: its media type is `text/html` or `application/xhtml+xml`;
/// without a type (no header, or an empty media type), whether the first 512 bytes start
/// with a doctype or hold an `<html` tag. The crawl's test.
pub fn is_html(content_type: Option<&str>, body: &[u8]) -> bool {
    match content_type.map(mime_type).as_deref() {
        Some("text/html") | Some("application/xhtml+xml") => true,
        Some("") | None => {
            let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            head.trim_start().starts_with("<!doctype html") || head.contains("<html")
        }
        _ => false,
    }
}

/// Whether a `Content-Type` value mentions HTML anywhere (`text/html` or
/// `application/xhtml`, any case, parameters included): the looser test web archives get,
/// whose stored headers are often odd. No sniffing: an empty value is not HTML.
pub fn mentions_html(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.contains("text/html") || ct.contains("application/xhtml")
}

fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
    })
}

fn meta_charset(head: &[u8]) -> Option<&'static Encoding> {
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(pos) = find(&lower[from..], b"<meta") {
        let start = from + pos;
        let end = find(&lower[start..], b">").map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        if let Some(cpos) = find(tag, b"charset") {
            let rest = &tag[cpos + 7..];
            let rest = rest.strip_prefix(b" ").unwrap_or(rest);
            if let Some(rest) = rest.strip_prefix(b"=") {
                let value: Vec<u8> = rest
                    .iter()
                    .copied()
                    .skip_while(|c| matches!(c, b' ' | b'"' | b'\''))
                    .take_while(|c| !matches!(c, b' ' | b'"' | b'\'' | b';' | b'/' | b'>'))
                    .collect();
                if let Some(enc) = Encoding::for_label(&value) {
                    // A page that claims UTF-16 in ASCII-compatible bytes is lying (HTML spec).
                    return Some(
                        if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
                            encoding_rs::UTF_8
                        } else {
                            enc
                        },
                    );
                }
            }
        }
        from = end.max(start + 1);
        if from >= lower.len() {
            break;
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_kept_and_the_whole_is_still_checked() {
        let html = "<p>words words words</p>".repeat(100_000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, html.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let (head, total) = decode_prefix(&gz, Some("gzip"), 1000, 10 << 20).unwrap();
        assert_eq!(head, html.as_bytes()[..1000]);
        assert_eq!(total, html.len());
        assert!(head.capacity() < 4096, "only the prefix is held");
        assert!(matches!(
            decode_prefix(&gz, Some("gzip"), 1000, 1 << 20),
            Err(BodyError::DecompressionLimit { .. })
        ));
        let (head, total) = decode_prefix(b"plain", None, 3, 10).unwrap();
        assert_eq!((head.as_slice(), total), (&b"pla"[..], 5));
    }
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_within_cap_decodes_and_bomb_is_cut() {
        let small = gzip(b"hello");
        assert_eq!(decode_content(&small, Some("gzip"), 10).unwrap(), b"hello");
        let bomb = gzip(&vec![0u8; 10_000_000]);
        assert!(bomb.len() < 100_000);
        assert_eq!(
            decode_content(&bomb, Some("gzip"), 1_000_000),
            Err(BodyError::DecompressionLimit { limit: 1_000_000 })
        );
        assert!(matches!(
            decode_content(b"not gzip", Some("gzip"), 10),
            Err(BodyError::Corrupt { .. })
        ));
        assert!(matches!(
            decode_content(b"x", Some("br"), 10),
            Err(BodyError::UnsupportedEncoding(_))
        ));
    }

    #[test]
    fn charset_order_bom_header_meta_detector() {
        let latin1 = b"<html><body>caf\xe9 cr\xe8me br\xfbl\xe9e, d\xe9j\xe0 vu, \xe0 la carte</body></html>";
        let (text, name) = decode_html(latin1, Some("text/html; charset=ISO-8859-1"));
        assert!(text.contains("café crème brûlée"), "{text}");
        // WHATWG: the ISO-8859-1 label means windows-1252.
        assert_eq!(name, "windows-1252");
        let meta = b"<html><head><meta charset=\"windows-1252\"></head><body>caf\xe9</body></html>";
        assert_eq!(
            detect_charset(meta, Some("text/html")),
            encoding_rs::WINDOWS_1252
        );
        let http_equiv =
            b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=shift_jis\">";
        assert_eq!(detect_charset(http_equiv, None), encoding_rs::SHIFT_JIS);
        let bom = b"\xef\xbb\xbf<html>caf\xc3\xa9";
        assert_eq!(
            detect_charset(bom, Some("text/html; charset=iso-8859-1")),
            encoding_rs::UTF_8
        );
        // Undeclared Shift_JIS: the detector must find it.
        let (sjis, _, _) = encoding_rs::SHIFT_JIS.encode("<html><body>日本語のテキストです。これはテストのページです。東京都の天気は晴れです。</body></html>");
        let (text, name) = decode_html(&sjis, Some("text/html"));
        assert_eq!(name, "Shift_JIS");
        assert!(text.contains("日本語"));
    }

    #[test]
    fn html_by_type_then_by_sniffing() {
        assert!(is_html(Some("text/html"), b""));
        assert!(is_html(Some("Text/HTML; charset=utf-8"), b""));
        assert!(is_html(Some(" application/xhtml+xml "), b""));
        assert!(!is_html(Some("text/plain"), b"<html>"));
        assert!(!is_html(Some("application/xhtml"), b""));
        assert!(is_html(None, b"  <!DOCTYPE html><p>x"));
        assert!(is_html(Some(""), b"junk <HTML> junk"));
        assert!(is_html(Some("; charset=utf-8"), b"<html>"));
        assert!(!is_html(None, b"<p>no html tag</p>"));
        assert!(mentions_html("TEXT/HTML;charset=utf-8"));
        assert!(mentions_html("application/xhtml"));
        assert!(!mentions_html(""));
        assert!(!mentions_html("text/plain"));
        assert_eq!(mime_type("Text/HTML ; charset=x"), "text/html");
    }

    #[test]
    fn meta_scan_survives_junk() {
        for junk in [
            &b"<meta"[..],
            b"<meta charset",
            b"<meta charset=",
            b"<meta charset=>",
            b"<<<<meta>",
        ] {
            let _ = detect_charset(junk, None);
        }
    }
}
