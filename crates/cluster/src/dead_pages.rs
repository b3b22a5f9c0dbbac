//! Dead-lettered pages as records: a page whose fetch job, fetched response or record was
//! dead-lettered (a stage failed on it `max_deliver` times, or the server gave up on it)
//! still ends as a line of its crawl's `pages-*.jsonl`, with `error.kind = dead_lettered`
//! and the hop, reason and deliveries in its message. The dead letters stay in their
//! streams for `trawl dlq`; the indexers read their crawl's (its subject token, see
//! [`crate::jetstream::crawl_token`]) through a durable consumer of their own per crawl
//! and hop, as a [`Queue`] of [`Doc`]s the indexer's writer loop takes like any other.
//! A dead-lettered fetch job's host claim is released here: nobody else would, and its
//! expiry would queue the job again, to be dead-lettered again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::PullConsumer};
use async_trait::async_trait;
use serde_json::Value;
use trawl_core::pipeline::Hop;
use trawl_core::queue::{Delivery, Queue};
use trawl_core::settings::ClusterSettings;
use trawl_core::state::State;
use trawl_core::{CoreError, CoreResult, Doc, FetchFailure, MESSAGE_VERSION, PageRecord, UrlKind};

use crate::jetstream::{
    QueueConfig, crawl_token, dead_letter_stream, dead_letter_subject_of, pulled,
};

/// The hops whose messages are pages: what is dead-lettered on them is a page lost.
pub const PAGE_HOPS: [Hop; 4] = [Hop::Fetch, Hop::Fetched, Hop::Render, Hop::Docs];

fn backend(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("dead pages {what}: {e}"))
}

fn consumer_name(crawl: &str) -> String {
    format!("dead-pages-{}", crawl_token(crawl))
}

/// The dead-lettered pages of one crawl, oldest first per hop.
pub struct DeadPages {
    crawl: String,
    consumers: Vec<(Hop, PullConsumer)>,
    inflight: Mutex<HashMap<u64, jetstream::Message>>,
    next_id: AtomicU64,
    state: Option<Arc<dyn State>>,
}

impl DeadPages {
    /// Opens (or creates) the crawl's consumer on each page hop's dead-letter stream;
    /// with `state` (the crawl's), dead-lettered fetch jobs' claims are released.
    pub async fn connect(
        client: &async_nats::Client,
        cluster: &ClusterSettings,
        crawl: &str,
        state: Option<Arc<dyn State>>,
    ) -> CoreResult<Self> {
        let js = jetstream::new(client.clone());
        let mut consumers = Vec::new();
        for hop in PAGE_HOPS {
            let q = QueueConfig::from_settings(cluster, hop);
            let stream = dead_letter_stream(&js, &q).await?;
            let name = consumer_name(crawl);
            let consumer: PullConsumer = stream
                .get_or_create_consumer(
                    &name,
                    jetstream::consumer::pull::Config {
                        durable_name: Some(name.clone()),
                        ack_policy: jetstream::consumer::AckPolicy::Explicit,
                        ack_wait: q.ack_wait,
                        filter_subject: dead_letter_subject_of(&q, crawl),
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| backend("consumer", e))?;
            consumers.push((hop, consumer));
        }
        Ok(Self {
            crawl: crawl.to_string(),
            consumers,
            inflight: Mutex::default(),
            next_id: AtomicU64::new(1),
            state,
        })
    }

    /// Frees the host slot a dead-lettered fetch job held (by its id: releasing one that
    /// already went is a no-op).
    async fn release_claim(&self, hop: Hop, m: &jetstream::Message) -> CoreResult<()> {
        let (Some(state), Hop::Fetch) = (&self.state, hop) else {
            return Ok(());
        };
        #[derive(serde::Deserialize)]
        struct Held {
            host: String,
            claim: Option<String>,
        }
        let Ok(job) = serde_json::from_slice::<Held>(&m.payload) else {
            return Ok(());
        };
        if let Some(id) = job.claim.as_deref() {
            state.release(&job.host, Some(id), 0).await?;
        }
        Ok(())
    }

    /// Turns one dead letter into its page's record; `None` for one whose URL cannot be
    /// read (the consumer sees only this crawl's letters; the check is kept anyway).
    fn record(&self, hop: Hop, m: &jetstream::Message) -> Option<Doc> {
        let v: Value = serde_json::from_slice(&m.payload).ok()?;
        let crawl = v["crawl"].as_str()?;
        if crawl != self.crawl {
            return None;
        }
        let header = |k: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(k))
                .map(|v| v.as_str().to_string())
                .unwrap_or_default()
        };
        let why = FetchFailure {
            kind: "dead_lettered".into(),
            message: format!(
                "dead-lettered on the {hop} hop: {} after {} deliveries",
                header("Trawl-Reason"),
                header("Trawl-Deliveries")
            ),
        };
        let record = match hop {
            Hop::Docs => serde_json::from_value::<PageRecord>(v["page"].clone()).ok(),
            _ => None,
        };
        let mut page = match record {
            Some(r) => r,
            None => {
                // A record that no longer reads: its URL is enough for its line.
                let job = match hop {
                    Hop::Fetch => &v,
                    Hop::Fetched | Hop::Render => &v["job"],
                    _ => &v["page"],
                };
                let url = job["url"].as_str()?.to_string();
                PageRecord {
                    final_url: v["final_url"].as_str().unwrap_or(&url).to_string(),
                    url,
                    status: v["status"].as_u64().unwrap_or(0) as u16,
                    depth: job["depth"].as_u64().unwrap_or(0) as u32,
                    kind: serde_json::from_value::<UrlKind>(job["kind"].clone())
                        .unwrap_or_default(),
                    fetched_at: chrono::Utc::now()
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    ..PageRecord::default()
                }
            }
        };
        page.error = Some(why);
        Some(Doc {
            v: MESSAGE_VERSION,
            crawl: self.crawl.clone(),
            page,
        })
    }

    fn take(&self, id: u64) -> CoreResult<jetstream::Message> {
        self.inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .ok_or_else(|| backend("ack", format!("unknown delivery {id}")))
    }
}

