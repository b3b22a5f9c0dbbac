//! The title recognizer: `<h1>`-`<h6>` become `cctitle` blocks.

use super::code::CC_CODE_INLINE;
use super::text::{BR, normalize_space, unwrap_subsup};
use super::tree::El;

pub const CC_TITLE: &str = "cctitle";
const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];

pub fn recognize(root: &mut El) {
    for c in &mut root.children {
        if HEADINGS.contains(&c.tag.as_str()) {
            let tail = c
                .tail
                .take()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty());
            let text = title_text(c);
            let mut t = El::new(CC_TITLE);
            t.text = Some(text);
            t.tail = tail;
            *c = t;
        } else {
            recognize(c);
        }
    }
}

/// Every text and tail inside the heading, each trimmed, joined by single spaces.
fn title_text(h: &El) -> String {
    let mut h = h.clone();
    unwrap_subsup(&mut h);
    let mut blks: Vec<String> = Vec::new();
    for (k, e) in h.iter().into_iter().enumerate() {
        if e.is(CC_CODE_INLINE) {
            blks.push(format!("`{}`", e.text.as_deref().unwrap_or("")));
        } else if e.is("ccmath-inline") {
            blks.push(format!("${}$", e.text.as_deref().unwrap_or("").trim()));
        } else if e.is("br") {
            blks.push(BR.to_string());
        } else if let Some(t) = &e.text
            && !t.trim().is_empty()
        {
            blks.push(normalize_space(t.trim()));
        }
        if k > 0 {
            blks.push(e.tail.as_deref().unwrap_or("").trim().to_string());
        }
    }
    blks.retain(|b| !b.is_empty());
    blks.join(" ").replace(BR, "\n\n")
}
