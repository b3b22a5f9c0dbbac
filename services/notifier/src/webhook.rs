//! Delivering change events to a webhook, the Standard Webhooks way: one event per POST,
//! headers `webhook-id` (the event's id, the same on every retry), `webhook-timestamp` and
//! `webhook-signature: v1,<base64 HMAC-SHA256(secret, id.timestamp.body)>`, the secret from
//! `TRAWL_WEBHOOK_SECRET` (`whsec_` + base64, or the raw string). A non-2xx answer or no
//! answer is retried after the backoff, four times longer each try; a 410 stops deliveries
//! to the endpoint. The embedded runtime's notifier ([`run`]) keeps what it could not
//! deliver in `changes-undelivered.jsonl`; the cluster's ([`crate::serve`]) leaves it in the
//! dead-letter stream.

use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
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
    /// kill sends only what was neither delivered nor given up ([`Owed`]).
    pub delivered: PathBuf,
    /// The crawl's `changes.jsonl`: every event, where those the channel could not take
    /// are read back from.
    pub changes: PathBuf,
    /// Bytes of events kept in memory ([`QUEUE_BYTES`]).
    pub queue_bytes: usize,
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

/// Bytes of events the notifier keeps in memory, waiting for a try or between tries. Past
/// it, it takes no more from the writer's channel; what the writer cannot hand over then
/// is read back from `changes.jsonl` once the crawl is done ([`run`]).
pub const QUEUE_BYTES: usize = 16 << 20;

/// Events the channel from the writer holds (each a few KB: the diff is cut at 16 KiB).
pub const CHANNEL_EVENTS: usize = 256;

/// The channel from the writer to [`run`]. The writer hands events over with `try_send`
/// and never waits: an event the channel has no room for is in `changes.jsonl` already,
/// and [`run`] reads it from there.
pub fn channel() -> (mpsc::Sender<ChangeEvent>, mpsc::Receiver<ChangeEvent>) {
    mpsc::channel(CHANNEL_EVENTS)
}

struct Pending {
    event: ChangeEvent,
    body: Vec<u8>,
    tries: u32,
    due: Instant,
}

/// The events waiting for a try, bounded by [`WebhookConfig::queue_bytes`].
struct Deliverer<'a> {
    cfg: &'a WebhookConfig,
    client: reqwest::Client,
    queue: VecDeque<Pending>,
    bytes: usize,
    stats: Deliveries,
    gone: bool,
}

impl<'a> Deliverer<'a> {
    fn new(cfg: &'a WebhookConfig) -> Self {
        Self {
            cfg,
            client: client(),
            queue: VecDeque::new(),
            bytes: 0,
            stats: Deliveries::default(),
            gone: false,
        }
    }

    fn has_room(&self) -> bool {
        self.bytes < self.cfg.queue_bytes
    }

    fn push(&mut self, event: ChangeEvent) {
        let body = serde_json::to_vec(&event).unwrap_or_default();
        self.bytes += body.len();
        self.queue.push_back(Pending {
            event,
            body,
            tries: 0,
            due: Instant::now(),
        });
    }

    fn take(&mut self, i: usize) -> Option<Pending> {
        let p = self.queue.remove(i)?;
        self.bytes -= p.body.len();
        Some(p)
    }

    /// How long until the next try is due, at most until `deadline`.
    fn wake(&self, deadline: Option<Instant>) -> Duration {
        let next = self.queue.iter().map(|p| p.due).min();
        let at = match (next, deadline) {
            (Some(d), Some(e)) => Some(d.min(e)),
            (d, e) => d.or(e),
        };
        at.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        })
    }

    /// Tries every event that is due, one POST at a time, until `deadline`.
    async fn try_due(&mut self, deadline: Option<Instant>) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.queue.len() {
            if deadline.is_some_and(|e| Instant::now() >= e) {
                break;
            }
            if self.gone || self.queue[i].due > now {
                i += 1;
                continue;
            }
            let Some(mut p) = self.take(i) else { break };
            p.tries += 1;
            self.stats.attempts += 1;
            let cfg = self.cfg;
            let secret = cfg.secret.as_deref();
            match post(&self.client, &cfg.url, secret, &p.event.id, &p.body).await {
                Ok(()) => {
                    self.stats.delivered += 1;
                    append_line(&cfg.delivered, p.event.id.as_bytes(), &p.event.id);
                }
                Err(status) => {
                    if status == Some(410) {
                        tracing::warn!(url = %cfg.url, "the webhook answered 410: no more deliveries");
                        self.gone = true;
                    }
                    if p.tries >= cfg.tries || self.gone {
                        keep_undelivered(cfg, &p.event, &mut self.stats);
                    } else {
                        p.due = Instant::now() + backoff(cfg.backoff, p.tries);
                        self.bytes += p.body.len();
                        self.queue.insert(i, p);
                        i += 1;
                    }
                }
            }
        }
        if self.gone {
            self.give_up();
        }
    }

    /// Every waiting event goes to the undelivered file.
    fn give_up(&mut self) {
        while let Some(p) = self.take(0) {
            keep_undelivered(self.cfg, &p.event, &mut self.stats);
        }
    }
}

