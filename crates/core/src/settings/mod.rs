//! One definition of a crawl's settings, for every runtime.
//!
//! [`Settings`] is loaded in layers by the `trawl` command and by every service:
//! [`Settings::default`], then a JSON file (`TRAWL_CONFIG` or `--config`), then
//! `TRAWL_*` environment variables, then (in the command line) flags. Each field has one
//! default, here; clap's defaults are taken from the loaded layers (see
//! [`Settings::flat`]), the cluster's crawl spec carries the [`CrawlSettings`] and
//! [`IndexSettings`] sections, and each stage derives its own config from them
//! ([`RefineSettings`], like [`ProcessSettings`], stay with each process).
//!
//! Field names are unique across the sections, so every field has one environment
//! variable (`TRAWL_` + its name in capitals: `TRAWL_DELAY_MS`, `TRAWL_NATS_URL`) and a
//! file may give it either flat (`{"delay_ms": 0}`) or in its section
//! (`{"crawl": {"delay_ms": 0}}`).

mod cluster;
mod layers;
mod models;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::scope::{PathFilter, ScopeKind};
use crate::urlnorm::{DEFAULT_TRACKING_PARAMS, Normalizer};

pub use cluster::{ClusterSettings, redact_url};
pub use layers::{SettingsError, flat_keys};
pub use models::{LlmSettings, RefineSettings};

#[cfg(feature = "cli")]
use clap::ArgAction;

/// The SimHash distance under which a page is a near-copy of one kept before.
pub const DEFAULT_DEDUP_DISTANCE: u32 = 2;

/// The estimated word 5-gram Jaccard similarity at which the MinHash gate calls a page a
/// near-copy of one kept before.
pub const DEFAULT_DEDUP_SIMILARITY: f64 = 0.8;

/// Which page gate finds near-duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DedupMethod {
    /// 64-bit SimHash within `dedup_distance` bits: about 0.25 KB a page in memory and
    /// 200 bytes in Redis, but it links a third of the near-copies of short pages.
    Simhash,
    /// MinHash-LSH over word 5-grams, candidates verified at `dedup_similarity`: the
    /// default, as it links near-copies SimHash misses (0.96 of them on the documentation
    /// crawl at precision 0.998), at about 4 times SimHash's bytes a page.
    #[default]
    Minhash,
}

impl std::str::FromStr for DedupMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "simhash" => Ok(Self::Simhash),
            "minhash" => Ok(Self::Minhash),
            other => Err(format!(
                "unknown dedup method {other:?}: expected simhash or minhash"
            )),
        }
    }
}

impl std::fmt::Display for DedupMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Simhash => "simhash",
            Self::Minhash => "minhash",
        })
    }
}

/// The page gate a crawl runs, from its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PageGate {
    SimHash { distance: u32 },
    MinHash { similarity: f64 },
}

/// Everything a process of trawl is configured with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub crawl: CrawlSettings,
    pub index: IndexSettings,
    pub cluster: ClusterSettings,
    pub process: ProcessSettings,
    pub refine: RefineSettings,
    pub llm: LlmSettings,
}

