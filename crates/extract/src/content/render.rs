//! Writes the kept boxes as plain text or Markdown. Whitespace is collapsed outside `<pre>`;
//! blocks become lines and paragraphs; lists, tables and code keep their shape.

use super::dom::Dom;
use super::tags::Tag;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Text,
    Markdown { links: bool },
}

/// Deeper than this, a subtree is written as flat text: hostile pages nest boxes by the
/// hundred thousand, and the renderer recurses.
const MAX_DEPTH: usize = 200;

pub struct Renderer<'a> {
    dom: &'a Dom,
    dropped: &'a [bool],
    mode: Mode,
    base: Option<&'a url::Url>,
}

impl<'a> Renderer<'a> {
    pub fn new(dom: &'a Dom, dropped: &'a [bool], mode: Mode, base: Option<&'a url::Url>) -> Self {
        Renderer {
            dom,
            dropped,
            mode,
            base,
        }
    }

    fn md(&self) -> bool {
        matches!(self.mode, Mode::Markdown { .. })
    }

    pub fn render(&self, roots: &[u32]) -> String {
        let mut out = String::new();
        for &r in roots {
            let mut s = String::new();
            self.node(r, &mut s, 0, false, 0);
            out.push_str(&s);
            out.push_str("\n\n");
        }
        tidy(&out)
    }

    fn children(&self, i: u32, out: &mut String, depth: usize, pre: bool, list: usize) {
        let mut prev_element = false;
        for c in self.dom.children(i) {
            let tag = self.dom.node(c).tag;
            // Sibling inline boxes that a style sheet lays out apart (`<a>Lantern
            // Parade</a><span>Quayside</span>`) would otherwise glue two words into one;
            // a capital after a letter marks the seam. `<b>H</b>ello` stays one word.
            if prev_element
                && !pre
                && tag != Tag::Text
                && !tag.is_block()
                && out.ends_with(|ch: char| ch.is_alphanumeric())
                && self
                    .first_char(c)
                    .is_some_and(|ch| ch.is_uppercase() || ch.is_ascii_digit())
            {
                out.push(' ');
            }
            self.node(c, out, depth + 1, pre, list);
            prev_element = tag != Tag::Text;
        }
    }

    fn first_char(&self, i: u32) -> Option<char> {
        let dom = self.dom;
        (i..dom.subtree_end(i))
            .filter(|&j| dom.node(j).tag == Tag::Text && !self.dropped[j as usize])
            .find_map(|j| dom.text_of(j).trim_start().chars().next())
    }

    fn node(&self, i: u32, out: &mut String, depth: usize, pre: bool, list: usize) {
        if self.dropped[i as usize] {
            return;
        }
        let dom = self.dom;
        let tag = dom.node(i).tag;
        if tag == Tag::Text {
            let t = dom.text_of(i);
            if pre {
                out.push_str(t);
            } else {
                push_collapsed(out, t);
            }
            return;
        }
        if depth > MAX_DEPTH {
            self.flat(i, out);
            return;
        }
        let md = self.md();
        match tag {
            Tag::Br => out.push('\n'),
            Tag::Hr => para(out),
            Tag::Img => {
                if md && let Some(alt) = dom.attr(i, "alt").filter(|a| !a.trim().is_empty()) {
                    out.push_str(&format!(" ![{}]", alt.trim()));
                }
            }
            Tag::H1 | Tag::H2 | Tag::H3 | Tag::H4 | Tag::H5 | Tag::H6 => {
                self.heading(i, tag, out, depth, list)
            }
            Tag::Pre => self.preformatted(i, out, depth, list),
            Tag::Code | Tag::Kbd | Tag::Samp | Tag::Tt if md && !pre => {
                self.inline_code(i, out, depth, list)
            }
            Tag::B | Tag::Strong if md && !pre => self.wrap(i, out, depth, list, "**"),
            Tag::I | Tag::Em if md && !pre => self.wrap(i, out, depth, list, "*"),
            Tag::A if !pre => self.link(i, out, depth, list),
            Tag::Ul | Tag::Ol | Tag::Menu => self.items(i, tag == Tag::Ol, out, depth, pre, list),
            Tag::Table => self.table(i, out, depth, list),
            Tag::Blockquote => self.quote(i, out, depth, pre, list),
            Tag::P | Tag::Figure | Tag::Figcaption | Tag::Details | Tag::Address => {
                para(out);
                self.children(i, out, depth, pre, list);
                para(out);
            }
            t if t.is_block() => {
                newline(out);
                self.children(i, out, depth, pre, list);
                newline(out);
            }
            _ => self.children(i, out, depth, pre, list),
        }
    }

    /// The subtree's kept text, collapsed, without recursing.
    fn flat(&self, i: u32, out: &mut String) {
        let dom = self.dom;
        for j in i..dom.subtree_end(i) {
            if dom.node(j).tag == Tag::Text && !self.dropped[j as usize] {
                push_collapsed(out, dom.text_of(j));
            }
        }
    }

