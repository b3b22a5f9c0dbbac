//! One page through refinement: rendered, programmed (by the teacher or a model), executed.
//! The record keeps everything it came from (the lines, the raw generation), so a fallback
//! or a skip loses nothing and a run can be re-read with another reader later.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendError, Request, Sampling, seed_for};
use crate::lines::{number_lines, render_lines};
use crate::program::{Finish, Generation, Mode, Outcome, execute};

/// ReScraper skips pages whose rendering is shorter than this.
pub const MIN_RENDERED_CHARS: usize = 20;

/// Who writes the programs.
#[derive(Clone)]
pub enum Engine {
    /// trawl's extractor as an `<extract>` program: no model.
    Extract,
    Model {
        backend: Arc<dyn Backend>,
        system: String,
        max_new_tokens: usize,
        sampling: Sampling,
    },
}

impl Engine {
    pub fn name(&self) -> String {
        match self {
            Engine::Extract => "extract".into(),
            Engine::Model { backend, .. } => backend.name(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Tokens {
    pub prompt: usize,
    pub completion: usize,
}

/// A refined page, as a line of `refined.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Refined {
    pub url: String,
    /// Where the page came from (`file#record`, or a path).
    pub source: String,
    pub engine: String,
    /// Why the page was not refined at all (`too_short`, `too_long`, `backend`).
    pub skipped: Option<String>,
    pub decision: Option<crate::program::Decision>,
    pub provenance: Option<String>,
    pub text: Option<String>,
    pub program: Option<String>,
    pub generation: Option<Generation>,
    pub warnings: Vec<crate::program::Warning>,
    pub error: Option<String>,
    pub fell_back: bool,
    pub tokens: Tokens,
    /// The rendered lines the program refers to (1-based ids).
    pub lines: Vec<String>,
    /// Set by the n-gram dedup when a near-copy of an earlier page was dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// The markup was cut before it was rendered (a crawl's message limit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub input_cut: bool,
}

impl Refined {
    /// A row for a page that was not refined at all, with the reason.
    pub fn skipped(engine: &Engine, url: &str, source: &str, reason: &str) -> Refined {
        let mut r = base(url, source, engine, Vec::new());
        r.skipped = Some(reason.into());
        r
    }
}

fn base(url: &str, source: &str, engine: &Engine, lines: Vec<String>) -> Refined {
    Refined {
        url: url.into(),
        source: source.into(),
        engine: engine.name(),
        skipped: None,
        decision: None,
        provenance: None,
        text: None,
        program: None,
        generation: None,
        warnings: Vec::new(),
        error: None,
        fell_back: false,
        tokens: Tokens::default(),
        lines,
        duplicate_of: None,
        input_cut: false,
    }
}

fn with_outcome(mut r: Refined, o: Outcome) -> Refined {
    r.decision = o.decision;
    r.provenance = o.provenance;
    r.text = o.text;
    r.warnings = o.warnings;
    r.error = o.error.map(|e| e.to_string());
    r.fell_back = o.fell_back;
    r
}

/// [`refine_page`] as a run calls it: a page with more than `max_html` bytes of markup is
/// recorded as skipped (`too_large`), and a panic as the page's error (`panic`), so one
/// page never ends a run.
pub fn refine_guarded(
    engine: &Engine,
    mode: Mode,
    url: &str,
    source: &str,
    html: &str,
    max_html: usize,
) -> Refined {
    if html.len() > max_html {
        let mut r = Refined::skipped(engine, url, source, "too_large");
        r.error = Some(format!(
            "{} bytes of HTML, over the limit of {max_html}",
            html.len()
        ));
        return r;
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        refine_page(engine, mode, url, source, html)
    })) {
        Ok(r) => r,
        Err(e) => {
            let msg = e
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let mut r = Refined::skipped(engine, url, source, "panic");
            r.error = Some(format!("refining this page panicked: {msg}"));
            r
        }
    }
}

/// Refines one page of HTML (already decoded to UTF-8).
pub fn refine_page(engine: &Engine, mode: Mode, url: &str, source: &str, html: &str) -> Refined {
    let lines = render_lines(html);
    refine_lines(engine, mode, url, source, html, lines)
}

/// As [`refine_page`], with the lines already rendered.
pub fn refine_lines(
    engine: &Engine,
    mode: Mode,
    url: &str,
    source: &str,
    html: &str,
    lines: Vec<String>,
) -> Refined {
    let chars: usize = lines.iter().map(|l| l.chars().count()).sum();
    let mut r = base(url, source, engine, lines);
    if chars < MIN_RENDERED_CHARS {
        r.skipped = Some("too_short".into());
        return r;
    }
    let generation = match engine {
        Engine::Extract => {
            let parsed = url::Url::parse(url)
                .unwrap_or_else(|_| url::Url::parse("http://localhost/").expect("static URL"));
            let text = trawl_extract::extract_html(html, &parsed).text;
            let t = crate::teacher::teach(&r.lines, &text);
            Generation {
                text: t.program,
                finish: Finish::Stop,
            }
        }
        Engine::Model {
            backend,
            system,
            max_new_tokens,
            sampling,
        } => {
            let req = Request {
                system: system.clone(),
                page: crate::backend::defuse(&number_lines(&r.lines)),
                seed: seed_for(url),
                max_new_tokens: *max_new_tokens,
                sampling: *sampling,
            };
            match backend.generate(&req) {
                Ok(reply) => {
                    r.tokens = Tokens {
                        prompt: reply.prompt_tokens,
                        completion: reply.completion_tokens,
                    };
                    reply.generation
                }
                Err(e @ BackendError::TooLong { .. }) => {
                    r.skipped = Some("too_long".into());
                    r.error = Some(e.to_string());
                    return r;
                }
                Err(e) => {
                    // A page the server refused (400, 413, 422) is this page's problem; any
                    // other failure is the backend's, and a run stops after many in a row.
                    r.skipped = Some(
                        if e.is_page_error() {
                            "rejected"
                        } else {
                            "backend"
                        }
                        .into(),
                    );
                    r.error = Some(e.to_string());
                    return r;
                }
            }
        }
    };
    r.program = Some(generation.text.clone());
    let o = execute(&r.lines, &generation, mode);
    r.generation = Some(generation);
    with_outcome(r, o)
}