/// What a crawl does: scope, budgets, politeness, HTTP limits, WARC, dedup. The cluster's
/// crawl spec carries this section, so every service of a crawl works with the same one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct CrawlSettings {
    /// Stop after admitting this many URLs (0: no limit).
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_pages: u64,
    /// Follow links at most this deep (seeds are depth 0). High by default: documentation
    /// sites often chain hundreds of pages through "next" links alone; spider traps have
    /// their own defences.
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_depth: u32,
    /// Which URLs belong to the crawl: host, domain, prefix (the seed's path up to its last
    /// `/`) or any.
    #[cfg_attr(feature = "cli", arg(long))]
    pub scope: ScopeKind,
    /// Minimum milliseconds between the end of one request to a host and the next (a site's
    /// larger Crawl-delay wins).
    #[cfg_attr(feature = "cli", arg(long = "delay", value_name = "MS"))]
    pub delay_ms: u64,
    /// Requests in flight to one host.
    #[cfg_attr(feature = "cli", arg(long, value_parser = clap::value_parser!(u32).range(1..)))]
    pub concurrency_per_host: u32,
    /// The User-Agent header; its first product token is matched against robots.txt.
    #[cfg_attr(feature = "cli", arg(long))]
    pub user_agent: Option<String>,
    /// Allow requests to private, loopback and link-local addresses.
    #[cfg_attr(feature = "cli", arg(long))]
    pub allow_private: bool,
    /// Most pages admitted per host (0: no limit); a spider-trap defence.
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_pages_per_host: u64,
    /// Most URLs waiting in the frontier; past it the lowest-priority ones are evicted.
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_queued: usize,
    /// Distinct query strings per path pattern before the rest are treated as a trap.
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_query_variants: u64,
    /// URLs longer than this are treated as traps.
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_url_length: usize,
    /// Seconds a whole request may take.
    #[cfg_attr(feature = "cli", arg(long = "timeout", value_name = "S"))]
    pub timeout_s: u64,
    /// Seconds to wait for a connection.
    #[cfg_attr(feature = "cli", arg(long = "connect-timeout", value_name = "S"))]
    pub connect_timeout_s: u64,
    /// Bytes read per response; the rest is cut off and the page marked.
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_body_bytes: usize,
    /// Bytes a compressed body may inflate to.
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_decoded_bytes: usize,
    /// Write WARC files (`--no-warc`: do not).
    #[cfg_attr(feature = "cli", arg(long = "no-warc", action = ArgAction::SetFalse))]
    pub warc: bool,
    /// Start a new WARC file past this many bytes.
    #[cfg_attr(feature = "cli", arg(long))]
    pub warc_max_bytes: u64,
    /// Extra query parameters to strip (a trailing `*` matches a prefix), besides the
    /// built-in tracking parameters.
    #[cfg_attr(feature = "cli", arg(long = "strip-param", value_name = "NAME"))]
    pub strip_params: Vec<String>,
    /// Detect near-duplicate pages (`--no-dedup`: keep every page, duplicates included).
    #[cfg_attr(feature = "cli", arg(long = "no-dedup", action = ArgAction::SetFalse))]
    pub dedup: bool,
    /// With `--dedup-method simhash`: pages whose text SimHash is within this Hamming
    /// distance of a page already kept are near-duplicates (recorded with `duplicate_of`, not indexed again). At most 3: the band
    /// index finds every match up to 3.
    #[cfg_attr(feature = "cli", arg(long, value_parser = clap::value_parser!(u32).range(0..=3)))]
    pub dedup_distance: u32,
    /// The page gate: `minhash` (the default: word 5-gram MinHash-LSH,
    /// `--dedup-similarity`) or `simhash` (`--dedup-distance`; fewer bytes a page, finds
    /// fewer near-copies). Every record carries its SimHash either way.
    #[cfg_attr(feature = "cli", arg(long, value_name = "METHOD"))]
    pub dedup_method: DedupMethod,
    /// Pages whose estimated word 5-gram Jaccard similarity with a page already kept reaches
    /// this are near-duplicates (0.5 to 1; the MinHash gate's).
    #[cfg_attr(feature = "cli", arg(long, value_name = "JACCARD"))]
    pub dedup_similarity: f64,
    /// A line (paragraph) seen on this many earlier pages of a host is that host's
    /// boilerplate and is dropped from later pages before fingerprinting (0, the default:
    /// keep all). Off by default: pages fingerprinted before a line is known keep it, so a
    /// page and its later copy can end up with different texts.
    #[cfg_attr(feature = "cli", arg(long))]
    pub boilerplate_min_pages: u32,
    /// On a re-crawl, deliver each change event to this URL (signed with
    /// `TRAWL_WEBHOOK_SECRET`, the Standard Webhooks way).
    #[cfg_attr(feature = "cli", arg(long = "webhook", value_name = "URL"))]
    pub webhook_url: Option<String>,
    /// Tries per event before it is kept in `changes-undelivered.jsonl`.
    #[cfg_attr(feature = "cli", arg(long))]
    pub webhook_tries: u32,
    /// Wait before the first retry of a delivery; each later wait is four times longer.
    #[cfg_attr(feature = "cli", arg(long))]
    pub webhook_backoff_ms: u64,
    /// After the crawl, how long deliveries are still retried before what is left is kept
    /// undelivered.
    #[cfg_attr(feature = "cli", arg(long))]
    pub webhook_wait_s: u64,
    /// A re-crawled page's adaptive revisit interval, its shortest: each change moves the
    /// interval halfway toward it.
    #[cfg_attr(feature = "cli", arg(long, value_name = "S"))]
    pub revisit_min_s: u64,
    /// The interval a new page starts with.
    #[cfg_attr(feature = "cli", arg(long, value_name = "S"))]
    pub revisit_start_s: u64,
    /// The longest interval: each unchanged fetch makes it 1.5 times longer, up to this.
    #[cfg_attr(feature = "cli", arg(long, value_name = "S"))]
    pub revisit_max_s: u64,
    /// On the cluster, keep each written page in Redis (its facts and its record) so a
    /// later crawl can compare with this one (`--no-history`: keep nothing; a later
    /// `--since` finds every page new). The embedded runtime keeps them in `crawl.db`.
    #[cfg_attr(feature = "cli", arg(long = "no-history", action = ArgAction::SetFalse))]
    pub history: bool,
    /// A host whose robots.txt is unreachable (5xx, timeout, no connection) is asked again
    /// after this many seconds; its pages wait meanwhile (RFC 9309: assume disallow while
    /// unreachable, do not give up).
    #[cfg_attr(feature = "cli", arg(long, value_name = "S"))]
    pub robots_retry_s: u64,
    /// After this many seconds of a host's robots.txt unreachable, a waiting page is
    /// recorded `robots_disallowed` (unreachable) instead of waiting longer.
    #[cfg_attr(feature = "cli", arg(long, value_name = "S"))]
    pub robots_outage_s: u64,
    /// Follow only links whose path (with `paths_match_url`, the whole URL) matches one of
    /// these regular expressions; the start URLs are always crawled.
    #[cfg_attr(feature = "cli", arg(long = "include-path", value_name = "REGEX"))]
    pub include_paths: Vec<String>,
    /// Do not follow links whose path (or URL) matches one of these regular expressions.
    #[cfg_attr(feature = "cli", arg(long = "exclude-path", value_name = "REGEX"))]
    pub exclude_paths: Vec<String>,
    /// Match `include_paths` and `exclude_paths` against the whole URL, not its path.
    #[cfg_attr(feature = "cli", arg(long))]
    pub paths_match_url: bool,
    /// Follow only links whose path starts with this (the start URLs, sitemaps and feeds
    /// are read wherever they are): a prefix scope for pages alone, as `trawl serve`'s
    /// crawls use it with the site's sitemaps.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PATH"))]
    pub path_prefix: Option<String>,
    /// Keep each HTML page's markup (decoded to UTF-8) in its record, `raw_html`, for
    /// readers that extract it their own way (`trawl serve` does for its `html` formats).
    #[cfg_attr(feature = "cli", arg(long))]
    pub keep_html: bool,
    /// Which pages a browser renders: `auto`, those that extract to (almost) nothing and
    /// carry signs of client-side rendering (the rule: `trawl_extract::render_reason`);
    /// `never`; `always`, every HTML page. Needs Chromium (`--chromium`); without one,
    /// `auto` keeps the fetched version and counts `render.unavailable`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "MODE"))]
    pub render: crate::render::RenderMode,
    /// Rule (A) of `auto`: a page is a candidate when its main content has fewer visible
    /// characters than this.
    #[cfg_attr(feature = "cli", arg(long, value_name = "CHARS"))]
    pub render_max_chars: usize,
    /// Seconds a render may take, navigation to DOM read; past it the fetched version is
    /// kept (`render.timeouts`).
    #[cfg_attr(feature = "cli", arg(long = "render-timeout", value_name = "S"))]
    pub render_timeout_s: u64,
    /// A page is settled when none of its requests has been in flight for this long (and
    /// its load event has fired).
    #[cfg_attr(feature = "cli", arg(long = "render-idle", value_name = "MS"))]
    pub render_idle_ms: u64,
    /// Settled when this CSS selector matches instead of at network idle.
    #[cfg_attr(feature = "cli", arg(long, value_name = "CSS"))]
    pub render_wait_for: Option<String>,
    /// Subrequests one page may make (scripts, XHR/fetch, frames); the rest are refused.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub render_max_requests: u32,
    /// Let rendered pages load scripts and data from hosts outside the crawl's scope
    /// (CDNs, API hosts); robots.txt and the address policy still apply.
    #[cfg_attr(feature = "cli", arg(long))]
    pub render_offsite: bool,
    /// What every rendered page does once settled (a wait, a phone's viewport, actions, a
    /// screenshot): how an API crawl's `scrapeOptions` reach its renderer. Screenshots go
    /// to the renderer's artifacts folder, each record's `render.artifacts` names them.
    #[cfg_attr(feature = "cli", arg(skip))]
    pub render_script: Option<crate::render::PageScript>,
    /// Refine every kept HTML page after ReScraper (rendered to numbered lines, given an
    /// edit program, executed): pages go to the refiner (`trawl-refiner` in the cluster,
    /// workers of `trawl crawl`), which writes `refined.jsonl`; its engine is the
    /// `refine_*` settings.
    #[cfg_attr(feature = "cli", arg(long))]
    pub refine: bool,
    /// Read each host's `/.well-known/tdmrep.json` (the W3C TDM Reservation Protocol) with
    /// its robots.txt, so every record says whether text and data mining is reserved
    /// (`--no-tdmrep`: the header and meta alone).
    #[cfg_attr(feature = "cli", arg(long = "no-tdmrep", action = ArgAction::SetFalse))]
    pub tdmrep: bool,
}

