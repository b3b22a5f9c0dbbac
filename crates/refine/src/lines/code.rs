//! The code recognizer (`cccode.py` and `code/*.py`): `<pre>`/`<code>` blocks, inline code,
//! and, on pages with neither, elements whose class names mention "code".

use super::tree::El;

pub const CC_CODE: &str = "cccode";
pub const CC_CODE_INLINE: &str = "cccode-inline";

const BLOCK_ELES: &[&str] = &[
    "br",
    "tr",
    "address",
    "article",
    "aside",
    "blockquote",
    "canvas",
    "dd",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "noscript",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "tfoot",
    "ul",
    "video",
];
const NO_CODE_TAGS: &[&str] = &[
    "audio",
    "td",
    "span",
    "ul",
    "li",
    "body",
    "p",
    "h1",
    "h2",
    "figcaption",
    "figure",
    "section",
    "a",
    "picture",
    "iframe",
    "aside",
];

type Path = Vec<usize>;

fn at<'a>(root: &'a El, path: &[usize]) -> Option<&'a El> {
    let mut e = root;
    for &i in path {
        e = e.children.get(i)?;
    }
    Some(e)
}

fn at_mut<'a>(root: &'a mut El, path: &[usize]) -> Option<&'a mut El> {
    let mut e = root;
    for &i in path {
        e = e.children.get_mut(i)?;
    }
    Some(e)
}

