//! The paragraph recognizer (`recognizer/text.py`): what no other recognizer took is cut into
//! paragraphs at block elements, each paragraph's text joined by the converter's rules.

use super::code::CC_CODE_INLINE;
use super::text::{BR, combine, normalize_space, unwrap_subsup};
use super::tree::El;

pub const INLINE_TAGS: &[&str] = &[
    "a",
    "abbr",
    "acronym",
    "b",
    "bdo",
    "big",
    "br",
    "button",
    "cite",
    "code",
    "dfn",
    "em",
    "i",
    "img",
    "input",
    "kbd",
    "label",
    "map",
    "object",
    "q",
    "samp",
    "script",
    "select",
    "small",
    "span",
    "strong",
    "sub",
    "sup",
    "textarea",
    "time",
    "var",
    "u",
    "s",
    "cccode-inline",
    "ccmath-inline",
    "marked-tail",
    "marked-text",
    "math",
    "mspace",
    "font",
    "nobr",
    "bdi",
    "mjx-container",
    "mjx-assistive-mml",
    "strike",
    "wbr",
    "ins",
    "xhtml",
];

/// One piece of a paragraph: text, or inline code / math kept apart from the text around it.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Code(String),
    Math(String),
}

fn is_block(e: &El) -> bool {
    if INLINE_TAGS.contains(&e.tag.as_str()) {
        e.children.iter().any(is_block)
    } else {
        true
    }
}

fn has_block_children(e: &El) -> bool {
    e.children.iter().any(is_block)
}

/// The paragraphs of a fragment, each as the element holding its content.
pub fn paragraphs(root: &El) -> Vec<El> {
    let mut out = Vec::new();
    process(root, &mut out);
    out
}

enum Inline<'a> {
    Text(String),
    Elem(&'a El),
}

fn flush(node: &El, run: &mut Vec<Inline<'_>>, out: &mut Vec<El>) {
    if run.is_empty() {
        return;
    }
    let mut p = node.shell();
    let mut last: Option<usize> = None;
    for piece in run.drain(..) {
        match piece {
            // Text after an element: the converter appends it to the original element's
            // tail, not to the copy it keeps, whose tail is the one it had.
            Inline::Text(t) if last.is_none() => match &mut p.text {
                Some(x) if !x.is_empty() => {
                    x.push(' ');
                    x.push_str(&t);
                }
                _ => p.text = Some(t),
            },
            Inline::Text(_) => {}
            Inline::Elem(e) => {
                p.children.push(e.clone());
                last = Some(p.children.len() - 1);
            }
        }
    }
    out.push(p);
}

fn process<'a>(node: &'a El, out: &mut Vec<El>) {
    let mut run: Vec<Inline<'a>> = Vec::new();
    if let Some(t) = &node.text
        && !t.trim().is_empty()
    {
        run.push(Inline::Text(t.trim().to_string()));
    }
    for child in &node.children {
        if is_block(child) {
            flush(node, &mut run, out);
            if !has_block_children(child) {
                let mut p = child.clone();
                p.tail = None;
                out.push(p);
            } else {
                process(child, out);
            }
        } else {
            run.push(Inline::Elem(child));
        }
        if let Some(t) = &child.tail
            && !t.trim().is_empty()
        {
            run.push(Inline::Text(t.trim().to_string()));
        }
    }
    flush(node, &mut run, out);
}

/// Past this many joins in one paragraph, pieces are appended without re-reading the whole
/// text (the converter re-normalises it at every join: quadratic on hostile pages).
const MAX_FULL_JOINS: usize = 2000;

/// `__get_paragraph_text`: the pieces of one paragraph.
pub fn pieces(p: &El) -> Vec<Piece> {
    let mut p = p.clone();
    p.tail = None;
    unwrap_subsup(&mut p);
    let mut out = Vec::new();
    let mut joins = 0usize;
    let fin = walk(&p, String::new(), &mut out, &mut joins);
    if !fin.is_empty() {
        out.push(Piece::Text(fin));
    }
    out.into_iter()
        .map(|x| match x {
            Piece::Text(t) => Piece::Text(t.replace(BR, "\n")),
            other => other,
        })
        .collect()
}

fn join_text(text: String, piece: &str, renormalize: bool, joins: &mut usize) -> String {
    *joins += 1;
    if *joins <= MAX_FULL_JOINS {
        let t1 = if renormalize {
            normalize_space(&text)
        } else {
            text
        };
        return combine(&t1, piece);
    }
    let mut text = text;
    if !text.is_empty() && !piece.is_empty() {
        text.push(' ');
    }
    text.push_str(piece.trim());
    text
}

fn walk(el: &El, mut text: String, out: &mut Vec<Piece>, joins: &mut usize) -> String {
    if el.is("ccmath-inline") || el.is(CC_CODE_INLINE) {
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        let c = el.text.clone().unwrap_or_default();
        out.push(if el.is(CC_CODE_INLINE) {
            Piece::Code(c)
        } else {
            Piece::Math(c)
        });
    } else if el.is("br") {
        text.push_str(BR);
    } else if el.is("audio") {
    } else {
        if let Some(t) = &el.text
            && !t.trim().is_empty()
        {
            text = join_text(text, &normalize_space(t.trim()), true, joins);
        }
        for c in &el.children {
            text = walk(c, text, out, joins);
        }
    }
    if let Some(tail) = &el.tail
        && !tail.trim().is_empty()
    {
        let stripped = tail.trim();
        let norm = normalize_space(stripped);
        let lead = tail.starts_with(' ')
            && stripped
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_punctuation());
        let t2 = if lead { format!(" {norm}") } else { norm };
        text = join_text(text, &t2, false, joins);
    }
    text
}

/// `__join_one_para`: pieces joined by spaces, `#` and backticks escaped in text.
pub fn join(pieces: &[Piece]) -> String {
    let mut parts = Vec::new();
    for p in pieces {
        match p {
            Piece::Text(t) => {
                if t.trim().is_empty() {
                    continue;
                }
                parts.push(super::escape_md(&super::text::normalize_segment(t)));
            }
            Piece::Math(m) => parts.push(format!("${}$", m.trim())),
            Piece::Code(c) => parts.push(format!("`{}`", c.trim())),
        }
    }
    parts.join(" ")
}
