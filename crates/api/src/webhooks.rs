//! Webhook deliveries, Firecrawl's way: one event per POST, the raw body signed as
//! `X-Firecrawl-Signature: sha256=<hex HMAC-SHA256(secret, body)>` (the secret is
//! `TRAWL_WEBHOOK_SECRET`, as for `trawl watch`), and a `webhook-id` header that stays the
//! same on every retry so a receiver can drop a second copy. Every event is written to
//! `serve.db` before anything is sent (the outbox), so a refused delivery, a receiver
//! that is down or a restart of the server loses nothing: a delivery is retried after the
//! crawl settings' backoff (four times longer each try) until it is taken or its tries are
//! spent, and then it stays in the table, `failed`, with the last answer.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::{Notify, Semaphore};
use trawl_core::pipeline::Shutdown;

use super::api::ApiError;
use super::db::Db;

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    url TEXT NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    event TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    last_error TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_at);
";

/// Where a job's or a monitor's events go: the request's `webhook`, a URL or
/// `{url, headers, metadata, events}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub metadata: Value,
    /// The events wanted, by their last part (`page`, `completed`, `check.completed`);
    /// none: all of them.
    pub events: Option<Vec<String>>,
}

impl Hook {
    /// The request's `webhook` field; `None` when absent or null.
    pub fn parse(v: Option<&Value>, allow_private: bool) -> Result<Option<Hook>, ApiError> {
        let bad = |m: String| ApiError::bad_request(format!("Bad Request: webhook: {m}"));
        let hook = match v {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(u)) => Hook {
                url: u.clone(),
                headers: BTreeMap::new(),
                metadata: json!({}),
                events: None,
            },
            Some(Value::Object(o)) => {
                let url = o
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("an object needs its \"url\"".into()))?;
                let mut headers = BTreeMap::new();
                if let Some(h) = o.get("headers").filter(|h| !h.is_null()) {
                    let h = h
                        .as_object()
                        .ok_or_else(|| bad("headers must be an object of strings".into()))?;
                    for (k, v) in h {
                        let v = v
                            .as_str()
                            .ok_or_else(|| bad(format!("header {k:?} is not a string")))?;
                        reqwest::header::HeaderName::from_bytes(k.as_bytes())
                            .map_err(|_| bad(format!("{k:?} is not a header name")))?;
                        reqwest::header::HeaderValue::from_str(v).map_err(|_| {
                            bad(format!("header {k:?} has a value HTTP cannot carry"))
                        })?;
                        headers.insert(k.clone(), v.to_string());
                    }
                }
                let metadata = match o.get("metadata") {
                    None | Some(Value::Null) => json!({}),
                    Some(m @ Value::Object(_)) => m.clone(),
                    Some(_) => return Err(bad("metadata must be an object".into())),
                };
                let events = match o.get("events") {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(a)) => Some(
                        a.iter()
                            .map(|e| {
                                e.as_str()
                                    .map(short_event)
                                    .ok_or_else(|| bad("events must be strings".into()))
                            })
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                    Some(_) => return Err(bad("events must be a list".into())),
                };
                Hook {
                    url: url.to_string(),
                    headers,
                    metadata,
                    events,
                }
            }
            Some(_) => return Err(bad("give a URL or {\"url\": ...}".into())),
        };
        check_url(&hook.url, allow_private).map_err(bad)?;
        Ok(Some(hook))
    }

    /// Whether `event` (`crawl.page`, `monitor.check.completed`) is one the hook asked for.
    pub fn wants(&self, event: &str) -> bool {
        self.events
            .as_ref()
            .is_none_or(|e| e.iter().any(|w| *w == short_event(event)))
    }

    pub fn to_json(&self) -> Value {
        json!({"url": self.url, "headers": self.headers, "metadata": self.metadata,
               "events": self.events})
    }
}

/// `crawl.page` -> `page`, `monitor.check.completed` -> `check.completed`: Firecrawl's
/// events are asked for by their last part (`["started","page"]`) or whole.
fn short_event(e: &str) -> String {
    let e = e.trim();
    for prefix in ["crawl.", "batch_scrape.", "monitor.", "extract."] {
        if let Some(rest) = e.strip_prefix(prefix) {
            return rest.to_string();
        }
    }
    e.to_string()
}

