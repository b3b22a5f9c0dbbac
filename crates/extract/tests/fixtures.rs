//! Regression fixtures: one hand-written page per page type (written for these tests, in the
//! shape real sites use), each with passages that must be kept and chrome that must not,
//! plus metadata and Markdown checks.

use trawl_extract::content::{Content, Options, PageType, extract};
use url::Url;

fn page(name: &str, url: &str) -> Content {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let html = std::fs::read_to_string(&path).expect("fixture");
    let url = Url::parse(url).expect("url");
    extract(
        &html,
        Some(&url),
        Options {
            markdown: true,
            markdown_links: false,
            links: true,
            ..Options::default()
        },
    )
}

#[track_caller]
fn check(c: &Content, kept: &[&str], dropped: &[&str]) {
    for k in kept {
        assert!(c.text.contains(k), "missing {k:?} in:\n{}", c.text);
    }
    for d in dropped {
        assert!(!c.text.contains(d), "kept chrome {d:?} in:\n{}", c.text);
    }
}

#[test]
fn article_keeps_the_story_and_drops_the_frame() {
    let c = page(
        "article.html",
        "https://gazette.example/news/2025/harbour-seals-return?utm=x",
    );
    check(
        &c,
        &[
            "Counts of harbour seals on the Wend estuary have doubled since 2019",
            "Pups born on the mudflats",
            "We never expected to see pups this far in.",
            "Report injured animals to the marine rescue line.",
            "stay at least 100 metres from seals",
        ],
        &[
            "We use cookies",
            "Sport",
            "Share on Facebook",
            "Advertisement",
            "Cheap flights",
            "Seals hauled out on the north sandbank",
            "Otters spotted on the river",
            "Wonderful news",
            "Leave a reply",
            "morning briefing",
            "Council approves",
            "All rights reserved",
            "Conservation",
            "By Mara",
            // The author's card that closes the article.
            "About the author",
            "covered the coast and its wildlife",
        ],
    );
    // The headline is the title, not part of the text.
    assert!(!c.text.starts_with("Harbour seals return"), "{}", c.text);
    assert_eq!(
        c.title.as_deref(),
        Some("Harbour seals return to the estuary")
    );
    assert_eq!(c.kind, Some(PageType::Article));
    let m = &c.meta;
    assert_eq!(m.author.as_deref(), Some("Mara Oyelaran"));
    assert_eq!(m.published.as_deref(), Some("2025-03-14T08:30:00Z"));
    assert_eq!(m.modified.as_deref(), Some("2025-03-15T10:00:00Z"));
    assert_eq!(m.language.as_deref(), Some("en-GB"));
    assert_eq!(m.site_name.as_deref(), Some("The Coastal Gazette"));
    assert_eq!(m.jsonld_type.as_deref(), Some("NewsArticle"));
    assert_eq!(
        m.description.as_deref(),
        Some("Counts of harbour seals on the Wend estuary have doubled since 2019.")
    );
    assert_eq!(
        m.canonical.as_deref(),
        Some("https://gazette.example/news/2025/harbour-seals-return")
    );
    let links = c.links.expect("links");
    assert_eq!(
        links.feeds,
        vec!["https://gazette.example/feeds/news.xml".to_string()]
    );
    assert!(
        links
            .links
            .contains(&"https://gazette.example/news/otters".to_string())
    );
    // Markdown keeps the structure.
    let md = c.markdown.expect("markdown");
    assert!(md.contains("\n## Pups born on the mudflats\n"), "{md}");
    assert!(md.contains("> “We never expected"), "{md}");
    assert!(
        md.contains("- Keep at least 100 metres away from resting seals."),
        "{md}"
    );
}

