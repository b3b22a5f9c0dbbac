//! `/v2/monitor`: monitors hosted by the server. A monitor is a schedule and targets
//! (`scrape` URLs, a `crawl`, `search` queries); at each time of its schedule, or when
//! `run`, a check looks at every target again and lists each page `new`, `same`,
//! `changed` (with its diff) or `removed` ([`check`]), delivered to its webhook as
//! Firecrawl's `monitor.page` and `monitor.check.completed` events, signed. Monitors,
//! checks and pages live in `serve.db` ([`store`]).

pub mod check;
pub mod schedule;
pub mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

use super::api::{self, ApiError};
use super::webhooks::Hook;
use super::{Answer, App, Owner, PageQuery};
use schedule::Schedule;
use store::{CheckRow, MonitorRow};

/// Firecrawl's retention when a monitor gives none.
const DEFAULT_RETENTION_DAYS: i64 = 30;

/// Targets a monitor may have, and URLs a scrape target.
const MAX_TARGETS: usize = 50;
const MAX_URLS: usize = 1000;

fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, None, "Monitor not found")
}

fn bad(m: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("Bad Request: {m}"))
}

/// A request's targets, checked, each with an id (kept when given).
fn targets(v: &Value, allow_private: bool) -> Result<Vec<Value>, ApiError> {
    let list = v.as_array().ok_or_else(|| bad("targets must be a list"))?;
    if list.is_empty() || list.len() > MAX_TARGETS {
        return Err(bad(format!("a monitor has 1 to {MAX_TARGETS} targets")));
    }
    let mut out = Vec::new();
    for t in list {
        let mut t = t
            .as_object()
            .cloned()
            .ok_or_else(|| bad("a target is an object"))?;
        match t.get("type").and_then(Value::as_str) {
            Some("scrape") => {
                let mut n = 0;
                for u in t
                    .get("urls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    api::http_url(u.as_str().unwrap_or_default())?;
                    n += 1;
                }
                if let Some(u) = t.get("url").and_then(Value::as_str) {
                    api::http_url(u)?;
                    n += 1;
                }
                if n == 0 || n > MAX_URLS {
                    return Err(bad(format!("a scrape target has 1 to {MAX_URLS} urls")));
                }
            }
            Some("crawl") => {
                api::http_url(t.get("url").and_then(Value::as_str).unwrap_or_default())?;
            }
            Some("search") => {
                let qs = t.get("queries").and_then(Value::as_array);
                if qs.is_none_or(|q| {
                    q.is_empty()
                        || q.iter()
                            .any(|x| x.as_str().is_none_or(|s| s.trim().is_empty()))
                }) {
                    return Err(bad("a search target has queries, a list of words"));
                }
            }
            other => {
                return Err(bad(format!(
                    "target type {other:?}: scrape, crawl or search"
                )));
            }
        }
        if let Some(so) = t.get("scrapeOptions").filter(|v| !v.is_null()) {
            let so: api::ScrapeOptions = serde_json::from_value(so.clone())
                .map_err(|e| bad(format!("scrapeOptions: {e}")))?;
            let opts = so.resolve()?;
            if opts.formats.needs_llm() || opts.script.is_some() {
                return Err(bad(
                    "a monitor compares Markdown: no json, summary, screenshot or browser options",
                ));
            }
        }
        if let Some(w) = t.get("crawlOptions").and_then(|c| c.get("webhook")) {
            Hook::parse(Some(w), allow_private)?;
        }
        let id = t
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| {
                !s.is_empty()
                    && s.len() <= 64
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
            .map(String::from)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        t.insert("id".into(), id.into());
        out.push(Value::Object(t));
    }
    Ok(out)
}

/// Monitors one key may have.
const MAX_MONITORS: usize = 100;

/// The spec's schedule, checked (runs at least `min_gap_s` apart), written back in its
/// normalised form (`cron`).
fn schedule_of(v: &Value, min_gap_s: u64) -> Result<(Schedule, Value), ApiError> {
    let s = Schedule::parse(
        v["cron"].as_str(),
        v["text"].as_str(),
        v["timezone"].as_str(),
    )
    .map_err(|e| bad(format!("schedule: {e}")))?;
    let now = chrono::Utc::now();
    if let Some(a) = s.next_after(now)
        && let Some(b) = s.next_after(a)
        && (b - a).num_seconds() < min_gap_s as i64
    {
        return Err(bad(format!(
            "schedule: {} runs every {} s; this server runs a monitor at most every {min_gap_s} s",
            s.cron,
            (b - a).num_seconds()
        )));
    }
    let mut out = json!({"cron": s.cron, "timezone": "UTC"});
    if let Some(t) = v["text"].as_str() {
        out["text"] = t.into();
    }
    Ok((s, out))
}

/// Applies a create or update body to `spec`: every field given is checked and replaces
/// the spec's.
fn apply(
    spec: &mut Map<String, Value>,
    body: &Map<String, Value>,
    app: &App,
) -> Result<Option<Schedule>, ApiError> {
    let allow_private = app.args.settings.crawl.allow_private;
    let mut sched = None;
    for (k, v) in body {
        match k.as_str() {
            "name" => {
                let n = v
                    .as_str()
                    .filter(|n| !n.trim().is_empty())
                    .ok_or_else(|| bad("name must be a non-empty string"))?;
                spec.insert("name".into(), n.into());
            }
            "schedule" => {
                let (s, norm) = schedule_of(v, app.args.monitor_min_interval_s)?;
                sched = Some(s);
                spec.insert("schedule".into(), norm);
            }
            "targets" => {
                spec.insert("targets".into(), Value::Array(targets(v, allow_private)?));
            }
            "webhook" => {
                Hook::parse(Some(v), allow_private)?;
                spec.insert("webhook".into(), v.clone());
            }
            "retentionDays" => {
                let d = v
                    .as_i64()
                    .filter(|d| (1..=3650).contains(d))
                    .ok_or_else(|| bad("retentionDays must be 1 to 3650"))?;
                spec.insert("retentionDays".into(), d.into());
            }
            "notification" | "goal" | "judgeEnabled" => {
                spec.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    Ok(sched)
}

fn ms(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_millis()
}

fn iso(ms: Option<i64>) -> Value {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map_or(Value::Null, |t| t.to_rfc3339().into())
}

/// A monitor in Firecrawl's shape.
fn monitor_json(app: &App, m: &MonitorRow) -> Value {
    let mut out = m.spec.clone();
    let last = app
        .monitors
        .checks(&m.id, 5, 0)
        .ok()
        .and_then(|c| c.into_iter().find(|c| c.status != "running"))
        .map(|c| c.summary);
    out["id"] = m.id.clone().into();
    out["status"] = m.status.clone().into();
    out["nextRunAt"] = iso(m.next_run_at);
    out["lastRunAt"] = m.last_run_at.clone().map_or(Value::Null, Value::from);
    out["currentCheckId"] = m.current_check.clone().map_or(Value::Null, Value::from);
    out["lastCheckSummary"] = last.unwrap_or(Value::Null);
    out["createdAt"] = m.created_at.clone().into();
    out["updatedAt"] = m.updated_at.clone().into();
    if out.get("retentionDays").is_none_or(Value::is_null) {
        out["retentionDays"] = DEFAULT_RETENTION_DAYS.into();
    }
    out
}

fn check_json(k: &CheckRow) -> Value {
    json!({
        "id": k.id,
        "monitorId": k.monitor,
        "status": k.status,
        "trigger": k.trigger,
        "scheduledFor": k.scheduled_for,
        "startedAt": k.started_at,
        "finishedAt": k.finished_at,
        "billingStatus": "not_applicable",
        "summary": k.summary,
        "targetResults": k.targets,
        "error": k.error,
        "createdAt": k.created_at,
        "updatedAt": k.updated_at,
    })
}

fn owned(app: &App, id: &str, owner: &str) -> Result<MonitorRow, ApiError> {
    match app.monitors.get(id)? {
        Some(m) if m.owner == owner => Ok(m),
        _ => Err(not_found()),
    }
}

/// Starts a check of `m` (`manual` or `scheduled`): `skipped_overlap` when one still runs,
/// `skipped_no_credits` when the key's month is spent. Blocking (the database).
pub fn start_check(
    app: &Arc<App>,
    m: &MonitorRow,
    trigger: &str,
    scheduled_for: Option<String>,
) -> anyhow::Result<CheckRow> {
    let now = chrono::Utc::now().to_rfc3339();
    let broke = app.usage.check(&m.owner).is_err();
    let mut row = CheckRow {
        id: uuid::Uuid::new_v4().to_string(),
        monitor: m.id.clone(),
        status: if broke {
            "skipped_no_credits"
        } else {
            "running"
        }
        .into(),
        trigger: trigger.into(),
        scheduled_for,
        started_at: Some(now.clone()),
        finished_at: broke.then(|| now.clone()),
        summary: json!({"totalPages": 0, "same": 0, "changed": 0, "new": 0, "removed": 0, "error": 0}),
        targets: None,
        error: None,
        created_at: now.clone(),
        updated_at: now,
    };
    app.monitors.insert_check(&mut row)?;
    if row.status == "running" {
        let (app, m, id) = (app.clone(), m.clone(), row.id.clone());
        tokio::spawn(async move {
            // A check that panics is ended as failed: its monitor is not left busy.
            let inner = tokio::spawn(check::run(app.clone(), m.clone(), id.clone()));
            if let Err(e) = inner.await
                && e.is_panic()
            {
                tracing::error!(check = %id, "a monitor check panicked");
                let sum = json!({});
                let _ = tokio::task::spawn_blocking(move || {
                    app.monitors.finish_check(
                        &id,
                        &m.id,
                        "failed",
                        &sum,
                        &json!([]),
                        Some("the check panicked"),
                    )
                })
                .await;
            }
        });
    }
    Ok(row)
}

/// Runs the monitors' schedules until the server stops: each due monitor's next run is
/// moved on first (so a restart does not run it twice), then its check starts.
pub async fn scheduler(app: Arc<App>) {
    let mut stop = app.stop.clone();
    loop {
        let a = app.clone();
        let next = tokio::task::spawn_blocking(move || tick(&a)).await;
        let wait = match next {
            Ok(Ok(Some(t))) => {
                Duration::from_millis((t - ms(chrono::Utc::now())).clamp(50, 1000) as u64)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %format!("{e:#}"), "monitor schedules");
                Duration::from_secs(1)
            }
            _ => Duration::from_secs(1),
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = app.monitor_wake.notified() => {}
            _ = stop.recv() => return,
        }
    }
}

/// Starts the checks that are due; answers when the next one is.
fn tick(app: &Arc<App>) -> anyhow::Result<Option<i64>> {
    let now = chrono::Utc::now();
    for m in app.monitors.due(ms(now))? {
        let sched = m.spec["schedule"]["cron"]
            .as_str()
            .and_then(|c| c.parse::<Schedule>().ok());
        let next = sched.and_then(|s| s.next_after(now)).map(ms);
        // The run is this tick's only if the due time is still the one read.
        let Some(due) = m.next_run_at else { continue };
        if !app.monitors.claim_due(&m.id, due, next)? {
            continue;
        }
        // The blocking pool runs inside the runtime: the check's task can start from here.
        start_check(
            app,
            &m,
            "scheduled",
            iso(m.next_run_at).as_str().map(String::from),
        )?;
        let days = m.spec["retentionDays"]
            .as_i64()
            .unwrap_or(DEFAULT_RETENTION_DAYS);
        let cutoff = (now - chrono::Duration::days(days)).to_rfc3339();
        app.monitors.forget_before(&m.id, &cutoff)?;
    }
    app.monitors.next_due()
}

/// The indexes of `owner`'s monitors' crawl targets, for `/v2/search`.
pub fn indexes_of(app: &App, owner: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for m in app.monitors.all_of(owner)? {
        for t in m.spec["targets"].as_array().into_iter().flatten() {
            if t["type"] == "crawl" {
                let dir = check::target_dir(app, &m.id, t["id"].as_str().unwrap_or_default())
                    .join("index");
                if dir.is_dir() {
                    out.push(dir);
                }
            }
        }
    }
    Ok(out)
}

fn body_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match api::parse::<Value>(body)? {
        Value::Object(o) => Ok(o),
        _ => Err(bad("the body must be a JSON object")),
    }
}

/// `f` on the blocking pool (the database is there), its value as the answer.
async fn blocking<F>(app: Arc<App>, f: F) -> Answer
where
    F: FnOnce(&Arc<App>) -> Result<Value, ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(move || f(&app).map(axum::Json))
        .await
        .map_err(ApiError::internal)?
}

pub(crate) async fn create(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    body: Bytes,
) -> Answer {
    let body = body_object(&body)?;
    for k in ["name", "schedule", "targets"] {
        if body.get(k).is_none_or(Value::is_null) {
            return Err(bad(format!("a monitor needs its {k}")));
        }
    }
    let mut spec = Map::new();
    let sched =
        apply(&mut spec, &body, &app)?.ok_or_else(|| bad("a monitor needs its schedule"))?;
    spec.entry("retentionDays")
        .or_insert(DEFAULT_RETENTION_DAYS.into());
    let now = chrono::Utc::now();
    let m = MonitorRow {
        id: uuid::Uuid::new_v4().to_string(),
        owner,
        spec: Value::Object(spec),
        status: "active".into(),
        next_run_at: sched.next_after(now).map(ms),
        last_run_at: None,
        current_check: None,
        created_at: now.to_rfc3339(),
        updated_at: now.to_rfc3339(),
    };
    blocking(app, move |app| {
        if app.monitors.all_of(&m.owner)?.len() >= MAX_MONITORS {
            return Err(super::rate_limited(format!(
                "a key has at most {MAX_MONITORS} monitors: delete one first"
            )));
        }
        app.monitors.insert(&m)?;
        app.monitor_wake.notify_one();
        Ok(json!({"success": true, "data": monitor_json(app, &m)}))
    })
    .await
}

pub(crate) async fn list(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    q: Query<PageQuery>,
) -> Answer {
    let (offset, limit) = q.numbers_named("offset")?;
    blocking(app, move |app| {
        let rows = app
            .monitors
            .list(&owner, limit.unwrap_or(100).min(1000), offset)?;
        let data: Vec<Value> = rows.iter().map(|m| monitor_json(app, m)).collect();
        Ok(json!({"success": true, "data": data}))
    })
    .await
}

pub(crate) async fn get(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
) -> Answer {
    blocking(app, move |app| {
        let m = owned(app, &id, &owner)?;
        Ok(json!({"success": true, "data": monitor_json(app, &m)}))
    })
    .await
}

pub(crate) async fn update(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer {
    let body = body_object(&body)?;
    blocking(app, move |app| {
        let mut m = owned(app, &id, &owner)?;
        let mut spec = m.spec.as_object().cloned().unwrap_or_default();
        let sched = apply(&mut spec, &body, app)?;
        if let Some(s) = body.get("status") {
            m.status = match s.as_str() {
                Some(s @ ("active" | "paused")) => s.to_string(),
                _ => return Err(bad("status is active or paused")),
            };
        }
        m.spec = Value::Object(spec);
        let now = chrono::Utc::now();
        let reschedule = sched.is_some() || body.contains_key("status");
        if reschedule {
            let s = sched.or_else(|| {
                m.spec["schedule"]["cron"]
                    .as_str()
                    .and_then(|c| c.parse().ok())
            });
            m.next_run_at = (m.status == "active")
                .then(|| s.and_then(|s| s.next_after(now)).map(ms))
                .flatten();
        }
        app.monitors.update(&m, reschedule)?;
        app.monitor_wake.notify_one();
        let m = owned(app, &id, &owner)?;
        Ok(json!({"success": true, "data": monitor_json(app, &m)}))
    })
    .await
}

pub(crate) async fn delete(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
) -> Answer {
    blocking(app, move |app| {
        owned(app, &id, &owner)?;
        app.monitors.delete(&id)?;
        Ok(json!({"success": true}))
    })
    .await
}

pub(crate) async fn run(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
) -> Answer {
    blocking(app, move |app| {
        app.usage.check(&owner)?;
        let m = owned(app, &id, &owner)?;
        let row = start_check(app, &m, "manual", None)?;
        Ok(json!({"success": true, "data": check_json(&row)}))
    })
    .await
}

pub(crate) async fn checks(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path(id): Path<String>,
    q: Query<PageQuery>,
) -> Answer {
    let (offset, limit) = q.numbers_named("offset")?;
    blocking(app, move |app| {
        owned(app, &id, &owner)?;
        let rows = app
            .monitors
            .checks(&id, limit.unwrap_or(50).min(1000), offset)?;
        let data: Vec<Value> = rows.iter().map(check_json).collect();
        Ok(json!({"success": true, "data": data}))
    })
    .await
}

pub(crate) async fn check_detail(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    Path((id, cid)): Path<(String, String)>,
    q: Query<PageQuery>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Answer {
    let (skip, limit) = q.numbers()?;
    let status = q.text("status");
    if let Some(s) = &status
        && !matches!(s.as_str(), "same" | "new" | "changed" | "removed" | "error")
    {
        return Err(bad("status is same, new, changed, removed or error"));
    }
    let base = super::job_url(&headers, uri.path());
    blocking(app, move |app| {
        owned(app, &id, &owner)?;
        let k = match app.monitors.check(&cid)? {
            Some(k) if k.monitor == id => k,
            _ => {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    None,
                    "Check not found",
                ));
            }
        };
        let limit = limit.unwrap_or(100).clamp(1, 1000);
        let (pages, total) = app.monitors.pages(&cid, status.as_deref(), skip, limit)?;
        let mut data = check_json(&k);
        let n = pages.len();
        data["pages"] = Value::Array(pages);
        let mut out = json!({"success": true, "data": data});
        if skip + n < total {
            let mut next = format!("{base}?skip={}&limit={limit}", skip + n);
            if let Some(s) = &status {
                next.push_str(&format!("&status={s}"));
            }
            out["data"]["next"] = next.clone().into();
            out["next"] = next.into();
        }
        Ok(out)
    })
    .await
}
