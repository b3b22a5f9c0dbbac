//! The browser behind `/v2/scrape`: the crawl's renderer (a system Chromium, every
//! request of the page through the one-shot fetcher's checks: robots.txt, the address
//! policy, the body caps), rendering a page the render rule picks, or any page whose
//! request asks for `waitFor`, `mobile`, `actions` or a screenshot. Screenshots and PDFs
//! are kept in `DATA/artifacts` and served from `/artifacts/<name>`; a crawl job's in its
//! own folder, served from `/artifacts/jobs/<job>/<name>`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use trawl_core::Fetched;
use trawl_core::render::{Artifacts, PageScript, RenderInfo, RenderMode};
use trawl_core::scope::{Scope, ScopeKind};
use trawl_core::settings::Settings;
use trawl_core::state::{MemoryState, State as CrawlState, WorkTracker};
use trawl_fetcher::{Fetcher, FetcherConfig};
use trawl_renderer::{Renderer, RendererConfig};

use super::App;
use super::api::ApiError;

pub struct Browser {
    renderer: Renderer,
    /// Renders by the rule (`render` is `auto`), not only when asked.
    pub auto: bool,
}

/// The answer to a request that needs a browser when the server has none.
pub fn unavailable() -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        Some("BROWSER_UNAVAILABLE"),
        "waitFor, mobile, actions and the screenshot format need a browser, and this server \
         has none: install chromium-headless-shell, or give its path as TRAWL_CHROMIUM (and do \
         not set render to never)",
    )
}

impl Browser {
    /// The server's browser, when a Chromium is found and rendering is not switched off.
    pub fn new(settings: &Settings, data: &Path) -> anyhow::Result<Option<Arc<Self>>> {
        if settings.crawl.render == RenderMode::Never {
            return Ok(None);
        }
        let Some(mut rc) = RendererConfig::from_settings(&settings.crawl, &settings.process) else {
            tracing::warn!(
                "no Chromium found: /v2/scrape keeps pages that need JavaScript as fetched, \
                 and refuses waitFor, mobile, actions and screenshots"
            );
            return Ok(None);
        };
        rc.script = None;
        rc.artifacts = Some(artifacts_dir(data));
        let state: Arc<dyn CrawlState> = Arc::new(MemoryState::new(1, 1, WorkTracker::default()));
        let crawl = &settings.crawl;
        let fetcher = Fetcher::new(
            FetcherConfig::from_settings("serve", crawl),
            state,
            Scope::new(ScopeKind::Any, &[]),
            crawl.normalizer(),
            None,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let renderer = Renderer::new(rc, fetcher, crawl, Scope::new(ScopeKind::Any, &[]), None);
        Ok(Some(Arc::new(Browser {
            renderer,
            auto: crawl.render == RenderMode::Auto,
        })))
    }

    /// `page` rendered (`reason`: why), with `script` run once it settled. A page the
    /// browser could not render is an error when a script was asked for (its results are
    /// the point), else the fetched version with `render.error`.
    pub async fn render(
        &self,
        mut page: Fetched,
        reason: &str,
        script: Option<&PageScript>,
    ) -> Result<Fetched, ApiError> {
        page.render = Some(RenderInfo {
            reason: reason.into(),
            ..RenderInfo::default()
        });
        let out = self
            .renderer
            .render_with(page, script)
            .await
            .map_err(ApiError::internal)?;
        let info = out.render.as_ref();
        if script.is_some() && !info.is_some_and(|i| i.rendered) {
            let why = info
                .and_then(|i| i.error.clone())
                .unwrap_or_else(|| "not rendered".into());
            let status = if why.starts_with("timeout") {
                StatusCode::REQUEST_TIMEOUT
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            return Err(ApiError::new(
                status,
                Some("SCRAPE_RENDER_FAILED"),
                format!("the browser could not render the page: {why}"),
            ));
        }
        Ok(out)
    }

    pub async fn close(&self) {
        self.renderer.close().await;
    }
}

/// Where the scrapes' screenshots and PDFs are kept.
pub fn artifacts_dir(data: &Path) -> PathBuf {
    data.join("artifacts")
}

/// A script's results in Firecrawl's shapes: the `screenshot` format's URL, and the
/// actions' `{screenshots, scrapes, javascriptReturns, pdfs}`; an action that failed is
/// the request's error. `base` is the URL the files are served under.
pub fn results(a: Artifacts, base: &str) -> Result<(Option<String>, Value), ApiError> {
    if let Some(e) = a.error {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("SCRAPE_ACTION_ERROR"),
            e,
        ));
    }
    let url = |name: &String| format!("{base}/{name}");
    let actions = json!({
        "screenshots": a.screenshots.iter().map(url).collect::<Vec<_>>(),
        "scrapes": a.scrapes.iter().map(|s| json!({"url": s.url, "html": s.html})).collect::<Vec<_>>(),
        "javascriptReturns": a.javascript_returns.iter()
            .map(|r| json!({"type": r.kind, "value": r.value})).collect::<Vec<_>>(),
        "pdfs": a.pdfs.iter().map(url).collect::<Vec<_>>(),
    });
    Ok((a.screenshot.as_ref().map(url), actions))
}

