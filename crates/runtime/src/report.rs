//! `report.json`: what a crawl did, from the counters every stage keeps in shared state.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use trawl_core::counters::{Counter, Counters};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RedirectStats {
    /// Pages reached through at least one redirect.
    pub pages_redirected: i64,
    /// Redirect hops followed in total.
    pub hops: i64,
    pub loops: i64,
    pub too_many: i64,
    pub out_of_scope: i64,
    /// Chains that ended at a URL the crawl fetches anyway (not fetched twice).
    pub to_already_seen: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DuplicateStats {
    /// Same normalized text as a page kept earlier.
    pub exact: i64,
    /// Within the SimHash distance of a page kept earlier.
    pub near: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrontierStats {
    pub admitted: i64,
    pub out_of_scope: i64,
    pub too_deep: i64,
    pub invalid_url: i64,
    /// URLs robots.txt disallows, turned away before admission (they use no budget).
    #[serde(default)]
    pub robots_blocked: i64,
    /// Links past a page's cap of 50,000, found but not followed.
    #[serde(default)]
    pub links_dropped: i64,
    pub traps: BTreeMap<String, i64>,
    pub host_budget_exceeded: i64,
    pub max_pages_reached: i64,
    pub evicted: i64,
    pub rejected_full: i64,
    pub left_queued: usize,
}

/// Pages sent to the browser (`--render`), and how it went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RenderStats {
    /// Pages the render rule picked, by its reason.
    pub wanted: BTreeMap<String, i64>,
    /// Pages whose browser DOM was extracted.
    pub rendered: i64,
    pub timeouts: i64,
    pub failed: i64,
    /// Picked while no browser was there: their fetched version was kept.
    pub unavailable: i64,
    /// Subrequests made through the fetcher, and those refused by why.
    pub requests: i64,
    pub blocked: BTreeMap<String, i64>,
    pub browser_restarts: i64,
    /// Milliseconds of rendering, summed over pages.
    pub ms: i64,
}

impl RenderStats {
    fn of(c: &Counters) -> Option<Self> {
        let wanted = c.render_wanted();
        if wanted.is_empty() {
            return None;
        }
        Some(RenderStats {
            wanted,
            rendered: c.get(&Counter::RenderRendered),
            timeouts: c.get(&Counter::RenderTimeouts),
            failed: c.get(&Counter::RenderFailed),
            unavailable: c.get(&Counter::RenderUnavailable),
            requests: c.get(&Counter::RenderRequests),
            blocked: c.render_blocked(),
            browser_restarts: c.get(&Counter::RenderRestarts),
            ms: c.get(&Counter::RenderMs),
        })
    }
}

/// Pages the refiner wrote to `refined.jsonl` (`--refine`), and how it went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefineStats {
    /// Rows written.
    pub pages: i64,
    /// Rows by the program's decision (`none`: the executor found no decision).
    pub decisions: BTreeMap<String, i64>,
    /// Rows of pages not refined, by why.
    pub skipped: BTreeMap<String, i64>,
    /// Edit programs that fell back to their extract-only text.
    pub fallbacks: i64,
    /// Times a page waited for a failing model backend.
    pub retries: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// Milliseconds of refining, summed over pages.
    pub ms: i64,
}

