//! Page metadata from `<head>` tags, Open Graph, schema.org microdata and JSON-LD.

use serde_json::Value;
use trawl_core::PageMeta;

use super::dom::Dom;
use super::tags::Tag;

/// The page's metadata, with the title, plus what the extractor reads from it but does not
/// report.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Metadata {
    pub title: Option<String>,
    /// The title as the head states it (not taken from the first `<h1>`).
    pub head_title: Option<String>,
    pub page: PageMeta,
    pub generator: Option<String>,
    pub og_type: Option<String>,
}

/// What JSON-LD blocks say, gathered once.
#[derive(Debug, Default)]
pub struct JsonLd {
    pub types: Vec<String>,
    pub headline: Option<String>,
    pub article_body: Option<String>,
    pub author: Option<String>,
    pub published: Option<String>,
    pub modified: Option<String>,
    pub publisher: Option<String>,
    pub description: Option<String>,
}

fn clean(s: &str) -> Option<String> {
    let t = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let t = html_escape::decode_html_entities(&t).into_owned();
    (!t.is_empty()).then_some(t)
}

fn name_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => clean(s),
        Value::Object(o) => o.get("name").and_then(name_of),
        Value::Array(a) => {
            let names: Vec<String> = a.iter().filter_map(name_of).collect();
            (!names.is_empty()).then(|| names.join(", "))
        }
        _ => None,
    }
}

/// People named as authors; an organisation given as the author is the publisher, not a
/// byline.
fn person_of(v: &Value) -> Option<String> {
    match v {
        Value::Object(o) => {
            let org = o.get("@type").and_then(|t| t.as_str()).is_some_and(|t| {
                t.ends_with("Organization") || t == "Corporation" || t == "WebSite"
            });
            if org {
                None
            } else {
                o.get("name").and_then(name_of)
            }
        }
        Value::Array(a) => {
            let names: Vec<String> = a.iter().filter_map(person_of).collect();
            (!names.is_empty()).then(|| names.join(", "))
        }
        other => name_of(other),
    }
}

fn visit(v: &Value, ld: &mut JsonLd, depth: usize) {
    if depth > 8 {
        return;
    }
    match v {
        Value::Array(a) => a.iter().for_each(|x| visit(x, ld, depth + 1)),
        Value::Object(o) => {
            match o.get("@type") {
                Some(Value::String(t)) => ld.types.push(t.clone()),
                Some(Value::Array(ts)) => ld
                    .types
                    .extend(ts.iter().filter_map(|t| t.as_str().map(String::from))),
                _ => {}
            }
            let s = |k: &str| o.get(k).and_then(|x| x.as_str()).and_then(clean);
            if ld.headline.is_none() {
                ld.headline = s("headline");
            }
            if ld.article_body.is_none() {
                ld.article_body = o
                    .get("articleBody")
                    .or_else(|| o.get("text").filter(|_| o.contains_key("headline")))
                    .and_then(|x| x.as_str())
                    .map(String::from);
            }
            if ld.author.is_none() {
                ld.author = o.get("author").and_then(person_of);
            }
            if ld.published.is_none() {
                ld.published = s("datePublished").or_else(|| s("dateCreated"));
            }
            if ld.modified.is_none() {
                ld.modified = s("dateModified");
            }
            if ld.publisher.is_none() {
                ld.publisher = o.get("publisher").and_then(name_of);
            }
            if ld.description.is_none() {
                ld.description = s("description");
            }
            if let Some(g) = o.get("@graph") {
                visit(g, ld, depth + 1);
            }
            if let Some(m) = o.get("mainEntity") {
                visit(m, ld, depth + 1);
            }
        }
        _ => {}
    }
}

pub fn json_ld(dom: &Dom) -> JsonLd {
    let mut ld = JsonLd::default();
    for i in 0..dom.nodes.len() as u32 {
        if dom.node(i).tag == Tag::Script
            && dom
                .attr(i, "type")
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/ld+json"))
        {
            let raw = dom.raw_text(i);
            // Pages often leave trailing commas or HTML comments in these blocks; a block that
            // does not parse is skipped, never fatal.
            if let Ok(v) = serde_json::from_str::<Value>(raw.trim()) {
                visit(&v, &mut ld, 0);
            }
        }
    }
    ld
}

