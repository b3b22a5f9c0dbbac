//! What a page gives without JavaScript, and the signs that it needs it.
//!
//! html5ever parses with scripting off (as a crawler is a browser without scripts), so a
//! `<noscript>` holds markup. Forums (Discourse) serve their posts to crawlers that way,
//! while most other `<noscript>`s say "please enable JavaScript". [`open_noscripts`] makes
//! the first kind ordinary content and leaves the notices out; [`signals`] reads the marks
//! of client-side rendering the render rule (`crate::shell`) weighs.

use serde::Serialize;

use super::dom::Dom;
use super::tags::Tag;

/// Signs of a page rendered in the browser, read from the same parse as its content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Shell {
    /// `<script>` elements.
    pub scripts: u32,
    /// Of them, with a `src`.
    pub script_srcs: u32,
    /// An application root (`#root`, `#app`, `#__next`, `[data-reactroot]`, ...) with no
    /// text below it.
    pub empty_root: bool,
    /// Framework state shipped for the browser to render from (`__NEXT_DATA__`,
    /// `window.__NUXT__`, `ng-state`, ...).
    pub hydration: bool,
    /// A `<noscript>` that asks for JavaScript.
    pub js_notice: bool,
    /// Visible characters in the body (no scripts, styles, notices), not only the main
    /// content.
    pub body_chars: u32,
    /// `<a href>` elements in the body.
    pub anchors: u32,
}

/// Element ids that frameworks mount their application on.
const ROOT_IDS: [&str; 12] = [
    "root",
    "app",
    "__next",
    "__nuxt",
    "___gatsby",
    "svelte",
    "react-root",
    "vue-app",
    "app-root",
    "main-app",
    "application",
    "redwood-app",
];

/// Ids of scripts that carry a framework's state.
const STATE_IDS: [&str; 5] = [
    "__next_data__",
    "__nuxt_data__",
    "ng-state",
    "__remix_context__",
    "__apollo_state__",
];

/// Globals an inline script sets for the framework to hydrate from.
const STATE_GLOBALS: [&str; 6] = [
    "window.__NUXT__",
    "__INITIAL_STATE__",
    "__PRELOADED_STATE__",
    "__APOLLO_STATE__",
    "__remixContext",
    "__sveltekit_",
];

/// Whether `text` is a notice that the page needs JavaScript ("Please enable JavaScript",
/// "This site requires JavaScript", "best viewed with JavaScript enabled"), not content.
pub fn is_js_notice(text: &str) -> bool {
    let t = text.trim();
    if t.is_empty() || t.chars().count() > 400 {
        return false;
    }
    let t = t.to_lowercase();
    if !(t.contains("javascript") || t.contains(" js ") || t.starts_with("js ")) {
        return false;
    }
    [
        "enable",
        "disabled",
        "require",
        "turn on",
        "activate",
        "support",
        "need",
        "must",
        "allow",
        "best viewed",
        "switch on",
        "is off",
        "not available",
    ]
    .iter()
    .any(|k| t.contains(k))
}

/// The visible text below `i`: text nodes outside never-content elements.
fn visible_text(dom: &Dom, i: u32) -> String {
    let mut s = String::new();
    let end = dom.subtree_end(i);
    let mut j = i + 1;
    while j < end {
        let n = dom.node(j);
        if n.tag != Tag::Text && n.tag != Tag::Noscript && n.tag.is_never_content() {
            j = dom.subtree_end(j);
            continue;
        }
        if n.tag == Tag::Text {
            s.push_str(dom.text_of(j));
        }
        j += 1;
    }
    s
}

fn in_head(dom: &Dom, mut i: u32) -> bool {
    while i != super::dom::NONE {
        if dom.node(i).tag == Tag::Head {
            return true;
        }
        i = dom.node(i).parent;
    }
    false
}

/// Turns each body `<noscript>` that is not a JavaScript notice into an ordinary block,
/// and the notices inside the opened ones into dropped elements. Returns whether the page
/// has a notice.
pub fn open_noscripts(dom: &mut Dom) -> bool {
    let mut notice = false;
    let mut opened: Vec<u32> = Vec::new();
    for i in 0..dom.nodes.len() as u32 {
        if dom.node(i).tag != Tag::Noscript || in_head(dom, i) {
            continue;
        }
        // An opened ancestor's notices are handled below; this one is a nested element.
        if is_js_notice(&visible_text(dom, i)) {
            notice = true;
            continue;
        }
        dom.nodes[i as usize].tag = Tag::Div;
        opened.push(i);
    }
    for o in opened {
        for j in o + 1..dom.subtree_end(o) {
            let tag = dom.node(j).tag;
            if tag.is_block() && tag != Tag::Div && is_js_notice(&visible_text(dom, j)) {
                dom.nodes[j as usize].tag = Tag::Noscript;
                notice = true;
            }
        }
    }
    notice
}

/// The signs of client-side rendering in `dom` (after [`open_noscripts`]).
pub fn signals(dom: &Dom, js_notice: bool) -> Shell {
    let mut s = Shell {
        js_notice,
        ..Shell::default()
    };
    for &r in &dom.framework_roots {
        s.hydration = true;
        if visible_text(dom, r).trim().is_empty() {
            s.empty_root = true;
        }
    }
    let mut body = super::dom::NONE;
    for i in 0..dom.nodes.len() as u32 {
        let n = dom.node(i);
        match n.tag {
            Tag::Body if body == super::dom::NONE => body = i,
            Tag::Script => {
                s.scripts += 1;
                if dom.attr(i, "src").is_some_and(|v| !v.trim().is_empty()) {
                    s.script_srcs += 1;
                } else {
                    let id = dom.attr(i, "id").unwrap_or("").to_ascii_lowercase();
                    if STATE_IDS.contains(&id.as_str()) {
                        s.hydration = true;
                    } else if let Some(t) = dom.children(i).next()
                        && dom.node(t).tag == Tag::Text
                    {
                        let code = dom.text_of(t);
                        if STATE_GLOBALS.iter().any(|g| code.contains(g)) {
                            s.hydration = true;
                        }
                    }
                }
            }
            Tag::A if dom.attr(i, "href").is_some() => s.anchors += 1,
            Tag::Text | Tag::Root => {}
            _ => {
                let id = dom.attr(i, "id").unwrap_or("");
                let root = ROOT_IDS.iter().any(|r| id.eq_ignore_ascii_case(r));
                if root && !s.empty_root && visible_text(dom, i).trim().is_empty() {
                    s.empty_root = true;
                }
            }
        }
    }
    if body != super::dom::NONE {
        s.body_chars = visible_text(dom, body)
            .chars()
            .filter(|c| !c.is_whitespace())
            .count()
            .min(u32::MAX as usize) as u32;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_are_told_from_content() {
        for n in [
            "Please enable JavaScript to continue.",
            "You need to enable JavaScript to run this app.",
            "This site requires JavaScript.",
            "Powered by Discourse, best viewed with JavaScript enabled",
            "JavaScript is disabled in your browser.",
        ] {
            assert!(is_js_notice(n), "{n}");
        }
        for c in [
            "",
            "How to enable strict mode in Rust",
            "Scripts run in the browser; this paragraph explains how JavaScript engines \
             schedule microtasks and why you need to understand them."
                .repeat(5)
                .as_str(),
        ] {
            assert!(!is_js_notice(c), "{c}");
        }
    }
}
