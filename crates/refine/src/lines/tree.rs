//! The document as lxml holds it: elements with `text` (before the first child) and `tail`
//! (after the element, inside its parent). The converter this module reproduces is written
//! against that model, and its quirks (a removed element taking its tail along or not,
//! whitespace-only text dropped when a tree is split) only line up when ported onto it.

use dom_query::{Document, NodeData, NodeRef};

/// Deeper nesting than this is flattened into the element at the limit: hostile pages nest
/// tens of thousands of elements, and every pass below recurses.
pub const MAX_DEPTH: usize = 200;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct El {
    pub tag: String,
    pub attrs: Vec<(String, String)>,
    pub text: Option<String>,
    pub tail: Option<String>,
    pub children: Vec<El>,
}

impl El {
    pub fn new(tag: &str) -> El {
        El {
            tag: tag.to_string(),
            ..El::default()
        }
    }

    /// A copy of the tag and attributes only (lxml's `makeelement(tag, attrib)`).
    pub fn shell(&self) -> El {
        El {
            tag: self.tag.clone(),
            attrs: self.attrs.clone(),
            ..El::default()
        }
    }

    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn set_attr(&mut self, name: &str, value: &str) {
        match self.attrs.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = value.to_string(),
            None => self.attrs.push((name.to_string(), value.to_string())),
        }
    }

    pub fn is(&self, tag: &str) -> bool {
        self.tag == tag
    }

    /// lxml's `itertext()`: the text of the element and its descendants, tails of the
    /// descendants included, the element's own tail not.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        self.push_text(&mut out);
        out
    }

    fn push_text(&self, out: &mut String) {
        if let Some(t) = &self.text {
            out.push_str(t);
        }
        for c in &self.children {
            c.push_text(out);
            if let Some(t) = &c.tail {
                out.push_str(t);
            }
        }
    }

    /// The element and its descendants in document order (lxml's `iter()`).
    pub fn iter(&self) -> Vec<&El> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            out.push(e);
            for c in e.children.iter().rev() {
                stack.push(c);
            }
        }
        out
    }

    /// Whether any descendant (the element excluded) has this tag.
    pub fn has_descendant(&self, tag: &str) -> bool {
        self.children
            .iter()
            .any(|c| c.tag == tag || c.has_descendant(tag))
    }

    /// Whether the element or a descendant carries any of `tags`.
    pub fn contains_any(&self, tags: &[&str]) -> bool {
        tags.contains(&self.tag.as_str()) || self.children.iter().any(|c| c.contains_any(tags))
    }

    /// Removes child `i` keeping its tail in the text flow (the converter's
    /// `remove_element`).
    pub fn remove_keep_tail(&mut self, i: usize) {
        let gone = self.children.remove(i);
        if let Some(tail) = gone.tail {
            if i == 0 {
                self.text.get_or_insert_with(String::new).push_str(&tail);
            } else {
                self.children[i - 1]
                    .tail
                    .get_or_insert_with(String::new)
                    .push_str(&tail);
            }
        }
    }

    /// Removes child `i` and its tail (lxml's `parent.remove(el)`).
    pub fn remove_with_tail(&mut self, i: usize) {
        self.children.remove(i);
    }

    /// Removes every child matching `drop` in one pass, keeping or dropping each one's tail.
    pub fn remove_children(&mut self, drop: &dyn Fn(&El) -> bool, keep_tail: bool) -> bool {
        if !self.children.iter().any(drop) {
            return false;
        }
        let old = std::mem::take(&mut self.children);
        for c in old {
            if !drop(&c) {
                self.children.push(c);
                continue;
            }
            if keep_tail && let Some(tail) = c.tail {
                let slot = match self.children.last_mut() {
                    Some(prev) => &mut prev.tail,
                    None => &mut self.text,
                };
                slot.get_or_insert_with(String::new).push_str(&tail);
            }
        }
        true
    }

    /// Text of the element and all descendants is whitespace only (tails included, the
    /// element's own tail too, as the converter's check walks `iter()`).
    pub fn is_text_empty(&self) -> bool {
        let blank = |t: &Option<String>| t.as_deref().is_none_or(|s| s.trim().is_empty());
        self.iter().iter().all(|e| blank(&e.text) && blank(&e.tail))
    }
}

/// Parses a page with html5ever (the same tree lexbor builds for the converter: both follow
/// the HTML standard) into the lxml model; comments, doctypes and processing instructions are
/// dropped as the converter's parser does.
pub fn parse(html: &str) -> El {
    let doc = Document::from(html);
    let root = doc.root();
    let mut top = El::new("#root");
    for child in root.children_it(false) {
        convert(&child, &mut top, 0);
    }
    match top.children.iter().position(|c| c.tag == "html") {
        Some(i) => top.children.swap_remove(i),
        None => {
            let mut html = El::new("html");
            html.children = top.children;
            html
        }
    }
}

fn convert(node: &NodeRef<'_>, parent: &mut El, depth: usize) {
    enum Kind {
        Text(String),
        Elem(El, Option<dom_query::NodeId>),
        Skip,
    }
    let kind = node.query(|tn| match &tn.data {
        NodeData::Text { contents } => Kind::Text(contents.to_string()),
        NodeData::Element(el) => {
            let mut e = El::new(&el.name.local.to_ascii_lowercase());
            for a in &el.attrs {
                e.attrs.push((
                    a.name.local.to_string().to_ascii_lowercase(),
                    a.value.to_string(),
                ));
            }
            Kind::Elem(e, el.template_contents)
        }
        _ => Kind::Skip,
    });
    match kind {
        Some(Kind::Text(t)) => append_text(parent, &t),
        Some(Kind::Elem(mut e, template)) => {
            if depth >= MAX_DEPTH {
                // Too deep: the subtree's text joins the parent's flow (scripts and styles
                // left out, as the cleaning would have dropped them).
                append_text(parent, &flat_text(node));
                return;
            }
            // html5ever keeps a <template>'s content in a fragment of its own; lxml reads
            // it as ordinary children.
            let holder = match template {
                Some(id) => NodeRef::new(id, node.tree),
                None => *node,
            };
            for c in holder.children_it(false) {
                convert(&c, &mut e, depth + 1);
            }
            parent.children.push(e);
        }
        _ => {}
    }
}

/// The text under a node, without recursion, skipping `<script>`, `<style>`, `<noscript>`.
fn flat_text(node: &NodeRef<'_>) -> String {
    let mut out = String::new();
    let mut stack: Vec<NodeRef<'_>> = node.children_it(true).collect();
    while let Some(n) = stack.pop() {
        let skip = n.query(|tn| match &tn.data {
            NodeData::Text { contents } => {
                out.push_str(contents);
                true
            }
            NodeData::Element(el) => matches!(&*el.name.local, "script" | "style" | "noscript"),
            _ => true,
        });
        if skip != Some(true) {
            stack.extend(n.children_it(true));
        }
    }
    out
}

fn append_text(parent: &mut El, t: &str) {
    if t.is_empty() {
        return;
    }

    let slot = match parent.children.last_mut() {
        Some(last) => &mut last.tail,
        None => &mut parent.text,
    };
    slot.get_or_insert_with(String::new).push_str(t);
}