impl Default for CrawlSettings {
    fn default() -> Self {
        CrawlSettings {
            max_pages: 0,
            max_depth: 1000,
            scope: ScopeKind::Host,
            delay_ms: 500,
            concurrency_per_host: 1,
            user_agent: None,
            allow_private: false,
            max_pages_per_host: 0,
            max_queued: 1_000_000,
            max_query_variants: 1000,
            max_url_length: 2048,
            timeout_s: 30,
            connect_timeout_s: 10,
            max_body_bytes: 10 * 1024 * 1024,
            max_decoded_bytes: 50 * 1024 * 1024,
            warc: true,
            warc_max_bytes: 1024 * 1024 * 1024,
            strip_params: Vec::new(),
            dedup: true,
            dedup_distance: DEFAULT_DEDUP_DISTANCE,
            dedup_method: DedupMethod::Minhash,
            dedup_similarity: DEFAULT_DEDUP_SIMILARITY,
            boilerplate_min_pages: 0,
            webhook_url: None,
            webhook_tries: 6,
            webhook_backoff_ms: 30_000,
            webhook_wait_s: 60,
            revisit_min_s: 3600,
            revisit_start_s: 86_400,
            revisit_max_s: 14 * 86_400,
            history: true,
            robots_retry_s: 60,
            robots_outage_s: 3600,
            include_paths: Vec::new(),
            exclude_paths: Vec::new(),
            paths_match_url: false,
            path_prefix: None,
            keep_html: false,
            render: crate::render::RenderMode::Auto,
            render_max_chars: 200,
            render_timeout_s: 15,
            render_idle_ms: 500,
            render_wait_for: None,
            render_max_requests: 64,
            render_offsite: false,
            render_script: None,
            refine: false,
            tdmrep: true,
        }
    }
}

