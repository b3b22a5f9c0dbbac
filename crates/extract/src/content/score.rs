//! Finds the main content. Every text block (the inline text owned by its nearest block box)
//! is weighed: long running text counts for the box, link-heavy text against it, short text
//! is neutral. The main content is the box whose subtree has the best balance of the two
//! (a maximum-sum subtree, with a bonus for boxes that say what they are), plus sibling
//! boxes that are clearly content too. Chrome that announces itself (navigation, footers,
//! hidden boxes, `class="sidebar"`) is removed before weighing. [`super::selection`]
//! picks the boxes from the weights.

use super::dom::{Dom, NONE, Node, hint_has};
use super::hints::{Hint, classify, is_text_slot};
use super::tags::Tag;

/// A block whose own text is more than half link text is navigation: all of it counts
/// against its box.
const LINK_HEAVY: f32 = 0.5;
/// Below a third link text, a block can be running text; from it on, its links weigh
/// against its box in proportion.
pub(super) const LINK_LIGHT: f32 = 0.34;
/// Characters of own text that make a block running text by length alone (a paragraph).
pub(super) const LONG_TEXT: f32 = 80.0;
/// Characters of own text that, with punctuation, make a block running text (a sentence).
pub(super) const SENTENCE: f32 = 25.0;
/// Text (characters: running text, or a listing's items less their links) past which a box
/// named as an ad slot or a paywall is taken for the page's own text ([`is_text_slot`]):
/// a dozen lines.
const SLOT_TEXT: f32 = 1000.0;

/// Per-node facts, indexed like [`Dom::nodes`].
pub struct Analysis {
    /// Removed as chrome (by element, hint or a removed ancestor).
    pub removed: Vec<bool>,
    /// Nearest block box owning this node's inline text (for text nodes and inline elements).
    pub owner: Vec<u32>,
    pub chars: Vec<u32>,
    pub link_chars: Vec<u32>,
    /// Text owned directly by a block (not by nested blocks).
    pub own_chars: Vec<u32>,
    pub own_link_chars: Vec<u32>,
    pub own_punct: Vec<u32>,
    pub own_links: Vec<u32>,
    /// Links in the subtree.
    pub links: Vec<u32>,
    /// Weight of running text in the subtree (for the box).
    pub content_weight: Vec<f32>,
    /// Weight of link-heavy text in the subtree (against the box).
    pub chrome_weight: Vec<f32>,
    pub forum: bool,
    pub article: bool,
}

pub(super) fn is_hidden(dom: &Dom, i: u32) -> bool {
    if dom.attr(i, "hidden").is_some() {
        return true;
    }
    if dom.attr(i, "aria-hidden") == Some("true") {
        return true;
    }
    if let Some(style) = dom.attr(i, "style") {
        let s: String = style
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        if s.contains("display:none") || s.contains("visibility:hidden") {
            return true;
        }
    }
    match dom.attr(i, "class").map(hidden_by_class) {
        Some(Hidden::Always) => true,
        // Sites keep a copy of a post as structured data in a box their style sheet hides;
        // elsewhere `hidden` is as often a fold that script opens (a tab, "show more").
        Some(Hidden::Mostly) => holds_microdata(dom, i),
        _ => false,
    }
}

#[derive(PartialEq)]
enum Hidden {
    Always,
    Mostly,
    No,
}

/// Bootstrap's `d-none` hides a box on every screen unless a class shows it again from
/// some width on (`d-md-block`, `md:block`); `hidden` (Bootstrap 3's, Tailwind's,
/// XenForo's) too, but script takes it off.
fn hidden_by_class(class: &str) -> Hidden {
    let mut hidden = Hidden::No;
    for t in class.split_ascii_whitespace() {
        if t == "d-none" {
            hidden = Hidden::Always;
        } else if t == "hidden" && hidden == Hidden::No {
            hidden = Hidden::Mostly;
        } else if (t.starts_with("d-") && t.matches('-').count() == 2) || t.contains(':') {
            return Hidden::No;
        }
    }
    hidden
}

/// Whether the box's first elements carry schema.org microdata (`itemprop`).
fn holds_microdata(dom: &Dom, i: u32) -> bool {
    (i..dom.subtree_end(i))
        .take(8)
        .any(|j| dom.attr(j, "itemprop").is_some())
}

