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
    if d.msg.crawl != parts.crawl {
        let why = format!(
            "an archive of crawl {:?}, not {:?}",
            d.msg.crawl, parts.crawl
        );
        tracing::warn!(source, "{why}: dead-lettered");
        parts.archives.term_with(d.id, &why).await?;
        return Ok(());
    }
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
    // The delivery is kept alive for the whole read (a download, a skip to the resume
    // point, a full docs hop): no other replica is handed the archive while this one reads.
    let outcome = keep_alive(
        parts.archives.as_ref(),
        &[d.id],
        read_archive(parts, cfg, client, &d, &mut p, stop),
    )
    .await?;
    match outcome {
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
        // Tries are failed reads, counted in the ledger: a crash, a stop or a scale-in
        // that hands the archive to another replica is no try.
        Outcome::Failed(reason) => {
            p.error = Some(reason.clone());
            p.failures += 1;
            if p.failures >= cfg.tries {
                tracing::error!(
                    source,
                    tries = p.failures,
                    "archive dead-lettered: {reason}"
                );
                p.stage = ArchiveStage::Failed;
                put(parts, &mut p).await?;
                parts.archives.term_with(d.id, &reason).await?;
            } else {
                tracing::warn!(
                    source,
                    tries = p.failures,
                    "archive failed, retried: {reason}"
                );
                p.stage = ArchiveStage::Retrying;
                put(parts, &mut p).await?;
                parts
                    .archives
                    .nak(d.id, cfg.retry_delay * p.failures)
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
    let mut stopping = stop.clone();
    let located = match stopping
        .run_until(source::locate(&d.msg.source, &cfg.download_dir, client))
        .await
    {
        None => return Ok(Outcome::Stopped),
        Some(Ok(l)) => l,
        Some(Err(reason)) => return Ok(Outcome::Failed(reason)),
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
    let mut saved = Instant::now();
    while let Some(item) = stream.next().await {
        if stop.is_shutdown() {
            return Ok(Outcome::Stopped);
        }
        let mut published = false;
        match item {
            Read::End => return Ok(Outcome::Done),
            Read::OpenFailed(e) => return Ok(Outcome::Failed(e)),
            Read::Malformed { number, message } => {
                tracing::warn!(source = d.msg.source, number, "skipped: {message}");
                p.malformed += 1;
                // A decompression note is numbered after the record it comes before: that
                // record is not through yet.
                p.through = p.through.max(number.saturating_sub(1));
            }
            Read::Record { number, kind, page } => {
                *p.records.entry(kind).or_default() += 1;
                match page {
                    None => {}
                    Some(Err(reason)) => *p.skipped.entry(reason).or_default() += 1,
                    Some(Ok(ready)) => {
                        published = publish(parts, cfg, *ready, &d.msg.source, number, p).await?;
                    }
                }
                p.through = number;
            }
        }
        // Through is written after every page published, so a takeover repeats at most
        // the one in flight (which the hop's duplicate window then stores once).
        if published || saved.elapsed() >= cfg.checkpoint_every {
            put(parts, p).await?;
            saved = Instant::now();
        }
    }
    // No end marker: the reader thread died (a bug), the archive is not read to its end.
    Ok(Outcome::Failed(
        "the archive reader stopped before the end of the file".into(),
    ))
}

/// The gate's verdict on the page, then the page on the `docs` hop, keyed by its archive
/// and record (a record published again after a crash is stored once). `false` when the
/// page cannot be a message even cut (counted as skipped).
async fn publish(
    parts: &Parts,
    cfg: &IngesterConfig,
    ready: crate::read::Ready,
    source: &str,
    number: u64,
    p: &mut ArchiveProgress,
) -> Result<bool, IngestError> {
    let mut page = ready.page;
    let copy = match (&parts.gate, &ready.gate) {
        (Some(gate), Some(gp)) => {
            let verdict = gate.check_and_insert(gp, &ready.id).await?;
            mark_copy(&mut page, verdict).is_some()
        }
        _ => false,
    };
    let mut doc = Doc {
        v: MESSAGE_VERSION,
        crawl: parts.crawl.clone(),
        page,
    };
    if let Some(max) = cfg.max_message_bytes {
        trawl_extractor::fit_doc(&mut doc, max);
        if serde_json::to_vec(&doc).map_or(usize::MAX, |b| b.len()) > max {
            *p.skipped.entry("larger than a message".into()).or_default() += 1;
            return Ok(false);
        }
    }
    let key = format!("{}:{source}#{number}", parts.crawl);
    parts.docs.publish_keyed(doc, &key).await?;
    p.documents += 1;
    if copy {
        p.duplicates += 1;
    }
    Ok(true)
}
