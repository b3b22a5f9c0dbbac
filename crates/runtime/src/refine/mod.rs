//! Refining pages for LM training outside a crawl (`trawl refine`): pages from web
//! archives (a crawl's own WARC files or Common Crawl's), crawl directories or saved HTML,
//! rendered to ReScraper's lines, given an edit program by the engine the refiner stage
//! builds from the same settings (trawl's extractor, or a model), executed, and written as
//! JSON Lines in input order, with a report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
use trawl_core::settings::RefineSettings;
use trawl_refine::page::Refined;
use trawl_refine::program::Mode;

mod pipeline;

/// One run of `trawl refine`, as a value.
#[derive(Clone)]
pub struct RefinePlan {
    /// WARC/ARC files (gzip or plain), crawl output directories (their WARC files) or HTML
    /// files.
    pub inputs: Vec<PathBuf>,
    /// Where `refined.jsonl`, `training.jsonl` and `refine-report.json` go.
    pub out: PathBuf,
    /// The engine, as the refiner stage's settings name it.
    pub settings: RefineSettings,
    /// How a program's text is read back: trawl's reader or ReScraper's own.
    pub mode: Mode,
    /// Pages refined at once.
    pub workers: usize,
    /// BFF-style dedup of the refined texts.
    pub dedup: Option<NgramDedupPlan>,
    /// Also write `training.jsonl`: (numbered page, program) pairs in ReScraper's SFT shape.
    pub training_pairs: bool,
    /// Stop after this many pages.
    pub limit: Option<usize>,
    pub progress: Arc<dyn RefineProgress>,
}

/// Drop near-copies of earlier refined pages: a page whose word n-grams are mostly
/// (`threshold`) in a Bloom filter of the earlier pages' n-grams, sized for `expected`.
#[derive(Debug, Clone, Copy)]
pub struct NgramDedupPlan {
    pub ngram: usize,
    pub threshold: f64,
    pub expected: u64,
}

/// Where a run reports how far it is.
pub trait RefineProgress: Send + Sync {
    fn update(&self, report: &RefineReport, elapsed: Duration);
    fn finish(&self);
}

/// `refine-report.json`.
#[derive(Debug, Default, Serialize)]
pub struct RefineReport {
    pub engine: String,
    pub reader: String,
    pub inputs: usize,
    pub pages: usize,
    pub refined: usize,
    pub dropped: usize,
    pub decisions: BTreeMap<String, usize>,
    pub provenance: BTreeMap<String, usize>,
    pub skipped: BTreeMap<String, usize>,
    pub errors: BTreeMap<String, usize>,
    pub fallbacks: usize,
    pub warnings: BTreeMap<String, usize>,
    pub duplicates: usize,
    pub dedup_filter_bytes: usize,
    pub records_not_html: usize,
    pub malformed: Vec<String>,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub elapsed_s: f64,
    pub pages_per_s: f64,
    pub completion_tokens_per_s: f64,
}

impl RefineReport {
    /// The counts so far, as a progress display shows them.
    pub fn progress_line(&self, elapsed: Duration) -> String {
        let s = elapsed.as_secs_f64().max(1e-9);
        let skipped: usize = self.skipped.values().sum();
        format!(
            "{} pages · {:.1} pages/s · {} refined · {} dropped · {} skipped · {} fallbacks · {} tokens out ({:.0}/s)",
            self.pages,
            self.pages as f64 / s,
            self.refined,
            self.dropped,
            skipped,
            self.fallbacks,
            self.completion_tokens,
            self.completion_tokens as f64 / s
        )
    }

