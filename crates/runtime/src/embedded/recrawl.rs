//! A re-crawl's parts: the comparison with the earlier crawl, its webhook deliveries and
//! the end-of-crawl check of the URLs this crawl did not reach.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use trawl_core::history::{MemoryUnlinked, Unlinked};
use trawl_indexer::changes::{Recrawl, Schedule};
use trawl_indexer::{JsonlSink, RecrawlOutputs};
use trawl_store::history::StoreHistory;

use super::plan::Plan;
use crate::crawl_dir::Start;
use crate::plan::CrawlPlan;

/// The earlier crawl's URLs this crawl did not reach are fetched once the crawl is done:
/// still there (not linked any more), changed, or removed.
pub(super) struct Recheck {
    pub(super) history: Arc<StoreHistory>,
    pub(super) unlinked: Arc<dyn Unlinked>,
}

/// A re-crawl's writer outputs, its webhook notifier and its end-of-crawl check.
type RecrawlParts = (
    Option<Arc<RecrawlOutputs>>,
    Option<JoinHandle<trawl_notifier::webhook::Deliveries>>,
    Option<Recheck>,
);

pub(super) fn recrawl_parts(
    opts: &CrawlPlan,
    plan: &Plan,
    changes: Option<JsonlSink>,
) -> anyhow::Result<RecrawlParts> {
    let (Some((_, history)), Some(changes)) = (&plan.since, changes) else {
        return Ok((None, None, None));
    };
    let s = &plan.spec.settings;
    let (notify, webhook) = match &s.webhook_url {
        Some(url) => {
            let secret = opts.webhook_secret.clone().filter(|s| !s.is_empty());
            if secret.is_none() {
                tracing::warn!(
                    "webhook_secret (TRAWL_WEBHOOK_SECRET) is not set: webhook deliveries are \
                     not signed"
                );
            }
            let cfg = trawl_notifier::webhook::WebhookConfig {
                url: url.clone(),
                secret: secret
                    .as_deref()
                    .map(trawl_notifier::webhook::WebhookConfig::secret_from),
                tries: s.webhook_tries.max(1),
                backoff: Duration::from_millis(s.webhook_backoff_ms),
                wait_after: Duration::from_secs(s.webhook_wait_s),
                undelivered: opts.out.join("changes-undelivered.jsonl"),
                delivered: opts.out.join("changes-delivered.txt"),
                changes: opts.out.join("changes.jsonl"),
                queue_bytes: trawl_notifier::webhook::QUEUE_BYTES,
            };
            let (tx, rx) = trawl_notifier::webhook::channel();
            // A kill loses the deliveries in flight: what the earlier runs neither
            // delivered nor gave up on is read back from changes.jsonl once the crawl is
            // done (the same ids, so receivers dedupe).
            let resumed = matches!(plan.start, Start::Resume(_));
            (
                Some(tx),
                Some(tokio::spawn(trawl_notifier::webhook::run(cfg, rx, resumed))),
            )
        }
        None => (None, None),
    };
    let unlinked: Arc<dyn Unlinked> = Arc::new(MemoryUnlinked::default());
    let outputs = RecrawlOutputs {
        compare: Recrawl {
            history: history.clone(),
            crawl: plan.spec.crawl.clone(),
            since: history.crawl.clone(),
            schedule: Schedule::from_settings(s),
            unlinked: unlinked.clone(),
        },
        changes: Mutex::new(changes),
        notify,
        publish: None,
    };
    let recheck = Recheck {
        history: history.clone(),
        unlinked,
    };
    Ok((Some(Arc::new(outputs)), webhook, Some(recheck)))
}
