//! Include and exclude CSS selectors applied before extraction (Firecrawl's `includeTags`
//! and `excludeTags`): excluded elements are removed, and when some are included, the
//! page's body becomes just the matching elements, in document order.

use dom_query::{Document, Matcher};

use crate::content::MAX_HTML_BYTES;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{selector:?} is not a CSS selector")]
pub struct BadSelector {
    pub selector: String,
}

/// Checks every selector; the error names the first that does not parse.
pub fn check_selectors(selectors: &[String]) -> Result<Vec<Matcher>, BadSelector> {
    selectors
        .iter()
        .map(|s| {
            Matcher::new(s).map_err(|_| BadSelector {
                selector: s.clone(),
            })
        })
        .collect()
}

/// `html` with the elements `exclude` matches removed and, when `include` is not empty,
/// a body of only the elements it matches (the head is kept, for the title and metadata).
pub fn filter_tags(
    html: &str,
    include: &[String],
    exclude: &[String],
) -> Result<String, BadSelector> {
    let include = check_selectors(include)?;
    let exclude = check_selectors(exclude)?;
    if include.is_empty() && exclude.is_empty() {
        return Ok(html.to_string());
    }
    let mut end = html.len().min(MAX_HTML_BYTES);
    while !html.is_char_boundary(end) {
        end -= 1;
    }
    let doc = Document::from(&html[..end]);
    for m in &exclude {
        doc.select_matcher(m).remove();
    }
    if include.is_empty() {
        return Ok(doc.html().to_string());
    }
    let head = doc.select("head").html().to_string();
    let mut out = format!("<html>{head}<body>");
    // One element matched by two selectors (or inside another match) is written once.
    let mut written: std::collections::HashSet<dom_query::NodeId> = Default::default();
    let body = doc.select("body");
    let all = body.select("*");
    for node in all.nodes() {
        if !include.iter().any(|m| m.match_element(node)) {
            continue;
        }
        if node.ancestors_it(None).any(|a| written.contains(&a.id)) {
            continue;
        }
        written.insert(node.id);
        out.push_str(&node.html());
    }
    out.push_str("</body></html>");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<html><head><title>T</title></head><body><nav>menu</nav>\
        <div class=post><p>one</p><div class=ad>buy</div></div><p id=two>two</p>\
        <footer>foot</footer></body></html>";

    #[test]
    fn excluded_elements_are_removed() {
        let h = filter_tags(PAGE, &[], &["nav".into(), ".ad".into()]).unwrap();
        assert!(!h.contains("menu") && !h.contains("buy"), "{h}");
        assert!(h.contains("one") && h.contains("foot"), "{h}");
    }

    #[test]
    fn included_elements_make_the_body_once_each() {
        let h = filter_tags(
            PAGE,
            &[".post".into(), "p".into(), "#two".into()],
            &[".ad".into()],
        )
        .unwrap();
        assert!(h.contains("<title>T</title>"), "{h}");
        assert_eq!(h.matches("one").count(), 1, "{h}");
        assert_eq!(h.matches(">two<").count(), 1, "{h}");
        for gone in ["menu", "buy", "foot"] {
            assert!(!h.contains(gone), "{gone} in {h}");
        }
    }

    #[test]
    fn a_bad_selector_is_an_error() {
        let e = filter_tags(PAGE, &["div[".into()], &[]).unwrap_err();
        assert_eq!(e.selector, "div[");
        assert!(filter_tags(PAGE, &[], &["::-x-nonsense((".into()]).is_err());
    }
}