/// Paths of the elements matching `pred` in document order; `descend` says whether to look
/// inside a match.
fn find(root: &El, pred: &dyn Fn(&El) -> bool, descend: bool) -> Vec<Path> {
    fn walk(
        e: &El,
        path: &mut Path,
        pred: &dyn Fn(&El) -> bool,
        descend: bool,
        out: &mut Vec<Path>,
    ) {
        for (i, c) in e.children.iter().enumerate() {
            path.push(i);
            let hit = pred(c);
            if hit {
                out.push(path.clone());
            }
            if !hit || descend {
                walk(c, path, pred, descend, out);
            }
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(root, &mut Vec::new(), pred, descend, &mut out);
    out
}

fn has_cc_code(e: &El) -> bool {
    e.is(CC_CODE) || e.has_descendant(CC_CODE)
}

pub fn recognize(root: &mut El) {
    let mut took = false;
    // <pre> with <code> inside: the <code> elements become blocks (and a <pre> inside <code>).
    let pre_code = find(root, &|e| e.is("pre") && e.has_descendant("code"), true);
    let code_pre = find(root, &|e| e.is("code") && e.has_descendant("pre"), true);
    if !pre_code.is_empty() || !code_pre.is_empty() {
        took = true;
        let mut targets = Vec::new();
        for p in &pre_code {
            if let Some(pre) = at(root, p) {
                for sub in find(pre, &|e| e.is("code"), true) {
                    targets.push([p.clone(), sub].concat());
                }
            }
        }
        replace_all(root, targets, true, false);
        let code_pre = find(root, &|e| e.is("code") && e.has_descendant("pre"), true);
        let mut targets = Vec::new();
        for p in &code_pre {
            if let Some(code) = at(root, p) {
                for sub in find(code, &|e| e.is("pre"), true) {
                    targets.push([p.clone(), sub].concat());
                }
            }
        }
        replace_all(root, targets, true, false);
    }
    if !find(root, &|e| e.is("code") && !has_cc_code(e), true).is_empty() {
        took = true;
        tag_code(root);
    }
    let pres = find(root, &|e| e.is("pre") && !has_cc_code(e), true);
    if !pres.is_empty() {
        took = true;
        replace_all(root, pres, true, false);
    }
    if !took {
        classes(root);
    }
    remove_empty(root);
}

fn tag_code(root: &mut El) {
    // Outermost <code> elements (not looking inside a <code>), skipping those holding a block.
    let nodes = find(root, &|e| e.is("code"), false);
    let nodes: Vec<Path> = nodes
        .into_iter()
        .filter(|p| at(root, p).is_some_and(|e| !e.has_descendant(CC_CODE)))
        .collect();
    let mut blocks = Vec::new();
    let mut inline = Vec::new();
    // Many inline codes share one block parent: its check is made once.
    let mut checked: std::collections::HashMap<Path, bool> = std::collections::HashMap::new();
    for p in nodes {
        let Some(e) = at(root, &p) else { continue };
        let text = e.text_content();
        if text.contains('\n') || text.contains('\r') {
            blocks.push(p);
            continue;
        }
        // The nearest block ancestor (or the top): visible text there besides the code
        // makes it inline.
        let mut q = p.clone();
        while !q.is_empty() && at(root, &q).is_some_and(|e| !BLOCK_ELES.contains(&e.tag.as_str())) {
            q.pop();
        }
        let all_code = *checked
            .entry(q.clone())
            .or_insert_with(|| at(root, &q).is_none_or(all_chars_in_code));
        if all_code {
            blocks.push(p);
        } else {
            inline.push(p);
        }
    }
    replace_all(root, inline, false, true);
    let roots = if blocks.len() > 1 {
        group(root, blocks)
    } else {
        blocks
    };
    replace_all(root, roots, false, false);
}

fn count_code(e: &El) -> usize {
    e.children
        .iter()
        .map(|c| usize::from(c.is("code")) + count_code(c))
        .sum()
}

/// Climbs from each code element to the largest ancestor holding nothing but code.
fn group(root: &El, nodes: Vec<Path>) -> Vec<Path> {
    let mut out: Vec<Path> = Vec::new();
    for p in nodes {
        if out.iter().any(|r| p.starts_with(r)) {
            continue;
        }
        let Some(e) = at(root, &p) else { continue };
        let mut node = p.clone();
        let mut tags = count_code(e);
        let next = |from: &Path, tags: usize| -> Option<(Path, usize)> {
            let mut q = from.clone();
            while !q.is_empty() {
                q.pop();
                let n = count_code(at(root, &q)?);
                if n != tags {
                    return Some((q, n));
                }
            }
            None
        };
        let mut parent = next(&node, tags);
        while let Some((pp, n)) = parent {
            let Some(pe) = at(root, &pp) else { break };
            if !all_chars_in_code(pe)
                || pe.has_descendant(CC_CODE)
                || pe.has_descendant(CC_CODE_INLINE)
            {
                break;
            }
            node = pp;
            tags = n;
            parent = next(&node, tags);
        }
        out.retain(|r| !r.starts_with(&node));
        out.push(node);
    }
    out
}

fn visible_chars(s: &str, out: &mut Vec<char>) {
    out.extend(s.chars().filter(|c| !c.is_whitespace() && !c.is_numeric()));
}

/// Every visible character under `e` (digits aside) sits inside a `<code>`.
fn all_chars_in_code(e: &El) -> bool {
    if e.is("code") {
        return true;
    }
    let mut full = Vec::new();
    visible_chars(&e.text_content(), &mut full);
    let mut code = Vec::new();
    fn collect(e: &El, inside: bool, out: &mut Vec<char>) {
        if inside && let Some(t) = &e.text {
            visible_chars(t, out);
        }
        for c in &e.children {
            collect(c, inside || c.is("code"), out);
            if inside && let Some(t) = &c.tail {
                visible_chars(t, out);
            }
        }
    }
    collect(e, false, &mut code);
    full == code
}

fn classes(root: &mut El) {
    let hits = find(
        root,
        &|e| {
            let codey = e
                .attr("class")
                .is_some_and(|c| c.split_whitespace().any(|n| n.contains("code")));
            codey
                && !NO_CODE_TAGS.contains(&e.tag.as_str())
                && !(e.is("div")
                    && (e.children.is_empty()
                        || e.children
                            .iter()
                            .any(|c| NO_CODE_TAGS.contains(&c.tag.as_str()))))
        },
        true,
    );
    // An element already inside a replaced one is gone with it.
    let mut outer: Vec<Path> = Vec::new();
    for p in hits {
        if !outer.iter().any(|o| p.starts_with(o)) {
            outer.push(p);
        }
    }
    replace_all(root, outer, false, false);
}

fn remove_empty(e: &mut El) {
    e.remove_children(
        &|c| (c.is(CC_CODE) || c.is(CC_CODE_INLINE)) && c.text.as_deref().is_none_or(str::is_empty),
        false,
    );
    for c in &mut e.children {
        remove_empty(c);
    }
}

/// Replaces the elements at `paths`, last first so that a gutter removed beside one block
/// does not move the paths of those before it.
fn replace_all(root: &mut El, mut paths: Vec<Path>, in_pre: bool, inline: bool) {
    paths.sort();
    paths.dedup();
    while let Some(p) = paths.pop() {
        if at(root, &p).is_none() {
            continue;
        }
        if let Some(gone) = replace(root, &p, in_pre, inline) {
            // Targets inside the removed gutter went with it; the paths left are earlier in
            // document order, so no other index moved.
            paths.retain(|q| !q.starts_with(&gone));
        }
    }
}

fn lang_of(e: &El) -> Option<String> {
    e.attr("class")?.split(' ').find_map(|c| {
        (c.starts_with("language-") || c.starts_with("lang-"))
            .then(|| c.replace("language-", "").replace("lang-", ""))
    })
}

/// Returns the path of a line-number gutter removed beside the block, if one was.
fn replace(root: &mut El, path: &[usize], in_pre: bool, inline: bool) -> Option<Path> {
    let node = at(root, path)?;
    let mut language = node.iter().into_iter().find_map(lang_of);
    if language.is_none() {
        for k in (0..path.len()).rev() {
            if let Some(a) = at(root, &path[..k]).and_then(lang_of) {
                language = Some(a);
                break;
            }
        }
    }
    let mut path = path.to_vec();
    let mut gone = None;
    if !inline && let Some(shift) = remove_gutter(root, &path) {
        // The removed sibling stood before an ancestor at depth `shift`.
        let mut g = path[..=shift].to_vec();
        g[shift] -= 1;
        gone = Some(g);
        path[shift] -= 1;
    }
    let node = at_mut(root, &path)?;
    let full = if in_pre {
        mark_blocks(node);
        node.text_content()
    } else {
        squash(node);
        full_text(node).1
    };
    let text = tidy(&full);
    let tail = node.tail.take();
    *node = El::new(if inline { CC_CODE_INLINE } else { CC_CODE });
    node.tail = tail;
    if let Some(l) = language {
        node.set_attr("language", &l);
    }
    node.text = Some(text);
    gone
}

/// `_detect_and_remove_subling_lineno`: a line-number column just before the block (or
/// before one of its four nearest ancestors) is removed. Returns the depth whose index moved.
fn remove_gutter(root: &mut El, path: &[usize]) -> Option<usize> {
    let mut k = path.len();
    for _ in 0..4 {
        if k == 0 {
            return None;
        }
        let idx = path[k - 1];
        if idx > 0 {
            let parent = at(root, &path[..k - 1])?;
            let prev = parent.children.get(idx - 1)?;
            let mut parts = Vec::new();
            for e in prev.iter() {
                if let Some(t) = &e.text {
                    parts.push(t.clone());
                }
                if !std::ptr::eq(e, prev)
                    && let Some(t) = &e.tail
                {
                    parts.push(t.clone());
                }
            }
            if detect_lineno(&parts.join("\n"), false).0 {
                at_mut(root, &path[..k - 1])?.remove_with_tail(idx - 1);
                return Some(k - 1);
            }
        }
        k -= 1;
    }
    None
}

/// In a `<pre>`, a block element ends a line unless its last descendant already does.
fn mark_blocks(node: &mut El) {
    fn hit_last_leaf(e: &El) -> bool {
        match e.children.last() {
            None => false,
            Some(l) if BLOCK_ELES.contains(&l.tag.as_str()) => true,
            Some(l) => hit_last_leaf(l),
        }
    }
    fn walk(e: &mut El) {
        for c in &mut e.children {
            if BLOCK_ELES.contains(&c.tag.as_str()) && !hit_last_leaf(c) {
                let t = c.tail.take().unwrap_or_default();
                c.tail = Some(format!("\n{t}"));
            }
            walk(c);
        }
    }
    walk(node);
}

/// Outside `<pre>`, source line breaks mean nothing: they are dropped and spaces squashed.
fn squash(node: &mut El) {
    fn sq(s: &mut Option<String>) {
        if let Some(t) = s {
            let t2 = t.replace(['\n', '\r'], "");
            let mut out = String::with_capacity(t2.len());
            for c in t2.chars() {
                if c == ' ' && out.ends_with(' ') {
                    continue;
                }
                out.push(c);
            }
            *t = out;
        }
    }
    sq(&mut node.text);
    fn walk(e: &mut El) {
        for c in &mut e.children {
            sq(&mut c.text);
            sq(&mut c.tail);
            walk(c);
        }
    }
    walk(node);
}

/// `get_full_text`: block elements end lines, whitespace-only runs beside blocks dropped.
fn full_text(e: &El) -> (bool, String, String) {
    let block = |t: &str| BLOCK_ELES.contains(&t);
    let mut t = String::new();
    let mut last_tail = e.text.clone().unwrap_or_default();
    let mut is_block = false;
    for c in &e.children {
        let (b, text, tail) = full_text(c);
        is_block = b;
        if !is_space(&last_tail) || !is_block {
            t.push_str(&last_tail);
        }
        t.push_str(&text);
        last_tail = tail;
    }
    if !is_space(&last_tail) || !block(&e.tag) {
        t.push_str(&last_tail);
    }
    let tail = e.tail.clone().unwrap_or_default();
    if !is_block && block(&e.tag) {
        t.push('\n');
        return (true, t, tail);
    }
    (block(&e.tag) || is_block, t, tail)
}

/// Python's `str.isspace()`: false for the empty string.
fn is_space(s: &str) -> bool {
    !s.is_empty() && s.chars().all(char::is_whitespace)
}

/// Line ends normalised, blank lines at either end dropped, line numbers and the common
/// indentation removed.
fn tidy(full: &str) -> String {
    let full = full
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\u{a0}', " ");
    let chunks: Vec<&str> = full.split('\n').map(str::trim_end).collect();
    let start = chunks
        .iter()
        .position(|c| !c.is_empty())
        .unwrap_or(chunks.len());
    let end = chunks
        .iter()
        .rposition(|c| !c.is_empty())
        .map_or(start, |e| e + 1);
    let mut text = chunks[start..end].join("\n");
    let (has, indents) = detect_lineno(&text, true);
    if has {
        text = text
            .split('\n')
            .zip(indents)
            .map(|(l, pos)| l.chars().skip(pos).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n");
    }
    let lines: Vec<&str> = text.split('\n').collect();
    // Leading whitespace of each line and its length, once: the common indentation is the
    // longest run of one whitespace character that every line reaching it shares.
    let heads: Vec<(Vec<char>, usize)> = lines
        .iter()
        .map(|l| {
            (
                l.chars().take_while(|c| c.is_whitespace()).collect(),
                l.chars().count(),
            )
        })
        .collect();
    let mut common = 0;
    loop {
        let mut first: Option<char> = None;
        let mut more = false;
        for (ws, len) in &heads {
            if *len <= common {
                continue;
            }
            let Some(&c) = ws.get(common) else {
                more = false;
                break;
            };
            match first {
                None => {
                    more = true;
                    first = Some(c);
                }
                Some(f) if f != c => {
                    more = false;
                    break;
                }
                _ => {}
            }
        }
        if !more {
            break;
        }
        common += 1;
    }
    lines
        .iter()
        .map(|l| l.chars().skip(common).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `_detect_lineno`: most lines start with (or, for a gutter, are) a number, and some run of
/// three consecutive numbers exists. Returns the byte width of each line's number prefix.
fn detect_lineno(s: &str, code_after: bool) -> (bool, Vec<usize>) {
    let lines: Vec<&str> = s.split('\n').collect();
    let mut empty = 0usize;
    let mut parsed: Vec<(usize, usize, usize, Option<u64>)> = Vec::with_capacity(lines.len());
    for l in &lines {
        if l.is_empty() {
            empty += 1;
        }
        // Widths in characters, as Python slices.
        let chars: Vec<char> = l.chars().collect();
        let pre = chars.iter().take_while(|c| c.is_whitespace()).count();
        let digits = chars[pre..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let post = chars[pre + digits..]
            .iter()
            .take_while(|c| c.is_whitespace())
            .count();
        let ok = digits > 0 && (code_after || pre + digits + post == chars.len());
        if ok {
            let n: String = chars[pre..pre + digits].iter().collect();
            parsed.push((pre, digits, post, Some(n.parse().unwrap_or(u64::MAX))));
        } else {
            parsed.push((0, 0, 0, None));
        }
    }
    let nums: Vec<u64> = parsed
        .iter()
        .filter_map(|p| p.3)
        .filter(|&n| n != 0)
        .collect();
    if (nums.len() as f64) < (parsed.len() - empty) as f64 * 0.7 {
        return (false, Vec::new());
    }
    let mut last: Option<u64> = None;
    let (mut count, mut max) = (0, 0);
    for &n in &nums {
        if last.is_some_and(|l| l.checked_add(1) == Some(n)) {
            last = Some(n);
            count += 1;
        } else {
            last = Some(n);
            count = 1;
        }
        max = max.max(count);
    }
    let post_min = parsed.iter().map(|p| p.2).min().unwrap_or(0);
    let indents = parsed
        .iter()
        .map(|&(pre, len, _, n)| if n.is_some() { pre + len + post_min } else { 0 })
        .collect();
    (max > 2, indents)
}
