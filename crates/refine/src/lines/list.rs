//! The list recognizer: `<ul>`, `<ol>`, `<dl>`, `<menu>` and `<dir>` become `cclist`
//! blocks, written one line per item (`- item`, `1. item`, a definition list's terms and
//! descriptions as plain lines), nested lists indented under their item.

use super::code::CC_CODE_INLINE;
use super::para::INLINE_TAGS;
use super::text::{BR, normalize_segment, normalize_space, unwrap_subsup};
use super::tree::El;

pub const CC_LIST: &str = "cclist";
const LISTS: &[&str] = &["ul", "ol", "dl", "menu", "dir"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Unordered,
    Ordered,
    Definition,
}

#[derive(Debug, Default, Clone)]
struct Item {
    c: Option<String>,
    child: Option<(Kind, Vec<Item>)>,
}

impl Item {
    fn is_empty(&self) -> bool {
        self.c.is_none() && self.child.is_none()
    }
}

fn kind(tag: &str) -> Kind {
    match tag {
        "dl" => Kind::Definition,
        "ol" => Kind::Ordered,
        _ => Kind::Unordered,
    }
}

fn inline(tag: &str) -> bool {
    INLINE_TAGS.contains(&tag)
}

/// Replaces every outermost list with a `cclist` whose text is its rendering; a list with
/// no item text leaves an empty `cclist` (dropped from the output).
pub fn recognize(root: &mut El) {
    for c in &mut root.children {
        if LISTS.contains(&c.tag.as_str()) {
            let text = render(c);
            let tail = c.tail.take();
            let mut l = El::new(CC_LIST);
            l.text = Some(text);
            l.tail = tail;
            *c = l;
        } else {
            recognize(c);
        }
    }
}

fn render(list: &El) -> String {
    let mut list = list.clone();
    list.tail = None;
    unwrap_subsup(&mut list);
    let mut items = Vec::new();
    if let Some(t) = &list.text
        && !t.trim().is_empty()
    {
        items.push(Item {
            c: Some(normalize_space(t.trim())),
            child: None,
        });
    }
    for child in &list.children {
        let mut it = item(&mut child.clone());
        if it.is_empty() {
            continue;
        }
        finish(&mut it, true);
        items.push(it);
    }
    // The converter's validity check: no items, or a first item with text while no item
    // has any, drops the list (a first item holding only a nested list passes).
    let first_has_text = items.first().is_some_and(|i| i.c.is_some());
    if items.is_empty()
        || (first_has_text
            && !items
                .iter()
                .any(|i| i.c.as_deref().is_some_and(|c| !c.trim().is_empty())))
    {
        return String::new();
    }
    let mut out = Vec::new();
    write(&items, kind(&list.tag), 0, &mut out);
    out.join("\n")
}

/// The JSON rewrites the converter applies to an item: a `$br$` ending the last field of a
/// dict dropped, then every run of `$br$` (with the spaces around it) made a newline.
fn finish(it: &mut Item, _top: bool) {
    if let Some((_, kids)) = &mut it.child {
        for k in kids {
            finish(k, false);
        }
    }
    if let Some(c) = &mut it.c {
        if let Some(s) = c.strip_suffix(BR) {
            *c = s.to_string();
        }
        *c = br_to_newline(c);
    }
}

fn br_to_newline(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(BR) {
        let before = rest[..at].trim_end_matches(char::is_whitespace);
        out.push_str(before);
        let mut after = &rest[at + BR.len()..];
        loop {
            let t = after.trim_start_matches(char::is_whitespace);
            if let Some(r) = t.strip_prefix(BR) {
                after = r;
            } else {
                after = t;
                break;
            }
        }
        out.push('\n');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `__extract_list_item_text_recusive`.
fn item(el: &mut El) -> Item {
    let mut para: Vec<String> = Vec::new();
    let mut result = Item::default();
    let tag = el.tag.clone();
    if tag == CC_CODE_INLINE && el.text.as_deref().is_some_and(|t| !t.trim().is_empty()) {
        para.push(format!("`{}`", el.text.as_deref().unwrap_or("")));
    } else if tag == "ccmath-inline" && el.text.as_deref().is_some_and(|t| !t.trim().is_empty()) {
        para.push(format!("${}$", el.text.as_deref().unwrap_or("")));
    } else if tag == "br" {
        para.push(BR.to_string());
    } else if LISTS.contains(&tag.as_str()) {
        let mut kids = Vec::new();
        for c in &mut el.children {
            let it = item(c);
            if !it.is_empty() {
                kids.push(it);
            }
        }
        if !kids.is_empty() {
            result.child = Some((kind(&tag), kids));
        }
    } else if tag != CC_CODE_INLINE && tag != "ccmath-inline" {
        if let Some(t) = el.text.take()
            && !t.trim().is_empty()
        {
            let mut t = normalize_space(t.trim());
            if el.children.is_empty() && !inline(&tag) {
                t.push_str(BR);
            }
            para.push(t);
        }
        for c in &mut el.children {
            if !inline(&c.tag)
                && let Some(last) = para.last_mut()
            {
                last.push_str(BR);
            }
            let p = item(c);
            if !p.is_empty() {
                if p.child.is_some() {
                    result.child = p.child;
                }
                if let Some(pc) = p.c
                    && !pc.is_empty()
                {
                    para.push(pc);
                }
            } else if let Some(last) = para.last_mut() {
                if last == BR {
                    para.pop();
                } else if let Some(s) = last.strip_suffix(BR) {
                    *last = s.to_string();
                }
            }
        }
    }
    if tag != "li"
        && let Some(t) = &el.tail
        && !t.trim().is_empty()
    {
        let mut t = normalize_space(t.trim());
        if !para.is_empty() && !inline(&tag) {
            t = format!("{BR}{t}");
        }
        para.push(t);
    }
    if !para.is_empty() {
        let joined: Vec<String> = para
            .iter()
            .map(|p| normalize_segment(super::text::py_strip(p)))
            .collect();
        result.c = Some(joined.join(" "));
    }
    result
}

fn write(items: &[Item], k: Kind, level: usize, out: &mut Vec<String>) {
    let indent = "  ".repeat(level);
    for (i, it) in items.iter().enumerate() {
        let text = it.c.as_deref().unwrap_or("");
        if k == Kind::Definition {
            out.push(text.to_string());
            if let Some((ck, kids)) = &it.child {
                write(kids, *ck, level, out);
            }
            continue;
        }
        let prefix = match k {
            Kind::Ordered => format!("{}.", i + 1),
            _ => "-".to_string(),
        };
        out.push(format!("{indent}{prefix} {text}"));
        if let Some((ck, kids)) = &it.child {
            write(kids, *ck, level + 1, out);
        }
    }
}