#[test]
fn forum_keeps_every_post() {
    let c = page(
        "forum.html",
        "https://bread.example/t/sourdough-starter-smells-like-nail-polish-remover/4411",
    );
    assert_eq!(c.kind, Some(PageType::Forum));
    check(
        &c,
        &[
            "suddenly smells sharply of acetone",
            "producing ethyl acetate",
            "1:5:5",
            "a little wholemeal rye",
            "smells like yoghurt again",
        ],
        &[
            "Log In",
            "Sign Up",
            "Suggested topics",
            // The post's frame: the author's card and the quote's expander.
            "312 posts",
            "Click to expand",
            "Banneton",
            "Terms of Service",
        ],
    );
    assert_eq!(c.meta.author.as_deref(), Some("crumbshot"));
    assert_eq!(
        c.meta.jsonld_type.as_deref(),
        Some("DiscussionForumPosting")
    );
}

#[test]
fn product_keeps_description_features_and_specs() {
    let c = page(
        "product.html",
        "https://fernhill.example/products/trailhead-28l",
    );
    check(
        &c,
        &[
            "ventilated mesh back panel keeps air moving",
            "opens fully like a suitcase",
            "Hydration sleeve fits a 3-litre reservoir",
            "28 litres",
            "210D recycled ripstop nylon",
        ],
        &[
            "Free shipping on orders",
            "Cart (0)",
            "Add to cart",
            "Summit 40L Pack",
            "early access to sales",
            "Returns",
        ],
    );
    assert_eq!(c.meta.jsonld_type.as_deref(), Some("Product"));
    let md = c.markdown.expect("markdown");
    assert!(md.contains("| Volume | 28 litres |"), "{md}");
    assert!(md.contains("|---|---|"), "{md}");
}

#[test]
fn documentation_keeps_code_tables_and_notes() {
    let c = page(
        "documentation.html",
        "https://tidepool.example/guide/retries.html",
    );
    check(
        &c,
        &[
            "retries a failed request three times",
            "# five attempts, doubling the wait from 200 ms",
            "pool = Pool(retry=Retry(attempts=5, backoff=0.2))",
            "How many times a request is tried in all.",
            "are never retried unless you pass retry_unsafe=True",
            "which bound each attempt",
        ],
        &[
            "Table of contents",
            "Quickstart",
            "Created using Sphinx",
            "tidepool 2.3 »",
        ],
    );
    let md = c.markdown.expect("markdown");
    // The code block keeps its lines and its language.
    assert!(
        md.contains("```python\nfrom tidepool import Pool, Retry\n\n# five attempts"),
        "{md}"
    );
    assert!(md.contains("`Pool`"), "{md}");
    // The heading's permalink marker is not part of it.
    assert!(md.contains("\n## Parameters\n"), "{md}");
    assert!(md.contains("| `attempts` | 3 | How many times"), "{md}");
}

#[test]
fn listing_keeps_the_items_and_drops_the_filters() {
    let c = page("listing.html", "https://whatson.example/events");
    check(
        &c,
        &[
            "46 events in Harbourtown",
            "Lantern Parade",
            "Brass Band Spring Concert",
            "St Anne's Hall",
            "Maritime Museum Late Opening",
        ],
        &[
            "Theatre (9)",
            "This weekend",
            "Submit an event",
            "Next page",
            "Contact",
        ],
    );
}

#[test]
fn collection_keeps_the_items_and_the_copy() {
    let c = page(
        "collection.html",
        "https://slowmorning.example/collections/linen-bedding",
    );
    check(
        &c,
        &[
            "woven from European flax",
            "Linen Sheet Set",
            "coconut-shell buttons",
            "Waffle Linen Throw",
            "There is no need to iron",
        ],
        &[
            "Spring sale",
            "Price, low to high",
            "Sign up for 10%",
            "Account",
        ],
    );
}

#[test]
fn service_page_built_from_widgets_keeps_its_copy() {
    let c = page("service.html", "https://ledgerlight.example/");
    check(
        &c,
        &[
            "We reconcile your accounts every month",
            "Monthly bookkeeping",
            "pension contributions and filings",
            "no surprises in January",
            "expenses we had never claimed",
        ],
        &["About us", "registered in England", "Cookie settings"],
    );
}

