//! `html_split_by_tags`: cuts a tree at every element a recognizer replaced, so each
//! recognized block and each stretch between them becomes a fragment of its own, each
//! keeping the chain of ancestors (tag and attributes) it sat in.

use super::tree::El;

/// A recognized block (`cccode`, `cctable`, ...) or a stretch of other content.
#[derive(Debug, Clone)]
pub struct Fragment {
    pub root: El,
    /// The recognized element when this fragment is one (its tag is a `cc*` tag).
    pub cc: Option<String>,
}

struct Splitter<'a> {
    tags: &'a [&'a str],
    /// The chain of open copies, outermost first; children attach when they close.
    path: Vec<El>,
    out: Vec<Fragment>,
}

pub fn split(root: &El, tags: &[&str]) -> Vec<Fragment> {
    let mut s = Splitter {
        tags,
        path: Vec::new(),
        out: Vec::new(),
    };
    s.node(root);
    s.out
}

impl Splitter<'_> {
    fn node(&mut self, el: &El) {
        let mut copied = el.shell();
        if let Some(t) = &el.text
            && !t.trim().is_empty()
        {
            copied.text = Some(clean_xml(t));
        }
        self.path.push(copied);
        for sub in &el.children {
            if self.tags.contains(&sub.tag.as_str()) {
                let before = self.fold();
                if !before.is_text_empty() {
                    self.out.push(Fragment {
                        root: before,
                        cc: None,
                    });
                }
                let mut cp = sub.clone();
                cp.tail = None;
                if let Some(top) = self.path.last_mut() {
                    top.children.push(cp);
                }
                let with = self.fold();
                self.out.push(Fragment {
                    root: with,
                    cc: Some(sub.tag.clone()),
                });
                if let Some(t) = &sub.tail
                    && !t.trim().is_empty()
                    && let Some(top) = self.path.last_mut()
                {
                    top.text = Some(t.clone());
                }
                continue;
            }
            self.node(sub);
        }
        let Some(mut done) = self.path.pop() else {
            return;
        };
        if let Some(t) = &el.tail
            && !t.trim().is_empty()
        {
            done.tail = Some(t.clone());
        }
        match self.path.last_mut() {
            Some(parent) => parent.children.push(done),
            None => {
                if !done.is_text_empty() {
                    self.out.push(Fragment {
                        root: done,
                        cc: None,
                    });
                }
            }
        }
    }

    /// The tree built so far, as one root; the path is replaced by empty copies of itself.
    fn fold(&mut self) -> El {
        let fresh: Vec<El> = self.path.iter().map(El::shell).collect();
        let mut chain = std::mem::replace(&mut self.path, fresh);
        let mut inner: Option<El> = None;
        while let Some(mut el) = chain.pop() {
            if let Some(c) = inner.take() {
                el.children.push(c);
            }
            inner = Some(el);
        }
        inner.unwrap_or_default()
    }
}

/// Drops the control characters XML cannot hold.
pub fn clean_xml(s: &str) -> String {
    s.chars()
        .filter(|&c| !matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'))
        .collect()
}

/// The recognized element inside a cc fragment (first match in document order).
pub fn cc_element<'a>(root: &'a El, tag: &str) -> Option<&'a El> {
    root.iter().into_iter().find(|e| e.tag == tag)
}
