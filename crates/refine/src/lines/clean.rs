//! The converter's pre-converters: scripts and styles, form controls and hidden elements
//! removed before anything is recognized.

use super::tree::El;

const CONTROLS: &[&str] = &["input", "select", "textarea", "button"];
const FORM_DROPS: &[&str] = &["input", "select", "textarea", "button", "label", "img"];

pub fn clean(root: &mut El) {
    remove_where(root, &|e| e.is("script") || e.is("style"), true);
    // Form controls under <body> go with their tails (lxml's `parent.remove`), and so do
    // the labels that point at them.
    let mut ids = Vec::new();
    if let Some(body) = root.children.iter_mut().find(|c| c.is("body")) {
        collect_ids(body, &mut ids);
        remove_where(body, &|e| CONTROLS.contains(&e.tag.as_str()), false);
        if !ids.is_empty() {
            remove_where(
                body,
                &|e| e.is("label") && e.attr("for").is_some_and(|f| ids.iter().any(|i| i == f)),
                false,
            );
        }
    }
    clean_forms(root);
    remove_where(root, &invisible, true);
}

fn collect_ids(el: &El, ids: &mut Vec<String>) {
    for c in &el.children {
        if CONTROLS.contains(&c.tag.as_str())
            && let Some(id) = c.attr("id")
        {
            ids.push(id.to_string());
        }
        collect_ids(c, ids);
    }
}

fn clean_forms(el: &mut El) {
    for c in &mut el.children {
        if c.is("form") {
            remove_where(c, &|e| FORM_DROPS.contains(&e.tag.as_str()), false);
        }
        clean_forms(c);
    }
    el.remove_children(
        &|c| c.is("form") && (c.children.is_empty() || c.text_content().trim().is_empty()),
        false,
    );
}

/// `config.INVISIBLE_TAGS`, the rules that apply to every site.
fn invisible(e: &El) -> bool {
    let starts = |name: &str| e.attr(name).is_some_and(|v| v.starts_with("advert"));
    if e.is("div")
        && (starts("class")
            || starts("name")
            || starts("id")
            || e.attr("style")
                .is_some_and(|s| s.contains("display: none") || s.contains("display:none")))
    {
        return true;
    }
    e.attr("aria-hidden").is_some_and(|v| v != "false")
        || e.attr("hidden").is_some_and(|v| v != "false")
}

/// Removes every element matching `pred` (outermost first), keeping or dropping its tail.
pub fn remove_where(el: &mut El, pred: &dyn Fn(&El) -> bool, keep_tail: bool) {
    el.remove_children(pred, keep_tail);
    for c in &mut el.children {
        remove_where(c, pred, keep_tail);
    }
}
