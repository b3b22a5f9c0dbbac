//! The renderer stage: pages the extractor's render rule picked (the `render` hop) are
//! rendered in a system Chromium driven over the DevTools protocol (chromiumoxide), then
//! extracted like any page (`trawl_extractor::extract_and_publish`) and published to the
//! `docs` and `discovered` hops. A page that cannot be rendered (its deadline, a crashed
//! browser) is extracted from its fetched version, its record saying why.
//!
//! - **Network.** The browser makes no request of its own: every one is intercepted. The
//!   page's document is answered from the body the fetcher already has (no second request,
//!   and the origin is the page's own); scripts, XHR/fetch and frames go through the
//!   crawl's fetcher (scope, address policy, robots.txt on every hop, WARC records,
//!   `fetcher.requests`), spaced per host by the crawl's delay; styles, images, fonts and
//!   media are refused. Host resolution is off inside the browser as a second wall.
//! - **Bounds.** `render_concurrency` tabs at a time, each in a fresh incognito context;
//!   a deadline per page (`render_timeout_s`), a subrequest budget, the DOM cut at 8 MiB;
//!   the browser restarted after a crash, a hang, 200 pages or 1.5 GiB resident.
//! - **Records.** The DOM replaces the body on the page's `Fetched` (`render` says how it
//!   went), and is archived as a WARC `conversion` record referring to the response.
//!
//! Tested with Debian's Chromium 156 (`chromium-headless-shell` 156.0.8078.114) and
//! chromiumoxide 0.9.1 (protocol revision 1566079).

mod browser;
mod render;
mod script;
mod subrequest;

use std::sync::Arc;
use std::time::Duration;

use trawl_core::counters::Counter;
use trawl_core::pipeline::{Hops, Shutdown, Stage, StageContext, StageError, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_core::render::{PageScript, RenderInfo};
use trawl_core::settings::{CrawlSettings, ProcessSettings};
use trawl_core::state::State;
use trawl_core::{CoreError, Fetched, WarcRef};
use trawl_extractor::{ExtractorConfig, Outputs};
use trawl_fetcher::warcout::{self, Conversion, WarcHandle};
use trawl_fetcher::{Fetcher, FetcherConfig};

pub use browser::{BrowserLimits, Pool, find_chromium, tree_rss};
pub use render::{MAX_DOM_BYTES, PageLimits};
pub use script::{MAX_ACTIONS, MAX_SHOT_HEIGHT};

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("browser: {0}")]
    Browser(String),
    #[error("browser did not answer (hung)")]
    Hung,
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("WARC output failed: {0}")]
    Warc(String),
}

impl RenderError {
    fn cdp(e: chromiumoxide::error::CdpError) -> Self {
        RenderError::Browser(e.to_string())
    }
}

/// Why a renderer cannot start.
const NO_CHROMIUM: &str = "no Chromium found: install chromium-headless-shell, or give its \
     path as `process.chromium` in TRAWL_CONFIG, TRAWL_CHROMIUM or CHROME";

/// The renderer's start-up check: this process's browser (`process.chromium`, from the
/// settings file or `TRAWL_CHROMIUM`; else `CHROME`, else one on `PATH`) is there. Without
/// one it is a [fatal](StageError::fatal) error: a service would mark itself a live
/// renderer, and extractors would send it pages it never takes.
pub fn check(p: &ProcessSettings) -> Result<(), StageError> {
    match find_chromium(p.chromium.as_deref()) {
        Some(_) => Ok(()),
        None => Err(StageError::fatal(NO_CHROMIUM)),
    }
}

/// What the renderer is configured with: the crawl's limits and this process's browser.
#[derive(Debug, Clone)]
pub struct RendererConfig {
    pub chromium: std::path::PathBuf,
    pub concurrency: usize,
    pub page: PageLimits,
    pub browser: BrowserLimits,
    /// Subrequests may leave the crawl's scope (robots.txt and the address policy apply).
    pub offsite: bool,
    /// What every page does once settled (the crawl's `render_script`).
    pub script: Option<PageScript>,
    /// Where scripts' screenshots and PDFs are written (`<out>/artifacts`).
    pub artifacts: Option<std::path::PathBuf>,
}