impl RefineStats {
    fn of(c: &Counters) -> Option<Self> {
        let pages = c.get(&Counter::RefinePages);
        let retries = c.get(&Counter::RefineRetries);
        if pages == 0 && retries == 0 {
            return None;
        }
        Some(RefineStats {
            pages,
            decisions: c.refine_decisions(),
            skipped: c.refine_skipped(),
            fallbacks: c.get(&Counter::RefineFallbacks),
            retries,
            prompt_tokens: c.get(&Counter::RefinePromptTokens),
            completion_tokens: c.get(&Counter::RefineCompletionTokens),
            ms: c.get(&Counter::RefineMs),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CrawlReport {
    pub crawl: String,
    pub seeds: Vec<String>,
    pub started_at: String,
    /// The whole run: the crawl, then the index finishing what the crawl wrote.
    pub elapsed_s: f64,
    /// The crawl alone: until its last page was written to pages.jsonl.
    #[serde(default)]
    pub crawl_s: f64,
    /// Indexing after the crawl ended (embedding what was left, building the indexes);
    /// the index works during the crawl too, so this is what it added to the run.
    #[serde(default)]
    pub index_s: f64,
    /// Lines in pages.jsonl.
    pub pages: i64,
    /// Pages a second of the crawl's own time (`crawl_s`), not counting the index's.
    pub pages_per_s: f64,
    pub pages_with_text: i64,
    pub duplicates: DuplicateStats,
    pub status: BTreeMap<String, i64>,
    /// URLs robots.txt kept the crawl from: turned away at admission, plus pages (and
    /// redirect targets) the fetcher found disallowed, which have a line.
    pub robots_blocked: i64,
    pub out_of_scope: i64,
    pub redirects: RedirectStats,
    pub errors: BTreeMap<String, i64>,
    /// Pages by what they say of themselves: robots directives (`noindex`, `nofollow`,
    /// `noarchive`) and uses their site reserves (`search_reserved`, `ai_input_reserved`,
    /// `ai_train_reserved`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy: BTreeMap<String, i64>,
    pub requests: i64,
    pub retries: i64,
    /// Times a page was put back to wait for its host's unreachable robots.txt.
    pub robots_waits: i64,
    /// Retries and robots.txt waits the full frontier could not take back (each recorded
    /// as a failed page, `retry_rejected`).
    pub retries_rejected: i64,
    pub bytes: i64,
    pub frontier: FrontierStats,
    pub warc_files: Vec<PathBuf>,
    pub interrupted: bool,
    /// The search index: pages, chunks, aliases, indexes built (absent with --no-index).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<trawl_index::IndexStats>,
    /// A re-crawl's pages by how they compare with the earlier crawl (`new`, `same`,
    /// `changed`, `removed`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub changes: BTreeMap<String, i64>,
    /// Webhook deliveries of the change events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<trawl_notifier::webhook::Deliveries>,
    /// Present when the render rule sent pages to the browser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<RenderStats>,
    /// Present when the crawl refined pages (`--refine`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine: Option<RefineStats>,
}

/// How long a run took.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// The whole run.
    pub elapsed: Duration,
    /// Until the crawl's last page was written (the index may go on after it).
    pub crawl: Duration,
}

fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

impl CrawlReport {
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        crawl: &str,
        seeds: &[String],
        started_at: chrono::DateTime<chrono::Utc>,
        timing: Timing,
        c: &Counters,
        left_queued: usize,
        warc_files: &[PathBuf],
        interrupted: bool,
    ) -> Self {
        let get = |k: Counter| c.get(&k);
        let errors = c.errors();
        let err = |k: &str| errors.get(k).copied().unwrap_or(0);
        let pages = get(Counter::Pages);
        let secs = timing.crawl.as_secs_f64();
        let out_of_scope = get(Counter::FrontierOutOfScope) + get(Counter::RedirectOutOfScope);
        Self {
            crawl: crawl.to_string(),
            seeds: seeds.to_vec(),
            started_at: started_at.to_rfc3339(),
            elapsed_s: seconds(timing.elapsed),
            crawl_s: seconds(timing.crawl),
            index_s: seconds(timing.elapsed.saturating_sub(timing.crawl)),
            pages,
            pages_per_s: if secs > 0.0 {
                ((pages as f64 / secs) * 10.0).round() / 10.0
            } else {
                0.0
            },
            pages_with_text: get(Counter::PagesWithText),
            duplicates: DuplicateStats {
                exact: get(Counter::DuplicatesExact),
                near: get(Counter::DuplicatesNear),
            },
            status: c.statuses(),
            robots_blocked: get(Counter::RobotsBlocked) + get(Counter::FrontierRobotsBlocked),
            out_of_scope,
            redirects: RedirectStats {
                pages_redirected: get(Counter::PagesRedirected),
                hops: get(Counter::RedirectHops),
                loops: err("redirect_loop"),
                too_many: err("too_many_redirects"),
                out_of_scope: get(Counter::RedirectOutOfScope),
                to_already_seen: get(Counter::RedirectToSeen),
            },
            requests: get(Counter::Requests),
            retries: get(Counter::Retries),
            robots_waits: get(Counter::RobotsWaits),
            retries_rejected: get(Counter::RetriesRejected),
            bytes: get(Counter::WireBytes),
            frontier: FrontierStats {
                admitted: get(Counter::FrontierQueued),
                out_of_scope: get(Counter::FrontierOutOfScope),
                too_deep: get(Counter::FrontierTooDeep),
                invalid_url: get(Counter::FrontierInvalidUrl),
                robots_blocked: get(Counter::FrontierRobotsBlocked),
                links_dropped: get(Counter::LinksDropped),
                traps: c.traps(),
                host_budget_exceeded: get(Counter::FrontierHostBudget),
                max_pages_reached: get(Counter::FrontierMaxPages),
                evicted: get(Counter::FrontierEvicted),
                rejected_full: get(Counter::FrontierRejectedFull),
                left_queued,
            },
            errors,
            policy: c.policies(),
            warc_files: warc_files.to_vec(),
            interrupted,
            index: None,
            changes: c.changes(),
            webhook: None,
            render: RenderStats::of(c),
            refine: RefineStats::of(c),
        }
    }
}

impl CrawlReport {
    /// What `trawl crawl` prints when it ends: the counts, the index, where the outputs are.
    pub fn summary(&self, out: &crate::CrawlOutputs) -> String {
        let mut lines = Vec::new();
        if self.interrupted {
            lines.push("interrupted: the outputs hold what was done before the stop".to_string());
        }
        lines.push(format!(
            "crawled {} pages in {:.1}s ({:.1} pages/s): {} robots-blocked, {} out of scope, {} errors",
            self.pages,
            self.crawl_s,
            self.pages_per_s,
            self.robots_blocked,
            self.out_of_scope,
            self.errors.values().sum::<i64>()
        ));
        if let (Some(ix), Some(dir)) = (&self.index, &out.index) {
            lines.push(ix.summary(&dir.to_string_lossy()));
            lines.push(format!("index: done {:.1}s after the crawl", self.index_s));
        }
        lines.push(format!(
            "outputs: {} , {} , {} WARC file(s) in {}",
            out.pages.display(),
            out.report.display(),
            out.warc_files.len(),
            out.dir.join("warc").display()
        ));
        lines.join("\n")
    }
}
