//! The table recognizer: every outermost `<table>` becomes one `cctable` block. A simple
//! table (no spans, not nested) is written as a Markdown table (one line per row once the
//! pipes are gone), any other as the text of its cells in a row (lines only where a cell held
//! blocks), an empty one as its raw text.

use super::para::INLINE_TAGS;
use super::text::{normalize_segment, normalize_space, unwrap_subsup};
use super::tree::El;

pub const CC_TABLE: &str = "cctable";
const TABLE_TAGS: &[&str] = &[
    "table", "tr", "td", "th", "thead", "tbody", "tfoot", "caption",
];

fn new_inline(tag: &str) -> bool {
    INLINE_TAGS.contains(&tag) || TABLE_TAGS.contains(&tag)
}

pub fn recognize(root: &mut El) {
    for c in &mut root.children {
        if c.is("table") {
            let mut t = El::new(CC_TABLE);
            t.text = Some(render(c));
            t.tail = c.tail.take();
            *c = t;
        } else {
            recognize(c);
        }
    }
}

fn cells<'a>(e: &'a El, out: &mut Vec<&'a El>) {
    for c in &e.children {
        if c.is("td") || c.is("th") {
            out.push(c);
        }
        cells(c, out);
    }
}

fn span(v: Option<&str>) -> i64 {
    let s = v
        .unwrap_or("1")
        .trim_matches(['"', '\'', '\\', ',', '.', ':']);
    if let Some(n) = s.strip_suffix('%')
        && n.trim().parse::<f64>().is_ok()
    {
        return 100;
    }
    if s.is_empty() {
        return 1;
    }
    s.trim().parse::<i64>().unwrap_or(1)
}

fn nesting(e: &El) -> usize {
    let inner = e.children.iter().map(nesting).max().unwrap_or(0);
    inner + usize::from(e.is("table"))
}

fn render(table: &El) -> String {
    let mut table = table.clone();
    table.tail = None;
    let mut cs = Vec::new();
    cells(&table, &mut cs);
    let empty = cs.iter().all(|c| c.is_text_empty_inside());
    if empty {
        return table.text_content();
    }
    let simple = nesting(&table) < 2
        && cs
            .iter()
            .all(|c| span(c.attr("colspan")) <= 1 && span(c.attr("rowspan")) <= 1);
    unwrap_subsup(&mut table);
    let flat = flatten(&table);
    if simple {
        markdown(&flat)
    } else {
        plain(&flat)
    }
}

impl El {
    /// No text in the cell or below it (its own tail aside).
    fn is_text_empty_inside(&self) -> bool {
        let blank = |t: &Option<String>| t.as_deref().is_none_or(|s| s.trim().is_empty());
        blank(&self.text) && self.children.iter().all(|c| c.is_text_empty())
    }
}

/// The table reduced to its structural elements with each cell's content as text, the way
/// `__simplify_td_th_content` and the HTML cleaner leave it.
fn flatten(e: &El) -> El {
    let mut out = e.shell();
    let mut text = e.text.clone().unwrap_or_default();
    for c in &e.children {
        let structural = c.contains_any(&["table", "td", "th"]);
        if structural {
            let mut f = flatten(c);
            if TABLE_TAGS.contains(&c.tag.as_str()) {
                f.tail = c.tail.clone();
                out.children.push(f);
            } else {
                // A dropped wrapper: its content joins the flow.
                append(&mut out, &mut text, f.text.as_deref().unwrap_or(""));
                let tail = c.tail.clone().unwrap_or_default();
                for k in f.children {
                    out.children.push(k);
                }
                append(&mut out, &mut text, &tail);
            }
        } else {
            let mut flow = simplified(c);
            if !new_inline(&c.tag) {
                flow.push_str("\n\n");
            }
            append(&mut out, &mut text, &flow);
        }
    }
    out.text = Some(text);
    out
}

fn append(out: &mut El, text: &mut String, s: &str) {
    match out.children.last_mut() {
        Some(last) => last.tail.get_or_insert_with(String::new).push_str(s),
        None => text.push_str(s),
    }
}

/// `__check_table_include_math_code` + the join: an element without cells below it, its
/// tail included, as one string.
fn simplified(e: &El) -> String {
    let mut parts: Vec<String> = Vec::new();
    if e.is_text_empty() {
        if e.is("br") || e.has_descendant("br") {
            parts.push("\n\n".into());
        }
    } else {
        node(e, None, &mut parts);
    }
    parts
        .iter()
        .map(|p| normalize_segment(p))
        .collect::<Vec<_>>()
        .join(" ")
}

