//! What `class` and `id` values say about a box. Tokens are split on anything that is not a
//! letter or digit, so `post-sidebar__inner` yields `post`, `sidebar`, `inner`; long words
//! also match inside compounds (`relatedposts`), short ones only as whole tokens (`ad`).

/// Chrome that is never the main content, whatever else the box says of itself.
fn is_strong(t: &str) -> bool {
    matches!(
        t,
        "ad" | "ads"
            | "adv"
            | "advert"
            | "advertisement"
            | "nav"
            | "navbar"
            | "menu"
            | "menus"
            | "footer"
            | "sidebar"
            | "share"
            | "sharing"
            | "social"
            | "related"
            | "promo"
            | "promos"
            | "popup"
            | "modal"
            | "cookie"
            | "cookies"
            | "consent"
            | "gdpr"
            | "newsletter"
            | "subscribe"
            | "subscription"
            | "signup"
            | "login"
            | "breadcrumb"
            | "breadcrumbs"
            | "pagination"
            | "pager"
            | "sponsor"
            | "sponsored"
            | "outbrain"
            | "taboola"
            | "comment"
            | "comments"
            | "disqus"
            | "respond"
            | "recommended"
            | "recommendations"
            | "recirc"
            | "trending"
            | "tagcloud"
            | "skip"
            | "offcanvas"
            | "drawer"
            | "overlay"
            | "paywall"
            | "cart"
    )
}
/// Usually chrome, unless the same box also calls itself content.
fn is_weak(t: &str) -> bool {
    matches!(
        t,
        "header"
            | "masthead"
            | "aside"
            | "widget"
            | "widgets"
            | "tags"
            | "byline"
            | "dateline"
            | "author"
            | "bio"
            | "disclaimer"
            | "copyright"
            | "legal"
            | "topbar"
            | "toc"
            | "more"
            | "callout"
            | "rail"
            | "meta"
            | "caption"
            | "credit"
            | "credits"
            | "timestamp"
            | "tools"
            | "utility"
            | "actions"
            | "alert"
            | "notice"
            | "teaser"
            | "teasers"
            | "carousel"
            | "slider"
            | "filter"
            | "filters"
            | "facet"
            | "facets"
            | "sort"
            | "search"
            | "account"
            | "announcement"
            | "print"
            | "reply"
            | "discuss"
            | "banner"
            | "foot"
    )
}
const NEGATIVE_INFIX: &[&str] = &[
    "sidebar",
    "related",
    "comment",
    "breadcrumb",
    "newsletter",
    "cookie",
    "social",
    "sharing",
    "sharebar",
    "advert",
    "sponsor",
    "navigation",
    "navbar",
    "footer",
    "masthead",
    "subscribe",
    "popup",
    "banner",
    "recommend",
    "promo",
    "outbrain",
    "taboola",
    "consent",
];
fn is_positive(t: &str) -> bool {
    matches!(
        t,
        "article"
            | "content"
            | "entry"
            | "main"
            | "post"
            | "text"
            | "body"
            | "story"
            | "blog"
            | "prose"
            | "markdown"
            | "documentation"
            | "docs"
            | "description"
            | "answer"
            | "question"
            | "message"
            | "thread"
            | "topic"
            | "review"
            | "recipe"
            | "product"
            | "detail"
            | "details"
            | "richtext"
    )
}
/// Tokens that mean "the conversation" on forums, where the conversation is the content.
fn is_discussion(t: &str) -> bool {
    matches!(
        t,
        "comment"
            | "comments"
            | "discuss"
            | "reply"
            | "replies"
            | "respond"
            | "post"
            | "posts"
            | "message"
            | "answer"
            | "answers"
            | "thread"
            | "topic"
    )
}

