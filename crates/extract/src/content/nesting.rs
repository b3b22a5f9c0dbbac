//! A guard in front of the parser. The HTML tree builder checks "is there a `<p>` in scope"
//! by walking the stack of open elements on every start tag, so a page of 100,000 nested
//! `<div>`s costs it quadratic time (27 s for 600 KB). Browsers cap the tree depth; here a
//! linear scan estimates the nesting and the page is cut where it passes [`MAX_NESTING`].
//! Real pages stay far below: the deepest in the extraction benchmarks is under 100.

pub const MAX_NESTING: usize = 1024;

fn is(name: &[u8], set: &[&[u8]]) -> bool {
    set.iter().any(|f| f.eq_ignore_ascii_case(name))
}

/// Elements with no content.
const VOID: &[&[u8]] = &[
    b"area",
    b"base",
    b"br",
    b"col",
    b"embed",
    b"hr",
    b"img",
    b"input",
    b"link",
    b"meta",
    b"source",
    b"track",
    b"wbr",
    b"param",
    b"keygen",
    b"!doctype",
    b"html",
    b"head",
    b"body",
];
/// A start tag of one of these closes an open one of the same kind (`<li>` after `<li>`).
const SELF_CLOSING_KIND: &[&[u8]] = &[
    b"p",
    b"li",
    b"dt",
    b"dd",
    b"tr",
    b"td",
    b"th",
    b"option",
    b"optgroup",
    b"a",
    b"button",
    b"form",
    b"nobr",
    b"h1",
    b"h2",
    b"h3",
    b"h4",
    b"h5",
    b"h6",
    b"thead",
    b"tbody",
    b"tfoot",
    b"caption",
    b"colgroup",
    b"rb",
    b"rt",
    b"rp",
];
/// A start tag of one of these closes an open `<p>`.
const CLOSES_P: &[&[u8]] = &[
    b"div",
    b"ul",
    b"ol",
    b"dl",
    b"table",
    b"section",
    b"article",
    b"aside",
    b"nav",
    b"header",
    b"footer",
    b"main",
    b"pre",
    b"blockquote",
    b"form",
    b"figure",
    b"details",
    b"h1",
    b"h2",
    b"h3",
    b"h4",
    b"h5",
    b"h6",
    b"address",
    b"fieldset",
    b"menu",
    b"hr",
];
/// How far down the stack a tag looks for its match: a bound that keeps the scan linear.
const LOOKBACK: usize = 32;

fn same_kind(a: &[u8], b: &[u8]) -> bool {
    let heading = |n: &[u8]| {
        n.len() == 2 && n[0].eq_ignore_ascii_case(&b'h') && (b'1'..=b'6').contains(&n[1])
    };
    a.eq_ignore_ascii_case(b)
        || (heading(a) && heading(b))
        || (is(a, &[b"td", b"th"]) && is(b, &[b"td", b"th"]))
        || (is(a, &[b"dt", b"dd"]) && is(b, &[b"dt", b"dd"]))
}

/// Elements a search for an open element to close does not look past (the parser's scopes).
const SCOPE: &[&[u8]] = &[
    b"table",
    b"td",
    b"th",
    b"caption",
    b"marquee",
    b"object",
    b"applet",
    b"template",
    b"html",
];

/// Whether `e` ends the search for an open `tag` to close: `<li>` does not close an `<li>`
/// outside the list it is in.
fn boundary(tag: &[u8], e: &[u8]) -> bool {
    is(e, SCOPE)
        || (tag.eq_ignore_ascii_case(b"li") && is(e, &[b"ul", b"ol"]))
        || (is(tag, &[b"dt", b"dd"]) && e.eq_ignore_ascii_case(b"dl"))
        || (tag.eq_ignore_ascii_case(b"p") && e.eq_ignore_ascii_case(b"button"))
        || (tag.eq_ignore_ascii_case(b"option") && e.eq_ignore_ascii_case(b"select"))
}

/// Pops the stack back to below the nearest open element of the same kind as `tag`, if one
/// is near and (for a start tag, `scoped`) in scope. End tags close through scopes.
fn close_to(stack: &mut Vec<&[u8]>, tag: &[u8], scoped: bool, matches: impl Fn(&[u8]) -> bool) {
    let n = stack.len();
    for (k, e) in stack.iter().rev().take(LOOKBACK).enumerate() {
        if matches(e) {
            stack.truncate(n - 1 - k);
            return;
        }
        if scoped && boundary(tag, e) {
            return;
        }
    }
}

