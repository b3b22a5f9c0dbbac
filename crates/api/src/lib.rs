//! The API server (`trawl serve`): Firecrawl's v2 HTTP API over trawl's engine, so code written for
//! `firecrawl-py` or `langchain-firecrawl` runs against trawl by pointing `api_url` at it.
//! `/v2/scrape` and `/v2/map` answer at once through the one-shot fetcher; `/v2/crawl`
//! and `/v2/batch/scrape` are jobs (`jobs`), each an embedded crawl kept on disk.
//! Keys (`--api-key`) gate every `/v2` path; each key has its own limits of requests in
//! flight and of jobs running.

mod actions;
pub mod api;
pub mod browser;
pub mod cache;
pub mod changes;
pub mod db;
pub mod extract;
mod job_hooks;
pub mod jobs;
mod lines;
pub mod llm;
pub mod map;
pub mod mcp;
pub use mcp::{mcp_http, mcp_http_until_stopped, mcp_stdio};
mod metrics;
pub mod monitor;
pub mod on_cluster;
pub mod page;
pub mod parse;
mod plan;
pub mod scrape;
mod scraping;
pub mod search;
pub mod team;
pub mod v1;
pub mod webhooks;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest;
use tokio::sync::Notify;
use trawl_core::settings::Settings;

use api::{ApiError, MapRequest, ScrapeRequest};
use jobs::{Jobs, Kind};
use scrape::Scraper;

use map::{self as sitemap_map, MapOptions, SitemapUse};

/// What the server is configured with: where it listens and keeps its data, its keys and
/// limits, and the settings its crawls run under.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Where jobs and scrape history are kept (`serve.db`, `jobs/<id>/`).
    pub data: PathBuf,
    /// API keys accepted as `Authorization: Bearer KEY` (none: no key needed).
    pub api_keys: Vec<String>,
    /// Crawl and batch jobs running at once (the others wait, `scraping` with nothing done).
    pub max_jobs: usize,
    /// Requests in flight in each job.
    pub job_concurrency: usize,
    /// Scrape and map requests one key may have in flight; more are answered 429.
    pub max_requests_per_key: usize,
    /// Jobs one key may have unfinished; more are answered 429.
    pub max_jobs_per_key: usize,
    /// Largest request body.
    pub max_request_bytes: usize,
    /// Pages `/v2/map` reads for their links (besides the sitemaps).
    pub map_pages: usize,
    /// Run crawl and batch jobs on the cluster's services (one at a time: the services
    /// serve one crawl id) instead of in this process; scrapes and maps stay here.
    pub cluster: bool,
    /// With `cluster`: the crawl id the services were started with (`TRAWL_CRAWL`). Each
    /// job clears that crawl's state before it starts: give the API a crawl id of its own.
    pub cluster_crawl: String,
    /// Indexes `/v2/search` reads for every key (besides each key's own jobs' indexes).
    pub search_indexes: Vec<PathBuf>,
    /// A SearXNG-compatible JSON search endpoint whose web results `/v2/search` adds.
    pub search_backend: Option<String>,
    /// Index each crawl and batch job's pages for `/v2/search`.
    pub index_jobs: bool,
    /// Credits one key may use a month (0: no limit).
    pub monthly_credits: u64,
    /// The shortest time between two runs of a monitor's schedule.
    pub monitor_min_interval_s: u64,
    /// The settings the server's crawls and scrapes run under: the `crawl` section's limits
    /// are ceilings a request can lower; `cluster` reaches the services; `process` is this
    /// process's (a job's browser, memory bounds).
    pub settings: Settings,
}

impl ServeConfig {
    /// The defaults of `trawl serve`, over `settings`.
    pub fn new(settings: Settings) -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 3002)),
            data: PathBuf::from("trawl-serve"),
            api_keys: Vec::new(),
            max_jobs: 4,
            job_concurrency: 16,
            max_requests_per_key: 32,
            max_jobs_per_key: 8,
            max_request_bytes: 10 << 20,
            map_pages: 10,
            cluster: false,
            cluster_crawl: settings.process.crawl.clone(),
            search_indexes: Vec::new(),
            search_backend: None,
            index_jobs: true,
            monthly_credits: 0,
            monitor_min_interval_s: 60,
            settings,
        }
    }
}

