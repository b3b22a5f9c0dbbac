//! A page's script once it settled: Firecrawl's `waitFor`, `mobile`, actions and
//! screenshot format, run in the tab in order. Every action is bounded by the script's
//! deadline; the first that fails stops the script, and the artifacts say which and why.
//! Files (screenshots, PDFs) are written to the renderer's artifacts folder and named in
//! the artifacts, never carried in them.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::emulation::{
    SetDeviceMetricsOverrideParams, SetTouchEmulationEnabledParams,
};
use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, PrintToPdfParams, Viewport as Clip,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use serde_json::Value;
use trawl_core::render::{
    Action, Artifacts, PageScript, ScrapeArtifact, ScriptReturn, Shot, Viewport,
};

/// Firecrawl's desktop viewport, and a phone's.
const DESKTOP: Viewport = Viewport {
    width: 1920,
    height: 1080,
};
const PHONE: Viewport = Viewport {
    width: 390,
    height: 844,
};

/// A full-page screenshot is cut at this height: a page of endless scroll would make an
/// image of gigabytes.
pub const MAX_SHOT_HEIGHT: f64 = 16_384.0;

/// A screenshot holds at most this many pixels (and is at most 10,000 px wide): a page
/// of any size makes an image of tens of megabytes at most.
pub const MAX_SHOT_PIXELS: f64 = 40e6;

/// Actions run of one script, at most; the rest are refused before the page is loaded.
pub const MAX_ACTIONS: usize = 50;

/// The markup all of a script's `scrape` actions may keep, and the JSON one script's value
/// may take: they travel in the page's record.
pub const MAX_SCRAPE_BYTES: usize = 8 << 20;
pub const MAX_RETURN_BYTES: usize = 1 << 20;

/// How long the page gets to answer the requests an action started before the next one.
const QUIET_CAP: Duration = Duration::from_secs(2);

/// The viewport the script's page is laid out in, set before navigation.
pub(crate) async fn emulate(tab: &Page, script: &PageScript) -> Result<(), String> {
    let vp = if script.mobile { PHONE } else { DESKTOP };
    set_viewport(tab, vp, script.mobile).await?;
    if script.mobile {
        tab.execute(SetTouchEmulationEnabledParams::new(true))
            .await
            .map_err(|e| format!("touch emulation: {e}"))?;
    }
    Ok(())
}

async fn set_viewport(tab: &Page, vp: Viewport, mobile: bool) -> Result<(), String> {
    tab.execute(SetDeviceMetricsOverrideParams::new(
        i64::from(vp.width.clamp(1, 10_000)),
        i64::from(vp.height.clamp(1, 10_000)),
        1.0,
        mobile,
    ))
    .await
    .map(|_| ())
    .map_err(|e| format!("viewport: {e}"))
}

/// Where a script runs: its tab, the folder for its files, its deadline, and how it waits
/// for the requests an action started.
pub(crate) struct Run<'a, Q> {
    pub(crate) tab: &'a Page,
    pub(crate) dir: Option<&'a Path>,
    pub(crate) deadline: Instant,
    pub(crate) mobile: bool,
    /// Resolves once no request of the page has been in flight for a moment.
    pub(crate) quiet: Q,
}