/// Runs until `events` closes (the crawl is done), then delivers what `changes.jsonl`
/// holds that neither came through `events` nor was delivered or given up before
/// ([`Owed`]: a resumed crawl's earlier events, and those the writer could not hand over
/// while the queue was full), until all are delivered or given up, or `wait_after` has
/// passed since the close. What is left then is kept undelivered. Memory stays within
/// [`WebhookConfig::queue_bytes`] and the channel, however slow the receiver.
pub async fn run(
    cfg: WebhookConfig,
    mut events: mpsc::Receiver<ChangeEvent>,
    resumed: bool,
) -> Deliveries {
    let mut d = Deliverer::new(&cfg);
    let mut received = 0u64;
    loop {
        let wake = d.wake(None);
        tokio::select! {
            e = events.recv(), if d.has_room() => match e {
                Some(event) => {
                    received += 1;
                    d.push(event);
                }
                None => break,
            },
            _ = tokio::time::sleep(wake) => {}
        }
        d.try_due(None).await;
    }
    // After the crawl, the deadline is a wake-up too: a long backoff never keeps the
    // command running past it.
    let deadline = Instant::now() + cfg.wait_after;
    let mut owed = None;
    if resumed || received < count_lines(&cfg.changes) {
        let waiting = d.queue.iter().map(|p| p.event.id.as_str());
        owed = Some(Owed::open(&cfg, waiting));
        tracing::info!("delivering the events in changes.jsonl the webhook has not had");
    }
    loop {
        while d.has_room()
            && let Some(o) = owed.as_mut()
        {
            match o.next() {
                Some(e) => d.push(e),
                None => owed = None,
            }
        }
        if (d.queue.is_empty() && owed.is_none()) || Instant::now() >= deadline {
            break;
        }
        if d.gone {
            d.give_up();
            if owed.is_none() {
                break;
            }
            continue;
        }
        tokio::time::sleep(d.wake(Some(deadline))).await;
        d.try_due(Some(deadline)).await;
    }
    d.give_up();
    let mut stats = d.stats;
    for e in owed.into_iter().flatten() {
        keep_undelivered(&cfg, &e, &mut stats);
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

/// Lines in a file (0 when it cannot be read).
fn count_lines(path: &Path) -> u64 {
    let Ok(mut f) = std::fs::File::open(path) else {
        return 0;
    };
    let mut buf = vec![0u8; 64 << 10];
    let mut n = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) | Err(_) => return n,
            Ok(k) => n += buf[..k].iter().filter(|&&b| b == b'\n').count() as u64,
        }
    }
}

/// The events of `changes.jsonl` that are neither in the delivered file (ids, one a
/// line), nor in the undelivered one (events given up on), nor waiting: read one line at
/// a time, in their order. Only a hash of each id done is kept (8 bytes an event). Missing
/// files count as empty; lines that do not parse are skipped (a torn last line).
pub struct Owed {
    lines: Option<std::io::Lines<BufReader<std::fs::File>>>,
    done: HashSet<u64>,
}

fn id_hash(id: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

impl Owed {
    pub fn open<'a>(cfg: &WebhookConfig, waiting: impl Iterator<Item = &'a str>) -> Self {
        let lines = |p: &Path| {
            std::fs::File::open(p)
                .ok()
                .map(|f| BufReader::new(f).lines())
        };
        let mut done: HashSet<u64> = waiting.map(id_hash).collect();
        for l in lines(&cfg.delivered)
            .into_iter()
            .flatten()
            .map_while(Result::ok)
        {
            done.insert(id_hash(&l));
        }
        for l in lines(&cfg.undelivered)
            .into_iter()
            .flatten()
            .map_while(Result::ok)
        {
            if let Ok(e) = serde_json::from_str::<ChangeEvent>(&l) {
                done.insert(id_hash(&e.id));
            }
        }
        Owed {
            lines: lines(&cfg.changes),
            done,
        }
    }
}

impl Iterator for Owed {
    type Item = ChangeEvent;

