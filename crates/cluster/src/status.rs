//! A crawl on the cluster as its users see it: messages waiting per hop, URLs queued, host
//! claims, the counters, and whether it has drained (`trawl status`, `trawl submit --wait`,
//! `trawl serve --cluster`).

use std::collections::BTreeMap;
use std::fmt::Display;

use serde::Serialize;
use trawl_core::archives::{ArchiveLedger, ArchivesSummary};
use trawl_core::counters::{Counter, Counters};
use trawl_core::history::Unlinked;
use trawl_core::pipeline::Hop;
use trawl_core::settings::ClusterSettings;
use trawl_core::state::State;

use crate::jetstream::hop_stats;
use crate::redis_archives::RedisLedger;
use crate::redis_history::RedisHistory;
use crate::redis_state::RedisState;
use crate::service;

/// What went wrong asking NATS or Redis, with what was being asked.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {message}")]
pub struct StatusError {
    what: &'static str,
    message: String,
}

fn failed(what: &'static str, e: impl Display) -> StatusError {
    StatusError {
        what,
        message: e.to_string(),
    }
}

#[derive(Debug, Serialize)]
pub struct Status {
    pub crawl: String,
    /// Messages waiting or unacknowledged, per hop.
    pub pending: BTreeMap<String, u64>,
    pub queued_urls: usize,
    pub host_claims: usize,
    pub pages_fetched: i64,
    pub pages_indexed: i64,
    pub duplicates: i64,
    pub dead_letters: u64,
    /// Each hop's consumer: waiting, unacknowledged and redelivered messages, and when it
    /// was last handed one (a consumer that stands still with messages waiting shows here).
    pub consumers: Vec<crate::jetstream::ConsumerStats>,
    pub drained: bool,
    pub counters: BTreeMap<String, i64>,
    /// A distributed ingest's archives (`trawl submit --archives`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archives: Option<ArchivesSummary>,
}

/// Whether a re-crawl's end-of-crawl check of the earlier crawl's URLs is done (a crawl
/// that is no re-crawl has none to do).
async fn rechecked(c: &ClusterSettings, crawl: &str) -> Result<bool, StatusError> {
    let spec = crate::spec::get(&c.redis_url, crawl)
        .await
        .map_err(|e| failed("reading the crawl's spec", e))?;
    Ok(match spec.and_then(|s| s.since) {
        Some(_) => {
            let history = RedisHistory::connect(&c.redis_url, crawl)
                .await
                .map_err(|e| failed("connecting to Redis", e))?;
            history
                .checked()
                .await
                .map_err(|e| failed("reading the end-of-crawl check", e))?
        }
        None => true,
    })
}

/// The crawl `crawl` as NATS and Redis hold it now.
pub async fn status(c: &ClusterSettings, crawl: &str) -> Result<Status, StatusError> {
    let client = service::nats(c)
        .await
        .map_err(|e| failed("connecting to NATS", e))?;
    let stats = hop_stats(&client, c).await;
    let pending: BTreeMap<String, u64> = stats
        .iter()
        .map(|h| (h.hop.to_string(), h.pending))
        .collect();
    let dead = stats.iter().map(|h| h.dead_letters).sum();
    let consumers = crate::jetstream::consumer_stats(&client, c).await;
    // The crawl's own count of state servers: summing fewer would call it drained while
    // the others still hold work. (A spec this version cannot read: the servers named.)
    let nodes = match crate::spec::get(&c.redis_url, crawl).await.ok().flatten() {
        Some(spec) => service::state_nodes_for(c, &spec)
            .map_err(|e| failed("the crawl's state servers", e))?,
        None => c.state_nodes(),
    };
    let redis = |e: trawl_core::CoreError| failed("reading the crawl's state in Redis", e);
    let state = RedisState::connect_sharded(&nodes, crawl, 1, 1, 1)
        .await
        .map_err(redis)?;
    let counters = state.counters().await.map_err(redis)?;
    let typed = Counters::from_map(&counters);
    let count = |k: Counter| typed.get(&k);
    let queued_urls = state.queued().await.map_err(redis)?;
    let host_claims = state.claims().await.map_err(redis)?;
    // A dead-lettered page is done once the indexers have written its line.
    let dead_unwritten = crate::dead_pages::pending(&client, c, crawl)
        .await
        .map_err(|e| failed("reading the dead-lettered pages", e))?;
    let idle = pending
        .iter()
        .all(|(hop, n)| *n == 0 || !Hop::from_name(hop).is_some_and(Hop::is_crawl_hop))
        && queued_urls == 0
        && host_claims == 0
        && dead_unwritten == 0;
    // A re-crawl is not done before its end-of-crawl check of the earlier crawl's URLs
    // (asked only once nothing else is left: `--wait` polls this).
    let drained = idle && rechecked(c, crawl).await?;
    let ledger = RedisLedger::connect(&c.redis_url, crawl)
        .await
        .map_err(redis)?
        .all()
        .await
        .map_err(redis)?;
    let archives = (!ledger.is_empty()).then(|| ArchivesSummary::of(&ledger, 100));
    Ok(Status {
        archives,
        crawl: crawl.to_string(),
        drained,
        pending,
        queued_urls,
        host_claims,
        pages_fetched: count(Counter::Requests),
        pages_indexed: count(Counter::Pages),
        duplicates: count(Counter::DuplicatesExact) + count(Counter::DuplicatesNear),
        dead_letters: dead,
        consumers,
        counters,
    })
}

