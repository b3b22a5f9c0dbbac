//! Finds the main content. Every text block (the inline text owned by its nearest block box)
//! is weighed: long running text counts for the box, link-heavy text against it, short text
//! is neutral. The main content is the box whose subtree has the best balance of the two
//! (a maximum-sum subtree, with a bonus for boxes that say what they are), plus sibling
//! boxes that are clearly content too. Chrome that announces itself (navigation, footers,
//! hidden boxes, `class="sidebar"`) is removed before weighing.

use super::dom::{Dom, NONE};
use super::hints::{Hint, classify};
use super::tags::Tag;

/// A block whose own text is more than half link text is navigation: all of it counts
/// against its box.
const LINK_HEAVY: f32 = 0.5;
/// Below a third link text, a block can be running text; from it on, its links weigh
/// against its box in proportion.
const LINK_LIGHT: f32 = 0.34;
/// Characters of own text that make a block running text by length alone (a paragraph).
const LONG_TEXT: f32 = 80.0;
/// Characters of own text that, with punctuation, make a block running text (a sentence).
const SENTENCE: f32 = 25.0;

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

pub struct Selection {
    /// Roots of the kept subtrees, in document order.
    pub roots: Vec<u32>,
    /// Nodes inside the roots that are dropped all the same.
    pub dropped: Vec<bool>,
}

