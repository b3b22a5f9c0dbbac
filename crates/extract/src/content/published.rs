//! When a page was published and last changed, from the most deliberate statement the page
//! makes to the least: JSON-LD, then `<meta>` stamps, then marked-up `<time>` elements, the
//! URL's path, and last the short date lines of the page's header (`class="date"`,
//! `post-meta`, `byline`).
//!
//! A page that states no date gets none: the free text is never searched, since a date in
//! an article's body is what the article is about, not when it was written.

use url::Url;

use super::dates::{self, Day};
use super::dom::{Dom, hint_has as hinted};
use super::meta::JsonLd;
use super::tags::Tag;

/// `<meta>` names of the publication date, most specific first.
const PUBLISHED_KEYS: &[&str] = &[
    "article:published_time",
    "og:article:published_time",
    "og:published_time",
    "article:published",
    "published_time",
    "datepublished",
    "date_published",
    "publishdate",
    "publish-date",
    "publish_date",
    "publication_date",
    "pubdate",
    "pub_date",
    "parsely-pub-date",
    "sailthru.date",
    "citation_publication_date",
    "citation_date",
    "citation_online_date",
    "dc.date.issued",
    "dcterms.issued",
    "dc.date.created",
    "dcterms.created",
    "article.published",
    "article_date_original",
    "original-publish-date",
    "rnews:datepublished",
    "cxenseparse:recs:publishtime",
    "datecreated",
    "date.created",
    "creation_date",
    "created",
    "dc.date",
    "dcterms.date",
    "date",
    "release_date",
    "bt:pubdate",
    "weibo:article:create_at",
];

const MODIFIED_KEYS: &[&str] = &[
    "article:modified_time",
    "og:article:modified_time",
    "og:updated_time",
    "article:modified",
    "modified_time",
    "datemodified",
    "date_modified",
    "dcterms.modified",
    "dc.date.modified",
    "last-modified",
    "lastmod",
    "revised",
];

/// Class and id words of the elements that hold a page's date line.
const DATE_HINTS: &[&str] = &[
    "date",
    "time",
    "publish",
    "posted",
    "byline",
    "post-meta",
    "entry-meta",
    "article-meta",
    "story-meta",
    "meta-info",
    "dateline",
    "datum",
    "fecha",
    "data",
    "tarih",
    "info",
    "tagline",
    "stamp",
];

/// Hints of dates that are not the page's own publication.
const OTHER_DATE_HINTS: &[&str] = &[
    "modif",
    "updat",
    "comment",
    "reply",
    "copyright",
    "footer",
    "related",
    "sidebar",
    "expir",
    "event",
    "weather",
    "today",
    "current",
    "archive",
    "calendar",
    "recent",
];

#[derive(Debug, Default)]
pub struct Dates {
    pub published: Option<String>,
    pub modified: Option<String>,
}

fn from_metas(metas: &[(String, &str)], keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| {
        metas
            .iter()
            .filter(|(mk, _)| mk == k)
            .find_map(|(_, v)| dates::normalise(v))
    })
}

fn stamp_of(dom: &Dom, i: u32) -> Option<String> {
    ["datetime", "content", "title"]
        .iter()
        .filter_map(|a| dom.attr(i, a))
        .find_map(dates::normalise)
        .or_else(|| dates::find(&dom.words(i, 200)).map(|d| d.iso()))
}

/// Elements marked as the publication date (`itemprop`, a `<time>` or `<abbr>` with a
/// publication class), in document order.
fn marked(dom: &Dom) -> Option<String> {
    let mut first_time = None;
    for i in 0..dom.nodes.len() as u32 {
        let n = dom.node(i);
        if matches!(n.tag, Tag::Text | Tag::Meta) {
            continue;
        }
        let prop = dom.attr(i, "itemprop").unwrap_or("");
        if (prop.eq_ignore_ascii_case("datePublished") || prop.eq_ignore_ascii_case("dateCreated"))
            && let Some(s) = stamp_of(dom, i)
        {
            return Some(s);
        }
        if matches!(n.tag, Tag::Time | Tag::Abbr) {
            let hint = &*n.hint;
            if hinted(
                hint,
                &["publish", "entry-date", "post-date", "created", "pubdate"],
            ) && !hinted(hint, OTHER_DATE_HINTS)
                && let Some(s) = stamp_of(dom, i)
            {
                return Some(s);
            }
            if n.tag == Tag::Time
                && first_time.is_none()
                && !in_other_context(dom, i)
                && !prop.to_ascii_lowercase().contains("modified")
            {
                first_time = dom.attr(i, "datetime").and_then(dates::normalise);
            }
        }
    }
    first_time
}