impl<Q, F> Run<'_, Q>
where
    Q: Fn(Duration) -> F,
    F: std::future::Future<Output = ()>,
{
    /// Runs `script`'s wait, actions and screenshot; what it made, and the first failure.
    pub(crate) async fn script(&self, script: &PageScript) -> Artifacts {
        let mut out = Artifacts::default();
        if script.wait_ms > 0 {
            self.sleep(Duration::from_millis(script.wait_ms)).await;
        }
        for (i, action) in script.actions.iter().take(MAX_ACTIONS).enumerate() {
            let left = self.left();
            let r = match tokio::time::timeout(left, self.action(action, &mut out)).await {
                Ok(r) => r,
                Err(_) => Err("the page's deadline passed".into()),
            };
            if let Err(e) = r {
                out.error = Some(format!("action {} ({}): {e}", i + 1, action.name()));
                return out;
            }
            if matches!(
                action,
                Action::Click { .. }
                    | Action::Write { .. }
                    | Action::Press { .. }
                    | Action::Scroll { .. }
                    | Action::ExecuteJavascript { .. }
            ) {
                (self.quiet)(QUIET_CAP.min(self.left())).await;
            }
        }
        if let Some(shot) = &script.screenshot {
            match tokio::time::timeout(self.left(), self.shoot(shot)).await {
                Ok(Ok(name)) => out.screenshot = Some(name),
                Ok(Err(e)) => out.error = Some(format!("screenshot: {e}")),
                Err(_) => out.error = Some("screenshot: the page's deadline passed".into()),
            }
        }
        out
    }

    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d.min(self.left())).await;
    }

    async fn action(&self, action: &Action, out: &mut Artifacts) -> Result<(), String> {
        match action {
            Action::Wait {
                milliseconds,
                selector,
            } => match (milliseconds, selector) {
                (_, Some(sel)) => self.wait_for(sel).await,
                (Some(ms), None) => {
                    self.sleep(Duration::from_millis(*ms)).await;
                    Ok(())
                }
                (None, None) => Err("needs milliseconds or a selector".into()),
            },
            Action::Click { selector, all } => self.click(selector, *all).await,
            Action::Write { text } => self
                .tab
                .execute(InsertTextParams::new(text.clone()))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Action::Press { key } => self.press(key).await,
            Action::Scroll {
                direction,
                selector,
            } => self.scroll(direction.as_deref(), selector.as_deref()).await,
            Action::Screenshot { shot } => {
                out.screenshots.push(self.shoot(shot).await?);
                Ok(())
            }
            Action::Scrape => {
                let url = self.eval("location.href").await?;
                let html = self.eval(crate::render::DOM_JS).await?;
                let html = html.as_str().unwrap_or_default();
                let kept: usize = out.scrapes.iter().map(|s| s.html.len()).sum();
                if kept + html.len() > MAX_SCRAPE_BYTES {
                    return Err(format!(
                        "the scrapes' markup would pass {MAX_SCRAPE_BYTES} bytes"
                    ));
                }
                out.scrapes.push(ScrapeArtifact {
                    url: url.as_str().unwrap_or_default().to_string(),
                    html: html.to_string(),
                });
                Ok(())
            }
            Action::ExecuteJavascript { script } => {
                let v = self.eval(&run_js(script)).await?;
                if v["value"] == "\u{0}too large" {
                    return Err(format!(
                        "the script's value is over {MAX_RETURN_BYTES} bytes as JSON"
                    ));
                }
                out.javascript_returns.push(ScriptReturn {
                    kind: v["type"].as_str().unwrap_or("undefined").to_string(),
                    value: v.get("value").cloned().unwrap_or(Value::Null),
                });
                Ok(())
            }
            Action::Pdf {
                landscape,
                scale,
                format,
            } => {
                let (w, h) = paper(format.as_deref())?;
                let p = PrintToPdfParams {
                    landscape: Some(*landscape),
                    scale: Some(scale.unwrap_or(1.0).clamp(0.1, 2.0)),
                    paper_width: Some(w),
                    paper_height: Some(h),
                    print_background: Some(true),
                    ..Default::default()
                };
                let pdf = self.tab.pdf(p).await.map_err(|e| e.to_string())?;
                out.pdfs.push(self.keep(&pdf, "pdf").await?);
                Ok(())
            }
        }
    }

    async fn eval(&self, expr: &str) -> Result<Value, String> {
        let r = self
            .tab
            .evaluate_expression(EvaluateParams::new(expr))
            .await
            .map_err(|e| match e {
                chromiumoxide::error::CdpError::JavascriptException(x) => {
                    let text = x
                        .exception
                        .as_ref()
                        .and_then(|o| o.description.clone())
                        .unwrap_or_else(|| x.text.clone());
                    format!("the script threw: {}", text.lines().next().unwrap_or(""))
                }
                other => other.to_string(),
            })?;
        Ok(r.value().cloned().unwrap_or(Value::Null))
    }

    async fn wait_for(&self, selector: &str) -> Result<(), String> {
        let probe = format!(
            "(() => {{ try {{ return !!document.querySelector({}); }} catch (e) {{ return 'bad'; }} }})()",
            js_str(selector)
        );
        loop {
            match self.eval(&probe).await? {
                Value::Bool(true) => return Ok(()),
                Value::String(_) => return Err(format!("{selector:?} is not a CSS selector")),
                _ => {}
            }
            if self.left().is_zero() {
                return Err(format!("nothing matched {selector:?} before the deadline"));
            }
            self.sleep(Duration::from_millis(50)).await;
        }
    }

    async fn click(&self, selector: &str, all: bool) -> Result<(), String> {
        let els = self
            .tab
            .find_elements(selector)
            .await
            .map_err(|e| format!("{selector:?}: {e}"))?;
        if els.is_empty() {
            return Err(format!("no element matches {selector:?}"));
        }
        let n = if all { els.len() } else { 1 };
        for el in els.iter().take(n) {
            // A real click (scrolled into view, mouse events) where the element has a
            // point to click; a hidden one gets the DOM's click.
            if el.click().await.is_err() {
                el.call_js_fn("function() { this.click(); }", false)
                    .await
                    .map_err(|e| format!("{selector:?}: {e}"))?;
            }
        }
        Ok(())
    }

    async fn press(&self, key: &str) -> Result<(), String> {
        if chromiumoxide::keys::get_key_definition(key).is_none() {
            return Err(format!("unknown key {key:?}"));
        }
        let el = match self.tab.find_element(":focus").await {
            Ok(el) => el,
            Err(_) => self
                .tab
                .find_element("body")
                .await
                .map_err(|e| e.to_string())?,
        };
        el.press_key(key)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn scroll(&self, direction: Option<&str>, selector: Option<&str>) -> Result<(), String> {
        let sign = match direction.unwrap_or("down") {
            "down" => 1,
            "up" => -1,
            other => return Err(format!("direction must be up or down, not {other:?}")),
        };
        let sel = selector.map_or("null".to_string(), js_str);
        let js = format!(
            "(() => {{ const s = {sel}; let el = null; \
             if (s !== null) {{ try {{ el = document.querySelector(s); }} catch (e) {{ return 'bad'; }} \
             if (!el) return 'none'; }} \
             const dy = {sign} * (el ? el.clientHeight : window.innerHeight); \
             (el || window).scrollBy(0, dy); return 'ok'; }})()"
        );
        match self.eval(&js).await?.as_str() {
            Some("ok") => Ok(()),
            Some("none") => Err(format!("no element matches {:?}", selector.unwrap_or(""))),
            _ => Err(format!(
                "{:?} is not a CSS selector",
                selector.unwrap_or("")
            )),
        }
    }

    /// A screenshot as asked, written to the artifacts folder; its file name.
    async fn shoot(&self, shot: &Shot) -> Result<String, String> {
        if let Some(vp) = shot.viewport {
            set_viewport(self.tab, vp, self.mobile).await?;
        }
        let jpeg = shot.quality.is_some();
        let mut p = CaptureScreenshotParams {
            format: Some(if jpeg {
                CaptureScreenshotFormat::Jpeg
            } else {
                CaptureScreenshotFormat::Png
            }),
            quality: shot.quality.map(|q| i64::from(q.clamp(1, 100))),
            ..Default::default()
        };
        if shot.full_page {
            let m = self.tab.layout_metrics().await.map_err(|e| e.to_string())?;
            let size = m.css_content_size;
            let width = size.width.clamp(1.0, 10_000.0);
            let height = size
                .height
                .clamp(1.0, MAX_SHOT_HEIGHT)
                .min(MAX_SHOT_PIXELS / width);
            p.clip = Some(Clip {
                x: 0.0,
                y: 0.0,
                width,
                height,
                scale: 1.0,
            });
            p.capture_beyond_viewport = Some(true);
        }
        let r = self.tab.execute(p).await.map_err(|e| e.to_string())?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(AsRef::<str>::as_ref(&r.result.data))
            .map_err(|e| format!("screenshot data: {e}"))?;
        self.keep(&bytes, if jpeg { "jpeg" } else { "png" }).await
    }

    async fn keep(&self, bytes: &[u8], ext: &str) -> Result<String, String> {
        let dir = self
            .dir
            .ok_or("this renderer has no artifacts folder to keep files in")?;
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = format!("{}.{ext}", uuid::Uuid::new_v4().simple());
        tokio::fs::write(dir.join(&name), bytes)
            .await
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(name)
    }
}