/// The `User-Agent` trawl sends when none is configured.
pub fn default_user_agent() -> String {
    format!(
        "trawl/{} (+https://github.com/trawl-rs/trawl)",
        env!("CARGO_PKG_VERSION")
    )
}

/// The robots.txt product token of a User-Agent: its first word, without version
/// (`MyBot/2.1 (+http://x)` -> `MyBot`); `trawl` when the agent has none.
pub fn robots_token(user_agent: &str) -> String {
    user_agent
        .split_whitespace()
        .next()
        .and_then(|w| w.split('/').next())
        .filter(|t| !t.is_empty())
        .unwrap_or("trawl")
        .to_string()
}

impl CrawlSettings {
    /// The `User-Agent` header of the crawl.
    pub fn user_agent(&self) -> String {
        self.user_agent
            .clone()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(default_user_agent)
    }

    /// The product token matched against robots.txt groups.
    pub fn robots_agent(&self) -> String {
        robots_token(&self.user_agent())
    }

    /// The URL normalizer: the built-in tracking parameters and `strip_params`.
    pub fn normalizer(&self) -> Normalizer {
        Normalizer::new(
            DEFAULT_TRACKING_PARAMS
                .iter()
                .copied()
                .chain(self.strip_params.iter().map(String::as_str)),
        )
    }

