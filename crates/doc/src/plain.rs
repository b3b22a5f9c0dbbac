//! Plain text and Markdown: decoded (UTF-8, else the bytes' likely charset), cut at the
//! character limit; Markdown keeps its source and gives its text without the markup.

use crate::{DocText, Limits};

fn decode(bytes: &[u8]) -> String {
    // UTF-8 (a BOM dropped), else what the bytes most likely are: as an HTML body is.
    trawl_body::decode_html(bytes, None).0
}

fn cut(mut s: String, limits: &Limits) -> (String, bool) {
    if s.len() <= limits.max_chars {
        return (s, false);
    }
    let mut at = limits.max_chars;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s.truncate(at);
    (s, true)
}

/// Plain text: its first line is the title when it is short and followed by a blank line
/// or an underline (a README's way).
pub(crate) fn text(bytes: &[u8], limits: &Limits) -> DocText {
    let (text, was_cut) = cut(decode(bytes).replace("\r\n", "\n"), limits);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").trim();
    let second = lines.next().unwrap_or("").trim();
    let titled = !first.is_empty()
        && first.chars().count() <= 120
        && (second.is_empty() || second.chars().all(|c| matches!(c, '=' | '-')));
    let mut out = DocText {
        title: titled.then(|| first.to_string()),
        markdown: text.clone(),
        text,
        cut: was_cut,
        ..DocText::default()
    };
    out.finish();
    out
}

/// Markdown: kept as it is; its text without headings' marks, emphasis, code fences,
/// link targets and images; the title from front matter or the first heading.
pub(crate) fn markdown(bytes: &[u8], limits: &Limits) -> DocText {
    let (source, was_cut) = cut(decode(bytes).replace("\r\n", "\n"), limits);
    let (front_title, body) = front_matter(&source);
    let mut text = String::with_capacity(body.len());
    let mut fenced = false;
    for line in body.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        let plain = if fenced {
            line.to_string()
        } else {
            strip_inline(t.trim_start_matches(['#', '>']).trim_start())
        };
        text.push_str(plain.trim_end());
        text.push('\n');
    }
    let mut out = DocText {
        title: front_title,
        markdown: body.to_string(),
        text,
        cut: was_cut,
        ..DocText::default()
    };
    if out.title.is_none() {
        out.title = out.first_heading();
    }
    out.finish();
    out
}

/// A YAML front matter's `title:` and the document after it.
fn front_matter(s: &str) -> (Option<String>, &str) {
    let Some(rest) = s.strip_prefix("---\n") else {
        return (None, s);
    };
    let Some(end) = rest.find("\n---") else {
        return (None, s);
    };
    let title = rest[..end].lines().find_map(|l| {
        l.strip_prefix("title:")
            .map(|t| t.trim().trim_matches(['"', '\'']).to_string())
            .filter(|t| !t.is_empty())
    });
    let after = &rest[end + 4..];
    (title, after.strip_prefix('\n').unwrap_or(after))
}

/// A line's text without emphasis marks, inline code ticks, images and link targets.
fn strip_inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '*' | '_' | '`' => {}
            '!' if line[i + 1..].starts_with('[') => {}
            ']' if line[i + 1..].starts_with('(') => {
                // Skip the link target up to its closing parenthesis.
                let mut depth = 0;
                for (_, d) in chars.by_ref() {
                    match d {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
            '[' => {}
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_text_title_and_front_matter() {
        let md = "---\ntitle: \"Guide\"\n---\n# Install\n\nRun **cargo** `build`, see [the docs](http://x/(y)).\n\n```\nlet a = *b;\n```\n![logo](l.png)\n";
        let d = markdown(md.as_bytes(), &Limits::default());
        assert_eq!(d.title.as_deref(), Some("Guide"));
        assert!(d.markdown.starts_with("# Install"), "{}", d.markdown);
        assert!(
            d.text.contains("Run cargo build, see the docs."),
            "{}",
            d.text
        );
        assert!(
            d.text.contains("let a = *b;"),
            "code kept as written: {}",
            d.text
        );
        assert!(!d.text.contains("http://x"), "{}", d.text);
        let d = markdown(b"Intro\n\n## Usage\n", &Limits::default());
        assert_eq!(d.title.as_deref(), Some("Usage"));
    }

    #[test]
    fn text_title_charset_and_cut() {
        let d = text(b"README\n======\n\nSome words.", &Limits::default());
        assert_eq!(d.title.as_deref(), Some("README"));
        let d = text(b"caf\xe9 cr\xe8me\nmore", &Limits::default());
        assert!(d.text.starts_with("café crème"), "{}", d.text);
        let limits = Limits {
            max_chars: 5,
            ..Limits::default()
        };
        let d = text("ééééé".as_bytes(), &limits);
        assert!(d.cut && d.text == "éé", "{:?}", d.text);
    }
}
