//! The refiner stage: a crawl's kept HTML pages refined the way ReScraper cleans pages for
//! LM pretraining (`trawl-refine`: numbered lines, an edit program from trawl's extractor
//! or a model, the deterministic executor), one row a page in `refined.jsonl`.
//!
//! The extractor (and the renderer, for the DOMs it renders) publishes each page it keeps
//! to the `refine` hop when the crawl's spec says `refine`; a copy of a page kept before
//! (`duplicate_of`) is not refined again. The embedded runtime spawns the workers over an
//! in-memory hop; in the cluster the `trawl-refiner` service serves the stage, scaled on
//! its own (a GPU pod running the model in process, or CPU pods in front of a model
//! server). A failing model backend is waited for with the page held, never written as
//! refined; delivery is at least once, so after a crash a page may have two rows (the
//! later one is the one to keep).

pub mod engine;
mod sink;
mod worker;

pub use sink::{RefinedSink, SinkError};
pub use worker::{RefinerConfig, RefinerError, check, run_worker, serve, spawn};
