//! What a key has used and what it has running: Firecrawl's `/v2/team/credit-usage` (and
//! its monthly history), `/v2/team/queue-status` and `/v2/concurrency-check`, from the
//! server's own counts. A credit is a document: one per scrape, per result of a search,
//! per page of a crawl or batch job. A server started with `--monthly-credits N` refuses
//! work past N a month with Firecrawl's 402; without it the figures are kept all the same.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Datelike, TimeZone, Utc};
use rusqlite::params;
use serde_json::{Value, json};

use axum::extract::State;

use super::api::ApiError;
use super::db::Db;
use super::{Answer, App, Owner};

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS usage (
    owner TEXT NOT NULL,
    month TEXT NOT NULL,
    credits INTEGER NOT NULL,
    PRIMARY KEY (owner, month)
);
";

/// What `remainingCredits` says without a plan: the SDK wants a number, and this is the
/// largest a 32-bit reader takes.
const UNLIMITED: i64 = i32::MAX as i64;

#[derive(Clone)]
pub struct Usage {
    db: Db,
    /// Credits a key may use a month; 0: no limit.
    pub monthly: u64,
}

fn month_of(t: chrono::DateTime<Utc>) -> String {
    format!("{:04}-{:02}", t.year(), t.month())
}

/// The first instant of the month `t` is in, and of the next.
fn period(t: chrono::DateTime<Utc>) -> (chrono::DateTime<Utc>, chrono::DateTime<Utc>) {
    let start = Utc
        .with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(t);
    let (y, m) = if t.month() == 12 {
        (t.year() + 1, 1)
    } else {
        (t.year(), t.month() + 1)
    };
    let end = Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(t);
    (start, end)
}

impl Usage {
    pub fn new(db: Db, monthly: u64) -> anyhow::Result<Self> {
        db.with(|c| c.execute_batch(SCHEMA))?;
        Ok(Self { db, monthly })
    }

    /// Adds `n` credits to `owner`'s month, off the caller's thread.
    pub fn spend(&self, owner: &str, n: u64) {
        if n == 0 {
            return;
        }
        let me = self.clone();
        let owner = owner.to_string();
        let add = move || {
            if let Err(e) = me.add(&owner, n) {
                tracing::warn!(error = %format!("{e:#}"), "credits could not be counted");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(add);
            }
            Err(_) => add(),
        }
    }

    pub fn add(&self, owner: &str, n: u64) -> anyhow::Result<()> {
        let month = month_of(Utc::now());
        self.db.with(|c| {
            c.execute(
                "INSERT INTO usage (owner, month, credits) VALUES (?1, ?2, ?3)
                 ON CONFLICT (owner, month) DO UPDATE SET credits = credits + ?3",
                params![owner, month, n as i64],
            )
            .map(|_| ())
        })
    }

