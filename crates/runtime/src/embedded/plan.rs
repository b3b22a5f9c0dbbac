//! What a crawl will do (`Plan`, checked before anything is written) and where it writes (`Outputs`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use trawl_core::spec::CrawlSpec;
use trawl_fetcher::warcout::{WarcConfig, WarcWriterTask};
use trawl_index::IndexOptions;
use trawl_indexer::JsonlSink;
use trawl_store::history::StoreHistory;
use trawl_store::journal::{Journal, JournalTask};
use trawl_store::resume::Resume;

use crate::crawl_dir::{self, Start};
use crate::index_task::{IndexTask, start_index};
use crate::plan::{CrawlPlan, StartMode};

/// What a crawl will do, worked out (and checked) before anything is written.
pub(super) struct Plan {
    pub(super) spec: CrawlSpec,
    pub(super) seeds: Vec<String>,
    pub(super) start: Start,
    pub(super) pages: PathBuf,
    pub(super) report: PathBuf,
    pub(super) warc_dir: PathBuf,
    pub(super) index: Option<IndexOptions>,
    /// A re-crawl's earlier crawl: where it is and what it knew.
    pub(super) since: Option<(PathBuf, Arc<StoreHistory>)>,
}

impl Plan {
    pub(super) fn new(
        opts: &CrawlPlan,
        started_at: &chrono::DateTime<chrono::Utc>,
    ) -> anyhow::Result<Self> {
        opts.crawl.validate()?;
        if opts.concurrency == 0 {
            anyhow::bail!("--concurrency must be at least 1");
        }
        let (seeds, start) = opts.targets.resolve(&opts.crawl.normalizer())?;
        let mut spec = CrawlSpec {
            crawl: format!("crawl-{}", started_at.format("%Y%m%dT%H%M%S%.3fZ")),
            start: start.iter().map(|(u, k)| (u.to_string(), *k)).collect(),
            settings: opts.crawl.clone(),
            index: opts.index.settings.index.clone(),
            since: None,
            due_only: false,
            state_shards: 1,
        };
        let start_kind = crawl_dir::decide(
            &opts.out,
            &spec.start,
            opts.start == StartMode::Resume,
            opts.start == StartMode::Overwrite,
        )?;
        let since = match (&opts.since, &start_kind) {
            (Some(d), _) => Some(d.clone()),
            (None, Start::Resume(s)) => s.since.clone(),
            _ => None,
        };
        let since = match since {
            Some(d) => {
                let h = StoreHistory::open(&d).with_context(|| {
                    format!("--since {}: the crawl to compare with", d.display())
                })?;
                Some((d, Arc::new(h)))
            }
            None => None,
        };
        let index = (!opts.index.no_index).then(|| match (&since, &opts.index.index_uri) {
            // A re-crawl updates the earlier crawl's index: only changed pages are written.
            (Some((_, h)), None) => opts.index.settings.options(&h.index),
            _ => opts.index.options(&opts.out),
        });
        if let Some(o) = index.as_ref().filter(|o| o.embed) {
            // A mistyped model directory stops the crawl before any output is touched.
            trawl_index::model::check_dir(&trawl_index::model::resolve_dir(
                o.model_dir.as_deref(),
            ))?;
        }
        if let Start::Resume(s) = &start_kind {
            // The crawl keeps its id; the settings are this command's.
            spec.crawl = s.crawl.clone();
        }
        Ok(Plan {
            spec,
            seeds,
            start: start_kind,
            pages: opts.out.join("pages.jsonl"),
            report: opts.out.join("report.json"),
            warc_dir: opts.out.join("warc"),
            index,
            since,
        })
    }
}

/// Where the crawl writes: the crawl store, the index task, the WARC writer and
/// `pages.jsonl`.
pub(super) struct Outputs {
    pub(super) journal_task: JournalTask,
    pub(super) journal: Journal,
    /// What the store held, for a resumed crawl.
    pub(super) resume: Option<Resume>,
    pub(super) index: Option<IndexTask>,
    pub(super) warc: Option<WarcWriterTask>,
    pub(super) sink: Arc<Mutex<JsonlSink>>,
    /// A re-crawl's `changes.jsonl`.
    pub(super) changes: Option<JsonlSink>,
}

impl Outputs {
    /// Everything was checked by [`Plan::new`]; this is where the directory is written. A
    /// resumed crawl's files are first cut back to what the store committed, and the pages
    /// written but not yet indexed at the stop go to the index again.
    pub(super) async fn open(opts: &CrawlPlan, plan: &Plan) -> anyhow::Result<Outputs> {
        let out = &opts.out;
        if plan.start == Start::Overwrite {
            trawl_store::dir::remove_outputs(out)
                .with_context(|| format!("removing the earlier crawl in {}", out.display()))?;
        }
        std::fs::create_dir_all(out)
            .with_context(|| format!("creating output directory {}", out.display()))?;
        let started_at = chrono::Utc::now().to_rfc3339();
        let changes_path = out.join("changes.jsonl");
        let (conn, resume) = match &plan.start {
            Start::Resume(_) => {
                let (conn, r) = trawl_store::resume::open(out, &plan.spec)?;
                crawl_dir::cut_back(&plan.pages, r.pages_offset)?;
                crawl_dir::cut_back(&changes_path, r.changes_offset)?;
                crawl_dir::repair_warc(&plan.warc_dir)?;
                (conn, Some(r))
            }
            Start::Fresh | Start::Overwrite => (
                trawl_store::resume::create(out, &plan.spec, &started_at)?,
                None,
            ),
        };
        use trawl_store::schema::{self, keys};
        if let Some(o) = &plan.index {
            schema::set(&conn, keys::INDEX_URI, &o.uri)?;
        }
        let changes = match &plan.since {
            Some((d, _)) => {
                schema::set(&conn, keys::SINCE, &d.to_string_lossy())?;
                Some(JsonlSink::append(&changes_path)?)
            }
            None => None,
        };
        let journal_task = JournalTask::start(conn)?;
        let journal = journal_task.journal();
        let warc =
            WarcConfig::for_crawl(&plan.spec.settings, plan.warc_dir.clone(), "trawl".into())
                .map(WarcWriterTask::start)
                .transpose()?;
        let sink = Arc::new(Mutex::new(JsonlSink::append(&plan.pages)?));
        let index = match &plan.index {
            Some(o) => Some(
                start_index(
                    o,
                    &plan.pages,
                    plan.since.is_some(),
                    resume.as_ref(),
                    &journal,
                )
                .await?,
            ),
            None => None,
        };
        Ok(Outputs {
            journal_task,
            journal,
            resume,
            index,
            warc,
            sink,
            changes,
        })
    }
}