/// Whether the box's only chrome words name a slot that wraps the page's own text when it
/// holds paragraphs of it:
/// - an advertisement slot holds an iframe, an image or a label, never running text; when
///   one does, the markup around it is broken (an unclosed or garbled tag whose box took
///   in the rest of the article);
/// - a paywall box holds a "subscribe to read on" notice, or the part of the article
///   behind the wall, sent whole and hidden by script.
pub fn is_text_slot(hint: &str) -> bool {
    let mut slot = false;
    for t in tokens(hint) {
        if matches!(
            t,
            "ad" | "ads" | "adv" | "advert" | "advertisement" | "paywall"
        ) {
            slot = true;
        } else if is_strong(t) || is_weak(t) {
            return false;
        }
    }
    slot
}

fn tokens(hint: &str) -> impl Iterator<Item = &str> {
    hint.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// Chrome by element name (`<nav>`, `<footer>`): removed unless it holds the main box.
    Chrome,
    /// Chrome whatever else the box says.
    Strong,
    /// Chrome unless the box also calls itself content.
    Negative,
    Neutral,
    Positive,
}

/// Classifies one box by its class and id. On forum pages the discussion words are not
/// negative.
pub fn classify(hint: &str, forum: bool) -> Hint {
    if hint.is_empty() {
        return Hint::Neutral;
    }
    let mut strong = false;
    let mut neg = false;
    let mut pos = false;
    // Page builders call every block a widget.
    let builder =
        || hint.contains("elementor") || hint.contains("et_pb_") || hint.contains("wp-block");
    for t in tokens(hint) {
        if t.len() > 40 || (t.starts_with("widget") && builder()) {
            continue;
        }
        // An accordion's drawers are its folds of text (FAQs, a review's sections), not
        // an off-canvas menu.
        if t == "drawer" && hint.contains("accordion") {
            continue;
        }
        if forum && is_discussion(t) {
            pos = true;
            continue;
        }
        if is_strong(t) {
            strong = true;
        } else if is_weak(t) {
            neg = true;
        } else if is_positive(t) {
            pos = true;
        } else if t.len() > 6
            && NEGATIVE_INFIX
                .iter()
                .any(|k| t.contains(k) && !(forum && k.starts_with("comment")))
        {
            strong = true;
        }
    }
    match (strong, neg, pos) {
        (true, _, _) => Hint::Strong,
        (false, true, false) => Hint::Negative,
        (false, false, true) => Hint::Positive,
        _ => Hint::Neutral,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_compounds() {
        assert_eq!(classify("post-sidebar__inner", false), Hint::Strong);
        assert_eq!(classify("post-body__inner", false), Hint::Positive);
        assert_eq!(classify("widget-area sidebar", false), Hint::Strong);
        assert_eq!(classify("relatedposts", false), Hint::Strong);
        assert_eq!(classify("article-body", false), Hint::Positive);
        assert_eq!(classify("header", false), Hint::Negative);
        assert_eq!(classify("pg-right-rail-tall", false), Hint::Negative);
        assert_eq!(
            classify("shadow", false),
            Hint::Neutral,
            "`ad` only as a token"
        );
        assert_eq!(classify("comment-list", false), Hint::Strong);
        assert_eq!(classify("comments-area post-comments", false), Hint::Strong);
        assert_eq!(classify("entry-meta", false), Hint::Neutral);
        assert_eq!(
            classify("widget_recent_entries widget", false),
            Hint::Negative
        );
        assert_eq!(classify("elementor-widget-container", false), Hint::Neutral);
        assert_eq!(classify("comment-list", true), Hint::Positive);
    }

    #[test]
    fn accordion_drawers_are_folds_of_text() {
        assert_eq!(classify("drawer", false), Hint::Strong);
        assert_eq!(
            classify("comp mntl-sc-block-accordion_drawer mntl-block", false),
            Hint::Neutral
        );
    }

    #[test]
    fn text_slots() {
        assert!(is_text_slot("ad-container"));
        assert!(is_text_slot("svelte-ctf3gy opscoad-article_in_read ad"));
        assert!(
            !is_text_slot("ad sidebar"),
            "a sidebar is chrome whatever it holds"
        );
        assert!(!is_text_slot("comments ad"));
        assert!(!is_text_slot("shadow"));
        assert!(is_text_slot("paywall"));
        assert!(!is_text_slot("paywall-subscribe"));
    }
}