/// A question-and-answer page (schema.org Question/Answer markup): the question and the
/// answers are the content; the remarks under them, the authors' cards, votes and tags
/// are not.
#[test]
fn qa_keeps_question_and_answers_not_comments() {
    let c = page(
        "qa.html",
        "https://earth.answers.example/questions/4521/how-do-tides-work-on-small-lakes",
    );
    assert_eq!(c.kind, Some(PageType::Forum));
    check(
        &c,
        &[
            "never noticed the water rise and fall",
            "Do lakes this small have tides at all",
            "swamped by wind setup and seiches",
            "Lake Superior",
        ],
        &[
            "ruler taped to the dock post",
            "the seiche point surprised me",
            "48,310",
            "5 gold badges",
            "pondwatcher",
        ],
    );
    assert_eq!(
        c.title.as_deref(),
        Some("How do tides work on small lakes?")
    );
}

fn inline(html: &str) -> Content {
    let url = Url::parse("https://news.example/story").expect("url");
    extract(html, Some(&url), Options::default())
}

/// A paragraph of running text, numbered so each one is its own passage.
fn para(n: usize) -> String {
    format!(
        "<p>Passage {n} of the story goes on about the harbour, the tides and the boats that \
         come in with the evening light, long enough to read as running text.</p>"
    )
}

#[test]
fn text_that_broken_markup_put_in_an_ad_slot_is_kept() {
    // The second slot's opening tag is garbled (an attribute list that swallows `<a`), so
    // the parser nests the rest of the story inside it: a real site's markup.
    // Half the story before the slots, half inside the second: too little to save the box
    // by its share of the page alone.
    let first: String = (0..10).map(para).collect();
    let rest: String = (10..20).map(para).collect();
    let html = format!(
        "<html><body><nav><a href=/>Home</a></nav><article>{first}\
         <div class=ad-container><ins class=adsbygoogle></ins></div>\
         <div class=ad-container><div class=\"x\" class=\"y\" <a href=/org>Org</a> \
         opens the second half of the story here.{rest}</div></div></article>\
         <footer>Contact</footer></body></html>"
    );
    let c = inline(&html);
    check(
        &c,
        &["Passage 0 ", "Passage 9 ", "Passage 10 ", "Passage 19 "],
        &["Contact"],
    );
}

#[test]
fn an_accordions_folds_are_content() {
    let folds: String = (0..3)
        .map(|i| {
            format!(
                "<li class=\"block-accordion_drawer\"><h2>Fold {i}</h2>{}</li>",
                para(10 + i)
            )
        })
        .collect();
    let html = format!(
        "<html><body><div class=\"drawer\"><a href=/a>Menu one</a> <a href=/b>Menu two</a> \
         <p>The off-canvas menu has a long line of text of its own, which is no part of the \
         story and must go with the drawer.</p></div><article>{}{}{}\
         <ul class=\"accordion\">{folds}</ul></article></body></html>",
        para(0),
        para(1),
        para(2),
    );
    let c = inline(&html);
    check(
        &c,
        &["Passage 0 ", "Fold 1", "Passage 11 ", "Passage 12 "],
        &["off-canvas menu"],
    );
}

#[test]
fn a_box_named_as_the_content_wins_over_teasers_beside_it() {
    let teasers: String = (0..6)
        .map(|i| {
            format!(
                "<li><a href=/s{i}>Other story {i}</a> <span>CITY: An excerpt of another story \
                 that runs on for a while and then stops in the middle of a sentence, as \
                 teasers do...</span></li>"
            )
        })
        .collect();
    let body: String = (0..40).map(para).collect();
    let html = format!(
        "<html><head><script type=\"application/ld+json\">{{\"@type\": \"NewsArticle\"}}\
         </script></head><body><div class=\"main-content-left\"><div class=\"breaking\"><b>Breaking</b>\
         <ul>{teasers}</ul></div><div class=\"main-article-content\"><h2>The story</h2>{body}\
         </div></div></body></html>"
    );
    let c = inline(&html);
    check(
        &c,
        &["Passage 0 ", "Passage 39 "],
        &["Other story", "An excerpt"],
    );
}