/// Inside a comment, a footer or a sidebar: dates there are someone else's.
fn in_other_context(dom: &Dom, i: u32) -> bool {
    dom.within(i, 12, |n| {
        matches!(n.tag, Tag::Footer | Tag::Nav) || hinted(&n.hint, OTHER_DATE_HINTS)
    })
}

/// Short date lines: elements whose class or id speaks of dates, or (with `by_hint` false)
/// any short element that is mostly a date (`<p>July 2, 2025</p>`, "Jane Doe | July 2,
/// 2025"), the first in document order outside comments, footers and navigation.
fn date_lines(dom: &Dom, by_hint: bool) -> Option<Day> {
    let max = if by_hint { 240 } else { 100 };
    let mut i = 0;
    while i < dom.nodes.len() as u32 {
        let n = dom.node(i);
        if matches!(
            n.tag,
            Tag::Script | Tag::Style | Tag::Head | Tag::Nav | Tag::Footer
        ) {
            i = dom.subtree_end(i);
            continue;
        }
        // Without a hint, only elements whose own text starts with or holds a digit: a date
        // line's element holds its digits itself, and the walk stays linear.
        let candidate = n.tag != Tag::Text
            && if by_hint {
                hinted(&n.hint, DATE_HINTS)
            } else {
                own_digits(dom, i)
            }
            && !hinted(&n.hint, OTHER_DATE_HINTS);
        if candidate {
            let text = dom.words(i, max);
            if !text.is_empty()
                && text.len() < max
                && let Some(d) = dates::find(&text)
                && !in_other_context(dom, i)
            {
                return Some(d);
            }
        }
        i += 1;
    }
    None
}

fn own_digits(dom: &Dom, i: u32) -> bool {
    dom.children(i).any(|c| {
        dom.node(c).tag == Tag::Text && {
            let t = dom.text_of(c);
            (t.len() < 100 && t.bytes().any(|b| b.is_ascii_digit()))
                || (!t.is_ascii() && dates::ascii_digits(t) != t)
        }
    })
}

pub fn dates(dom: &Dom, metas: &[(String, &str)], ld: &JsonLd, url: Option<&Url>) -> Dates {
    let published = ld
        .published
        .as_deref()
        .and_then(dates::normalise)
        .or_else(|| from_metas(metas, PUBLISHED_KEYS))
        .or_else(|| {
            // Any other stamp that names publication or creation.
            metas
                .iter()
                .filter(|(k, _)| {
                    (k.contains("publish") || k.contains("pubdate") || k.contains("created"))
                        && !k.contains("modif")
                        && !k.contains("updat")
                })
                .find_map(|(_, v)| dates::normalise(v))
        })
        .or_else(|| marked(dom));
    // The URL's day is the newsroom's own, where a stamp in UTC may fall on the next or the
    // previous day (htmldate trusts the URL first too).
    let url_day = url.and_then(|u| dates::in_url(u.path()));
    let published = match (published, url_day) {
        (Some(p), Some(u)) if dates::find(&p) != Some(u) => Some(u.iso()),
        (None, Some(u)) => Some(u.iso()),
        (p, _) => p,
    }
    .or_else(|| date_lines(dom, true).map(|d| d.iso()))
    .or_else(|| date_lines(dom, false).map(|d| d.iso()));
    let modified = ld
        .modified
        .as_deref()
        .and_then(dates::normalise)
        .or_else(|| from_metas(metas, MODIFIED_KEYS))
        .or_else(|| {
            (0..dom.nodes.len() as u32)
                .filter(|&i| {
                    dom.node(i).tag != Tag::Meta
                        && dom
                            .attr(i, "itemprop")
                            .is_some_and(|p| p.eq_ignore_ascii_case("dateModified"))
                })
                .find_map(|i| stamp_of(dom, i))
        });
    Dates {
        published,
        modified,
    }
}
