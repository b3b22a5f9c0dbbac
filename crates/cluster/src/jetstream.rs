//! The queue interface over NATS JetStream: one work-queue stream per hop, a durable pull
//! consumer per stage, explicit acks, naks with a delay, and a dead-letter stream per stage.
//! A message that will never succeed goes to the dead-letter stream with its reason, copied
//! before it is removed: when a consumer terminates it, when it fails its last allowed
//! delivery, and when the server gives up on it (the max-deliveries advisory, for a consumer
//! that died holding it).
//!
//! Streams and consumers are created if missing and reused if present, so every replica
//! runs the same start-up.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind, consumer::PullConsumer, stream};
use async_trait::async_trait;
use futures_util::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use trawl_core::pipeline::Hop;
use trawl_core::queue::{Delivery, Queue};
use trawl_core::settings::ClusterSettings;
use trawl_core::{CoreError, CoreResult};

mod recovery;
use recovery::{publish_dead_letter, watch_max_deliveries};

/// How long a publish is sent again while its ack does not come.
pub const PUBLISH_RETRY_FOR: Duration = Duration::from_secs(60);
/// How long pulls may fail in a row before the failure is the stage's (which then starts
/// again with a fresh connection).
pub const PULL_RETRY_FOR: Duration = Duration::from_secs(60);

/// Whether a failed publish may be sent again: not when the message can never fit or the
/// stream refused it for its contents.
fn publish_retryable(e: &async_nats::jetstream::context::PublishError) -> bool {
    use async_nats::jetstream::context::PublishErrorKind as K;
    !matches!(
        e.kind(),
        K::MaxPayloadExceeded | K::WrongLastMessageId | K::WrongLastSequence
    )
}

/// Waits between the tries of a call to a server that is away, for up to a budget; says
/// once that it waits and once that it is back.
struct Retry {
    started: std::time::Instant,
    budget: Duration,
    pause: Duration,
    tries: u32,
}

impl Retry {
    fn new(budget: Duration) -> Self {
        Retry {
            started: std::time::Instant::now(),
            budget,
            pause: Duration::from_millis(100),
            tries: 0,
        }
    }

    /// Sleeps before the next try; the error once the budget is spent.
    async fn wait(
        &mut self,
        stream: &str,
        what: &str,
        e: &(dyn std::fmt::Display + Sync),
    ) -> CoreResult<()> {
        if self.started.elapsed() + self.pause > self.budget {
            return Err(backend(what, format!("{e} (tried for {:?})", self.budget)));
        }
        if self.tries == 0 {
            tracing::warn!(stream, "{what} failed, trying again: {e}");
        }
        self.tries += 1;
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_secs(2));
        Ok(())
    }

    fn recovered(&self, stream: &str, what: &str) {
        if self.tries > 0 {
            tracing::info!(
                stream,
                tries = self.tries,
                "{what} went through after {:?}",
                self.started.elapsed()
            );
        }
    }
}

/// How long past a pull request's own expiry (none for a no-wait fetch) its answer is
/// awaited: async-nats gives a batch the same grace.
const PULL_GRACE: Duration = Duration::from_secs(5);

/// One hop's queue: where it lives and how patient it is.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// Stream name, e.g. `TRAWL_FETCH`.
    pub stream: String,
    /// The subject messages are published on, e.g. `trawl.fetch`.
    pub subject: String,
    /// Durable consumer name (the stage), e.g. `fetcher`.
    pub consumer: String,
    /// Deliveries before a message is dead-lettered.
    pub max_deliver: i64,
    /// How long a delivery may stay unacked before the server redelivers it.
    pub ack_wait: Duration,
    /// Messages the stream holds before publishers wait (back-pressure).
    pub max_messages: i64,
    /// Dead-letter stream and subject, e.g. `TRAWL_DLQ_FETCH` / `trawl.dlq.fetch`; a
    /// letter is published under the subject plus its crawl's token
    /// ([`dead_letter_subject_of`]), so a crawl's letters can be read alone.
    pub dead_letter_stream: String,
    pub dead_letter_subject: String,
    /// Copies the server keeps of the stream and its dead letters (a JetStream cluster's
    /// replication factor).
    pub replicas: usize,
}

