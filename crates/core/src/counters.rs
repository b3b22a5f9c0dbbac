//! Every counter a crawl keeps in its shared state, as one typed set. The state stores them
//! under string keys ([`Counter::key`]: `fetcher.requests`, `pages.status.2xx`, ...) so
//! that Redis can add to them atomically; the report, `trawl status`, the progress line and
//! `/metrics` read them back through [`Counters`], never by string prefix.

use std::borrow::Cow;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// URLs put in the frontier's queues.
    FrontierQueued,
    FrontierOutOfScope,
    FrontierTooDeep,
    FrontierInvalidUrl,
    /// URLs past their host's `max_pages_per_host`.
    FrontierHostBudget,
    /// URLs past `max_pages`.
    FrontierMaxPages,
    /// Queued URLs evicted to keep the frontier under `max_queued`.
    FrontierEvicted,
    /// URLs turned away by a full frontier.
    FrontierRejectedFull,
    /// URLs counted against `max_pages`.
    FrontierAdmitted,
    /// URLs their host's robots.txt disallows, turned away before admission.
    FrontierRobotsBlocked,
    /// URLs turned away as a spider trap of this kind (`url_too_long`, ...).
    FrontierTrap(String),
    /// Pages admitted for one host: its `max_pages_per_host` budget, not a report figure.
    HostPages(String),
    /// Distinct query strings of one path pattern: the query-variant trap's budget.
    QueryVariants(String),
    RobotsBlocked,
    /// Jobs put back to wait for an unreachable robots.txt.
    RobotsWaits,
    /// Jobs to re-queue (a 429/503 retry, a robots.txt wait) that the full frontier turned
    /// away: recorded as failed pages (`retry_rejected`).
    RetriesRejected,
    /// Jobs whose host claim expired while they waited in the fetch stream: not fetched,
    /// since the expiry put them back in the queue (the cluster).
    ClaimsExpired,
    /// Pages the cluster's indexers were handed again after their line was written (a
    /// replica killed between its write and its ack, a redelivery): acknowledged, not
    /// written or counted twice.
    PagesRepeated,
    /// Redirects that left the crawl's scope.
    RedirectOutOfScope,
    /// 429/503 retries.
    Retries,
    /// HTTP requests sent (robots.txt and redirect hops included).
    Requests,
    /// Milliseconds hosts were held back for politeness after a request, summed.
    PolitenessWaitMs,
    /// Redirect chains that ended at a URL the crawl fetches anyway.
    RedirectToSeen,
    /// Lines written to `pages.jsonl`.
    Pages,
    /// Pages by status class (`2xx`, ..., `none`).
    PagesByStatus(String),
    /// Pages by `error.kind`.
    PagesByError(String),
    /// Re-crawled pages by how they compare with the earlier crawl (`new`, `same`,
    /// `changed`, `removed`).
    PagesByChange(String),
    /// Pages reached through at least one redirect.
    PagesRedirected,
    /// Links found past the per-page cap and not followed, summed.
    LinksDropped,
    /// Redirect hops followed, summed.
    RedirectHops,
    PagesWithText,
    /// Bytes received for pages, summed.
    WireBytes,
    DuplicatesExact,
    DuplicatesNear,
    /// Change events delivered to the webhook by the cluster's notifier (a 2xx).
    WebhookDelivered,
    /// Webhook requests sent by the notifier, retries included.
    WebhookAttempts,
    /// Change events the notifier gave up on (moved to the dead-letter stream).
    WebhookDeadLettered,
    /// Pages the render rule sent to the browser, by the rule's reason.
    RenderWanted(String),
    /// Pages whose browser DOM replaced the fetched body.
    RenderRendered,
    /// Renders cut at the page's time budget (the fetched version kept).
    RenderTimeouts,
    /// Renders that failed otherwise (a crashed or unreachable browser): fetched version kept.
    RenderFailed,
    /// Pages the rule wanted rendered while no browser was there (fetched version kept).
    RenderUnavailable,
    /// Subrequests of rendered pages made through the fetcher.
    RenderRequests,
    /// Subrequests refused, by why (`out_of_scope`, `robots`, `private_address`,
    /// `resource_type`, `budget`, ...).
    RenderBlocked(String),
    /// Browser restarts (a crash, a hang, its memory or page budget).
    RenderRestarts,
    /// Milliseconds spent rendering, summed.
    RenderMs,
    /// Rows the refiner wrote to `refined.jsonl`.
    RefinePages,
    /// Refined pages by the program's decision (`keep`, `edit`, `delete`, `rewrite`).
    RefineDecision(String),
    /// Pages not refined, by why (`too_short`, `too_long`, `backend`, ...).
    RefineSkipped(String),
    /// Programs the executor fell back from (an edit payload that did not parse).
    RefineFallbacks,
    /// Pages whose refinement failed on the model's side and went back to wait for it.
    RefineRetries,
    /// Prompt tokens the model read, summed.
    RefinePromptTokens,
    /// Tokens the model wrote, summed.
    RefineCompletionTokens,
    /// Milliseconds spent refining, summed.
    RefineMs,
    /// Pages by what they say of themselves (`noindex`, `nofollow`, `noarchive`,
    /// `search_reserved`, `ai_input_reserved`, `ai_train_reserved`).
    PagesByPolicy(String),
}