#[async_trait]
impl Queue<Doc> for DeadPages {
    async fn publish(&self, _msg: Doc) -> CoreResult<()> {
        Err(backend(
            "publish",
            "dead letters are written by the hops' consumers",
        ))
    }

    async fn pull(&self, max: usize, wait: Duration) -> CoreResult<Vec<Delivery<Doc>>> {
        let mut out = Vec::new();
        for (hop, consumer) in &self.consumers {
            let msgs = consumer
                .fetch()
                .max_messages(max.max(1))
                .messages()
                .await
                .map_err(|e| backend("pull", e))?;
            for m in pulled(msgs, None, hop.name()).await {
                // A failed release leaves the claim to expire, which queues the job again:
                // worth a warning, not losing the letters pulled with it.
                if let Err(e) = self.release_claim(*hop, &m).await {
                    tracing::warn!("dead-lettered fetch job's claim not released: {e}");
                }
                match self.record(*hop, &m) {
                    Some(msg) => {
                        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                        self.inflight
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(id, m);
                        out.push(Delivery {
                            id,
                            attempt: 1,
                            msg,
                        });
                    }
                    // Another crawl's letter (its own indexers make its line), or bytes
                    // with no URL in them (kept in the stream for `trawl dlq`).
                    None => m.ack().await.map_err(|e| backend("ack", e))?,
                }
            }
        }
        if out.is_empty() {
            tokio::time::sleep(wait).await;
        }
        Ok(out)
    }

    async fn ack(&self, id: u64) -> CoreResult<()> {
        self.take(id)?.ack().await.map_err(|e| backend("ack", e))
    }

    async fn nak(&self, id: u64, delay: Duration) -> CoreResult<()> {
        self.take(id)?
            .ack_with(AckKind::Nak(Some(delay)))
            .await
            .map_err(|e| backend("nak", e))
    }

    async fn term(&self, id: u64) -> CoreResult<()> {
        self.take(id)?
            .ack_with(AckKind::Term)
            .await
            .map_err(|e| backend("term", e))
    }

    async fn len(&self) -> CoreResult<usize> {
        Ok(0)
    }
}

/// Dead letters of the crawl's page hops not yet written as lines (none when no indexer
/// has opened its consumer): a crawl is not drained before they are.
pub async fn pending(
    client: &async_nats::Client,
    cluster: &ClusterSettings,
    crawl: &str,
) -> CoreResult<u64> {
    let js = jetstream::new(client.clone());
    let mut total = 0;
    for hop in PAGE_HOPS {
        let q = QueueConfig::from_settings(cluster, hop);
        let Ok(stream) = js.get_stream(&q.dead_letter_stream).await else {
            continue;
        };
        let Ok(mut c) = stream
            .get_consumer::<jetstream::consumer::pull::Config>(&consumer_name(crawl))
            .await
        else {
            continue;
        };
        let info = c.info().await.map_err(|e| backend("consumer info", e))?;
        total += info.num_pending + info.num_ack_pending as u64;
    }
    Ok(total)
}