/// An http(s) URL with a host; a literal address must be public unless the server allows
/// private ones (a name is checked again when it is resolved, at each delivery).
pub fn check_url(raw: &str, allow_private: bool) -> Result<(), String> {
    let u = url::Url::parse(raw).map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("{raw:?} is not an http(s) URL"));
    }
    let public = match u.host() {
        None => return Err(format!("{raw:?} has no host")),
        Some(url::Host::Ipv4(a)) => trawl_fetcher::net::is_public(a.into()),
        Some(url::Host::Ipv6(a)) => trawl_fetcher::net::is_public(a.into()),
        Some(url::Host::Domain(d)) => d != "localhost" && !d.ends_with(".localhost"),
    };
    if !public && !allow_private {
        return Err(format!(
            "{raw:?} is a private address; this server does not deliver there (allow_private)"
        ));
    }
    Ok(())
}

/// The signature header's value: `sha256=` and the hex HMAC-SHA256 of the raw body.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    format!(
        "sha256={}",
        data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes())
    )
}

/// Deliveries in flight at once (each to another receiver).
pub const PARALLEL: usize = 16;

/// What the outbox is set with.
#[derive(Debug, Clone)]
pub struct OutboxConfig {
    pub secret: Option<Vec<u8>>,
    /// Tries per delivery before it is left `failed`.
    pub tries: u32,
    /// The wait before the first retry; each later one is four times longer (at most an
    /// hour).
    pub backoff: Duration,
    pub allow_private: bool,
}

/// The deliveries waiting, and the task that sends them.
pub struct Outbox {
    db: Db,
    cfg: OutboxConfig,
    wake: Notify,
}

/// A delivery as its row holds it.
struct Due {
    id: String,
    url: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
    attempts: u32,
}

impl Outbox {
    pub fn new(db: Db, cfg: OutboxConfig) -> anyhow::Result<Arc<Self>> {
        // What waited through a restart is tried at once: the receiver may be back too.
        let now = chrono::Utc::now().timestamp_millis();
        db.with(|c| {
            c.execute_batch(SCHEMA)?;
            c.execute(
                "UPDATE deliveries SET next_at = ?1 WHERE status = 'pending' AND next_at > ?1",
                params![now],
            )
            .map(|_| ())
        })?;
        Ok(Arc::new(Self {
            db,
            cfg,
            wake: Notify::new(),
        }))
    }

    /// Keeps one event for `hook` (when it wants it): `{success, type, id, data, metadata}`
    /// and any `extra` fields, Firecrawl's body. Answers the delivery's id.
    pub fn enqueue(
        &self,
        hook: &Hook,
        event: &str,
        subject: &str,
        data: Value,
        extra: Value,
    ) -> anyhow::Result<Option<String>> {
        let id = uuid::Uuid::new_v4().to_string();
        self.enqueue_as(&id, hook, event, subject, data, extra)
    }

    /// [`Self::enqueue`] under an id of the caller's: an event kept once under that id is
    /// never kept again (a step repeated after a restart adds nothing).
    pub fn enqueue_as(
        &self,
        id: &str,
        hook: &Hook,
        event: &str,
        subject: &str,
        data: Value,
        extra: Value,
    ) -> anyhow::Result<Option<String>> {
        if !hook.wants(event) {
            return Ok(None);
        }
        let mut body = json!({
            "success": !event.ends_with(".failed"),
            "type": event,
            "id": subject,
            "webhookId": id,
            "data": data,
            "metadata": hook.metadata,
        });
        if let (Some(b), Value::Object(x)) = (body.as_object_mut(), extra) {
            b.extend(x);
        }
        let body = serde_json::to_vec(&body)?;
        let headers = serde_json::to_string(&hook.headers)?;
        let now = chrono::Utc::now();
        self.db.with(|c| {
            c.execute(
                "INSERT OR IGNORE INTO deliveries
                 (id, url, headers, body, event, status, next_at, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7)",
                params![
                    id,
                    hook.url,
                    headers,
                    body,
                    event,
                    now.timestamp_millis(),
                    now.to_rfc3339()
                ],
            )
        })?;
        self.wake.notify_one();
        Ok(Some(id.to_string()))
    }