impl Status {
    /// One line of a crawl's progress, as `trawl submit --wait` shows it.
    pub fn progress_line(&self) -> String {
        let archives = self.archives.as_ref().map_or(String::new(), |a| {
            format!(
                ", archives {} of {} done",
                a.stages.get("done").copied().unwrap_or(0),
                a.total
            )
        });
        format!(
            "{} pages indexed, {} URLs queued, {} messages pending{archives}",
            self.pages_indexed,
            self.queued_urls,
            self.pending.values().sum::<u64>()
        )
    }

    /// Archives of an ingest that failed on every try.
    pub fn archives_failed(&self) -> usize {
        self.archives
            .as_ref()
            .and_then(|a| a.stages.get("failed").copied())
            .unwrap_or(0)
    }
}

/// What `trawl status` prints: the crawl's state, each hop's lag, its counts and, for an
/// ingest, its archives (the unfinished ones one a line, with why).
impl Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.drained { "drained" } else { "running" };
        writeln!(f, "crawl {} ({state})", self.crawl)?;
        for (hop, n) in &self.pending {
            let consumer = self.consumers.iter().find(|c| c.hop.name() == hop);
            match consumer {
                Some(c) => {
                    let last = c
                        .last_delivery_age_s
                        .map_or("never".to_string(), |s| format!("{s} s ago"));
                    writeln!(
                        f,
                        "  {hop:<11} {n} pending ({} waiting, {} unacked, {} redelivered; {} last handed one {last})",
                        c.waiting, c.unacked, c.redelivered, c.consumer
                    )?
                }
                None => writeln!(f, "  {hop:<11} {n} pending")?,
            }
        }
        writeln!(
            f,
            "  {} URLs queued, {} host slots held, {} pages fetched, {} indexed, {} duplicates, {} dead letters",
            self.queued_urls,
            self.host_claims,
            self.pages_fetched,
            self.pages_indexed,
            self.duplicates,
            self.dead_letters
        )?;
        match &self.archives {
            Some(a) => archives(f, a),
            None => Ok(()),
        }
    }
}

fn archives(f: &mut std::fmt::Formatter<'_>, a: &ArchivesSummary) -> std::fmt::Result {
    let stages: Vec<String> = a.stages.iter().map(|(k, n)| format!("{n} {k}")).collect();
    writeln!(
        f,
        "  archives: {} ({}); {} records read, {} documents, {} duplicates, {} malformed",
        a.total,
        stages.join(", "),
        a.records,
        a.documents,
        a.duplicates,
        a.malformed
    )?;
    for p in &a.unfinished {
        let stage = p.stage.name();
        let why = p
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(": {e}"));
        writeln!(
            f,
            "    {stage:<8} {} (try {}, {} records, {} documents){why}",
            p.source,
            p.attempts,
            p.records_read(),
            p.documents
        )?;
    }
    Ok(())
}
