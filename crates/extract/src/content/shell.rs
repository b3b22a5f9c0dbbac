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
    /// A `<meta http-equiv=refresh>`: the page sends readers elsewhere (redirect stubs,
    /// whose script only repeats the redirect); the crawl follows its target instead.
    pub refresh: bool,
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
    if t.is_empty() || t.chars().count() > NOTICE_MAX_CHARS {
        return false;
    }
    let t = t.to_lowercase();
    if !t.contains("javascript") {
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

/// Longer than this, a text is content even when it mentions JavaScript.
const NOTICE_MAX_CHARS: usize = 400;

/// Per node, from one pass up the arena (children follow their parents): the visible
/// characters below it (not whitespace; never-content elements, `<noscript>` included,
/// add nothing to their parents), and whether its visible text says "javascript".
struct Visible {
    chars: Vec<u32>,
    js: Vec<bool>,
}

fn visible(dom: &Dom) -> Visible {
    let n = dom.nodes.len();
    let mut v = Visible {
        chars: vec![0; n],
        js: vec![false; n],
    };
    for i in (0..n).rev() {
        let node = &dom.nodes[i];
        if node.tag == Tag::Text {
            let t = dom.text_of(i as u32);
            v.chars[i] = t.chars().filter(|c| !c.is_whitespace()).count() as u32;
            v.js[i] = t
                .as_bytes()
                .windows(10)
                .any(|w| w.eq_ignore_ascii_case(b"javascript"));
        }
        let p = node.parent;
        let hidden = node.tag != Tag::Text && node.tag.is_never_content();
        if p != super::dom::NONE && !hidden {
            let (c, js) = (v.chars[i], v.js[i]);
            v.chars[p as usize] = v.chars[p as usize].saturating_add(c);
            v.js[p as usize] |= js;
        }
    }
    v
}

/// The visible text below `i` (as [`visible`] counts it), for a node whose count is small.
fn visible_text(dom: &Dom, i: u32) -> String {
    let mut s = String::new();
    let end = dom.subtree_end(i);
    let mut j = i + 1;
    while j < end {
        let n = dom.node(j);
        if n.tag != Tag::Text && n.tag.is_never_content() {
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

/// Whether node `i`, by the counts, may be a notice, and its text says it is. Only nodes
/// with a short text that mentions JavaScript are read, so the work stays linear.
fn notice(dom: &Dom, v: &Visible, i: u32) -> bool {
    let k = i as usize;
    v.js[k] && v.chars[k] as usize <= NOTICE_MAX_CHARS && is_js_notice(&visible_text(dom, i))
}

/// Turns each body `<noscript>` that is not a JavaScript notice into an ordinary block,
/// and the notices inside the opened ones into dropped elements. Returns whether the page
/// has a notice.
pub fn open_noscripts(dom: &mut Dom) -> bool {
    let noscripts: Vec<u32> = (0..dom.nodes.len() as u32)
        .filter(|&i| dom.node(i).tag == Tag::Noscript)
        .collect();
    if noscripts.is_empty() {
        return false;
    }
    let v = visible(dom);
    // The head's noscripts hold styles and pixels, never content.
    let head = (0..dom.nodes.len() as u32)
        .find(|&i| dom.node(i).tag == Tag::Head)
        .map_or(0..0, |h| h..dom.subtree_end(h));
    let mut notice_seen = false;
    let mut opened: Vec<u32> = Vec::new();
    for i in noscripts {
        if head.contains(&i) {
            continue;
        }
        // A noscript's children are in its own count (only its parent does not get them).
        if notice(dom, &v, i) {
            notice_seen = true;
            continue;
        }
        dom.nodes[i as usize].tag = Tag::Div;
        opened.push(i);
    }
    // Inside the outermost opened ones (nested ones are inside their subtrees), the
    // blocks that are notices are dropped.
    let mut covered_to = 0;
    for o in opened {
        if o < covered_to {
            continue;
        }
        let end = dom.subtree_end(o);
        covered_to = end;
        for j in o + 1..end {
            let tag = dom.node(j).tag;
            if tag.is_block() && tag != Tag::Div && notice(dom, &v, j) {
                dom.nodes[j as usize].tag = Tag::Noscript;
                notice_seen = true;
            }
        }
    }
    notice_seen
}

/// The signs of client-side rendering in `dom` (after [`open_noscripts`]).
pub fn signals(dom: &Dom, js_notice: bool) -> Shell {
    let v = visible(dom);
    let mut s = Shell {
        js_notice,
        ..Shell::default()
    };
    for &r in &dom.framework_roots {
        s.hydration = true;
        s.empty_root |= v.chars[r as usize] == 0;
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
            Tag::Meta
                if dom
                    .attr(i, "http-equiv")
                    .is_some_and(|h| h.eq_ignore_ascii_case("refresh")) =>
            {
                s.refresh = true;
            }
            Tag::Text | Tag::Root => {}
            _ => {
                if !s.empty_root
                    && v.chars[i as usize] == 0
                    && dom
                        .attr(i, "id")
                        .is_some_and(|id| ROOT_IDS.iter().any(|r| id.eq_ignore_ascii_case(r)))
                {
                    s.empty_root = true;
                }
            }
        }
    }
    if body != super::dom::NONE {
        s.body_chars = v.chars[body as usize];
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
            "Enable the feature flag if you need it.",
            "Scripts run in the browser; this paragraph explains how JavaScript engines \
             schedule microtasks and why you need to understand them."
                .repeat(5)
                .as_str(),
        ] {
            assert!(!is_js_notice(c), "{c}");
        }
    }

    /// Nested noscripts around nested blocks, each mentioning JavaScript: every one is
    /// weighed from counts made once, so the page extracts (this input took the first
    /// version quadratic time), and the notice at the bottom is still dropped.
    #[test]
    fn nested_noscripts_are_read_once() {
        let depth = 200;
        let mut html = String::from("<body>");
        for i in 0..depth {
            html.push_str(&format!("<noscript><section><p>Level {i} of a page about JavaScript engines and the way they compile code ahead of time, long enough to be content.</p>"));
        }
        html.push_str("<p>Please enable JavaScript.</p>");
        for _ in 0..depth {
            html.push_str("</section></noscript>");
        }
        let d = crate::extract_html(&html, &url::Url::parse("http://h/").unwrap());
        assert!(
            d.text.contains("Level 150 of a page"),
            "{}",
            &d.text[d.text.len().saturating_sub(300)..]
        );
        assert!(!d.text.contains("Please enable"));
        assert!(d.shell.js_notice);
    }
}