fn count_text(s: &str) -> (u32, u32) {
    let mut chars = 0;
    let mut punct = 0;
    for c in s.chars() {
        if c.is_whitespace() {
            continue;
        }
        chars += 1;
        if matches!(
            c,
            '.' | ',' | ';' | '!' | '?' | '。' | '，' | '、' | '！' | '？' | '：'
        ) {
            punct += 1;
        }
    }
    (chars, punct)
}

pub(super) fn is_structural_main(dom: &Dom, i: u32) -> bool {
    let n = dom.node(i);
    matches!(n.tag, Tag::Article | Tag::Main)
        || dom.attr(i, "role") == Some("main")
        || matches!(
            dom.attr(i, "itemprop"),
            Some("articleBody") | Some("text") | Some("reviewBody") | Some("mainContentOfPage")
        )
}

/// Counts the text each block owns and weighs it, then sums the weights up the tree.
fn weigh(dom: &Dom, a: &mut Analysis, in_link: &[bool], counts: &[(u32, u32)]) {
    let n = dom.nodes.len();
    for v in [
        &mut a.chars,
        &mut a.link_chars,
        &mut a.own_chars,
        &mut a.own_link_chars,
        &mut a.own_punct,
        &mut a.own_links,
        &mut a.links,
    ] {
        v.iter_mut().for_each(|x| *x = 0);
    }
    a.content_weight.iter_mut().for_each(|x| *x = 0.0);
    a.chrome_weight.iter_mut().for_each(|x| *x = 0.0);
    for i in 0..n {
        if a.removed[i] {
            continue;
        }
        let node = &dom.nodes[i];
        let o = a.owner[i] as usize;
        if node.tag == Tag::Text {
            let (c, p) = counts[i];
            a.own_chars[o] += c;
            a.own_punct[o] += p;
            a.chars[i] = c;
            if in_link[i] {
                a.own_link_chars[o] += c;
                a.link_chars[i] = c;
            }
        } else if node.tag == Tag::A {
            a.own_links[o] += 1;
            a.links[i] = 1;
        }
    }
    for i in 0..n {
        if a.removed[i] || !dom.nodes[i].tag.is_block() {
            continue;
        }
        let own = a.own_chars[i] as f32;
        if own == 0.0 {
            continue;
        }
        let ld = a.own_link_chars[i] as f32 / own;
        if ld > LINK_HEAVY {
            a.chrome_weight[i] = own;
        } else if (own >= LONG_TEXT || (own >= SENTENCE && a.own_punct[i] > 0)) && ld < LINK_LIGHT {
            a.content_weight[i] = own * (1.0 - ld);
        } else if ld >= LINK_LIGHT {
            a.chrome_weight[i] = own * ld;
        }
    }
    for i in (1..n).rev() {
        let p = dom.nodes[i].parent;
        if p == NONE || a.removed[i] {
            continue;
        }
        let p = p as usize;
        a.chars[p] += a.chars[i];
        a.link_chars[p] += a.link_chars[i];
        a.links[p] += a.links[i];
        a.content_weight[p] += a.content_weight[i];
        a.chrome_weight[p] += a.chrome_weight[i];
    }
}

impl Analysis {
    /// Nothing removed, owned or counted yet.
    fn empty(n: usize, kind: super::PageType) -> Self {
        Analysis {
            removed: vec![false; n],
            owner: vec![NONE; n],
            chars: vec![0; n],
            link_chars: vec![0; n],
            own_chars: vec![0; n],
            own_link_chars: vec![0; n],
            own_punct: vec![0; n],
            own_links: vec![0; n],
            links: vec![0; n],
            content_weight: vec![0.0; n],
            chrome_weight: vec![0.0; n],
            forum: kind == super::PageType::Forum,
            article: kind == super::PageType::Article,
        }
    }
}

/// What the markup says of each node, indexed like [`Dom::nodes`]. The weighings and the
/// removals read it; nothing changes it after [`mark`].
struct Marks {
    /// Its text is anchor text.
    in_link: Vec<bool>,
    hint: Vec<Hint>,
    /// The box says it is the main content, or holds one that does.
    has_main: Vec<bool>,
    hidden: Vec<bool>,
}

pub fn analyse(dom: &Dom, kind: super::PageType) -> Analysis {
    let mut a = Analysis::empty(dom.nodes.len(), kind);
    let marks = mark(dom, &mut a, kind);
    let counts = text_counts(dom);
    // A first weighing without the hints guards against a misnamed wrapper taking the
    // content with it.
    weigh(dom, &mut a, &marks.in_link, &counts);
    remove_hidden(dom, &mut a, &marks.hidden);
    weigh(dom, &mut a, &marks.in_link, &counts);
    remove_by_hints(dom, &mut a, &marks);
    weigh(dom, &mut a, &marks.in_link, &counts);
    a
}