    /// The SimHash distance of the page gate, `None` when dedup is off.
    pub fn dedup_distance(&self) -> Option<u32> {
        self.dedup.then_some(self.dedup_distance)
    }

    /// The page gate, `None` when dedup is off.
    pub fn page_gate(&self) -> Option<PageGate> {
        self.dedup.then_some(match self.dedup_method {
            DedupMethod::Simhash => PageGate::SimHash {
                distance: self.dedup_distance,
            },
            DedupMethod::Minhash => PageGate::MinHash {
                similarity: self.dedup_similarity,
            },
        })
    }

    /// The include and exclude patterns of links, compiled.
    pub fn path_filter(&self) -> Result<PathFilter, SettingsError> {
        PathFilter::with_prefix(
            &self.include_paths,
            &self.exclude_paths,
            self.paths_match_url,
            self.path_prefix.as_deref(),
        )
        .map_err(SettingsError::Invalid)
    }

    /// Values no runtime can work with.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.path_filter()?;
        if self.concurrency_per_host == 0 {
            return Err(SettingsError::Invalid(
                "concurrency_per_host must be at least 1".into(),
            ));
        }
        if self.dedup_distance > 3 {
            return Err(SettingsError::Invalid(
                "dedup_distance must be at most 3".into(),
            ));
        }
        if !(0.5..=1.0).contains(&self.dedup_similarity) {
            return Err(SettingsError::Invalid(format!(
                "dedup_similarity must be between 0.5 and 1 (got {})",
                self.dedup_similarity
            )));
        }
        let (min, start, max) = (self.revisit_min_s, self.revisit_start_s, self.revisit_max_s);
        if min == 0 || min > start || start > max {
            return Err(SettingsError::Invalid(format!(
                "the revisit interval needs 0 < revisit_min_s <= revisit_start_s <= \
                 revisit_max_s (got {min}, {start}, {max})"
            )));
        }
        Ok(())
    }
}

