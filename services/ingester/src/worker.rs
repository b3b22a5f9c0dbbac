//! One archive job at a time per worker: located, read record by record through
//! extraction and the dedup gate onto the `docs` hop, its progress written to the ledger,
//! then acked; a failure put back with a delay, and dead-lettered with its reason on the
//! last try.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use trawl_core::archives::{ArchiveLedger, ArchiveProgress, ArchiveStage};
use trawl_core::clock::now_ms;
use trawl_core::pipeline::Shutdown;
use trawl_core::queue::{Delivery, Queue, keep_alive};
use trawl_core::{ArchiveJob, CoreError, Doc, MESSAGE_VERSION};
use trawl_corpus::ingest::mark_copy;
use trawl_dedup::{Gate, GateError, GateMethod};

use crate::read::{Read, records};
use crate::{IngesterConfig, source};

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Backend(#[from] CoreError),
    #[error("dedup gate: {0}")]
    Gate(#[from] GateError),
}

/// What an ingester works with.
pub struct Parts {
    pub crawl: String,
    pub archives: Arc<dyn Queue<ArchiveJob>>,
    pub docs: Arc<dyn Queue<Doc>>,
    /// The crawl's page gate; `None` when the crawl keeps every page.
    pub gate: Option<Arc<dyn Gate>>,
    pub ledger: Arc<dyn ArchiveLedger>,
}

/// How one try of an archive ended (a backend failure is an error of the stage instead:
/// the job stays unacked and comes back after the ack wait).
enum Outcome {
    Done,
    /// The archive cannot be read: put back, or dead-lettered on the last try.
    Failed(String),
    /// The process is stopping: put back at once, resumed after the last record through.
    Stopped,
}

/// Pulls archive jobs until the stop.
pub async fn run_worker(
    parts: Arc<Parts>,
    cfg: Arc<IngesterConfig>,
    mut stop: Shutdown,
) -> Result<(), IngestError> {
    let client = source::client();
    loop {
        let Some(got) = stop
            .run_until(parts.archives.pull(1, Duration::from_secs(1)))
            .await
        else {
            return Ok(());
        };
        for d in got? {
            handle(&parts, &cfg, &client, d, &stop).await?;
        }
    }
}

async fn handle(
    parts: &Parts,
    cfg: &IngesterConfig,
    client: &reqwest::Client,
    d: Delivery<ArchiveJob>,
    stop: &Shutdown,
) -> Result<(), IngestError> {
    let source = d.msg.source.clone();
    let mut p = parts
        .ledger
        .get(&source)
        .await?
        .unwrap_or_else(|| ArchiveProgress::queued(&source));
    // Done before, and the ack was lost.
    if p.stage == ArchiveStage::Done {
        parts.archives.ack(d.id).await?;
        return Ok(());
    }
    p.stage = ArchiveStage::Reading;
    p.attempts = d.attempt;
    p.worker = Some(cfg.replica.clone());
    p.error = None;
    put(parts, &mut p).await?;
    if p.through > 0 {
        tracing::info!(source, through = p.through, "resuming an archive");
    }
    match read_archive(parts, cfg, client, &d, &mut p, stop).await? {
        Outcome::Done => {
            // The ledger says done before the ack: a redelivery in between is acked unread.
            p.stage = ArchiveStage::Done;
            put(parts, &mut p).await?;
            parts.archives.ack(d.id).await?;
            tracing::info!(
                source,
                records = p.records_read(),
                documents = p.documents,
                duplicates = p.duplicates,
                "archive ingested"
            );
        }
        Outcome::Stopped => {
            p.stage = ArchiveStage::Queued;
            put(parts, &mut p).await?;
            parts.archives.nak(d.id, Duration::ZERO).await?;
        }
        Outcome::Failed(reason) => {
            p.error = Some(reason.clone());
            if d.attempt >= cfg.tries {
                tracing::error!(
                    source,
                    attempts = d.attempt,
                    "archive dead-lettered: {reason}"
                );
                p.stage = ArchiveStage::Failed;
                put(parts, &mut p).await?;
                parts.archives.term_with(d.id, &reason).await?;
            } else {
                tracing::warn!(
                    source,
                    attempt = d.attempt,
                    "archive failed, retried: {reason}"
                );
                p.stage = ArchiveStage::Retrying;
                put(parts, &mut p).await?;
                parts
                    .archives
                    .nak(d.id, cfg.retry_delay * d.attempt)
                    .await?;
            }
        }
    }
    Ok(())
}

async fn put(parts: &Parts, p: &mut ArchiveProgress) -> Result<(), CoreError> {
    p.updated_ms = now_ms();
    parts.ledger.put(p).await
}

async fn read_archive(
    parts: &Parts,
    cfg: &IngesterConfig,
    client: &reqwest::Client,
    d: &Delivery<ArchiveJob>,
    p: &mut ArchiveProgress,
    stop: &Shutdown,
) -> Result<Outcome, IngestError> {
    let archives = parts.archives.as_ref();
    let located = match keep_alive(
        archives,
        &[d.id],
        source::locate(&d.msg.source, &cfg.download_dir, client),
    )
    .await
    {
        Ok(l) => l,
        Err(reason) => return Ok(Outcome::Failed(reason)),
    };
    let method = parts
        .gate
        .as_ref()
        .map_or(GateMethod::SimHash, |g| g.method());
    let stream = records(
        located.path.clone(),
        Arc::from(d.msg.source.as_str()),
        p.through,
        method,
        cfg.threads,
    );
    tokio::pin!(stream);
    let every = archives.progress_every();
    let (mut saved, mut kept_alive) = (Instant::now(), Instant::now());
    while let Some(item) = stream.next().await {
        if stop.is_shutdown() {
            return Ok(Outcome::Stopped);
        }
        match item {
            Read::OpenFailed(e) => return Ok(Outcome::Failed(e)),
            Read::Malformed { number, message } => {
                tracing::warn!(source = d.msg.source, number, "skipped: {message}");
                p.malformed += 1;
                p.through = number;
            }
            Read::Record { number, kind, page } => {
                *p.records.entry(kind).or_default() += 1;
                match page {
                    None => {}
                    Some(Err(reason)) => *p.skipped.entry(reason).or_default() += 1,
                    Some(Ok(ready)) => {
                        publish(parts, cfg, *ready, &d.msg.source, number, p).await?;
                    }
                }
                p.through = number;
            }
        }
        if saved.elapsed() >= cfg.checkpoint_every {
            put(parts, p).await?;
            saved = Instant::now();
        }
        if every.is_some_and(|e| kept_alive.elapsed() >= e) {
            archives.progress(d.id).await?;
            kept_alive = Instant::now();
        }
    }
    Ok(Outcome::Done)
}

/// The gate's verdict on the page, then the page on the `docs` hop, keyed by its archive
/// and record (a record published again after a crash is stored once).
async fn publish(
    parts: &Parts,
    cfg: &IngesterConfig,
    ready: crate::read::Ready,
    source: &str,
    number: u64,
    p: &mut ArchiveProgress,
) -> Result<(), IngestError> {
    let mut page = ready.page;
    if let (Some(gate), Some(gp)) = (&parts.gate, &ready.gate) {
        let verdict = gate.check_and_insert(gp, &ready.id).await?;
        if mark_copy(&mut page, verdict).is_some() {
            p.duplicates += 1;
        }
    }
    let mut doc = Doc {
        v: MESSAGE_VERSION,
        crawl: parts.crawl.clone(),
        page,
    };
    if let Some(max) = cfg.max_message_bytes {
        trawl_extractor::fit_doc(&mut doc, max);
    }
    let key = format!("{}:{source}#{number}", parts.crawl);
    parts.docs.publish_keyed(doc, &key).await?;
    p.documents += 1;
    Ok(())
}
