//! Picks the main content from the weighed boxes ([`super::score`]): the best-balanced box,
//! or on listings the smallest box covering most of the text, with its siblings that are
//! content too. Inside it, menus, the headline and the article's frame are dropped.

use super::dom::{Dom, NONE};
use super::hints::{Hint, classify};
use super::score::{
    Analysis, LINK_LIGHT, LONG_TEXT, SENTENCE, balance, is_hidden, is_structural_main,
};
use super::tags::Tag;

pub struct Selection {
    /// Roots of the kept subtrees, in document order.
    pub roots: Vec<u32>,
    /// Nodes inside the roots that are dropped all the same.
    pub dropped: Vec<bool>,
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
        let declared = is_structural_main(dom, i)
            || (a.content_weight[iu] >= NAMED_SHARE * top
                && (a.article || beside_is_links(a, best, i))
                && !lines_beside(a, best, i)
                && classify(&dom.node(i).hint, a.forum) == Hint::Positive);
        if !declared || has_alike_siblings(dom, a, i) {
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

/// Whether the text in `best` outside its box `inner` is a fair share links: teasers
/// (a headline link and an excerpt), product cards, menus. Specs, features and a
/// product's other facts beside its description have none, and are content.
fn beside_is_links(a: &Analysis, best: u32, inner: u32) -> bool {
    let (b, i) = (best as usize, inner as usize);
    let chars = a.chars[b].saturating_sub(a.chars[i]);
    let links = a.link_chars[b].saturating_sub(a.link_chars[i]);
    chars > 0 && links as f32 >= BESIDE_LINKS * chars as f32
}

/// Headings of the boxes that close an article: its author's or reviewer's card, the
/// site's disclaimer and the teasers for other articles.
const END_SECTIONS: &[&str] = &[
    "about the author",
    "about the authors",
    "about the reviewer",
    "about the writer",
    "about the editor",
    "author bio",
    "disclaimer",
    "disclaimers",
    "disclosure",
    "disclosures",
    "disclaimer & disclosures",
    "disclaimer and disclosures",
    "related posts",
    "related articles",
    "related stories",
    "related reading",
    "recommended posts",
    "recommended articles",
    "recommended for you",
    "recommended reading",
    "you may also like",
    "you might also like",
    "more stories",
    "more articles",
    "read next",
    "popular posts",
    "recent posts",
    "latest posts",
];

/// Headings that open the teasers for other pages of the site ("Related products",
/// "Recommended for you"), by their first word.
const TEASER_HEADINGS: &[&str] = &["related", "recommended", "similar"];

/// Whether the block `b`, labelled `t`, is a heading that opens teasers.
fn opens_teasers(dom: &Dom, b: u32, t: &str) -> bool {
    dom.node(b).tag.heading_level().is_some()
        && t.split(' ').count() <= 5
        && t.split(' ')
            .next()
            .is_some_and(|w| TEASER_HEADINGS.contains(&w))
}

/// Whether what follows `b` in the roots (`chars` characters) is teasers: links, one at
/// least every 300 characters. Notes and references under a "Related" heading are text.
fn teasers_follow(
    dom: &Dom,
    a: &Analysis,
    roots: &[u32],
    dropped: &[bool],
    b: u32,
    chars: usize,
) -> bool {
    let links = roots
        .iter()
        .flat_map(|&r| r.max(b + 1)..dom.subtree_end(r))
        .filter(|&j| dom.node(j).tag == Tag::A && !dropped[j as usize] && !a.removed[j as usize])
        .count();
    links >= 3 && links * 300 >= chars
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

/// A block's text as a label: lower case, spaces (no-break ones too) single, no colon.
fn label(text: &str) -> String {
    let t = text.split_whitespace().collect::<Vec<_>>().join(" ");
    t.trim_end_matches(':').trim_end().to_lowercase()
}

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
        let t = label(text_of(b));
        if LABELS.contains(&t.as_str()) {
            dropped[b as usize] = true;
        }
    }
    // The boxes that close an article ("About the author", "Disclaimer"): from such a
    // heading in the text's last third to the end is the frame.
    let total: usize = blocks
        .iter()
        .map(|&b| a.own_chars[b as usize] as usize)
        .sum();
    let mut seen = 0usize;
    let mut cut = None;
    for (k, &b) in blocks.iter().enumerate() {
        let t = label(text_of(b));
        if seen * 3 >= total * 2
            && (END_SECTIONS.contains(&t.as_str())
                || (opens_teasers(dom, b, &t)
                    && teasers_follow(dom, a, roots, dropped, b, total - seen)))
        {
            cut = Some(k);
            break;
        }
        seen += a.own_chars[b as usize] as usize;
    }
    if let Some(k) = cut {
        for &b in &blocks[k..] {
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
        // Headings and code (a function's signature) are never the frame.
        if dom.node(b).tag.heading_level().is_some() || dom.node(b).tag == Tag::Pre {
            continue;
        }
        if words(text_of(b)) < 12 {
            dropped[b as usize] = true;
        }
    }
    // After the text, a list item that is a link (a list of teasers for other stories) is
    // the frame too, however long its title.
    let link = |b: u32| {
        let own = a.own_chars[b as usize] as f32;
        dom.node(b).tag == Tag::Li && own > 0.0 && a.own_link_chars[b as usize] as f32 / own > 0.8
    };
    let tail: Vec<u32> = blocks
        .iter()
        .rev()
        .take_while(|&&b| !own_good(b))
        .copied()
        .collect();
    // Short lines after the text that outweigh it are its lists (a top ten, a table of
    // names), not its frame.
    let lines: f32 = tail
        .iter()
        .map(|&b| (a.own_chars[b as usize] - a.own_link_chars[b as usize]) as f32)
        .sum();
    let good: f32 = roots.iter().map(|&r| a.content_weight[r as usize]).sum();
    let lists = lines >= good.max(ARTICLE_TEXT);
    for b in tail {
        if dom.node(b).tag == Tag::Pre {
            continue;
        }
        if link(b) || (!lists && words(text_of(b)) < 12) {
            dropped[b as usize] = true;
        }
    }
}

/// Outside articles, a declared box must hold this share of the best box's good text to be
/// preferred: the text beside it (specs, features, items) is as likely content as not.
const DESCEND_SHARE: f32 = 0.5;
/// A box that only calls itself content by its class must hold this share of the best
/// box's good text to be preferred.
const NAMED_SHARE: f32 = 0.7;
/// Share of links in the text beside a box named as the content for it to be preferred on
/// a page that does not say it is an article ([`beside_is_links`]).
const BESIDE_LINKS: f32 = 0.15;
/// A best box with less running text than this share of the page's text means a listing.
const LISTING_SHARE: f32 = 0.35;
/// ... or this share on a page that says it is an article.
const ARTICLE_LISTING_SHARE: f32 = 0.15;
/// Running text (weighed characters) that makes the best box an article's text, whatever
/// menus stand beside it.
const ARTICLE_TEXT: f32 = 300.0;
/// Running text (weighed characters) past which a form is a page wrapped in one (ASP.NET
/// pages are) rather than a form to fill in, or this much a field when it has many.
const FORM_TEXT: f32 = 300.0;
const FIELD_TEXT: f32 = 60.0;
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
    let best = best_balanced(dom, a);
    // An article page needs far less running text in its best box to count as a list.
    let share = if a.article {
        ARTICLE_LISTING_SHARE
    } else {
        LISTING_SHARE
    };
    // Menus and tag clouds beside a box of running text (short links) are not items of
    // a list; beside a box of a few lines they may be (thread titles, event names).
    let page_text = if a.content_weight[best as usize] >= ARTICLE_TEXT {
        a.chars[0].saturating_sub(menu_chars(dom, a, best))
    } else {
        a.chars[0]
    };
    let listing = !is_structural_main(dom, best)
        && a.content_weight[best as usize] < share * page_text as f32;
    let best = if listing {
        covering(dom, a)
    } else if a.forum {
        // A thread's posts are all content, and each may declare its body the main box:
        // descending into one would drop the others.
        best
    } else {
        descend(dom, a, best)
    };
    let roots = with_siblings(dom, a, best);
    let mut dropped = drop_inside(dom, a, &roots, listing, title);
    if !a.forum && !listing {
        trim(dom, a, &roots, &mut dropped);
    }
    Selection { roots, dropped }
}

/// A menu or tag list: many short links and little else.
fn is_menu(a: &Analysis, j: u32) -> bool {
    let ju = j as usize;
    if a.chars[ju] == 0 {
        return false;
    }
    let ld = a.link_chars[ju] as f32 / a.chars[ju] as f32;
    let links = a.links[ju];
    let avg = a.link_chars[ju] as f32 / links.max(1) as f32;
    ld > 0.6 && links >= 3 && avg < 15.0 && a.content_weight[ju] == 0.0
}

/// Characters in the live menus of the page outside the box `best` (the outermost of
/// nested ones; not a box holding `best`).
fn menu_chars(dom: &Dom, a: &Analysis, best: u32) -> u32 {
    let mut total = 0;
    let mut i = 0u32;
    let n = dom.nodes.len() as u32;
    let best_end = dom.subtree_end(best);
    while i < n {
        if i == best {
            i = best_end;
            continue;
        }
        if !dom.is_ancestor(i, best)
            && !a.removed[i as usize]
            && dom.node(i).tag.is_block()
            && is_menu(a, i)
        {
            total += a.chars[i as usize];
            i = dom.subtree_end(i);
        } else {
            i += 1;
        }
    }
    total
}

/// The live block with the best balance. On a tie the later box in document order wins,
/// so a box wins over the ancestors it ties with.
fn best_balanced(dom: &Dom, a: &Analysis) -> u32 {
    let mut best = 0u32;
    let mut best_score = f32::MIN;
    for i in 0..dom.nodes.len() as u32 {
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
    with_its_lines(dom, a, best, best_score)
}

/// Plain text in box `i`: lines that are neither running text nor links.
fn plain(a: &Analysis, i: u32) -> f32 {
    let iu = i as usize;
    a.chars[iu] as f32 - a.link_chars[iu] as f32 - a.content_weight[iu]
}

/// Whether `outer` holds more plain text beside its box `inner` than `inner` holds
/// running text (an article's lists of names beside its paragraphs).
fn lines_beside(a: &Analysis, outer: u32, inner: u32) -> bool {
    plain(a, outer) - plain(a, inner) >= a.content_weight[inner as usize].max(ARTICLE_TEXT)
}

/// The nearest box holding `best` that ties with it and adds more plain text (lines
/// that are neither running text nor links: a list of names, a table of figures) than
/// `best` holds running text: the article's lists, not its frame.
fn with_its_lines(dom: &Dom, a: &Analysis, best: u32, score: f32) -> u32 {
    if a.content_weight[best as usize] <= 0.0 {
        return best;
    }
    let mut p = dom.node(best).parent;
    while p != NONE {
        if balance(dom, a, p) >= score && lines_beside(a, p, best) {
            return p;
        }
        p = dom.node(p).parent;
    }
    best
}

/// The best box with its siblings that are clearly content too (a split article body,
/// posts beside the first), in document order.
fn with_siblings(dom: &Dom, a: &Analysis, best: u32) -> Vec<u32> {
    let parent = dom.node(best).parent;
    if parent == NONE {
        return vec![best];
    }
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
    merged
}

/// A form inside the root `root` with fields to fill in and little running text of its
/// own (labels, help, a consent notice) beside the root's.
fn is_fill_in(dom: &Dom, a: &Analysis, form: u32, root: u32) -> bool {
    let fields = (form..dom.subtree_end(form))
        .filter(|&j| match dom.node(j).tag {
            Tag::Input => !matches!(
                dom.attr(j, "type").map(str::to_ascii_lowercase).as_deref(),
                Some("hidden" | "submit" | "button" | "image" | "reset")
            ),
            Tag::Select | Tag::Textarea => true,
            _ => false,
        })
        .count();
    let text = a.content_weight[form as usize];
    fields >= 2
        && text < FORM_TEXT.max(FIELD_TEXT * fields as f32)
        && text < 0.5 * a.content_weight[root as usize]
}

/// What is dropped inside the roots: removed boxes, menus and the headline.
fn drop_inside(
    dom: &Dom,
    a: &Analysis,
    roots: &[u32],
    listing: bool,
    title: Option<&str>,
) -> Vec<bool> {
    let mut dropped = vec![false; dom.nodes.len()];
    for &r in roots {
        for j in r..dom.subtree_end(r) {
            let ju = j as usize;
            if a.removed[ju] {
                dropped[ju] = true;
                continue;
            }
            // Menus and tag lists inside the content: many short links and little else. On
            // listings the links are the items.
            let node = dom.node(j);
            if !listing && node.tag.is_block() && is_menu(a, j) {
                dropped[ju] = true;
            }
            // A form to fill in (contact, quote, sign-up) is the page's tool, not its
            // text: its labels and help read as short lines.
            if node.tag == Tag::Form && j != r && is_fill_in(dom, a, j, r) {
                dropped[ju] = true;
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
    dropped
}
