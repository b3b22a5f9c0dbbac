//! The image recognizer: images, figures, embeds and SVG drawings become `ccimage` blocks,
//! which the text output drops. What matters for the lines is where they cut paragraphs and
//! what text they take with them (a figure's caption goes with its figure).

use super::tree::El;

pub const CC_IMAGE: &str = "ccimage";
const IMG_LABEL: &[&str] = &[
    ".jpg",
    ".jpeg",
    ".png",
    ".gft",
    ".webp",
    ".bmp",
    ".svg",
    "data:image",
    ".gif",
];
const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];

#[derive(Default, Clone, Copy)]
struct Anc {
    noscript: bool,
    iframe: bool,
    object: bool,
    figure: bool,
    picture: bool,
    table: bool,
    heading: bool,
}

fn labelled(s: &str) -> bool {
    let s = s.to_lowercase();
    IMG_LABEL.iter().any(|l| s.contains(l))
}

/// Whether the element is one the recognizer's XPath union selects.
fn selected(e: &El, a: Anc) -> bool {
    let contains = |n: &str| e.attr(n).is_some_and(|v| v.contains("image-embed"));
    if contains("class") || contains("id") {
        return true;
    }
    if !e.is("img") && e.attr("src").is_some_and(|s| s.starts_with("data:image/")) {
        return true;
    }
    match e.tag.as_str() {
        "iframe" => !a.noscript && !a.iframe && !a.object,
        "embed" | "object" => !a.object,
        "figure" => !a.figure,
        "picture" => !a.figure && !a.object,
        "svg" => !a.figure,
        "canvas" | "video" | "audio" | "article" => true,
        "img" => !a.noscript && !a.picture && !a.figure && !a.object && !a.table,
        _ => false,
    }
}

fn first_img(e: &El) -> Option<&El> {
    e.iter()
        .into_iter()
        .skip(1)
        .find(|d| d.is("img") || d.is("image"))
}

/// `__parse_img_text`: the image address an element carries, if any.
fn src_of(e: &El) -> String {
    let attrs: Vec<(&str, &str)> = e
        .attrs
        .iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let get = |n: &str| attrs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
    let style = get("style").unwrap_or("").replace("\\\"", "\"");
    if style.contains("background-image") {
        let part = style.split_once("background-image:").map_or("", |(_, r)| r);
        let url = part.split_once("url(").map_or("", |(_, r)| r);
        let url = url
            .split(')')
            .next()
            .unwrap_or("")
            .trim_matches([' ', '\'', '"']);
        if labelled(url) {
            return url.to_string();
        }
    }
    let mut src = get("src").unwrap_or("").to_string();
    if !src.is_empty() {
        let low = src.to_lowercase();
        if !(labelled(&low) || low.starts_with("http") || low.starts_with("data:")) {
            src = attrs
                .iter()
                .map(|(_, v)| *v)
                .find(|v| {
                    let l = v.to_lowercase();
                    labelled(&l) || l.starts_with("data:") || l.starts_with("http")
                })
                .unwrap_or("")
                .to_string();
        }
    }
    src
}

/// Whether the recognizer finds an image in a selected element.
fn valid(e: &El) -> bool {
    match e.tag.as_str() {
        "embed" | "object" | "iframe" | "video" | "audio" | "canvas" => {
            if !labelled(&super::serialize(e)) {
                return false;
            }
            let imgs = e
                .iter()
                .into_iter()
                .skip(1)
                .filter(|d| d.is("img") || d.is("image"))
                .count();
            match imgs {
                0 => !src_of(e).is_empty(),
                1 => first_img(e).is_some_and(|i| !src_of(i).is_empty()),
                _ => false,
            }
        }
        "picture" | "figure" => first_img(e).is_some_and(|i| !src_of(i).is_empty()),
        "svg" => {
            // cairosvg renders a drawing with a path or a circle when the <svg> has a width
            // and a height (the lower-cased `viewbox` lxml leaves is not read).
            if drawing(e) {
                true
            } else {
                first_img(e).is_some_and(|i| !src_of(i).is_empty())
            }
        }
        "article" => e
            .iter()
            .into_iter()
            .skip(1)
            .find(|d| d.is("header"))
            .is_some_and(|h| !src_of(h).is_empty()),
        _ => !src_of(e).is_empty(),
    }
}

fn drawing(e: &El) -> bool {
    let sized = |n: &str| {
        e.attr(n).is_some_and(|v| {
            let v = v.trim().trim_end_matches("px");
            v.parse::<f64>().is_ok_and(|x| x > 0.0)
        })
    };
    (e.has_descendant("path") || e.has_descendant("circle")) && sized("width") && sized("height")
}

fn tail_source(e: &El) -> &El {
    match e.tag.as_str() {
        "picture" | "figure" => first_img(e).unwrap_or(e),
        "embed" | "object" | "iframe" | "video" | "audio" | "canvas" => first_img(e).unwrap_or(e),
        "svg" if !drawing(e) => first_img(e).unwrap_or(e),
        "article" => e
            .iter()
            .into_iter()
            .skip(1)
            .find(|d| d.is("header"))
            .unwrap_or(e),
        _ => e,
    }
}

/// Replaces each image with an empty `ccimage` (its tail kept, stripped), or removes it
/// under a heading. Returns whether any image was found.
pub fn recognize(root: &mut El) -> bool {
    fn walk(e: &mut El, a: Anc, found: &mut bool) {
        let mut i = 0;
        while i < e.children.len() {
            let c = &e.children[i];
            if selected(c, a) && valid(c) {
                *found = true;
                if a.heading {
                    e.remove_keep_tail(i);
                    continue;
                }
                // lxml's `replace` drops the replaced element's own tail; the image keeps the
                // tail of the element its address was read from.
                let tail = tail_source(c)
                    .tail
                    .as_deref()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string);
                let mut img = El::new(CC_IMAGE);
                img.tail = tail;
                e.children[i] = img;
                i += 1;
                continue;
            }
            let tag = c.tag.as_str();
            let next = Anc {
                noscript: a.noscript || tag == "noscript",
                iframe: a.iframe || tag == "iframe",
                object: a.object || tag == "object",
                figure: a.figure || tag == "figure",
                picture: a.picture || tag == "picture",
                table: a.table || tag == "table",
                heading: a.heading || HEADINGS.contains(&tag),
            };
            walk(&mut e.children[i], next, found);
            i += 1;
        }
    }
    let mut found = false;
    walk(root, Anc::default(), &mut found);
    found
}
