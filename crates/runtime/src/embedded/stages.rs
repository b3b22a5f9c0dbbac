//! Starting the optional stages (refiner, renderer) and restoring a resumed crawl's state.

use std::sync::Arc;

use anyhow::Context;
use trawl_core::counters::Counter;
use trawl_core::pipeline::{Hops, Workers};
use trawl_core::state::{MemoryState, State};
use trawl_fetcher::warcout::WarcWriterTask;
use trawl_fetcher::{Fetcher, FetcherConfig};
use trawl_store::resume::Resume;

use super::plan::Plan;
use crate::plan::CrawlPlan;

/// The refiner's workers (`--refine`), writing `refined.jsonl` beside `pages.jsonl`; a page
/// whose model backend keeps failing is written as skipped (`backend`), so the crawl ends.
pub(super) async fn start_refiner(
    opts: &CrawlPlan,
    output: &mut Workers,
    hops: &Hops,
    state: &Arc<dyn State>,
    stop: &trawl_core::pipeline::Shutdown,
) -> anyhow::Result<()> {
    let settings = opts.refine.clone();
    trawl_refiner::engine::check(&settings)?;
    let s = settings.clone();
    let engine = tokio::task::spawn_blocking(move || trawl_refiner::engine::build(&s))
        .await
        .context("loading the refiner's engine")??;
    let sink = Arc::new(trawl_refiner::RefinedSink::open(
        &opts.out.join("refined.jsonl"),
    )?);
    tracing::info!(engine = %engine.name(), "refining the crawl's pages into refined.jsonl");
    let mut cfg = trawl_refiner::RefinerConfig::new(engine, &settings);
    cfg.backend_tries = 5;
    cfg.write_backend_failures = true;
    let n = trawl_refiner::engine::concurrency(&settings);
    trawl_refiner::spawn(output, n, &Arc::new(cfg), &hops.refine, &sink, state, stop);
    Ok(())
}

/// The renderer, when the crawl's render mode wants one and a Chromium is found; without
/// one, pages the rule picks keep their fetched version (`render.unavailable`).
pub(super) fn start_renderer(
    opts: &CrawlPlan,
    plan: &Plan,
    state: &Arc<dyn State>,
    warc: Option<&WarcWriterTask>,
    cfg: &mut trawl_extractor::ExtractorConfig,
) -> anyhow::Result<Option<Arc<trawl_renderer::Renderer>>> {
    let Some(route) = cfg.render.as_mut() else {
        return Ok(None);
    };
    let s = &plan.spec.settings;
    let process = trawl_core::settings::ProcessSettings {
        chromium: opts.chromium.clone(),
        render_concurrency: opts.render_concurrency,
        chromium_no_sandbox: opts.chromium_no_sandbox,
        ..Default::default()
    };
    let Some(mut rc) = trawl_renderer::RendererConfig::from_settings(s, &process) else {
        let hint = match &opts.chromium {
            Some(p) => format!("{} is not a file", p.display()),
            None => "install chromium-headless-shell or pass --chromium".into(),
        };
        tracing::warn!(
            "no Chromium found ({hint}): pages that need JavaScript keep their fetched \
             version, counted as render.unavailable"
        );
        route.available.set(false);
        return Ok(None);
    };
    rc.artifacts = Some(opts.out.join("artifacts"));
    tracing::info!(browser = %rc.chromium.display(), mode = %s.render, "rendering pages that need JavaScript");
    let fetcher = Fetcher::new(
        FetcherConfig::from_settings(&plan.spec.crawl, s),
        state.clone(),
        plan.spec.scope(),
        s.normalizer(),
        warc.map(|w| w.handle()),
    )?;
    Ok(Some(Arc::new(trawl_renderer::Renderer::new(
        rc,
        fetcher,
        s,
        plan.spec.scope(),
        warc.map(|w| w.handle()),
    ))))
}

/// Puts a resumed crawl's state back: the seen-set, the counters, the queued URLs (fetched
/// again) and the dedup gate's kept pages.
pub(super) async fn restore(
    r: &Resume,
    s: &trawl_core::settings::CrawlSettings,
    memory: &MemoryState,
    gate: Option<&crate::page_gate::EmbeddedGate>,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    memory.restore_seen(r.seen.iter().copied());
    for (k, v) in &r.counters {
        memory.incr(k, *v).await?;
    }
    // The budgets in force count at least what the store holds as admitted.
    let mut floors = Vec::new();
    if s.max_pages > 0 {
        floors.push((Counter::FrontierAdmitted, r.admitted_pages));
    }
    if s.max_pages_per_host > 0 {
        floors.extend(
            r.admitted_by_host
                .iter()
                .map(|(h, n)| (Counter::HostPages(h.clone()), *n)),
        );
    }
    for (c, floor) in floors {
        let have = r.counters.get(c.key().as_ref()).copied().unwrap_or(0);
        if (floor as i64) > have {
            memory.count(&c, floor as i64 - have).await?;
        }
    }
    for job in &r.queued {
        memory.enqueue(job.clone()).await?;
    }
    if let Some(g) = gate {
        g.restore(&r.kept, &out.join("pages.jsonl"))?;
    }
    tracing::info!(
        seen = r.seen.len(),
        queued = r.queued.len(),
        pending_batches = r.pending.len(),
        run = r.runs + 1,
        "resuming the crawl"
    );
    Ok(())
}
