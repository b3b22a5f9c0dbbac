//! Who wrote the page: JSON-LD and `<meta>` statements first, then the page's own byline
//! (`itemprop="author"`, `rel="author"`, elements classed `author` or `byline`), cleaned of
//! what surrounds names there ("By", dates, "| 5 min read").

use super::dom::{Dom, hint_has as hinted};
use super::meta::JsonLd;
use super::tags::Tag;

const AUTHOR_KEYS: &[&str] = &[
    "author",
    "article:author",
    "og:article:author",
    "book:author",
    "parsely-author",
    "sailthru.author",
    "dc.creator",
    "dcterms.creator",
    "citation_author",
    "byl",
    "author_name",
];

const BYLINE_HINTS: &[&str] = &[
    "author",
    "byline",
    "by-line",
    "writer",
    "posted-by",
    "postedby",
    "contributor",
    "autor",
    "auteur",
    "reporter",
    "journalist",
    "creator",
];

/// Hints of author elements that hold more than a name, or someone else's.
const NOT_BYLINE_HINTS: &[&str] = &[
    "comment",
    "reply",
    "avatar",
    "bio",
    "description",
    "about",
    "more-from",
    "related",
    "social",
    "share",
    "follow",
    "img",
    "image",
    "photo",
    "caption",
    "widget",
    "sidebar",
];

/// What precedes a name in a byline, lower-cased, longest first.
const PREFIXES: &[&str] = &[
    "view all posts by",
    "more articles by",
    "reviewed by",
    "written by",
    "posted by",
    "reported by",
    "words by",
    "story by",
    "published by",
    "authored by",
    "text by",
    "text von",
    "authors:",
    "author:",
    "authors",
    "author",
    "autor:",
    "autorin:",
    "auteur:",
    "автор:",
    "yazar:",
    "by:",
    "by",
    "von",
    "por",
    "par",
    "door",
    "text:",
];

const NOT_NAMES: &[&str] = &[
    "admin",
    "administrator",
    "anonymous",
    "unknown",
    "author",
    "authors",
    "by",
    "guest",
    "editor",
    "staff",
    "share",
    "follow",
    "menu",
    "home",
    "posted",
    "published",
    "sign in",
    "log in",
    "login",
    "subscribe",
    "contact",
];

/// Words of job titles that follow a name in bylines ("Jane Doe, Senior Writer").
const ROLES: &[&str] = &[
    "editor",
    "writer",
    "reporter",
    "analyst",
    "manager",
    "founder",
    "director",
    "educator",
    "engineer",
    "specialist",
    "contributor",
    "correspondent",
    "columnist",
    "senior",
    "coordinator",
    "ceo",
    "officer",
    "expert",
    "consultant",
    "marketing",
    "strategist",
    "head",
    "lead",
    "journalist",
    "producer",
    "associate",
    "assistant",
    "chief",
    "staff",
    "fellow",
    "professor",
    "researcher",
    "developer",
    "designer",
    "advocate",
    "intern",
];

fn is_role(word: &str) -> bool {
    let w = word
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    ROLES.contains(&w.as_str())
}

/// Cuts a name list where a job title, a date or a parenthesis begins.
fn cut_tail(s: &str) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    let mut out: Vec<&str> = Vec::new();
    for (k, w) in words.iter().enumerate() {
        let next_digit = words
            .get(k + 1)
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
        if w.starts_with('(')
            || (is_role(w) && !out.is_empty())
            || (next_digit && super::dates::month(w).is_some())
        {
            break;
        }
        out.push(w);
    }
    // A comma part that is a job title goes with what follows it.
    let joined = out.join(" ");
    let mut parts: Vec<&str> = Vec::new();
    for p in joined.split(',') {
        if p.split_whitespace().any(is_role) {
            break;
        }
        parts.push(p);
    }
    parts.join(",")
}

/// A stated author (JSON-LD, `<meta>`, `itemprop`), cut to the names it gives: user names
/// in lower case count.
fn stated(raw: &str) -> Option<String> {
    clean(raw, false)
}

/// A byline read off the page: its names must look like names (a capital first, where the
/// script has capitals), or it is some other line.
fn read(raw: &str) -> Option<String> {
    clean(raw, true)
}

/// One byline cut to the names it gives, or nothing if what is left does not read as names.
fn clean(raw: &str, strict: bool) -> Option<String> {
    let mut s: String = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    // What follows the names: a date, a separator, a reading time.
    for stop in [
        " | ",
        "|",
        " • ",
        "•",
        " · ",
        "·",
        " — ",
        " – ",
        " - ",
        " on ",
        " updated",
        " published",
        " posted",
        "\u{a0}",
        " am ",
        " le ",
        " el ",
    ] {
        // ASCII lower case keeps byte offsets (Unicode lower case may not).
        if let Some(at) = s.to_ascii_lowercase().find(stop)
            && at > 0
        {
            s.truncate(at);
        }
    }
    let mut s = cut_tail(&s);
    if let Some(at) = s.find(|c: char| c.is_ascii_digit()) {
        s.truncate(at);
    }
    let mut t = s
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '.');
    while let Some(p) = PREFIXES.iter().find(|p| {
        t.get(..p.len()).is_some_and(|h| h.to_lowercase() == **p)
            && t[p.len()..]
                .chars()
                .next()
                .is_some_and(|c| !c.is_alphanumeric())
    }) {
        t = t[p.len()..].trim_start_matches(|c: char| !c.is_alphanumeric());
    }
    let t = t
        .trim_end_matches(|c: char| !c.is_alphanumeric() && c != '.')
        .trim_end_matches(" and")
        .trim();
    let lower = t.to_lowercase();
    let words = t.split_whitespace().count();
    let names = t.split([',', '&']).count();
    let ok = !t.is_empty()
        && t.chars().count() <= 100
        && words <= 5 * names.max(1)
        && words <= 15
        && !t.contains(['@', '/', '{', '<', '?', '!', ':', '"', '='])
        && !lower.contains("www.")
        && !NOT_NAMES.contains(&lower.as_str())
        // A name starts with a capital in scripts that have them.
        && (!strict || t.chars().next().is_some_and(|c| !c.is_lowercase()));
    ok.then(|| t.to_string())
}

