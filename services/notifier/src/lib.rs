//! The notifier stage: a re-crawl's change events to the crawl's webhook.
//!
//! The embedded runtime hands events to [`webhook::run`] through a channel as the writer
//! makes them. In the cluster the indexer publishes them on the `changed` hop
//! (`trawl.changed`) before it acks the page, and [`serve`] delivers them: an event is acked
//! once the receiver answered 2xx, put back with a growing delay after a failure (the same
//! event id on every try, so receivers dedupe), and moved to the dead-letter stream after
//! `webhook_tries` tries or a 410 (where `trawl dlq list notifier` shows it and
//! `trawl dlq replay` sends it again).

pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use trawl_core::CoreError;
use trawl_core::change::ChangeEvent;
use trawl_core::counters::Counter;
use trawl_core::pipeline::{Shutdown, StageContext, StageResult};
use trawl_core::queue::Queue;
use trawl_core::state::State;

/// Where and how the cluster's notifier delivers.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub secret: Option<Vec<u8>>,
    pub tries: u32,
    pub backoff: Duration,
}

impl Endpoint {
    /// The crawl's webhook, signed with this process's `secret` (the `webhook_secret`
    /// setting); `None` without a webhook.
    pub fn from_spec(
        s: &trawl_core::settings::CrawlSettings,
        secret: Option<&str>,
    ) -> Option<Endpoint> {
        let url = s.webhook_url.clone()?;
        if secret.is_none() {
            tracing::warn!(
                "webhook_secret (TRAWL_WEBHOOK_SECRET) is not set: webhook deliveries are not \
                 signed"
            );
        }
        Some(Endpoint {
            url,
            secret: secret.map(webhook::WebhookConfig::secret_from),
            tries: s.webhook_tries.max(1),
            backoff: Duration::from_millis(s.webhook_backoff_ms),
        })
    }
}

/// The notifier as one stage of a cluster crawl.
pub async fn serve(ctx: StageContext) -> StageResult {
    let Some(endpoint) = Endpoint::from_spec(&ctx.spec.settings, ctx.process.webhook_secret())
    else {
        tracing::info!(
            "the crawl has no webhook (trawl submit --webhook URL): its change events stay \
             on the changed hop"
        );
        ctx.set_ready();
        let mut stop = ctx.shutdown.clone();
        stop.run_until(std::future::pending::<()>()).await;
        return Ok(());
    };
    tracing::info!(url = %endpoint.url, "delivering change events");
    ctx.set_ready();
    let crawl = ctx.spec.crawl.clone();
    Ok(run_deliveries(endpoint, &crawl, ctx.hops.changed, ctx.state, ctx.shutdown).await?)
}

/// Delivers `crawl`'s events until the stop, one at a time in the order they come (one
/// pulled at a time, so none waits unacked behind slow deliveries). An event of another
/// crawl on the hop (left by a crawl that ran without a notifier) goes to the dead letters
/// instead of this crawl's webhook.
pub async fn run_deliveries(
    endpoint: Endpoint,
    crawl: &str,
    events: Arc<dyn Queue<ChangeEvent>>,
    state: Arc<dyn State>,
    mut stop: Shutdown,
) -> Result<(), CoreError> {
    let client = webhook::client();
    // A 410 says the endpoint is gone for good: later events are not sent to it.
    let mut gone = false;
    while let Some(batch) = stop.run_until(events.pull(1, Duration::from_secs(1))).await {
        for d in batch? {
            if d.msg.crawl != crawl {
                tracing::warn!(id = %d.msg.id, of = %d.msg.crawl, "an event of another crawl: moved to the dead letters");
                events.term(d.id).await?;
                continue;
            }
            if gone {
                events.term(d.id).await?;
                state.count(&Counter::WebhookDeadLettered, 1).await?;
                continue;
            }
            let body = serde_json::to_vec(&d.msg)
                .map_err(|e| CoreError::Backend(format!("encoding event {}: {e}", d.msg.id)))?;
            state.count(&Counter::WebhookAttempts, 1).await?;
            let secret = endpoint.secret.as_deref();
            match webhook::post(&client, &endpoint.url, secret, &d.msg.id, &body).await {
                Ok(()) => {
                    events.ack(d.id).await?;
                    state.count(&Counter::WebhookDelivered, 1).await?;
                }
                Err(status) if status == Some(410) || d.attempt >= endpoint.tries => {
                    if status == Some(410) {
                        tracing::warn!(url = %endpoint.url, "the webhook answered 410: no more deliveries");
                        gone = true;
                    }
                    tracing::warn!(id = %d.msg.id, tries = d.attempt, "event moved to the dead letters");
                    events.term(d.id).await?;
                    state.count(&Counter::WebhookDeadLettered, 1).await?;
                }
                Err(_) => {
                    events
                        .nak(d.id, webhook::backoff(endpoint.backoff, d.attempt))
                        .await?;
                }
            }
        }
    }
    Ok(())
}
