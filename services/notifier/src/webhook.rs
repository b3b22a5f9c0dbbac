//! Delivering change events to a webhook, the Standard Webhooks way: one event per POST,
//! headers `webhook-id` (the event's id, the same on every retry), `webhook-timestamp` and
//! `webhook-signature: v1,<base64 HMAC-SHA256(secret, id.timestamp.body)>`, the secret from
//! `TRAWL_WEBHOOK_SECRET` (`whsec_` + base64, or the raw string). A non-2xx answer or no
//! answer is retried after the backoff, four times longer each try; a 410 stops deliveries
//! to the endpoint. The embedded runtime's notifier ([`run`]) keeps what it could not
//! deliver in `changes-undelivered.jsonl`; the cluster's ([`crate::serve`]) leaves it in the
//! dead-letter stream.

use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::sync::mpsc;
use trawl_core::change::ChangeEvent;

/// Where and how events are delivered.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub url: String,
    pub secret: Option<Vec<u8>>,
    pub tries: u32,
    pub backoff: Duration,
    /// After the crawl, retries go on this long; what is left is kept undelivered.
    pub wait_after: Duration,
    pub undelivered: PathBuf,
    /// The id of each delivered event is appended here, so that a crawl resumed after a
    /// kill sends only what was neither delivered nor given up ([`pending`]).
    pub delivered: PathBuf,
}

impl WebhookConfig {
    /// The secret as Standard Webhooks gives it: `whsec_` + base64, else the bytes as is.
    pub fn secret_from(s: &str) -> Vec<u8> {
        s.strip_prefix("whsec_")
            .and_then(|b| data_encoding::BASE64.decode(b.as_bytes()).ok())
            .unwrap_or_else(|| s.as_bytes().to_vec())
    }
}

/// What the notifier did.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Deliveries {
    pub delivered: u64,
    pub attempts: u64,
    pub undelivered: u64,
}

/// The signature header's value for one delivery.
pub fn sign(secret: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "v1,{}",
        data_encoding::BASE64.encode(&mac.finalize().into_bytes())
    )
}

struct Pending {
    event: ChangeEvent,
    body: Vec<u8>,
    tries: u32,
    due: Instant,
}

/// Runs until `events` closes and every event is delivered, given up, or still waiting
/// when `wait_after` has passed since the close.
pub async fn run(
    cfg: WebhookConfig,
    mut events: mpsc::UnboundedReceiver<ChangeEvent>,
) -> Deliveries {
    let client = client();
    let mut queue: VecDeque<Pending> = VecDeque::new();
    let mut stats = Deliveries::default();
    let mut closed_at: Option<Instant> = None;
    let mut gone = false;
    loop {
        let next_due = queue.iter().map(|p| p.due).min();
        if closed_at.is_some() && queue.is_empty() {
            break;
        }
        if let Some(t) = closed_at
            && t.elapsed() >= cfg.wait_after
        {
            break;
        }
        // After the crawl, the deadline is a wake-up too: a long backoff never keeps the
        // command running past it.
        let deadline = closed_at.map(|t| t + cfg.wait_after);
        let wake_at = match (next_due, deadline) {
            (Some(d), Some(e)) => Some(d.min(e)),
            (d, e) => d.or(e),
        };
        let wake = wake_at.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        tokio::select! {
            e = events.recv(), if closed_at.is_none() => match e {
                Some(event) => {
                    let body = serde_json::to_vec(&event).unwrap_or_default();
                    queue.push_back(Pending { event, body, tries: 0, due: Instant::now() });
                }
                None => closed_at = Some(Instant::now()),
            },
            _ = tokio::time::sleep(wake) => {}
        }
        let now = Instant::now();
        let mut i = 0;
        while i < queue.len() {
            if deadline.is_some_and(|e| Instant::now() >= e) {
                break;
            }
            if gone || queue[i].due > now {
                i += 1;
                continue;
            }
            let mut p = queue.remove(i).expect("index in range");
            p.tries += 1;
            stats.attempts += 1;
            let secret = cfg.secret.as_deref();
            match post(&client, &cfg.url, secret, &p.event.id, &p.body).await {
                Ok(()) => {
                    stats.delivered += 1;
                    append_line(&cfg.delivered, p.event.id.as_bytes(), &p.event.id);
                }
                Err(status) => {
                    if status == Some(410) {
                        tracing::warn!(url = %cfg.url, "the webhook answered 410: no more deliveries");
                        gone = true;
                    }
                    if p.tries >= cfg.tries || gone {
                        keep_undelivered(&cfg, &p.event, &mut stats);
                    } else {
                        p.due = Instant::now() + backoff(cfg.backoff, p.tries);
                        queue.insert(i, p);
                        i += 1;
                    }
                }
            }
        }
        if gone {
            for p in queue.drain(..) {
                keep_undelivered(&cfg, &p.event, &mut stats);
            }
        }
    }
    for p in queue.drain(..) {
        keep_undelivered(&cfg, &p.event, &mut stats);
    }
    stats
}

