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
    /// What the page's script produced (screenshots, scrapes, script returns), when the
    /// crawl gave one (`render_script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Artifacts>,
}

/// What a render does besides settling, in Firecrawl's terms: `waitFor`, `mobile`,
/// `actions` and the `screenshot` format. Actions take Firecrawl's JSON as it is
/// (`{"type":"click","selector":"#more"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct PageScript {
    /// Milliseconds waited once the page settled, before the actions.
    pub wait_ms: u64,
    /// A phone's viewport (390 x 844, touch, mobile layout) instead of a desktop's.
    pub mobile: bool,
    pub actions: Vec<Action>,
    /// A screenshot of the page as the actions left it (the `screenshot` format).
    pub screenshot: Option<Shot>,
}

impl PageScript {
    /// Milliseconds the script may wait on purpose: `wait_ms` and its wait actions.
    pub fn waits_ms(&self) -> u64 {
        let acts = self
            .actions
            .iter()
            .map(|a| match a {
                Action::Wait {
                    milliseconds: Some(ms),
                    ..
                } => *ms,
                _ => 0,
            })
            .fold(0, u64::saturating_add);
        self.wait_ms.saturating_add(acts)
    }

    /// The script makes pictures of the page (a screenshot or a PDF): its styles and fonts
    /// are loaded, so they look like the site.
    pub fn draws(&self) -> bool {
        self.screenshot.is_some()
            || self
                .actions
                .iter()
                .any(|a| matches!(a, Action::Screenshot { .. } | Action::Pdf { .. }))
    }

    /// Nothing to do but render.
    pub fn is_empty(&self) -> bool {
        self.wait_ms == 0 && !self.mobile && self.actions.is_empty() && self.screenshot.is_none()
    }
}

/// One of Firecrawl's page actions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Action {
    /// Waits this long, or until the selector matches.
    Wait {
        #[serde(default)]
        milliseconds: Option<u64>,
        #[serde(default)]
        selector: Option<String>,
    },
    /// Clicks the first element matching (every one with `all`).
    Click {
        selector: String,
        #[serde(default)]
        all: bool,
    },
    /// Types into the focused element.
    Write { text: String },
    /// Presses a key (`Enter`, `Tab`, `ArrowDown`, a character).
    Press { key: String },
    /// Scrolls the page, or the element matching, by a screen.
    Scroll {
        #[serde(default)]
        direction: Option<String>,
        #[serde(default)]
        selector: Option<String>,
    },
    Screenshot {
        #[serde(flatten)]
        shot: Shot,
    },
    /// The page's URL and DOM at this point.
    Scrape,
    /// Runs a script (an expression, or a body with `return`); its value is returned.
    #[serde(rename = "executeJavascript")]
    ExecuteJavascript { script: String },
    /// The page printed to PDF.
    Pdf {
        #[serde(default)]
        landscape: bool,
        #[serde(default)]
        scale: Option<f64>,
        #[serde(default)]
        format: Option<String>,
    },
}

impl Action {
    /// Firecrawl's name of the action.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Wait { .. } => "wait",
            Action::Click { .. } => "click",
            Action::Write { .. } => "write",
            Action::Press { .. } => "press",
            Action::Scroll { .. } => "scroll",
            Action::Screenshot { .. } => "screenshot",
            Action::Scrape => "scrape",
            Action::ExecuteJavascript { .. } => "executeJavascript",
            Action::Pdf { .. } => "pdf",
        }
    }
}

/// A screenshot's options: the viewport or the whole page, PNG or (with a quality) JPEG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Shot {
    pub full_page: bool,
    /// JPEG quality, 1 to 100; none: PNG.
    pub quality: Option<u8>,
    pub viewport: Option<Viewport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
}

/// What a page's script produced. Files (screenshots, PDFs) are named, not carried: they
/// are written to the renderer's artifacts folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Artifacts {
    /// The `screenshot` format's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
    /// The screenshot actions' files, in order.
    pub screenshots: Vec<String>,
    pub scrapes: Vec<ScrapeArtifact>,
    pub javascript_returns: Vec<ScriptReturn>,
    pub pdfs: Vec<String>,
    /// The action that failed and why (`action 2 (click): no element matches "#more"`);
    /// those after it were not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ScrapeArtifact {
    pub url: String,
    pub html: String,
}

/// A script's value, with its JavaScript type (`typeof`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ScriptReturn {
    #[serde(rename = "type")]
    pub kind: String,
    pub value: serde_json::Value,
}
