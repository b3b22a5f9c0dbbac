//! The one way the cluster connects to Redis: a reconnecting connection whose every call
//! has a deadline.

use std::time::Duration;

use redis::aio::ConnectionManager;

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
    conn: &mut ConnectionManager,
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
    conn: &mut ConnectionManager,
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