/// A crawl id as one NATS subject token (and consumer-name part): its safe characters,
/// then a hash of the whole id, so two ids never share a token.
pub fn crawl_token(crawl: &str) -> String {
    let safe: String = crawl
        .chars()
        .take(48)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let hash = (trawl_core::state::seen_digest(crawl) >> 96) as u32;
    format!("{safe}-{hash:08x}")
}

/// Where the letters of one crawl's messages on this hop go.
pub fn dead_letter_subject_of(cfg: &QueueConfig, crawl: &str) -> String {
    format!("{}.{}", cfg.dead_letter_subject, crawl_token(crawl))
}

/// The dead-letter stream of a hop, made or brought up to date (its subjects took a
/// per-crawl token later: a stream made before takes them too).
pub(crate) async fn dead_letter_stream(
    js: &jetstream::Context,
    cfg: &QueueConfig,
) -> CoreResult<stream::Stream> {
    let subjects = vec![
        cfg.dead_letter_subject.clone(),
        format!("{}.>", cfg.dead_letter_subject),
    ];
    let mut stream = js
        .get_or_create_stream(stream::Config {
            name: cfg.dead_letter_stream.clone(),
            subjects: subjects.clone(),
            storage: stream::StorageType::File,
            num_replicas: cfg.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| backend("dead-letter stream", e))?;
    let mut config = stream
        .info()
        .await
        .map_err(|e| backend("dead-letter stream info", e))?
        .config
        .clone();
    if config.subjects != subjects || config.num_replicas < cfg.replicas {
        config.subjects = subjects;
        config.num_replicas = config.num_replicas.max(cfg.replicas);
        js.update_stream(config)
            .await
            .map_err(|e| backend("dead-letter stream update", e))?;
    }
    Ok(stream)
}

impl QueueConfig {
    /// How long the stream remembers a keyed message (`Queue::publish_keyed`): past the
    /// ack wait, after which a crashed producer's job is taken over and its last steps
    /// repeated, with a minute to spare (JetStream's default is two minutes).
    pub fn duplicate_window(&self) -> Duration {
        (self.ack_wait * 2 + Duration::from_secs(60)).max(Duration::from_secs(120))
    }

    /// The names of `hop` under `prefix` (`<PREFIX>_FETCH`, `<prefix>.fetch`, ...), consumed
    /// by its stage ([`Hop::consumer`]). With the default settings' delivery limits.
    pub fn for_hop(prefix: &str, hop: Hop) -> Self {
        let cluster = ClusterSettings {
            queue_prefix: prefix.to_string(),
            ..ClusterSettings::default()
        };
        Self::from_settings(&cluster, hop)
    }

    /// Names from `cluster.queue_prefix` and the hop's name, the durable consumer named
    /// after the stage that consumes it, delivery limits from the settings.
    pub fn from_settings(cluster: &ClusterSettings, hop: Hop) -> Self {
        let prefix = &cluster.queue_prefix;
        let up = |s: &str| s.to_ascii_uppercase().replace(['.', '-'], "_");
        let name = hop.name();
        QueueConfig {
            stream: format!("{}_{}", up(prefix), up(name)),
            subject: format!("{prefix}.{name}"),
            consumer: hop.consumer().name().to_string(),
            // A change event is dead-lettered by the notifier after the crawl's
            // `webhook_tries`; the server's own limit only stops one that is never acked.
            // An archive is dead-lettered by the ingester after its failed reads; a
            // delivery that ends in a crash or a stop is none.
            max_deliver: if matches!(hop, Hop::Changed | Hop::Archives) {
                cluster.max_deliver.max(1000)
            } else {
                cluster.max_deliver
            },
            ack_wait: Duration::from_secs(cluster.ack_wait_s.max(1)),
            max_messages: if hop == Hop::Fetch {
                cluster.fetch_stream_max.max(1)
            } else {
                1_000_000
            },
            dead_letter_stream: format!("{}_DLQ_{}", up(prefix), up(name)),
            dead_letter_subject: format!("{prefix}.dlq.{name}"),
            replicas: cluster.stream_replicas.clamp(1, 5),
        }
    }
}

pub(crate) fn backend(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("jetstream {what}: {e}"))
}

