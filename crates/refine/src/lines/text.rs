//! Text joining and normalisation as the converter does it.

use super::tree::El;

/// Where `<sub>`/`<sup>` tags stood: the converter swaps them for placeholder words before
/// reading text and puts the tags back after, so they glue to their neighbours; the final
/// markup strip turns each into a word break.
/// Unicode noncharacters, so no page text (icon fonts use the private-use area) collides.
pub const SUB_OPEN: char = '\u{FDD0}';
pub const SUB_CLOSE: char = '\u{FDD1}';
pub const SUP_OPEN: char = '\u{FDD2}';
pub const SUP_CLOSE: char = '\u{FDD3}';
/// The converter's `$br$` marker for a line break inside a block.
pub const BR: &str = "$br$";

const SPECIAL: &[char] = &[
    '®', '™', '©', '$', '€', '£', '¥', '₹', '∑', '∞', '√', '≠', '≤', '•', '¶', '†', '‡', '—', '–',
    '♥', '★', '☀', '☁',
];
const OTHER: &[char] = &['“', '‘', '[', '(', '”', '’', '。', '，'];

pub fn is_marker(c: char) -> bool {
    ('\u{FDD0}'..='\u{FDD3}').contains(&c)
}

/// XPath's `normalize-space` over the text as lxml re-parses it: markup-looking runs are
/// dropped, entities decoded, ASCII whitespace collapsed.
pub fn normalize_space(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() {
        return String::new();
    }
    let stripped;
    let s = if s.contains('<') || s.contains('&') {
        stripped = decode(&strip_tags(s, ""));
        stripped.as_str()
    } else {
        s
    };
    collapse_ascii(s)
}

fn collapse_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut gap = false;
    for c in s.chars() {
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            gap = !out.is_empty();
        } else {
            if gap {
                out.push(' ');
                gap = false;
            }
            out.push(c);
        }
    }
    out
}

pub fn decode(s: &str) -> String {
    html_escape::decode_html_entities(s).into_owned()
}

/// Removes `<tag ...>`, `</tag>`, `<!...>` and `<?...>` runs the way an HTML tokenizer
/// reads them, writing `sep` where each stood.
pub fn strip_tags(s: &str, sep: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut last = 0;
    while let Some(off) = memchr_lt(&b[i..]) {
        let at = i + off;
        let next = b.get(at + 1).copied().unwrap_or(b' ');
        let opens = next.is_ascii_alphabetic()
            || matches!(next, b'!' | b'?')
            || (next == b'/' && b.get(at + 2).is_some_and(|c| c.is_ascii_alphabetic()));
        if opens {
            // No '>' after this one: none can close a later '<' either.
            let Some(close) = s[at..].find('>') else {
                break;
            };
            out.push_str(&s[last..at]);
            out.push_str(sep);
            i = at + close + 1;
            last = i;
            continue;
        }
        i = at + 1;
    }
    out.push_str(&s[last..]);
    out
}

fn memchr_lt(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'<')
}

/// `str.strip()` in Python: Unicode whitespace (and the separators `\x1c`-`\x1f`).
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
}

pub fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The paragraph joiner (`TextParagraphRecognizer.__combine_text`): a space between two
/// pieces unless the second opens with punctuation or the first ends with an opening mark.
pub fn combine(t1: &str, t2: &str) -> String {
    let t1 = t1.trim_matches(' ');
    let t2 = t2.trim_end_matches(' ');
    if t2.is_empty() {
        return py_strip(t1).to_string();
    }
    if t1.is_empty() {
        return py_strip(t2).to_string();
    }
    let first = t2.chars().next().unwrap_or(' ');
    let last = t1.chars().next_back().unwrap_or(' ');
    let glue = first.is_ascii_punctuation()
        || SPECIAL.contains(&first)
        || OTHER.contains(&first)
        || OTHER.contains(&last)
        || is_marker(first)
        || last == SUB_OPEN
        || last == SUP_OPEN;
    let mut out = String::with_capacity(t1.len() + t2.len() + 1);
    out.push_str(t1);
    if !glue {
        out.push(' ');
    }
    out.push_str(t2);
    py_strip(&out).to_string()
}

/// Replaces every `<sub>`/`<sup>` with its content between markers, as the converter's
/// regex over the serialised markup does (children stay elements, the markers are text).
pub fn unwrap_subsup(el: &mut El) {
    if !el
        .children
        .iter()
        .any(|c| c.tag == "sub" || c.tag == "sup" || !c.children.is_empty())
    {
        return;
    }
    let old = std::mem::take(&mut el.children);
    for mut c in old {
        unwrap_subsup(&mut c);
        let (open, close) = match c.tag.as_str() {
            "sub" => (SUB_OPEN, SUB_CLOSE),
            "sup" => (SUP_OPEN, SUP_CLOSE),
            _ => {
                el.children.push(c);
                continue;
            }
        };
        let mut lead = String::from(open);
        lead.push_str(c.text.as_deref().unwrap_or(""));
        push_flow(el, &lead);
        el.children.append(&mut c.children);
        let mut trail = String::from(close);
        trail.push_str(c.tail.as_deref().unwrap_or(""));
        push_flow(el, &trail);
    }
}

/// Appends text after the last child (its tail), or to the parent's text.
fn push_flow(el: &mut El, t: &str) {
    let slot = match el.children.last_mut() {
        Some(last) => &mut last.tail,
        None => &mut el.text,
    };
    slot.get_or_insert_with(String::new).push_str(t);
}

/// The converter's `normalize_text_segment`: invisible and control characters dropped,
/// exotic spaces made spaces, runs of spaces made one, newline runs kept (lines are split
/// later).
pub fn normalize_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut before = '\0';
    for c in s.chars() {
        let mapped: Option<char> = match c {
            '\n' if before == '\r' => None,
            '\n' | '\r' => Some('\n'),
            '\t' => Some(' '),
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => None,
            '\u{200b}' | '\u{2408}' | '\u{feff}' | '\u{2000}' | '\u{2001}' | '\u{fffd}'
            | '\u{25a1}' => None,
            '\u{2002}'..='\u{200f}' => Some(' '),
            '\u{2060}'..='\u{206f}' => None,
            '\u{a0}' | '\u{202f}' | '\u{205f}' | '\u{2420}' | '\u{3000}' | '\u{303f}' => Some(' '),
            '\u{1da7f}' | '\u{1da80}' | '\u{e0020}' => Some(' '),
            other => Some(other),
        };
        before = c;
        if let Some(m) = mapped {
            if m == ' ' && out.ends_with(' ') {
                continue;
            }
            out.push(m);
        }
    }
    out
}