pub fn metadata(dom: &Dom, ld: &JsonLd, url: Option<&url::Url>) -> Metadata {
    let mut m = Metadata::default();
    let mut metas: Vec<(String, &str)> = Vec::new();
    let mut title_tag = None;
    let mut h1 = None;
    for i in 0..dom.nodes.len() as u32 {
        match dom.node(i).tag {
            Tag::Meta => {
                let key = dom
                    .attr(i, "property")
                    .or_else(|| dom.attr(i, "name"))
                    .or_else(|| dom.attr(i, "itemprop"))
                    .map(|k| k.trim().to_ascii_lowercase());
                if let (Some(k), Some(v)) = (key, dom.attr(i, "content")) {
                    metas.push((k, v));
                }
            }
            Tag::Title if title_tag.is_none() => title_tag = clean(&dom.raw_text(i)),
            Tag::H1 if h1.is_none() => h1 = clean(&dom.raw_text(i)),
            Tag::Link => {
                let rel = dom.attr(i, "rel").unwrap_or("").to_ascii_lowercase();
                if m.page.canonical.is_none() && rel.split_whitespace().any(|r| r == "canonical") {
                    m.page.canonical = dom.attr(i, "href").and_then(clean);
                }
            }
            Tag::Html if m.page.language.is_none() => {
                m.page.language = dom.attr(i, "lang").and_then(clean)
            }
            _ => {}
        }
    }
    let meta = |keys: &[&str]| {
        keys.iter().find_map(|k| {
            metas
                .iter()
                .find(|(mk, _)| mk == k)
                .and_then(|(_, v)| clean(v))
        })
    };
    m.head_title = meta(&["og:title", "twitter:title"])
        .or_else(|| ld.headline.clone())
        .or(title_tag);
    let p = &mut m.page;
    p.description = meta(&["description", "og:description", "twitter:description"])
        .or_else(|| ld.description.clone());
    p.author = super::authors::author(dom, &metas, ld);
    let dates = super::published::dates(dom, &metas, ld, url);
    p.published = dates.published;
    p.modified = dates.modified;
    p.language = p
        .language
        .take()
        .or_else(|| meta(&["og:locale", "content-language", "language"]));
    p.site_name = meta(&["og:site_name", "application-name"]).or_else(|| ld.publisher.clone());
    m.title = page_title(
        m.head_title.as_deref(),
        h1,
        p.site_name.as_deref(),
        url.and_then(|u| u.host_str()),
    );
    p.jsonld_type = ld.types.first().cloned();
    m.generator = meta(&["generator"]);
    m.og_type = meta(&["og:type"]).map(|t| t.to_ascii_lowercase());
    m
}

/// What separates a page's title from its site's name in `<title>`.
const TITLE_SEPARATORS: &[&str] = &[" | ", " - ", " – ", " — ", " » ", " :: ", " · ", " • "];

fn letters(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The page's own title: the head's title without the site's name around it ("Title |
/// Site", "Site - Title"), or the `<h1>` where the head's title holds it whole.
fn page_title(
    head: Option<&str>,
    h1: Option<String>,
    site: Option<&str>,
    host: Option<&str>,
) -> Option<String> {
    let Some(head) = head else {
        return h1;
    };
    let Some(sep) = TITLE_SEPARATORS.iter().find(|s| head.contains(**s)) else {
        return Some(head.to_string());
    };
    let mut parts: Vec<&str> = head.split(sep).map(str::trim).collect();
    let site = site.map(letters).unwrap_or_default();
    let host = host.map(|h| h.to_lowercase()).unwrap_or_default();
    let is_site = |p: &str| {
        let l = letters(p);
        !l.is_empty()
            && ((!site.is_empty() && (l == site || l.contains(&site)))
                || (l.len() >= 4 && host.contains(&l))
                || l.strip_prefix("www").is_some_and(|r| host.contains(r)))
    };
    // The `<h1>` names the page where it is one of the parts, but not where it is the last
    // part, which is where a site's name goes (a book's title as the `<h1>` of its menu
    // bar), unless the first part is the site's.
    if let Some(h) = &h1 {
        let h = letters(h);
        let at = parts.iter().position(|p| letters(p) == h);
        if !h.is_empty()
            && at.is_some_and(|k| k + 1 < parts.len() || parts.first().is_some_and(|p| is_site(p)))
        {
            return h1;
        }
    }
    while parts.len() > 1 && parts.last().is_some_and(|p| is_site(p)) {
        parts.pop();
    }
    while parts.len() > 1 && parts.first().is_some_and(|p| is_site(p)) {
        parts.remove(0);
    }
    Some(parts.join(sep))
}

#[cfg(test)]
mod tests {
    use super::page_title;

    fn t(head: &str, h1: Option<&str>, site: Option<&str>, host: &str) -> Option<String> {
        page_title(Some(head), h1.map(String::from), site, Some(host))
    }

    #[test]
    fn the_site_name_goes_the_page_title_stays() {
        let host = "www.packhacker.com";
        assert_eq!(
            t("Best Speaker for 2026 | Pack Hacker", None, None, host).as_deref(),
            Some("Best Speaker for 2026")
        );
        assert_eq!(
            t(
                "Gorilla Mats - Large Mats",
                None,
                Some("Gorilla Mats"),
                "x.example"
            )
            .as_deref(),
            Some("Large Mats")
        );
        // The h1 where it is one of the parts.
        assert_eq!(
            t(
                "Wireless Mice | Shop Wireless Mice",
                Some("Wireless Mice"),
                None,
                "a.example"
            )
            .as_deref(),
            Some("Wireless Mice")
        );
        // Not a menu bar's h1 that names the book (the last part, where sites go).
        assert_eq!(
            t(
                "Installation - The Rust Programming Language",
                Some("The Rust Programming Language"),
                None,
                "127.0.0.1"
            )
            .as_deref(),
            Some("Installation - The Rust Programming Language")
        );
        assert_eq!(
            t("Plain", None, None, "a.example").as_deref(),
            Some("Plain")
        );
        assert_eq!(
            page_title(None, Some("H".into()), None, None).as_deref(),
            Some("H")
        );
    }
}