/// A queue over one JetStream stream, consumed by one durable pull consumer.
pub struct JetStreamQueue<M> {
    js: jetstream::Context,
    stream: tokio::sync::Mutex<stream::Stream>,
    /// Made again when messages are stranded below it ([`JetStreamQueue::unstrand`]).
    consumer: Mutex<PullConsumer>,
    strand: tokio::sync::Mutex<Strand>,
    cfg: QueueConfig,
    inflight: Inflight,
    next_id: AtomicU64,
    /// Since when pulls have failed in a row, if they do.
    pull_failing: Mutex<Option<std::time::Instant>>,
    advisories: tokio::task::JoinHandle<()>,
    keep_alive: tokio::task::JoinHandle<()>,
    _m: PhantomData<fn() -> M>,
}

impl<M> Drop for JetStreamQueue<M> {
    fn drop(&mut self) {
        self.advisories.abort();
        self.keep_alive.abort();
    }
}

/// The deliveries this process holds: the message, its delivery count, and when it came.
type Inflight = Arc<Mutex<HashMap<u64, (jetstream::Message, u32, std::time::Instant)>>>;

/// How long a held delivery is kept alive at most: work that takes longer is taken to be
/// stuck, and its message is handed out again after the ack wait.
fn keep_alive_for(ack_wait: Duration) -> Duration {
    (ack_wait * 10).max(Duration::from_secs(600))
}

/// How often a consumer that pulled nothing asks whether messages are stranded.
const STRAND_CHECK: Duration = Duration::from_secs(2);

/// The last look for stranded messages, and the stream's first message then, when they
/// looked stranded.
#[derive(Default)]
struct Strand {
    checked: Option<std::time::Instant>,
    first: Option<u64>,
}

/// The durable pull consumer of a hop: explicit acks, the hop's delivery limits.
fn consumer_config(cfg: &QueueConfig) -> jetstream::consumer::pull::Config {
    jetstream::consumer::pull::Config {
        durable_name: Some(cfg.consumer.clone()),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        max_deliver: cfg.max_deliver,
        ack_wait: cfg.ack_wait,
        filter_subject: cfg.subject.clone(),
        // As many copies as the stream (0: the stream's).
        num_replicas: 0,
        ..Default::default()
    }
}

/// Tells the server, every third of the ack wait, that each delivery this process holds
/// is still being worked on. So the ack wait only says how soon a dead replica's messages
/// come back, whatever the work's length (a slow page, a long render, a big document):
/// it can be short without a live replica's work being handed to another.
async fn keep_alive(inflight: Inflight, every: Duration, at_most: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let held: Vec<jetstream::Message> = {
            let mut map = inflight.lock().unwrap_or_else(|e| e.into_inner());
            // Held past `at_most`: stuck, or dropped without an answer. Let go, so its
            // message is handed out again and its bytes are freed.
            map.retain(|_, (_, _, since)| since.elapsed() < at_most);
            map.values().map(|(m, _, _)| m.clone()).collect()
        };
        for m in held {
            // A message acked meanwhile takes the progress as a no-op.
            if let Err(e) = m.ack_with(AckKind::Progress).await {
                tracing::debug!("progress: {e}");
            }
        }
    }
}