fn at(url: &str, html: &str) -> Content {
    extract(
        html,
        Some(&Url::parse(url).expect("url")),
        Options::default(),
    )
}

/// Comments carry schema.org's `itemprop="text"` as posts do (Stack Exchange marks up
/// its comments so); that does not make them the page's main box.
#[test]
fn comments_marked_up_like_posts_are_dropped() {
    let comment = |n: usize| {
        format!(
            "<li itemprop=\"comment\" itemscope itemtype=\"https://schema.org/Comment\" \
             class=\"comment\"><div class=\"comment-body\"><span itemprop=\"text\">Remark {n} \
             says the question could be clearer about what was tried before, and asks for \
             the exact numbers that went into the recipe.</span> <span>user{n}</span></div></li>"
        )
    };
    let html = format!(
        "<html><body itemscope itemtype=\"https://schema.org/QAPage\"><div id=\"mainbar\">\
         <div class=\"question\" itemprop=\"mainEntity\" itemscope \
         itemtype=\"https://schema.org/Question\"><div itemprop=\"text\"><p>Is there any general \
         rule for leaving an ingredient out of a recipe, or for knowing when a substitution \
         will not work at all?</p></div><span class=\"d-none\" itemprop=\"commentCount\">\
         Counted remarks</span><ul class=\"comments-list\">{}{}</ul></div>\
         <div class=\"answer\" itemscope itemtype=\"https://schema.org/Answer\">\
         <div itemprop=\"text\"><p>There is no such rule, but you can approach it in a \
         strategic way: know why the ingredient is in the recipe before you replace it, \
         flavour or texture.</p></div></div></div></body></html>",
        comment(1),
        comment(2)
    );
    let c = at(
        "https://cooking.answers.example/questions/92884/ways",
        &html,
    );
    check(
        &c,
        &["general rule", "no such rule"],
        &["Remark 1", "Remark 2", "Counted remarks"],
    );
}

/// Bootstrap's `d-none` hides a box on every screen, unless a class shows it from some
/// width on.
#[test]
fn a_box_hidden_by_its_class_is_dropped() {
    let html = format!(
        "<html><body><article>{}<p class=\"d-none\">A note for screen readers that no one \
         sees, written out at length as if it were a sentence.</p><p class=\"d-none \
         d-md-block\">Shown on wider screens, this line is part of the story and stays in \
         it.</p>{}</article></body></html>",
        para(0),
        para(1)
    );
    let c = inline(&html);
    check(
        &c,
        &["Passage 0 ", "Shown on wider", "Passage 1 "],
        &["no one sees"],
    );
}

/// A paywall box that holds the rest of the article (sent whole, hidden by script) is the
/// article; one that holds a notice is not.
#[test]
fn the_text_behind_a_paywall_is_kept() {
    // Half the story before the wall: too little to save the box by its share alone.
    let first: String = (0..10).map(para).collect();
    let rest: String = (10..20).map(para).collect();
    let html = format!(
        "<html><body><article>{first}<div class=\"paywall\">{rest}</div>\
         <div class=\"paywall\"><p>Subscribe today to read on, with a trial month for less \
         than a coffee.</p></div></article></body></html>"
    );
    let c = inline(&html);
    check(
        &c,
        &["Passage 0 ", "Passage 10 ", "Passage 19 "],
        &["Subscribe today"],
    );
}

/// A short story beside a long column of category links is a story, not a listing: the
/// categories are a menu, not its items.
#[test]
fn a_short_story_beside_a_long_menu_is_not_a_listing() {
    let cats: String = (0..150)
        .map(|i| format!("<li><a href=\"/c/{i}\">Topic area {i}</a></li>"))
        .collect();
    let html = format!(
        "<html><body><div class=\"row\"><div class=\"col-md-9\"><h1>Break-in at the clinic</h1>\
         {}{}{}</div><div class=\"col-md-3\"><b>Categories</b><ul>{cats}</ul></div></div>\
         </body></html>",
        para(0),
        para(1),
        para(2)
    );
    let c = at("https://city.example/news/break-in", &html);
    check(
        &c,
        &["Passage 0 ", "Passage 2 "],
        &["Topic 1", "Categories"],
    );
}