pub struct App {
    scraper: Scraper,
    /// The browser `/v2/scrape` renders with; none without a Chromium.
    browser: Option<Arc<browser::Browser>>,
    /// The model the LLM formats call; none without `llm_endpoint`.
    llm: Option<Arc<llm::Llm>>,
    /// Extracts running, by key.
    extracts: Mutex<HashMap<String, usize>>,
    /// The server's stop: extracts end with it, left to run again at start-up.
    stop: trawl_core::pipeline::Shutdown,
    jobs: Arc<Jobs>,
    db: db::Db,
    /// Each key's digest and owner id.
    keys: Vec<([u8; 32], String)>,
    in_flight: Mutex<HashMap<String, usize>>,
    args: ServeConfig,
    metrics: metrics::Metrics,
    /// Earlier scrapes, for `maxAge`.
    cache: cache::Cache,
    /// Credits used, per key and month.
    usage: team::Usage,
    /// Webhook deliveries waiting.
    outbox: Arc<webhooks::Outbox>,
    monitors: monitor::store::Store,
    /// Wakes the monitors' scheduler when a schedule changes.
    monitor_wake: Notify,
    /// The embedding model `/v2/search` loads once, and the indexes it keeps open.
    searcher: trawl_runtime::search::Searcher,
    /// `DATA/serve.lock`, held while the server runs.
    lock: std::fs::File,
}

/// The key's owner id, set by the auth layer.
#[derive(Debug, Clone)]
struct Owner(String);

/// Runs the server until Ctrl-C or SIGTERM; jobs still running are left resumable.
pub async fn serve(args: ServeConfig) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    serve_on(listener, args, stop_signal()).await
}

/// Runs the server on `listener` until `stop` resolves, then stops the jobs (each stays
/// resumable) and returns once their crawls have written what they have.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    args: ServeConfig,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (app, trigger) = start(args)?;
    tracing::info!(addr = %listener.local_addr()?, "trawl serve listening");
    axum::serve(listener, router(app.clone()))
        .with_graceful_shutdown(async move {
            stop.await;
            trigger.trigger();
        })
        .await?;
    finish(&app).await;
    Ok(())
}

/// The app over `args`, its unfinished work taken up again (jobs, extracts, webhook
/// events, monitor checks cut short) and its background tasks started.
fn start(args: ServeConfig) -> anyhow::Result<(Arc<App>, trawl_core::pipeline::ShutdownTrigger)> {
    let (app, trigger) = build(args)?;
    let resumed = app.jobs.resume_unfinished()?;
    let extracts = extract::resume(&app)?;
    let followed = job_hooks::resume(&app)?;
    let cut_short = app.monitors.fail_interrupted()?;
    tokio::spawn(app.outbox.clone().run(app.stop.clone()));
    tokio::spawn(monitor::scheduler(app.clone()));
    tokio::spawn(browser::sweep(app.clone()));
    tracing::info!(resumed, extracts, followed, cut_short, "work taken up");
    Ok((app, trigger))
}

/// Once stopped: the jobs write what they have (each stays resumable), the browser goes.
async fn finish(app: &Arc<App>) {
    app.jobs.shutdown().await;
    if let Some(b) = &app.browser {
        b.close().await;
    }
    // Tasks still winding down may hold the app a moment longer: the directory is free
    // for the next server now.
    let _ = app.lock.unlock();
}

async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// The app over `args`, and the trigger that stops its jobs.
pub fn build(
    args: ServeConfig,
) -> anyhow::Result<(Arc<App>, trawl_core::pipeline::ShutdownTrigger)> {
    args.settings.crawl.validate()?;
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("creating {}", args.data.display()))?;
    // One server a data directory: a second would resume the first's jobs, fail its
    // checks and send its webhooks twice.
    let lock = std::fs::File::create(args.data.join("serve.lock"))
        .with_context(|| format!("creating {}", args.data.join("serve.lock").display()))?;
    lock.try_lock().map_err(|_| {
        anyhow::anyhow!(
            "{} is in use by another trawl serve or trawl mcp: give this one its own --data",
            args.data.display()
        )
    })?;
    let db = db::Db::open(&args.data.join("serve.db"))?;
    let (trigger, stop) = trawl_core::pipeline::shutdown();
    let usage = team::Usage::new(db.clone(), args.monthly_credits)?;
    let crawl = &args.settings.crawl;
    let outbox = webhooks::Outbox::new(
        db.clone(),
        webhooks::OutboxConfig {
            secret: args
                .settings
                .process
                .webhook_secret
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(trawl_runtime::webhook::WebhookConfig::secret_from),
            tries: crawl.webhook_tries.max(1),
            backoff: Duration::from_millis(crawl.webhook_backoff_ms.max(1)),
            allow_private: crawl.allow_private,
        },
    )?;
    db.with(|c| c.execute_batch(job_hooks::SCHEMA))?;
    let cache = cache::Cache::new(db.clone())?;
    let monitors = monitor::store::Store::new(db.clone())?;
    let jobs = Jobs::new(
        db.clone(),
        jobs::JobsConfig {
            dir: args.data.join("jobs"),
            base: args.settings.clone(),
            index: args.index_jobs,
            concurrency: args.job_concurrency,
            max_jobs: args.max_jobs,
        },
        usage.clone(),
        stop.clone(),
        args.cluster.then(|| {
            on_cluster::Cluster::new(args.settings.cluster.clone(), args.cluster_crawl.clone())
        }),
    )?;
    // Kept as digests: a key is compared by its digest, never by its bytes.
    let keys = args
        .api_keys
        .iter()
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .map(|k| (key_digest(k), owner_of(k)))
        .collect();
    let app = App {
        scraper: Scraper::new(&args.settings.crawl)?,
        browser: browser::Browser::new(&args.settings, &args.data)?,
        llm: llm::Llm::new(&args.settings.llm)?.map(Arc::new),
        extracts: Mutex::new(HashMap::new()),
        stop,
        jobs,
        db,
        keys,
        in_flight: Mutex::new(HashMap::new()),
        metrics: metrics::Metrics::default(),
        cache,
        usage,
        outbox,
        monitors,
        monitor_wake: Notify::new(),
        searcher: Default::default(),
        lock,
        args,
    };
    Ok((Arc::new(app), trigger))
}

