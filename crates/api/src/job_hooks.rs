//! A crawl's or a batch's webhook events: `started`, one `page` per document as the job
//! writes it, then `completed` or `failed` (`crawl.*` or `batch_scrape.*`), each put in
//! the outbox ([`super::webhooks`]). How far a job's events have gone is kept in
//! `serve.db`; a page's event is named by the job and the page's URL
//! (`<job>.page.<digest>`), so when a restarted server reads a resumed job's results
//! again from the start (a resumed crawl cuts its `pages.jsonl` back and fetches those
//! pages anew, in another order), each page is sent once, and none is missed.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};
use sha2::Digest;

use super::App;
use super::db::JobRow;
use super::jobs::PAGE_DOCS;
use super::webhooks::Hook;

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS job_hooks (
    job TEXT PRIMARY KEY,
    origin TEXT NOT NULL DEFAULT '',
    sent INTEGER NOT NULL DEFAULT 0,
    ended INTEGER NOT NULL DEFAULT 0
);
";

/// How often a job's new pages are looked for.
const POLL: Duration = Duration::from_millis(500);

fn prefix(row: &JobRow) -> &'static str {
    if row.kind == "batch" {
        "batch_scrape"
    } else {
        "crawl"
    }
}

/// The job's hook, if its request has one.
fn hook_of(app: &App, row: &JobRow) -> Option<Hook> {
    let req: Value = serde_json::from_str(&row.request).ok()?;
    Hook::parse(req.get("webhook"), app.args.settings.crawl.allow_private)
        .ok()
        .flatten()
}

/// Starts the events of a job whose request has a webhook; `origin` (`http://host`) is
/// where the documents' files are served.
pub fn follow(app: &Arc<App>, id: &str, origin: &str) {
    let noted = app.db.with(|c| {
        c.execute(
            "INSERT OR IGNORE INTO job_hooks (job, origin) VALUES (?1, ?2)",
            params![id, origin],
        )
    });
    if let Err(e) = noted {
        tracing::warn!(job = %id, error = %format!("{e:#}"), "a job's webhook state");
    }
    let (app, id) = (app.clone(), id.to_string());
    tokio::spawn(async move {
        let mut stop = app.stop.clone();
        loop {
            let (a, i) = (app.clone(), id.clone());
            let done = tokio::task::spawn_blocking(move || step(&a, &i)).await;
            match done {
                Ok(Ok(true)) => return,
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(job = %id, error = %format!("{e:#}"), "a job's webhook events wait");
                }
                Err(_) => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = stop.recv() => return,
            }
        }
    });
}

/// Jobs whose events were not all sent when the server stopped: followed again, from
/// their first page (those sent already are not sent twice).
pub fn resume(app: &Arc<App>) -> anyhow::Result<usize> {
    app.db
        .with(|c| c.execute("UPDATE job_hooks SET sent = 0 WHERE ended = 0", []))?;
    let ids: Vec<String> = app.db.with(|c| {
        let mut st = c.prepare(
            "SELECT id FROM jobs WHERE request LIKE '%\"webhook\"%'
             AND id NOT IN (SELECT job FROM job_hooks WHERE ended = 1)",
        )?;
        let rows = st.query_map([], |r| r.get(0))?;
        rows.collect()
    })?;
    for id in &ids {
        let origin: String = app
            .db
            .with(|c| {
                c.query_row(
                    "SELECT origin FROM job_hooks WHERE job = ?1",
                    params![id],
                    |r| r.get(0),
                )
                .optional()
            })?
            .unwrap_or_default();
        follow(app, id, &origin);
    }
    Ok(ids.len())
}

/// Sends what is new of one job; true once its last event is in the outbox.
fn step(app: &Arc<App>, id: &str) -> anyhow::Result<bool> {
    let Some(row) = app.db.job(id)? else {
        return Ok(true);
    };
    let Some(hook) = hook_of(app, &row) else {
        return Ok(true);
    };
    let p = prefix(&row);
    let (mut sent, ended, origin): (i64, bool, String) = app.db.with(|c| {
        c.execute(
            "INSERT OR IGNORE INTO job_hooks (job) VALUES (?1)",
            params![id],
        )?;
        c.query_row(
            "SELECT sent, ended, origin FROM job_hooks WHERE job = ?1",
            params![id],
            |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0, r.get(2)?)),
        )
    })?;
    let kind = if row.kind == "batch" {
        "batch/scrape"
    } else {
        "crawl"
    };
    let base = format!("{origin}/v2/{kind}/{id}");
    if ended {
        return Ok(true);
    }
    let outbox = &app.outbox;
    outbox.enqueue_as(
        &format!("{id}.started"),
        &hook,
        &format!("{p}.started"),
        id,
        json!([]),
        json!({}),
    )?;
    // The status is read before the pages: a job ended then has written all of them.
    let status = row.status.clone();
    loop {
        let page = app
            .jobs
            .status(id, &row.owner, sent as usize, Some(PAGE_DOCS), &base)
            .map_err(|e| anyhow::anyhow!(e.message))?;
        let docs = page["data"].as_array().cloned().unwrap_or_default();
        if docs.is_empty() {
            break;
        }
        for doc in docs {
            let url = doc["metadata"]["sourceURL"].as_str().unwrap_or_default();
            let digest = sha2::Sha256::digest(url.as_bytes());
            let key = data_encoding::HEXLOWER.encode(&digest[..12]);
            outbox.enqueue_as(
                &format!("{id}.page.{key}"),
                &hook,
                &format!("{p}.page"),
                id,
                json!([doc]),
                json!({}),
            )?;
            sent += 1;
            app.db.with(|c| {
                c.execute(
                    "UPDATE job_hooks SET sent = ?2 WHERE job = ?1",
                    params![id, sent],
                )
                .map(|_| ())
            })?;
        }
    }
    if status == "scraping" {
        return Ok(false);
    }
    let (event, extra) = match (status.as_str(), &row.error) {
        ("completed", _) => ("completed", json!({})),
        ("cancelled", _) => ("failed", json!({"error": "the job was cancelled"})),
        (_, e) => (
            "failed",
            json!({"error": e.clone().unwrap_or_else(|| "the job failed".into())}),
        ),
    };
    outbox.enqueue_as(
        &format!("{id}.{event}"),
        &hook,
        &format!("{p}.{event}"),
        id,
        json!([]),
        extra,
    )?;
    app.db.with(|c| {
        c.execute("UPDATE job_hooks SET ended = 1 WHERE job = ?1", params![id])
            .map(|_| ())
    })?;
    Ok(true)
}