    /// Counts of the deliveries by status (`pending`, `delivered`, `failed`).
    pub fn counts(&self) -> anyhow::Result<BTreeMap<String, u64>> {
        self.db.with(|c| {
            let mut st = c.prepare("SELECT status, COUNT(*) FROM deliveries GROUP BY status")?;
            let rows = st.query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
            })?;
            rows.collect()
        })
    }

    /// Up to `limit` deliveries due, oldest first, and when the next pending one is due.
    fn due(&self, now_ms: i64, limit: usize) -> anyhow::Result<(Vec<Due>, Option<i64>)> {
        self.db.with(|c| {
            let mut st = c.prepare(
                "SELECT id, url, headers, body, attempts FROM deliveries
                 WHERE status = 'pending' AND next_at <= ?1 ORDER BY next_at, seq LIMIT ?2",
            )?;
            let rows = st.query_map(params![now_ms, limit as i64], |r| {
                let headers: String = r.get(2)?;
                Ok(Due {
                    id: r.get(0)?,
                    url: r.get(1)?,
                    headers: serde_json::from_str(&headers).unwrap_or_default(),
                    body: r.get(3)?,
                    attempts: r.get(4)?,
                })
            })?;
            let due = rows.collect::<rusqlite::Result<Vec<_>>>()?;
            let later = c
                .query_row(
                    "SELECT MIN(next_at) FROM deliveries WHERE status = 'pending'",
                    [],
                    |r| r.get::<_, Option<i64>>(0),
                )
                .optional()?
                .flatten();
            Ok((due, later))
        })
    }

    /// Forgets the deliveries taken a week ago and those given up a month ago.
    fn sweep(&self) -> anyhow::Result<usize> {
        let now = chrono::Utc::now();
        let week = (now - chrono::Duration::days(7)).to_rfc3339();
        let month = (now - chrono::Duration::days(30)).to_rfc3339();
        self.db.with(|c| {
            c.execute(
                "DELETE FROM deliveries WHERE (status = 'delivered' AND created_at < ?1)
                 OR (status = 'failed' AND created_at < ?2)",
                params![week, month],
            )
        })
    }

    fn record(&self, d: &Due, outcome: Result<(), String>) -> anyhow::Result<()> {
        let attempts = d.attempts + 1;
        let (status, next_at, error) = match outcome {
            Ok(()) => ("delivered", 0, None),
            Err(e) if attempts >= self.cfg.tries.max(1) => ("failed", 0, Some(e)),
            Err(e) => {
                let wait = (self.cfg.backoff.as_millis() as i64)
                    .saturating_mul(4i64.saturating_pow(attempts.saturating_sub(1)));
                let wait = wait.min(3_600_000);
                (
                    "pending",
                    chrono::Utc::now().timestamp_millis() + wait,
                    Some(e),
                )
            }
        };
        if status == "failed" {
            tracing::warn!(id = %d.id, url = %d.url, attempts, "webhook delivery given up; kept in serve.db");
        }
        self.db.with(|c| {
            c.execute(
                "UPDATE deliveries SET status = ?2, attempts = ?3, next_at = ?4, last_error = ?5
                 WHERE id = ?1",
                params![d.id, status, attempts, next_at, error],
            )
            .map(|_| ())
        })
    }

    /// Sends what is due, oldest first, until the server stops: up to [`PARALLEL`]
    /// deliveries at once, one at a time to each receiver (a slow one holds only its own
    /// events back). What is left waits in `serve.db` for the next start.
    pub async fn run(self: Arc<Self>, mut stop: Shutdown) {
        let client = match client(self.cfg.allow_private) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "no webhook client: deliveries wait in serve.db");
                return;
            }
        };
        let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
        let slots = Arc::new(Semaphore::new(PARALLEL));
        let mut swept = std::time::Instant::now() - Duration::from_secs(3600);
        loop {
            if swept.elapsed() >= Duration::from_secs(3600) {
                swept = std::time::Instant::now();
                let me = self.clone();
                let _ = tokio::task::spawn_blocking(move || me.sweep()).await;
            }
            let now = chrono::Utc::now().timestamp_millis();
            let db = self.clone();
            let found = tokio::task::spawn_blocking(move || db.due(now, 4 * PARALLEL)).await;
            let (due, later) = match found {
                Ok(Ok(x)) => x,
                Ok(Err(e)) => {
                    tracing::warn!(error = %format!("{e:#}"), "reading the webhook outbox");
                    (Vec::new(), Some(now + 1000))
                }
                Err(_) => (Vec::new(), Some(now + 1000)),
            };
            // Deliveries waiting for a receiver or a slot: the next round comes when one
            // ends (a wake), not by the clock.
            let mut held = false;
            for d in due {
                if !busy
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(d.url.clone())
                {
                    held = true;
                    continue;
                }
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    busy.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&d.url);
                    held = true;
                    break;
                };
                let (me, client, busy) = (self.clone(), client.clone(), busy.clone());
                tokio::spawn(async move {
                    let outcome = me.post(&client, &d).await;
                    let url = d.url.clone();
                    let m2 = me.clone();
                    let _ = tokio::task::spawn_blocking(move || m2.record(&d, outcome)).await;
                    busy.lock().unwrap_or_else(|e| e.into_inner()).remove(&url);
                    drop(permit);
                    me.wake.notify_one();
                });
            }
            let wait = if held {
                Duration::from_secs(1)
            } else {
                later.map_or(Duration::from_secs(3600), |t| {
                    Duration::from_millis((t - now).clamp(10, 3_600_000) as u64)
                })
            };
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = stop.recv() => return,
            }
        }
    }

    async fn post(&self, client: &reqwest::Client, d: &Due) -> Result<(), String> {
        let mut req = client
            .post(&d.url)
            .header("content-type", "application/json")
            .header("webhook-id", &d.id)
            .body(d.body.clone());
        for (k, v) in &d.headers {
            req = req.header(k, v);
        }
        if let Some(s) = self.cfg.secret.as_deref().filter(|s| !s.is_empty()) {
            req = req.header("X-Firecrawl-Signature", sign(s, &d.body));
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!("answered {}", r.status().as_u16())),
            Err(e) => Err(format!("no answer: {e}")),
        }
    }
}

