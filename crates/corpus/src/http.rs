//! The HTTP response inside a WARC `response` record: status line, the headers that matter,
//! and the body with its transfer coding undone. Archived responses are often odd (a body
//! announced as chunked that is not, headers with LF line ends); nothing here fails: the
//! worst case is the raw bytes.

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    pub body: Vec<u8>,
}

fn header_end(b: &[u8]) -> Option<(usize, usize)> {
    let crlf = memchr::memmem::find(b, b"\r\n\r\n").map(|p| (p, p + 4));
    let lf = memchr::memmem::find(b, b"\n\n").map(|p| (p, p + 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// Parses `HTTP/1.x 200 OK` + headers + body. `None` when the record holds no HTTP response.
pub fn parse(record: &[u8]) -> Option<Response> {
    if !record.starts_with(b"HTTP/") {
        return None;
    }
    let (end, body_start) = header_end(record).unwrap_or((record.len(), record.len()));
    let head = String::from_utf8_lossy(&record[..end]);
    let mut lines = head.lines();
    let status = lines
        .next()?
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut r = Response {
        status,
        ..Response::default()
    };
    let mut chunked = false;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-type" => r.content_type = Some(v.to_string()),
            "content-encoding" => r.content_encoding = Some(v.to_ascii_lowercase()),
            "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let body = &record[body_start.min(record.len())..];
    r.body = if chunked {
        dechunk(body).unwrap_or_else(|| body.to_vec())
    } else {
        body.to_vec()
    };
    Some(r)
}

/// Undoes chunked transfer coding; `None` when the body is not validly chunked (many
/// archivers store the decoded body but keep the header).
pub fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let nl = memchr::memchr(b'\n', b)?;
        let size_line = std::str::from_utf8(&b[..nl]).ok()?.trim();
        let size_hex = size_line.split(';').next()?.trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        b = &b[nl + 1..];
        if size == 0 {
            return Some(out);
        }
        if b.len() < size {
            // A cut-off last chunk: keep what arrived.
            out.extend_from_slice(b);
            return Some(out);
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size..];
        b = b
            .strip_prefix(b"\r\n")
            .or_else(|| b.strip_prefix(b"\n"))
            .unwrap_or(b);
        if b.is_empty() {
            return Some(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_headers_and_chunks() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.content_type.as_deref(), Some("text/html; charset=utf-8"));
        assert_eq!(r.body, b"hello world");
        // Announced as chunked, stored decoded: kept as it is.
        let r = parse(b"HTTP/1.1 404 Not Found\nTransfer-Encoding: chunked\n\n<html>gone</html>")
            .unwrap();
        assert_eq!(r.status, 404);
        assert_eq!(r.body, b"<html>gone</html>");
        assert!(parse(b"GET / HTTP/1.1\r\n\r\n").is_none());
        assert_eq!(parse(b"HTTP/1.0").unwrap().status, 0);
    }
}