/// Pass 1, document order: inherited facts (removal, link text, owning block) and what
/// each element's own markup says. Then the boxes holding a main box learn of it.
fn mark(dom: &Dom, a: &mut Analysis, kind: super::PageType) -> Marks {
    let n = dom.nodes.len();
    let mut m = Marks {
        in_link: vec![false; n],
        hint: vec![Hint::Neutral; n],
        has_main: vec![false; n],
        hidden: vec![false; n],
    };
    let mut in_code = vec![false; n];
    // Comments (schema.org `Comment`) mark their text `itemprop="text"` as posts do; it
    // does not make them the page's main box.
    let mut in_comment = vec![false; n];
    let forum = a.forum;
    let qa = forum && is_qa(dom);
    for i in 0..n {
        let node = &dom.nodes[i];
        let p = node.parent;
        let (pdead, plink, powner) = if p == NONE {
            (false, false, 0)
        } else {
            (
                a.removed[p as usize],
                m.in_link[p as usize],
                a.owner[p as usize],
            )
        };
        a.removed[i] = pdead || node.tag.is_never_content();
        // Text in blocks inside a link (a card wrapped in `<a>`) is the card's text, not
        // anchor text.
        // On article pages, cards are teasers for other articles and count as links.
        in_code[i] = (p != NONE && in_code[p as usize]) || matches!(node.tag, Tag::Pre | Tag::Code);
        in_comment[i] = (p != NONE && in_comment[p as usize])
            || dom
                .attr(i as u32, "itemtype")
                .is_some_and(|t| t.ends_with("/Comment"));
        m.in_link[i] = (kind == super::PageType::Article || !node.tag.is_block())
            && (plink || node.tag == Tag::A);
        a.owner[i] = if node.tag.is_block() || node.tag == Tag::Root {
            i as u32
        } else {
            powner
        };
        if node.tag != Tag::Text && !a.removed[i] {
            if matches!(node.tag, Tag::Html | Tag::Body | Tag::Main | Tag::Article)
                || (is_structural_main(dom, i as u32) && !in_comment[i])
            {
                m.has_main[i] = true;
            } else if is_hidden(dom, i as u32) {
                m.hidden[i] = true;
            } else if !in_code[i] {
                // Class names inside code are syntax highlighting (`token comment`).
                m.hint[i] = if (qa && qa_chrome(dom, i as u32)) || (forum && post_frame(&node.hint))
                {
                    Hint::Strong
                } else {
                    element_hint(node, forum)
                };
            }
        }
    }
    for i in (1..n).rev() {
        let p = dom.nodes[i].parent;
        if p != NONE && m.has_main[i] {
            m.has_main[p as usize] = true;
        }
    }
    m
}

/// A question-and-answer page (schema.org `Question` / `Answer` markup): its content is
/// the question and the answers, not the remarks under them.
fn is_qa(dom: &Dom) -> bool {
    (0..dom.nodes.len() as u32).any(|i| {
        dom.attr(i, "itemtype")
            .is_some_and(|t| t.ends_with("/Question") || t.ends_with("/Answer"))
    })
}

/// On Q&A pages, what surrounds each post: comments under it, the author's card (name,
/// reputation, badges), votes, tags and the post's menu.
fn qa_chrome(dom: &Dom, i: u32) -> bool {
    const MARKS: &[&str] = &[
        "post-signature",
        "user-info",
        "user-details",
        "user-card",
        "votecell",
        "vote-count",
        "voting-container",
        "post-taglist",
        "post-menu",
        "comments-link",
        "post-form",
    ];
    let hint = &*dom.node(i).hint;
    dom.attr(i, "itemtype")
        .is_some_and(|t| t.ends_with("/Comment"))
        || hint_has(hint, MARKS)
}

/// On forum pages, the frame of each post that forum software marks up: the author's card
/// (name, post count, join date), the post's attribution line, signatures, "Click to
/// expand" and the thread's buttons.
fn post_frame(hint: &str) -> bool {
    const MARKS: &[&str] = &[
        "user-info",
        "userinfo",
        "user-details",
        "postprofile",
        "message-attribution",
        "message-signature",
        "message-cell--user",
        "message-lastedit",
        "message-attachments",
        "post-signature",
        "expandlink",
        "thread-actions",
        "button-text",
    ];
    hint_has(hint, MARKS)
}

