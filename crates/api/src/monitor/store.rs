//! Monitors, their checks and each check's pages, in `serve.db`: they outlive a restart of
//! the server (a check a stop cut short is marked failed, the schedule goes on).

use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::super::db::Db;

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS monitors (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    next_run_at INTEGER,
    last_run_at TEXT,
    current_check TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS monitor_checks (
    id TEXT PRIMARY KEY,
    monitor TEXT NOT NULL,
    status TEXT NOT NULL,
    trigger TEXT NOT NULL,
    scheduled_for TEXT,
    started_at TEXT,
    finished_at TEXT,
    summary TEXT NOT NULL,
    targets TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS monitor_checks_of ON monitor_checks (monitor, created_at);
CREATE TABLE IF NOT EXISTS monitor_pages (
    check_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    page TEXT NOT NULL,
    PRIMARY KEY (check_id, seq)
);
";

/// A monitor as stored: its spec is the answer's body (name, schedule, targets, webhook,
/// retentionDays...), the rest is the server's.
#[derive(Debug, Clone)]
pub struct MonitorRow {
    pub id: String,
    pub owner: String,
    pub spec: Value,
    /// `active` or `paused`.
    pub status: String,
    /// Milliseconds since the epoch.
    pub next_run_at: Option<i64>,
    pub last_run_at: Option<String>,
    pub current_check: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone)]
pub struct CheckRow {
    pub id: String,
    pub monitor: String,
    pub status: String,
    pub trigger: String,
    pub scheduled_for: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub summary: Value,
    pub targets: Option<Value>,
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

fn monitor_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MonitorRow> {
    let spec: String = r.get(2)?;
    Ok(MonitorRow {
        id: r.get(0)?,
        owner: r.get(1)?,
        spec: serde_json::from_str(&spec).unwrap_or(Value::Null),
        status: r.get(3)?,
        next_run_at: r.get(4)?,
        last_run_at: r.get(5)?,
        current_check: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

fn check_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CheckRow> {
    let summary: String = r.get(7)?;
    let targets: Option<String> = r.get(8)?;
    Ok(CheckRow {
        id: r.get(0)?,
        monitor: r.get(1)?,
        status: r.get(2)?,
        trigger: r.get(3)?,
        scheduled_for: r.get(4)?,
        started_at: r.get(5)?,
        finished_at: r.get(6)?,
        summary: serde_json::from_str(&summary).unwrap_or(Value::Null),
        targets: targets.and_then(|t| serde_json::from_str(&t).ok()),
        error: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

const MONITOR_COLS: &str =
    "id, owner, spec, status, next_run_at, last_run_at, current_check, created_at, updated_at";
const CHECK_COLS: &str = "id, monitor, status, trigger, scheduled_for, started_at, finished_at, \
     summary, targets, error, created_at, updated_at";

fn now() -> String {
    chrono::Utc::now().to_rfc3339()
}

#[derive(Clone)]
pub struct Store {
    db: Db,
}

impl Store {
    pub fn new(db: Db) -> anyhow::Result<Self> {
        db.with(|c| c.execute_batch(SCHEMA))?;
        Ok(Self { db })
    }

    pub fn insert(&self, m: &MonitorRow) -> anyhow::Result<()> {
        let spec = serde_json::to_string(&m.spec)?;
        self.db.with(|c| {
            c.execute(
                &format!("INSERT INTO monitors ({MONITOR_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                params![m.id, m.owner, spec, m.status, m.next_run_at, m.last_run_at,
                        m.current_check, m.created_at, m.updated_at],
            )
            .map(|_| ())
        })
    }

    /// Writes the monitor's spec and status, and its next run when `reschedule` (else the
    /// scheduler's own value stays: an edit of the name must not bring back a run that
    /// was taken meanwhile).
    pub fn update(&self, m: &MonitorRow, reschedule: bool) -> anyhow::Result<()> {
        let spec = serde_json::to_string(&m.spec)?;
        self.db.with(|c| {
            c.execute(
                "UPDATE monitors SET spec = ?2, status = ?3, updated_at = ?5,
                 next_run_at = CASE WHEN ?6 THEN ?4 ELSE next_run_at END
                 WHERE id = ?1",
                params![m.id, spec, m.status, m.next_run_at, now(), reschedule],
            )
            .map(|_| ())
        })
    }

    pub fn get(&self, id: &str) -> anyhow::Result<Option<MonitorRow>> {
        self.db.with(|c| {
            c.query_row(
                &format!(
                    "SELECT {MONITOR_COLS} FROM monitors WHERE id = ?1 AND status != 'deleted'"
                ),
                params![id],
                monitor_row,
            )
            .optional()
        })
    }

    pub fn list(
        &self,
        owner: &str,
        limit: usize,
        offset: usize,
    ) -> anyhow::Result<Vec<MonitorRow>> {
        self.db.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {MONITOR_COLS} FROM monitors WHERE owner = ?1 AND status != 'deleted'
                 ORDER BY created_at, id LIMIT ?2 OFFSET ?3"
            ))?;
            st.query_map(params![owner, limit as i64, offset as i64], monitor_row)?
                .collect()
        })
    }

    /// Every monitor of `owner` not deleted (for its indexes).
    pub fn all_of(&self, owner: &str) -> anyhow::Result<Vec<MonitorRow>> {
        self.list(owner, i64::MAX as usize, 0)
    }

    pub fn delete(&self, id: &str) -> anyhow::Result<()> {
        self.db.with(|c| {
            c.execute(
                "UPDATE monitors SET status = 'deleted', next_run_at = NULL, updated_at = ?2
                 WHERE id = ?1",
                params![id, now()],
            )
            .map(|_| ())
        })
    }

    /// Active monitors whose next run has come.
    pub fn due(&self, now_ms: i64) -> anyhow::Result<Vec<MonitorRow>> {
        self.db.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {MONITOR_COLS} FROM monitors
                 WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ?1"
            ))?;
            st.query_map(params![now_ms], monitor_row)?.collect()
        })
    }

    /// The earliest next run of an active monitor.
    pub fn next_due(&self) -> anyhow::Result<Option<i64>> {
        self.db.with(|c| {
            c.query_row(
                "SELECT MIN(next_run_at) FROM monitors WHERE status = 'active'",
                [],
                |r| r.get(0),
            )
        })
    }

    /// Moves a monitor's next run from `due` to `next`: the scheduler's claim of the run
    /// that was due; false when something else moved it first.
    pub fn claim_due(&self, id: &str, due: i64, next_ms: Option<i64>) -> anyhow::Result<bool> {
        self.db.with(|c| {
            c.execute(
                "UPDATE monitors SET next_run_at = ?3 WHERE id = ?1 AND next_run_at = ?2",
                params![id, due, next_ms],
            )
            .map(|n| n > 0)
        })
    }

    /// Records a check of the monitor. A `running` one first claims the monitor, in the
    /// same transaction: when another check still runs, this one is `skipped_overlap`.
    pub fn insert_check(&self, k: &mut CheckRow) -> anyhow::Result<()> {
        let targets = k.targets.as_ref().map(serde_json::to_string).transpose()?;
        let summary = serde_json::to_string(&k.summary)?;
        self.db.with_tx(|c| {
            if k.status == "running" {
                let claimed = c.execute(
                    "UPDATE monitors SET current_check = ?2, last_run_at = ?3 WHERE id = ?1
                     AND (current_check IS NULL OR current_check NOT IN
                          (SELECT id FROM monitor_checks WHERE status IN ('running', 'queued')))",
                    params![k.monitor, k.id, k.started_at],
                )?;
                if claimed == 0 {
                    k.status = "skipped_overlap".into();
                    k.finished_at = k.started_at.take();
                }
            }
            c.execute(
                &format!(
                    "INSERT INTO monitor_checks ({CHECK_COLS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
                ),
                params![
                    k.id,
                    k.monitor,
                    k.status,
                    k.trigger,
                    k.scheduled_for,
                    k.started_at,
                    k.finished_at,
                    summary,
                    targets,
                    k.error,
                    k.created_at,
                    k.updated_at
                ],
            )?;
            Ok(())
        })
    }

    /// Ends a check: its status, summary, per-target results and error.
    pub fn finish_check(
        &self,
        id: &str,
        monitor: &str,
        status: &str,
        summary: &Value,
        targets: &Value,
        error: Option<&str>,
    ) -> anyhow::Result<()> {
        let (summary, targets) = (
            serde_json::to_string(summary)?,
            serde_json::to_string(targets)?,
        );
        let t = now();
        self.db.with(|c| {
            c.execute(
                "UPDATE monitor_checks SET status = ?2, summary = ?3, targets = ?4, error = ?5,
                 finished_at = ?6, updated_at = ?6 WHERE id = ?1",
                params![id, status, summary, targets, error, t],
            )?;
            c.execute(
                "UPDATE monitors SET current_check = NULL WHERE id = ?1 AND current_check = ?2",
                params![monitor, id],
            )
            .map(|_| ())
        })
    }

    pub fn check(&self, id: &str) -> anyhow::Result<Option<CheckRow>> {
        self.db.with(|c| {
            c.query_row(
                &format!("SELECT {CHECK_COLS} FROM monitor_checks WHERE id = ?1"),
                params![id],
                check_row,
            )
            .optional()
        })
    }

    /// A monitor's checks, newest first.
    pub fn checks(
        &self,
        monitor: &str,
        limit: usize,
        offset: usize,
    ) -> anyhow::Result<Vec<CheckRow>> {
        self.db.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {CHECK_COLS} FROM monitor_checks WHERE monitor = ?1
                 ORDER BY created_at DESC, id LIMIT ?2 OFFSET ?3"
            ))?;
            st.query_map(params![monitor, limit as i64, offset as i64], check_row)?
                .collect()
        })
    }

    /// Checks left running by a server that stopped: failed, their monitors free again.
    pub fn fail_interrupted(&self) -> anyhow::Result<usize> {
        let t = now();
        self.db.with(|c| {
            let n = c.execute(
                "UPDATE monitor_checks SET status = 'failed',
                 error = 'the server stopped during the check', finished_at = ?1, updated_at = ?1
                 WHERE status IN ('running', 'queued')",
                params![t],
            )?;
            c.execute("UPDATE monitors SET current_check = NULL", [])?;
            Ok(n)
        })
    }

    pub fn add_page(
        &self,
        check: &str,
        seq: usize,
        status: &str,
        page: &Value,
    ) -> anyhow::Result<()> {
        let text = serde_json::to_string(page)?;
        self.db.with(|c| {
            c.execute(
                "INSERT OR REPLACE INTO monitor_pages (check_id, seq, status, page)
                 VALUES (?1, ?2, ?3, ?4)",
                params![check, seq as i64, status, text],
            )
            .map(|_| ())
        })
    }

    /// A check's pages in their order, of one status when asked.
    pub fn pages(
        &self,
        check: &str,
        status: Option<&str>,
        skip: usize,
        limit: usize,
    ) -> anyhow::Result<(Vec<Value>, usize)> {
        self.db.with(|c| {
            let total: i64 = c.query_row(
                "SELECT COUNT(*) FROM monitor_pages WHERE check_id = ?1 AND (?2 IS NULL OR status = ?2)",
                params![check, status],
                |r| r.get(0),
            )?;
            let mut st = c.prepare(
                "SELECT page FROM monitor_pages WHERE check_id = ?1 AND (?2 IS NULL OR status = ?2)
                 ORDER BY seq LIMIT ?3 OFFSET ?4",
            )?;
            let rows = st.query_map(params![check, status, limit as i64, skip as i64], |r| {
                r.get::<_, String>(0)
            })?;
            let mut out = Vec::new();
            for r in rows {
                out.push(serde_json::from_str(&r?).unwrap_or(Value::Null));
            }
            Ok((out, total.max(0) as usize))
        })
    }

    /// Drops the checks (and their pages) older than the monitor's retention.
    pub fn forget_before(&self, monitor: &str, cutoff: &str) -> anyhow::Result<()> {
        self.db.with(|c| {
            c.execute(
                "DELETE FROM monitor_pages WHERE check_id IN
                 (SELECT id FROM monitor_checks WHERE monitor = ?1 AND created_at < ?2)",
                params![monitor, cutoff],
            )?;
            c.execute(
                "DELETE FROM monitor_checks WHERE monitor = ?1 AND created_at < ?2",
                params![monitor, cutoff],
            )
            .map(|_| ())
        })
    }
}