/// "Related posts" after the text opens teasers for other pages; notes under a "Related"
/// heading with no links are text.
#[test]
fn teasers_under_a_related_heading_close_the_text() {
    let cards: String = (0..4)
        .map(|i| {
            format!(
                "<div class=\"card\"><a href=\"/p/{i}\"><h3>Other post {i}</h3><p>A summary of \
                 another post, long enough to be read as a sentence on its own.</p></a></div>"
            )
        })
        .collect();
    let body: String = (0..8).map(para).collect();
    let html = format!(
        "<html><body><main><h1>The guide</h1>{body}<h2>Recommended&nbsp;posts</h2>{cards}\
         </main></body></html>"
    );
    let c = at("https://blog.example/guide", &html);
    check(
        &c,
        &["Passage 0 ", "Passage 7 "],
        &["Other post", "A summary"],
    );

    let html = format!(
        "<html><body><main><h1>The guide</h1>{body}<h2>Related topics</h2><p>[1] A footnote \
         that qualifies what the guide says about discounts, as long as a paragraph.</p>\
         </main></body></html>"
    );
    let c = at("https://blog.example/guide", &html);
    check(&c, &["Passage 7 ", "[1] A footnote"], &[]);
}

/// A form to fill in is the page's tool, not its text; a page wrapped whole in a form
/// (ASP.NET's) keeps its text.
#[test]
fn a_form_to_fill_in_is_dropped() {
    let body: String = (0..6).map(para).collect();
    let html = format!(
        "<html><body><main>{body}<form class=\"contact\"><h3>Request a quote</h3>\
         <label>First Name</label><input name=first><label>Email address</label>\
         <input type=email name=mail><label>Phone</label><input type=tel name=tel>\
         <label>Street</label><input name=street><label>City</label><input name=city>\
         <label>How did you find us?</label><select><option>Search</option></select>\
         <p>You agree to receive informational messages (appointment reminders, account \
         notifications) from us. Message frequency varies and data rates may apply. For help, \
         reply HELP; we will not share your number with third parties for marketing, and you \
         can opt out at any time by replying STOP to any message.</p>\
         <input type=submit value=Send></form></main></body></html>"
    );
    let c = at("https://movers.example/houston", &html);
    check(
        &c,
        &["Passage 0 ", "Passage 5 "],
        &["First Name", "How did you find us", "replying STOP"],
    );

    let html = format!(
        "<html><body><form id=\"aspnetForm\"><input type=hidden name=state>\
         <input name=q><select><option>All</option></select><main>{body}</main></form>\
         </body></html>"
    );
    let c = at("https://movers.example/houston", &html);
    check(&c, &["Passage 0 ", "Passage 5 "], &[]);
}

/// XenForo's user cell beside each post (name, title, join date, message count) is the
/// post's frame.
#[test]
fn a_forums_user_cell_is_dropped() {
    let post = |n: usize| {
        format!(
            "<article class=\"message message--post\"><div class=\"message-inner\">\
             <div class=\"message-cell message-cell--user\"><section class=\"message-user\">\
             <h4 class=\"message-name\">brewer{n}</h4><h5 class=\"userTitle\">Apprentice</h5>\
             <dl><dt>Joined</dt><dd>Aug 17, 2017</dd><dt>Messages</dt><dd>92{n}</dd></dl>\
             </section></div><div class=\"message-cell message-cell--main\">\
             <div class=\"message-userContent\"><div class=\"bbWrapper\">Reply {n}: mash at \
             sixty-seven degrees for an hour, then sparge slowly; it made a clearer wort for \
             me every time.</div></div></div></div></article>"
        )
    };
    let posts: String = (0..4).map(post).collect();
    let html = format!("<html><body><div class=\"block-body\">{posts}</div></body></html>");
    let c = at(
        "https://brew.example/forum/threads/simple-recipe.16986/",
        &html,
    );
    assert_eq!(c.kind, Some(PageType::Forum));
    check(
        &c,
        &["Reply 0:", "Reply 3:"],
        &["brewer1", "Apprentice", "Aug 17, 2017"],
    );
}

