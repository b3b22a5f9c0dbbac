//! PDF through `pdf_oxide` (chosen by measurement on Debian's R manuals and Chromium's
//! prints: word F1 0.997 to 1.000 against poppler's `pdftotext`, where pdf-extract, lopdf
//! and unpdf lose 0.5 to 5 points on browser-made files; `bench/documents`). Text is read
//! page by page, the deadline and the limits checked between pages; a page with no text
//! layer, or only a line of text over an image, is counted scanned.

use std::time::Instant;

use pdf_oxide::PdfDocument;

use crate::{DocError, DocText, Limits};

/// Letters and digits under which a page with an image is a scan (a browser's print of an
/// image still carries its date and address).
const SCAN_MAX_ALNUM: usize = 64;

pub(crate) fn extract(
    bytes: &[u8],
    limits: &Limits,
    started: Instant,
) -> Result<DocText, DocError> {
    let doc = PdfDocument::from_bytes(bytes.to_vec())
        .map_err(|e| DocError::Unreadable(format!("PDF: {e}")))?;
    // Most encrypted PDFs only restrict printing or copying: their user password is empty.
    if doc.is_encrypted() && !doc.is_authenticated() && !doc.authenticate(b"").unwrap_or(false) {
        return Err(DocError::Encrypted);
    }
    let pages = doc
        .page_count()
        .map_err(|e| DocError::Unreadable(format!("PDF page tree: {e}")))?;
    let mut out = DocText::default();
    info(&doc, &mut out);
    for i in 0..pages {
        if i >= limits.max_pages || started.elapsed() >= limits.deadline {
            out.cut = true;
            break;
        }
        // A page that does not parse is a page without text; the rest are still read.
        let text = doc.extract_text(i).unwrap_or_default();
        out.pages += 1;
        if scanned(&doc, i, &text) {
            out.scanned_pages += 1;
        }
        let text = text.trim();
        if !text.is_empty() {
            out.push_page(text);
        }
        if out.text.len() >= limits.max_chars {
            out.cut = true;
            break;
        }
    }
    // A scan's only text is what was printed around its images (a date, an address).
    if out.title.is_none() && out.scanned_pages < out.pages {
        out.title = out
            .text
            .lines()
            .map(str::trim)
            .find(|l| l.chars().any(char::is_alphabetic))
            .filter(|l| l.chars().count() <= 200)
            .map(str::to_string);
    }
    out.finish();
    Ok(out)
}

fn scanned(doc: &PdfDocument, page: usize, text: &str) -> bool {
    if !doc.has_text_layer(page).unwrap_or(true) {
        return true;
    }
    text.chars().filter(|c| c.is_alphanumeric()).count() < SCAN_MAX_ALNUM
        && doc.extract_images(page).is_ok_and(|v| !v.is_empty())
}

/// The Info dictionary's title, author and dates.
fn info(doc: &PdfDocument, out: &mut DocText) {
    let Some(info) = doc
        .trailer()
        .as_dict()
        .and_then(|t| t.get("Info"))
        .and_then(|i| doc.resolve_references(i, 2).ok())
    else {
        return;
    };
    let Some(dict) = info.as_dict() else {
        return;
    };
    let get = |k: &str| -> Option<String> {
        let v = doc.resolve_references(dict.get(k)?, 1).ok()?;
        let s = pdf_oxide::optional_content::decode_pdf_text_string(v.as_string()?);
        let s = s.trim().to_string();
        (!s.is_empty()).then_some(s)
    };
    out.title = get("Title");
    out.author = get("Author");
    out.created = get("CreationDate").and_then(|d| pdf_date(&d));
    out.modified = get("ModDate").and_then(|d| pdf_date(&d));
}

/// `D:20221110123456+01'00'` as `2022-11-10T12:34:56+01:00` (as much of it as is given).
pub(crate) fn pdf_date(s: &str) -> Option<String> {
    let s = s.trim().strip_prefix("D:").unwrap_or(s.trim());
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    if digits.len() < 4 {
        return None;
    }
    let part = |a: usize, b: usize, default: &str| digits.get(a..b).unwrap_or(default).to_string();
    let (y, mo, d) = (part(0, 4, ""), part(4, 6, "01"), part(6, 8, "01"));
    if digits.len() < 12 {
        return Some(format!("{y}-{mo}-{d}"));
    }
    let (h, mi, sec) = (part(8, 10, "00"), part(10, 12, "00"), part(12, 14, "00"));
    let rest = &s[digits.len()..];
    let zone = match rest.chars().next() {
        Some('Z') | None => "Z".to_string(),
        Some(sign @ ('+' | '-')) => {
            let z: String = rest[1..].chars().filter(char::is_ascii_digit).collect();
            match (z.get(0..2), z.get(2..4)) {
                (Some(zh), Some(zm)) => format!("{sign}{zh}:{zm}"),
                (Some(zh), None) => format!("{sign}{zh}:00"),
                _ => "Z".to_string(),
            }
        }
        Some(_) => "Z".to_string(),
    };
    Some(format!("{y}-{mo}-{d}T{h}:{mi}:{sec}{zone}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_dates() {
        assert_eq!(
            pdf_date("D:20221110123456+01'00'").as_deref(),
            Some("2022-11-10T12:34:56+01:00")
        );
        assert_eq!(pdf_date("D:20221110").as_deref(), Some("2022-11-10"));
        assert_eq!(pdf_date("D:2022").as_deref(), Some("2022-01-01"));
        assert_eq!(
            pdf_date("D:20221110123456Z").as_deref(),
            Some("2022-11-10T12:34:56Z")
        );
        assert_eq!(pdf_date("garbage"), None);
        assert_eq!(
            pdf_date("D:20221110123456-05"),
            Some("2022-11-10T12:34:56-05:00".into())
        );
    }

    #[test]
    fn not_a_pdf_is_an_error() {
        let r = extract(b"%PDF-1.7\nnot really", &Limits::default(), Instant::now());
        assert!(matches!(r, Err(DocError::Unreadable(_))), "{r:?}");
    }
}