/// One POST of one event, signed when there is a secret; the answer's status when it is
/// not a 2xx (None: no answer).
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&[u8]>,
    id: &str,
    body: &[u8],
) -> Result<(), Option<u16>> {
    let ts = chrono::Utc::now().timestamp();
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", ts.to_string())
        .body(body.to_vec());
    if let Some(secret) = secret {
        req = req.header("webhook-signature", sign(secret, id, ts, body));
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => {
            tracing::warn!(status = r.status().as_u16(), id, "webhook delivery refused");
            Err(Some(r.status().as_u16()))
        }
        Err(e) => {
            tracing::warn!(error = %e, id, "webhook delivery failed");
            Err(None)
        }
    }
}

/// The client every delivery goes through: a receiver gets 10 s to answer.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default()
}

/// The wait before try `tries + 1`: the backoff, four times longer each try.
pub fn backoff(base: Duration, tries: u32) -> Duration {
    base.saturating_mul(4u32.saturating_pow(tries.saturating_sub(1)))
}

fn keep_undelivered(cfg: &WebhookConfig, e: &ChangeEvent, stats: &mut Deliveries) {
    stats.undelivered += 1;
    let line = serde_json::to_vec(e).unwrap_or_default();
    append_line(&cfg.undelivered, &line, &e.id);
}

/// Appends one line; a failure is logged (the event itself stays in `changes.jsonl`).
fn append_line(path: &Path, line: &[u8], id: &str) {
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| {
            f.write_all(line)?;
            f.write_all(b"\n")
        });
    if let Err(err) = r {
        tracing::error!(error = %err, file = %path.display(), id, "could not record a delivery");
    }
}

/// The events of `changes` (a crawl's `changes.jsonl`) that are neither in `delivered`
/// (ids, one a line) nor in `undelivered` (events given up on), in their order: what a
/// crawl resumed after a kill still owes its webhook. Missing files count as empty; lines
/// that do not parse are skipped (a torn last line is cut back before this is read).
pub fn pending(changes: &Path, delivered: &Path, undelivered: &Path) -> Vec<ChangeEvent> {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let mut done: HashSet<String> = read(delivered).lines().map(str::to_string).collect();
    done.extend(
        read(undelivered)
            .lines()
            .filter_map(|l| serde_json::from_str::<ChangeEvent>(l).ok())
            .map(|e| e.id),
    );
    read(changes)
        .lines()
        .filter_map(|l| serde_json::from_str::<ChangeEvent>(l).ok())
        .filter(|e| !done.contains(&e.id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str) -> ChangeEvent {
        serde_json::from_value(serde_json::json!({
            "v": 1, "id": id, "type": "page.new", "crawl": "c", "since": "b",
            "at": "2026-12-01T00:00:00Z", "url": "http://a.test/x", "final_url": "http://a.test/x",
            "status": "new", "http_status": 200, "linked": true
        }))
        .unwrap()
    }

    #[test]
    fn pending_is_what_was_neither_delivered_nor_given_up() {
        let dir = std::env::temp_dir().join(format!("trawl-pending-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (changes, delivered, undelivered) = (
            dir.join("changes.jsonl"),
            dir.join("changes-delivered.txt"),
            dir.join("changes-undelivered.jsonl"),
        );
        let line = |e: &ChangeEvent| serde_json::to_string(e).unwrap() + "\n";
        let all: String = ["a", "b", "c", "d"]
            .iter()
            .map(|i| line(&event(i)))
            .collect();
        std::fs::write(&changes, all + "{torn").unwrap();
        assert_eq!(
            pending(&changes, &delivered, &undelivered).len(),
            4,
            "no files yet"
        );
        std::fs::write(&delivered, "a\nc\n").unwrap();
        std::fs::write(&undelivered, line(&event("d"))).unwrap();
        let ids: Vec<String> = pending(&changes, &delivered, &undelivered)
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, ["b"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn signatures_follow_standard_webhooks() {
        // The example of the Standard Webhooks specification.
        let secret = WebhookConfig::secret_from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
