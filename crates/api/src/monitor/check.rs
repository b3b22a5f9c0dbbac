//! One check of a monitor: each target looked at again and compared with the check
//! before it. A `scrape` target's URLs are scraped and diffed against their last scrape
//! (the `changeTracking` comparison); a `crawl` target is a `trawl watch` round in the
//! monitor's directory (a re-crawl with conditional requests, compared page by page with
//! the round before, its index updated); a `search` target's results are compared with the
//! last ones. Every page is kept with the check and sent as a `monitor.page` event, the
//! summary as `monitor.check.completed`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::super::App;
use super::super::api::{self, ApiError, ScrapeOptions};
use super::super::jobs::Kind;
use super::super::webhooks::Hook;
use super::super::{changes, plan, scraping, search};
use super::store::MonitorRow;

/// Pages a crawl target's round reads at most.
const MAX_CRAWL_PAGES: u64 = 10_000;

/// One page of a check, before it is stored.
struct Page {
    status: &'static str,
    body: Value,
}

fn page(target: &str, url: &str, status: &'static str) -> Page {
    Page {
        status,
        body: json!({
            "id": uuid::Uuid::new_v4().to_string(),
            "targetId": target,
            "url": url,
            "status": status,
            "createdAt": chrono::Utc::now().to_rfc3339(),
        }),
    }
}

fn status_word(s: &str) -> &'static str {
    match s {
        "new" => "new",
        "same" => "same",
        "changed" => "changed",
        "removed" => "removed",
        _ => "error",
    }
}

/// The directory of a monitor's crawl target: its rounds and its index.
pub fn target_dir(app: &App, monitor: &str, target: &str) -> std::path::PathBuf {
    app.args.data.join("monitors").join(monitor).join(target)
}

/// A scrape target: each URL scraped and compared with its last scrape for this target.
async fn scrape_target(
    app: &Arc<App>,
    m: &MonitorRow,
    tid: &str,
    t: &Value,
) -> Result<Vec<Page>, ApiError> {
    let mut urls: Vec<String> = t["urls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(String::from))
        .collect();
    if let Some(u) = t["url"].as_str() {
        urls.push(u.to_string());
    }
    let mut so: ScrapeOptions = match t.get("scrapeOptions").filter(|v| !v.is_null()) {
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| ApiError::bad_request(format!("Bad Request: scrapeOptions: {e}")))?,
        None => ScrapeOptions::default(),
    };
    // The comparison is of Markdown: it is always made.
    let mut formats = so.formats.take().unwrap_or_default();
    if !formats
        .iter()
        .any(|f| matches!(f, api::FormatSpec::Name(n) if n == "markdown"))
    {
        formats.push(api::FormatSpec::Name("markdown".into()));
    }
    so.formats = Some(formats);
    let opts = so.resolve()?;
    let mut out = Vec::new();
    for raw in urls {
        let url = match api::http_url(&raw) {
            Ok(u) => u,
            Err(e) => {
                let mut p = page(tid, &raw, "error");
                p.body["error"] = e.message.into();
                out.push(p);
                continue;
            }
        };
        let ask = scraping::Ask {
            source_url: &raw,
            url: &url,
            opts: &opts,
            timeout: Some(Duration::from_secs(60)),
            owner: &m.owner,
            origin: "",
        };
        let doc = match scraping::scrape(app, ask).await {
            Ok(d) => d,
            Err(e) => {
                let mut p = page(tid, &raw, "error");
                p.body["error"] = e.message.into();
                out.push(p);
                continue;
            }
        };
        let markdown = doc["markdown"].as_str().unwrap_or_default().to_string();
        let code = doc["metadata"]["statusCode"].as_u64().unwrap_or(0) as u16;
        let (db, owner, key, tag) = (
            app.db.clone(),
            m.owner.clone(),
            raw.clone(),
            format!("monitor:{}:{tid}", m.id),
        );
        let change = tokio::task::spawn_blocking(move || {
            changes::track(&db, &owner, &key, Some(&tag), &markdown, code, true)
        })
        .await
        .map_err(ApiError::internal)??;
        let status = status_word(change["changeStatus"].as_str().unwrap_or_default());
        let mut p = page(tid, &raw, status);
        p.body["statusCode"] = code.into();
        p.body["currentScrapeId"] = doc["metadata"]["scrapeId"].clone();
        p.body["metadata"] = json!({"title": doc["metadata"]["title"], "previousScrapeAt": change["previousScrapeAt"]});
        if let Some(d) = change.get("diff") {
            p.body["diff"] = d.clone();
        }
        out.push(p);
    }
    Ok(out)
}

