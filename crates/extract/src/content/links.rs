//! Links for the frontier, read from the same parse as the content: `<a>`/`<area>` hrefs
//! resolved against `<base>`, `rel=nofollow` honoured, meta refresh targets, the
//! canonical URL and advertised feeds; and the page's robots and TDM metas, which the
//! stage reads for its own crawler name (`trawl_core::policy`).

use url::Url;

use super::dom::Dom;
use super::tags::Tag;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Links {
    /// Absolute link targets in document order (not yet normalized or deduplicated).
    pub links: Vec<String>,
    pub canonical: Option<String>,
    pub feeds: Vec<String>,
    /// Absolute `<img src>` addresses in document order (`data:` URIs left out).
    pub images: Vec<String>,
    /// `(name, content)` of the metas that may carry robots directives or a TDM
    /// reservation (`<meta http-equiv="X-Robots-Tag">` as `robots`), at most
    /// [`MAX_POLICY_METAS`].
    pub policy_metas: Vec<(String, String)>,
}

/// Policy metas kept from one page: a page repeating them a thousand times says nothing more.
pub const MAX_POLICY_METAS: usize = 16;

fn rel_has(dom: &Dom, i: u32, word: &str) -> bool {
    dom.attr(i, "rel")
        .is_some_and(|r| r.split_whitespace().any(|w| w.eq_ignore_ascii_case(word)))
}

pub fn links(dom: &Dom, url: &Url) -> Links {
    let mut out = Links::default();
    let mut base: Option<Url> = None;
    let mut hrefs: Vec<&str> = Vec::new();
    let mut images: Vec<&str> = Vec::new();
    for i in 0..dom.nodes.len() as u32 {
        match dom.node(i).tag {
            Tag::Img => {
                if let Some(s) = dom.attr(i, "src")
                    && !s.trim_start().starts_with("data:")
                {
                    images.push(s);
                }
            }
            Tag::Base if base.is_none() => {
                base = dom.attr(i, "href").and_then(|h| url.join(h.trim()).ok());
            }
            Tag::A | Tag::Area => {
                if let Some(h) = dom.attr(i, "href")
                    && !rel_has(dom, i, "nofollow")
                {
                    hrefs.push(h);
                }
            }
            Tag::Link => {
                let Some(h) = dom.attr(i, "href") else {
                    continue;
                };
                let ty = dom.attr(i, "type").unwrap_or("").to_ascii_lowercase();
                if rel_has(dom, i, "canonical") {
                    if out.canonical.is_none() {
                        out.canonical = Some(h.to_string());
                    }
                } else if rel_has(dom, i, "alternate")
                    && (ty.contains("rss") || ty.contains("atom"))
                {
                    out.feeds.push(h.to_string());
                }
            }
            Tag::Meta => {
                let content = dom.attr(i, "content").unwrap_or("");
                let name = match dom.attr(i, "http-equiv") {
                    Some(e) if e.trim().eq_ignore_ascii_case("x-robots-tag") => "robots",
                    _ => dom.attr(i, "name").unwrap_or(""),
                };
                if out.policy_metas.len() < MAX_POLICY_METAS
                    && trawl_core::policy::is_policy_meta(name, content)
                {
                    out.policy_metas
                        .push((name.trim().to_ascii_lowercase(), content.trim().to_string()));
                }
                if dom
                    .attr(i, "http-equiv")
                    .is_some_and(|e| e.eq_ignore_ascii_case("refresh"))
                    && let Some(at) = content.to_ascii_lowercase().find("url=")
                {
                    let target = content[at + 4..]
                        .trim()
                        .trim_matches(|ch| ch == '\'' || ch == '"');
                    if !target.is_empty() {
                        hrefs.push(target);
                    }
                }
            }
            _ => {}
        }
    }
    let base = base.unwrap_or_else(|| url.clone());
    let resolve = |h: &str| base.join(h.trim()).ok().map(|u| u.to_string());
    out.links = hrefs.into_iter().filter_map(resolve).collect();
    out.images = images.into_iter().filter_map(resolve).collect();
    out.canonical = out.canonical.as_deref().and_then(resolve);
    out.feeds = std::mem::take(&mut out.feeds)
        .iter()
        .filter_map(|h| resolve(h))
        .collect();
    out
}