/// A listing whose box is named for the ads placed between its items (`with-ads`,
/// `dynamic-ad-container`) is the listing: an ad slot holds no dozen lines of text.
#[test]
fn a_listing_with_ads_between_its_items_is_kept() {
    let items: String = (0..30)
        .map(|i| {
            // A few items carry a line of running text; most are a date, a name, a place.
            let note = if i % 3 == 0 {
                "<p>Doors open at eight, tickets at the box office.</p>"
            } else {
                ""
            };
            format!(
                "<li class=\"event\"><p>Saturday {i} March</p><p><a href=\"/e/{i}\">Band {i}</a>\
                 </p><p>The Warfield in San Francisco</p>{note}</li>"
            )
        })
        .collect();
    let genres: String = (0..30)
        .map(|i| format!("<li><a href=\"?g={i}\">Genre {i}</a></li>"))
        .collect();
    let html = format!(
        "<html><body><nav><a href=/>Home</a> <a href=/c>Concerts</a></nav><div class=\"primary\">\
         <div class=\"summary\"><h1>Concerts in the Bay Area</h1><p>Find tickets to all live \
         music, concerts, tour dates and festivals in and around the Bay Area, from the big \
         halls of the city to the small clubs across the water, updated every day.</p></div>\
         <div class=\"filter-container\"><h4>Filter by genre</h4><p>Choose a genre, a date or \
         an artist to narrow the list of concerts below to the ones you care about.</p><p>Pick \
         more than one genre to see the concerts of any of them, and clear them all to start \
         over.</p><ul>{genres}</ul></div><div class=\"calendar with-ads\">\
         <ul class=\"listings dynamic-ad-container\">{items}</ul></div></div></body></html>"
    );
    let c = at("https://gigs.example/metro/sf", &html);
    check(
        &c,
        &["Band 1", "Band 29", "Saturday 29 March", "The Warfield"],
        &["Filter by genre", "narrow the list", "Genre 3"],
    );
}

/// A copy of a post kept as structured data in a box the site hides (`class="hidden"`
/// around microdata) is not shown; a `hidden` fold without microdata (script opens it) is
/// the page's.
#[test]
fn a_hidden_structured_data_copy_is_dropped() {
    let post = |n: usize, text: &str| {
        format!(
            "<div class=\"post\"><span class=\"post-position\">#{n}</span><div class=\"post-body\">\
             {text}</div></div>"
        )
    };
    let first = "My name is Doug and I like small projects with a scroll saw, a sander and a \
                 Dremel; I want to make something new this summer.";
    let html = format!(
        "<html><body><div class=\"thread\" itemscope itemtype=\"https://schema.org/DiscussionForumPosting\">\
         <div class=\"hidden\"><div itemprop=\"author\" itemscope itemtype=\"https://schema.org/Person\">\
         <span itemprop=\"name\">budkitc</span></div><article itemprop=\"text\">{first}</article>\
         </div>{}{}<div class=\"hidden\">More of the thread's replies sit in this fold, which a \
         button opens, and they are part of the page.</div></div></body></html>",
        post(1, first),
        post(
            2,
            "Welcome to the forum, Doug! We do like photos, so show us your shop and your \
             projects whenever you are ready."
        )
    );
    let c = at(
        "https://wood.example/threads/new-to-the-forum.236298/",
        &html,
    );
    check(
        &c,
        &["Welcome to the forum", "More of the thread"],
        &["budkitc"],
    );
    assert_eq!(c.text.matches("My name is Doug").count(), 1, "{}", c.text);
}

