//! Bytes per URL of the Redis state, through the frontier's own call (`State::admit_many`,
//! one script call per 512 URLs), from `used_memory` before and after:
//!
//!     cargo run --release -p trawl-cluster --example state_bytes -- seen [N] [REDIS_URL]
//!     cargo run --release -p trawl-cluster --example state_bytes -- queue [N] [HOSTS] [REDIS_URL]
//!
//! `seen` marks N URLs seen (the seen-set alone); `queue` queues N jobs over HOSTS hosts
//! (URLs of the synthetic web's shape), then claims one, to be sure the jobs queued are
//! the ones measured.

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

/// Item `j` of the measurement: a seen-set key alone, or a key with its job.
fn item(queue: bool, j: u64, hosts: u64) -> (String, Option<FetchJob>) {
    if !queue {
        return (format!("https://example.org/docs/page/{j}?lang=en"), None);
    }
    let host = format!("127.1.0.{}:18400", 1 + j % hosts);
    let url = format!("http://{host}/p/{}", j / hosts);
    let job = FetchJob {
        v: MESSAGE_VERSION,
        crawl: "state-bytes".into(),
        url: url.clone(),
        host,
        depth: 3 + (j % 5) as u32,
        kind: UrlKind::Page,
        priority: 3_000_000 + (j % 5) as i64 * 1_000_000,
        ..FetchJob::default()
    };
    (url, Some(job))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let queue = args.first().is_some_and(|m| m == "queue");
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let hosts: u64 = if queue {
        args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20)
    } else {
        1
    };
    let url = args
        .get(if queue { 3 } else { 2 })
        .cloned()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let state = RedisState::connect(&url, "state-bytes", n as usize + 1, 1, 60_000)
        .await
        .unwrap();
    state.clear().await.unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let before = used_memory(&mut conn).await;
    let t = std::time::Instant::now();
    let mut i = 0;
    while i < n {
        let items = (i..(i + 10_000).min(n))
            .map(|j| item(queue, j, hosts))
            .collect();
        state.admit_many(items).await.unwrap();
        i += 10_000;
    }
    let secs = t.elapsed().as_secs_f64();
    let after = used_memory(&mut conn).await;
    if queue {
        assert_eq!(state.queued().await.unwrap() as u64, n);
        assert!(state.claim(u64::MAX / 2).await.unwrap().is_some());
    } else {
        assert!(state.seen_contains(&item(false, 7, 1).0).await.unwrap());
        assert!(
            !state
                .seen_contains("https://example.org/never")
                .await
                .unwrap()
        );
    }
    println!(
        "{} {n} URLs{}: {:.1} bytes/URL ({} MB), {:.0} URLs/s",
        if queue { "queued" } else { "seen" },
        if queue {
            format!(" over {hosts} hosts")
        } else {
            String::new()
        },
        (after - before) as f64 / n as f64,
        (after - before) / 1_000_000,
        n as f64 / secs
    );
    state.clear().await.unwrap();
}
