//! The requests a rendered page makes, answered by trawl instead of the browser's network:
//! each is checked (resource type, budget, scope) and then made by the crawl's fetcher,
//! which checks the address policy and robots.txt on every hop, archives the exchange and
//! counts the request. Requests to one host are spaced by the crawl's delay, as the
//! fetchers space theirs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::network::ResourceType;
use tokio::sync::Mutex;
use trawl_core::scope::Scope;
use trawl_core::urlnorm::host_key;
use trawl_core::{FetchJob, Fetched, MESSAGE_VERSION, UrlKind};
use trawl_fetcher::{Fetcher, Outcome};
use url::Url;

/// What the page gets for one request.
pub(crate) enum Answer {
    /// A response to hand the browser.
    Respond {
        status: u16,
        content_type: Option<String>,
        body: Vec<u8>,
    },
    /// Refused, and why (the key of `RenderInfo.blocked`).
    Block(&'static str),
}

/// Whether the browser may load a resource of this type at all. Styles, images, fonts and
/// media change how a page looks, not what it says, and are most of its bytes; a page
/// whose picture is asked for (`draws`) gets its styles and fonts (images stay off in the
/// browser).
pub(crate) fn wanted(ty: &ResourceType, draws: bool) -> bool {
    matches!(
        ty,
        ResourceType::Document | ResourceType::Script | ResourceType::Xhr | ResourceType::Fetch
    ) || (draws && matches!(ty, ResourceType::Stylesheet | ResourceType::Font))
}

/// Per-host spacing of subrequests, shared by every page this renderer has open.
#[derive(Default)]
pub(crate) struct HostGate {
    hosts: std::sync::Mutex<HashMap<String, Arc<Mutex<Option<Instant>>>>>,
}

impl HostGate {
    fn slot(&self, host: &str) -> Arc<Mutex<Option<Instant>>> {
        let mut m = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() > 4096 {
            // Idle hosts' clocks are dropped: a host no page holds has nothing to wait for.
            m.retain(|_, v| Arc::strong_count(v) > 1);
        }
        m.entry(host.to_string()).or_default().clone()
    }
}

/// What a renderer needs to answer subrequests.
pub(crate) struct Subrequests {
    pub(crate) fetcher: Arc<Fetcher>,
    pub(crate) scope: Scope,
    pub(crate) offsite: bool,
    pub(crate) gap: Duration,
    pub(crate) gate: HostGate,
}

impl Subrequests {
    /// Answers one request of a page of `crawl` (`depth` is the page's).
    pub(crate) async fn answer(
        &self,
        crawl: &str,
        depth: u32,
        method: &str,
        raw_url: &str,
    ) -> Answer {
        let Ok(url) = Url::parse(raw_url) else {
            return Answer::Block("invalid_url");
        };
        if !matches!(url.scheme(), "http" | "https") {
            return Answer::Block("scheme");
        }
        // The fetcher sends GETs only: a page's form posts and beacons are not the crawl's.
        if !method.eq_ignore_ascii_case("GET") {
            return Answer::Block("method");
        }
        if !self.offsite && !self.scope.contains(&url) {
            return Answer::Block("out_of_scope");
        }
        let host = host_key(&url);
        let job = FetchJob {
            v: MESSAGE_VERSION,
            crawl: crawl.to_string(),
            url: url.to_string(),
            host: host.clone(),
            depth,
            kind: UrlKind::Page,
            ..FetchJob::default()
        };
        let slot = self.gate.slot(&host);
        let mut last = slot.lock().await;
        if let Some(t) = *last {
            let ready = t + self.gap;
            let now = Instant::now();
            if ready > now {
                tokio::time::sleep(ready - now).await;
            }
        }
        // Set before too: an answer aborted mid-fetch still spaces the next request.
        *last = Some(Instant::now());
        let out = self.fetcher.fetch(&job).await;
        *last = Some(Instant::now());
        drop(last);
        match out {
            Ok(o) => match o.outcome {
                Outcome::Done(f) => answer_of(*f),
                // 429/503 or robots.txt unreachable: the page does without it.
                Outcome::Retry { status, .. } => Answer::Respond {
                    status,
                    content_type: None,
                    body: Vec::new(),
                },
                Outcome::Wait { .. } => Answer::Block("robots"),
            },
            Err(e) => {
                tracing::warn!(url = %url, error = %e, "subrequest failed");
                Answer::Block("failed")
            }
        }
    }
}

fn answer_of(f: Fetched) -> Answer {
    if let Some(e) = &f.error {
        match e.kind.as_str() {
            "robots_disallowed" => return Answer::Block("robots"),
            "private_address" => return Answer::Block("private_address"),
            "redirect_out_of_scope" => return Answer::Block("out_of_scope"),
            "body_too_large" if f.status != 0 => {}
            _ if f.status == 0 => return Answer::Block("failed"),
            _ => {}
        }
    }
    // HTML comes back decoded to UTF-8, and is labelled so.
    let content_type = match (&f.charset, f.content_type) {
        (Some(_), Some(ct)) => Some(format!("{}; charset=utf-8", trawl_body::mime_type(&ct))),
        (_, ct) => ct,
    };
    Answer::Respond {
        status: f.status,
        content_type,
        body: f.body,
    }
}

/// Adds one to `why` in a page's blocked counts.
pub(crate) fn count(blocked: &mut BTreeMap<String, u32>, why: &str) {
    *blocked.entry(why.to_string()).or_default() += 1;
}
