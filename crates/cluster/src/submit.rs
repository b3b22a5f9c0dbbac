//! Starting a crawl on the cluster (`trawl submit`): its spec stored in Redis once every
//! check has passed, the running services moved onto it, then its seeds on the
//! `discovered` hop or one job per archive for the ingesters; and waiting for it to drain.

use std::sync::Arc;
use std::time::{Duration, Instant};

use trawl_core::archives::{ArchiveLedger, ArchiveProgress, ArchiveStage};
use trawl_core::pipeline::Hop;
use trawl_core::queue::Queue;
use trawl_core::settings::{ClusterSettings, redact_url};
use trawl_core::spec::CrawlSpec;
use trawl_core::{ArchiveJob, CoreError, Discovered, MESSAGE_VERSION};

use crate::jetstream::JetStreamQueue;
use crate::redis_archives::RedisLedger;
use crate::service;
use crate::status::{Status, StatusError, status};

/// Why a submit did not go through.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// Refused as asked: the message says what to do instead.
    #[error("{0}")]
    Refused(String),
    /// NATS or Redis failed, with what was being done.
    #[error("{what}: {message}")]
    Backend { what: &'static str, message: String },
    #[error(transparent)]
    Status(#[from] StatusError),
    /// `wait` gave up: where the crawl was stuck.
    #[error("the crawl did not drain in {timeout_s} s: {stuck}")]
    NotDrained { timeout_s: u64, stuck: String },
}

fn backend(what: &'static str) -> impl Fn(String) -> SubmitError {
    move |message| SubmitError::Backend { what, message }
}

fn queue_error(what: &'static str) -> impl Fn(CoreError) -> SubmitError {
    move |e| SubmitError::Backend {
        what,
        message: e.to_string(),
    }
}

/// How the crawl is started.
#[derive(Debug, Clone, Default)]
pub struct Submit {
    /// Replace the spec of a crawl with this id that is still running.
    pub replace: bool,
    /// Archives for the ingesters (resolved paths or URLs); none: crawl the spec's seeds.
    pub archives: Vec<String>,
}

/// What a submit of archives queued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Submitted {
    /// Jobs published for the ingesters.
    pub archives_queued: usize,
    /// Archives the crawl's ledger knew already (not failed), left as they are.
    pub archives_known: usize,
}

/// Refuses what a crawl on the cluster cannot do: settings that do not hold, a crawl id
/// Redis keys cannot carry, and a boilerplate filter (it needs every page of a host to pass
/// one extractor, and the cluster's extractors each see part).
pub fn check(spec: &CrawlSpec) -> Result<(), SubmitError> {
    let n = spec.settings.boilerplate_min_pages;
    if n > 0 {
        return Err(SubmitError::Refused(format!(
            "--boilerplate-min-pages (boilerplate_min_pages: {n} from the flag, file or \
             environment) has no meaning for a crawl on the cluster: it needs every page of a \
             host to pass one extractor, and the cluster's extractors each see part"
        )));
    }
    spec.settings
        .validate()
        .map_err(|e| SubmitError::Refused(e.to_string()))?;
    crate::redis_shards::check_crawl_id(&spec.crawl).map_err(SubmitError::Refused)
}

/// Stores `spec` and starts its crawl on the cluster `c`.
pub async fn submit(
    c: &ClusterSettings,
    spec: &CrawlSpec,
    how: &Submit,
) -> Result<Submitted, SubmitError> {
    let client = service::nats(c)
        .await
        .map_err(backend("connecting to NATS"))?;
    if let Some(since) = &spec.since {
        check_baseline(c, &spec.crawl, since).await?;
    }
    store_spec(c, spec, how.replace).await?;
    // Running services restart under a replaced spec: the seeds wait until none of them
    // still runs another (they would be admitted under its scope and budgets).
    crate::spec_watch::wait_taken(&c.redis_url, &spec.crawl, spec, Duration::from_secs(180))
        .await
        .map_err(backend("waiting for the services to take the spec"))?;
    if how.archives.is_empty() {
        let discovered: Arc<JetStreamQueue<Discovered>> =
            service::queue(&client, c, Hop::Discovered)
                .await
                .map_err(backend("the discovered hop"))?;
        discovered
            .publish(spec.seeds_message())
            .await
            .map_err(queue_error("publishing the seeds"))?;
        Ok(Submitted::default())
    } else {
        submit_archives(&client, c, &spec.crawl, &how.archives).await
    }
}

/// The spec in Redis: new, replacing (`replace`, or a drained crawl of that id), or refused
/// while a crawl of that id runs.
async fn store_spec(
    c: &ClusterSettings,
    spec: &CrawlSpec,
    replace: bool,
) -> Result<(), SubmitError> {
    let crawl = &spec.crawl;
    // A crawl keeps its state's servers for life, --replace or not: its hosts would be
    // looked for on other shards than the ones they are queued on.
    // A spec this version cannot read is handled below (running: refused; drained or
    // --replace: replaced).
    let old = crate::spec::get(&c.redis_url, crawl).await;
    if let Ok(Some(old)) = old.as_ref()
        && old.state_shards != spec.state_shards
    {
        return Err(SubmitError::Refused(format!(
            "crawl {crawl:?} keeps its per-host state on {} Redis server(s); this submit names {} \
             (TRAWL_REDIS_STATE_URLS): submit under another --crawl id",
            old.state_shards, spec.state_shards
        )));
    }
    let put = |replace| crate::spec::put(&c.redis_url, spec, replace);
    if put(replace).await.map_err(backend("storing the spec"))? {
        return Ok(());
    }
    // A crawl with this id exists. A running one keeps its spec unless --replace says so; a
    // drained one takes the new spec and seeds (its seen-set stays: only URLs it has not
    // crawled yet are fetched).
    let s = status(c, crawl).await?;
    if !s.drained {
        return Err(SubmitError::Refused(format!(
            "crawl {crawl:?} is running ({} URLs queued for it, {} host slots held, {} messages \
             pending on the hops of {:?}): wait for it, submit under another --crawl id, or \
             give --replace",
            s.queued_urls,
            s.host_claims,
            s.pending.values().sum::<u64>(),
            c.queue_prefix
        )));
    }
    put(true).await.map_err(backend("storing the spec"))?;
    Ok(())
}