    fn next(&mut self) -> Option<ChangeEvent> {
        let lines = self.lines.as_mut()?;
        for l in lines.map_while(Result::ok) {
            let Ok(e) = serde_json::from_str::<ChangeEvent>(&l) else {
                continue;
            };
            // An event once, even if a resumed crawl wrote its line again.
            if self.done.insert(id_hash(&e.id)) {
                return Some(e);
            }
        }
        self.lines = None;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn event(id: &str) -> ChangeEvent {
        serde_json::from_value(serde_json::json!({
            "v": 1, "id": id, "type": "page.new", "crawl": "c", "since": "b",
            "at": "2026-12-01T00:00:00Z", "url": "http://a.test/x", "final_url": "http://a.test/x",
            "status": "new", "http_status": 200, "linked": true
        }))
        .unwrap()
    }

    fn config(dir: &Path, url: &str, queue_bytes: usize) -> WebhookConfig {
        WebhookConfig {
            url: url.to_string(),
            secret: None,
            tries: 2,
            backoff: Duration::from_millis(10),
            wait_after: Duration::from_secs(20),
            undelivered: dir.join("changes-undelivered.jsonl"),
            delivered: dir.join("changes-delivered.txt"),
            changes: dir.join("changes.jsonl"),
            queue_bytes,
        }
    }

    fn line(e: &ChangeEvent) -> String {
        serde_json::to_string(e).unwrap() + "\n"
    }

    #[test]
    fn owed_is_what_was_neither_delivered_nor_given_up_nor_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), "http://127.0.0.1:9/", QUEUE_BYTES);
        let all: String = ["a", "b", "c", "d", "e", "b"]
            .iter()
            .map(|i| line(&event(i)))
            .collect();
        std::fs::write(&cfg.changes, all + "{torn").unwrap();
        let ids = |waiting: &[&str]| -> Vec<String> {
            Owed::open(&cfg, waiting.iter().copied())
                .map(|e| e.id)
                .collect()
        };
        assert_eq!(ids(&[]), ["a", "b", "c", "d", "e"], "no files yet; b once");
        std::fs::write(&cfg.delivered, "a\nc\n").unwrap();
        std::fs::write(&cfg.undelivered, line(&event("d"))).unwrap();
        assert_eq!(ids(&["e"]), ["b"]);
    }

    /// A receiver on loopback that answers 204 to every POST and records each event id;
    /// it answers only after `delay`.
    async fn receiver(delay: Duration) -> (String, Arc<Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let got = Arc::new(Mutex::new(Vec::new()));
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", l.local_addr().unwrap());
        let g = got.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = l.accept().await else {
                    return;
                };
                let g = g.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        // One request: headers, then content-length bytes of body.
                        let head_end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        let id = head
                            .lines()
                            .find_map(|l| l.strip_prefix("webhook-id:"))
                            .map(|v| v.trim().to_string())
                            .unwrap_or_default();
                        while buf.len() < head_end + len {
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..head_end + len);
                        tokio::time::sleep(delay).await;
                        g.lock().unwrap().push(id);
                        let ok = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
                        if sock.write_all(ok).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, got)
    }

    /// A receiver slower than the writer, a queue of two events and a channel that the
    /// writer finds full: the events it could not hand over are read back from
    /// `changes.jsonl` after the close, and every event is delivered exactly once.
    #[tokio::test]
    async fn a_full_queue_defers_to_changes_jsonl_and_delivers_every_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let (url, got) = receiver(Duration::from_millis(5)).await;
        let body = serde_json::to_vec(&event("e000")).unwrap().len();
        let cfg = config(dir.path(), &url, 2 * body);
        let (tx, rx) = mpsc::channel(4);
        let run = tokio::spawn(run(cfg.clone(), rx, false));
        let mut sent = 0;
        let mut changes = String::new();
        for i in 0..300 {
            let e = event(&format!("e{i:03}"));
            changes.push_str(&line(&e));
            // The writer's way: the line first, then a hand-over that never waits.
            std::fs::write(&cfg.changes, &changes).unwrap();
            if tx.try_send(e).is_ok() {
                sent += 1;
            }
        }
        drop(tx);
        let stats = run.await.unwrap();
        assert!(
            sent < 300,
            "the channel was full at times ({sent} handed over)"
        );
        let got = got.lock().unwrap().clone();
        let unique: HashSet<&String> = got.iter().collect();
        assert_eq!(got.len(), 300, "every event once");
        assert_eq!(unique.len(), 300);
        assert_eq!(stats.delivered, 300);
        assert_eq!(stats.undelivered, 0);
        assert_eq!(count_lines(&cfg.delivered), 300);
    }

    /// A receiver that is gone (nothing listens): every event, handed over or owed, ends
    /// in the undelivered file once the tries are spent, none lost, none twice.
    #[tokio::test]
    async fn what_cannot_be_delivered_is_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", closed.local_addr().unwrap());
        drop(closed);
        let body = serde_json::to_vec(&event("e000")).unwrap().len();
        let cfg = config(dir.path(), &url, 3 * body);
        let changes: String = (0..40).map(|i| line(&event(&format!("e{i:03}")))).collect();
        std::fs::write(&cfg.changes, changes).unwrap();
        let (tx, rx) = mpsc::channel(4);
        for i in 0..4 {
            tx.try_send(event(&format!("e{i:03}"))).unwrap();
        }
        drop(tx);
        let stats = run(cfg.clone(), rx, true).await;
        assert_eq!(stats.delivered, 0);
        assert_eq!(stats.undelivered, 40);
        let kept: HashSet<String> = std::fs::read_to_string(&cfg.undelivered)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<ChangeEvent>(l).unwrap().id)
            .collect();
        assert_eq!(kept.len(), 40);
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
