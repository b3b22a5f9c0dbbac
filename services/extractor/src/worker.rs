//! The extraction loop shared by both runtimes. Parsing is CPU work: it runs on the blocking
//! pool so that it never stalls the async executor that drives fetches.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use trawl_core::pipeline::{Hops, Shutdown, StageContext, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_core::settings::CrawlSettings;
use trawl_core::{CoreError, Discovered, Doc, FetchFailure, Fetched, MESSAGE_VERSION, RefineJob};
use trawl_dedup::{Gate, GateMethod, GatePage, GateVerdict, HostLines};

use trawl_core::render::{RenderInfo, RenderMode};

use crate::{Processed, process, process_with};

/// What the extractor does about repetition: the near-duplicate gate, and the per-host
/// boilerplate lines dropped before fingerprinting. Either can be off.
#[derive(Clone, Default)]
pub struct DedupStage {
    pub gate: Option<Arc<dyn Gate>>,
    pub boilerplate: Option<Arc<HostLines>>,
}

/// Fault injection for tests of the failure path: a page whose body contains the value of
/// `TRAWL_FAULT_POISON` makes its extraction task panic, as a parser bug would. Only in
/// builds with the `fault-injection` feature (the tests').
#[cfg(feature = "fault-injection")]
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

/// Where pages go under the render rule: `mode` and rule (A)'s threshold from the crawl's
/// settings; `available` false while no renderer can take them (the embedded runtime found
/// no browser; in the cluster, no renderer replica is running), so a page the rule picks
/// keeps its fetched version, marked `render.error = unavailable`.
#[derive(Clone)]
pub struct RenderRoute {
    pub mode: RenderMode,
    pub max_chars: usize,
    pub available: Availability,
}

/// Whether a renderer takes pages: known (the embedded runtime knows whether it found a
/// browser), or asked when a page needs one (the cluster: whether a renderer replica runs,
/// which the probe caches).
#[derive(Clone)]
pub enum Availability {
    Known(Arc<AtomicBool>),
    Probe(Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>),
}

impl Availability {
    pub async fn get(&self) -> bool {
        match self {
            Availability::Known(b) => b.load(Ordering::Relaxed),
            Availability::Probe(p) => p().await,
        }
    }

    pub fn set(&self, yes: bool) {
        if let Availability::Known(b) = self {
            b.store(yes, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for RenderRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderRoute")
            .field("mode", &self.mode)
            .field("max_chars", &self.max_chars)
            .finish_non_exhaustive()
    }
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
    /// The render rule; `None` with `--render never`.
    pub render: Option<RenderRoute>,
    /// Send each kept HTML page to the refiner (`refine`).
    pub refine: bool,
    /// The crawler's robots.txt name: `<meta name="NAME">` directives are ours.
    pub agent: String,
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
            render: (s.render != RenderMode::Never).then_some(RenderRoute {
                mode: s.render,
                max_chars: s.render_max_chars,
                available: Availability::Known(Arc::new(AtomicBool::new(true))),
            }),
            refine: s.refine,
            agent: s.robots_agent(),
        }
    }
}

/// Where extracted pages go: records, links, pages for the browser and for the refiner.
#[derive(Clone)]
pub struct Outputs {
    pub docs: Arc<dyn Queue<Doc>>,
    pub discovered: Arc<dyn Queue<Discovered>>,
    pub render: Arc<dyn Queue<Fetched>>,
    pub refine: Arc<dyn Queue<RefineJob>>,
}

impl Outputs {
    pub fn of(hops: &Hops) -> Self {
        Outputs {
            docs: hops.docs.clone(),
            discovered: hops.discovered.clone(),
            render: hops.render.clone(),
            refine: hops.refine.clone(),
        }
    }
}

/// `n` extraction workers over the hops.
pub fn spawn(workers: &mut Workers, n: usize, cfg: &ExtractorConfig, hops: &Hops, stop: &Shutdown) {
    workers.spawn_n(n, || {
        run_worker(
            hops.fetched.clone(),
            Outputs::of(hops),
            cfg.clone(),
            stop.clone(),
        )
    });
}

/// The extractor as one stage of a cluster crawl: `concurrency` workers, the crawl's shared
/// gate, retried until the queue's delivery limit dead-letters a page that keeps failing.
/// Pages the render rule picks go to the render hop while `renderers` says a renderer
/// replica runs (the service binary asks for their marks in Redis); otherwise they keep
/// their fetched version, so a cluster without renderers still drains.
pub async fn serve(
    ctx: StageContext,
    gate: Option<Arc<dyn Gate>>,
    renderers: Availability,
) -> StageResult {
    let mut cfg = ExtractorConfig::from_settings(&ctx.spec.settings, gate, None);
    cfg.max_message_bytes = ctx.max_message_bytes;
    if let Some(r) = cfg.render.as_mut() {
        r.available = renderers;
    }
    ctx.set_ready();
    let mut workers = Workers::new();
    spawn(
        &mut workers,
        ctx.process.concurrency,
        &cfg,
        &ctx.hops,
        &ctx.shutdown,
    );
    workers.join().await
}