    pub(crate) fn add(&mut self, r: &Refined) {
        self.pages += 1;
        if let Some(s) = &r.skipped {
            *self.skipped.entry(s.clone()).or_default() += 1;
            return;
        }
        if let Some(d) = r.decision {
            *self
                .decisions
                .entry(format!("{d:?}").to_lowercase())
                .or_default() += 1;
        }
        if let Some(p) = &r.provenance {
            *self.provenance.entry(p.clone()).or_default() += 1;
        }
        if let Some(e) = &r.error {
            let kind: String = e.split([' ', '(']).take(3).collect::<Vec<_>>().join(" ");
            *self.errors.entry(kind).or_default() += 1;
        }
        self.fallbacks += usize::from(r.fell_back);
        for w in &r.warnings {
            let name = serde_json::to_value(w)
                .ok()
                .and_then(|v| v["warning"].as_str().map(str::to_string));
            *self.warnings.entry(name.unwrap_or_default()).or_default() += 1;
        }
        if r.text.is_some() {
            self.refined += 1;
        } else {
            self.dropped += 1;
        }
        self.prompt_tokens += r.tokens.prompt;
        self.completion_tokens += r.tokens.completion;
    }

    /// The counts a run prints at the end, with where its outputs in `out` are.
    pub fn summary(&self, out: &Path) -> String {
        let counts = |m: &BTreeMap<String, usize>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "refined {} of {} pages in {:.1}s ({:.1} pages/s) with {}: decisions [{}], skipped [{}], {} fallbacks, {} near-copies dropped\noutputs: {} , {}",
            self.refined,
            self.pages,
            self.elapsed_s,
            self.pages_per_s,
            self.engine,
            counts(&self.decisions),
            counts(&self.skipped),
            self.fallbacks,
            self.duplicates,
            out.join("refined.jsonl").display(),
            out.join("refine-report.json").display()
        )
    }
}

/// Refines every page of `plan.inputs` into `plan.out`; the report is written there too.
pub fn refine(plan: &RefinePlan) -> anyhow::Result<RefineReport> {
    let engine = trawl_refiner::engine::build(&plan.settings)?;
    let files = expand(&plan.inputs)?;
    std::fs::create_dir_all(&plan.out)
        .with_context(|| format!("creating {}", plan.out.display()))?;
    let report = RefineReport {
        engine: engine.name(),
        reader: format!("{:?}", plan.mode).to_lowercase(),
        inputs: files.len(),
        ..RefineReport::default()
    };
    let mut out = pipeline::Output::create(plan, report)?;
    let side = Mutex::new(pipeline::Side::default());
    let workers = plan.workers.max(1);
    pipeline::refine_in_order(
        &pipeline::Work {
            engine: &engine,
            mode: plan.mode,
            workers,
            max_html: plan.settings.refine_max_html_bytes,
            limit: plan.limit.unwrap_or(usize::MAX),
        },
        &files,
        &side,
        &mut out,
    )?;
    let side = side.into_inner().unwrap_or_else(|e| e.into_inner());
    out.finish(side, &plan.out)
}

fn is_archive(p: &Path) -> bool {
    let s = p.to_string_lossy().to_lowercase();
    [".warc", ".warc.gz", ".arc", ".arc.gz"]
        .iter()
        .any(|x| s.ends_with(x))
}

pub(crate) fn is_html(p: &Path) -> bool {
    let s = p.to_string_lossy().to_lowercase();
    s.ends_with(".html") || s.ends_with(".htm")
}

/// The files behind the inputs: archives and HTML files, a crawl directory's WARC files.
pub fn expand(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let dir = if p.join("warc").is_dir() {
                p.join("warc")
            } else {
                p.clone()
            };
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .with_context(|| format!("reading {}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| is_archive(f) || is_html(f))
                .collect();
            files.sort();
            if files.is_empty() {
                bail!("{}: no WARC, ARC or HTML files", dir.display());
            }
            out.extend(files);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    Ok(out)
}

/// A response record's HTML, decoded to UTF-8, or `None`.
pub(crate) fn html_of(rec: &trawl_corpus::archive::Record) -> Option<String> {
    if rec.kind != "response" {
        return None;
    }
    let (_, ct, body) = trawl_corpus::ingest::decoded_response(rec).ok()?;
    trawl_corpus::ingest::looks_html(&ct, &body)
        .then(|| trawl_body::decode_html(&body, Some(&ct)).0)
}
