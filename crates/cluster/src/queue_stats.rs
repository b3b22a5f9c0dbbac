//! What the hops hold, as the server counts it: messages per stream, dead letters, and
//! each durable consumer's waiting, unacknowledged and redelivered messages.

use async_nats::jetstream;
use serde::Serialize;
use trawl_core::CoreResult;
use trawl_core::pipeline::Hop;
use trawl_core::settings::ClusterSettings;

use crate::jetstream::{QueueConfig, backend};

/// One dead letter, as `trawl dlq list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetter {
    pub seq: u64,
    pub reason: String,
    pub deliveries: u32,
    pub original_seq: u64,
    pub payload: String,
}

/// Reads the dead-letter stream of one hop, oldest first.
pub async fn dead_letters(
    client: &async_nats::Client,
    cfg: &QueueConfig,
    limit: usize,
) -> CoreResult<Vec<DeadLetter>> {
    let js = jetstream::new(client.clone());
    let mut stream = js
        .get_stream(&cfg.dead_letter_stream)
        .await
        .map_err(|e| backend("dead-letter stream", e))?;
    let info = stream.info().await.map_err(|e| backend("stream info", e))?;
    let (first, last) = (info.state.first_sequence, info.state.last_sequence);
    let mut out = Vec::new();
    for seq in first..=last {
        if out.len() >= limit || last == 0 {
            break;
        }
        let Ok(m) = stream.get_raw_message(seq).await else {
            continue;
        };
        let h = |k: &str| {
            m.headers
                .get(k)
                .map(|v| v.as_str().to_string())
                .unwrap_or_default()
        };
        out.push(DeadLetter {
            seq,
            reason: h("Trawl-Reason"),
            deliveries: h("Trawl-Deliveries").parse().unwrap_or(0),
            original_seq: h("Trawl-Stream-Seq").parse().unwrap_or(0),
            payload: String::from_utf8_lossy(&m.payload).into_owned(),
        });
    }
    Ok(out)
}

/// Messages waiting (or unacknowledged) and dead letters of one hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HopStats {
    pub hop: Hop,
    pub pending: u64,
    pub dead_letters: u64,
}

/// Messages a stream holds (waiting or unacknowledged); a stream not created yet holds
/// none, any other failure to read it is an error.
async fn stream_messages(js: &jetstream::Context, name: &str) -> CoreResult<u64> {
    match js.get_stream(name).await {
        Ok(mut s) => Ok(s
            .info()
            .await
            .map_err(|e| backend("stream info", e))?
            .state
            .messages),
        Err(e)
            if matches!(
                e.kind(),
                async_nats::jetstream::context::GetStreamErrorKind::JetStream(j)
                    if j.error_code() == async_nats::jetstream::ErrorCode::STREAM_NOT_FOUND
            ) =>
        {
            Ok(0)
        }
        Err(e) => Err(backend("stream", e)),
    }
}

/// Messages waiting or unacknowledged on the crawl hops (not `changed`); an error when a
/// stream's count cannot be read.
pub async fn crawl_backlog(
    client: &async_nats::Client,
    cluster: &ClusterSettings,
) -> CoreResult<u64> {
    let js = jetstream::new(client.clone());
    let mut total = 0;
    for hop in Hop::ALL.into_iter().filter(|h| h.is_crawl_hop()) {
        let q = QueueConfig::from_settings(cluster, hop);
        total += stream_messages(&js, &q.stream).await?;
    }
    Ok(total)
}

/// One hop's durable consumer as the server sees it: what waits for it, what it holds
/// unacknowledged, what was delivered more than once, and when it was last handed a
/// message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerStats {
    pub hop: Hop,
    pub consumer: String,
    /// Messages not yet delivered to it.
    pub waiting: u64,
    /// Delivered and not yet acknowledged.
    pub unacked: u64,
    /// Messages delivered more than once and not yet acknowledged.
    pub redelivered: u64,
    /// Seconds since the server last delivered a message to it; `None` when it never did.
    pub last_delivery_age_s: Option<u64>,
}

/// The consumer of `hop`, when its stream and consumer exist.
pub async fn consumer_stats_of(
    js: &jetstream::Context,
    cluster: &ClusterSettings,
    hop: Hop,
) -> Option<ConsumerStats> {
    let q = QueueConfig::from_settings(cluster, hop);
    let stream = js.get_stream(&q.stream).await.ok()?;
    let info = stream.consumer_info(&q.consumer).await.ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Some(ConsumerStats {
        hop,
        consumer: q.consumer,
        waiting: info.num_pending,
        unacked: info.num_ack_pending as u64,
        redelivered: info.num_redelivered as u64,
        last_delivery_age_s: info
            .delivered
            .last_active
            .map(|t| (now - t.unix_timestamp()).max(0) as u64),
    })
}

/// Every hop's consumer that exists, in pipeline order.
pub async fn consumer_stats(
    client: &async_nats::Client,
    cluster: &ClusterSettings,
) -> Vec<ConsumerStats> {
    let js = jetstream::new(client.clone());
    let mut out = Vec::new();
    for hop in Hop::ALL {
        if let Some(c) = consumer_stats_of(&js, cluster, hop).await {
            out.push(c);
        }
    }
    out
}

/// Every hop's stats, in pipeline order; a stream not created yet counts as empty.
pub async fn hop_stats(client: &async_nats::Client, cluster: &ClusterSettings) -> Vec<HopStats> {
    let js = jetstream::new(client.clone());
    let mut out = Vec::new();
    for hop in Hop::ALL {
        let q = QueueConfig::from_settings(cluster, hop);
        let pending = stream_messages(&js, &q.stream).await.unwrap_or(0);
        let dead_letters = stream_messages(&js, &q.dead_letter_stream)
            .await
            .unwrap_or(0);
        out.push(HopStats {
            hop,
            pending,
            dead_letters,
        });
    }
    out
}