impl RendererConfig {
    /// The crawl's render settings and this process's browser; `None` when no Chromium is
    /// found.
    pub fn from_settings(s: &CrawlSettings, p: &ProcessSettings) -> Option<Self> {
        let chromium = find_chromium(p.chromium.as_deref())?;
        Some(RendererConfig {
            chromium,
            concurrency: p.render_concurrency.max(1),
            page: PageLimits {
                timeout: Duration::from_secs(s.render_timeout_s.max(1)),
                idle: Duration::from_millis(s.render_idle_ms),
                wait_for: s.render_wait_for.clone().filter(|w| !w.trim().is_empty()),
                max_requests: s.render_max_requests,
            },
            browser: BrowserLimits {
                no_sandbox: p.chromium_no_sandbox,
                ..BrowserLimits::default()
            },
            offsite: s.render_offsite,
            script: s.render_script.clone().filter(|s| !s.is_empty()),
            artifacts: Some(p.out.join("artifacts")),
        })
    }
}

/// A browser and what its pages' requests go through.
pub struct Renderer {
    pool: Pool,
    subs: Arc<subrequest::Subrequests>,
    cfg: RendererConfig,
    warc: Option<WarcHandle>,
    state: Arc<dyn State>,
    restarts_counted: std::sync::atomic::AtomicU32,
}