/// Deliveries go through the fetcher's address policy, never follow a redirect, and a
/// receiver gets 10 s to answer.
fn client(allow_private: bool) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(trawl_fetcher::net::GuardedResolver { allow_private })
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_take_firecrawls_forms_and_refuse_bad_ones() {
        let h = Hook::parse(Some(&json!("http://127.0.0.1:9/h")), true)
            .unwrap()
            .unwrap();
        assert!(h.wants("crawl.page") && h.wants("batch_scrape.completed"));
        let h = Hook::parse(
            Some(
                &json!({"url": "https://example.org/h", "headers": {"X-A": "1"},
                         "metadata": {"k": "v"}, "events": ["completed", "crawl.page"]}),
            ),
            false,
        )
        .unwrap()
        .unwrap();
        assert!(h.wants("crawl.completed") && h.wants("crawl.page") && !h.wants("crawl.started"));
        assert_eq!(h.headers["X-A"], "1");
        assert!(Hook::parse(None, false).unwrap().is_none());
        for bad in [
            json!(5),
            json!({"headers": {}}),
            json!("ftp://example.org/"),
            json!({"url": "https://example.org/", "headers": {"X": 1}}),
            json!({"url": "https://example.org/", "events": "page"}),
            json!({"url": "https://example.org/", "headers": {"bad name": "v"}}),
        ] {
            assert!(Hook::parse(Some(&bad), false).is_err(), "{bad}");
        }
        // Private addresses only where the server allows them.
        assert!(Hook::parse(Some(&json!("http://127.0.0.1/h")), false).is_err());
        assert!(Hook::parse(Some(&json!("http://localhost/h")), false).is_err());
        assert!(Hook::parse(Some(&json!("http://[::1]/h")), false).is_err());
    }

    #[test]
    fn the_signature_is_firecrawls() {
        // HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog"), RFC 4231 style
        // test vector published with the algorithm.
        assert_eq!(
            sign(b"key", b"The quick brown fox jumps over the lazy dog"),
            "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
    }

    #[test]
    fn events_wait_in_the_table_and_failures_back_off() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("serve.db")).unwrap();
        let cfg = OutboxConfig {
            secret: None,
            tries: 2,
            backoff: Duration::from_secs(60),
            allow_private: true,
        };
        let out = Outbox::new(db.clone(), cfg).unwrap();
        let hook = Hook::parse(
            Some(&json!({"url": "http://127.0.0.1:9/", "events": ["page"]})),
            true,
        )
        .unwrap()
        .unwrap();
        assert!(
            out.enqueue(&hook, "crawl.started", "j", json!([]), json!({}))
                .unwrap()
                .is_none()
        );
        let id = out
            .enqueue(
                &hook,
                "crawl.page",
                "j",
                json!([{"markdown": "x"}]),
                json!({}),
            )
            .unwrap()
            .unwrap();
        let now = chrono::Utc::now().timestamp_millis();
        let (d, _) = out.due(now + 10, 10).unwrap();
        let d = d.into_iter().next().unwrap();
        assert_eq!(d.id, id);
        let body: Value = serde_json::from_slice(&d.body).unwrap();
        assert_eq!(
            (body["type"].as_str(), body["id"].as_str()),
            (Some("crawl.page"), Some("j"))
        );
        out.record(&d, Err("answered 500".into())).unwrap();
        // Retried after the backoff, not before; the second failure spends the tries.
        assert!(out.due(now + 10, 10).unwrap().0.is_empty());
        let (d, _) = out.due(now + 61_000, 10).unwrap();
        let d = d.into_iter().next().unwrap();
        assert_eq!((d.id.as_str(), d.attempts), (id.as_str(), 1));
        out.record(&d, Err("answered 500".into())).unwrap();
        assert_eq!(out.counts().unwrap().get("failed"), Some(&1));
        assert!(out.due(now + 10_000_000, 10).unwrap().0.is_empty());
    }
}