/// One job per archive not known to the crawl's ledger yet (or failed before: submitting
/// again retries it); the ledger entry is written before the job, so `trawl status`
/// counts it from the start.
async fn submit_archives(
    client: &async_nats::Client,
    c: &ClusterSettings,
    crawl: &str,
    sources: &[String],
) -> Result<Submitted, SubmitError> {
    let ledger = RedisLedger::connect(&c.redis_url, crawl)
        .await
        .map_err(queue_error("the archive ledger"))?;
    let jobs: Arc<JetStreamQueue<ArchiveJob>> = service::queue(client, c, Hop::Archives)
        .await
        .map_err(backend("the archives hop"))?;
    let ledger_error = queue_error("the archive ledger");
    let (mut queued, mut known) = (0, 0);
    for source in sources {
        if !ledger
            .add(&ArchiveProgress::queued(source))
            .await
            .map_err(&ledger_error)?
        {
            match ledger.get(source).await.map_err(&ledger_error)? {
                // Tried again from where it stopped: the records through stay through.
                Some(mut p) if p.stage == ArchiveStage::Failed => {
                    p.stage = ArchiveStage::Queued;
                    p.failures = 0;
                    p.error = None;
                    ledger.put(&p).await.map_err(&ledger_error)?;
                }
                _ => {
                    known += 1;
                    continue;
                }
            }
        }
        jobs.publish(ArchiveJob {
            v: MESSAGE_VERSION,
            crawl: crawl.to_string(),
            source: source.clone(),
        })
        .await
        .map_err(queue_error("publishing an archive job"))?;
        queued += 1;
    }
    Ok(Submitted {
        archives_queued: queued,
        archives_known: known,
    })
}

/// A re-crawl's earlier crawl must be another one, known to this Redis, and drained (a
/// crawl still running is no baseline: the pages it has not written yet would be "new").
async fn check_baseline(c: &ClusterSettings, crawl: &str, since: &str) -> Result<(), SubmitError> {
    if since == crawl {
        return Err(SubmitError::Refused(format!(
            "--since {since:?} names this crawl: a re-crawl needs a new --crawl id"
        )));
    }
    if crate::spec::get(&c.redis_url, since)
        .await
        .map_err(backend("reading the earlier crawl's spec"))?
        .is_none()
    {
        return Err(SubmitError::Refused(format!(
            "--since {since:?}: no crawl of that id in {}",
            redact_url(&c.redis_url)
        )));
    }
    let s = status(c, since).await?;
    if !s.drained {
        return Err(SubmitError::Refused(format!(
            "--since {since:?} is still running ({} URLs queued, {} host slots held): wait \
             for it to drain",
            s.queued_urls, s.host_claims
        )));
    }
    Ok(())
}

/// Polls the crawl's status until it has been drained four times in a row (a quiet moment
/// between hops is not an end); `progress` sees a status every 2 s. A `timeout_s` of 0
/// waits as long as it takes.
pub async fn wait_drained(
    c: &ClusterSettings,
    crawl: &str,
    timeout_s: u64,
    progress: &mut dyn FnMut(&Status),
) -> Result<Status, SubmitError> {
    let mut quiet = 0;
    let mut last = Instant::now();
    let started = Instant::now();
    // Where a crawl that never drains is stuck: the last status read, hop by hop.
    let mut seen: Option<Status> = None;
    loop {
        if timeout_s > 0 && started.elapsed() > Duration::from_secs(timeout_s) {
            let stuck = seen.map_or_else(|| "no status could be read".to_string(), |s| stuck(&s));
            return Err(SubmitError::NotDrained { timeout_s, stuck });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let s = match status(c, crawl).await {
            Ok(s) => s,
            // NATS or Redis briefly away: keep waiting.
            Err(e) => {
                tracing::warn!("status: {e}");
                quiet = 0;
                continue;
            }
        };
        quiet = if s.drained { quiet + 1 } else { 0 };
        if quiet >= 4 {
            return Ok(s);
        }
        if last.elapsed() >= Duration::from_secs(2) {
            last = Instant::now();
            progress(&s);
        }
        seen = Some(s);
    }
}

/// A crawl's counts and its hops with messages pending, for one that did not drain.
fn stuck(s: &Status) -> String {
    let hops: Vec<String> = s
        .pending
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(
            |(hop, n)| match s.consumers.iter().find(|c| c.hop.name() == hop.as_str()) {
                Some(c) => format!(
                    "{hop} {n} ({} waiting for {}, {} unacked)",
                    c.waiting, c.consumer, c.unacked
                ),
                None => format!("{hop} {n}"),
            },
        )
        .collect();
    format!(
        "{} URLs queued, {} host slots held, {} pages fetched, {} indexed, {} dead letters; \
         messages pending by hop: {}",
        s.queued_urls,
        s.host_claims,
        s.pages_fetched,
        s.pages_indexed,
        s.dead_letters,
        if hops.is_empty() {
            "none".to_string()
        } else {
            hops.join(", ")
        }
    )
}
