//! One page in the browser: a fresh incognito context and tab, every request intercepted
//! (the page's own document answered from the body already fetched, nothing fetched
//! twice), a wait until the page settles or its deadline, the DOM read back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::fetch::{
    EnableParams, EventRequestPaused, FailRequestParams, FulfillRequestParams, HeaderEntry,
    RequestPattern, RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use futures_util::StreamExt;
use trawl_core::Fetched;
use trawl_core::render::{Artifacts, PageScript};

use crate::RenderError;
use crate::browser::Live;
use crate::subrequest::{Answer, Subrequests, count, wanted};

/// The DOM kept, at most: what extraction reads.
pub const MAX_DOM_BYTES: usize = 8 << 20;

/// How a page's render is bounded.
#[derive(Debug, Clone)]
pub struct PageLimits {
    /// Navigation to DOM read.
    pub timeout: Duration,
    /// Settled: the load event fired and no request has been in flight for this long.
    pub idle: Duration,
    /// Settled when this selector matches instead.
    pub wait_for: Option<String>,
    /// Subrequests answered; later ones are refused (`budget`).
    pub max_requests: u32,
}

/// What a render produced.
pub(crate) struct Rendered {
    /// The DOM as HTML, when it could be read.
    pub(crate) dom: Option<String>,
    pub(crate) requests: u32,
    pub(crate) blocked: BTreeMap<String, u32>,
    /// Not settled by the deadline.
    pub(crate) timed_out: bool,
    pub(crate) elapsed: Duration,
    /// What the page's script made, when it had one.
    pub(crate) artifacts: Option<Artifacts>,
}

/// A page's script and where it runs: its files' folder, the time it may take once the
/// page settled.
pub(crate) struct Scripted<'a> {
    pub(crate) script: &'a PageScript,
    pub(crate) dir: Option<&'a std::path::Path>,
    pub(crate) budget: Duration,
}

/// The page's request bookkeeping, shared with its interceptor task.
#[derive(Default)]
struct Traffic {
    in_flight: AtomicU32,
    /// Milliseconds since the render's start of the last request start or end.
    last_change_ms: AtomicU64,
    requests: AtomicU32,
    blocked: std::sync::Mutex<BTreeMap<String, u32>>,
}

