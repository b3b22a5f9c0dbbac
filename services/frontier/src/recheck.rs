//! A re-crawl's end-of-crawl check, for the cluster: once the crawl has no work left, the
//! earlier crawl's URLs this crawl has not seen are offered to the frontier once (no page
//! links to them any more; they may still be there, changed, or gone). The embedded
//! runtime does the same from its supervisor, which knows when its crawl is done.

use std::sync::Arc;
use std::time::Duration;

use trawl_core::counters::Counter;
use trawl_core::history::{History, Unlinked};
use trawl_core::pipeline::{Backlog, Shutdown};
use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_core::{CoreError, Discovered, DiscoveredUrl, MESSAGE_VERSION};

/// Quiet checks in a row before the crawl counts as done.
pub const QUIET_CHECKS: u32 = 3;

pub struct Recheck {
    pub crawl: String,
    pub history: Arc<dyn History>,
    pub unlinked: Arc<dyn Unlinked>,
    pub backlog: Arc<dyn Backlog>,
    /// Time between checks.
    pub every: Duration,
}

impl Recheck {
    /// Nothing anywhere: no message on a crawl hop (waiting or unacknowledged), no URL
    /// queued, no host slot held, and the seeds taken (a page written, or a URL admitted or
    /// turned away: a crawl whose seeds have not been published yet is not done).
    async fn is_done(&self, state: &dyn State) -> Result<bool, CoreError> {
        let pages = Counter::Pages.key();
        let started =
            state.counters().await?.iter().any(|(k, v)| {
                *v > 0 && (k.as_str() == pages.as_ref() || k.starts_with("frontier."))
            });
        Ok(started
            && self.backlog.pending().await? == 0
            && state.queued().await? == 0
            && state.claims().await? == 0)
    }

    /// Waits for the crawl to be done, then runs the check unless it has run. Two
    /// replicas running it at once offer the same URLs twice: the seen-set admits each once.
    pub async fn run(
        self,
        state: Arc<dyn State>,
        discovered: Arc<dyn Queue<Discovered>>,
        mut stop: Shutdown,
    ) -> Result<(), CoreError> {
        if self.unlinked.checked().await? {
            return Ok(());
        }
        let mut quiet = 0;
        while quiet < QUIET_CHECKS {
            if stop
                .run_until(tokio::time::sleep(self.every))
                .await
                .is_none()
            {
                return Ok(());
            }
            quiet = match self.is_done(&*state).await {
                Ok(true) => quiet + 1,
                Ok(false) => 0,
                // A backend that cannot answer is "not done".
                Err(e) => {
                    tracing::warn!("end-of-crawl check: cannot tell whether work is left: {e}");
                    0
                }
            };
        }
        offer_unreached(
            &self.crawl,
            &*self.history,
            &*self.unlinked,
            &*state,
            &*discovered,
        )
        .await?;
        self.unlinked.mark_checked().await
    }
}

/// Offers the earlier crawl's URLs this crawl has not seen to the frontier, each marked
/// unlinked first (the indexer may see the page before the batch is acked); returns how
/// many. Both runtimes' end-of-crawl checks end here.
pub async fn offer_unreached(
    crawl: &str,
    history: &dyn History,
    unlinked: &dyn Unlinked,
    state: &dyn State,
    discovered: &dyn Queue<Discovered>,
) -> Result<usize, CoreError> {
    let mut offered = 0;
    let mut cursor = None;
    loop {
        let page = history.known(cursor).await?;
        let keys: Vec<String> = page.urls.iter().map(|(u, _, _)| u.clone()).collect();
        let seen = state.seen_contains_many(&keys).await?;
        let missing: Vec<DiscoveredUrl> = page
            .urls
            .into_iter()
            .zip(seen)
            .filter(|(_, seen)| !seen)
            .map(|((url, depth, kind), _)| DiscoveredUrl {
                url,
                depth,
                kind,
                lastmod: None,
            })
            .collect();
        offered += missing.len();
        for chunk in missing.chunks(1000) {
            let urls: Vec<String> = chunk.iter().map(|u| u.url.clone()).collect();
            unlinked.add(&urls).await?;
            discovered
                .publish(Discovered {
                    v: MESSAGE_VERSION,
                    crawl: crawl.to_string(),
                    source: None,
                    urls: chunk.to_vec(),
                })
                .await?;
        }
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    if offered > 0 {
        tracing::info!(
            crawl,
            urls = offered,
            "checking the earlier crawl's URLs this crawl did not reach"
        );
    }
    Ok(offered)
}

#[cfg(test)]
mod tests {
    use trawl_core::history::{KnownPage, MemoryUnlinked, Prior};
    use trawl_core::queue::MemoryQueue;
    use trawl_core::state::{MemoryState, WorkTracker};
    use trawl_core::{PageRecord, UrlKind};

    use super::*;

    /// An earlier crawl of `pages` pages of three URLs each, the page after `n` named `n+1`.
    struct Pages(usize);

    fn url(page: usize, i: usize) -> String {
        format!("http://a.test/{page}/{i}")
    }

    #[async_trait::async_trait]
    impl History for Pages {
        async fn prior(&self, _: &str) -> trawl_core::CoreResult<Option<Prior>> {
            Ok(None)
        }
        async fn previous(&self, _: &str) -> trawl_core::CoreResult<Option<PageRecord>> {
            Ok(None)
        }
        async fn known(&self, cursor: Option<String>) -> trawl_core::CoreResult<KnownPage> {
            let page: usize = cursor.map_or(0, |c| c.parse().unwrap());
            Ok(KnownPage {
                urls: (0..3).map(|i| (url(page, i), 1, UrlKind::Page)).collect(),
                next: (page + 1 < self.0).then(|| (page + 1).to_string()),
            })
        }
    }

    #[tokio::test]
    async fn every_page_of_the_earlier_crawl_is_checked_and_seen_urls_are_not_offered() {
        let state = MemoryState::new(100, 1, WorkTracker::default());
        for seen in [url(0, 1), url(2, 0), url(2, 2)] {
            state.seen_add(&seen).await.unwrap();
        }
        let unlinked = MemoryUnlinked::default();
        let queue = MemoryQueue::<Discovered>::new(100, WorkTracker::default());
        let n = offer_unreached("c", &Pages(3), &unlinked, &state, &queue)
            .await
            .unwrap();
        assert_eq!(n, 6);
        let mut offered: Vec<String> = Vec::new();
        for d in queue.pull(100, Duration::from_millis(10)).await.unwrap() {
            offered.extend(d.msg.urls.into_iter().map(|u| u.url));
        }
        let want = [
            url(0, 0),
            url(0, 2),
            url(1, 0),
            url(1, 1),
            url(1, 2),
            url(2, 1),
        ];
        assert_eq!(offered, want);
        for u in &want {
            assert!(unlinked.contains(u).await.unwrap(), "{u} marked unlinked");
        }
        assert!(!unlinked.contains(&url(0, 1)).await.unwrap());
    }
}
