//! Main-content extraction: the page's own text without the site around it, as plain text
//! and Markdown, with its metadata.
//!
//! The document is parsed once by html5ever (through `dom_query`), copied into a flat arena
//! ([`dom::Dom`]), weighed ([`score`]), cut down to the content ([`selection`]) and written
//! out ([`render`]).

mod authors;
mod dates;
mod dom;
mod hints;
mod html_out;
mod links;
mod meta;
mod nesting;
mod published;
mod render;
mod score;
mod selection;
pub mod shell;
mod tags;

pub use links::Links;
pub use render::Mode;
use serde::Serialize;
pub use shell::Shell;
pub use trawl_core::PageMeta;
use url::Url;

/// Pages larger than this are cut before parsing: the tail of a 50 MB page is not its
/// main content, and parsing time grows with the input.
pub const MAX_HTML_BYTES: usize = 8 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PageType {
    /// The page says it is an article (Open Graph or JSON-LD).
    Article,
    Forum,
    Other,
}

/// What one HTML page yields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Content {
    pub title: Option<String>,
    /// The main content as plain text: paragraphs separated by blank lines.
    pub text: String,
    pub markdown: Option<String>,
    pub meta: PageMeta,
    pub kind: Option<PageType>,
    /// Present when [`extract`] was given the page's URL.
    pub links: Option<Links>,
    /// What was kept, as HTML (elements with their content attributes: links, images,
    /// table spans), when [`Options::html`] asked for it.
    pub html: Option<String>,
    /// Signs of client-side rendering (for the render rule, `crate::shell`).
    pub shell: Shell,
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub markdown: bool,
    pub markdown_links: bool,
    /// Collect the page's links (needs the page's URL).
    pub links: bool,
    /// Keep only the main content (the default); `false` writes the whole visible page,
    /// navigation, header and footer included.
    pub main_content: bool,
    /// Also write what was kept as HTML (`Content::html`).
    pub html: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            markdown: true,
            markdown_links: false,
            links: true,
            main_content: true,
            html: false,
        }
    }
}

fn cut(html: &str) -> &str {
    let mut end = html.len().min(MAX_HTML_BYTES);
    while !html.is_char_boundary(end) {
        end -= 1;
    }
    nesting::cut_too_deep(&html[..end])
}

fn page_type(url: Option<&Url>, ld: &meta::JsonLd, m: &meta::Metadata, d: &dom::Dom) -> PageType {
    let forum_types = [
        "DiscussionForumPosting",
        "QAPage",
        "Question",
        "SocialMediaPosting",
    ];
    if ld.types.iter().any(|t| forum_types.contains(&t.as_str())) {
        return PageType::Forum;
    }
    if let Some(g) = &m.generator {
        let g = g.to_ascii_lowercase();
        if [
            "discourse",
            "vbulletin",
            "phpbb",
            "xenforo",
            "invision",
            "mybb",
            "flarum",
        ]
        .iter()
        .any(|k| g.contains(k))
        {
            return PageType::Forum;
        }
    }
    if let Some(u) = url {
        let path = u.path().to_ascii_lowercase();
        let host = u.host_str().unwrap_or("").to_ascii_lowercase();
        if host.starts_with("forum")
            || host.starts_with("community")
            || host.starts_with("discuss")
            || [
                "/forum",
                "/forums/",
                "/thread",
                "/topic",
                "/t/",
                "/discussion",
                "/questions/",
                "/community/",
            ]
            .iter()
            .any(|k| path.contains(k))
        {
            return PageType::Forum;
        }
    }
    let microdata_posts = (0..d.nodes.len() as u32)
        .filter(|&i| {
            // Not schema.org/Comment: blogs mark up their comment sections with it.
            d.attr(i, "itemtype")
                .is_some_and(|t| t.contains("DiscussionForumPosting") || t.ends_with("/Answer"))
        })
        .count();
    if microdata_posts >= 2 {
        return PageType::Forum;
    }
    // Site generators stamp og:type=article on every page; a publication date says more.
    let article = (m.og_type.as_deref() == Some("article") && m.page.published.is_some())
        || ld.types.iter().any(|t| {
            t.ends_with("Article") || t == "BlogPosting" || t == "Report" || t == "LiveBlogPosting"
        });
    if article {
        PageType::Article
    } else {
        PageType::Other
    }
}

/// Extracts the main content of one HTML page. `url` resolves relative links and helps
/// recognise the kind of page; with it, the page's links are collected too. Never fails: a
/// page with no content yields empty text.
pub fn extract(html: &str, url: Option<&Url>, opts: Options) -> Content {
    let d = dom::Dom::parse(cut(html));
    let ld = meta::json_ld(&d);
    let meta = meta::metadata(&d, &ld, url);
    let kind = page_type(url, &ld, &meta, &d);
    let sel = if opts.main_content {
        let a = score::analyse(&d, kind);
        selection::select(&d, &a, meta.head_title.as_deref())
    } else {
        selection::whole_page(&d)
    };
    let text = render::Renderer::new(&d, &sel.dropped, Mode::Text, url).render(&sel.roots);
    let markdown = opts.markdown.then(|| {
        render::Renderer::new(
            &d,
            &sel.dropped,
            Mode::Markdown {
                links: opts.markdown_links,
            },
            url,
        )
        .render(&sel.roots)
    });
    let links = url.filter(|_| opts.links).map(|u| links::links(&d, u));
    let html = opts
        .html
        .then(|| html_out::write(&d, &sel.roots, &sel.dropped, url));
    let mut page = meta.page;
    if let (Some(u), Some(c)) = (url, page.canonical.as_deref()) {
        page.canonical = u.join(c).ok().map(|c| c.to_string());
    }
    let shell = shell::signals(&d, d.js_notice);
    Content {
        shell,
        title: meta.title,
        text,
        markdown,
        meta: page,
        kind: Some(kind),
        links,
        html,
    }
}

/// Why the extractor chose what it chose: the best-scoring boxes and the kept roots. For
/// tuning and bug reports, not a stable format.
#[doc(hidden)]
pub fn explain(html: &str, url: Option<&Url>) -> String {
    let d = dom::Dom::parse(cut(html));
    let ld = meta::json_ld(&d);
    let meta = meta::metadata(&d, &ld, url);
    let kind = page_type(url, &ld, &meta, &d);
    let a = score::analyse(&d, kind);
    let sel = selection::select(&d, &a, meta.head_title.as_deref());
    let mut out = format!("type {kind:?}, roots {:?}\n", sel.roots);
    let mut cands: Vec<(f32, u32)> = (0..d.nodes.len() as u32)
        .filter(|&i| !a.removed[i as usize] && d.node(i).tag.is_block())
        .map(|i| (score::balance(&d, &a, i), i))
        .collect();
    cands.sort_by(|x, y| y.0.total_cmp(&x.0));
    for (s, i) in cands.iter().take(12) {
        let n = d.node(*i);
        let iu = *i as usize;
        out.push_str(&format!(
            "{i:6} {:?} [{}] net {s:.0} good {:.0} bad {:.0} chars {} links {} parent {}\n",
            n.tag,
            n.hint,
            a.content_weight[iu],
            a.chrome_weight[iu],
            a.chars[iu],
            a.link_chars[iu],
            n.parent
        ));
    }
    for &r in &sel.roots {
        let n = d.node(r);
        out.push_str(&format!("root {r} {:?} [{}]\n", n.tag, n.hint));
    }
    out
}