    /// A heading on one line of its own; an empty one is left out.
    fn heading(&self, i: u32, tag: Tag, out: &mut String, depth: usize, list: usize) {
        let mut s = String::new();
        self.children(i, &mut s, depth, false, list);
        let s = one_line(&s);
        if !s.is_empty() {
            para(out);
            if self.md() {
                let level = tag.heading_level().unwrap_or(1) as usize;
                out.push_str(&"#".repeat(level));
                out.push(' ');
            }
            out.push_str(&s);
            para(out);
        }
    }

    /// A fenced block in Markdown; in plain text, marked for [`tidy`] to leave alone.
    fn preformatted(&self, i: u32, out: &mut String, depth: usize, list: usize) {
        let mut s = String::new();
        self.children(i, &mut s, depth, true, list);
        let s = s.trim_matches('\n');
        if !s.trim().is_empty() {
            para(out);
            if self.md() {
                let fence = if s.contains("```") { "~~~" } else { "```" };
                out.push_str(fence);
                out.push_str(&self.code_language(i));
                out.push('\n');
                out.push_str(s);
                out.push('\n');
                out.push_str(fence);
            } else {
                out.push(PRE_START);
                out.push_str(s);
                out.push(PRE_END);
            }
            para(out);
        }
    }

    /// Code inside running text, in backticks that its own backticks cannot close.
    fn inline_code(&self, i: u32, out: &mut String, depth: usize, list: usize) {
        let mut s = String::new();
        self.children(i, &mut s, depth, false, list);
        let t = s.trim();
        if !t.is_empty() {
            let tick = if t.contains('`') { "``" } else { "`" };
            out.push_str(&format!("{tick}{t}{tick}"));
        }
    }

    fn link(&self, i: u32, out: &mut String, depth: usize, list: usize) {
        let dom = self.dom;
        let mut s = String::new();
        self.children(i, &mut s, depth, false, list);
        // Permalink markers that documentation generators put beside headings.
        if dom.attr(i, "href").is_some_and(|h| h.starts_with('#'))
            && matches!(s.trim(), "¶" | "#" | "§" | "🔗" | "¶#")
        {
            return;
        }
        let links = matches!(self.mode, Mode::Markdown { links: true });
        let href = dom.attr(i, "href").and_then(|h| self.resolve(h));
        match href {
            Some(h) if links && !s.trim().is_empty() => {
                out.push_str(&format!("[{}]({})", s.trim(), h))
            }
            _ => out.push_str(&s),
        }
    }

    /// A list's items, numbered in Markdown when the list is ordered. Anything else in
    /// the list box is written where it stands.
    fn items(&self, i: u32, ordered: bool, out: &mut String, depth: usize, pre: bool, list: usize) {
        let dom = self.dom;
        let md = self.md();
        newline(out);
        let mut n = dom
            .attr(i, "start")
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(1);
        for c in dom.children(i) {
            if self.dropped[c as usize] {
                continue;
            }
            if dom.node(c).tag != Tag::Li {
                self.node(c, out, depth + 1, pre, list);
                continue;
            }
            let mut s = String::new();
            self.children(c, &mut s, depth + 1, pre, list + 1);
            let s = tidy(&s);
            if s.is_empty() {
                continue;
            }
            let marker = if ordered && md {
                let m = format!("{n}. ");
                n += 1;
                m
            } else {
                "- ".to_string()
            };
            newline(out);
            push_item(out, &s, list, &marker);
        }
        newline(out);
    }

    fn quote(&self, i: u32, out: &mut String, depth: usize, pre: bool, list: usize) {
        let mut s = String::new();
        self.children(i, &mut s, depth, pre, list);
        let s = tidy(&s);
        if !s.is_empty() {
            let md = self.md();
            para(out);
            for line in s.lines() {
                if md {
                    out.push_str(if line.is_empty() { ">" } else { "> " });
                }
                out.push_str(line);
                out.push('\n');
            }
            para(out);
        }
    }

    fn wrap(&self, i: u32, out: &mut String, depth: usize, list: usize, mark: &str) {
        let mut s = String::new();
        self.children(i, &mut s, depth, false, list);
        let t = s.trim();
        if t.is_empty() || t.contains('\n') {
            out.push_str(&s);
            return;
        }
        if s.starts_with(' ') {
            out.push(' ');
        }
        out.push_str(mark);
        out.push_str(t);
        out.push_str(mark);
        if s.ends_with(' ') {
            out.push(' ');
        }
    }