/// How pages are chunked, embedded and deduplicated in the index. Carried by the crawl
/// spec, so every indexer replica cuts and embeds the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct IndexSettings {
    /// Word pieces per chunk, heading context included (the model reads 256, 2 of them
    /// its own markers).
    #[cfg_attr(feature = "cli", arg(long, value_parser = clap::value_parser!(u32).range(16..=254)))]
    pub chunk_tokens: u32,
    /// Word pieces repeated between consecutive chunks of a section.
    #[cfg_attr(feature = "cli", arg(long))]
    pub chunk_overlap: u32,
    /// Chunks per forward pass of the model.
    #[cfg_attr(feature = "cli", arg(long, value_parser = clap::value_parser!(u32).range(1..=4096)))]
    pub embed_batch: u32,
    /// Rows in the index before a vector index (IVF-PQ) is built; below, search is flat
    /// (exact).
    #[cfg_attr(feature = "cli", arg(long))]
    pub vector_index_min_rows: usize,
    /// Store a chunk whose text is already indexed from another page (exactly or within
    /// this SimHash distance) once, as an alias of the first (0..=3).
    #[cfg_attr(feature = "cli", arg(long, value_parser = clap::value_parser!(u32).range(0..=3)))]
    pub chunk_dedup_distance: u32,
    /// Store chunks repeated across pages once (`--no-chunk-dedup`: store every copy).
    #[cfg_attr(feature = "cli", arg(long = "no-chunk-dedup", action = ArgAction::SetFalse))]
    pub chunk_dedup: bool,
    /// What the index is for: `search`, `ai-input` (retrieval for a model), `ai-train`
    /// (comma-separated). A page whose site reserves search, or any use named here, is
    /// recorded but not indexed.
    #[cfg_attr(feature = "cli", arg(long, value_name = "USE", value_delimiter = ','))]
    pub purpose: Vec<crate::policy::Purpose>,
}

impl Default for IndexSettings {
    fn default() -> Self {
        IndexSettings {
            chunk_tokens: 254,
            chunk_overlap: 32,
            embed_batch: 32,
            vector_index_min_rows: 50_000,
            chunk_dedup_distance: 2,
            chunk_dedup: true,
            purpose: vec![crate::policy::Purpose::Search],
        }
    }
}

/// What one process does: its crawl, workers, outputs, model and endpoints. Not part of
/// the crawl spec: each service replica has its own.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProcessSettings {
    /// The crawl's id: `trawl submit --crawl` and the services' `TRAWL_CRAWL`.
    pub crawl: String,
    /// Workers in this process: fetch requests in flight (the fetcher, `trawl crawl`),
    /// extraction tasks (the extractor service).
    pub concurrency: usize,
    /// Output directory: the crawl's `pages.jsonl`, `warc/`, `report.json`, `index/`.
    pub out: PathBuf,
    /// The LanceDB index. `trawl crawl`: `OUT/index` when unset; the indexer service:
    /// no index (JSON Lines only) when unset.
    pub index_uri: Option<String>,
    /// The embedding model's directory; unset: the cache `scripts/fetch-model.sh` fills.
    pub model_dir: Option<PathBuf>,
    /// Embed chunks (needs the model); false builds a full-text index only.
    pub embed: bool,
    /// Where a service serves `/healthz`, `/readyz` and `/metrics`.
    pub metrics_addr: String,
    /// The replica's name in its output file names; unset: `HOSTNAME`, else the stage.
    pub instance: Option<String>,
    /// The Chromium the renderer drives; unset: `CHROME`, else `chromium-headless-shell`,
    /// `chromium` or `google-chrome` on `PATH`.
    pub chromium: Option<PathBuf>,
    /// Pages rendered at once by this process (each a browser tab of its own).
    pub render_concurrency: usize,
    /// Queued URLs the embedded frontier keeps in memory (about 400 bytes each); the rest
    /// wait in OUT/frontier.spill, so memory stays flat however far discovery runs ahead.
    pub queued_in_memory: usize,
    /// Pages the embedded SimHash gate (`trawl crawl`, `trawl ingest`) keeps in memory
    /// (about 250 bytes each); past that it moves to OUT/gate.db. The MinHash gate keeps a
    /// quarter as many (about 1.2 KB each).
    pub gate_in_memory: usize,
    /// The embedder's number format: `auto` (int8 on CPUs with AVX-512 VNNI, else f32; f32
    /// on CUDA), `f32`, `int8` (CPU) or `tf32` (CUDA: TF32 matrix products).
    pub embed_precision: String,
    /// Chromium without its sandbox, for a container that is the sandbox (the renderer
    /// images); root runs it so anyway, as Chromium refuses its sandbox there.
    pub chromium_no_sandbox: bool,
    /// The key change-event webhooks are signed with (`whsec_` + base64, or raw); unset or
    /// empty: deliveries are not signed. A process setting, never stored in a crawl's spec.
    pub webhook_secret: Option<String>,
}