impl Traffic {
    fn touch(&self, start: Instant) {
        self.last_change_ms
            .store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    fn block(&self, why: &str) {
        count(
            &mut self.blocked.lock().unwrap_or_else(|e| e.into_inner()),
            why,
        );
    }
}

/// Renders `page` (its body is the document) in `live`'s browser.
pub(crate) async fn render(
    live: &Live,
    page: &Fetched,
    subs: &Arc<Subrequests>,
    limits: &PageLimits,
    script: Option<&Scripted<'_>>,
) -> Result<Rendered, RenderError> {
    let start = Instant::now();
    let browser = &live.browser;
    let ctx = within(
        live,
        browser.create_browser_context(CreateBrowserContextParams::default()),
    )
    .await?
    .map_err(RenderError::cdp)?;
    let target = CreateTargetParams::builder()
        .url("about:blank")
        .browser_context_id(ctx.clone())
        .build()
        .map_err(RenderError::Browser)?;
    let tab = match within(live, browser.new_page(target)).await {
        Ok(Ok(t)) => t,
        other => {
            let _ = within(live, browser.dispose_browser_context(ctx)).await;
            return Err(match other {
                Ok(Err(e)) => RenderError::cdp(e),
                Err(e) => e,
                Ok(Ok(_)) => RenderError::Hung,
            });
        }
    };
    let result = drive(live, &tab, page, subs, limits, script, start).await;
    // The tab and its context go whatever happened; a browser that does not answer is
    // marked hung and restarted before the next page.
    let _ = within(live, tab.close()).await;
    let _ = within(live, browser.dispose_browser_context(ctx)).await;
    result
}

/// A DevTools call under the browser's command timeout; a timeout marks the browser hung.
async fn within<T>(live: &Live, f: impl std::future::Future<Output = T>) -> Result<T, RenderError> {
    match tokio::time::timeout(live.command_timeout, f).await {
        Ok(v) => Ok(v),
        Err(_) => {
            live.hung.store(true, Ordering::Relaxed);
            Err(RenderError::Hung)
        }
    }
}

/// Interception on, navigation, the wait, the DOM.
async fn drive(
    live: &Live,
    tab: &Page,
    page: &Fetched,
    subs: &Arc<Subrequests>,
    limits: &PageLimits,
    script: Option<&Scripted<'_>>,
    start: Instant,
) -> Result<Rendered, RenderError> {
    let traffic = Arc::new(Traffic::default());
    if let Some(s) = script {
        crate::script::emulate(tab, s.script)
            .await
            .map_err(RenderError::Browser)?;
    }
    let paused = within(live, tab.event_listener::<EventRequestPaused>())
        .await?
        .map_err(RenderError::cdp)?;
    let pattern = RequestPattern::builder()
        .url_pattern("*")
        .request_stage(RequestStage::Request)
        .build();
    within(
        live,
        tab.execute(EnableParams::builder().pattern(pattern).build()),
    )
    .await?
    .map_err(RenderError::cdp)?;
    let interceptor = AbortOnDrop(tokio::spawn(intercept(
        paused,
        tab.clone(),
        traffic.clone(),
        subs.clone(),
        page.clone(),
        (
            limits.max_requests,
            script.is_some_and(|s| s.script.draws()),
        ),
        start,
    )));
    let nav = NavigateParams::new(page.final_url.clone());
    let settled = async {
        let r = within(live, tab.execute(nav))
            .await?
            .map_err(RenderError::cdp)?;
        if let Some(e) = r.result.error_text.as_deref().filter(|e| !e.is_empty()) {
            return Err(RenderError::Browser(format!("navigation failed: {e}")));
        }
        wait_settled(tab, &traffic, limits, start).await
    };
    let timed_out = match tokio::time::timeout(limits.timeout, settled).await {
        Ok(r) => {
            r?;
            false
        }
        Err(_) => true,
    };
    // A page still busy at its deadline gets its actions all the same (Firecrawl's way):
    // the script has a deadline of its own.
    let artifacts = match script {
        Some(s) => Some(run_script(tab, s, &traffic, limits.idle, start).await),
        None => None,
    };
    let dom = read_dom(live, tab, timed_out, &page.final_url).await?;
    drop(interceptor);
    let blocked = traffic
        .blocked
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(Rendered {
        dom: dom.map(cut),
        requests: traffic.requests.load(Ordering::Relaxed),
        blocked,
        timed_out,
        elapsed: start.elapsed(),
        artifacts,
    })
}

/// The page's DOM as HTML. A page still busy at its deadline may not answer: that is the
/// page, not a hung browser, so its DOM read is bounded without marking the browser.
async fn read_dom(
    live: &Live,
    tab: &Page,
    timed_out: bool,
    url: &str,
) -> Result<Option<String>, RenderError> {
    let read = tab.evaluate(DOM_JS);
    if timed_out {
        return Ok(
            match tokio::time::timeout(live.command_timeout, read).await {
                Ok(Ok(v)) => v.into_value::<String>().ok(),
                _ => None,
            },
        );
    }
    Ok(match within(live, read).await? {
        Ok(v) => v.into_value::<String>().ok(),
        Err(e) => {
            tracing::debug!(url, error = %e, "DOM not read");
            None
        }
    })
}

/// Runs the page's script in `tab` under its own budget.
async fn run_script(
    tab: &Page,
    s: &Scripted<'_>,
    traffic: &Traffic,
    idle: Duration,
    start: Instant,
) -> Artifacts {
    let run = crate::script::Run {
        tab,
        dir: s.dir,
        deadline: Instant::now() + s.budget,
        mobile: s.script.mobile,
        quiet: move |cap: Duration| quiet(traffic, idle, cap, start),
    };
    run.script(s.script).await
}

/// Waits until none of the page's requests has been in flight for `idle`, for `cap` at
/// most: the requests an action started get their answers before the next action.
async fn quiet(traffic: &Traffic, idle: Duration, cap: Duration, start: Instant) {
    let until = Instant::now() + cap;
    // An action's requests start a moment after it; the first look waits for them.
    tokio::time::sleep(Duration::from_millis(50).min(cap)).await;
    while Instant::now() < until {
        let quiet_ms = (start.elapsed().as_millis() as u64)
            .saturating_sub(traffic.last_change_ms.load(Ordering::Relaxed));
        if traffic.in_flight.load(Ordering::Relaxed) == 0 && quiet_ms >= idle.as_millis() as u64 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The document as HTML, cut in the page (a DOM of gigabytes never crosses the protocol).
pub(crate) const DOM_JS: &str = "(() => { if (!/^https?:/.test(location.href)) return null; \
    const e = document.documentElement; \
    const h = (document.doctype ? '<!DOCTYPE html>' : '') + (e ? e.outerHTML : ''); \
    return h.slice(0, 8388608); })()";

/// Aborts the task when dropped: whatever way a render ends, its interceptor and the
/// answers it is still fetching stop with it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Answers every request the tab pauses: the first document of the main frame from the
/// page's fetched body, later navigations of the main frame refused (the page stays the
/// page that was fetched), the rest through the checks. Answers run concurrently in a set
/// dropped (so aborted) with this task.
async fn intercept(
    mut paused: chromiumoxide::listeners::EventStream<EventRequestPaused>,
    tab: Page,
    traffic: Arc<Traffic>,
    subs: Arc<Subrequests>,
    doc: Fetched,
    (max, draws): (u32, bool),
    start: Instant,
) {
    let mut answers = tokio::task::JoinSet::new();
    let mut main_frame = None;
    while let Some(ev) = paused.next().await {
        while answers.try_join_next().is_some() {}
        traffic.in_flight.fetch_add(1, Ordering::Relaxed);
        traffic.touch(start);
        let document = ev.resource_type == ResourceType::Document;
        let own = document && main_frame.is_none();
        if own {
            main_frame = Some(ev.frame_id.clone());
        }
        let refused = if own {
            None
        } else if document && main_frame.as_ref() == Some(&ev.frame_id) {
            Some("navigation")
        } else if !wanted(&ev.resource_type, draws) {
            Some("resource_type")
        } else if traffic.requests.fetch_add(1, Ordering::Relaxed) >= max {
            traffic.requests.fetch_sub(1, Ordering::Relaxed);
            Some("budget")
        } else {
            None
        };
        let (tab, traffic, subs, doc) = (tab.clone(), traffic.clone(), subs.clone(), doc.clone());
        answers.spawn(async move {
            let answer = match refused {
                Some(why) => Answer::Block(why),
                None if own => Answer::Respond {
                    status: doc.status,
                    content_type: Some("text/html; charset=utf-8".into()),
                    body: doc.body,
                },
                None => {
                    let a = subs
                        .answer(
                            &doc.crawl,
                            doc.job.depth,
                            &ev.request.method,
                            &ev.request.url,
                        )
                        .await;
                    if matches!(a, Answer::Block(_)) {
                        // Refused by the checks: it never went out.
                        traffic.requests.fetch_sub(1, Ordering::Relaxed);
                    }
                    a
                }
            };
            respond(&tab, &ev, answer, &traffic).await;
            traffic.in_flight.fetch_sub(1, Ordering::Relaxed);
            traffic.touch(start);
        });
    }
}

/// Answers one paused request in the tab; a response the browser does not take is
/// failed instead, so no request stays paused.
async fn respond(tab: &Page, ev: &EventRequestPaused, answer: Answer, traffic: &Traffic) {
    // A refused navigation of the main frame is aborted (the page stays); anything else
    // fails as blocked.
    let fail = |why: &str| {
        let reason = if why == "navigation" {
            ErrorReason::Aborted
        } else {
            ErrorReason::BlockedByClient
        };
        FailRequestParams::new(ev.request_id.clone(), reason)
    };
    let sent = match answer {
        Answer::Block(why) => {
            traffic.block(why);
            tracing::debug!(url = %ev.request.url, why, "subrequest refused");
            tab.execute(fail(why)).await.map(|_| ())
        }
        Answer::Respond {
            status,
            content_type,
            body,
        } => {
            let mut headers = Vec::new();
            if let Some(ct) = content_type {
                headers.push(HeaderEntry::new("Content-Type", ct));
            }
            // The response is the one trawl fetched for this page: the page may read it
            // wherever it came from (CORS is the browser's, checked against headers the
            // fetcher does not carry).
            if let Some(origin) = ev
                .request
                .headers
                .inner()
                .get("Origin")
                .and_then(|o| o.as_str())
            {
                headers.push(HeaderEntry::new("Access-Control-Allow-Origin", origin));
            }
            let mut f =
                FulfillRequestParams::new(ev.request_id.clone(), i64::from(status.max(100)));
            f.response_headers = Some(headers);
            f.body = Some(
                base64::engine::general_purpose::STANDARD
                    .encode(body)
                    .into(),
            );
            match tab.execute(f).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    tracing::debug!(url = %ev.request.url, error = %e, "response not taken; request failed");
                    tab.execute(fail("failed")).await.map(|_| ())
                }
            }
        }
    };
    if let Err(e) = sent {
        // The tab may be closing: its requests no longer matter.
        tracing::debug!(url = %ev.request.url, error = %e, "request not answered");
    }
}

/// Polls until the page is settled: the selector matches, or the document is loaded and
/// no request has started or ended for `idle`.
async fn wait_settled(
    tab: &Page,
    traffic: &Traffic,
    limits: &PageLimits,
    start: Instant,
) -> Result<(), RenderError> {
    let probe = match &limits.wait_for {
        Some(sel) => format!(
            "(() => {{ try {{ return !!document.querySelector({}); }} catch (e) {{ return false; }} }})()",
            serde_json::to_string(sel).unwrap_or_else(|_| "''".into())
        ),
        None => "document.readyState === 'complete'".to_string(),
    };
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let ready = tab
            .evaluate(probe.as_str())
            .await
            .ok()
            .and_then(|r| r.into_value::<bool>().ok())
            .unwrap_or(false);
        if !ready {
            continue;
        }
        if limits.wait_for.is_some() {
            return Ok(());
        }
        let quiet_ms = (start.elapsed().as_millis() as u64)
            .saturating_sub(traffic.last_change_ms.load(Ordering::Relaxed));
        if traffic.in_flight.load(Ordering::Relaxed) == 0
            && quiet_ms >= limits.idle.as_millis() as u64
        {
            return Ok(());
        }
    }
}

/// The DOM cut to what extraction reads, on a character boundary.
pub(crate) fn cut(mut html: String) -> String {
    if html.len() > MAX_DOM_BYTES {
        let mut end = MAX_DOM_BYTES;
        while !html.is_char_boundary(end) {
            end -= 1;
        }
        html.truncate(end);
    }
    html
}
