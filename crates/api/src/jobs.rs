//! Crawl and batch-scrape jobs: each is an embedded crawl (`embedded::crawl`, the same
//! frontier, fetcher, robots.txt, politeness, dedup and crawl store as `trawl crawl`) in
//! its own directory under `<data>/jobs/<id>`, started when one of the `--max-jobs` slots
//! is free. A job's row in `serve.db` and its crawl store outlive the server: a job still
//! running at a stop (or a crash) is resumed when the server starts again. Results are
//! read back from the job's `pages.jsonl`, through an index of its lines kept as the file
//! grows, so a status page reads only the lines it returns.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};
use trawl_core::PageRecord;
use trawl_core::pipeline::{Shutdown, ShutdownTrigger, shutdown};
use trawl_core::settings::Settings;
use trawl_store::dir::DirState;
use url::Url;

use super::api::{self, ApiError, PageOptions, PageParts};
use super::db::{Db, JobRow};
use super::lines::{LineIndex, read_record, refresh};
use super::on_cluster::{Cluster, Ended};
use super::plan::{self, Planned};
use super::{browser, page};
use trawl_runtime::{CrawlPlan, LiveCounts};

/// Documents per status page, and bytes, at most (Firecrawl's own page size).
pub const PAGE_DOCS: usize = 100;
const PAGE_BYTES: usize = 10 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Crawl,
    Batch,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Crawl => "crawl",
            Kind::Batch => "batch",
        }
    }
}

struct Running {
    trigger: ShutdownTrigger,
    live: watch::Receiver<LiveCounts>,
}

/// Jobs whose results are kept ready to read, besides the running ones.
const CACHED_JOBS: usize = 64;

/// A job as its status pages read it.
struct JobView {
    pages: PathBuf,
    page: PageOptions,
    hide_duplicates: bool,
    total: Option<u64>,
    index: Mutex<LineIndex>,
}

pub struct Jobs {
    db: Db,
    dir: PathBuf,
    base: Settings,
    /// Index each job's pages for `/v2/search` (in-process jobs only).
    index: bool,
    /// Each job's pages are credits of its key.
    usage: super::team::Usage,
    concurrency: usize,
    slots: Arc<Semaphore>,
    running: Mutex<HashMap<String, Running>>,
    /// Jobs holding a slot (the others in `running` wait for one).
    crawling: Mutex<std::collections::HashSet<String>>,
    caches: Mutex<HashMap<String, Arc<JobView>>>,
    server_stop: Shutdown,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Jobs run on the cluster's services instead (`trawl serve --cluster`).
    cluster: Option<Arc<Cluster>>,
}

/// How the jobs run: where, over which settings, how many at once.
pub struct JobsConfig {
    /// `DATA/jobs`.
    pub dir: PathBuf,
    /// The server's settings, each job's request over them.
    pub base: Settings,
    /// Index each job's pages for `/v2/search` (in-process jobs only).
    pub index: bool,
    /// Requests in flight in each job.
    pub concurrency: usize,
    /// Jobs crawling at once.
    pub max_jobs: usize,
}

impl Jobs {
    pub fn new(
        db: Db,
        cfg: JobsConfig,
        usage: super::team::Usage,
        server_stop: Shutdown,
        cluster: Option<Arc<Cluster>>,
    ) -> anyhow::Result<Arc<Self>> {
        let JobsConfig {
            dir,
            base,
            index,
            concurrency,
            max_jobs,
        } = cfg;
        std::fs::create_dir_all(&dir)?;
        Ok(Arc::new(Self {
            db,
            dir,
            base,
            index,
            usage,
            concurrency: concurrency.max(1),
            slots: Arc::new(Semaphore::new(max_jobs.max(1))),
            running: Mutex::new(HashMap::new()),
            crawling: Mutex::new(Default::default()),
            caches: Mutex::new(HashMap::new()),
            server_stop,
            tasks: Mutex::new(Vec::new()),
            cluster,
        }))
    }