fn node(n: &El, parent: Option<&El>, out: &mut Vec<String>) {
    if n.is("br") || !new_inline(&n.tag) {
        out.push("\n\n".into());
    }
    if let Some(t) = &n.text
        && !t.trim().is_empty()
    {
        out.push(normalize_space(t.trim()));
    }
    for c in &n.children {
        node(c, Some(n), out);
    }
    if let Some(p) = parent
        && p.children.len() == 1
        && !new_inline(&p.tag)
        && !p.has_descendant("ccmath-inline")
    {
        out.push("\n\n".into());
    }
    if let Some(t) = &n.tail
        && !t.trim().is_empty()
    {
        let math_last = out
            .last()
            .is_some_and(|l| l.len() >= 2 && l.starts_with('$') && l.ends_with('$'));
        if !new_inline(&n.tag) && !math_last {
            out.push("\n\n".into());
        }
        out.push(normalize_space(t.trim()));
    }
}

/// Text runs with blank-line runs made one blank line, stripped (the cleaner's last pass).
fn tidy(s: &str) -> String {
    let s = s.trim();
    let mut out = String::with_capacity(s.len());
    let mut lines = s.split('\n').peekable();
    let mut first = true;
    let mut pending_break = 0usize;
    while let Some(l) = lines.next() {
        if first {
            out.push_str(l);
            first = false;
            continue;
        }
        pending_break += 1;
        if l.trim().is_empty() && lines.peek().is_some() {
            continue;
        }
        if pending_break >= 2 {
            let t = out.trim_end().len();
            out.truncate(t);
            out.push_str("\n\n");
            out.push_str(l.trim_start());
        } else {
            out.push('\n');
            out.push_str(l);
        }
        pending_break = 0;
    }
    out
}

fn cell_text(c: &El) -> String {
    tidy(&c.text_content_tidy())
        .replace(['\r', '\n'], " ")
        .replace('|', "\\|")
}

impl El {
    fn text_content_tidy(&self) -> String {
        let mut s = tidy(self.text.as_deref().unwrap_or(""));
        for c in &self.children {
            s.push_str(&c.text_content_tidy());
            s.push_str(tidy(c.tail.as_deref().unwrap_or("")).as_str());
        }
        s
    }
}

fn rows<'a>(e: &'a El, out: &mut Vec<&'a El>) {
    for c in &e.children {
        if c.is("tr") {
            out.push(c);
        }
        rows(c, out);
    }
}

/// `html_to_markdown_table`.
fn markdown(t: &El) -> String {
    let mut rs = Vec::new();
    rows(t, &mut rs);
    if rs.is_empty() {
        return String::new();
    }
    let row_cells = |r: &El| {
        let mut cs = Vec::new();
        cells(r, &mut cs);
        if cs.is_empty() {
            vec![cell_text(r).trim().to_string()]
        } else {
            cs.iter().map(|c| cell_text(c).trim().to_string()).collect()
        }
    };
    let width = rs
        .iter()
        .map(|r| {
            let mut cs = Vec::new();
            cells(r, &mut cs);
            cs.len()
        })
        .max()
        .unwrap_or(0);
    if width == 0 {
        return String::new();
    }
    // Padding every row to the widest one is rows x width cells: a hostile table of one
    // wide row and many short ones would take gigabytes; its text is written plainly.
    if rs.len().saturating_mul(width) > 1_000_000 {
        return plain(t);
    }
    let mut out = Vec::new();
    for (i, r) in rs.iter().enumerate() {
        let mut cs = row_cells(r);
        while cs.len() < width {
            cs.push(String::new());
        }
        out.push(format!("| {} |", cs.join(" | ")));
        if i == 0 {
            out.push(format!("{}|", "|---".repeat(width)));
        }
    }
    out.join("\n")
}

/// A complex table's text: each text run of the cleaned table joined by spaces.
fn plain(t: &El) -> String {
    let mut runs = Vec::new();
    fn walk(e: &El, runs: &mut Vec<String>) {
        let t = tidy(e.text.as_deref().unwrap_or(""));
        if !t.is_empty() {
            runs.push(t);
        }
        for c in &e.children {
            walk(c, runs);
            let tail = tidy(c.tail.as_deref().unwrap_or(""));
            if !tail.is_empty() {
                runs.push(tail);
            }
        }
    }
    walk(t, &mut runs);
    runs.join(" ")
}
