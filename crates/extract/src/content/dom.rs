//! A compact, read-only copy of the parsed document: one flat arena in document order, so
//! the scoring passes are plain loops over indices (children always follow their parent),
//! with no reference counting or interior mutability on the hot path.

use dom_query::{Document, LocalName, NodeData, NodeRef, local_name};

use super::tags::Tag;

pub const NONE: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub struct Node {
    pub tag: Tag,
    pub parent: u32,
    pub first_child: u32,
    pub next_sibling: u32,
    /// Text nodes: byte range in [`Dom::text`]. Elements: range in [`Dom::attrs`].
    pub start: u32,
    pub end: u32,
    /// Lower-cased `class` and `id` joined by a space (elements only), for the hint patterns.
    pub hint: Box<str>,
}

#[derive(Debug, Default)]
pub struct Dom {
    pub nodes: Vec<Node>,
    pub text: String,
    pub attrs: Vec<(Box<str>, Box<str>)>,
    /// Elements carrying a framework's mark (`data-reactroot`, `ng-version`,
    /// `data-v-app`, ...): where a browser-rendered application mounts.
    pub framework_roots: Vec<u32>,
    /// A `<noscript>` asks for JavaScript (see [`super::shell::open_noscripts`]).
    pub js_notice: bool,
}

/// Attributes frameworks put on the element they render into.
fn framework_mark(name: &str) -> bool {
    matches!(
        name,
        "data-reactroot" | "ng-version" | "ng-app" | "data-v-app" | "data-sveltekit-hydrate"
    )
}

/// Attributes kept from the parse; everything else is dropped. Interned names compare as
/// integers.
fn kept(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("href")
            | local_name!("src")
            | local_name!("alt")
            | local_name!("title")
            | local_name!("lang")
            | local_name!("role")
            | local_name!("itemprop")
            | local_name!("itemtype")
            | local_name!("hidden")
            | local_name!("aria-hidden")
            | local_name!("aria-label")
            | local_name!("style")
            | local_name!("content")
            | local_name!("name")
            | local_name!("property")
            | local_name!("rel")
            | local_name!("type")
            | local_name!("datetime")
            | local_name!("class")
            | local_name!("id")
            | local_name!("colspan")
            | local_name!("start")
            | local_name!("http-equiv")
    )
}

impl Dom {
    pub fn parse(html: &str) -> Dom {
        let doc = Document::from(html);
        let mut dom = Dom {
            nodes: Vec::with_capacity(html.len() / 40),
            text: String::with_capacity(html.len() / 3),
            attrs: Vec::new(),
            framework_roots: Vec::new(),
            js_notice: false,
        };
        dom.nodes.push(Node {
            tag: Tag::Root,
            parent: NONE,
            first_child: NONE,
            next_sibling: NONE,
            start: 0,
            end: 0,
            hint: Box::from(""),
        });
        let root = doc.root();
        // Iterative pre-order walk; the stack holds (source node, arena parent, last child).
        let mut stack: Vec<(NodeRef<'_>, u32)> = Vec::new();
        let mut last_child: Vec<u32> = vec![NONE];
        let mut kids: Vec<NodeRef<'_>> = root.children_it(true).collect();
        for k in kids.drain(..) {
            stack.push((k, 0));
        }
        while let Some((node, parent)) = stack.pop() {
            let Some(idx) = dom.push_node(&node, parent) else {
                continue;
            };
            // Link as the last child of the parent.
            let p = parent as usize;
            let prev = last_child[p];
            if prev == NONE {
                dom.nodes[p].first_child = idx;
            } else {
                dom.nodes[prev as usize].next_sibling = idx;
            }
            last_child[p] = idx;
            last_child.push(NONE);
            if dom.nodes[idx as usize].tag != Tag::Text {
                kids.extend(node.children_it(true));
                for k in kids.drain(..) {
                    stack.push((k, idx));
                }
            }
        }
        // What crawlers are served inside <noscript> is the page's content.
        dom.js_notice = super::shell::open_noscripts(&mut dom);
        dom
    }

    fn push_node(&mut self, node: &NodeRef<'_>, parent: u32) -> Option<u32> {
        let idx = self.nodes.len() as u32;
        let made = node.query(|tn| match &tn.data {
            NodeData::Text { contents } => {
                let start = self.text.len() as u32;
                self.text.push_str(contents);
                Some(Node {
                    tag: Tag::Text,
                    parent,
                    first_child: NONE,
                    next_sibling: NONE,
                    start,
                    end: self.text.len() as u32,
                    hint: Box::from(""),
                })
            }
            NodeData::Element(el) => {
                let tag = Tag::from_name(&el.name.local);
                let start = self.attrs.len() as u32;
                let mut hint = String::new();
                for a in &el.attrs {
                    if !kept(&a.name.local) {
                        if framework_mark(&a.name.local) {
                            self.framework_roots.push(idx);
                        }
                        continue;
                    }
                    let name: &str = &a.name.local;
                    if name == "class" || name == "id" {
                        if !hint.is_empty() {
                            hint.push(' ');
                        }
                        hint.push_str(&a.value.to_ascii_lowercase());
                    }
                    self.attrs.push((Box::from(name), Box::from(&*a.value)));
                }
                Some(Node {
                    tag,
                    parent,
                    first_child: NONE,
                    next_sibling: NONE,
                    start,
                    end: self.attrs.len() as u32,
                    hint: hint.into_boxed_str(),
                })
            }
            _ => None,
        })??;
        self.nodes.push(made);
        Some(idx)
    }

    #[inline]
    pub fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    pub fn attr(&self, i: u32, name: &str) -> Option<&str> {
        let n = self.node(i);
        if n.tag == Tag::Text {
            return None;
        }
        self.attrs[n.start as usize..n.end as usize]
            .iter()
            .find(|(k, _)| &**k == name)
            .map(|(_, v)| &**v)
    }

    pub fn text_of(&self, i: u32) -> &str {
        let n = self.node(i);
        &self.text[n.start as usize..n.end as usize]
    }

    pub fn children(&self, i: u32) -> Children<'_> {
        Children {
            dom: self,
            next: self.node(i).first_child,
        }
    }