fn is_hidden(dom: &Dom, i: u32) -> bool {
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
    false
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

fn is_structural_main(dom: &Dom, i: u32) -> bool {
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

pub fn analyse(dom: &Dom, kind: super::PageType) -> Analysis {
    let forum = kind == super::PageType::Forum;
    let n = dom.nodes.len();
    let mut a = Analysis {
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
        forum,
        article: kind == super::PageType::Article,
    };
    let mut in_link = vec![false; n];
    let mut hint = vec![Hint::Neutral; n];
    let mut has_main = vec![false; n];
    let mut hidden = vec![false; n];
    let mut in_code = vec![false; n];
    // Pass 1, document order: inherited facts.
    for i in 0..n {
        let node = &dom.nodes[i];
        let p = node.parent;
        let (pdead, plink, powner) = if p == NONE {
            (false, false, 0)
        } else {
            (
                a.removed[p as usize],
                in_link[p as usize],
                a.owner[p as usize],
            )
        };
        a.removed[i] = pdead || node.tag.is_never_content();
        // Text in blocks inside a link (a card wrapped in `<a>`) is the card's text, not
        // anchor text.
        // On article pages, cards are teasers for other articles and count as links.
        in_code[i] = (p != NONE && in_code[p as usize]) || matches!(node.tag, Tag::Pre | Tag::Code);
        in_link[i] = (kind == super::PageType::Article || !node.tag.is_block())
            && (plink || node.tag == Tag::A);
        a.owner[i] = if node.tag.is_block() || node.tag == Tag::Root {
            i as u32
        } else {
            powner
        };
        if node.tag != Tag::Text && !a.removed[i] {
            if matches!(node.tag, Tag::Html | Tag::Body | Tag::Main | Tag::Article)
                || is_structural_main(dom, i as u32)
            {
                has_main[i] = true;
            } else if is_hidden(dom, i as u32) {
                hidden[i] = true;
            } else if !in_code[i] {
                // Class names inside code are syntax highlighting (`token comment`). On links
                // only the strong words count: there "header" styles the link (mdBook's
                // `<h2><a class="header">`) rather than names the page header.
                let inline = node.tag == Tag::A;
                hint[i] = match node.tag {
                    Tag::Nav | Tag::Footer | Tag::Menu | Tag::Figcaption => Hint::Chrome,
                    Tag::Header | Tag::Aside => Hint::Negative,
                    _ => match classify(&node.hint, forum) {
                        Hint::Negative if inline => Hint::Neutral,
                        h => h,
                    },
                };
            }
        }
    }
    for i in (1..n).rev() {
        let p = dom.nodes[i].parent;
        if p != NONE && has_main[i] {
            has_main[p as usize] = true;
        }
    }
    // Characters and punctuation of each text node, counted once for the three weighings.
    let counts: Vec<(u32, u32)> = (0..n)
        .map(|i| {
            if dom.nodes[i].tag == Tag::Text {
                count_text(dom.text_of(i as u32))
            } else {
                (0, 0)
            }
        })
        .collect();
    // A first weighing without the hints guards against a misnamed wrapper taking the
    // content with it.
    weigh(dom, &mut a, &in_link, &counts);
    // Hidden boxes go, unless they are most of the page: streaming renderers park the whole
    // document in a hidden box that a script reveals.
    let all_good = a.content_weight[0].max(1.0);
    for (i, &h) in hidden.iter().enumerate() {
        let p = dom.nodes[i].parent;
        if (h && a.content_weight[i] / all_good < 0.5) || (p != NONE && a.removed[p as usize]) {
            a.removed[i] = true;
        }
    }
    weigh(dom, &mut a, &in_link, &counts);
    let total = a.content_weight[0].max(1.0);
    let base_dead = a.removed.clone();
    // Class names are a convention, not a contract: page builders put every block inside a
    // "widget". When the hints would remove most of the good text, trust fewer of them.
    for level in [Hint::Negative, Hint::Strong, Hint::Positive] {
        a.removed.copy_from_slice(&base_dead);
        for i in 0..n {
            let share = a.content_weight[i] / total;
            let remove = match hint[i] {
                Hint::Chrome => true,
                Hint::Strong if level != Hint::Positive => share < 0.7,
                Hint::Negative if level == Hint::Negative => share < 0.3,
                _ => false,
            };
            // The main box's own markup outranks a class name on one of its ancestors.
            if remove && !(has_main[i] && share > 0.1) {
                a.removed[i] = true;
            }
            let p = dom.nodes[i].parent;
            if p != NONE && a.removed[p as usize] {
                a.removed[i] = true;
            }
        }
        let kept: f32 = (0..n)
            .filter(|&i| !a.removed[i] && dom.nodes[i].tag.is_block())
            .map(|i| a.own_chars[i] as f32 - a.own_link_chars[i] as f32)
            .sum();
        let all: f32 = (0..n)
            .filter(|&i| !base_dead[i] && dom.nodes[i].tag.is_block())
            .map(|i| a.own_chars[i] as f32 - a.own_link_chars[i] as f32)
            .sum();
        // Small pages are judged by share alone.
        if kept >= 0.1 * all && (kept >= 300.0 || kept >= 0.3 * all) {
            break;
        }
    }
    weigh(dom, &mut a, &in_link, &counts);
    a
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

/// The best-balanced box often includes teasers, comments or a list of other stories beside
/// the text; when a box inside it declares itself the content and holds a fair share of the
/// good text, that box is the content. Not when it is one of several alike (posts, cards).
fn descend(dom: &Dom, a: &Analysis, best: u32) -> u32 {
    let top = a.content_weight[best as usize];
    // Outside articles the text beside the declared box (specs, features, items) is as
    // likely content as not.
    let need = if a.article { 0.3 } else { DESCEND_SHARE };
    let mut max_good = 0.0f32;
    let mut cands: Vec<u32> = Vec::new();
    for i in best + 1..dom.subtree_end(best) {
        let iu = i as usize;
        if a.removed[iu] || a.content_weight[iu] < need * top || !dom.node(i).tag.is_block() {
            continue;
        }
        if !is_structural_main(dom, i) || has_alike_siblings(dom, a, i) {
            continue;
        }
        max_good = max_good.max(a.content_weight[iu]);
        cands.push(i);
    }
    // The deepest of those holding (almost) the most text: wrappers add titles and bylines.
    cands
        .into_iter()
        .rfind(|&i| a.content_weight[i as usize] >= 0.9 * max_good)
        .unwrap_or(best)
}

/// Labels that sit alone in a block inside article text.
const LABELS: &[&str] = &[
    "advertisement",
    "advertisment",
    "ad",
    "ads",
    "caption",
    "sponsored",
    "iklan",
    "anzeige",
    "publicité",
    "story continues below advertisement",
    "continue reading below",
    "article continues below advertisement",
    "scroll to continue",
    "related",
    "related articles",
    "read more",
    "share",
    "share this",
    "share this article",
];

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

/// Bylines, dates, "Comments are closed", "Related articles": short blocks before the first
/// and after the last block of running text are the frame of the article, not its text.
fn trim(dom: &Dom, a: &Analysis, roots: &[u32], dropped: &mut [bool]) {
    // Leaf blocks only: dropping a block drops everything inside it.
    let mut blocks: Vec<u32> = Vec::new();
    for &r in roots {
        for j in r..dom.subtree_end(r) {
            let ju = j as usize;
            if !dropped[ju] && !a.removed[ju] && dom.node(j).tag.is_block() && a.own_chars[ju] > 0 {
                if let Some(&last) = blocks.last()
                    && dom.is_ancestor(last, j)
                {
                    blocks.pop();
                }
                blocks.push(j);
            }
        }
    }
    // Each block's own text (its inline descendants, not nested blocks), gathered once.
    let mut own: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    for &r in roots {
        for j in r..dom.subtree_end(r) {
            let ju = j as usize;
            if dom.node(j).tag == Tag::Text && !dropped[ju] && !a.removed[ju] {
                let o = own.entry(a.owner[ju]).or_default();
                o.push_str(dom.text_of(j));
                o.push(' ');
            }
        }
    }
    let text_of = |b: u32| -> &str { own.get(&b).map(String::as_str).unwrap_or("") };
    let is_good = |b: u32| {
        a.content_weight[b as usize] > 0.0 && {
            let own = a.own_chars[b as usize] as f32;
            own > 0.0 && (a.own_link_chars[b as usize] as f32 / own) < LINK_LIGHT && own >= SENTENCE
        }
    };
    for &b in &blocks {
        let t = text_of(b).trim().trim_end_matches(':').to_lowercase();
        if LABELS.contains(&t.as_str()) {
            dropped[b as usize] = true;
        }
    }
    let own_good = |b: u32| {
        let own = a.own_chars[b as usize] as f32;
        is_good(b) && (own >= LONG_TEXT || a.own_punct[b as usize] > 0)
    };
    for &b in &blocks {
        if own_good(b) {
            break;
        }
        if dom.node(b).tag.heading_level().is_some() {
            continue;
        }
        if words(text_of(b)) < 12 {
            dropped[b as usize] = true;
        }
    }
    for &b in blocks.iter().rev() {
        if own_good(b) {
            break;
        }
        if words(text_of(b)) < 12 {
            dropped[b as usize] = true;
        }
    }
}

/// Outside articles, a declared box must hold this share of the best box's good text to be
/// preferred: the text beside it (specs, features, items) is as likely content as not.
const DESCEND_SHARE: f32 = 0.5;
/// A best box with less running text than this share of the page's text means a listing.
const LISTING_SHARE: f32 = 0.35;
/// ... or this share on a page that says it is an article.
const ARTICLE_LISTING_SHARE: f32 = 0.15;
/// The covering box holds this share of the text left after chrome removal.
const COVER_SHARE: f32 = 0.8;

/// Listings, catalogues and link-heavy pages have little running text anywhere: their
/// content is the items. With the chrome already removed, the smallest box holding most of
/// the remaining text is the content.
fn covering(dom: &Dom, a: &Analysis) -> u32 {
    let need = COVER_SHARE * a.chars[0] as f32;
    let mut pick = 0u32;
    for i in 0..dom.nodes.len() as u32 {
        let iu = i as usize;
        if !a.removed[iu] && dom.node(i).tag.is_block() && a.chars[iu] as f32 >= need {
            pick = i;
        }
    }
    pick
}

fn has_alike_siblings(dom: &Dom, a: &Analysis, i: u32) -> bool {
    let n = dom.node(i);
    if n.parent == NONE {
        return false;
    }
    let g = a.content_weight[i as usize];
    dom.children(n.parent).any(|s| {
        s != i
            && !a.removed[s as usize]
            && dom.node(s).tag == n.tag
            && a.content_weight[s as usize] >= 0.3 * g
            && a.content_weight[s as usize] > 0.0
    })
}

/// The whole visible page: the body (or the document), with only what is never content or
/// hidden dropped.
pub fn whole_page(dom: &Dom) -> Selection {
    let dropped = (0..dom.nodes.len() as u32)
        .map(|i| {
            let tag = dom.node(i).tag;
            tag != Tag::Text && (tag.is_never_content() || is_hidden(dom, i))
        })
        .collect();
    let body = (0..dom.nodes.len() as u32).find(|&i| dom.node(i).tag == Tag::Body);
    Selection {
        roots: vec![body.unwrap_or(0)],
        dropped,
    }
}

pub fn select(dom: &Dom, a: &Analysis, title: Option<&str>) -> Selection {
    let n = dom.nodes.len();
    let mut best = 0u32;
    let mut best_score = f32::MIN;
    for i in 0..n as u32 {
        let iu = i as usize;
        if a.removed[iu] || !dom.node(i).tag.is_block() {
            continue;
        }
        let s = balance(dom, a, i);
        if s >= best_score {
            best_score = s;
            best = i;
        }
    }
    // An article page needs far less running text in its best box to count as a list.
    let share = if a.article {
        ARTICLE_LISTING_SHARE
    } else {
        LISTING_SHARE
    };
    let listing = !is_structural_main(dom, best)
        && a.content_weight[best as usize] < share * a.chars[0] as f32;
    let best = if listing {
        covering(dom, a)
    } else {
        descend(dom, a, best)
    };
    let mut roots = vec![best];
    // Siblings that are clearly content too (a split article body, posts beside the first).
    let parent = dom.node(best).parent;
    if parent != NONE {
        let top = a.content_weight[best as usize];
        let mut merged = Vec::new();
        for s in dom.children(parent) {
            if s == best {
                merged.push(s);
                continue;
            }
            let su = s as usize;
            if a.removed[su] {
                continue;
            }
            let g = a.content_weight[su];
            if g > 0.0 && g - a.chrome_weight[su] > (0.15 * top).max(40.0) {
                merged.push(s);
            }
        }
        roots = merged;
    }
    let mut dropped = vec![false; n];
    for &r in &roots {
        for j in r..dom.subtree_end(r) {
            let ju = j as usize;
            if a.removed[ju] {
                dropped[ju] = true;
                continue;
            }
            // Menus and tag lists inside the content: many short links and little else. On
            // listings the links are the items.
            let node = dom.node(j);
            if !listing && node.tag.is_block() && a.chars[ju] > 0 {
                let ld = a.link_chars[ju] as f32 / a.chars[ju] as f32;
                let links = a.links[ju];
                let avg = a.link_chars[ju] as f32 / links.max(1) as f32;
                if ld > 0.6 && links >= 3 && avg < 15.0 && a.content_weight[ju] == 0.0 {
                    dropped[ju] = true;
                }
            }
            // The headline is the title, not the text.
            if node.tag == Tag::H1
                && let Some(t) = title
            {
                let h = dom.raw_text(j);
                let h = h.split_whitespace().collect::<Vec<_>>().join(" ");
                if !h.is_empty() && (t.contains(&h) || h.contains(t)) {
                    dropped[ju] = true;
                }
            }
            let p = node.parent;
            if p != NONE && dropped[p as usize] {
                dropped[ju] = true;
            }
        }
    }
    if !a.forum && !listing {
        trim(dom, a, &roots, &mut dropped);
    }
    Selection { roots, dropped }
}