/// The number formats the embedder takes (`embed_precision`).
pub const EMBED_PRECISIONS: [&str; 4] = ["auto", "f32", "int8", "tf32"];

impl std::fmt::Debug for ProcessSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessSettings")
            .field("crawl", &self.crawl)
            .field("concurrency", &self.concurrency)
            .field("out", &self.out)
            .field("index_uri", &self.index_uri)
            .field("model_dir", &self.model_dir)
            .field("embed", &self.embed)
            .field("metrics_addr", &self.metrics_addr)
            .field("instance", &self.instance)
            .field("chromium", &self.chromium)
            .field("render_concurrency", &self.render_concurrency)
            .field("queued_in_memory", &self.queued_in_memory)
            .field("gate_in_memory", &self.gate_in_memory)
            .field("embed_precision", &self.embed_precision)
            .field("chromium_no_sandbox", &self.chromium_no_sandbox)
            .field(
                "webhook_secret",
                &self.webhook_secret.as_ref().map(|_| "<hidden>"),
            )
            .finish()
    }
}

impl Default for ProcessSettings {
    fn default() -> Self {
        ProcessSettings {
            crawl: "default".into(),
            concurrency: 16,
            out: PathBuf::from("./trawl-out"),
            index_uri: None,
            model_dir: None,
            embed: true,
            metrics_addr: "0.0.0.0:9100".into(),
            instance: None,
            chromium: None,
            render_concurrency: 2,
            queued_in_memory: 50_000,
            gate_in_memory: 200_000,
            embed_precision: "auto".into(),
            chromium_no_sandbox: false,
            webhook_secret: None,
        }
    }
}

impl ProcessSettings {
    /// This replica's name: `instance`, else the host name (a pod's name), else `stage`.
    pub fn instance_name(&self, stage: &str) -> String {
        self.instance
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| stage.to_string())
    }

    /// The webhook's signing key, when one is set (an empty value is none: compose passes
    /// an unset variable through as empty).
    pub fn webhook_secret(&self) -> Option<&str> {
        self.webhook_secret.as_deref().filter(|s| !s.is_empty())
    }
}

impl Settings {
    /// Defaults, then the file named by `file` or `TRAWL_CONFIG`, then `TRAWL_*` variables.
    pub fn load(file: Option<&std::path::Path>) -> Result<Settings, SettingsError> {
        layers::load(file, |k| std::env::var(k).ok())
    }

    /// The same layers with the environment given as a lookup (for tests and tools).
    pub fn load_with(
        file: Option<&std::path::Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, SettingsError> {
        layers::load(file, env)
    }

    /// Every scalar and list field by its (unique) name, as the strings a flag would take:
    /// the defaults clap shows and parses when a flag is not given.
    pub fn flat(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        layers::flat(self)
    }

    pub fn validate(&self) -> Result<(), SettingsError> {
        self.crawl.validate()?;
        self.refine.validate()?;
        if self.process.render_concurrency == 0 {
            return Err(SettingsError::Invalid(
                "render_concurrency must be at least 1".into(),
            ));
        }
        if !EMBED_PRECISIONS.contains(&self.process.embed_precision.as_str()) {
            return Err(SettingsError::Invalid(format!(
                "embed_precision must be one of {} (got {:?})",
                EMBED_PRECISIONS.join(", "),
                self.process.embed_precision
            )));
        }
        if self.process.concurrency == 0 {
            return Err(SettingsError::Invalid(
                "concurrency must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