    /// Credits `owner` used this month.
    pub fn used(&self, owner: &str) -> anyhow::Result<u64> {
        let month = month_of(Utc::now());
        self.db.with(|c| {
            c.query_row(
                "SELECT COALESCE(SUM(credits), 0) FROM usage WHERE owner = ?1 AND month = ?2",
                params![owner, month],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
        })
    }

    /// Refuses work once the month's credits are spent (Firecrawl's 402).
    pub fn check(&self, owner: &str) -> Result<(), ApiError> {
        if self.monthly == 0 {
            return Ok(());
        }
        if self.used(owner)? >= self.monthly {
            return Err(ApiError::new(
                StatusCode::PAYMENT_REQUIRED,
                Some("INSUFFICIENT_CREDITS"),
                format!(
                    "Insufficient credits: this key has used its {} credits of the month",
                    self.monthly
                ),
            ));
        }
        Ok(())
    }

    /// [`Self::check`] for an async caller: off its thread when there is a plan to read.
    pub async fn allow(&self, owner: &str) -> Result<(), ApiError> {
        if self.monthly == 0 {
            return Ok(());
        }
        let (me, owner) = (self.clone(), owner.to_string());
        tokio::task::spawn_blocking(move || me.check(&owner))
            .await
            .map_err(ApiError::internal)?
    }

    /// `/v2/team/credit-usage`.
    pub fn credit_usage(&self, owner: &str) -> Result<Value, ApiError> {
        let used = self.used(owner)?;
        let (start, end) = period(Utc::now());
        let (remaining, plan) = if self.monthly == 0 {
            (UNLIMITED, Value::Null)
        } else {
            (
                self.monthly.saturating_sub(used) as i64,
                (self.monthly as i64).into(),
            )
        };
        Ok(json!({"success": true, "data": {
            "remainingCredits": remaining,
            "planCredits": plan,
            "creditsUsed": used,
            "billingPeriodStart": start.to_rfc3339(),
            "billingPeriodEnd": end.to_rfc3339(),
        }}))
    }

    /// `/v2/team/credit-usage/historical`: a period a month, oldest first.
    pub fn history(&self, owner: &str) -> Result<Value, ApiError> {
        let rows: Vec<(String, i64)> = self.db.with(|c| {
            let mut st =
                c.prepare("SELECT month, credits FROM usage WHERE owner = ?1 ORDER BY month")?;
            let rows = st.query_map(params![owner], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        let periods: Vec<Value> = rows
            .into_iter()
            .filter_map(|(month, credits)| {
                let first = chrono::NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d")
                    .ok()?
                    .and_hms_opt(0, 0, 0)?
                    .and_utc();
                let (start, end) = period(first);
                Some(
                    json!({"startDate": start.to_rfc3339(), "endDate": end.to_rfc3339(),
                            "apiKey": Value::Null, "creditsUsed": credits}),
                )
            })
            .collect();
        Ok(json!({"success": true, "periods": periods}))
    }
}

/// `/v2/team/queue-status`: the key's jobs not ended, those crawling and those waiting for
/// a slot, the server's slots, and when one of its jobs last completed.
pub fn queue_status(app: &Arc<App>, owner: &str) -> Result<Value, ApiError> {
    let (crawling, waiting) = app.jobs.queue_of(owner)?;
    let extracts = super::extract::running(app, owner);
    let last = app.db.last_completed(owner)?;
    Ok(json!({
        "success": true,
        "jobsInQueue": crawling + waiting + extracts,
        "activeJobsInQueue": crawling + extracts,
        "waitingJobsInQueue": waiting,
        "maxConcurrency": app.args.max_jobs,
        "mostRecentSuccess": last,
    }))
}

/// `/v2/concurrency-check`: the key's requests in flight and jobs crawling, beside what
/// one key may have in flight.
pub fn concurrency(app: &Arc<App>, owner: &str) -> Result<Value, ApiError> {
    let in_flight = app.in_flight_of(owner);
    let (crawling, _) = app.jobs.queue_of(owner)?;
    Ok(json!({
        "success": true,
        "concurrency": in_flight + crawling,
        "maxConcurrency": app.args.max_requests_per_key,
    }))
}

/// A figure of the asking key, read off the async threads.
async fn figure(
    app: Arc<App>,
    owner: String,
    f: fn(&Arc<App>, &str) -> Result<Value, ApiError>,
) -> Answer {
    tokio::task::spawn_blocking(move || f(&app, &owner).map(axum::Json))
        .await
        .map_err(ApiError::internal)?
}

/// `GET /v2/team/credit-usage`.
pub(crate) async fn credit_usage_route(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
) -> Answer {
    figure(app, owner, |app, o| app.usage.credit_usage(o)).await
}

/// `GET /v2/team/credit-usage/historical`.
pub(crate) async fn history_route(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
) -> Answer {
    figure(app, owner, |app, o| app.usage.history(o)).await
}

/// `GET /v2/team/queue-status`.
pub(crate) async fn queue_status_route(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
) -> Answer {
    figure(app, owner, queue_status).await
}

/// `GET /v2/concurrency-check`.
pub(crate) async fn concurrency_route(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
) -> Answer {
    figure(app, owner, concurrency).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credits_add_up_by_month_and_a_plan_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("serve.db")).unwrap();
        let u = Usage::new(db, 5).unwrap();
        u.add("k", 3).unwrap();
        u.add("k", 1).unwrap();
        u.add("other", 9).unwrap();
        assert_eq!(u.used("k").unwrap(), 4);
        assert!(u.check("k").is_ok());
        assert_eq!(
            u.check("other").unwrap_err().status,
            StatusCode::PAYMENT_REQUIRED
        );
        let c = u.credit_usage("k").unwrap();
        assert_eq!(c["data"]["remainingCredits"], 1);
        assert_eq!(c["data"]["planCredits"], 5);
        let h = u.history("k").unwrap();
        assert_eq!(h["periods"][0]["creditsUsed"], 4);
    }

    #[test]
    fn periods_are_calendar_months() {
        let t = Utc.with_ymd_and_hms(2026, 12, 6, 17, 0, 0).unwrap();
        let (s, e) = period(t);
        assert_eq!(s.to_rfc3339(), "2026-12-01T00:00:00+00:00");
        assert_eq!(e.to_rfc3339(), "2027-01-01T00:00:00+00:00");
    }
}