/// How one page went through [`extract_and_publish`].
pub enum Handled {
    /// Its outputs are published (or it went to the render hop).
    Done,
    /// Its extraction panicked (or was cancelled): nothing was published.
    Failed(&'static str),
}

/// Pulls fetched pages, extracts them, passes them through the dedup gate and publishes
/// the records and the links found; a page the render rule picks goes to the render hop
/// instead, whole.
///
/// A page whose extraction fails (the task panics) is put back with a growing delay and
/// the worker goes on with the next one. With `give_up_after`, its record is written with
/// `error.kind = extract_failed` after that many attempts (the embedded runtime: nothing is
/// lost); without, it is retried until the queue's delivery limit dead-letters it (the
/// cluster: it lands in the dead-letter stream with its reason and does not block the
/// queue).
pub async fn run_worker(
    fetched: Arc<dyn Queue<Fetched>>,
    out: Outputs,
    cfg: ExtractorConfig,
    stop: impl Into<Shutdown>,
) -> Result<(), CoreError> {
    let mut stop = stop.into();
    while let Some(batch) = stop
        .run_until(fetched.pull(8, Duration::from_millis(200)))
        .await
    {
        for d in batch? {
            let kept = cfg.give_up_after.map(|_| d.msg.clone());
            let url = d.msg.job.url.clone();
            let delivery = (d.id, d.attempt);
            let handled = extract_and_publish(d.msg, &cfg, &out, true).await?;
            settle(&*fetched, delivery, handled, kept, &url, &cfg, &out).await?;
        }
    }
    Ok(())
}

/// Acks a handled delivery; a failed one is written as `extract_failed` once it has had
/// `give_up_after` attempts (from `kept`, the message as it came), else put back with a
/// growing delay. The renderer settles its deliveries the same way.
pub async fn settle<M: Send + 'static>(
    queue: &dyn Queue<M>,
    (id, attempt): (u64, u32),
    handled: Handled,
    kept: Option<Fetched>,
    url: &str,
    cfg: &ExtractorConfig,
    out: &Outputs,
) -> Result<(), CoreError> {
    let why = match handled {
        Handled::Done => return queue.ack(id).await,
        Handled::Failed(why) => why,
    };
    tracing::error!(%url, attempt, "extraction {why}");
    match (cfg.give_up_after, kept) {
        (Some(n), Some(kept)) if attempt >= n => {
            out.docs.publish(failed_record(kept, why, attempt)).await?;
            queue.ack(id).await
        }
        _ => {
            let delay = Duration::from_millis(500 * u64::from(attempt.min(20)));
            queue.nak(id, delay).await
        }
    }
}

/// One page through extraction (on the blocking pool), the render rule when `route` is
/// true, the dedup gate, and out: links first, then the record, so a crash repeats, never
/// loses. The renderer calls it for the pages it rendered (`route` false: a page is never
/// sent back to the browser).
pub async fn extract_and_publish(
    msg: Fetched,
    cfg: &ExtractorConfig,
    out: &Outputs,
    route: bool,
) -> Result<Handled, CoreError> {
    let boiler = cfg.dedup.boilerplate.clone();
    let keep = Keep {
        html: cfg.keep_html,
        refine: cfg.refine,
    };
    let rule = cfg
        .render
        .as_ref()
        .filter(|_| route)
        .map(|r| (r.mode, r.max_chars));
    // Whether a renderer would take the page, asked only of pages the rule could pick
    // (HTML pages with a rule); read once, so the page is processed for where it goes.
    let to_browser = match cfg.render.as_ref().filter(|_| route) {
        Some(r) if msg.render.is_none() && msg.job.kind == trawl_core::UrlKind::Page => {
            r.available.get().await
        }
        _ => false,
    };
    // The sketch a MinHash gate compares is made here, on the blocking pool, with the rest.
    let method = cfg
        .dedup
        .gate
        .as_ref()
        .map_or(GateMethod::SimHash, |g| g.method());
    let agent = cfg.agent.clone();
    let task = tokio::task::spawn_blocking(move || {
        let how = How {
            rule,
            to_browser,
            method,
            agent: &agent,
        };
        let r = extract_one(&msg, boiler.as_deref(), keep, how);
        (r, msg)
    })
    .await;
    let ((mut processed, fp), msg) = match task {
        Ok(p) => p,
        Err(e) => {
            return Ok(Handled::Failed(if e.is_panic() {
                "panicked"
            } else {
                "was cancelled"
            }));
        }
    };
    if let Some(reason) = processed.render_reason {
        let info = RenderInfo {
            reason: reason.to_string(),
            ..RenderInfo::default()
        };
        if to_browser {
            let mut msg = msg;
            msg.render = Some(info);
            out.render.publish(msg).await?;
            return Ok(Handled::Done);
        }
        processed.doc.page.render = Some(RenderInfo {
            error: Some(
                "unavailable: no renderer (no browser found, or no renderer replica running)"
                    .into(),
            ),
            ..info
        });
    }
    publish_outputs(processed, fp, cfg, out).await?;
    Ok(Handled::Done)
}