impl<M> JetStreamQueue<M> {
    /// Creates (or opens) the stream, its dead-letter stream and the durable consumer.
    pub async fn connect(client: &async_nats::Client, cfg: QueueConfig) -> CoreResult<Self> {
        let js = jetstream::new(client.clone());
        let created = js
            .get_or_create_stream(stream::Config {
                name: cfg.stream.clone(),
                subjects: vec![cfg.subject.clone()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                max_messages: cfg.max_messages,
                discard: stream::DiscardPolicy::New,
                duplicate_window: cfg.duplicate_window(),
                num_replicas: cfg.replicas,
                ..Default::default()
            })
            .await;
        let mut stream = match created {
            Ok(s) => s,
            // Another process (a service, `trawl submit`) created it between this one's
            // look and its create, under other limits: it is taken as it is, and the
            // limits that matter are raised below.
            Err(e) => js
                .get_stream(&cfg.stream)
                .await
                .map_err(|_| backend("stream", e))?,
        };
        // A stream made before under other limits (the fetch hop's depth) takes these.
        let mut config = stream
            .info()
            .await
            .map_err(|e| backend("stream info", e))?
            .config
            .clone();
        if config.max_messages != cfg.max_messages
            || config.duplicate_window < cfg.duplicate_window()
            || config.num_replicas < cfg.replicas
        {
            config.max_messages = cfg.max_messages;
            config.duplicate_window = cfg.duplicate_window();
            config.num_replicas = config.num_replicas.max(cfg.replicas);
            js.update_stream(config)
                .await
                .map_err(|e| backend("stream update", e))?;
        }
        dead_letter_stream(&js, &cfg).await?;
        let created: Result<PullConsumer, _> = stream
            .get_or_create_consumer(&cfg.consumer, consumer_config(&cfg))
            .await;
        let consumer: PullConsumer = match created {
            Ok(c) => c,
            // The same race for the durable consumer: the one that won is the one used.
            Err(e) => stream
                .get_consumer(&cfg.consumer)
                .await
                .map_err(|_| backend("consumer", e))?,
        };
        let advisories = tokio::spawn(watch_max_deliveries(
            client.clone(),
            js.clone(),
            cfg.clone(),
        ));
        let inflight: Inflight = Arc::default();
        let keep_alive = tokio::spawn(keep_alive(
            inflight.clone(),
            cfg.ack_wait / 3,
            keep_alive_for(cfg.ack_wait),
        ));
        Ok(JetStreamQueue {
            js,
            stream: tokio::sync::Mutex::new(stream),
            consumer: Mutex::new(consumer),
            strand: tokio::sync::Mutex::new(Strand::default()),
            cfg,
            inflight,
            keep_alive,
            next_id: AtomicU64::new(1),
            pull_failing: Mutex::new(None),
            advisories,
            _m: PhantomData,
        })
    }

    pub fn config(&self) -> &QueueConfig {
        &self.cfg
    }

    /// Tells the server the work on `id` goes on, so it is not redelivered yet.
    pub async fn in_progress(&self, id: u64) -> CoreResult<()> {
        let msg = self.with_msg(id, |m| m.clone())?;
        msg.ack_with(AckKind::Progress)
            .await
            .map_err(|e| backend("progress", e))
    }

    fn with_msg<T>(&self, id: u64, f: impl FnOnce(&jetstream::Message) -> T) -> CoreResult<T> {
        let map = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&id)
            .map(|(m, _, _)| f(m))
            .ok_or_else(|| CoreError::Backend(format!("no delivery {id} in flight")))
    }

    fn take(&self, id: u64) -> CoreResult<(jetstream::Message, u32)> {
        self.inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .map(|(m, attempt, _)| (m, attempt))
            .ok_or_else(|| CoreError::Backend(format!("no delivery {id} in flight")))
    }