    /// One past the last descendant of `i` in document order.
    pub fn subtree_end(&self, i: u32) -> u32 {
        let mut cur = i;
        loop {
            let n = self.node(cur);
            if n.next_sibling != NONE {
                return n.next_sibling;
            }
            if n.parent == NONE {
                return self.nodes.len() as u32;
            }
            cur = n.parent;
        }
    }

    /// All text below `i`, concatenated (no layout).
    pub fn raw_text(&self, i: u32) -> String {
        let mut s = String::new();
        for j in i..self.subtree_end(i) {
            if self.node(j).tag == Tag::Text {
                s.push_str(self.text_of(j));
            }
        }
        s
    }

    /// The visible text under `i`, text nodes joined by single spaces (so `<span>May
    /// 5</span><span>2020</span>` stays two words), scripts and styles left out, cut after
    /// about `max` bytes.
    pub fn words(&self, i: u32, max: usize) -> String {
        let mut s = String::new();
        let mut j = i;
        let end = self.subtree_end(i);
        while j < end && s.len() < max {
            let n = self.node(j);
            match n.tag {
                Tag::Script | Tag::Style | Tag::Template => {
                    j = self.subtree_end(j);
                    continue;
                }
                Tag::Text => {
                    for w in self.text_of(j).split_whitespace() {
                        if !s.is_empty() {
                            s.push(' ');
                        }
                        s.push_str(w);
                    }
                }
                _ => {}
            }
            j += 1;
        }
        s
    }

    /// Whether `i` or one of its nearest `depth` ancestors is `pred`'s: the context a
    /// metadata reader asks about (a date in a comment, a name in a footer).
    pub fn within(&self, mut i: u32, depth: usize, pred: impl Fn(&Node) -> bool) -> bool {
        for _ in 0..depth {
            if i == NONE {
                break;
            }
            let n = self.node(i);
            if pred(n) {
                return true;
            }
            i = n.parent;
        }
        false
    }

    pub fn is_ancestor(&self, anc: u32, mut i: u32) -> bool {
        while i != NONE {
            if i == anc {
                return true;
            }
            i = self.node(i).parent;
        }
        false
    }
}

/// Whether a node's `hint` (its lower-cased class and id) holds any of `words`, inside
/// compounds too (`entry-date`, `postedby`).
pub fn hint_has(hint: &str, words: &[&str]) -> bool {
    words.iter().any(|w| hint.contains(w))
}

pub struct Children<'a> {
    dom: &'a Dom,
    next: u32,
}

impl Iterator for Children<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        if self.next == NONE {
            return None;
        }
        let cur = self.next;
        self.next = self.dom.node(cur).next_sibling;
        Some(cur)
    }
}