    /// Starts a job; answers its id and the URLs left out as invalid (batches).
    pub fn start(
        self: &Arc<Self>,
        kind: Kind,
        owner: &str,
        body: &[u8],
    ) -> Result<(String, Vec<String>), ApiError> {
        let request = String::from_utf8_lossy(body).into_owned();
        let id = uuid::Uuid::new_v4().to_string();
        let planned = self.plan(kind, &id, &request)?;
        if self.cluster.is_some() && planned.page.script.as_ref().is_some_and(|s| s.draws()) {
            // The cluster's renderers keep their files where they run, not with the job.
            return Err(ApiError::bad_request(
                "Bad Request: screenshots and PDFs of jobs run on the cluster are not kept: \
                 ask /v2/scrape for them, or run the job in the server",
            ));
        }
        let invalid = planned.invalid.clone();
        let row = JobRow {
            id: id.clone(),
            kind: kind.name().into(),
            owner: owner.into(),
            request,
            status: "scraping".into(),
            error: None,
            created_at: chrono::Utc::now().to_rfc3339(),
            finished_at: None,
        };
        self.db.insert_job(&row)?;
        self.spawn(row, planned, false);
        Ok((id, invalid))
    }

    /// Jobs the last server left running: resumed from their crawl stores (a job whose
    /// crawl had finished is only marked so).
    pub fn resume_unfinished(self: &Arc<Self>) -> anyhow::Result<usize> {
        let mut n = 0;
        for row in self.db.unfinished_jobs()? {
            let kind = if row.kind == "batch" {
                Kind::Batch
            } else {
                Kind::Crawl
            };
            let planned = match self.plan(kind, &row.id, &row.request) {
                Ok(p) => p,
                Err(e) => {
                    self.finish(&row.id, "failed", Some(&e.message));
                    continue;
                }
            };
            if self.cluster.is_some() {
                // The cluster knows where the job is (its marker); the job waits its turn.
                self.spawn(row, planned, false);
                n += 1;
                continue;
            }
            // One job whose directory cannot be read fails alone: the others go on.
            let resume = match trawl_store::dir::inspect(&planned.opts.out) {
                Ok(DirState::Empty) => false,
                Ok(DirState::Crawl(s)) if s.finished => {
                    self.finish(&row.id, "completed", None);
                    continue;
                }
                Ok(DirState::Crawl(_)) => true,
                Ok(other) => {
                    let why = format!("the job's directory cannot be resumed: {other:?}");
                    self.finish(&row.id, "failed", Some(&why));
                    continue;
                }
                Err(e) => {
                    let why = format!("the job's directory cannot be read: {e}");
                    self.finish(&row.id, "failed", Some(&why));
                    continue;
                }
            };
            tracing::info!(job = %row.id, resume, "job resumed after a restart");
            self.spawn(row, planned, resume);
            n += 1;
        }
        Ok(n)
    }

