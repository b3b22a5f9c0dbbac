//! The one way the cluster connects to Redis: a reconnecting connection whose every call
//! has a deadline. A stage's state, gates and history use the [patient](connect_patient)
//! kind: a call that meets a restarting server (refused, broken pipe, `LOADING` while the
//! AOF is read back, no answer) waits and is sent again, for up to [`RETRY_FOR`], so a
//! Redis restart stalls the stage's calls instead of failing its loop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, ServerErrorKind, Value};

/// How long one Redis call may take. A request caught by a server restart can wait forever
/// on a connection the client has not yet seen break; failing it lets the caller's stage
/// restart with a fresh connection.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection that reconnects by itself; a request in flight when the server goes away
/// fails after [`CALL_TIMEOUT`] instead of waiting forever.
pub async fn connect(url: &str) -> redis::RedisResult<ConnectionManager> {
    let client = redis::Client::open(url)?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_response_timeout(Some(CALL_TIMEOUT))
        .set_connection_timeout(Some(CALL_TIMEOUT));
    tokio::time::timeout(
        CALL_TIMEOUT * 2,
        ConnectionManager::new_with_config(client, config),
    )
    .await
    .unwrap_or_else(|_| {
        Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "no connection to Redis within 10 s",
        )))
    })
}

/// How long a patient call keeps trying a server that is away before its error is the
/// caller's (whose stage then starts again with fresh connections).
pub const RETRY_FOR: Duration = Duration::from_secs(60);
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Whether an error says the server is away or not ready yet, rather than that the call
/// is wrong: worth sending again. A script's `NOSCRIPT` after a restart is handled by the
/// script itself (it loads the body and runs again).
pub fn is_transient(e: &RedisError) -> bool {
    match e.kind() {
        ErrorKind::Io => true,
        ErrorKind::Server(k) => matches!(
            k,
            ServerErrorKind::BusyLoading
                | ServerErrorKind::TryAgain
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::ReadOnly
        ),
        _ => false,
    }
}

/// A [`ConnectionManager`] whose calls each wait up to [`CALL_TIMEOUT`] and are sent again
/// on a [transient](is_transient) error for up to [`RETRY_FOR`].
///
/// A call that reached the server and lost only its answer runs twice: the scripts are
/// written for that (an admission finds its URLs seen, a claim nobody holds expires with
/// its lease, the gates know a page's id), and a counter may count one event twice.
#[derive(Clone)]
pub struct Conn {
    inner: ConnectionManager,
    retry_for: Duration,
}

impl Conn {
    pub fn new(inner: ConnectionManager) -> Self {
        Conn {
            inner,
            retry_for: RETRY_FOR,
        }
    }

    /// The same connection with another retry budget (tests, and callers that must
    /// answer soon).
    pub fn retrying_for(mut self, d: Duration) -> Self {
        self.retry_for = d;
        self
    }
}

/// Milliseconds since the process's first warning about an away Redis: the warning is
/// written at most every 5 s, however many calls wait.
static LAST_WARNED_MS: AtomicU64 = AtomicU64::new(0);

fn warn_retrying(e: &RedisError) {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let now = START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 5_001;
    let last = LAST_WARNED_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) > 5_000
        && LAST_WARNED_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!("Redis away ({e}): calls wait and are sent again");
    }
}

/// The tries of one patient call: after each failed one, whether to wait and send it
/// again.
struct Patience {
    started: Instant,
    retry_for: Duration,
    pause: Duration,
}

impl Patience {
    fn new(retry_for: Duration) -> Self {
        Patience {
            started: Instant::now(),
            retry_for,
            pause: RETRY_FIRST,
        }
    }

    /// The call's result when it is final; `None` after the pause before the next try.
    async fn settle<T>(
        &mut self,
        tried: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Option<redis::RedisResult<T>> {
        let e = match tried {
            Ok(Ok(v)) => return Some(Ok(v)),
            Ok(Err(e)) => e,
            Err(_) => RedisError::from((ErrorKind::Io, "no answer from Redis within 5 s")),
        };
        if !is_transient(&e) || self.started.elapsed() + self.pause > self.retry_for {
            return Some(Err(e));
        }
        warn_retrying(&e);
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(RETRY_MAX);
        None
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut patience = Patience::new(self.retry_for);
            loop {
                let tried =
                    tokio::time::timeout(CALL_TIMEOUT, self.inner.req_packed_command(cmd)).await;
                if let Some(r) = patience.settle(tried).await {
                    return r;
                }
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut patience = Patience::new(self.retry_for);
            loop {
                let call = self.inner.req_packed_commands(pipeline, offset, count);
                let tried = tokio::time::timeout(CALL_TIMEOUT, call).await;
                if let Some(r) = patience.settle(tried).await {
                    return r;
                }
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// A [patient](Conn) connection: [`connect`], then every call retried while the server is
/// away. The first connection is not waited for: a server that is not there at start-up
/// is the caller's error at once.
pub async fn connect_patient(url: &str) -> redis::RedisResult<Conn> {
    connect(url).await.map(Conn::new)
}

/// A deadline on any Redis future (scripts and pipelines included).
pub(crate) trait Within:
    std::future::Future<Output = redis::RedisResult<Self::T>> + Sized
{
    type T;
    async fn within(self) -> redis::RedisResult<Self::T> {
        match tokio::time::timeout(CALL_TIMEOUT, self).await {
            Ok(r) => r,
            Err(_) => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "no answer from Redis within 5 s",
            ))),
        }
    }
}

impl<F, T> Within for F
where
    F: std::future::Future<Output = redis::RedisResult<T>>,
{
    type T = T;
}

/// Every key that matches the glob `pattern` (SCAN, never KEYS), sorted, each once.
pub async fn keys_matching(
    conn: &mut impl ConnectionLike,
    pattern: &str,
) -> redis::RedisResult<Vec<String>> {
    let mut cursor: u64 = 0;
    let mut keys: Vec<String> = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .within()
            .await?;
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    // SCAN may return a key twice (when the table is resized during the walk).
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// Removes every key that starts with `prefix` (SCAN + UNLINK, never KEYS); returns how many.
pub async fn unlink_prefixed(
    conn: &mut (impl ConnectionLike + Send),
    prefix: &str,
) -> redis::RedisResult<u64> {
    let pattern = format!("{}*", prefix.replace('{', "\\{").replace('}', "\\}"));
    let mut cursor: u64 = 0;
    let mut removed = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .within()
            .await?;
        if !keys.is_empty() {
            removed += keys.len() as u64;
            redis::cmd("UNLINK")
                .arg(&keys)
                .query_async::<()>(conn)
                .within()
                .await?;
        }
        cursor = next;
        if cursor == 0 {
            return Ok(removed);
        }
    }
}