/// A processed page through the dedup gate and onto the hops, sized to their message
/// limit: its links first, then (a crawl that refines) the page for the refiner unless it
/// copies a page kept before, then its record.
pub async fn publish_outputs(
    mut processed: Processed,
    fp: Option<GatePage>,
    cfg: &ExtractorConfig,
    out: &Outputs,
) -> Result<(), CoreError> {
    if let (Some(gate), Some(fp)) = (&cfg.dedup.gate, fp) {
        mark_duplicate(&**gate, &fp, &mut processed.doc).await?;
    }
    if let Some(disc) = processed.discovered {
        let parts = match cfg.max_message_bytes {
            Some(max) => crate::fit::split_discovered(disc, max),
            None => vec![disc],
        };
        for part in parts {
            out.discovered.publish(part).await?;
        }
    }
    if let Some(mut job) = processed.refine.take()
        && processed.doc.page.duplicate_of.is_none()
        && processed.doc.page.error.is_none()
    {
        if let Some(max) = cfg.max_message_bytes {
            crate::fit::fit_refine(&mut job, max);
        }
        out.refine.publish(job).await?;
    }
    if let Some(max) = cfg.max_message_bytes {
        crate::fit::fit_doc(&mut processed.doc, max);
    }
    out.docs.publish(processed.doc).await
}

/// What of a page's markup goes on: in its record (`keep_html`), to the refiner.
#[derive(Clone, Copy)]
struct Keep {
    html: bool,
    refine: bool,
}

/// How one page is extracted: the render rule, whether a browser takes it, the gate's
/// sketch, the crawler's name.
struct How<'a> {
    rule: Option<(RenderMode, usize)>,
    to_browser: bool,
    method: GateMethod,
    agent: &'a str,
}

/// Extraction, the host's boilerplate lines out, and the fingerprint of what is left (for
/// the gate, unless the page is `noindex`: it is never the page a copy is linked to).
fn extract_one(
    msg: &Fetched,
    boiler: Option<&HostLines>,
    keep: Keep,
    how: How<'_>,
) -> (Processed, Option<GatePage>) {
    #[cfg(feature = "fault-injection")]
    if poisoned(msg) {
        panic!("poisoned page (TRAWL_FAULT_POISON)");
    }
    let mut p = process_with(msg, how.rule, how.agent);
    if p.render_reason.is_some() && how.to_browser {
        // Going to the browser: its rendered version is the one fingerprinted.
        return (p, None);
    }
    let html = (keep.html || keep.refine)
        && p.doc.page.robots.noarchive.is_none()
        && msg.job.kind == trawl_core::UrlKind::Page
        && !msg.body.is_empty()
        && trawl_body::is_html(msg.content_type.as_deref(), &msg.body);
    if html {
        let markup = String::from_utf8_lossy(&msg.body).into_owned();
        if keep.refine {
            p.refine = Some(refine_job(msg, markup.clone()));
        }
        if keep.html {
            p.doc.page.raw_html = Some(markup);
        }
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
    let page = GatePage::of(&p.doc.page.text, how.method);
    p.doc.page.simhash = Some(format!("{:016x}", page.fp.simhash));
    p.doc.page.text_hash = Some(format!("{:032x}", page.fp.exact));
    let gated = p.doc.page.robots.noindex.is_none();
    (p, gated.then_some(page))
}

/// The refiner's job for a page: its markup (the browser's DOM for a rendered page) and
/// where it came from.
fn refine_job(msg: &Fetched, html: String) -> RefineJob {
    let rendered = msg.render.as_ref().is_some_and(|r| r.rendered);
    let record = if rendered {
        msg.render.as_ref().and_then(|r| r.warc.as_ref())
    } else {
        msg.facts.warc.as_ref()
    };
    RefineJob {
        v: MESSAGE_VERSION,
        crawl: msg.crawl.clone(),
        url: msg.final_url.clone(),
        fetched_at: msg.fetched_at.clone(),
        warc_record: record.map(|w| w.record_id.clone()),
        rendered,
        html,
        html_cut: false,
    }
}

/// The record of a page that could not be extracted: its fetch facts, no text or links.
pub fn failed_record(mut page: Fetched, why: &str, attempts: u32) -> Doc {
    page.body = Default::default();
    let mut p = process(&page);
    p.doc.page.error = Some(FetchFailure {
        kind: "extract_failed".into(),
        message: format!("extraction {why} {attempts} times"),
    });
    p.doc
}

/// The gate after extraction, before indexing: the first of a group is kept, later ones
/// name an earlier page of their group (`duplicate_of`) and are not indexed again.
async fn mark_duplicate(gate: &dyn Gate, fp: &GatePage, doc: &mut Doc) -> Result<(), CoreError> {
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
        GateVerdict::Similar { of, similarity } => {
            page.duplicate_of = Some(of);
            page.similarity = Some(similarity);
        }
    }
    Ok(())
}