fn key_digest(key: &str) -> [u8; 32] {
    sha2::Sha256::digest(key.as_bytes()).into()
}

fn owner_of(key: &str) -> String {
    let d = sha2::Sha256::digest(key.as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

pub fn router(app: Arc<App>) -> Router {
    let v2 = Router::new()
        .route("/v2/scrape", post(scrape))
        .route("/v2/map", post(map))
        .route("/v2/crawl", post(crawl_start))
        .route("/v2/crawl/active", get(crawl_active))
        .route("/v2/crawl/{id}", get(job_status).delete(job_cancel))
        .route("/v2/crawl/{id}/errors", get(job_errors))
        .route("/v2/batch/scrape", post(batch_start))
        .route("/v2/batch/scrape/{id}", get(job_status).delete(job_cancel))
        .route("/v2/batch/scrape/{id}/errors", get(job_errors))
        .route("/v2/extract", post(extract_start))
        .route("/v2/extract/{id}", get(extract_status))
        .route("/v2/search", post(search::route))
        .route("/v2/parse", post(parse::parse))
        .route("/v2/team/credit-usage", get(team::credit_usage_route))
        .route("/v2/team/credit-usage/historical", get(team::history_route))
        .route("/v2/team/queue-status", get(team::queue_status_route))
        .route("/v2/concurrency-check", get(team::concurrency_route))
        .route("/v2/monitor", post(monitor::create).get(monitor::list))
        .route(
            "/v2/monitor/{id}",
            get(monitor::get)
                .patch(monitor::update)
                .delete(monitor::delete),
        )
        .route("/v2/monitor/{id}/run", post(monitor::run))
        .route("/v2/monitor/{id}/checks", get(monitor::checks))
        .route(
            "/v2/monitor/{id}/checks/{check}",
            get(monitor::check_detail),
        )
        .route("/v1/scrape", post(v1::scrape))
        .route("/v1/map", post(v1::map))
        .route("/v1/crawl", post(v1::crawl))
        .route("/v1/crawl/{id}", get(job_status).delete(job_cancel))
        .route("/v1/crawl/{id}/errors", get(job_errors))
        .route("/v1/batch/scrape", post(v1::batch))
        .route("/v1/batch/scrape/{id}", get(job_status).delete(job_cancel))
        .route("/v1/batch/scrape/{id}/errors", get(job_errors))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, None, "Not found") })
        .layer(middleware::from_fn_with_state(app.clone(), auth));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics_text))
        // Screenshots and PDFs, by names nobody can guess (as Firecrawl's are served).
        .route("/artifacts/{name}", get(browser::artifact))
        .route("/artifacts/jobs/{job}/{name}", get(browser::job_artifact))
        .merge(v2)
        .layer(DefaultBodyLimit::max(app.args.max_request_bytes))
        .layer(middleware::from_fn_with_state(app.clone(), observe))
        .with_state(app)
}

async fn auth(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let owner = if app.keys.is_empty() {
        String::new()
    } else {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let given = given.map(key_digest);
        match given.and_then(|g| app.keys.iter().find(|(k, _)| *k == g)) {
            Some((_, owner)) => owner.clone(),
            None => {
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    None,
                    "Unauthorized: invalid or missing API key",
                )
                .into_response();
            }
        }
    };
    req.extensions_mut().insert(Owner(owner));
    next.run(req).await
}