    /// Publishes and waits for the stream's ack; a full stream is waited on (back-pressure).
    /// Every message carries an id (`key`, or one drawn here), and a publish whose ack did
    /// not come (the server restarting, a stream leader moving) is sent again under the
    /// same id for up to [`PUBLISH_RETRY_FOR`]: the stream's duplicate window keeps one
    /// copy when the first did land.
    async fn publish_with(&self, msg: M, key: Option<&str>) -> CoreResult<()>
    where
        M: Serialize,
    {
        let payload: bytes::Bytes = serde_json::to_vec(&msg)
            .map_err(|e| backend("encode", e))?
            .into();
        let drawn;
        let id = match key {
            Some(k) => k,
            None => {
                drawn = uuid::Uuid::new_v4().simple().to_string();
                drawn.as_str()
            }
        };
        let mut full_wait = Duration::from_millis(20);
        let mut retry = Retry::new(PUBLISH_RETRY_FOR);
        loop {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", id);
            let sent = self
                .js
                .publish_with_headers(self.cfg.subject.clone(), headers, payload.clone())
                .await;
            let acked = match sent {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match acked {
                Ok(_) => {
                    retry.recovered(&self.cfg.stream, "publish");
                    return Ok(());
                }
                Err(e) if e.to_string().contains("maximum messages") => {
                    tokio::time::sleep(full_wait).await;
                    full_wait = (full_wait * 2).min(Duration::from_secs(1));
                }
                Err(e) if !publish_retryable(&e) => return Err(backend("publish", e)),
                Err(e) => retry.wait(&self.cfg.stream, "publish", &e).await?,
            }
        }
    }

    /// Copies a message to the dead-letter stream, then removes it from the work queue.
    async fn dead_letter(
        &self,
        msg: &jetstream::Message,
        reason: &str,
        attempt: u32,
    ) -> CoreResult<()> {
        let seq = msg.info().map(|i| i.stream_sequence).unwrap_or(0);
        publish_dead_letter(
            &self.js,
            &self.cfg,
            msg.payload.clone(),
            reason,
            seq,
            attempt,
        )
        .await?;
        msg.ack_with(AckKind::Term)
            .await
            .map_err(|e| backend("term", e))?;
        if seq > 0 {
            // Work-queue streams drop terminated messages too; deleting makes it certain.
            let _ = self.stream.lock().await.delete_message(seq).await;
        }
        Ok(())
    }
}

/// The messages a pull request brings. A request the server took and then died with is
/// never answered, and the client sets no deadline for a no-wait fetch: without one of our
/// own (its expiry plus [`PULL_GRACE`]) a stage's loop would wait forever on a server that
/// came back.
pub(crate) async fn pulled(
    stream: jetstream::consumer::pull::Batch,
    expires: Option<Duration>,
    what: &str,
) -> Vec<jetstream::Message> {
    pulled_checked(stream, expires, what)
        .await
        .unwrap_or_default()
}

/// [`pulled`], with the server's error when it brought nothing but one (its consumer
/// gone, say): a pull that fails must not look like an empty one, or the stage's loop
/// would spin on it while looking healthy.
async fn pulled_checked(
    mut stream: jetstream::consumer::pull::Batch,
    expires: Option<Duration>,
    what: &str,
) -> Result<Vec<jetstream::Message>, String> {
    let mut out = Vec::new();
    let mut failed = None;
    let deadline = tokio::time::Instant::now() + expires.unwrap_or(Duration::ZERO) + PULL_GRACE;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(m))) => out.push(m),
            Ok(Some(Err(e))) => {
                tracing::debug!("pull: {e}");
                failed.get_or_insert(e.to_string());
            }
            Ok(None) => break,
            Err(_) => {
                tracing::warn!(
                    "{what}: a pull request went unanswered (server restarted?); asking again"
                );
                break;
            }
        }
    }
    match failed {
        Some(e) if out.is_empty() => Err(e),
        _ => Ok(out),
    }
}