/// Elements whose content is raw text: a `<div` inside a script is not a tag. Not
/// `<noscript>`: the parser runs with scripting off, so its content is markup and nests.
fn raw_text(name: &[u8]) -> bool {
    [
        &b"script"[..],
        b"style",
        b"textarea",
        b"title",
        b"xmp",
        b"iframe",
        b"noembed",
        b"noframes",
        b"plaintext",
    ]
    .iter()
    .any(|f| f.eq_ignore_ascii_case(name))
}

/// Where `needle` (ASCII, matched without regard to case) next starts at or after `from`.
fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut at = from;
    while at < hay.len() {
        let p = at + memchr::memchr(first, &hay[at..])?;
        if hay.len() - p >= needle.len() && hay[p..p + needle.len()].eq_ignore_ascii_case(needle) {
            return Some(p);
        }
        at = p + 1;
    }
    None
}

/// The longest prefix of `html` whose estimated nesting stays within [`MAX_NESTING`]. The
/// estimate is a small model of the tree builder: end tags close their nearest match,
/// `<li>` closes an open `<li>`, blocks close an open `<p>`.
pub fn cut_too_deep(html: &str) -> &str {
    let b = html.as_bytes();
    let mut stack: Vec<&[u8]> = Vec::new();
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'<', &b[i..]) {
        let lt = i + off;
        i = lt + 1;
        if b[i..].starts_with(b"!--") {
            i = find(b, i + 3, b"-->").map_or(b.len(), |e| e + 3);
            continue;
        }
        let close = b.get(i) == Some(&b'/');
        let start = if close { i + 1 } else { i };
        let len = b[start..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'!' || **c == b'-')
            .count();
        if len == 0 {
            continue;
        }
        let name = &b[start..start + len];
        let gt = memchr::memchr(b'>', &b[start..]).map_or(b.len(), |p| start + p);
        let self_closing = gt > 0 && b.get(gt - 1) == Some(&b'/');
        i = (gt + 1).min(b.len());
        if close {
            close_to(&mut stack, name, false, |e| e.eq_ignore_ascii_case(name));
            continue;
        }
        if raw_text(name) {
            let mut end_tag = b"</".to_vec();
            end_tag.extend_from_slice(name);
            i = find(b, i, &end_tag).unwrap_or(b.len());
            continue;
        }
        if is(name, VOID) || self_closing {
            continue;
        }
        if is(name, SELF_CLOSING_KIND) {
            close_to(&mut stack, name, true, |e| same_kind(e, name));
        }
        if is(name, CLOSES_P) {
            close_to(&mut stack, b"p", true, |e| e.eq_ignore_ascii_case(b"p"));
        }
        stack.push(name);
        if stack.len() > MAX_NESTING {
            // Cut before this tag, on a character boundary (`<` is ASCII).
            return &html[..lt];
        }
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_only_pathological_nesting() {
        let normal =
            "<html><body><div><p>a<p>b<ul><li>x<li>y</ul><br><img src=x></div></body></html>";
        assert_eq!(cut_too_deep(normal), normal);
        // Sloppy but flat: unclosed paragraphs, spans closed by their paragraph, links.
        for flat in [
            "<p>x".repeat(50_000),
            "<p><span>x</p>".repeat(50_000),
            "<li><a>x".repeat(50_000),
            "<div><p>x</div>".repeat(50_000),
            "<ul><li>x<li>y</ul>".repeat(50_000),
            "<table><tr><td>x<td>y</table>".repeat(50_000),
        ] {
            assert_eq!(cut_too_deep(&flat).len(), flat.len());
        }
        let script = format!("<script>{}</script><div>ok</div>", "<div>".repeat(5000));
        assert_eq!(cut_too_deep(&script), script);
        let comment = format!("<!--{}--><div>ok</div>", "<div>".repeat(5000));
        assert_eq!(cut_too_deep(&comment), comment);
        for deep in ["<ul><li>", "<table><tr><td>", "<span>"] {
            let deep = format!("<body>{}<p>deep</p>", deep.repeat(5000));
            assert!(cut_too_deep(&deep).len() < deep.len(), "{}", &deep[..20]);
        }
        let deep = format!("<body>{}<p>deep</p>", "<div>".repeat(5000));
        let cut = cut_too_deep(&deep);
        assert_eq!(cut.matches("<div>").count(), MAX_NESTING);
        assert!(cut.len() < deep.len());
    }
}