/// The counters without a label, with their keys.
const FIXED: [(Counter, &str); 44] = [
    (Counter::FrontierQueued, "frontier.queued"),
    (Counter::FrontierOutOfScope, "frontier.out_of_scope"),
    (Counter::FrontierTooDeep, "frontier.too_deep"),
    (Counter::FrontierInvalidUrl, "frontier.invalid_url"),
    (Counter::FrontierHostBudget, "frontier.host_budget_exceeded"),
    (Counter::FrontierMaxPages, "frontier.max_pages_reached"),
    (Counter::FrontierEvicted, "frontier.evicted"),
    (Counter::FrontierRejectedFull, "frontier.rejected_full"),
    (Counter::FrontierAdmitted, "frontier.admitted"),
    (Counter::FrontierRobotsBlocked, "frontier.robots_blocked"),
    (Counter::RobotsBlocked, "fetcher.robots_blocked"),
    (Counter::RobotsWaits, "fetcher.robots_waits"),
    (Counter::RetriesRejected, "fetcher.retries_rejected"),
    (Counter::ClaimsExpired, "fetcher.claims_expired"),
    (Counter::PagesRepeated, "indexer.pages_repeated"),
    (Counter::RedirectOutOfScope, "fetcher.redirect_out_of_scope"),
    (Counter::Retries, "fetcher.retries"),
    (Counter::Requests, "fetcher.requests"),
    (Counter::PolitenessWaitMs, "fetcher.politeness_wait_ms"),
    (Counter::RedirectToSeen, "fetcher.redirect_to_seen"),
    (Counter::Pages, "pages.total"),
    (Counter::PagesRedirected, "pages.redirected"),
    (Counter::LinksDropped, "pages.links_dropped"),
    (Counter::RedirectHops, "pages.redirect_hops"),
    (Counter::PagesWithText, "pages.with_text"),
    (Counter::WireBytes, "pages.wire_bytes"),
    (Counter::DuplicatesExact, "pages.duplicate.exact"),
    (Counter::DuplicatesNear, "pages.duplicate.near"),
    (Counter::WebhookDelivered, "notifier.delivered"),
    (Counter::WebhookAttempts, "notifier.attempts"),
    (Counter::WebhookDeadLettered, "notifier.dead_lettered"),
    (Counter::RenderRendered, "render.rendered"),
    (Counter::RenderTimeouts, "render.timeouts"),
    (Counter::RenderFailed, "render.failed"),
    (Counter::RenderUnavailable, "render.unavailable"),
    (Counter::RenderRequests, "render.requests"),
    (Counter::RenderRestarts, "render.browser_restarts"),
    (Counter::RenderMs, "render.ms"),
    (Counter::RefinePages, "refine.pages"),
    (Counter::RefineFallbacks, "refine.fallbacks"),
    (Counter::RefineRetries, "refine.retries"),
    (Counter::RefinePromptTokens, "refine.prompt_tokens"),
    (Counter::RefineCompletionTokens, "refine.completion_tokens"),
    (Counter::RefineMs, "refine.ms"),
];

/// Makes a labelled counter from its label.
type Labelled = fn(String) -> Counter;

/// The labelled families: key prefix and constructor.
const LABELLED: [(&str, Labelled); 11] = [
    ("frontier.trap.", Counter::FrontierTrap),
    ("frontier.host_pages.", Counter::HostPages),
    ("frontier.query_variants.", Counter::QueryVariants),
    ("pages.status.", Counter::PagesByStatus),
    ("pages.error.", Counter::PagesByError),
    ("pages.change.", Counter::PagesByChange),
    ("render.wanted.", Counter::RenderWanted),
    ("render.blocked.", Counter::RenderBlocked),
    ("refine.decision.", Counter::RefineDecision),
    ("refine.skipped.", Counter::RefineSkipped),
    ("pages.policy.", Counter::PagesByPolicy),
];

impl Counter {
    /// The key the state stores it under.
    pub fn key(&self) -> Cow<'static, str> {
        let labelled = |prefix: &str, label: &str| Cow::Owned(format!("{prefix}{label}"));
        match self {
            Counter::FrontierTrap(l) => labelled(LABELLED[0].0, l),
            Counter::HostPages(l) => labelled(LABELLED[1].0, l),
            Counter::QueryVariants(l) => labelled(LABELLED[2].0, l),
            Counter::PagesByStatus(l) => labelled(LABELLED[3].0, l),
            Counter::PagesByError(l) => labelled(LABELLED[4].0, l),
            Counter::PagesByChange(l) => labelled(LABELLED[5].0, l),
            Counter::RenderWanted(l) => labelled(LABELLED[6].0, l),
            Counter::RenderBlocked(l) => labelled(LABELLED[7].0, l),
            Counter::RefineDecision(l) => labelled(LABELLED[8].0, l),
            Counter::RefineSkipped(l) => labelled(LABELLED[9].0, l),
            Counter::PagesByPolicy(l) => labelled(LABELLED[10].0, l),
            fixed => FIXED
                .iter()
                .find(|(c, _)| c == fixed)
                .map_or(Cow::Borrowed("unknown"), |(_, k)| Cow::Borrowed(*k)),
        }
    }

    /// The counter a key names, if any.
    pub fn parse(key: &str) -> Option<Counter> {
        if let Some((c, _)) = FIXED.iter().find(|(_, k)| *k == key) {
            return Some(c.clone());
        }
        LABELLED.iter().find_map(|(prefix, make)| {
            key.strip_prefix(prefix)
                .filter(|l| !l.is_empty())
                .map(|l| make(l.to_string()))
        })
    }

    /// Per-host and per-pattern budgets: as many as there are hosts, so kept out of
    /// reports and metrics.
    pub fn is_budget(&self) -> bool {
        matches!(self, Counter::HostPages(_) | Counter::QueryVariants(_))
    }
}