#[async_trait]
impl<M> Queue<M> for JetStreamQueue<M>
where
    M: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    async fn publish(&self, msg: M) -> CoreResult<()> {
        self.publish_with(msg, None).await
    }

    async fn publish_keyed(&self, msg: M, key: &str) -> CoreResult<()> {
        self.publish_with(msg, Some(key)).await
    }

    /// A failed pull (the server away, restarting, its JetStream not yet back) waits a
    /// moment and answers nothing, so the stage's loop goes on and pulls again; its
    /// deliveries in flight stay acknowledgeable. Only pulls failing for
    /// [`PULL_RETRY_FOR`] in a row are the stage's error.
    async fn pull(&self, max: usize, wait: Duration) -> CoreResult<Vec<Delivery<M>>> {
        let got = match self.pull_messages(max, wait).await {
            Ok(got) => {
                let failing = self
                    .pull_failing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                if let Some(since) = failing {
                    tracing::info!(
                        stream = %self.cfg.stream,
                        "pulls work again after {:?}",
                        since.elapsed()
                    );
                }
                got
            }
            Err(e) => {
                let (since, first) = {
                    let mut f = self.pull_failing.lock().unwrap_or_else(|e| e.into_inner());
                    let first = f.is_none();
                    (*f.get_or_insert_with(std::time::Instant::now), first)
                };
                if since.elapsed() >= PULL_RETRY_FOR {
                    return Err(e);
                }
                if first {
                    tracing::warn!(stream = %self.cfg.stream, "pull failed, trying again: {e}");
                }
                tokio::time::sleep(wait.clamp(Duration::from_millis(100), Duration::from_secs(1)))
                    .await;
                return Ok(Vec::new());
            }
        };
        if !got.is_empty() {
            crate::activity::mark(&self.cfg.stream);
        }
        let out = self.deliveries(got).await;
        // After the deliveries are held (and kept alive): the look takes three requests.
        self.unstrand().await;
        out
    }

    async fn ack(&self, id: u64) -> CoreResult<()> {
        let (m, _) = self.take(id)?;
        m.ack().await.map_err(|e| backend("ack", e))?;
        crate::activity::mark(&self.cfg.stream);
        Ok(())
    }

    async fn nak(&self, id: u64, delay: Duration) -> CoreResult<()> {
        let (m, attempt) = self.take(id)?;
        crate::activity::mark(&self.cfg.stream);
        if i64::from(attempt) >= self.cfg.max_deliver {
            return self.dead_letter(&m, "max_deliveries", attempt).await;
        }
        m.ack_with(AckKind::Nak(Some(delay)))
            .await
            .map_err(|e| backend("nak", e))
    }

    async fn term(&self, id: u64) -> CoreResult<()> {
        let (m, attempt) = self.take(id)?;
        crate::activity::mark(&self.cfg.stream);
        self.dead_letter(&m, "terminated", attempt).await
    }

    async fn term_with(&self, id: u64, reason: &str) -> CoreResult<()> {
        let (m, attempt) = self.take(id)?;
        crate::activity::mark(&self.cfg.stream);
        let reason: String = reason.chars().take(500).collect();
        self.dead_letter(&m, &reason, attempt).await
    }

    async fn progress(&self, id: u64) -> CoreResult<()> {
        self.in_progress(id).await?;
        crate::activity::mark(&self.cfg.stream);
        Ok(())
    }

    fn progress_every(&self) -> Option<Duration> {
        Some(self.cfg.ack_wait / 3)
    }

    async fn len(&self) -> CoreResult<usize> {
        let mut s = self.stream.lock().await;
        let info = s.info().await.map_err(|e| backend("stream info", e))?;
        Ok(info.state.messages as usize)
    }
}