    fn spawn(self: &Arc<Self>, row: JobRow, planned: Planned, resume: bool) {
        let (trigger, stop) = shutdown();
        let (live_tx, live_rx) = watch::channel(LiveCounts::default());
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                row.id.clone(),
                Running {
                    trigger,
                    live: live_rx,
                },
            );
        let jobs = self.clone();
        let mut opts = planned.opts;
        if resume {
            opts.start = trawl_runtime::StartMode::Resume;
        }
        opts.control.stop = Some(stop);
        opts.control.live = Some(Arc::new(live_tx));
        let id = row.id.clone();
        let task = tokio::spawn(async move {
            // A panic in the job's task must not leave it `scraping` for ever (a task
            // cancelled with the runtime stays resumable).
            let inner = tokio::spawn(jobs.clone().run(row, opts));
            if let Err(e) = inner.await
                && e.is_panic()
            {
                tracing::error!(job = %id, "the job's task panicked");
                jobs.finish(&id, "failed", Some("the job's task panicked"));
                jobs.forget_running(&id);
            }
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    async fn run(self: Arc<Self>, row: JobRow, opts: CrawlPlan) {
        let id = row.id.clone();
        if let (Some(cluster), Some(stop), Some(live)) = (
            self.cluster.clone(),
            opts.control.stop.clone(),
            opts.control.live.clone(),
        ) {
            let server = self.server_stop.clone();
            let db = self.db.clone();
            let unfinished = move |job: &str| {
                db.job(job)
                    .ok()
                    .flatten()
                    .is_some_and(|r| r.status == "scraping")
            };
            let r = cluster
                .run(
                    &id,
                    &opts,
                    &opts.out,
                    &live,
                    stop,
                    || server.is_shutdown(),
                    unfinished,
                )
                .await;
            match r {
                Ok(Ended::Completed) => self.finish(&id, "completed", None),
                // Cancelled: marked so already. Stopped: waited for at the next start.
                Ok(Ended::Cancelled | Ended::Stopped) => {}
                Err(e) => {
                    tracing::warn!(job = %id, error = %format!("{e:#}"), "job failed on the cluster");
                    self.finish(&id, "failed", Some(&format!("{e:#}")));
                }
            }
            self.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            return;
        }
        let mut server_stop = self.server_stop.clone();
        let mut job_stop = opts.control.stop.clone();
        let permit = tokio::select! {
            p = self.slots.clone().acquire_owned() => p.ok(),
            _ = server_stop.recv() => None,
            _ = async { if let Some(s) = job_stop.as_mut() { s.recv().await } } => None,
        };
        let stopped = job_stop.as_ref().is_some_and(Shutdown::is_shutdown);
        // The server's stop (`shutdown`) interrupts the crawl as Ctrl-C would: it stays
        // resumable, and is resumed at the next start.
        let outcome = match permit {
            Some(_) if !stopped => {
                self.crawling
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id.clone());
                // A resumed crawl cuts its pages.jsonl back first: index it anew.
                self.caches
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                Some(trawl_runtime::crawl(opts).await)
            }
            _ => None,
        };
        drop(permit);
        self.crawling
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        match outcome {
            Some(Ok((report, _))) if !report.interrupted => {
                self.usage.spend(&row.owner, report.pages.max(0) as u64);
                self.finish(&id, "completed", None);
            }
            Some(Err(e)) => {
                tracing::warn!(job = %id, error = %format!("{e:#}"), "job failed");
                self.finish(&id, "failed", Some(&format!("{e:#}")));
            }
            // Interrupted: cancelled (marked already) or the server stopping.
            _ => {}
        }
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    fn forget_running(&self, id: &str) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    fn finish(&self, id: &str, status: &str, error: Option<&str>) {
        if let Err(e) = self.db.finish_job(id, status, error) {
            tracing::error!(job = %id, error = %format!("{e:#}"), "the job's end could not be stored");
        }
    }

    /// Cancels a job: `Ok(false)` when it had already ended.
    pub fn cancel(&self, id: &str, owner: &str) -> Result<bool, ApiError> {
        let row = self.owned(id, owner)?;
        if row.status != "scraping" || !self.db.finish_job(id, "cancelled", None)? {
            return Ok(false);
        }
        if let Some(r) = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
        {
            r.trigger.trigger();
        }
        Ok(true)
    }

    /// Stops every job (each stays resumable) and waits for their crawls to write what
    /// they have.
    pub async fn shutdown(&self) {
        for r in self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            r.trigger.trigger();
        }
        let tasks: Vec<_> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            let _ = t.await;
        }
    }

    fn owned(&self, id: &str, owner: &str) -> Result<JobRow, ApiError> {
        match self.db.job(id)? {
            Some(r) if r.owner == owner => Ok(r),
            _ => Err(ApiError::not_found()),
        }
    }