/// A script run as Firecrawl runs it: an expression's value, or a body's `return`; its
/// value given back with its type, as JSON (what JSON cannot hold is null).
fn run_js(script: &str) -> String {
    format!(
        "(async () => {{ const src = {src}; let v; \
         try {{ v = await (0, eval)(src); }} catch (e) {{ \
           if (!(e instanceof SyntaxError)) throw e; \
           const F = Object.getPrototypeOf(async function () {{}}).constructor; \
           v = await new F(src)(); }} \
         let value = null; try {{ const j = JSON.stringify(v); \
           value = j === undefined ? null : j.length > {max} ? '\\u0000too large' : JSON.parse(j); }} catch (e) {{}} \
         return {{ type: typeof v, value }}; }})()",
        src = js_str(script),
        max = MAX_RETURN_BYTES
    )
}

/// A Rust string as a JavaScript string literal.
fn js_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A paper format's width and height in inches (Letter when none is given).
fn paper(format: Option<&str>) -> Result<(f64, f64), String> {
    Ok(
        match format.unwrap_or("Letter").to_ascii_lowercase().as_str() {
            "letter" => (8.5, 11.0),
            "legal" => (8.5, 14.0),
            "tabloid" => (11.0, 17.0),
            "ledger" => (17.0, 11.0),
            "a0" => (33.1, 46.8),
            "a1" => (23.4, 33.1),
            "a2" => (16.54, 23.4),
            "a3" => (11.7, 16.54),
            "a4" => (8.27, 11.7),
            "a5" => (5.83, 8.27),
            "a6" => (4.13, 5.83),
            other => return Err(format!("unknown paper format {other:?}")),
        },
    )
}
