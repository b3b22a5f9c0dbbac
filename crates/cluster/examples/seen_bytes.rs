//! Bytes per URL of the Redis seen-set: adds N URLs through `State::admit_many` (the
//! frontier's own call, one script call per 512 URLs) and reads `used_memory` before and after.
//!
//!     cargo run --release -p trawl-cluster --example seen_bytes -- [N] [REDIS_URL]

use trawl_cluster::redis_state::RedisState;
use trawl_core::state::State;

async fn used_memory(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let url = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let state = RedisState::connect(&url, "seen-bench", 1, 1, 1)
        .await
        .unwrap();
    state.clear().await.unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let before = used_memory(&mut conn).await;
    let t = std::time::Instant::now();
    // Through the frontier's own call, in batches of 10,000.
    let batch = 10_000;
    let mut i = 0;
    while i < n {
        let keys = (i..(i + batch).min(n))
            .map(|j| (format!("https://example.org/docs/page/{j}?lang=en"), None))
            .collect();
        state.admit_many(keys).await.unwrap();
        i += batch;
    }
    let secs = t.elapsed().as_secs_f64();
    let after = used_memory(&mut conn).await;
    // A few through the real call, to be sure the layout is the one measured.
    assert!(
        !state
            .seen_add("https://example.org/docs/page/7?lang=en")
            .await
            .unwrap()
    );
    assert!(
        state
            .seen_add("https://example.org/never-seen")
            .await
            .unwrap()
    );
    println!(
        "{n} URLs: {:.2} bytes/URL ({} MB), {:.0} adds/s pipelined",
        (after - before) as f64 / n as f64,
        (after - before) / 1_000_000,
        n as f64 / secs
    );
    state.clear().await.unwrap();
}