fn from_metas(metas: &[(String, &str)]) -> Option<String> {
    AUTHOR_KEYS.iter().find_map(|k| {
        let mut names: Vec<String> = Vec::new();
        for name in metas
            .iter()
            .filter(|(mk, v)| mk == k && !v.trim_start().starts_with("http"))
            .filter_map(|(_, v)| stated(v))
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        (!names.is_empty()).then(|| names.join(", "))
    })
}

/// A link to an author's page (`/author/jdoe/`, `/profile/jane-doe`).
fn author_page(href: &str) -> bool {
    let path = href
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    [
        "/author/",
        "/authors/",
        "/profile/",
        "/profiles/",
        "/staff/",
        "/writers/",
        "/people/",
    ]
    .iter()
    .any(|p| path.contains(p))
}

fn outside_comments(dom: &Dom, i: u32) -> bool {
    !dom.within(i, 12, |n| {
        n.tag == Tag::Footer || hinted(&n.hint, &["comment", "reply", "related", "sidebar"])
    })
}

/// The name inside an `itemprop="author"` element: its `itemprop="name"` if it has one.
fn item_name(dom: &Dom, i: u32) -> Option<String> {
    (i..dom.subtree_end(i))
        .find(|&j| dom.attr(j, "itemprop").is_some_and(|p| p == "name"))
        .and_then(|j| {
            dom.attr(j, "content")
                .and_then(stated)
                .or_else(|| stated(&dom.words(j, 200)))
        })
        .or_else(|| dom.attr(i, "content").and_then(stated))
        .or_else(|| read(&dom.words(i, 200)))
}

/// The page's byline: marked-up authors first, then elements classed as bylines.
fn byline(dom: &Dom) -> Option<String> {
    let mut marked = Vec::new();
    let mut classed = None;
    let mut i = 0;
    while i < dom.nodes.len() as u32 {
        let n = dom.node(i);
        if matches!(
            n.tag,
            Tag::Text | Tag::Meta | Tag::Script | Tag::Style | Tag::Head
        ) {
            i += 1;
            continue;
        }
        let prop = dom.attr(i, "itemprop").unwrap_or("");
        if prop
            .split_whitespace()
            .any(|p| p == "author" || p == "creator")
            && outside_comments(dom, i)
        {
            if let Some(a) = item_name(dom, i)
                && !marked.contains(&a)
            {
                marked.push(a);
            }
            i = dom.subtree_end(i);
            continue;
        }
        if classed.is_none() {
            let rel_author = n.tag == Tag::A
                && (dom
                    .attr(i, "rel")
                    .is_some_and(|r| r.split_whitespace().any(|r| r == "author"))
                    || dom.attr(i, "href").is_some_and(author_page));
            if (rel_author || (hinted(&n.hint, BYLINE_HINTS) && !hinted(&n.hint, NOT_BYLINE_HINTS)))
                && outside_comments(dom, i)
            {
                let text = dom.words(i, 300);
                if text.len() < 300 {
                    classed = read(&text).or_else(|| {
                        // A byline box with a photo, a name and a role: its link is the name.
                        (i + 1..dom.subtree_end(i))
                            .find(|&j| dom.node(j).tag == Tag::A)
                            .and_then(|j| read(&dom.words(j, 120)))
                    });
                }
            }
        }
        i += 1;
    }
    if marked.is_empty() {
        classed
    } else {
        Some(marked.join(", "))
    }
}

pub fn author(dom: &Dom, metas: &[(String, &str)], ld: &JsonLd) -> Option<String> {
    ld.author
        .as_deref()
        .filter(|a| !a.trim_start().starts_with("http"))
        .and_then(stated)
        .or_else(|| from_metas(metas))
        .or_else(|| byline(dom))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bylines_cut_to_names() {
        let r = |s: &str| read(s);
        assert_eq!(r("By Jane Doe | 5 min read").as_deref(), Some("Jane Doe"));
        assert_eq!(
            r("Written by: Jane Doe, Senior Writer").as_deref(),
            Some("Jane Doe")
        );
        assert_eq!(r("Jane Doe July 2, 2025").as_deref(), Some("Jane Doe"));
        assert_eq!(
            r("Keith Barry Senior Autos Reporter").as_deref(),
            Some("Keith Barry")
        );
        assert_eq!(
            r("Lance Ryan (Content Manager)").as_deref(),
            Some("Lance Ryan")
        );
        assert_eq!(
            r("Автор: Ірина Петренко").as_deref(),
            Some("Ірина Петренко")
        );
        assert_eq!(r("Sign In"), None);
        assert_eq!(r("share this on twitter"), None);
        assert_eq!(stated("crumbshot").as_deref(), Some("crumbshot"));
    }

    #[test]
    fn hostile_text_never_panics() {
        // Characters whose lower case changes byte length, and every cut of them.
        let s = "\u{212a}By İstanbul — Ǆ \u{a0}ß\u{fb00} Author: 名前 •·| 2020年 by \u{10ffff}";
        for (i, _) in s.char_indices() {
            for (j, _) in s[i..].char_indices() {
                let _ = read(&s[i..i + j]);
                let _ = stated(&s[i..i + j]);
                let _ = super::super::dates::find(&s[i..i + j]);
            }
        }
    }
}