/// A crawl's counters, read back from the state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters(BTreeMap<Counter, i64>);

impl Counters {
    /// The counters among the state's keys (other keys are ignored).
    pub fn from_map(map: &BTreeMap<String, i64>) -> Self {
        Counters(
            map.iter()
                .filter_map(|(k, v)| Counter::parse(k).map(|c| (c, *v)))
                .collect(),
        )
    }

    pub fn get(&self, c: &Counter) -> i64 {
        self.0.get(c).copied().unwrap_or(0)
    }

    /// Pages by status class.
    pub fn statuses(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::PagesByStatus(l) => Some(l),
            _ => None,
        })
    }

    /// Pages by error kind.
    pub fn errors(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::PagesByError(l) => Some(l),
            _ => None,
        })
    }

    /// Re-crawled pages by how they compare with the earlier crawl.
    pub fn changes(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::PagesByChange(l) => Some(l),
            _ => None,
        })
    }

    /// Pages the render rule picked, by reason.
    pub fn render_wanted(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::RenderWanted(l) => Some(l),
            _ => None,
        })
    }

    /// Rendered pages' subrequests refused, by why.
    pub fn render_blocked(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::RenderBlocked(l) => Some(l),
            _ => None,
        })
    }

    /// Refined pages by decision.
    pub fn refine_decisions(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::RefineDecision(l) => Some(l),
            _ => None,
        })
    }

    /// Pages the refiner did not refine, by why.
    pub fn refine_skipped(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::RefineSkipped(l) => Some(l),
            _ => None,
        })
    }

    /// Pages by the robots directives and usage reservations they carry.
    pub fn policies(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::PagesByPolicy(l) => Some(l),
            _ => None,
        })
    }

    /// URLs turned away as traps, by kind.
    pub fn traps(&self) -> BTreeMap<String, i64> {
        self.family(|c| match c {
            Counter::FrontierTrap(l) => Some(l),
            _ => None,
        })
    }

    /// Every counter that is a crawl figure (no per-host budgets), by key.
    pub fn figures(&self) -> impl Iterator<Item = (Cow<'static, str>, i64)> + '_ {
        self.0
            .iter()
            .filter(|(c, _)| !c.is_budget())
            .map(|(c, v)| (c.key(), *v))
    }

    fn family(&self, label: impl Fn(&Counter) -> Option<&String>) -> BTreeMap<String, i64> {
        self.0
            .iter()
            .filter_map(|(c, v)| label(c).map(|l| (l.clone(), *v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_back_to_their_counter() {
        let mut all: Vec<Counter> = FIXED.iter().map(|(c, _)| c.clone()).collect();
        all.extend(LABELLED.iter().map(|(_, make)| make("x.y".into())));
        for c in all {
            assert_eq!(Counter::parse(&c.key()), Some(c.clone()), "{c:?}");
        }
        assert_eq!(Counter::parse("pages.error."), None);
        assert_eq!(Counter::parse("nonsense"), None);
        let keys: std::collections::HashSet<&str> = FIXED.iter().map(|(_, k)| *k).collect();
        assert_eq!(keys.len(), FIXED.len(), "a key is used twice");
    }

    #[test]
    fn families_and_figures() {
        let map: BTreeMap<String, i64> = [
            ("pages.total", 5),
            ("pages.status.2xx", 4),
            ("pages.status.4xx", 1),
            ("pages.error.timeout", 2),
            ("frontier.trap.url_too_long", 3),
            ("frontier.host_pages.example.org", 9),
            ("something.else", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let c = Counters::from_map(&map);
        assert_eq!(c.get(&Counter::Pages), 5);
        assert_eq!(c.get(&Counter::Requests), 0);
        assert_eq!(c.statuses().len(), 2);
        assert_eq!(c.errors()["timeout"], 2);
        assert_eq!(c.traps()["url_too_long"], 3);
        let figures: Vec<_> = c.figures().map(|(k, _)| k.to_string()).collect();
        assert!(
            !figures.iter().any(|k| k.contains("host_pages")),
            "{figures:?}"
        );
        assert_eq!(figures.len(), 5);
    }
}