    fn resolve(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') || href.starts_with("javascript:") {
            return None;
        }
        match self.base {
            Some(b) => b.join(href).ok().map(|u| u.to_string()),
            None => Some(href.to_string()),
        }
    }

    fn code_language(&self, pre: u32) -> String {
        let dom = self.dom;
        // Highlighters put the language on the `<pre>`, on its `<code>` or on a wrapper
        // (`<div class="highlight-python">`).
        let mut candidates = vec![pre];
        candidates.extend(dom.children(pre).filter(|&c| dom.node(c).tag == Tag::Code));
        let parent = dom.node(pre).parent;
        if parent != super::dom::NONE {
            candidates.push(parent);
        }
        for c in candidates {
            let class = dom.attr(c, "class").unwrap_or("");
            for t in class.split_whitespace() {
                for p in ["language-", "lang-", "highlight-source-", "highlight-"] {
                    if let Some(l) = t.strip_prefix(p)
                        && !l.is_empty()
                        && l.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "+-#_".contains(c))
                    {
                        return l.to_ascii_lowercase();
                    }
                }
            }
        }
        String::new()
    }

    fn table(&self, i: u32, out: &mut String, depth: usize, list: usize) {
        let dom = self.dom;
        let mut rows: Vec<Vec<String>> = Vec::new();
        let end = dom.subtree_end(i);
        let mut j = i + 1;
        while j < end {
            let n = dom.node(j);
            if n.tag == Tag::Table {
                // A nested table is laid out as text inside its cell.
                j = dom.subtree_end(j);
                continue;
            }
            if n.tag == Tag::Tr && !self.dropped[j as usize] {
                let mut row = Vec::new();
                for c in dom.children(j) {
                    let ct = dom.node(c).tag;
                    if (ct == Tag::Td || ct == Tag::Th) && !self.dropped[c as usize] {
                        let mut s = String::new();
                        self.children(c, &mut s, depth + 1, false, list);
                        row.push(one_line(&s).replace('|', "\\|"));
                    }
                }
                if row.iter().any(|c| !c.is_empty()) {
                    rows.push(row);
                }
                j = dom.subtree_end(j);
                continue;
            }
            j += 1;
        }
        if rows.is_empty() {
            return;
        }
        para(out);
        let md = self.md();
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        // Layout tables (one column) are just blocks of text.
        if width <= 1 || !md {
            for row in &rows {
                let cells: Vec<&str> = row
                    .iter()
                    .map(String::as_str)
                    .filter(|c| !c.is_empty())
                    .collect();
                out.push_str(&cells.join(if md { " " } else { " | " }));
                out.push('\n');
            }
        } else {
            for (k, row) in rows.iter().enumerate() {
                out.push('|');
                for c in 0..width {
                    out.push(' ');
                    out.push_str(row.get(c).map(String::as_str).unwrap_or(""));
                    out.push_str(" |");
                }
                out.push('\n');
                if k == 0 {
                    out.push('|');
                    for _ in 0..width {
                        out.push_str("---|");
                    }
                    out.push('\n');
                }
            }
        }
        para(out);
    }
}

/// One list item at nesting `list`: the marker on its first line, the later lines
/// indented to its text so that they stay in the item.
fn push_item(out: &mut String, item: &str, list: usize, marker: &str) {
    let indent = "  ".repeat(list);
    for (k, line) in item.lines().enumerate() {
        if k == 0 {
            out.push_str(&indent);
            out.push_str(marker);
        } else if !line.is_empty() {
            out.push_str(&indent);
            out.push_str("  ");
        }
        out.push_str(line);
        out.push('\n');
    }
}

fn push_collapsed(out: &mut String, t: &str) {
    let mut space = out.ends_with([' ', '\n']) || out.is_empty();
    for c in t.chars() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
                space = true;
            }
        } else {
            out.push(c);
            space = false;
        }
    }
}

fn newline(out: &mut String) {
    while out.ends_with(' ') {
        out.pop();
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
}

fn para(out: &mut String) {
    newline(out);
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Mark preformatted text in plain-text output so that [`tidy`] leaves it alone
/// (private-use characters: they cannot clash with page text, and tidy removes them).
const PRE_START: char = '\u{E000}';
const PRE_END: char = '\u{E001}';

/// Trims trailing spaces, drops leading spaces outside code, and keeps at most one blank line.
pub fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = false;
    let mut fence = false;
    let mut pre = false;
    for line in s.lines() {
        // Preformatted text that starts inside a line (a <pre> in an inline box) starts
        // with it all the same: the marks never reach the output.
        let starts_pre = line.contains(PRE_START);
        let ends_pre = line.contains(PRE_END);
        let l: &str = &if starts_pre || ends_pre {
            line.replace([PRE_START, PRE_END], "")
        } else {
            line.to_string()
        };
        let l = l.trim_end();
        let verbatim = fence || pre || starts_pre;
        let is_fence = l.starts_with("```") || l.starts_with("~~~");
        if (ends_pre || !verbatim) && l.trim().is_empty() {
            blank = !out.is_empty();
            pre = pre || starts_pre;
            if ends_pre {
                pre = false;
            }
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        let trimmed = l.trim_start_matches([' ', '\u{a0}']);
        let is_item = trimmed.starts_with("- ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty());
        // Code keeps its indentation, and so do nested list items.
        out.push_str(if verbatim || is_item { l } else { trimmed });
        out.push('\n');
        if is_fence && !pre {
            fence = !fence;
        }
        if starts_pre {
            pre = true;
        }
        if ends_pre {
            pre = false;
        }
    }
    while out.ends_with('\n') {
        out.pop();
    }
    out
}