/// On a small page the sidebar and the footer may hold more text than the post; what
/// names itself a sidebar goes all the same.
#[test]
fn a_small_pages_sidebar_goes() {
    let html = "<html><body><div class=\"p-body\"><div class=\"thread\"><div class=\"post\">\
        Any updated recommendations for a bike fitting? Preferably in the Central South \
        Jersey area. Thanks.</div><div class=\"post\">Interested to hear about bike fitters \
        around Jersey City as well, if anyone has one.</div></div><div class=\"p-body-sidebar\">\
        <p>A forum community dedicated to road bike owners and enthusiasts. Come join the \
        discussion about bike parts, components, deals, performance, modifications, \
        classifieds, troubleshooting, maintenance, racing, training and nutrition, and much \
        more besides, with riders from every part of the country and from abroad.</p><p>Our \
        members have ridden every road from the coast to the mountains and are glad to share \
        what they learned about fitting, wheels and saddles along the way.</p></div></div>\
        <div class=\"p-footer\"><p>All content is provided by its members and published under \
        the terms of the community's guidelines; the operators take no responsibility for it, \
        and every trademark belongs to its owner, as the terms of service say in full detail.</p>\
        </div></body></html>";
    let c = at(
        "https://bikes.example/threads/bike-fitting-recommendations.352992/",
        html,
    );
    check(
        &c,
        &["bike fitting", "Jersey City"],
        &["forum community dedicated", "every road"],
    );
}

/// An article that is a top ten: its lists of names, after a short introduction, are its
/// text, not the frame that trailing short lines usually are.
#[test]
fn an_articles_lists_are_kept() {
    let list = |who: &str| -> String {
        let items: String = (0..10)
            .map(|i| format!("<li><p>{who} pick number {i}</p></li>"))
            .collect();
        format!(
            "<div class=\"block html-block\"><div class=\"block-content\"><div class=\"html-content\">\
             <p>{who}'s top ten:</p><ol>{items}</ol></div></div></div>"
        )
    };
    let html = format!(
        "<html><head><script type=\"application/ld+json\">{{\"@type\": \"BlogPosting\"}}</script>\
         </head><body><main class=\"page\"><article class=\"entry\"><div class=\"entry-content\">\
         <div class=\"block html-block\"><div class=\"block-content\"><div class=\"html-content\">\
         <h2>There was something for everyone in our top ten lists this year.</h2><p>It was a \
         solid year for podcasts, with investigative series and light fare. But which titles \
         stood out? Our writers share the ten they liked best.</p></div></div></div>{}{}</div>\
         </article></main></body></html>",
        list("Lara"),
        list("Sam")
    );
    let c = at("https://crime.example/listen/best-podcasts", &html);
    check(
        &c,
        &["solid year", "Lara pick number 0", "Sam pick number 9"],
        &[],
    );
}

/// A function's signature is code, never the frame, however short (rustdoc's item pages).
#[test]
fn a_functions_signature_is_kept() {
    let html = "<html><body class=\"rustdoc fn\"><nav class=\"sidebar\"><a href=\"index.html\">\
        core::arch</a></nav><main><section id=\"main-content\" class=\"content\">\
        <div class=\"main-heading\"><h1>Function <span>s_getpc</span></h1></div>\
        <pre class=\"rust item-decl\"><code>pub fn s_getpc() -&gt; i64</code></pre>\
        <details class=\"toggle top-doc\" open><summary class=\"hideme\"><span>Expand \
        description</span></summary><div class=\"docblock\"><p>Returns the address of the \
        next instruction, which position-independent code and long jumps are built \
        on.</p></div></details></section></main></body></html>";
    let c = at(
        "http://127.0.0.1:8000/core/arch/amdgpu/fn.s_getpc.html",
        html,
    );
    check(
        &c,
        &["pub fn s_getpc() -> i64", "position-independent"],
        &[],
    );
}
