//! Google's reading of robots.txt where it differs from a plain RFC 9309 parser (robotxt),
//! applied to the file before it is parsed and to each path before it is matched, as
//! Google's open-source matcher (`robots.cc`) and its documentation read them:
//! - a line is read up to 16,664 bytes (2,083 × 8, Google's limit); the rest is ignored;
//! - a `user-agent` value is its leading run of letters, `_` and `-` (`FOO BAR` and
//!   `FOO/1.0` are the group of `foo`);
//! - an `allow` rule whose last segment is `index.htm` or `index.html` also allows the
//!   directory itself (`/d/index.html` allows `/d/`, as `/d/$`);
//! - percent-encoded characters are matched as written: `%62%61%7A` in a rule is not
//!   `baz` (robotxt decodes the unreserved ones, as RFC 9309 says; Google does not).

use std::borrow::Cow;

/// Google's longest robots.txt line.
pub const MAX_LINE_BYTES: usize = 2083 * 8;

/// The file with Google's readings made explicit, for robotxt to parse.
pub fn prepare(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 64);
    for line in body.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = &line[..line.len().min(MAX_LINE_BYTES)];
        match directive(line) {
            Some((key, value)) if key.eq_ignore_ascii_case(b"user-agent") => {
                out.extend_from_slice(b"user-agent: ");
                out.extend_from_slice(agent_token(value));
            }
            Some((key, value))
                if key.eq_ignore_ascii_case(b"allow") || key.eq_ignore_ascii_case(b"disallow") =>
            {
                let pattern = literal_escapes(value);
                out.extend_from_slice(key);
                out.extend_from_slice(b": ");
                out.extend_from_slice(&pattern);
                if key.eq_ignore_ascii_case(b"allow")
                    && let Some(dir) = index_directory(&pattern)
                {
                    out.extend_from_slice(b"\nallow: ");
                    out.extend_from_slice(&dir);
                }
            }
            _ => out.extend_from_slice(line),
        }
        out.push(b'\n');
    }
    out
}

/// A path as the rules prepared by [`prepare`] expect it.
pub fn path(path: &str) -> Cow<'_, str> {
    match literal_escapes(path.as_bytes()) {
        Cow::Borrowed(_) => Cow::Borrowed(path),
        // Only ASCII was added to valid UTF-8.
        Cow::Owned(v) => Cow::Owned(String::from_utf8_lossy(&v).into_owned()),
    }
}

/// `key: value # comment` (or `key value`), the value trimmed and without its comment.
fn directive(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let line = line.trim_ascii();
    if line.starts_with(b"#") {
        return None;
    }
    let end = line
        .iter()
        .position(|b| *b == b':' || b.is_ascii_whitespace())?;
    let (key, rest) = line.split_at(end);
    let rest = rest.trim_ascii_start();
    let rest = rest.strip_prefix(b":").unwrap_or(rest);
    let value = match rest.iter().position(|b| *b == b'#') {
        Some(i) => &rest[..i],
        None => rest,
    };
    Some((key, value.trim_ascii()))
}

/// The part of a `user-agent` value Google matches: `*`, or the leading letters, `_`, `-`.
fn agent_token(value: &[u8]) -> &[u8] {
    if value.starts_with(b"*") {
        return b"*";
    }
    let n = value
        .iter()
        .take_while(|b| b.is_ascii_alphabetic() || **b == b'_' || **b == b'-')
        .count();
    if n == 0 { value } else { &value[..n] }
}

/// `/d/` + `$` for an allow pattern whose last segment starts with `index.htm`.
fn index_directory(pattern: &[u8]) -> Option<Vec<u8>> {
    let slash = pattern.iter().rposition(|b| *b == b'/')?;
    if !pattern[slash..].starts_with(b"/index.htm") {
        return None;
    }
    let mut dir = pattern[..=slash].to_vec();
    dir.push(b'$');
    Some(dir)
}

/// Every `%HH` that encodes an unreserved character is written `%25HH`, in rules and paths
/// alike: robotxt then compares them as the literal text they are, as Google does.
fn literal_escapes(s: &[u8]) -> Cow<'_, [u8]> {
    let hex = |b: u8| (b as char).to_digit(16);
    let unreserved = |i: usize| -> bool {
        let (Some(h), Some(l)) = (s.get(i + 1).copied(), s.get(i + 2).copied()) else {
            return false;
        };
        let (Some(h), Some(l)) = (hex(h), hex(l)) else {
            return false;
        };
        let c = (h * 16 + l) as u8;
        c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~')
    };
    if !(0..s.len()).any(|i| s[i] == b'%' && unreserved(i)) {
        return Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(s.len() + 8);
    for (i, b) in s.iter().enumerate() {
        out.push(*b);
        if *b == b'%' && unreserved(i) {
            out.extend_from_slice(b"25");
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_split_like_robotxt_reads_them() {
        assert_eq!(
            directive(b"  Disallow : /a # x"),
            Some((&b"Disallow"[..], &b"/a"[..]))
        );
        assert_eq!(directive(b"allow /b"), Some((&b"allow"[..], &b"/b"[..])));
        assert_eq!(directive(b"# only a comment"), None);
        assert_eq!(agent_token(b"FOO BAR"), b"FOO");
        assert_eq!(agent_token(b"Googlebot/2.1"), b"Googlebot");
        assert_eq!(agent_token(b"*"), b"*");
        assert_eq!(literal_escapes(b"/a%7Eb%2F").as_ref(), b"/a%257Eb%2F");
        assert_eq!(literal_escapes(b"/%zz%"), Cow::Borrowed(&b"/%zz%"[..]));
    }
}