/// On links only the strong words count: there "header" styles the link (mdBook's
/// `<h2><a class="header">`) rather than names the page header.
fn element_hint(node: &Node, forum: bool) -> Hint {
    let inline = node.tag == Tag::A;
    match node.tag {
        Tag::Nav | Tag::Footer | Tag::Menu | Tag::Figcaption => Hint::Chrome,
        Tag::Header | Tag::Aside => Hint::Negative,
        _ => match classify(&node.hint, forum) {
            Hint::Negative if inline => Hint::Neutral,
            h => h,
        },
    }
}

/// Characters and punctuation of each text node, counted once for the three weighings.
fn text_counts(dom: &Dom) -> Vec<(u32, u32)> {
    (0..dom.nodes.len())
        .map(|i| {
            if dom.nodes[i].tag == Tag::Text {
                count_text(dom.text_of(i as u32))
            } else {
                (0, 0)
            }
        })
        .collect()
}

/// Hidden boxes go, unless they are most of the page: streaming renderers park the whole
/// document in a hidden box that a script reveals.
fn remove_hidden(dom: &Dom, a: &mut Analysis, hidden: &[bool]) {
    let all_good = a.content_weight[0].max(1.0);
    for (i, &h) in hidden.iter().enumerate() {
        let p = dom.nodes[i].parent;
        if (h && a.content_weight[i] / all_good < 0.5) || (p != NONE && a.removed[p as usize]) {
            a.removed[i] = true;
        }
    }
}

/// Class names are a convention, not a contract: page builders put every block inside a
/// "widget". When the hints would remove most of the good text, trust fewer of them.
fn remove_by_hints(dom: &Dom, a: &mut Analysis, marks: &Marks) {
    let n = dom.nodes.len();
    let total = a.content_weight[0].max(1.0);
    let base_dead = a.removed.clone();
    for level in [Hint::Negative, Hint::Strong, Hint::Positive] {
        a.removed.copy_from_slice(&base_dead);
        for i in 0..n {
            let share = a.content_weight[i] / total;
            let remove = match marks.hint[i] {
                Hint::Chrome => true,
                Hint::Strong if level != Hint::Positive => {
                    share < 0.7 && !(holds_text(a, i) && is_text_slot(&dom.nodes[i].hint))
                }
                Hint::Negative if level == Hint::Negative => share < 0.3,
                _ => false,
            };
            // The main box's own markup outranks a class name on one of its ancestors.
            if remove && !(marks.has_main[i] && share > 0.1) {
                a.removed[i] = true;
            }
            let p = dom.nodes[i].parent;
            if p != NONE && a.removed[p as usize] {
                a.removed[i] = true;
            }
        }
        let kept = running_text(dom, a, &a.removed);
        let all = running_text(dom, a, &base_dead);
        // Small pages are judged by share alone; what announces itself as chrome whatever
        // else it says (a sidebar, a footer) may hold more of a small page.
        let share = if level == Hint::Strong { 0.15 } else { 0.3 };
        if kept >= 0.1 * all && (kept >= 300.0 || kept >= share * all) {
            break;
        }
    }
}

/// Whether box `i` holds a dozen lines of text that is not links: running text, or the
/// items of a listing (an ad slot holds an iframe, an image or a label).
fn holds_text(a: &Analysis, i: usize) -> bool {
    a.content_weight[i] >= SLOT_TEXT
        || a.chars[i].saturating_sub(a.link_chars[i]) as f32 >= SLOT_TEXT
}

/// Own text less link text, summed over the blocks that `removed` keeps.
fn running_text(dom: &Dom, a: &Analysis, removed: &[bool]) -> f32 {
    (0..dom.nodes.len())
        .filter(|&i| !removed[i] && dom.nodes[i].tag.is_block())
        .map(|i| a.own_chars[i] as f32 - a.own_link_chars[i] as f32)
        .sum()
}

pub fn balance(dom: &Dom, a: &Analysis, i: u32) -> f32 {
    let iu = i as usize;
    let mut s = a.content_weight[iu] - a.chrome_weight[iu];
    let tag = dom.node(i).tag;
    if tag == Tag::Html || tag == Tag::Body {
        return s;
    }
    if is_structural_main(dom, i) || classify(&dom.node(i).hint, a.forum) == Hint::Positive {
        s += 0.25 * a.content_weight[iu];
    }
    s
}