    /// Jobs whose crawl is running or waiting for a slot.
    pub fn running_count(&self) -> usize {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// `owner`'s jobs not ended: those crawling (or on the cluster) and those waiting for
    /// a slot.
    pub fn queue_of(&self, owner: &str) -> anyhow::Result<(usize, usize)> {
        let rows = self.db.unfinished_jobs()?;
        let crawling = self.crawling.lock().unwrap_or_else(|e| e.into_inner());
        let mine: Vec<_> = rows.iter().filter(|r| r.owner == owner).collect();
        let on = mine
            .iter()
            .filter(|r| self.cluster.is_some() || crawling.contains(&r.id))
            .count();
        Ok((on, mine.len() - on))
    }

    /// Jobs of `owner` not yet ended.
    pub fn active(&self, owner: &str) -> usize {
        self.db
            .unfinished_jobs()
            .map(|v| v.iter().filter(|r| r.owner == owner).count())
            .unwrap_or(0)
    }

    /// A status page: `skip` results in, at most `limit` of them, with `next` built on
    /// `base` (the request's own URL without its query) while more are known.
    pub fn status(
        &self,
        id: &str,
        owner: &str,
        skip: usize,
        limit: Option<usize>,
        base: &str,
    ) -> Result<Value, ApiError> {
        let row = self.owned(id, owner)?;
        let view = self.view(&row)?;
        let mut ix = view.index.lock().unwrap_or_else(|e| e.into_inner());
        refresh(&mut ix, &view.pages, view.hide_duplicates)?;
        let available = ix.data.len();
        let live = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .map(|r| *r.live.borrow());
        // On the cluster the results arrive at the end: until then the counts are the
        // crawl's own.
        let completed = match (row.status.as_str(), live, &self.cluster) {
            ("scraping", Some(l), Some(_)) => available.max(l.pages.max(0) as usize),
            _ => available,
        };
        let total = match (row.status.as_str(), view.total, live) {
            ("scraping", Some(t), _) => t as usize,
            ("scraping", None, Some(l)) => completed + l.queued,
            _ => completed,
        }
        .max(completed);
        let asked_limit = limit;
        let limit = limit.unwrap_or(PAGE_DOCS).clamp(1, PAGE_DOCS);
        let mut data = Vec::new();
        let mut bytes = 0usize;
        let mut file = std::fs::File::open(&view.pages).ok();
        let files = artifacts_base(base, id);
        let mut n = 0;
        for &(off, len) in ix.data.iter().skip(skip).take(limit) {
            if bytes > 0 && bytes + len as usize > PAGE_BYTES {
                break;
            }
            let Some(f) = file.as_mut() else { break };
            let rec = read_record(f, off, len)?;
            bytes += len as usize;
            n += 1;
            data.push(self.document(rec, &view.page, &files)?);
        }
        let mut out = json!({
            "success": true,
            "status": row.status,
            "completed": completed,
            "total": total,
            "creditsUsed": completed,
            "expiresAt": expires_at(&row.created_at),
            "data": data,
        });
        if skip + n < available {
            // The page size asked for stays on the next page.
            let asked = asked_limit
                .map(|l| format!("&limit={l}"))
                .unwrap_or_default();
            out["next"] = format!("{base}?skip={}{asked}", skip + n).into();
        }
        if let Some(e) = row.error {
            out["error"] = e.into();
        }
        Ok(out)
    }

    pub fn errors(&self, id: &str, owner: &str) -> Result<Value, ApiError> {
        let row = self.owned(id, owner)?;
        let view = self.view(&row)?;
        let mut ix = view.index.lock().unwrap_or_else(|e| e.into_inner());
        refresh(&mut ix, &view.pages, view.hide_duplicates)?;
        Ok(json!({"errors": ix.errors, "robotsBlocked": ix.robots_blocked}))
    }

    /// Crawls of `owner` still running, for `/v2/crawl/active`.
    pub fn active_crawls(&self, owner: &str) -> Result<Vec<Value>, ApiError> {
        let rows = self.db.unfinished_jobs()?;
        Ok(rows
            .into_iter()
            .filter(|r| r.owner == owner && r.kind == "crawl")
            .map(|r| {
                let req: Value = serde_json::from_str(&r.request).unwrap_or(Value::Null);
                json!({"id": r.id, "teamId": r.owner, "url": req["url"], "options": req})
            })
            .collect())
    }

    /// What reading a job's results needs, planned once and kept (with its line index)
    /// while the job is read; the jobs not running are forgotten past [`CACHED_JOBS`].
    fn view(&self, row: &JobRow) -> Result<Arc<JobView>, ApiError> {
        if let Some(v) = self
            .caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&row.id)
        {
            return Ok(v.clone());
        }
        let kind = if row.kind == "batch" {
            Kind::Batch
        } else {
            Kind::Crawl
        };
        let planned = self.plan(kind, &row.id, &row.request)?;
        let view = Arc::new(JobView {
            pages: planned.opts.out.join("pages.jsonl"),
            page: planned.page,
            hide_duplicates: planned.hide_duplicates,
            total: planned.total,
            index: Mutex::new(LineIndex::default()),
        });
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if caches.len() >= CACHED_JOBS {
            let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            caches.retain(|id, _| running.contains_key(id));
        }
        caches.insert(row.id.clone(), view.clone());
        Ok(view)
    }

