//! ReScraper's page rendering (`lib/render.py: webkit_txt`): the text output of the
//! `mineru-webkit` 0.1.6 converter over the raw page, then ReScraper's clean-up, one block
//! per line. The refining model was trained on exactly these lines, so this module follows
//! the converter's behaviour, quirks included, rather than trawl's own extractor; the test
//! command compares it with the Python package page by page (`tests/refine_parity.rs`).
//!
//! The converter's stages, in its order: pre-converters ([`clean`]), then recognizers for
//! code, tables, lists, images and titles, each replacing what it finds with a `cc*` element
//! and cutting the tree there ([`split`]), then paragraphs in what is left ([`para`]).
//! Math recognition (MathJax/KaTeX markup) is not ported: formulas come out as their text.

mod clean;
mod code;
mod image;
mod list;
mod para;
mod split;
mod table;
mod text;
mod title;
mod tree;

use std::sync::LazyLock;

use regex::Regex;

use split::{Fragment, cc_element, split};
use tree::El;

/// Renders a page to ReScraper's lines (not numbered; see [`number_lines`]).
pub fn render_lines(html: &str) -> Vec<String> {
    post(&converter_txt(html))
}

/// The converter's `txt` output for a page (before ReScraper's clean-up).
pub fn converter_txt(html: &str) -> String {
    let mut root = tree::parse(html);
    clean::clean(&mut root);
    let mut frags = vec![Fragment { root, cc: None }];
    frags = stage(frags, code::CC_CODE, |r| {
        code::recognize(r);
        true
    });
    frags = stage(frags, table::CC_TABLE, |r| {
        table::recognize(r);
        true
    });
    frags = stage(frags, list::CC_LIST, |r| {
        list::recognize(r);
        true
    });
    frags = stage(frags, image::CC_IMAGE, image::recognize);
    frags = stage(frags, title::CC_TITLE, |r| {
        title::recognize(r);
        true
    });
    let mut blocks: Vec<String> = Vec::new();
    for f in &frags {
        match f.cc.as_deref() {
            None => {
                for p in para::paragraphs(&f.root) {
                    let pieces = para::pieces(&p);
                    let any = pieces.iter().any(|x| match x {
                        para::Piece::Text(t) | para::Piece::Code(t) | para::Piece::Math(t) => {
                            !t.trim().is_empty()
                        }
                    });
                    if any {
                        blocks.push(para::join(&pieces));
                    }
                }
            }
            Some(tag) => {
                let Some(el) = cc_element(&f.root, tag) else {
                    continue;
                };
                let t = el.text.as_deref().unwrap_or("");
                let block = match tag {
                    code::CC_CODE => {
                        if t.trim().is_empty() {
                            continue;
                        }
                        let lang = el.attr("language").unwrap_or("");
                        format!("```{lang}\n{}\n```", t.trim())
                    }
                    image::CC_IMAGE => continue,
                    title::CC_TITLE => text::normalize_segment(t).trim().to_string(),
                    _ => t.trim().to_string(),
                };
                blocks.push(block);
            }
        }
    }
    let txt = blocks
        .into_iter()
        .filter(|b| !b.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let txt = math_delimiters(&txt);
    format!("{}\n", txt.trim())
}

fn stage(frags: Vec<Fragment>, tag: &str, recognize: impl Fn(&mut El) -> bool) -> Vec<Fragment> {
    let mut out = Vec::with_capacity(frags.len());
    for mut f in frags {
        if f.cc.is_some() {
            out.push(f);
            continue;
        }
        if recognize(&mut f.root) {
            out.extend(split(&f.root, &[tag]));
        } else {
            out.push(f);
        }
    }
    out
}

/// Where a recognizer wants the raw markup of an element: its attribute values and text,
/// enough to look for image addresses in it.
fn serialize(e: &El) -> String {
    let mut s = String::new();
    for d in e.iter() {
        s.push('<');
        s.push_str(&d.tag);
        for (k, v) in &d.attrs {
            s.push(' ');
            s.push_str(k);
            s.push_str("=\"");
            s.push_str(v);
            s.push('"');
        }
        s.push('>');
        if let Some(t) = &d.text {
            s.push_str(t);
        }
        if let Some(t) = &d.tail {
            s.push_str(t);
        }
    }
    s
}

fn escape_md(s: &str) -> String {
    s.replace('#', "\\#").replace('`', "\\`")
}

fn math_delimiters(s: &str) -> String {
    static TEX: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?s)\[tex\](.*?)\[/tex\]").expect("regex"));
    static ITEX: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?s)\[itex\](.*?)\[/itex\]").expect("regex"));
    if !s.contains("tex]") {
        return s.to_string();
    }
    let s = TEX.replace_all(s, |c: &regex::Captures<'_>| format!("$${}$$", c[1].trim()));
    ITEX.replace_all(&s, |c: &regex::Captures<'_>| format!("${}$", c[1].trim()))
        .into_owned()
}

/// ReScraper's clean-up after the converter (`webkit_post`, applied to the markup-stripped
/// text): pipes to spaces, separator lines dropped, Markdown escapes undone, whitespace
/// collapsed, empty lines dropped.
pub fn post(txt: &str) -> Vec<String> {
    let mut s: String = txt
        .chars()
        .map(|c| if text::is_marker(c) { ' ' } else { c })
        // No U+FFFD (what a bad byte decodes to) survives the converter's text passes.
        .filter(|&c| c != '\u{fffd}')
        .collect();
    // BeautifulSoup(raw).get_text(separator=" ").
    s = text::decode(&text::strip_tags(&s, " "));
    let s = pipes_to_spaces(&s);
    let mut out = Vec::new();
    for line in s.split('\n') {
        if line
            .chars()
            .all(|c| text::py_space(c) || c == '-' || c == '|')
        {
            continue;
        }
        let line = unescape(line);
        let mut collapsed = String::with_capacity(line.len());
        for w in line.split(text::py_space).filter(|w| !w.is_empty()) {
            if !collapsed.is_empty() {
                collapsed.push(' ');
            }
            collapsed.push_str(w);
        }
        if !collapsed.is_empty() {
            out.push(collapsed);
        }
    }
    out
}

fn pipes_to_spaces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_run = false;
    for c in s.chars() {
        if c == '|' {
            if !in_run {
                out.push(' ');
            }
            in_run = true;
        } else {
            out.push(c);
            in_run = false;
        }
    }
    out
}

/// `re.sub(r"\\([\$\*\[\]_`#])", r"\1", line)`.
fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '$' | '*' | '[' | ']' | '_' | '`' | '#')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// `editops.number_lines`: `<lid:N> line`, numbered from 1, one per line.
pub fn number_lines(lines: &[String]) -> String {
    let mut s = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(&format!("<lid:{}> {l}", i + 1));
    }
    s
}