/// Counts every answer, and gives the too-large answer Firecrawl's error body.
async fn observe(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "other".into());
    let started = Instant::now();
    let mut res = next.run(req).await;
    if res.status() == StatusCode::PAYLOAD_TOO_LARGE {
        res = ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("PAYLOAD_TOO_LARGE"),
            format!(
                "the request body is over {} bytes",
                app.args.max_request_bytes
            ),
        )
        .into_response();
    }
    app.metrics
        .observe(&route, res.status().as_u16(), started.elapsed());
    res
}

async fn metrics_text(State(app): State<Arc<App>>) -> impl IntoResponse {
    let running = app.jobs.running_count();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(running),
    )
}

/// A request slot of one key, given back when dropped.
struct Slot<'a> {
    app: &'a App,
    owner: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut m = self.app.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.owner);
            }
        }
    }
}

impl App {
    fn slot(&self, owner: &str) -> Result<Slot<'_>, ApiError> {
        let mut m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(owner.to_string()).or_default();
        if *n >= self.args.max_requests_per_key {
            return Err(rate_limited(format!(
                "Rate limit exceeded: {} requests of this key are in flight",
                self.args.max_requests_per_key
            )));
        }
        *n += 1;
        Ok(Slot {
            app: self,
            owner: owner.to_string(),
        })
    }

    /// Requests of `owner` in flight now.
    fn in_flight_of(&self, owner: &str) -> usize {
        let m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        m.get(owner).copied().unwrap_or(0)
    }

    fn job_slot(&self, owner: &str) -> Result<(), ApiError> {
        if self.jobs.active(owner) + extract::running(self, owner) >= self.args.max_jobs_per_key {
            return Err(rate_limited(format!(
                "Rate limit exceeded: {} jobs of this key are unfinished",
                self.args.max_jobs_per_key
            )));
        }
        Ok(())
    }
}

fn rate_limited(msg: String) -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        Some("RATE_LIMIT_EXCEEDED"),
        msg,
    )
}

type Answer = Result<axum::Json<Value>, ApiError>;

async fn scrape(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let req: ScrapeRequest = api::parse(&body)?;
    let doc = scrape_doc(&app, &owner, &headers, &req).await?;
    Ok(axum::Json(json!({"success": true, "data": doc})))
}

/// One scrape request's document (`/v2/scrape`, `/v1/scrape`), through the cache.
async fn scrape_doc(
    app: &Arc<App>,
    owner: &str,
    headers: &HeaderMap,
    req: &ScrapeRequest,
) -> Result<Value, ApiError> {
    let url = api::http_url(&req.url)?;
    let opts = req.options.resolve()?;
    app.usage.allow(owner).await?;
    let _slot = app.slot(owner)?;
    let origin = job_url(headers, "");
    let ask = scraping::Ask {
        source_url: &req.url,
        url: &url,
        opts: &opts,
        timeout: req.options.timeout.map(Duration::from_millis),
        owner,
        origin: &origin,
    };
    let doc = cache::scrape(app, ask, req.options.max_age, req.options.store_in_cache).await?;
    app.metrics.scraped(1);
    app.usage.spend(owner, 1);
    Ok(doc)
}

async fn extract_start(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    app.job_slot(&owner)?;
    let origin = job_url(&headers, "");
    // The job's row is written before the answer: off the async threads.
    tokio::task::spawn_blocking(move || {
        Ok(axum::Json(extract::start(&app, &owner, &body, &origin)?))
    })
    .await
    .map_err(ApiError::internal)?
}

async fn extract_status(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
) -> Answer {
    tokio::task::spawn_blocking(move || Ok(axum::Json(extract::status(&app, &id, &owner)?)))
        .await
        .map_err(ApiError::internal)?
}

async fn map(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    body: Bytes,
) -> Answer {
    let req: MapRequest = api::parse(&body)?;
    let links = map_links(&app, &owner, req).await?;
    Ok(axum::Json(json!({"success": true, "links": links})))
}

