//! JavaScript rendering as the crawl sees it: when pages go to a browser
//! ([`RenderMode`]), and what a page's record says about it ([`RenderInfo`]).

use serde::{Deserialize, Serialize};

use crate::WarcRef;

/// Which fetched HTML pages are rendered in a browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RenderMode {
    /// Pages the render rule finds empty and shaped like a client-side app (the rule:
    /// `trawl_extract::render_reason`).
    #[default]
    Auto,
    /// None.
    Never,
    /// Every HTML page fetched with a 2xx.
    Always,
}

impl std::str::FromStr for RenderMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "never" => Ok(Self::Never),
            "always" => Ok(Self::Always),
            other => Err(format!(
                "unknown render mode {other:?}: expected auto, never or always"
            )),
        }
    }
}

impl std::fmt::Display for RenderMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Never => "never",
            Self::Always => "always",
        })
    }
}

/// A page sent to the browser: why, and how it went. On the render hop it carries the
/// reason only; the renderer fills the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RenderInfo {
    /// The rule's reason (`empty_app_root`, `noscript_notice`, ..., `always`).
    pub reason: String,
    /// The browser's DOM replaced the fetched markup (false: the fetched version was kept,
    /// `error` says why).
    pub rendered: bool,
    /// Milliseconds from the start of the render to the DOM read.
    #[serde(default)]
    pub ms: u64,
    /// Subrequests the page made that went out through the fetcher.
    #[serde(default)]
    pub requests: u32,
    /// Subrequests refused, by why: `out_of_scope`, `robots`, `private_address`,
    /// `resource_type` (images, fonts, styles, media are never loaded), `budget`,
    /// `failed` (the fetch itself failed).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub blocked: std::collections::BTreeMap<String, u32>,
    /// Why the fetched version was kept: `timeout`, `browser: ...`, `unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The WARC `conversion` record holding the rendered DOM (it refers to the response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warc: Option<WarcRef>,
}