    /// A request, checked and turned into the crawl it runs.
    fn plan(&self, kind: Kind, id: &str, request: &str) -> Result<Planned, ApiError> {
        plan::plan(
            &self.base,
            self.index && self.cluster.is_none(),
            self.concurrency,
            &self.dir.join(id),
            kind,
            request,
        )
    }

    fn document(
        &self,
        rec: PageRecord,
        opts: &PageOptions,
        files: &str,
    ) -> Result<Value, ApiError> {
        let mut parts = PageParts {
            source_url: rec.url.clone(),
            url: rec.final_url.clone(),
            status: rec.status,
            content_type: rec.content_type.clone(),
            scrape_id: rec
                .facts
                .warc
                .as_ref()
                .map(|w| w.record_id.clone())
                .unwrap_or_default(),
            ..Default::default()
        };
        if let Some(d) = &rec.duplicate_of {
            parts.extra.insert("duplicateOf".into(), d.clone().into());
        }
        // A page's script ran in the crawl's renderer: its files are the job's. A page it
        // failed on keeps its document, the failure said as its warning.
        if let Some(r) = &rec.render
            && opts.script.is_some()
        {
            match r.artifacts.clone().map(|a| browser::results(a, files)) {
                Some(Ok((shot, actions))) => {
                    parts.screenshot = shot;
                    if opts.script.as_ref().is_some_and(|s| !s.actions.is_empty()) {
                        parts.actions = Some(actions);
                    }
                }
                Some(Err(e)) => parts.warning = Some(e.message),
                None => {
                    parts.warning = Some(format!(
                        "the page was not rendered: {}",
                        r.error.as_deref().unwrap_or("no browser")
                    ))
                }
            }
        }
        parts
            .extra
            .insert("fetchedAt".into(), rec.fetched_at.clone().into());
        match (&rec.raw_html, Url::parse(&rec.final_url)) {
            (Some(html), Ok(base)) if opts.needs_markup() => {
                page::render_html(html, &base, opts, 0, &mut parts)?;
            }
            _ => {
                parts.title = rec.title;
                parts.meta = rec.meta;
                parts.markdown = rec.markdown.or(Some(rec.text));
            }
        }
        Ok(api::document(parts, &opts.formats, None))
    }
}

/// Where a job's files are served: `base` is the job's status URL.
fn artifacts_base(base: &str, id: &str) -> String {
    let origin = ["/v2/", "/v1/"]
        .iter()
        .filter_map(|p| base.find(p))
        .min()
        .map_or(base, |i| &base[..i]);
    format!("{origin}/artifacts/jobs/{id}")
}

fn expires_at(created: &str) -> Value {
    chrono::DateTime::parse_from_rfc3339(created)
        .map(|t| (t + chrono::Duration::hours(24)).to_rfc3339().into())
        .unwrap_or(Value::Null)
}