/// A map request's links (`/v2/map`, `/v1/map`).
async fn map_links(app: &Arc<App>, owner: &str, req: MapRequest) -> Result<Vec<Value>, ApiError> {
    let url = api::http_url(&req.url)?;
    let limit = match req.limit {
        Some(0) => {
            return Err(ApiError::bad_request(
                "Bad Request: limit must be at least 1",
            ));
        }
        Some(n) => (n as usize).min(sitemap_map::MAX_LIMIT),
        None => sitemap_map::DEFAULT_LIMIT,
    };
    let sitemap = match req.sitemap.as_deref() {
        None => SitemapUse::Include,
        Some(s) => s
            .parse()
            .map_err(|e: String| ApiError::bad_request(format!("Bad Request: {e}")))?,
    };
    let opts = MapOptions {
        limit,
        search: req.search.filter(|s| !s.trim().is_empty()),
        include_subdomains: req.include_subdomains.unwrap_or(true),
        ignore_query: req.ignore_query_parameters.unwrap_or(true),
        sitemap,
        pages: app.args.map_pages,
        timeout: req
            .timeout
            .map(Duration::from_millis)
            .unwrap_or(Duration::from_secs(60)),
    };
    let _slot = app.slot(owner)?;
    let links = sitemap_map::map(&app.scraper, &url, &opts).await?;
    Ok(links
        .into_iter()
        .map(|l| serde_json::to_value(l).unwrap_or(Value::Null))
        .collect())
}

fn job_url(headers: &HeaderMap, path: &str) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}{path}")
}

async fn start_job(
    app: &Arc<App>,
    kind: Kind,
    owner: &str,
    headers: &HeaderMap,
    body: &[u8],
    path: &str,
) -> Answer {
    app.job_slot(owner)?;
    app.usage.allow(owner).await?;
    let (id, invalid) = app.jobs.start(kind, owner, body)?;
    if serde_json::from_slice::<Value>(body)
        .is_ok_and(|b| b.get("webhook").is_some_and(|w| !w.is_null()))
    {
        job_hooks::follow(app, &id, &job_url(headers, ""));
    }
    let mut out =
        json!({"success": true, "id": id, "url": job_url(headers, &format!("{path}/{id}"))});
    if kind == Kind::Batch {
        out["invalidURLs"] = invalid.into();
    }
    Ok(axum::Json(out))
}

async fn crawl_start(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    start_job(&app, Kind::Crawl, &owner, &headers, &body, "/v2/crawl").await
}

async fn batch_start(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    start_job(
        &app,
        Kind::Batch,
        &owner,
        &headers,
        &body,
        "/v2/batch/scrape",
    )
    .await
}

/// `?skip=&limit=`, read by hand: a bad value (or a query that is not one) gets
/// Firecrawl's error body.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct PageQuery(Vec<(String, String)>);

impl PageQuery {
    fn numbers(&self) -> Result<(usize, Option<usize>), ApiError> {
        self.numbers_named("skip")
    }

    /// The last value of `what`, as given.
    fn text(&self, what: &str) -> Option<String> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == what)
            .map(|(_, v)| v.clone())
    }

    /// `?<first>=&limit=`: the offset's name (`skip`, `offset`) and the limit.
    fn numbers_named(&self, first: &str) -> Result<(usize, Option<usize>), ApiError> {
        let num = |what: &str| -> Result<Option<usize>, ApiError> {
            self.0
                .iter()
                .rev()
                .find(|(k, _)| k == what)
                .map(|(_, s)| {
                    s.parse::<usize>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "Bad Request: {what} must be a number, not {s:?}"
                        ))
                    })
                })
                .transpose()
        };
        Ok((num(first)?.unwrap_or(0), num("limit")?))
    }
}

/// A job's status page; `next` is built on the path asked (a crawl's or a batch's).
async fn job_status(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
    q: Query<PageQuery>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Answer {
    tokio::task::spawn_blocking(move || {
        let base = job_url(&headers, uri.path());
        let (skip, limit) = q.numbers()?;
        // A page of results is work (read, extracted again for some formats): it takes
        // one of the key's request slots.
        let _slot = app.slot(&owner)?;
        let v = app.jobs.status(&id, &owner, skip, limit, &base)?;
        Ok(axum::Json(v))
    })
    .await
    .map_err(ApiError::internal)?
}

async fn job_cancel(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
) -> Answer {
    if app.jobs.cancel(&id, &owner)? {
        Ok(axum::Json(json!({"success": true, "status": "cancelled"})))
    } else {
        Err(ApiError::new(
            StatusCode::CONFLICT,
            None,
            "Job already finished",
        ))
    }
}

async fn job_errors(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
) -> Answer {
    tokio::task::spawn_blocking(move || {
        let _slot = app.slot(&owner)?;
        Ok(axum::Json(app.jobs.errors(&id, &owner)?))
    })
    .await
    .map_err(ApiError::internal)?
}

async fn crawl_active(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
) -> Answer {
    Ok(axum::Json(
        json!({"success": true, "crawls": app.jobs.active_crawls(&owner)?}),
    ))
}
