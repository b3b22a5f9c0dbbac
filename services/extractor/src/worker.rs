//! The extraction loop shared by both runtimes. Parsing is CPU work: it runs on the blocking
//! pool so that it never stalls the async executor that drives fetches.

use std::sync::Arc;
use std::time::Duration;

use trawl_core::pipeline::{Hops, Shutdown, StageContext, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_core::settings::CrawlSettings;
use trawl_core::{CoreError, Discovered, Doc, FetchFailure, Fetched};
use trawl_dedup::{Fingerprint, Gate, GateVerdict, HostLines, fingerprint};

use crate::{Processed, process};

/// What the extractor does about repetition: the near-duplicate gate, and the per-host
/// boilerplate lines dropped before fingerprinting. Either can be off.
#[derive(Clone, Default)]
pub struct DedupStage {
    pub gate: Option<Arc<dyn Gate>>,
    pub boilerplate: Option<Arc<HostLines>>,
}

/// Fault injection for tests of the failure path: a page whose body contains the value of
/// `TRAWL_FAULT_POISON` makes its extraction task panic, as a parser bug would.
fn poisoned(f: &Fetched) -> bool {
    static MARKER: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    MARKER
        .get_or_init(|| {
            std::env::var("TRAWL_FAULT_POISON")
                .ok()
                .filter(|m| !m.is_empty())
                .map(String::into_bytes)
        })
        .as_ref()
        .is_some_and(|m| f.body.windows(m.len()).any(|w| w == m.as_slice()))
}

/// What the stage needs besides the hops: the dedup parts, and how often a page whose
/// extraction panics is tried before its record is written with `extract_failed`.
#[derive(Clone, Default)]
pub struct ExtractorConfig {
    pub dedup: DedupStage,
    pub give_up_after: Option<u32>,
    /// The hops' message limit (the cluster's): outputs are split or cut to fit it.
    pub max_message_bytes: Option<usize>,
    /// Keep each HTML page's markup in its record (`keep_html`).
    pub keep_html: bool,
}

impl ExtractorConfig {
    /// The crawl's dedup settings over `gate` (the runtime's: in memory or in Redis), and
    /// the host boilerplate filter when `boilerplate_min_pages` asks for it.
    pub fn from_settings(
        s: &CrawlSettings,
        gate: Option<Arc<dyn Gate>>,
        give_up_after: Option<u32>,
    ) -> Self {
        let boilerplate = (s.boilerplate_min_pages > 0).then(|| {
            Arc::new(HostLines::new(trawl_dedup::BoilerplateConfig {
                min_pages: s.boilerplate_min_pages,
                ..Default::default()
            }))
        });
        ExtractorConfig {
            dedup: DedupStage { gate, boilerplate },
            give_up_after,
            max_message_bytes: None,
            keep_html: s.keep_html,
        }
    }
}

/// `n` extraction workers over the hops.
pub fn spawn(workers: &mut Workers, n: usize, cfg: &ExtractorConfig, hops: &Hops, stop: &Shutdown) {
    workers.spawn_n(n, || {
        run_worker(
            hops.fetched.clone(),
            hops.docs.clone(),
            hops.discovered.clone(),
            cfg.clone(),
            stop.clone(),
        )
    });
}

/// The extractor as one stage of a cluster crawl: `concurrency` workers, the crawl's shared
/// gate, retried until the queue's delivery limit dead-letters a page that keeps failing.
pub async fn serve(ctx: StageContext, gate: Option<Arc<dyn Gate>>) -> StageResult {
    let mut cfg = ExtractorConfig::from_settings(&ctx.spec.settings, gate, None);
    cfg.max_message_bytes = ctx.max_message_bytes;
    ctx.set_ready();
    let mut workers = Workers::new();
    spawn(
        &mut workers,
        ctx.process.concurrency,
        &cfg,
        &ctx.hops,
        &ctx.shutdown,
    );
    Ok(workers.join().await?)
}

/// Pulls fetched pages, extracts them, passes them through the dedup gate and publishes
/// the records and the links found.
///
/// A page whose extraction fails (the task panics) is put back with a growing delay and
/// the worker goes on with the next one. With `give_up_after`, its record is written with
/// `error.kind = extract_failed` after that many attempts (the embedded runtime: nothing is
/// lost); without, it is retried until the queue's delivery limit dead-letters it (the
/// cluster: it lands in the dead-letter stream with its reason and does not block the
/// queue).
pub async fn run_worker(
    fetched: Arc<dyn Queue<Fetched>>,
    docs: Arc<dyn Queue<Doc>>,
    discovered: Arc<dyn Queue<Discovered>>,
    cfg: ExtractorConfig,
    stop: impl Into<Shutdown>,
) -> Result<(), CoreError> {
    let ExtractorConfig {
        dedup,
        give_up_after,
        max_message_bytes,
        keep_html,
    } = cfg;
    let mut stop = stop.into();
    while let Some(batch) = stop
        .run_until(fetched.pull(8, Duration::from_millis(200)))
        .await
    {
        for d in batch? {
            let msg = d.msg;
            let boiler = dedup.boilerplate.clone();
            let kept = msg.clone();
            let task = tokio::task::spawn_blocking(move || {
                extract_one(&msg, boiler.as_deref(), keep_html)
            })
            .await;
            let (mut processed, fp) = match task {
                Ok(p) => p,
                Err(e) => {
                    let why = if e.is_panic() {
                        "panicked"
                    } else {
                        "was cancelled"
                    };
                    tracing::error!(url = %kept.job.url, attempt = d.attempt, "extraction {why}");
                    if give_up_after.is_some_and(|n| d.attempt >= n) {
                        docs.publish(failed_record(kept, why, d.attempt)).await?;
                        fetched.ack(d.id).await?;
                    } else {
                        let delay = Duration::from_millis(500 * u64::from(d.attempt.min(20)));
                        fetched.nak(d.id, delay).await?;
                    }
                    continue;
                }
            };
            if let (Some(gate), Some(fp)) = (&dedup.gate, fp) {
                mark_duplicate(&**gate, fp, &mut processed.doc).await?;
            }
            // Links first, then the record, then the ack: a crash repeats, never loses.
            if let Some(disc) = processed.discovered {
                let parts = match max_message_bytes {
                    Some(max) => crate::fit::split_discovered(disc, max),
                    None => vec![disc],
                };
                for part in parts {
                    discovered.publish(part).await?;
                }
            }
            if let Some(max) = max_message_bytes {
                crate::fit::fit_doc(&mut processed.doc, max);
            }
            docs.publish(processed.doc).await?;
            fetched.ack(d.id).await?;
        }
    }
    Ok(())
}

/// Extraction, the host's boilerplate lines out, and the fingerprint of what is left.
fn extract_one(
    msg: &Fetched,
    boiler: Option<&HostLines>,
    keep_html: bool,
) -> (Processed, Option<Fingerprint>) {
    if poisoned(msg) {
        panic!("poisoned page (TRAWL_FAULT_POISON)");
    }
    let mut p = process(msg);
    if keep_html
        && msg.job.kind == trawl_core::UrlKind::Page
        && !msg.body.is_empty()
        && trawl_body::is_html(msg.content_type.as_deref(), &msg.body)
    {
        p.doc.page.raw_html = Some(String::from_utf8_lossy(&msg.body).into_owned());
    }
    if let Some(b) = boiler
        && !p.doc.page.text.is_empty()
    {
        let (text, dropped) = b.strip(&msg.job.host, &p.doc.page.text);
        p.doc.page.text = text;
        p.doc.page.boilerplate_lines = dropped as u32;
    }
    if p.doc.page.text.is_empty() {
        return (p, None);
    }
    let fp = fingerprint(&p.doc.page.text);
    p.doc.page.simhash = Some(format!("{:016x}", fp.simhash));
    p.doc.page.text_hash = Some(format!("{:032x}", fp.exact));
    (p, Some(fp))
}

/// The record of a page that could not be extracted: its fetch facts, no text or links.
fn failed_record(mut page: Fetched, why: &str, attempts: u32) -> Doc {
    page.body = Default::default();
    let mut p = process(&page);
    p.doc.page.error = Some(FetchFailure {
        kind: "extract_failed".into(),
        message: format!("extraction {why} {attempts} times"),
    });
    p.doc
}

/// The gate after extraction, before indexing: the first copy is kept, later ones are
/// recorded as aliases of it (`duplicate_of`) and not indexed again.
async fn mark_duplicate(gate: &dyn Gate, fp: Fingerprint, doc: &mut Doc) -> Result<(), CoreError> {
    let page = &mut doc.page;
    match gate
        .check_and_insert(fp, &page.final_url)
        .await
        .map_err(|e| CoreError::Backend(format!("dedup gate: {e}")))?
    {
        GateVerdict::Kept => {}
        GateVerdict::Duplicate { of, distance } => {
            page.duplicate_of = Some(of);
            page.distance = Some(distance);
        }
    }
    Ok(())
}