impl Renderer {
    /// `fetcher` answers the pages' subrequests (made one-shot here: no seen-set);
    /// `warc` receives the DOMs as conversion records.
    pub fn new(
        cfg: RendererConfig,
        fetcher: Fetcher,
        settings: &CrawlSettings,
        scope: trawl_core::scope::Scope,
        warc: Option<WarcHandle>,
    ) -> Self {
        let state = fetcher.state().clone();
        let subs = Arc::new(subrequest::Subrequests {
            fetcher: Arc::new(fetcher.one_shot()),
            scope,
            offsite: cfg.offsite,
            gap: Duration::from_millis(settings.delay_ms),
            gate: Default::default(),
        });
        Renderer {
            pool: Pool::new(cfg.chromium.clone(), cfg.browser.clone()),
            subs,
            cfg,
            warc,
            state,
            restarts_counted: Default::default(),
        }
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Renders one page from the render hop: the page with the browser's DOM as its body,
    /// or as it was fetched with `render.error` saying why not. Errors only when the
    /// WARC writer fails (nothing is handed on unarchived).
    pub async fn render(&self, page: Fetched) -> Result<Fetched, RenderError> {
        let script = self.cfg.script.clone();
        self.render_with(page, script.as_ref()).await
    }

    /// [`Self::render`] with `script` run once the page settled (none: render only); what
    /// it made is the record's `render.artifacts`.
    pub async fn render_with(
        &self,
        mut page: Fetched,
        script: Option<&PageScript>,
    ) -> Result<Fetched, RenderError> {
        let mut info = page.render.take().unwrap_or_else(|| RenderInfo {
            reason: "always".into(),
            ..RenderInfo::default()
        });
        let outcome = self.try_render(&page, script).await;
        // Restarts are counted once each, by whichever worker sees the count move.
        let restarts = self.pool.restarts();
        let counted = self
            .restarts_counted
            .swap(restarts, std::sync::atomic::Ordering::Relaxed);
        if restarts > counted {
            self.state
                .count(&Counter::RenderRestarts, i64::from(restarts - counted))
                .await?;
        }
        match outcome {
            Ok(r) => {
                info.ms = r.elapsed.as_millis() as u64;
                info.requests = r.requests;
                info.blocked = r.blocked;
                info.artifacts = r.artifacts;
                if r.timed_out {
                    info.error = Some(format!(
                        "timeout: not settled after {} s{}",
                        self.cfg.page.timeout.as_secs(),
                        if r.dom.is_some() {
                            "; the DOM as it was then"
                        } else {
                            ""
                        }
                    ));
                }
                if let Some(dom) = r.dom {
                    info.rendered = true;
                    info.warc = self.archive(&page, &dom).await?;
                    page.body = dom.into_bytes();
                    page.content_type = Some("text/html; charset=utf-8".into());
                    page.charset = Some("UTF-8".into());
                }
            }
            Err(RenderError::Warc(e)) => return Err(RenderError::Warc(e)),
            Err(e) => {
                tracing::warn!(url = %page.final_url, error = %e, "render failed; fetched version kept");
                info.error = Some(e.to_string());
            }
        }
        page.render = Some(info);
        Ok(page)
    }

    async fn try_render(
        &self,
        page: &Fetched,
        script: Option<&PageScript>,
    ) -> Result<render::Rendered, RenderError> {
        let guard = self.pool.get().await?;
        let live = guard
            .as_ref()
            .ok_or_else(|| RenderError::Browser("no browser".into()))?;
        // A script's own waits, and the page's deadline again for its actions.
        let scripted = script.map(|s| render::Scripted {
            script: s,
            dir: self.cfg.artifacts.as_deref(),
            budget: self.cfg.page.timeout + Duration::from_millis(s.waits_ms()),
        });
        let budget = scripted.as_ref().map_or(Duration::ZERO, |s| s.budget);
        // The page's own deadline, plus room for the DOM read and the tab's close.
        let hard = self.cfg.page.timeout + budget + live.command_timeout * 3;
        let page_render = render::render(live, page, &self.subs, &self.cfg.page, scripted.as_ref());
        let r = tokio::time::timeout(hard, page_render)
            .await
            .unwrap_or_else(|_| {
                live.hung.store(true, std::sync::atomic::Ordering::Relaxed);
                Err(RenderError::Hung)
            });
        live.mark_rendered();
        r
    }

    /// The DOM as a WARC conversion record referring to the page's response.
    async fn archive(&self, page: &Fetched, dom: &str) -> Result<Option<WarcRef>, RenderError> {
        let Some(w) = &self.warc else {
            return Ok(None);
        };
        let date = chrono::Utc::now();
        let record_id = format!("<urn:uuid:{}>", uuid::Uuid::new_v4());
        w.write_conversion(Conversion {
            record_id: record_id.clone(),
            target_uri: page.final_url.clone(),
            date,
            refers_to: page.facts.warc.as_ref().map(|r| r.record_id.clone()),
            content_type: "text/html; charset=utf-8".into(),
            block: dom.as_bytes().to_vec(),
        })
        .await
        .map_err(|e| RenderError::Warc(e.to_string()))?;
        Ok(Some(WarcRef {
            record_id,
            date: date.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }))
    }

    /// Closes the browser.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// `renderer.cfg.concurrency` workers over the render hop, extracting what they render
/// with `extract` and publishing to the hops.
pub fn spawn(
    workers: &mut Workers,
    renderer: &Arc<Renderer>,
    extract: &ExtractorConfig,
    hops: &Hops,
    stop: &Shutdown,
) {
    workers.spawn_n(renderer.cfg.concurrency, || {
        run_worker(
            renderer.clone(),
            hops.render.clone(),
            Outputs::of(hops),
            extract.clone(),
            stop.clone(),
        )
    });
}

/// Pulls pages to render one at a time, renders, extracts and publishes them, then acks.
pub async fn run_worker(
    renderer: Arc<Renderer>,
    render: Arc<dyn Queue<Fetched>>,
    out: Outputs,
    extract: ExtractorConfig,
    stop: impl Into<Shutdown>,
) -> Result<(), RenderError> {
    let mut stop = stop.into();
    while let Some(batch) = stop
        .run_until(render.pull(1, Duration::from_millis(200)))
        .await
    {
        for d in batch? {
            let kept = extract.give_up_after.map(|_| d.msg.clone());
            let url = d.msg.job.url.clone();
            let delivery = (d.id, d.attempt);
            let page = renderer.render(d.msg).await?;
            let handled = trawl_extractor::extract_and_publish(page, &extract, &out, false).await?;
            trawl_extractor::settle(&*render, delivery, handled, kept, &url, &extract, &out)
                .await?;
        }
    }
    Ok(())
}

/// The renderer as one stage of a cluster crawl: its own browser and WARC series, the
/// crawl's shared dedup gate, DOMs cut to fit the hop's message limit.
pub async fn serve(ctx: StageContext, gate: Option<Arc<dyn trawl_dedup::Gate>>) -> StageResult {
    let spec = &ctx.spec;
    let cfg = RendererConfig::from_settings(&spec.settings, &ctx.process)
        .ok_or_else(|| StageError::fatal(NO_CHROMIUM))?;
    let warc = warcout::replica_series(spec, &ctx.process, Stage::Renderer.name(), "trawl-render")?;
    let fetcher = Fetcher::new(
        FetcherConfig::from_settings(&spec.crawl, &spec.settings),
        ctx.state.clone(),
        spec.scope(),
        spec.normalizer(),
        warc.as_ref().map(|w| w.handle()),
    )?;
    let renderer = Arc::new(Renderer::new(
        cfg,
        fetcher,
        &spec.settings,
        spec.scope(),
        warc.as_ref().map(|w| w.handle()),
    ));
    let mut extract = ExtractorConfig::from_settings(&spec.settings, gate, None);
    extract.max_message_bytes = ctx.max_message_bytes;
    ctx.set_ready();
    let mut workers = Workers::new();
    spawn(&mut workers, &renderer, &extract, &ctx.hops, &ctx.shutdown);
    let result = workers.join().await;
    renderer.close().await;
    drop(renderer);
    warcout::finish_series(warc).await?;
    result
}