/// A crawl target: one `trawl watch` round, its pages read back with their comparison.
async fn crawl_target(
    app: &Arc<App>,
    m: &MonitorRow,
    tid: &str,
    t: &Value,
) -> Result<Vec<Page>, ApiError> {
    let mut req = t
        .get("crawlOptions")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    req["url"] = t["url"].clone();
    if let Some(so) = t.get("scrapeOptions").filter(|v| !v.is_null()) {
        req["scrapeOptions"] = so.clone();
    }
    // A crawl's changes are delivered by the monitor, not by the crawl's own webhook.
    if let Some(o) = req.as_object_mut() {
        o.remove("webhook");
    }
    let dir = target_dir(app, &m.id, tid);
    let planned = plan::plan(
        &app.args.settings,
        true,
        app.args.job_concurrency,
        &dir,
        Kind::Crawl,
        &req.to_string(),
    )?;
    let mut crawl = planned.opts;
    // A check's pages are kept, diffed and sent: a crawl target is capped.
    crawl.crawl.max_pages = match crawl.crawl.max_pages {
        0 => MAX_CRAWL_PAGES,
        n => n.min(MAX_CRAWL_PAGES),
    };
    crawl.control.stop = Some(app.stop.clone());
    let watch = trawl_runtime::watch::WatchPlan {
        crawl,
        every: Duration::ZERO,
        rounds: 1,
        keep: 2,
    };
    let (round, report) = trawl_runtime::watch::round(&watch, true).await?;
    if report.interrupted {
        return Err(ApiError::internal("the server stopped during the crawl"));
    }
    tokio::task::spawn_blocking({
        let tid = tid.to_string();
        move || read_round(&round, &tid)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::from)
}

/// A round's pages (`pages.jsonl`, each with its comparison) and the removed ones (its
/// `changes.jsonl`), with the diffs of the changed.
fn read_round(round: &Path, tid: &str) -> anyhow::Result<Vec<Page>> {
    use std::io::BufRead;
    let mut diffs = std::collections::HashMap::new();
    let mut removed = Vec::new();
    if let Ok(f) = std::fs::File::open(round.join("changes.jsonl")) {
        for line in std::io::BufReader::new(f).lines() {
            let Ok(e) = serde_json::from_str::<trawl_core::change::ChangeEvent>(&line?) else {
                continue;
            };
            if e.status == trawl_core::change::ChangeStatus::Removed {
                removed.push(e.url.clone());
            }
            if let Some(d) = e.diff {
                diffs.insert(e.url.clone(), d);
            }
        }
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    if let Ok(f) = std::fs::File::open(round.join("pages.jsonl")) {
        for line in std::io::BufReader::new(f).lines() {
            let Ok(rec) = serde_json::from_str::<trawl_core::PageRecord>(&line?) else {
                continue;
            };
            // Sitemaps and feeds are how the crawl found pages, not pages.
            if rec.kind != trawl_core::UrlKind::Page || !seen.insert(rec.url.clone()) {
                continue;
            }
            let status = match rec.change.as_ref().map(|c| c.status.as_str()) {
                Some(s) => status_word(s),
                None if rec.error.is_some() => "error",
                None => "new",
            };
            let mut p = page(tid, &rec.url, status);
            p.body["statusCode"] = rec.status.into();
            p.body["metadata"] = json!({"title": rec.title, "finalUrl": rec.final_url});
            if let Some(e) = &rec.error {
                p.body["error"] = serde_json::to_value(e).unwrap_or(Value::Null);
            }
            if let Some(d) = diffs.get(&rec.url) {
                p.body["diff"] = json!({"text": d.text, "json": {"added": d.added, "removed": d.removed, "headings": d.headings}});
            }
            out.push(p);
        }
    }
    for url in removed {
        if seen.insert(url.clone()) {
            out.push(page(tid, &url, "removed"));
        }
    }
    Ok(out)
}

/// A search target: each query's results over this server's indexes (and web backend),
/// compared with the last results of that query.
async fn search_target(
    app: &Arc<App>,
    m: &MonitorRow,
    tid: &str,
    t: &Value,
) -> Result<Vec<Page>, ApiError> {
    let limit = t["maxResults"].as_u64().unwrap_or(10).clamp(1, 100) as usize;
    let mut out = Vec::new();
    for q in t["queries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let (found, _) = search::find(app, &m.owner, q, limit, Duration::from_secs(60)).await?;
        let now: Vec<String> = found.iter().map(|f| f.url.clone()).collect();
        let (db, owner, tag, list) = (
            app.db.clone(),
            m.owner.clone(),
            format!("monitor:{}:{tid}:search", m.id),
            now.join("\n"),
        );
        let q2 = q.to_string();
        let before = tokio::task::spawn_blocking(move || {
            db.swap_snapshot(
                &owner,
                &q2,
                &tag,
                &super::super::db::Snapshot {
                    markdown: list,
                    status: 200,
                    scraped_at: chrono::Utc::now().to_rfc3339(),
                },
            )
        })
        .await
        .map_err(ApiError::internal)??;
        let before: HashSet<String> = before
            .map(|s| s.markdown.lines().map(String::from).collect())
            .unwrap_or_default();
        for f in &found {
            let status = if before.contains(&f.url) {
                "same"
            } else {
                "new"
            };
            let mut p = page(tid, &f.url, status);
            p.body["metadata"] =
                json!({"title": f.title, "description": f.description, "query": q});
            out.push(p);
        }
        for url in before.iter().filter(|u| !now.contains(u)) {
            let mut p = page(tid, url, "removed");
            p.body["metadata"] = json!({"query": q});
            out.push(p);
        }
    }
    Ok(out)
}

/// A target's pages stored with the check, from place `first` on, and each queued as a
/// `monitor.page` event when the monitor has a webhook.
fn keep_pages(
    app: &App,
    check: &str,
    monitor: &str,
    hook: Option<&Hook>,
    first: usize,
    pages: Vec<Page>,
) -> anyhow::Result<()> {
    for (i, p) in pages.into_iter().enumerate() {
        let seq = first + i;
        app.monitors.add_page(check, seq, p.status, &p.body)?;
        if let Some(h) = hook {
            let extra = json!({"monitorId": monitor, "checkId": check});
            let id = format!("{check}.page.{seq}");
            app.outbox
                .enqueue_as(&id, h, "monitor.page", monitor, json!([p.body]), extra)?;
        }
    }
    Ok(())
}

/// Runs the check `check` of `m` to its end: its pages stored and sent, its summary kept.
pub async fn run(app: Arc<App>, m: MonitorRow, check: String) {
    let hook = Hook::parse(m.spec.get("webhook"), app.args.settings.crawl.allow_private)
        .ok()
        .flatten();
    let mut summary =
        json!({"totalPages": 0, "same": 0, "changed": 0, "new": 0, "removed": 0, "error": 0});
    let mut results = Vec::new();
    let mut seq = 0usize;
    let mut failed_targets = 0;
    let targets = m.spec["targets"].as_array().cloned().unwrap_or_default();
    for t in &targets {
        let tid = t["id"].as_str().unwrap_or_default().to_string();
        let kind = t["type"].as_str().unwrap_or_default().to_string();
        let pages = match kind.as_str() {
            "scrape" => scrape_target(&app, &m, &tid, t).await,
            "crawl" => crawl_target(&app, &m, &tid, t).await,
            _ => search_target(&app, &m, &tid, t).await,
        };
        let mut result = json!({"targetId": tid, "type": kind});
        match pages {
            Ok(pages) => {
                result["resultCount"] = pages.len().into();
                for p in &pages {
                    summary["totalPages"] =
                        (summary["totalPages"].as_u64().unwrap_or(0) + 1).into();
                    summary[p.status] = (summary[p.status].as_u64().unwrap_or(0) + 1).into();
                }
                // Kept and queued for the webhook in one go, off the async threads.
                let (a, c, mid, h, first) =
                    (app.clone(), check.clone(), m.id.clone(), hook.clone(), seq);
                seq += pages.len();
                let kept = tokio::task::spawn_blocking(move || {
                    keep_pages(&a, &c, &mid, h.as_ref(), first, pages)
                })
                .await;
                if !matches!(kept, Ok(Ok(()))) {
                    tracing::warn!(check = %check, "a monitor check's pages could not all be kept");
                }
            }
            Err(e) => {
                failed_targets += 1;
                result["error"] = e.message.into();
            }
        }
        results.push(result);
    }
    let status = match failed_targets {
        0 => "completed",
        n if n == targets.len() && n > 0 => "failed",
        _ => "partial",
    };
    let error = (failed_targets > 0).then(|| {
        results
            .iter()
            .filter_map(|r| r["error"].as_str())
            .collect::<Vec<_>>()
            .join("; ")
    });
    let credits = summary["totalPages"].as_u64().unwrap_or(0);
    app.usage.spend(&m.owner, credits);
    let store = app.monitors.clone();
    let (c, mid, s, r) = (
        check.clone(),
        m.id.clone(),
        summary.clone(),
        Value::Array(results),
    );
    let done = tokio::task::spawn_blocking(move || {
        store.finish_check(&c, &mid, status, &s, &r, error.as_deref())
    })
    .await;
    if !matches!(done, Ok(Ok(()))) {
        tracing::warn!(check = %check, "a monitor check's end could not be kept");
    }
    if let Some(h) = hook {
        let extra =
            json!({"monitorId": m.id, "checkId": check, "status": status, "summary": summary});
        let (app, id, mid) = (app.clone(), format!("{check}.completed"), m.id.clone());
        let queued = tokio::task::spawn_blocking(move || {
            app.outbox
                .enqueue_as(&id, &h, "monitor.check.completed", &mid, json!([]), extra)
        })
        .await;
        if !matches!(queued, Ok(Ok(_))) {
            tracing::warn!(check = %check, "a monitor event could not be kept");
        }
    }
}
