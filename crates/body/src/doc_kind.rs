//! What kind of document a response is, for the fetcher (which keeps its bytes) and
//! `trawl-doc` (which reads them): PDF, DOCX, plain text, Markdown.

/// The kinds of document read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Pdf,
    Docx,
    Text,
    Markdown,
}

impl DocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Pdf => "pdf",
            DocKind::Docx => "docx",
            DocKind::Text => "text",
            DocKind::Markdown => "markdown",
        }
    }
}

const DOCX_MIME: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/// What a response is, from its media type, its first bytes and its URL's extension (a
/// server answering `application/octet-stream` for a PDF is common); `None` for HTML and
/// everything not read here.
pub fn kind_of(content_type: Option<&str>, url: &str, body: &[u8]) -> Option<DocKind> {
    let mime = content_type
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    if body.starts_with(b"%PDF-") || mime == "application/pdf" {
        return Some(DocKind::Pdf);
    }
    let zip = body.starts_with(b"PK\x03\x04");
    if mime == DOCX_MIME || (zip && ext == "docx") {
        return Some(DocKind::Docx);
    }
    if matches!(mime.as_str(), "text/markdown" | "text/x-markdown")
        || (matches!(ext, "md" | "markdown")
            && matches!(
                mime.as_str(),
                "text/plain" | "" | "application/octet-stream"
            ))
    {
        return Some(DocKind::Markdown);
    }
    if mime == "text/plain" {
        return Some(DocKind::Text);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_type_magic_and_extension() {
        assert_eq!(
            kind_of(Some("application/pdf"), "http://h/a", b""),
            Some(DocKind::Pdf)
        );
        assert_eq!(
            kind_of(
                Some("application/octet-stream"),
                "http://h/a.bin",
                b"%PDF-1.7\n"
            ),
            Some(DocKind::Pdf)
        );
        assert_eq!(
            kind_of(
                Some("application/octet-stream"),
                "http://h/r.DOCX?x=1",
                b"PK\x03\x04.."
            ),
            Some(DocKind::Docx)
        );
        assert_eq!(
            kind_of(Some(DOCX_MIME), "http://h/r", b""),
            Some(DocKind::Docx)
        );
        assert_eq!(
            kind_of(
                Some("text/plain; charset=utf-8"),
                "http://h/README.md",
                b"# x"
            ),
            Some(DocKind::Markdown)
        );
        assert_eq!(
            kind_of(Some("text/plain"), "http://h/a.txt", b"x"),
            Some(DocKind::Text)
        );
        assert_eq!(kind_of(Some("text/html"), "http://h/a.md", b"<p>"), None);
        assert_eq!(
            kind_of(Some("application/zip"), "http://h/a.zip", b"PK\x03\x04"),
            None
        );
        assert_eq!(kind_of(None, "http://h/", b"GIF89a"), None);
    }
}