/// A file name the renderer wrote (32 hex digits and its kind), or `None`: nothing else
/// is ever served from an artifacts folder.
pub fn artifact_name(name: &str) -> Option<(&str, &'static str)> {
    let (stem, ext) = name.split_once('.')?;
    let mime = match ext {
        "png" => "image/png",
        "jpeg" => "image/jpeg",
        "pdf" => "application/pdf",
        _ => return None,
    };
    (stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit())).then_some((stem, mime))
}

pub(crate) async fn artifact(
    State(app): State<Arc<App>>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    send_artifact(artifacts_dir(&app.args.data), &name).await
}

pub(crate) async fn job_artifact(
    State(app): State<Arc<App>>,
    UrlPath((job, name)): UrlPath<(String, String)>,
) -> Response {
    if uuid::Uuid::parse_str(&job).is_err() {
        return ApiError::new(StatusCode::NOT_FOUND, None, "Not found").into_response();
    }
    send_artifact(
        app.args.data.join("jobs").join(job).join("artifacts"),
        &name,
    )
    .await
}

async fn send_artifact(dir: PathBuf, name: &str) -> Response {
    let Some((_, mime)) = artifact_name(name) else {
        return ApiError::new(StatusCode::NOT_FOUND, None, "Not found").into_response();
    };
    match tokio::fs::read(dir.join(name)).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, mime)], bytes).into_response(),
        Err(_) => ApiError::new(StatusCode::NOT_FOUND, None, "Not found").into_response(),
    }
}

/// How long screenshots, PDFs and extracts' answers are kept (Firecrawl's `expiresAt`).
const KEEP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Every hour, the scrapes' files and the extracts older than [`KEEP`] go.
pub(crate) async fn sweep(app: Arc<App>) {
    let mut stop = app.stop.clone();
    loop {
        let a = app.clone();
        let swept = tokio::task::spawn_blocking(move || {
            let files = remove_older(&artifacts_dir(&a.args.data), KEEP);
            let cutoff = chrono::Utc::now() - chrono::Duration::from_std(KEEP).unwrap_or_default();
            let rows = a.db.forget_extracts(&cutoff.to_rfc3339());
            (files, rows)
        })
        .await;
        if let Ok((files, Ok(rows))) = swept
            && files + rows > 0
        {
            tracing::info!(
                files,
                extracts = rows,
                "expired artifacts and extracts removed"
            );
        }
        let hour = tokio::time::sleep(std::time::Duration::from_secs(3600));
        if stop.run_until(hour).await.is_none() {
            return;
        }
    }
}

/// Removes the renderer's files in `dir` older than `age`; how many.
fn remove_older(dir: &Path, age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| artifact_name(n).is_some())
        })
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > age)
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_renderers_file_names_are_served() {
        assert!(artifact_name("0123456789abcdef0123456789abcdef.png").is_some());
        for bad in [
            "../serve.db",
            "0123456789abcdef0123456789abcdef.png/..",
            "x.png",
            "0123456789abcdef0123456789abcdeg.png",
            "0123456789abcdef0123456789abcdef.exe",
        ] {
            assert!(artifact_name(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_sweep_removes_only_old_files_of_the_renderer() {
        let dir = tempfile::tempdir().unwrap();
        let shot = dir.path().join("0123456789abcdef0123456789abcdef.png");
        let other = dir.path().join("serve.db");
        std::fs::write(&shot, b"png").unwrap();
        std::fs::write(&other, b"db").unwrap();
        assert_eq!(
            remove_older(dir.path(), std::time::Duration::from_secs(60)),
            0
        );
        assert_eq!(remove_older(dir.path(), std::time::Duration::ZERO), 1);
        assert!(!shot.exists() && other.exists());
    }

    #[test]
    fn results_take_firecrawls_shape() {
        let a = Artifacts {
            screenshot: Some("a.png".into()),
            screenshots: vec!["b.png".into()],
            javascript_returns: vec![trawl_core::render::ScriptReturn {
                kind: "number".into(),
                value: 3.into(),
            }],
            ..Artifacts::default()
        };
        let (shot, actions) = results(a, "http://h/artifacts").unwrap();
        assert_eq!(shot.as_deref(), Some("http://h/artifacts/a.png"));
        assert_eq!(actions["screenshots"][0], "http://h/artifacts/b.png");
        assert_eq!(actions["javascriptReturns"][0]["type"], "number");
        assert_eq!(actions["scrapes"], json!([]));
        let failed = Artifacts {
            error: Some("action 1 (click): no element matches \"#x\"".into()),
            ..Artifacts::default()
        };
        assert_eq!(
            results(failed, "b").unwrap_err().code,
            Some("SCRAPE_ACTION_ERROR")
        );
    }
}
