//! Bytes per queued URL of the Redis frontier: queues N jobs over H hosts through
//! `State::admit_many` (the frontier's own call) and reads `used_memory` before and
//! after; then claims one job, to be sure the jobs queued are the ones measured.
//!
//!     cargo run --release -p trawl-cluster --example queue_bytes -- [N] [HOSTS] [REDIS_URL]

use trawl_cluster::redis_state::RedisState;
use trawl_core::state::State;
use trawl_core::{FetchJob, MESSAGE_VERSION, UrlKind};

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
    let arg = |i: usize| std::env::args().nth(i);
    let n: u64 = arg(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let hosts: u64 = arg(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let url = arg(3).unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let state = RedisState::connect(&url, "queue-bench", n as usize + 1, 1, 60_000)
        .await
        .unwrap();
    state.clear().await.unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let before = used_memory(&mut conn).await;
    let t = std::time::Instant::now();
    let mut i = 0;
    while i < n {
        // URLs of the synthetic web's shape: a loopback host per address, a page number.
        let jobs: Vec<_> = (i..(i + 10_000).min(n))
            .map(|j| {
                let host = format!("127.1.0.{}:18400", 1 + j % hosts);
                FetchJob {
                    v: MESSAGE_VERSION,
                    crawl: "queue-bench".into(),
                    url: format!("http://{host}/p/{}", j / hosts),
                    host,
                    depth: 3 + (j % 5) as u32,
                    kind: UrlKind::Page,
                    priority: 3_000_000 + (j % 5) as i64 * 1_000_000,
                    retries: 0,
                    lastmod: None,
                    robots_wait_since_ms: None,
                    claim: None,
                }
            })
            .map(|j: FetchJob| (j.url.clone(), Some(j)))
            .collect();
        state.admit_many(jobs).await.unwrap();
        i += 10_000;
    }
    let secs = t.elapsed().as_secs_f64();
    let after = used_memory(&mut conn).await;
    assert_eq!(state.queued().await.unwrap() as u64, n);
    assert!(state.claim(u64::MAX / 2).await.unwrap().is_some());
    println!(
        "{n} URLs over {hosts} hosts: {:.1} bytes/queued URL ({} MB), {:.0} enqueues/s",
        (after - before) as f64 / n as f64,
        (after - before) / 1_000_000,
        n as f64 / secs
    );
    state.clear().await.unwrap();
}