impl<M> JetStreamQueue<M>
where
    M: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// What one pull brings: what is there now; if nothing, the first to come within
    /// `wait`, then what else is there.
    async fn pull_messages(
        &self,
        max: usize,
        wait: Duration,
    ) -> CoreResult<Vec<jetstream::Message>> {
        let max = max.max(1);
        let mut got: Vec<jetstream::Message> = Vec::new();
        // What is there now; if nothing, wait for the first, then take what else is there.
        let consumer = self
            .consumer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let fetch = |n: usize, expires: Option<Duration>| {
            let c = &consumer;
            async move {
                let res = match expires {
                    None => c.fetch().max_messages(n).messages().await,
                    Some(d) => {
                        c.batch()
                            .max_messages(n)
                            .expires(d.max(Duration::from_millis(10)))
                            .messages()
                            .await
                    }
                };
                let stream = res.map_err(|e| backend("pull", e))?;
                pulled_checked(stream, expires, &self.cfg.stream)
                    .await
                    .map_err(|e| backend("pull", e))
            }
        };
        got.extend(fetch(max, None).await?);
        if got.is_empty() {
            got.extend(fetch(1, Some(wait)).await?);
            if !got.is_empty() && max > 1 {
                // What was pulled is kept even when the second request fails.
                match fetch(max - 1, None).await {
                    Ok(more) => got.extend(more),
                    Err(e) => tracing::debug!("pull: {e}"),
                }
            }
        }
        Ok(got)
    }

    /// The pulled messages as deliveries; an undecodable one is dead-lettered.
    async fn deliveries(&self, got: Vec<jetstream::Message>) -> CoreResult<Vec<Delivery<M>>> {
        let mut out = Vec::with_capacity(got.len());
        for m in got {
            let attempt = m.info().map(|i| i.delivered.max(1) as u32).unwrap_or(1);
            match serde_json::from_slice::<M>(&m.payload) {
                Ok(msg) => {
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    self.inflight
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(id, (m, attempt, std::time::Instant::now()));
                    out.push(Delivery { id, attempt, msg });
                }
                // Bytes no consumer can read: never retried, kept for a human.
                Err(e) => {
                    tracing::warn!(
                        "{}: undecodable message dead-lettered: {e}",
                        self.cfg.stream
                    );
                    let reason = format!("undecodable: {e}");
                    let reason: String = reason.chars().take(200).collect();
                    self.dead_letter(&m, &reason, attempt).await?;
                }
            }
        }
        Ok(out)
    }
}

// What the hops hold, for `trawl status`, `trawl dlq` and `/metrics`: read here as before.
pub use crate::queue_stats::{
    ConsumerStats, DeadLetter, HopStats, consumer_stats, consumer_stats_of, crawl_backlog,
    dead_letters, hop_stats,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawl_tokens_are_subject_safe_and_distinct() {
        let (a, b) = (crawl_token("docs.v1"), crawl_token("docs_v1"));
        assert_ne!(a, b, "the same safe characters, different crawls");
        for t in [&a, &b, &crawl_token("a b*c>d"), &crawl_token("")] {
            assert!(
                t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{t}"
            );
        }
        let cfg = QueueConfig::for_hop("trawl", Hop::Fetch);
        assert_eq!(
            dead_letter_subject_of(&cfg, "docs.v1"),
            format!("trawl.dlq.fetch.{a}")
        );
    }

    /// The names of running clusters' streams and consumers, as they were when hops were
    /// strings.
    #[test]
    fn stream_and_consumer_names_are_unchanged() {
        let cluster = ClusterSettings {
            queue_prefix: "trawl.t-1".into(),
            ..ClusterSettings::default()
        };
        let q = QueueConfig::from_settings(&cluster, Hop::Discovered);
        assert_eq!(q.stream, "TRAWL_T_1_DISCOVERED");
        assert_eq!(q.subject, "trawl.t-1.discovered");
        assert_eq!(q.consumer, "frontier");
        assert_eq!(q.dead_letter_stream, "TRAWL_T_1_DLQ_DISCOVERED");
        assert_eq!(q.dead_letter_subject, "trawl.t-1.dlq.discovered");
        for hop in Hop::ALL {
            let q = QueueConfig::for_hop("trawl", hop);
            let up = hop.name().to_ascii_uppercase();
            assert_eq!(q.stream, format!("TRAWL_{up}"));
            assert_eq!(q.subject, format!("trawl.{hop}"));
            assert_eq!(q.consumer, hop.consumer().name());
            assert_eq!(q.dead_letter_stream, format!("TRAWL_DLQ_{up}"));
        }
        let limits = |hop| QueueConfig::from_settings(&ClusterSettings::default(), hop);
        assert!(limits(Hop::Changed).max_deliver >= 1000);
        assert!(limits(Hop::Archives).max_deliver >= 1000);
        assert_eq!(
            limits(Hop::Docs).max_deliver,
            ClusterSettings::default().max_deliver
        );
        assert_eq!(limits(Hop::Docs).max_messages, 1_000_000);
    }
}
